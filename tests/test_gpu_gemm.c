/* test_gpu_gemm.c - the GPU tier of the prebuilt GEMM: tl_op_gemm for every
 * input type x output type x layout x epilogue x bias at small aligned and
 * ragged sizes against a float64 reference computed on the host from the
 * same random inputs (tl_random_host is bit-identical to tl_random_fill);
 * element-aligned but not 16-byte-aligned operands; argument errors;
 * several schedules; and (not under TILEC_TEST_SMALL=1) 4096^3 against
 * cuBLAS. Outputs are poisoned before every run and the bytes around them
 * must stay poisoned. Every test skips, saying why, where there is no GPU. */
#include "fixture.h"

#include <math.h>
#include <stdbool.h>
#include <time.h>


#define PAD 32 /* poisoned elements after C (and before it, when offset) */

static uint64_t dalloc(size_t bytes)
{
    uint64_t p = 0;
    assert_status(tl_malloc(ctx, bytes ? bytes : 1, &p), TL_OK);
    return p;
}

static const char *epi_name(tl_epilogue e)
{
    static const char *names[] = {"none", "relu", "gelu_erf", "gelu_tanh"};
    return (unsigned)e < 4 ? names[e] : "?";
}

/* ------------------------------------------------------------------------ */
/* A problem: random operands on the device and as doubles on the host      */
/* ------------------------------------------------------------------------ */

typedef struct problem {
    int64_t m, n, k;
    tl_dtype in;
    int off;                     /* element offset of every operand      */
    uint64_t a_buf, b_buf, bias_buf;
    uint64_t a, b, bias;         /* at the offset                        */
    double *ha, *hb, *hbias;     /* A [m,k]; B's memory (k n); bias [n]   */
    double *prod[2];             /* A B in double, B as [K,N] / as [N,K]  */
} problem;

/* n + off random elements from seed on both sides; the operand starts at
 * element off. */
static uint64_t random_operand(tl_dtype dt, int64_t n, int off, uint64_t seed, uint64_t *buf, double **host)
{
    size_t sz = tl_dtype_size(dt);
    int64_t total = n + off;
    *buf = dalloc((size_t)total * sz);
    assert_status(tl_random_fill(ctx, *buf, dt, total, seed, -1, 1, NULL), TL_OK);
    void *raw = malloc((size_t)total * sz);
    *host = malloc((size_t)(n ? n : 1) * sizeof **host);
    assert_true(raw && *host);
    assert_status(tl_random_host(raw, dt, total, seed, -1, 1), TL_OK);
    for (int64_t i = 0; i < n; i++)
        (*host)[i] = test_elem(dt, raw, i + off);
    free(raw);
    return *buf + (uint64_t)off * sz;
}

static void problem_init(problem *p, int64_t m, int64_t n, int64_t k, tl_dtype in, int off, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->m = m, p->n = n, p->k = k, p->in = in, p->off = off;
    p->a = random_operand(in, m * k, off, seed, &p->a_buf, &p->ha);
    p->b = random_operand(in, k * n, off, seed + 1, &p->b_buf, &p->hb);
    p->bias = random_operand(in, n, off, seed + 2, &p->bias_buf, &p->hbias);
}

static void problem_free(problem *p)
{
    tl_free(ctx, p->a_buf), tl_free(ctx, p->b_buf), tl_free(ctx, p->bias_buf);
    free(p->ha), free(p->hb), free(p->hbias), free(p->prod[0]), free(p->prod[1]);
}

/* A B in double, computed on first use for each layout of B. */
static const double *product(problem *p, int trans_b)
{
    if (p->prod[trans_b])
        return p->prod[trans_b];
    int64_t m = p->m, n = p->n, k = p->k;
    double *c = calloc((size_t)(m * n), sizeof *c);
    assert_non_null(c);
    for (int64_t i = 0; i < m; i++) {
        const double *arow = p->ha + i * k;
        double *crow = c + i * n;
        if (trans_b) { /* B [N, K]: dot products of rows */
            for (int64_t j = 0; j < n; j++) {
                const double *brow = p->hb + j * k;
                double s = 0;
                for (int64_t kk = 0; kk < k; kk++)
                    s += arow[kk] * brow[kk];
                crow[j] = s;
            }
        } else { /* B [K, N]: rows of B scaled and summed */
            for (int64_t kk = 0; kk < k; kk++) {
                const double *brow = p->hb + kk * n;
                double a = arow[kk];
                for (int64_t j = 0; j < n; j++)
                    crow[j] += a * brow[j];
            }
        }
    }
    p->prod[trans_b] = c;
    return c;
}

