/* test_gemv.c - decode's matrix-vector kernel (tl_gemm_schedule.gemv,
 * src/ops/gemv.c) without a GPU: the op's kernels run in the interpreter
 * against a float64 loop (M from 1 to the block's rows, ragged N and K,
 * several rows of B a block, K in several chunks or one, bias + GELU, f32
 * and 16-bit C); the op's choice (the kernel for M = 1 with B as [N, K],
 * the tensor cores otherwise); the schedule's refusals with their
 * messages; and the generated code through NVRTC for sm_80 and sm_90a. */
#include "fixture.h"

typedef struct gv_problem {
    tl_gemm_desc d;
    void *a, *b, *bias, *c;
} gv_problem;

static void gv_init(gv_problem *p, int64_t m, int64_t n, int64_t k, tl_dtype out, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->d = (tl_gemm_desc){.m = m, .n = n, .k = k, .in_dtype = TL_BF16, .out_dtype = out, .trans_b = 1};
    p->a = malloc((size_t)(m * k) * 2);
    p->b = malloc((size_t)(n * k) * 2);
    p->bias = malloc((size_t)n * 2);
    p->c = malloc((size_t)(m * n) * tl_dtype_size(out));
    assert_true(p->a && p->b && p->bias && p->c);
    assert_status(tl_random_host(p->a, TL_BF16, m * k, seed, -1, 1), TL_OK);
    assert_status(tl_random_host(p->b, TL_BF16, n * k, seed + 1, -1, 1), TL_OK);
    assert_status(tl_random_host(p->bias, TL_BF16, n, seed + 2, -1, 1), TL_OK);
    memset(p->c, 0xFF, (size_t)(m * n) * tl_dtype_size(out));
}

static void gv_free(gv_problem *p) { free(p->a), free(p->b), free(p->bias), free(p->c); }

/* Interprets the op's kernel for p (its plain arguments) against act(A B^T
 * + bias) in double. */
static void gv_check(gv_problem *p, const char *what)
{
    const tl_gemm_desc *d = &p->d;
    tl_kernel *k = NULL;
    if (tl_op_gemm_build(ctx, d, &k) != TL_OK)
        fail_msg("%s: tl_op_gemm_build: %s", what, tl_ctx_error(ctx));
    tl_arg args[8];
    int n = 0;
    args[n++] = tl_arg_int(d->m), args[n++] = tl_arg_int(d->n), args[n++] = tl_arg_int(d->k);
    args[n++] = tl_arg_hptr(p->a), args[n++] = tl_arg_hptr(p->b);
    if (d->has_bias)
        args[n++] = tl_arg_hptr(p->bias);
    args[n++] = tl_arg_hptr(p->c);
    tl_status st = tl_interpret(k, n, args);
    tl_kernel_destroy(k);
    if (st != TL_OK)
        fail_msg("%s: tl_interpret: %s: %s", what, tl_status_name(st), tl_ctx_error(ctx));
    int64_t mn = d->m * d->n;
    double *want = malloc(sizeof(double) * (size_t)mn);
    assert_non_null(want);
    for (int64_t i = 0; i < d->m; i++)
        for (int64_t j = 0; j < d->n; j++) {
            double acc = 0;
            for (int64_t kk = 0; kk < d->k; kk++)
                acc += test_elem(TL_BF16, p->a, i * d->k + kk) * test_elem(TL_BF16, p->b, j * d->k + kk);
            if (d->has_bias)
                acc += test_elem(TL_BF16, p->bias, j);
            want[i * d->n + j] = test_act(d->epilogue, acc);
        }
    test_check_f64(NULL, what, d->out_dtype, p->c, want, mn, d->out_dtype == TL_F32 ? 1e-5 : 1e-2);
    free(want);
}

/* Ragged sizes: K past one chunk and not a whole vector (K = 1030 with
 * chunks of 512: the last chunk's vectors cross K), K under one chunk,
 * rows of B a block that do not divide N, M below block_m (A's missing
 * rows read as 0, C's dropped). */
