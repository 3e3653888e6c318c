/* test_gpu_tune.c - the GPU tier of the autotuner: tuning the GEMM picks a
 * configuration that is correct, refuses one that needs too much shared
 * memory, records the best, and tl_op_gemm runs it on the next call and in
 * a new process (this program again, with --child); a custom kernel's
 * candidates checked against the interpreter, a wrong one caught; a budget
 * too small to measure anything is no error; the softmax, RMSNorm and the
 * attention tuned, recorded and run. Skips without a GPU. */
#include "fixture.h"

#include "attn_ref.h"

#include <ftw.h>
#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

static char cache_dir[64];
static const tl_gemm_desc tuned_desc = {.m = 512, .n = 384, .k = 256, .in_dtype = TL_BF16, .out_dtype = TL_BF16,
                                        .trans_b = 1};

/* ------------------------------------------------------------------------ */
/* The GEMM                                                                  */
/* ------------------------------------------------------------------------ */

/* Runs tl_op_gemm on d with random inputs and compares with a float64
 * product on the host. */
static int gemm_is_correct(tl_ctx *c, const tl_gemm_desc *d)
{
    int64_t m = d->m, n = d->n, k = d->k;
    uint64_t a, b, out;
    if (tl_malloc(c, (size_t)(m * k) * 2, &a) || tl_malloc(c, (size_t)(n * k) * 2, &b) ||
        tl_malloc(c, (size_t)(m * n) * 2, &out))
        return 0;
    uint16_t *ha = malloc((size_t)(m * k) * 2), *hb = malloc((size_t)(n * k) * 2);
    double *ref = malloc((size_t)(m * n) * sizeof *ref);
    tl_random_fill(c, a, TL_BF16, m * k, 11, -1, 1, NULL);
    tl_random_fill(c, b, TL_BF16, n * k, 12, -1, 1, NULL);
    tl_random_host(ha, TL_BF16, m * k, 11, -1, 1);
    tl_random_host(hb, TL_BF16, n * k, 12, -1, 1);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t x = 0; x < k; x++)
                s += (double)tl_bf16_to_f32(ha[i * k + x]) * tl_bf16_to_f32(hb[j * k + x]);
            ref[i * n + j] = s;
        }
    tl_memset_u8(c, out, 0xFF, (size_t)(m * n) * 2, NULL);
    tl_status st = tl_op_gemm(c, d, a, b, 0, out, NULL);
    if (st == TL_OK)
        st = tl_synchronize(c);
    tl_check_result res = {0};
    tl_span o = {.dtype = TL_BF16, .n = m * n, .dptr = out}, r = {.dtype = TL_F64, .n = m * n, .host = ref};
    if (st == TL_OK)
        st = tl_check(c, &o, &r, 1e-2, &res);
    if (st != TL_OK)
        fprintf(stderr, "tl_op_gemm: %s: %s\n", tl_status_name(st), tl_ctx_error(c));
    free(ha), free(hb), free(ref);
    tl_free(c, a), tl_free(c, b), tl_free(c, out);
    return st == TL_OK && res.pass;
}

static void schedule_text(const tl_gemm_schedule *s, char *buf, size_t len)
{
    tl_tune_config c = tl_gemm_schedule_to_config(s);
    tl_tune_config_text("gemm", &c, buf, len);
}

/* The new process: the database names the schedule the parent recorded,
 * and the op runs it correctly. */
static int child(const char *want)
{
    tl_ctx *c;
    if (tl_ctx_create(NULL, &c, NULL, 0) != TL_OK)
        return 3;
    tl_gemm_schedule s = tl_op_gemm_schedule(c, &tuned_desc);
    char got[160];
    schedule_text(&s, got, sizeof got);
    int ok = strcmp(got, want) == 0;
    if (!ok)
        fprintf(stderr, "child: the op runs %s, the tuner recorded %s\n", got, want);
    ok = ok && gemm_is_correct(c, &tuned_desc);
    tl_ctx_destroy(c);
    return ok ? 0 : 1;
}