/* act(A B + bias) in double. */
static double *reference(problem *p, int trans_b, tl_epilogue epi, int has_bias)
{
    const double *prod = product(p, trans_b);
    int64_t mn = p->m * p->n;
    double *ref = malloc((size_t)mn * sizeof *ref);
    assert_non_null(ref);
    for (int64_t i = 0; i < mn; i++)
        ref[i] = test_act(epi, prod[i] + (has_bias ? p->hbias[i % p->n] : 0.0));
    return ref;
}

static double tolerance(tl_dtype in, tl_dtype out) { return in == TL_F16 && out == TL_F32 ? 2e-3 : 1e-2; }

/* Runs tl_op_gemm on p into a poisoned C and checks it against the
 * reference and the poison around it. */
static void check_gemm(problem *p, tl_dtype out, int trans_b, tl_epilogue epi, int has_bias,
                       const tl_gemm_schedule *sched)
{
    tl_gemm_desc d = {.m = p->m, .n = p->n, .k = p->k, .in_dtype = p->in, .out_dtype = out, .trans_b = trans_b,
                      .has_bias = has_bias, .epilogue = epi};
    if (sched)
        d.schedule = *sched;
    size_t sz = tl_dtype_size(out);
    int64_t mn = p->m * p->n, total = mn + p->off + PAD;
    uint64_t c_buf = dalloc((size_t)total * sz), c = c_buf + (uint64_t)p->off * sz;
    assert_status(tl_memset_u8(ctx, c_buf, 0xFF, (size_t)total * sz, NULL), TL_OK);
    char what[256];
    snprintf(what, sizeof what, "gemm %lldx%lldx%lld %s->%s %s %s%s off %d sched %dx%dx%d/%d/%d/%d",
             (long long)p->m, (long long)p->n, (long long)p->k, tl_dtype_name(p->in), tl_dtype_name(out),
             trans_b ? "NT" : "NN", epi_name(epi), has_bias ? "+bias" : "", p->off, d.schedule.block_m,
             d.schedule.block_n, d.schedule.block_k, d.schedule.stages, d.schedule.threads, d.schedule.swizzle);
    tl_status st = tl_op_gemm(ctx, &d, p->a, p->b, has_bias ? p->bias : 0, c, NULL);
    if (st == TL_OK)
        st = tl_synchronize(ctx);
    if (st != TL_OK)
        fail_msg("%s: %s: %s", what, tl_status_name(st), tl_ctx_error(ctx));
    unsigned char *host = malloc((size_t)total * sz);
    assert_non_null(host);
    assert_status(tl_memcpy_dtoh(ctx, host, c_buf, (size_t)total * sz), TL_OK);
    for (size_t i = 0; i < (size_t)p->off * sz; i++)
        if (host[i] != 0xFF)
            fail_msg("%s: byte %zu before C was written", what, i);
    for (size_t i = (size_t)(p->off + mn) * sz; i < (size_t)total * sz; i++)
        if (host[i] != 0xFF)
            fail_msg("%s: byte %zu after C was written", what, i - (size_t)(p->off + mn) * sz);
    double *ref = reference(p, trans_b, epi, has_bias);
    tl_span o = {.dtype = out, .n = mn, .host = host + (size_t)p->off * sz};
    tl_span r = {.dtype = TL_F64, .n = mn, .host = ref};
    tl_check_result res;
    assert_status(tl_check(ctx, &o, &r, tolerance(p->in, out), &res), TL_OK);
    if (!res.pass)
        fail_msg("%s: rel err %.3e (tol %.0e), max abs %.3e, %lld non-finite, first bad %lld: got %g want %g", what,
                 res.rel_err, tolerance(p->in, out), res.max_abs_err, (long long)res.nonfinite,
                 (long long)res.first_bad, res.first_bad >= 0 ? test_elem(out, o.host, res.first_bad) : 0.0,
                 res.first_bad >= 0 ? ref[res.first_bad] : 0.0);
    free(ref);
    free(host);
    tl_free(ctx, c_buf);
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */
/* ------------------------------------------------------------------------ */

static const tl_dtype in_types[] = {TL_BF16, TL_F16};
static const tl_dtype out_types[] = {TL_BF16, TL_F16, TL_F32};
static const tl_epilogue epis[] = {TL_EPI_NONE, TL_EPI_RELU, TL_EPI_GELU_ERF, TL_EPI_GELU_TANH};

/* Every combination at sizes from one element to several ragged blocks
 * (N = 255, 129 and K = 1, 40, 72 leave the rows unaligned: the
 * element-wise copy path). */
static void test_all_combinations(void **state)
{
    (void)state;
    NEED_GPU();
    const int64_t sizes[][3] = {{1, 1, 1}, {8, 8, 8}, {127, 255, 33}, {127, 255, 40}, {64, 64, 64}, {257, 129, 72}};
    uint64_t seed = 7000;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int i = 0; i < 2; i++, seed += 10) {
            problem p;
            problem_init(&p, sizes[s][0], sizes[s][1], sizes[s][2], in_types[i], 0, seed);
            for (int o = 0; o < 3; o++)
                for (int t = 0; t < 2; t++)
                    for (int e = 0; e < 4; e++)
                        for (int b = 0; b < 2; b++)
                            check_gemm(&p, out_types[o], t, epis[e], b, NULL);
            problem_free(&p);
        }
}

