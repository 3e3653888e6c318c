/* test_gemv.c - decode's matrix-vector kernel (tl_gemm_schedule.gemv,
 * src/ops/gemv.c) without a GPU: the op's kernels run in the interpreter
 * against a float64 loop (M from 1 to the block's rows, ragged N and K,
 * several rows of B a block, K in several chunks or one, bias + GELU, f32
 * and 16-bit C); the op's choice (the kernel for M = 1 with B as [N, K],
 * the tensor cores otherwise); the schedule's refusals with their
 * messages; the generated code through NVRTC for sm_80 and sm_90a; and
 * its shape (B evict-first, the sums exchanged once, after the loop). */
#include "fixture.h"
#include "gemm_host.h"

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
            host_gemm p;
            host_gemm_init(&p, cases[i].m, cases[i].n, cases[i].k, TL_BF16, v ? TL_F32 : TL_BF16, 900 + 10 * i);
            p.d.schedule = cases[i].s;
            if (v)
                p.d.has_bias = 1, p.d.epilogue = TL_EPI_GELU_TANH;
            char what[96];
            snprintf(what, sizeof what, "gemv %lldx%lldx%lld case %zu %s", (long long)p.d.m, (long long)p.d.n,
                     (long long)p.d.k, i, v ? "f32 + bias + gelu" : "bf16");
            host_gemm_check(ctx, &p, what);
            host_gemm_free(&p);
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
    /* N / 64 tiles at least the SMs (132 offline): the swapped tensor-core tiles, unsplit */
    d.in_dtype = TL_BF16, d.n = 14336;
    s = tl_op_gemm_schedule(ctx, &d);
    assert_int_equal(s.gemv, 0);
    assert_true(s.swap_ab == 1 && s.block_m == 64 && s.block_n == 16 && s.split_k <= 1);
    d.n = 64 * 131; /* one tile short of the SMs: still the GEMV */
    assert_int_equal(tl_op_gemm_schedule(ctx, &d).gemv, 1);
    d.n = 4096, d.k = 512; /* K too short for the decode rows: the GEMV at any N */
    assert_int_equal(tl_op_gemm_schedule(ctx, &d).gemv, 1);
    d.n = 14336;
    assert_int_equal(tl_op_gemm_schedule(ctx, &d).gemv, 1);
}

/* The swapped kernel's K step and stages: B as [K, N] split, 4 stages of
 * 64 once its CTAs are at least the SMs, else the row's 8; unsplit with a
 * CTA an SM, 4 stages of 128 either way; 64x32 tiles of B as [N, K] in two
 * slices, 4 stages of 128 where the CTAs fit one wave; split in 4, B as
 * [N, K] keeps the fitted stages of 64 */