static void test_interp_numerics(void **state)
{
    (void)state;
    const struct {
        int64_t m, n, k;
        tl_gemm_schedule s;
    } cases[] = {
        {1, 37, 1030, {.block_n = 1, .block_k = 512, .threads = 64, .gemv = 1}},
        {1, 37, 1030, {0}}, /* the op's choice */
        {3, 21, 200, {.block_m = 4, .block_n = 4, .block_k = 256, .threads = 128, .gemv = 1}},
        {8, 9, 96, {.block_n = 2, .block_k = 64, .threads = 32, .gemv = 1}},
        {2, 5, 7, {.block_n = 1, .block_k = 32, .threads = 32, .gemv = 1}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int v = 0; v < 2; v++) {
            gv_problem p;
            gv_init(&p, cases[i].m, cases[i].n, cases[i].k, v ? TL_F32 : TL_BF16, 900 + 10 * i);
            p.d.schedule = cases[i].s;
            if (v)
                p.d.has_bias = 1, p.d.epilogue = TL_EPI_GELU_TANH;
            char what[96];
            snprintf(what, sizeof what, "gemv %lldx%lldx%lld case %zu %s", (long long)p.d.m, (long long)p.d.n,
                     (long long)p.d.k, i, v ? "f32 + bias + gelu" : "bf16");
            gv_check(&p, what);
            gv_free(&p);
        }
}

/* M = 1 with B as [N, K] and 16-bit inputs takes the kernel; M = 2, B as
 * [K, N] and 8-bit inputs keep the tensor cores' tiles. */
static void test_op_choice(void **state)
{
    (void)state;
    tl_gemm_desc d = {.m = 1, .n = 4096, .k = 4096, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = 1};
    tl_gemm_schedule s = tl_op_gemm_schedule(ctx, &d);
    assert_int_equal(s.gemv, 1);
    assert_true(s.block_m == 1 && s.block_n >= 1 && s.block_k >= 32 && s.threads >= 32);
    d.m = 2;
    assert_int_equal(tl_op_gemm_schedule(ctx, &d).gemv, 0);
    d.m = 1, d.trans_b = 0;
    assert_int_equal(tl_op_gemm_schedule(ctx, &d).gemv, 0);
    d.trans_b = 1, d.in_dtype = TL_F8E4M3;
    assert_int_equal(tl_op_gemm_schedule(ctx, &d).gemv, 0);
}

static void refused(tl_gemm_desc d, const char *needle)
{
    tl_kernel *k = NULL;
    assert_status(tl_op_gemm_build(ctx, &d, &k), TL_ERR_INVALID_ARG);
    assert_null(k);
    if (!strstr(tl_ctx_error(ctx), needle))
        fail_msg("message '%s' lacks '%s'", tl_ctx_error(ctx), needle);
}

static void test_refusals(void **state)
{
    (void)state;
    tl_gemm_desc d = {.m = 1, .n = 64, .k = 64, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = 1,
                      .schedule = {.gemv = 1}};
    tl_gemm_desc x = d;
    x.trans_b = 0;
    refused(x, "needs B as [N, K]");
    x = d, x.in_dtype = TL_F8E4M3, x.schedule.block_k = 128;
    refused(x, "16-bit inputs");
    x = d, x.m = 9;
    refused(x, "M <= block_m <= 8");
    x = d, x.m = 3, x.schedule.block_m = 2;
    refused(x, "M <= block_m <= 8");
    x = d, x.schedule.block_k = 1000;
    refused(x, "power of two");
    x = d, x.schedule.block_k = 8192, x.schedule.threads = 32;
    refused(x, "at most 128 sums");
    x = d, x.schedule.persistent = 1;
    refused(x, "excludes");
    x = d, x.schedule.gemv = 2;
    refused(x, "0 or 1");
}

/* The kernel through NVRTC for both targets (the CUDA cores' code: no
 * target-specific instruction), at the op's choice and a wide block. */
static void test_cubins(void **state)
{
    (void)state;
    const char *targets[] = {"sm_80", "sm_90a"};
    const tl_gemm_schedule scheds[] = {{0}, {.block_m = 8, .block_n = 4, .block_k = 1024, .threads = 256, .gemv = 1}};
    for (int t = 0; t < 2; t++)
        for (int s = 0; s < 2; s++) {
            tl_gemm_desc d = {.m = 1, .n = 64, .k = 64, .in_dtype = TL_F16, .out_dtype = TL_F32, .trans_b = 1,
                              .has_bias = 1, .epilogue = TL_EPI_RELU, .schedule = scheds[s]};
            tl_kernel *k = NULL;
            assert_status(tl_op_gemm_build(ctx, &d, &k), TL_OK);
            char *ptx = NULL;
            if (tl_kernel_ptx(k, targets[t], &ptx) != TL_OK)
                fail_msg("gemv for %s: %s", targets[t], tl_ctx_error(ctx));
            assert_non_null(strstr(ptx, "gemv_f16_f32_m"));
            tl_free_host(ptx);
            tl_kernel_destroy(k);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interp_numerics),
        cmocka_unit_test(test_op_choice),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_cubins),
    };
    return cmocka_run_group_tests_name("gemv", tests, offline_setup, ctx_teardown);
}