/* Operands aligned to their elements but not to 16 bytes. */
static void test_unaligned_operands(void **state)
{
    (void)state;
    NEED_GPU();
    for (int i = 0; i < 2; i++) {
        problem p;
        problem_init(&p, 127, 136, 40, in_types[i], 1, 7500 + 10 * (uint64_t)i);
        for (int t = 0; t < 2; t++) {
            check_gemm(&p, TL_F32, t, TL_EPI_GELU_ERF, 1, NULL);
            check_gemm(&p, in_types[i], t, TL_EPI_NONE, 0, NULL);
        }
        problem_free(&p);
    }
}

static void test_argument_errors(void **state)
{
    (void)state;
    NEED_GPU();
    problem p;
    problem_init(&p, 16, 16, 16, TL_BF16, 0, 7700);
    uint64_t c = dalloc(16 * 16 * 4);
    tl_gemm_desc d = {.m = 16, .n = 16, .k = 16, .in_dtype = TL_BF16, .out_dtype = TL_F32};
    tl_gemm_desc bad = d;
    bad.k = 0;
    assert_status(tl_op_gemm(ctx, &bad, p.a, p.b, 0, c, NULL), TL_ERR_INVALID_ARG);
    bad = d;
    bad.m = 0;
    assert_status(tl_op_gemm(ctx, &bad, p.a, p.b, 0, c, NULL), TL_ERR_INVALID_ARG);
    bad = d;
    bad.in_dtype = TL_F32;
    assert_status(tl_op_gemm(ctx, &bad, p.a, p.b, 0, c, NULL), TL_ERR_DTYPE);
    bad = d;
    bad.out_dtype = TL_I32;
    assert_status(tl_op_gemm(ctx, &bad, p.a, p.b, 0, c, NULL), TL_ERR_DTYPE);
    bad = d;
    bad.epilogue = (tl_epilogue)9;
    assert_status(tl_op_gemm(ctx, &bad, p.a, p.b, 0, c, NULL), TL_ERR_INVALID_ARG);
    assert_status(tl_op_gemm(ctx, NULL, p.a, p.b, 0, c, NULL), TL_ERR_INVALID_ARG);
    /* pointers: null, or not on an element boundary */
    assert_status(tl_op_gemm(ctx, &d, 0, p.b, 0, c, NULL), TL_ERR_INVALID_ARG);
    assert_status(tl_op_gemm(ctx, &d, p.a + 1, p.b, 0, c, NULL), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "a = 0x"));
    assert_status(tl_op_gemm(ctx, &d, p.a, p.b, 0, c + 2, NULL), TL_ERR_INVALID_ARG);
    bad = d;
    bad.has_bias = 1;
    assert_status(tl_op_gemm(ctx, &bad, p.a, p.b, 0, c, NULL), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "bias"));
    /* the baseline's own refusals */
    bad = d;
    bad.epilogue = TL_EPI_GELU_ERF;
    assert_status(tl_baseline_gemm(ctx, &bad, p.a, p.b, 0, c, NULL), TL_ERR_UNSUPPORTED);
    tl_free(ctx, c);
    problem_free(&p);
}

static const tl_gemm_schedule scheds[] = {
    {64, 64, 32, 2, 128, 0, 0, 0},
    {128, 128, 32, 3, 256, 0, 0, 0},
    {128, 256, 64, 4, 256, 8, 0, 0},
    {128, 128, 64, 6, 128, 8, 0, 1}, /* ping-pong */
    {64, 256, 64, 5, 128, 0, 0, 1},
};

/* A few schedules: small and large tiles, 2 to 6 stages, 128 and 256
 * threads, swizzle on and off, the ping-pong kernel (tl_use_pingpong). */