static void test_swapped_stages(void **state)
{
    (void)state;
    tl_gemm_desc d = {.m = 16, .n = 4096, .k = 14336, .in_dtype = TL_BF16, .out_dtype = TL_BF16};
    tl_gemm_schedule s;
    for (int tb = 0; tb <= 1; tb++) { /* 64 tiles in 2 slices (one CTA an SM), not 4 (two) */
        d.trans_b = tb;
        s = tl_op_gemm_schedule(ctx, &d);
        assert_true(s.swap_ab == 1 && s.split_k == 2 && s.stages == 4 && s.block_k == 128);
    }
    d = (tl_gemm_desc){.m = 32, .n = 2048, .k = 8192, .in_dtype = TL_BF16, .out_dtype = TL_BF16};
    s = tl_op_gemm_schedule(ctx, &d); /* 32 tiles of 64x32 in 4 slices of 2048, summed through global memory */
    assert_true(s.swap_ab == 1 && s.block_n == 32 && s.split_k == 4 && s.stages == 4 && s.block_k == 128);
    for (int tb = 0; tb <= 1; tb++) {
        d = (tl_gemm_desc){.m = 8, .n = 14336, .k = 4096, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = tb};
        s = tl_op_gemm_schedule(ctx, &d); /* 224 tiles, no split */
        assert_true(s.swap_ab == 1 && s.split_k <= 1 && s.stages == 4 && s.block_k == 128);
        d.in_dtype = TL_F8E4M3, d.trans_b = 1; /* 8-bit: rows of 128 bytes as before */
        s = tl_op_gemm_schedule(ctx, &d);
        assert_true(s.swap_ab == 1 && s.block_k == 128 && s.stages == 8);
    }
    /* fewer CTAs than SMs: K steps of 128 at 4 stages, either layout; up to one CTA an SM in
     * slices of at least 1024 that a cluster sums (session 35) */
    const struct {
        int64_t m, n, k;
        int split;
    } few[] = {
        {1, 4096, 4096, 2},  /* 64 tiles in 2 slices: 128 CTAs on 132 SMs (4: 256) */
        {8, 4096, 4096, 2},  /* the same tiles */
        {1, 2048, 4096, 4},  /* 32 tiles in 4 slices of 1024 (2 slices of 2048 would be 64 CTAs) */
        {1, 4096, 2048, 2},  /* 2 slices of 1024 rather than none */
        {1, 1024, 8192, 4},  /* 16 tiles: not 8 slices, whose sums would go through global memory */
        {2, 8192, 2048, 0},  /* 128 tiles, unsplit */
    };
    for (size_t i = 0; i < sizeof few / sizeof few[0]; i++)
        for (int tb = 0; tb <= 1; tb++) {
            d = (tl_gemm_desc){.m = few[i].m, .n = few[i].n, .k = few[i].k, .in_dtype = TL_BF16,
                               .out_dtype = TL_BF16, .trans_b = tb};
            s = tl_op_gemm_schedule(ctx, &d);
            if (d.m == 1 && tb) { /* the matrix-vector kernel */
                assert_int_equal(s.gemv, 1);
                continue;
            }
            if (!(s.swap_ab == 1 && s.block_n == 16 && s.split_k == few[i].split && s.stages == 4 &&
                  s.block_k == 128))
                fail_msg("%lldx%lldx%lld %s: swap %d block_n %d split %d stages %d block_k %d, want 64x16x128, "
                         "4 stages, split %d", (long long)d.m, (long long)d.n, (long long)d.k, tb ? "NT" : "NN",
                         s.swap_ab, s.block_n, s.split_k, s.stages, s.block_k, few[i].split);
        }
    d = (tl_gemm_desc){.m = 32, .n = 8192, .k = 8192, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = 1};
    s = tl_op_gemm_schedule(ctx, &d); /* 128 tiles of 64x32 in 2 slices, two CTAs an SM */
    assert_true(s.swap_ab == 1 && s.block_n == 32 && s.split_k == 2 && s.stages == 4 && s.block_k == 128);
    d.trans_b = 0;
    s = tl_op_gemm_schedule(ctx, &d);
    assert_true(s.swap_ab == 1 && s.split_k == 2 && s.stages == 4 && s.block_k == 64);
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

/* The op's kernel at 1x4096x4096: B's vectors are loaded evict-first (the
 * only operand so marked), and the sums stay in each thread until the
 * loop has ended: no shuffle before the finalize, one exchange after it. */
static void test_source_shape(void **state)
{
    (void)state;
    tl_gemm_desc d = {.m = 1, .n = 4096, .k = 4096, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = 1};
    assert_int_equal(tl_op_gemm_schedule(ctx, &d).gemv, 1);
    tl_kernel *k = NULL;
    assert_status(tl_op_gemm_build(ctx, &d, &k), TL_OK);
    char *src = NULL;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    const char *ef = strstr(src, "tl_ld_chunk_ef(");
    assert_non_null(ef);
    const char *eol = strchr(ef, '\n'), *b = strstr(ef, ", B + ");
    assert_true(eol && b && b < eol); /* the evict-first load is B's */
    assert_null(strstr(ef + 1, "tl_ld_chunk_ef(")); /* A keeps the default: every block reads it */
    const char *fin = strstr(src, "tl_finalize_reducer");
    const char *shfl = strstr(src, "tl_shfl_xor");
    assert_non_null(fin);
    assert_non_null(shfl);
    assert_true(shfl > fin);
    tl_free_host(src);
    tl_kernel_destroy(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interp_numerics),
        cmocka_unit_test(test_op_choice),
        cmocka_unit_test(test_swapped_stages),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_cubins),
        cmocka_unit_test(test_source_shape),
    };
    return cmocka_run_group_tests_name("gemv", tests, offline_setup, ctx_teardown);
}