static int run_child(const char *want)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", "test_gpu_tune", "--child", want, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_tune_gemm_then_use(void **state)
{
    (void)state;
    NEED_GPU();
    const tl_gemm_schedule scheds[] = {
        {128, 128, 64, 4, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {64, 64, 32, 2, 128, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
        {256, 256, 64, 6, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0}, /* 384 KiB of shared memory: refused */
        {128, 128, 64, 4, 128, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0}, /* ping-pong */
        {64, 128, 32, 4, 128, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    };
    tl_tune_config cfg[5];
    for (int i = 0; i < 5; i++)
        cfg[i] = tl_gemm_schedule_to_config(&scheds[i]);
    tl_tune_request q = {.op = "gemm", .desc = &tuned_desc, .configs = cfg, .nconfigs = 5, .save = 1};
    tl_tune_result *r = NULL;
    assert_status(tl_autotune(ctx, &q, &r), TL_OK);
    for (int i = 0; i < r->n; i++)
        printf("  %-48s %-14s %8.4f ms %6.3fx %s\n", r->entries[i].text, tl_tune_outcome_name(r->entries[i].outcome),
               r->entries[i].ms, r->entries[i].ratio, r->entries[i].note);
    assert_int_equal(r->n, 5);
    assert_int_equal(r->passed, 4);
    assert_true(r->saved);
    const tl_tune_entry *refused = &r->entries[4];
    assert_int_equal(refused->index, 2);
    assert_int_equal(refused->outcome, TL_TUNE_REJECTED);
    assert_non_null(strstr(refused->note, "shared memory"));
    for (int i = 0; i < 4; i++)
        assert_true(r->entries[i].ms > 0 && r->entries[i].rel_err < 1e-2);
    if (r->baseline_ms > 0)
        assert_true(r->entries[0].ratio > 0);
    /* the next call runs the best, and so does a new process */
    tl_gemm_schedule best = tl_gemm_schedule_from_config(&r->entries[0].config);
    tl_gemm_schedule used = tl_op_gemm_schedule(ctx, &tuned_desc);
    assert_memory_equal(&used, &best, sizeof best);
    assert_true(gemm_is_correct(ctx, &tuned_desc));
    char want[160];
    schedule_text(&best, want, sizeof want);
    assert_int_equal(run_child(want), 0);
    tl_tune_result_destroy(r);
    tl_tune_record *recs;
    int n;
    assert_status(tl_tune_db_list(ctx, &recs, &n), TL_OK);
    assert_int_equal(n, 1);
    assert_string_equal(recs[0].config, want);
    tl_free_host(recs);
}

/* ------------------------------------------------------------------------ */
/* A custom kernel: the vector add, v = {elements per block, threads,        */
/* wrong}; the reference is the interpreter of the first candidate           */
/* ------------------------------------------------------------------------ */

static tl_status build_vadd(void *user, tl_ctx *c, const tl_tune_config *cfg, tl_kernel **out)
{
    (void)user;
    tl_kernel *k = tl_kernel_new(c, "tuned_vadd");
    tl_expr n = tl_dim(k, "N");
    tl_buf a = tl_param_tensor(k, "A", TL_F32, 1, &n, NULL);
    tl_buf b = tl_param_tensor(k, "B", TL_F32, 1, &n, NULL);
    tl_buf o = tl_param_tensor(k, "C", TL_F32, 1, &n, NULL);
    tl_grid(k, tl_ceildiv(k, n, tl_int(k, cfg->v[0])), TL_NONE_EXPR, TL_NONE_EXPR, cfg->v[1]);
    tl_expr i = tl_add(k, tl_mul(k, tl_block_idx(k, 0), tl_int(k, cfg->v[0])), tl_parallel1(k, cfg->v[0]));
    tl_expr x = tl_load(k, a, &i), y = tl_load(k, b, &i);
    tl_store(k, o, &i, cfg->v[2] ? tl_sub(k, x, y) : tl_add(k, x, y));
    tl_end(k);
    *out = k;
    return tl_kernel_status(k);
}

static void test_tune_custom_kernel(void **state)
{
    (void)state;
    NEED_GPU();
    const int64_t n = 100003;
    uint64_t a, b, c;
    assert_status(tl_malloc(ctx, n * 4, &a), TL_OK);
    assert_status(tl_malloc(ctx, n * 4, &b), TL_OK);
    assert_status(tl_malloc(ctx, n * 4, &c), TL_OK);
    assert_status(tl_random_fill(ctx, a, TL_F32, n, 21, -1, 1, NULL), TL_OK);
    assert_status(tl_random_fill(ctx, b, TL_F32, n, 22, -1, 1, NULL), TL_OK);
    const tl_tune_config cfg[] = {{{1024, 256, 0}}, {{512, 128, 0}}, {{4096, 512, 0}}, {{1024, 256, 1}},
                                  {{1024, 100, 0}}};
    tl_arg args[] = {tl_arg_int(n), tl_arg_dptr(a), tl_arg_dptr(b), tl_arg_dptr(c)};
    const char *const names[] = {"tile", "threads", "wrong", NULL};
    tl_tune_request q = {.build = build_vadd, .nargs = 4, .args = args, .configs = cfg, .nconfigs = 5,
                         .bytes = 12.0 * n, .param_names = names};
    tl_tune_result *r = NULL;
    assert_status(tl_autotune(ctx, &q, &r), TL_OK);
    assert_string_equal(r->op, "custom");
    assert_string_equal(r->unit, "GB/s");
    assert_int_equal(r->passed, 3);
    for (int i = 0; i < 3; i++)
        assert_true(r->entries[i].rate > 0 && r->entries[i].config.v[2] == 0);
    assert_int_equal(r->entries[3].outcome, TL_TUNE_WRONG);
    assert_int_equal(r->entries[4].outcome, TL_TUNE_REJECTED); /* 100 threads: not a warp multiple */
    assert_non_null(strstr(r->entries[0].text, "tile="));
    tl_tune_result_destroy(r);
    tl_free(ctx, a), tl_free(ctx, b), tl_free(ctx, c);
}

/* 8-bit inputs with a bias (of the output's type) and GELU: the tuner's
 * problem fills the bias in that type and widens it for its f32
 * reference; every candidate passes against it. */
static void test_tune_gemm_f8(void **state)
{
    (void)state;
    NEED_GPU();
    if (strcmp(tl_ctx_target(ctx), "sm_90a") != 0)
        skip();
    tl_gemm_desc d = {.m = 700, .n = 520, .k = 384, .in_dtype = TL_F8E4M3, .out_dtype = TL_BF16, .trans_b = 1,
                      .has_bias = 1, .epilogue = TL_EPI_GELU_TANH};
    const tl_gemm_schedule scheds[] = {
        {128, 128, 128, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0},
        {64, 128, 128, 6, 128, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0},
    };
    tl_tune_config cfg[2] = {tl_gemm_schedule_to_config(&scheds[0]), tl_gemm_schedule_to_config(&scheds[1])};
    tl_tune_request q = {.op = "gemm", .desc = &d, .configs = cfg, .nconfigs = 2};
    tl_tune_result *r = NULL;
    assert_status(tl_autotune(ctx, &q, &r), TL_OK);
    for (int i = 0; i < r->n; i++)
        printf("  %-48s %-14s %8.4f ms rel err %.1e %s\n", r->entries[i].text,
               tl_tune_outcome_name(r->entries[i].outcome), r->entries[i].ms, r->entries[i].rel_err,
               r->entries[i].note);
    assert_int_equal(r->n, 2);
    assert_int_equal(r->passed, 2);
    for (int i = 0; i < 2; i++)
        assert_true(r->entries[i].ms > 0 && r->entries[i].rel_err < 1e-2);
    tl_tune_result_destroy(r);
}

/* A budget spent before the first measurement: every candidate is
 * skipped, nothing is recorded, and that is no error. */
static void test_budget_spent(void **state)
{
    (void)state;
    NEED_GPU();
    tl_gemm_desc d = tuned_desc;
    d.trans_b = 0;
    tl_tune_request q = {.op = "gemm", .desc = &d, .budget_s = 1e-6, .save = 1};
    tl_tune_result *r = NULL;
    assert_status(tl_autotune(ctx, &q, &r), TL_OK);
    assert_int_equal(r->passed, 0);
    assert_false(r->saved);
    for (int i = 0; i < r->n; i++)
        assert_true(r->entries[i].outcome != TL_TUNE_PASSED);
    tl_tune_result_destroy(r);
}

/* ------------------------------------------------------------------------ */
/* The row softmax                                                           */
/* ------------------------------------------------------------------------ */

/* The tuned softmax is recorded, the op takes it, and its output matches
 * a float64 softmax of the same random rows. */
static void test_tune_softmax_then_use(void **state)
{
    (void)state;
    NEED_GPU();
    tl_softmax_desc d = {.rows = 2048, .cols = 1000, .in_dtype = TL_F16, .out_dtype = TL_F16};
    tl_tune_request q = {.op = "softmax", .desc = &d, .save = 1};
    tl_tune_result *r = NULL;
    assert_status(tl_autotune(ctx, &q, &r), TL_OK);
    for (int i = 0; i < r->n; i++)
        printf("  %-36s %-14s %8.4f ms %7.1f GB/s %s\n", r->entries[i].text,
               tl_tune_outcome_name(r->entries[i].outcome), r->entries[i].ms, r->entries[i].rate, r->entries[i].note);
    assert_true(r->passed > 0);
    assert_true(r->saved);
    assert_string_equal(r->unit, "GB/s");
    const int *v = r->entries[0].config.v;
    tl_softmax_schedule want = {.width = v[0], .rows = v[1], .threads = v[2], .stages = v[3],
                                .cluster = v[4] > 1 ? v[4] : 1, .loader = v[5]};
    tl_softmax_schedule got = tl_op_softmax_schedule(ctx, &d);
    assert_memory_equal(&got, &want, sizeof got);
    tl_tune_result_destroy(r);
    int64_t n = d.rows * d.cols;
    uint64_t x, y;
    assert_status(tl_malloc(ctx, (size_t)n * 2, &x), TL_OK);
    assert_status(tl_malloc(ctx, (size_t)n * 2, &y), TL_OK);
    assert_status(tl_random_fill(ctx, x, TL_F16, n, 77, -4, 4, NULL), TL_OK);
    assert_status(tl_memset_u8(ctx, y, 0xFF, (size_t)n * 2, NULL), TL_OK);
    assert_status(tl_op_softmax(ctx, &d, x, y, NULL), TL_OK);
    assert_status(tl_synchronize(ctx), TL_OK);
    uint16_t *hx = malloc((size_t)n * 2);
    double *ref = malloc((size_t)n * sizeof *ref);
    assert_true(hx && ref);
    assert_status(tl_random_host(hx, TL_F16, n, 77, -4, 4), TL_OK);
    for (int64_t i = 0; i < d.rows; i++) {
        double m = -INFINITY, sum = 0, *row = ref + i * d.cols;
        for (int64_t j = 0; j < d.cols; j++)
            m = fmax(m, row[j] = tl_f16_to_f32(hx[i * d.cols + j]));
        for (int64_t j = 0; j < d.cols; j++) {
            row[j] = exp(row[j] - m);
            sum += row[j];
        }
        for (int64_t j = 0; j < d.cols; j++)
            row[j] /= sum;
    }
    tl_span o = {.dtype = TL_F16, .n = n, .dptr = y}, rs = {.dtype = TL_F64, .n = n, .host = ref};
    tl_check_result res;
    assert_status(tl_check(ctx, &o, &rs, 1e-2, &res), TL_OK);
    assert_true(res.pass);
    free(hx), free(ref);
    tl_free(ctx, x), tl_free(ctx, y);
}

/* RMSNorm tunes the same way, with a record of its own. */
static void test_tune_rmsnorm_then_use(void **state)
{
    (void)state;
    NEED_GPU();
    tl_rmsnorm_desc d = {.rows = 1024, .cols = 4096, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .eps = 1e-6};
    tl_tune_request q = {.op = "rmsnorm", .desc = &d, .save = 1};
    tl_tune_result *r = NULL;
    assert_status(tl_autotune(ctx, &q, &r), TL_OK);
    for (int i = 0; i < r->n; i++)
        printf("  %-44s %-14s %8.4f ms %7.1f GB/s %s\n", r->entries[i].text,
               tl_tune_outcome_name(r->entries[i].outcome), r->entries[i].ms, r->entries[i].rate, r->entries[i].note);
    assert_true(r->passed > 0);
    assert_true(r->saved);
    const int *v = r->entries[0].config.v;
    tl_softmax_schedule got = tl_op_rmsnorm_schedule(ctx, &d);
    assert_int_equal(got.width, v[0]);
    assert_int_equal(got.rows, v[1]);
    assert_int_equal(got.threads, v[2]);
    tl_tune_result_destroy(r);
    int64_t n = d.rows * d.cols;
    uint64_t x, w, y;
    assert_status(tl_malloc(ctx, (size_t)n * 2, &x), TL_OK);
    assert_status(tl_malloc(ctx, (size_t)d.cols * 2, &w), TL_OK);
    assert_status(tl_malloc(ctx, (size_t)n * 2, &y), TL_OK);
    assert_status(tl_random_fill(ctx, x, TL_BF16, n, 81, -4, 4, NULL), TL_OK);
    assert_status(tl_random_fill(ctx, w, TL_BF16, d.cols, 82, -1, 1, NULL), TL_OK);
    assert_status(tl_memset_u8(ctx, y, 0xFF, (size_t)n * 2, NULL), TL_OK);
    assert_status(tl_op_rmsnorm(ctx, &d, x, w, y, NULL), TL_OK);
    assert_status(tl_synchronize(ctx), TL_OK);
    uint16_t *hx = malloc((size_t)n * 2), *hw = malloc((size_t)d.cols * 2);
    double *ref = malloc((size_t)n * sizeof *ref);
    assert_true(hx && hw && ref);
    tl_random_host(hx, TL_BF16, n, 81, -4, 4);
    tl_random_host(hw, TL_BF16, d.cols, 82, -1, 1);
    for (int64_t i = 0; i < d.rows; i++) {
        double sq = 0;
        for (int64_t j = 0; j < d.cols; j++)
            sq += pow(tl_bf16_to_f32(hx[i * d.cols + j]), 2);
        double inv = 1 / sqrt(sq / (double)d.cols + d.eps);
        for (int64_t j = 0; j < d.cols; j++)
            ref[i * d.cols + j] = tl_bf16_to_f32(hx[i * d.cols + j]) * inv * tl_bf16_to_f32(hw[j]);
    }
    tl_span o = {.dtype = TL_BF16, .n = n, .dptr = y}, rs = {.dtype = TL_F64, .n = n, .host = ref};
    tl_check_result res;
    assert_status(tl_check(ctx, &o, &rs, 1e-2, &res), TL_OK);
    assert_true(res.pass);
    free(hx), free(hw), free(ref);
    tl_free(ctx, x), tl_free(ctx, w), tl_free(ctx, y);
}

/* ------------------------------------------------------------------------ */
/* FlashAttention                                                            */
/* ------------------------------------------------------------------------ */

/* The tuned attention (causal, ragged in its last query and key tiles, 700
 * queries against 650 keys so that the first 50 rows attend no key, with
 * its log-sum-exp) is recorded where it beat the untuned op, the op then
 * takes it, and its output and log-sum-exp match a float64 attention of the
 * same random tensors; decoding is refused. */
static void test_tune_flash_attn_then_use(void **state)
{
    (void)state;
    NEED_GPU();
    attn_case ac = {.b = 1, .h = 16, .hkv = 16, .sq = 700, .skv = 650, .d = 128, .causal = 1, .dt = TL_BF16};
    tl_flash_attn_desc d = attn_desc(&ac, 1);
    tl_tune_request q = {.op = "flash_attn", .desc = &d, .save = 1, .finalists = 3};
    tl_tune_result *r = NULL;
    assert_status(tl_autotune(ctx, &q, &r), TL_OK);
    for (int i = 0; i < r->n; i++)
        printf("  %-44s %-14s %8.4f ms %7.1f TFLOP/s %.2e %s\n", r->entries[i].text,
               tl_tune_outcome_name(r->entries[i].outcome), r->entries[i].ms, r->entries[i].rate,
               r->entries[i].rel_err, r->entries[i].note);
    assert_true(r->passed > 0);
    assert_string_equal(r->unit, "TFLOP/s");
    assert_string_equal(r->baseline, "untuned tl_op_flash_attn");
    assert_true(r->baseline_ms > 0);
    for (int i = 0; i < r->passed; i++)
        assert_true(r->entries[i].rel_err < 1e-2);
    /* recorded exactly when the best beat the untuned op; the op follows the record */
    assert_int_equal(r->saved, r->entries[0].ratio > 1);
    const int *v = r->entries[0].config.v;
    tl_flash_attn_schedule got = tl_op_flash_attn_schedule(ctx, &d);
    int want[7] = {got.block_m, got.block_n, got.stages, got.threads, got.warp_specialize, got.pingpong,
                   got.persistent};
    for (int i = 0; r->saved && i < 7; i++)
        assert_int_equal(v[i], want[i]);
    tl_tune_result_destroy(r);

    size_t nq = (size_t)attn_elems(&ac, ac.h, ac.sq), nkv = (size_t)attn_elems(&ac, ac.hkv, ac.skv);
    uint64_t dq, dk, dv, dout, dlse;
    assert_status(tl_malloc(ctx, nq * 2, &dq), TL_OK);
    assert_status(tl_malloc(ctx, nkv * 2, &dk), TL_OK);
    assert_status(tl_malloc(ctx, nkv * 2, &dv), TL_OK);
    assert_status(tl_malloc(ctx, nq * 2, &dout), TL_OK);
    assert_status(tl_malloc(ctx, (size_t)(ac.h * ac.sq) * 4, &dlse), TL_OK);
    assert_status(tl_random_fill(ctx, dq, TL_BF16, (int64_t)nq, 31, -1, 1, NULL), TL_OK);
    assert_status(tl_random_fill(ctx, dk, TL_BF16, (int64_t)nkv, 32, -1, 1, NULL), TL_OK);
    assert_status(tl_random_fill(ctx, dv, TL_BF16, (int64_t)nkv, 33, -1, 1, NULL), TL_OK);
    assert_status(tl_memset_u8(ctx, dout, 0xFF, nq * 2, NULL), TL_OK);
    assert_status(tl_op_flash_attn(ctx, &d, dq, dk, dv, dout, dlse, NULL), TL_OK);
    assert_status(tl_synchronize(ctx), TL_OK);
    uint16_t *hq = malloc(nq * 2), *hk = malloc(nkv * 2), *hv = malloc(nkv * 2), *ho = malloc(nq * 2);
    double *ref = malloc(nq * sizeof *ref), *lse = malloc((size_t)(ac.h * ac.sq) * sizeof *lse);
    assert_true(hq && hk && hv && ho && ref && lse);
    tl_random_host(hq, TL_BF16, (int64_t)nq, 31, -1, 1);
    tl_random_host(hk, TL_BF16, (int64_t)nkv, 32, -1, 1);
    tl_random_host(hv, TL_BF16, (int64_t)nkv, 33, -1, 1);
    attn_reference(&ac, hq, hk, hv, ref, lse);
    assert_status(tl_memcpy_dtoh(ctx, ho, dout, nq * 2), TL_OK);
    int64_t nonfinite;
    double err = attn_rel_err(&ac, ho, ref, &nonfinite);
    printf("  the op after tuning: relative error %.2e against float64\n", err);
    assert_int_equal(nonfinite, 0);
    assert_true(err < 1e-2);
    int64_t nl = ac.h * ac.sq, none = 0;
    float *hl = malloc((size_t)nl * sizeof *hl);
    assert_non_null(hl);
    assert_status(tl_memcpy_dtoh(ctx, hl, dlse, (size_t)nl * sizeof *hl), TL_OK);
    for (int64_t i = 0; i < nl; i++) { /* -inf exactly where a row attends no key, else close */
        if (isinf(lse[i])) {
            assert_true(isinf(hl[i]) && hl[i] < 0);
            none++;
        } else if (!(fabs(hl[i] - lse[i]) <= 1e-3 * fmax(1, fabs(lse[i])))) {
            fail_msg("lse[%lld] = %g, want %g", (long long)i, hl[i], lse[i]);
        }
    }
    assert_int_equal(none, ac.h * (ac.sq - ac.skv));
    free(hl);
    free(hq), free(hk), free(hv), free(ho), free(ref), free(lse);
    tl_free(ctx, dq), tl_free(ctx, dk), tl_free(ctx, dv), tl_free(ctx, dout), tl_free(ctx, dlse);

    tl_flash_attn_desc decode = {.batch = 1, .heads = 32, .kv_heads = 8, .seq_q = 1, .seq_kv = 4096,
                                 .head_dim = 128, .dtype = TL_BF16};
    q.desc = &decode;
    assert_status(tl_autotune(ctx, &q, &r), TL_ERR_UNSUPPORTED);
    assert_null(r);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* The database and cubins of this test go to a directory of its own. */
static int setup(void **state)
{
    snprintf(cache_dir, sizeof cache_dir, "/tmp/tilec-gpu-tune-XXXXXX");
    if (!mkdtemp(cache_dir))
        return -1;
    setenv("TILEC_CACHE_DIR", cache_dir, 1);
    return gpu_setup(state);
}

static int teardown(void **state)
{
    ctx_teardown(state);
    nftw(cache_dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0)
        return child(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tune_gemm_then_use),
        cmocka_unit_test(test_tune_custom_kernel),
        cmocka_unit_test(test_budget_spent),
        cmocka_unit_test(test_tune_gemm_f8),
        cmocka_unit_test(test_tune_softmax_then_use),
        cmocka_unit_test(test_tune_rmsnorm_then_use),
        cmocka_unit_test(test_tune_flash_attn_then_use),
    };
    return cmocka_run_group_tests_name("gpu_tune", tests, setup, teardown);
}