static void test_schedules(void **state)
{
    (void)state;
    NEED_GPU();
    /* 200x264x136 is ragged but TMA-aligned for both layouts (the
     * ping-pong schedules need TMA; 257x129x72 takes them only with B as
     * [N, K] and falls back to the default schedule otherwise) */
    const int64_t sizes[][3] = {{257, 129, 72}, {200, 264, 136}, {1024, 1024, 1024}};
    int nsizes = small ? 2 : 3;
    for (int s = 0; s < nsizes; s++) {
        problem p;
        problem_init(&p, sizes[s][0], sizes[s][1], sizes[s][2], TL_BF16, 0, 7800 + 10 * (uint64_t)s);
        for (size_t c = 0; c < sizeof scheds / sizeof scheds[0]; c++)
            for (int t = 0; t < 2; t++) {
                check_gemm(&p, TL_BF16, t, TL_EPI_NONE, 0, &scheds[c]);
                check_gemm(&p, TL_F32, t, TL_EPI_GELU_TANH, 1, &scheds[c]);
            }
        problem_free(&p);
    }
}

/* 4096^3, bf16 in and out, against cuBLAS with an f32 output: as is, and
 * with bias + erf GELU applied to cuBLAS's result on the host. */
static void test_large_against_cublas(void **state)
{
    (void)state;
    NEED_GPU();
    if (small) {
        printf("  skip: TILEC_TEST_SMALL=1\n");
        skip();
    }
    const int64_t m = 4096, n = 4096, k = 4096, mn = m * n;
    problem p;
    memset(&p, 0, sizeof p);
    p.m = m, p.n = n, p.k = k, p.in = TL_BF16;
    p.a = random_operand(TL_BF16, m * k, 0, 7900, &p.a_buf, &p.ha);
    p.b = random_operand(TL_BF16, k * n, 0, 7901, &p.b_buf, &p.hb);
    p.bias = random_operand(TL_BF16, n, 0, 7902, &p.bias_buf, &p.hbias);
    uint64_t ref = dalloc((size_t)mn * 4), c = dalloc((size_t)mn * 2);
    float *href = malloc((size_t)mn * sizeof *href);
    double *want = malloc((size_t)mn * sizeof *want);
    assert_true(href && want);
    bool no_cublas = false;
    for (int t = 0; t < 2 && !no_cublas; t++) {
        tl_gemm_desc base = {.m = m, .n = n, .k = k, .in_dtype = TL_BF16, .out_dtype = TL_F32, .trans_b = t};
        tl_status st = tl_baseline_gemm(ctx, &base, p.a, p.b, 0, ref, NULL);
        if (st == TL_ERR_NO_CUBLAS) {
            printf("  skip: %s\n", tl_ctx_error(ctx));
            no_cublas = true;
            break;
        }
        if (st == TL_OK)
            st = tl_synchronize(ctx);
        if (st != TL_OK)
            fail_msg("cuBLAS: %s: %s", tl_status_name(st), tl_ctx_error(ctx));
        assert_status(tl_memcpy_dtoh(ctx, href, ref, (size_t)mn * 4), TL_OK);
        for (int64_t i = 0; i < mn; i++)
            want[i] = test_act(TL_EPI_GELU_ERF, (double)href[i] + p.hbias[i % n]);
        for (int v = 0; v < 2; v++) {
            tl_gemm_desc d = {.m = m, .n = n, .k = k, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = t,
                              .has_bias = v, .epilogue = v ? TL_EPI_GELU_ERF : TL_EPI_NONE};
            assert_status(tl_memset_u8(ctx, c, 0xFF, (size_t)mn * 2, NULL), TL_OK);
            st = tl_op_gemm(ctx, &d, p.a, p.b, p.bias, c, NULL);
            if (st == TL_OK)
                st = tl_synchronize(ctx);
            if (st != TL_OK)
                fail_msg("4096^3 %s: %s: %s", t ? "NT" : "NN", tl_status_name(st), tl_ctx_error(ctx));
            tl_span o = {.dtype = TL_BF16, .n = mn, .dptr = c};
            tl_span r = v ? (tl_span){.dtype = TL_F64, .n = mn, .host = want}
                          : (tl_span){.dtype = TL_F32, .n = mn, .dptr = ref};
            tl_check_result res;
            assert_status(tl_check(ctx, &o, &r, 1e-2, &res), TL_OK);
            printf("  4096^3 %s %s: rel err %.2e vs cuBLAS\n", t ? "NT" : "NN", v ? "bias+gelu_erf" : "plain",
                   res.rel_err);
            if (!res.pass)
                fail_msg("4096^3 %s %s: rel err %.3e, %lld non-finite, first bad %lld", t ? "NT" : "NN",
                         v ? "bias+gelu_erf" : "plain", res.rel_err, (long long)res.nonfinite,
                         (long long)res.first_bad);
        }
    }
    free(href), free(want);
    tl_free(ctx, ref), tl_free(ctx, c);
    problem_free(&p);
    if (no_cublas)
        skip();
}

/* ------------------------------------------------------------------------ */
/* Every program the tests will run, compiled up front in one parallel batch */
/* ------------------------------------------------------------------------ */

#define MAX_PRECOMPILE 512

typedef struct precompile {
    tl_gemm_desc d[MAX_PRECOMPILE];
    int n;
} precompile;

/* Adds d with the schedule tl_op_gemm will compile for it, once per
 * distinct kernel (the sizes matter only through that schedule). */
static void plan_add(precompile *pc, tl_gemm_desc d)
{
    d.schedule = tl_op_gemm_schedule(ctx, &d);
    if (d.schedule.block_m == 0)
        return;
    for (int i = 0; i < pc->n; i++) {
        const tl_gemm_desc *e = &pc->d[i];
        if (e->in_dtype == d.in_dtype && e->out_dtype == d.out_dtype && e->trans_b == d.trans_b &&
            e->has_bias == d.has_bias && e->epilogue == d.epilogue && !memcmp(&e->schedule, &d.schedule, sizeof d.schedule))
            return;
    }
    if (pc->n < MAX_PRECOMPILE)
        pc->d[pc->n++] = d;
}

/* The descriptors of the tests below; a program missed here is compiled
 * on first use as before, only slower. */
static void plan_tests(precompile *pc)
{
    const int64_t sizes[][3] = {{1, 1, 1}, {127, 255, 33}, {64, 64, 64}, {200, 264, 136}, {1024, 1024, 1024},
                                {4096, 4096, 4096}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int i = 0; i < 2; i++)
            for (int o = 0; o < 3; o++)
                for (int t = 0; t < 2; t++)
                    for (int e = 0; e < 4; e++)
                        for (int b = 0; b < 2; b++) {
                            tl_gemm_desc d = {.m = sizes[s][0], .n = sizes[s][1], .k = sizes[s][2],
                                              .in_dtype = in_types[i], .out_dtype = out_types[o], .trans_b = t,
                                              .has_bias = b, .epilogue = epis[e]};
                            plan_add(pc, d);
                            /* unaligned operands take the schedule for any shape */
                            d.schedule = tl_op_gemm_schedule(ctx, &(tl_gemm_desc){.m = 8192, .n = 8192, .k = 8192,
                                                                                .in_dtype = d.in_dtype,
                                                                                .out_dtype = d.out_dtype});
                            if (d.schedule.pingpong == 0)
                                plan_add(pc, d);
                        }
    for (size_t c = 0; c < sizeof scheds / sizeof scheds[0]; c++)
        for (int t = 0; t < 2; t++) {
            tl_gemm_desc d = {.m = 64, .n = 64, .k = 64, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = t,
                              .schedule = scheds[c]};
            plan_add(pc, d);
            d.out_dtype = TL_F32;
            d.has_bias = 1;
            d.epilogue = TL_EPI_GELU_TANH;
            plan_add(pc, d);
        }
}

static int gemm_setup(void **state)
{
    gpu_setup(state);
    if (!ctx)
        return 0;
    static precompile pc;
    plan_tests(&pc);
    static tl_compile_job jobs[MAX_PRECOMPILE];
    int n = 0;
    for (int i = 0; i < pc.n; i++)
        if (tl_op_gemm_build(ctx, &pc.d[i], &jobs[n].kernel) == TL_OK)
            n++;
    double t0 = (double)clock() / CLOCKS_PER_SEC;
    tl_status st = tl_compile_many(ctx, jobs, n, NULL, 0);
    int failed = 0;
    for (int i = 0; i < n; i++) {
        failed += jobs[i].status != TL_OK;
        tl_program_destroy(jobs[i].program); /* the cubins stay in the context's cache */
        tl_kernel_destroy(jobs[i].kernel);
    }
    printf("precompiled %d GEMM programs (%d failed: %s), %.1f s of CPU\n", n, failed,
           st == TL_OK ? "-" : tl_ctx_error(ctx), (double)clock() / CLOCKS_PER_SEC - t0);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_argument_errors),
        cmocka_unit_test(test_all_combinations),
        cmocka_unit_test(test_unaligned_operands),
        cmocka_unit_test(test_schedules),
        cmocka_unit_test(test_large_against_cublas),
    };
    return cmocka_run_group_tests_name("gpu_gemm", tests, gemm_setup, ctx_teardown);
}
