/* test_gemm_f8.c - GEMMs of 8-bit float inputs without a GPU: tl_op_gemm's
 * kernels for f8e4m3 and f8e5m2 run in the interpreter against a float64
 * loop over the decoded codes (ragged sizes, bias of the output's type,
 * GELU, per-tensor scales folded into alpha, several schedules and the
 * op's own choice); the argument and builder errors with their messages;
 * the wgmma instruction each pair of formats gets; the generated code of
 * each schedule through NVRTC for sm_90a; and the op's own schedules. */
#include "fixture.h"
#include "gemm_host.h"

#include <math.h>

static const tl_gemm_schedule small_f8 = {.block_m = 64, .block_n = 64, .block_k = 128, .stages = 2, .threads = 128};

/* Both formats, ragged sizes (K a whole number of 16-byte rows and not),
 * the small schedule (several blocks, several K steps) and the op's own. */
static void test_interp_numerics(void **state)
{
    (void)state;
    static const int64_t sizes[][3] = {{70, 90, 272}, {33, 70, 200}, {1, 130, 384}};
    static const tl_dtype ins[] = {TL_F8E4M3, TL_F8E5M2};
    for (size_t f = 0; f < 2; f++)
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++)
            for (int own = 0; own < 2; own++) {
                host_gemm p;
                host_gemm_init(&p, sizes[z][0], sizes[z][1], sizes[z][2], ins[f], own ? TL_BF16 : TL_F32,
                        500 + 10 * z + f);
                if (!own)
                    p.d.schedule = small_f8;
                char what[160];
                snprintf(what, sizeof what, "%s %lldx%lldx%lld -> %s, %s schedule", tl_dtype_name(ins[f]),
                         (long long)sizes[z][0], (long long)sizes[z][1], (long long)sizes[z][2],
                         tl_dtype_name(p.d.out_dtype), own ? "the op's" : "a small");
                host_gemm_check(ctx, &p, what);
                host_gemm_free(&p);
            }
}

/* The bias in the output's type with GELU, and the per-tensor scales
 * (folded into alpha: the strided kernel), f32 and bf16 out. */
static void test_interp_bias_scales(void **state)
{
    (void)state;
    for (int out = 0; out < 2; out++) {
        host_gemm p;
        host_gemm_init(&p, 45, 77, 256, TL_F8E4M3, out ? TL_BF16 : TL_F32, 600 + (uint64_t)out);
        p.d.has_bias = 1, p.d.epilogue = TL_EPI_GELU_TANH, p.d.schedule = small_f8;
        host_gemm_check(ctx, &p, out ? "bias + GELU, bf16 out" : "bias + GELU, f32 out");
        memset(p.c, 0xFF, (size_t)(p.d.m * p.d.n) * tl_dtype_size(p.d.out_dtype));
        p.g.scale_a = 0.5, p.g.scale_b = 3.0, p.g.alpha = 2.0;
        host_gemm_check(ctx, &p, out ? "scales 0.5 x 3, alpha 2, bf16 out" : "scales 0.5 x 3, alpha 2, f32 out");
        host_gemm_free(&p);
    }
}

static void expect_desc_error(tl_ctx *c, const tl_gemm_desc *d, tl_status want, const char *fragment)
{
    tl_kernel *k = NULL;
    tl_status st = tl_op_gemm_build(c, d, &k);
    if (st != want)
        fail_msg("expected %s, got %s (%s)", tl_status_name(want), tl_status_name(st), tl_ctx_error(c));
    if (!strstr(tl_ctx_error(c), fragment))
        fail_msg("message '%s' does not say '%s'", tl_ctx_error(c), fragment);
    assert_null(k);
}

/* What 8-bit inputs cannot do, each said: B as [K, N], a target without
 * wgmma, a K step that is not whole 128-byte rows; and in the builder, A
 * in registers, B MN-major, one operand 8-bit and the other not. */
static void test_errors(void **state)
{
    (void)state;
    tl_gemm_desc d = {.m = 64, .n = 64, .k = 256, .in_dtype = TL_F8E4M3, .out_dtype = TL_BF16, .trans_b = 0};
    expect_desc_error(ctx, &d, TL_ERR_UNSUPPORTED, "K-major");
    d.trans_b = 1;
    d.schedule = (tl_gemm_schedule){.block_m = 128, .block_n = 128, .block_k = 64, .stages = 4, .threads = 256};
    expect_desc_error(ctx, &d, TL_ERR_INVALID_ARG, "multiple of 128");
    d.schedule = (tl_gemm_schedule){0};
    tl_ctx *ampere = test_offline_ctx("sm_80");
    expect_desc_error(ampere, &d, TL_ERR_UNSUPPORTED, "wgmma (sm_90a)");
    tl_ctx_destroy(ampere);

    for (int c = 0; c < 3; c++) {
        tl_kernel *k = tl_kernel_new(ctx, "f8_misuse");
        tl_grid(k, tl_int(k, 1), tl_int(k, 1), TL_NONE_EXPR, 128);
        tl_buf A = c == 0 ? tl_alloc_fragment(k, TL_F8E4M3, 2, (int64_t[]){64, 128})
                          : tl_alloc_shared(k, TL_F8E4M3, 2, (int64_t[]){64, 128});
        tl_buf B = tl_alloc_shared(k, c == 2 ? TL_BF16 : TL_F8E4M3, 2, c == 1 ? (int64_t[]){128, 64} : (int64_t[]){64, 128});
        tl_buf C = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){64, 64});
        tl_gemm(k, A, B, C, c == 1 ? 0 : TL_GEMM_TRANS_B);
        static const tl_status want[] = {TL_ERR_UNSUPPORTED, TL_ERR_UNSUPPORTED, TL_ERR_DTYPE};
        static const char *const says[] = {"K-major shared tiles", "TL_GEMM_TRANS_B", "8-bit floats"};
        assert_status(tl_kernel_status(k), want[c]);
        if (!strstr(tl_ctx_error(ctx), says[c]))
            fail_msg("case %d: message '%s' does not say '%s'", c, tl_ctx_error(ctx), says[c]);
        tl_kernel_destroy(k);
    }
}

/* A user's kernel with A e4m3 and B e5m2: one m64nNk32 wgmma of the pair,
 * TMA boxes of one 128-byte row. */
static tl_kernel *mixed_kernel(void)
{
    tl_kernel *k = tl_kernel_new(ctx, "f8_mixed");
    tl_expr M = tl_dim(k, "M"), N = tl_dim(k, "N"), K = tl_dim(k, "K");
    tl_buf A = tl_param_tensor(k, "A", TL_F8E4M3, 2, (tl_expr[]){M, K}, NULL);
    tl_buf B = tl_param_tensor(k, "B", TL_F8E5M2, 2, (tl_expr[]){N, K}, NULL);
    tl_buf C = tl_param_tensor(k, "C", TL_F32, 2, (tl_expr[]){M, N}, NULL);
    tl_grid(k, tl_ceildiv(k, N, tl_int(k, 128)), tl_ceildiv(k, M, tl_int(k, 64)), TL_NONE_EXPR, 128);
    tl_buf As = tl_alloc_shared(k, TL_F8E4M3, 2, (int64_t[]){64, 128});
    tl_buf Bs = tl_alloc_shared(k, TL_F8E5M2, 2, (int64_t[]){128, 128});
    tl_buf Cf = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){64, 128});
    tl_clear(k, Cf);
    tl_expr ko = tl_pipelined(k, tl_ceildiv(k, K, tl_int(k, 128)), 3);
    tl_copy(k, tl_tile(k, A, tl_block_idx(k, 1), ko), tl_all(As));
    tl_copy(k, tl_tile(k, B, tl_block_idx(k, 0), ko), tl_all(Bs));
    tl_gemm(k, As, Bs, Cf, TL_GEMM_TRANS_B);
    tl_end(k);
    tl_copy(k, tl_all(Cf), tl_tile(k, C, tl_block_idx(k, 1), tl_block_idx(k, 0)));
    return k;
}

static void expect_in_source(tl_kernel *k, const char *what, const char *const *needles, int n)
{
    char *src = NULL;
    if (tl_kernel_source(k, "sm_90a", &src) != TL_OK)
        fail_msg("%s: %s", what, tl_ctx_error(ctx));
    for (int i = 0; i < n; i++)
        if (!strstr(src, needles[i]))
            fail_msg("%s: the source has no '%s'", what, needles[i]);
    tl_free_host(src);
}

static void test_generated_code(void **state)
{
    (void)state;
    tl_gemm_desc d = {.m = 4096, .n = 4096, .k = 4096, .in_dtype = TL_F8E4M3, .out_dtype = TL_BF16, .trans_b = 1};
    tl_kernel *k = NULL;
    assert_status(tl_op_gemm_build(ctx, &d, &k), TL_OK);
    const char *e4[] = {"wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3", "tl_tma_load_2d", "tl_k += 32",
                        "128-column blocks"};
    expect_in_source(k, "e4m3 default", e4, 4);
    tl_kernel_destroy(k);
    d.in_dtype = TL_F8E5M2;
    assert_status(tl_op_gemm_build(ctx, &d, &k), TL_OK);
    const char *e5[] = {"m64n256k32.f32.e5m2.e5m2"};
    expect_in_source(k, "e5m2 default", e5, 1);
    tl_kernel_destroy(k);
    k = mixed_kernel();
    assert_status(tl_kernel_status(k), TL_OK);
    const char *mx[] = {"m64n128k32.f32.e4m3.e5m2", "tl_tma_load_2d"};
    expect_in_source(k, "mixed kernel", mx, 2);
    /* no mma.sync for 8-bit operands: sm_80 refuses the kernel, saying why */
    char *src = NULL;
    assert_status(tl_kernel_source(k, "sm_80", &src), TL_ERR_UNSUPPORTED);
    if (!strstr(tl_ctx_error(ctx), "8-bit operands need wgmma"))
        fail_msg("sm_80: '%s'", tl_ctx_error(ctx));
    tl_kernel_destroy(k);
}

/* Each schedule's kernel compiles for sm_90a (NVRTC, no GPU): the op's
 * choice at large, few-tile and decode shapes, the classic kernel, the
 * persistent one on 64x128 tiles, clusters with multicast, a 256-wide K
 * step, a bias with GELU, f32 out, and the mixed user kernel. */
static void test_cubins(void **state)
{
    (void)state;
    const struct {
        int64_t m, n, k;
        tl_gemm_schedule s;
        int bias;
        tl_dtype out;
    } cases[] = {
        {4096, 4096, 4096, {0}, 0, TL_BF16},
        {1024, 1024, 1024, {0}, 1, TL_BF16},
        {64, 8192, 8192, {0}, 0, TL_BF16},
        {8, 4096, 4096, {0}, 0, TL_F16},
        {4096, 4096, 4096, {.block_m = 128, .block_n = 256, .block_k = 128, .stages = 4, .threads = 256, .swizzle = 8}, 1, TL_F32},
        {4096, 4096, 4096, {.block_m = 64, .block_n = 128, .block_k = 128, .stages = 6, .threads = 128, .persistent = 1}, 0, TL_BF16},
        {4096, 4096, 4096, {.block_m = 128, .block_n = 128, .block_k = 128, .stages = 4, .threads = 256, .cluster_m = 2}, 0, TL_BF16},
        {4096, 4096, 4096, {.block_m = 128, .block_n = 128, .block_k = 256, .stages = 3, .threads = 256}, 0, TL_BF16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tl_gemm_desc d = {.m = cases[i].m, .n = cases[i].n, .k = cases[i].k, .in_dtype = TL_F8E4M3,
                          .out_dtype = cases[i].out, .trans_b = 1, .has_bias = cases[i].bias,
                          .epilogue = cases[i].bias ? TL_EPI_GELU_TANH : TL_EPI_NONE, .schedule = cases[i].s};
        const tl_program *p = NULL;
        if (tl_op_gemm_program(ctx, &d, &p) != TL_OK)
            fail_msg("case %zu (%lldx%lldx%lld): %s", i, (long long)d.m, (long long)d.n, (long long)d.k,
                     tl_ctx_error(ctx));
        assert_non_null(p);
    }
    tl_kernel *k = mixed_kernel();
    tl_program *p = NULL;
    if (tl_compile(k, NULL, &p) != TL_OK)
        fail_msg("mixed kernel: %s", tl_ctx_error(ctx));
    tl_program_destroy(p);
    tl_kernel_destroy(k);
}

/* The op's own schedules for 8-bit inputs: its 16-bit rows with K steps of
 * 128 (the same bytes a stage); swapped decode slices of at least 16 steps
 * (1x4096x4096: 32 steps in 2 slices; without the split it ran on 64 CTAs,
 * 0.57 of cuBLASLt); about one wave of 128x128 tiles on two consumer
 * warpgroups (256x8192x8192), and the same tile for a K of at most 1024
 * bytes, for 16-bit inputs alike. */
static void test_op_choices(void **state)
{
    (void)state;
    const struct {
        int64_t m, n, k;
        tl_dtype in;
        tl_gemm_schedule want;
    } cases[] = {
        {1, 4096, 4096, TL_F8E4M3, {64, 16, 128, 8, 128, 8, 0, 0, 2, 1, 0, 0, 0, 0, 0}},
        {16, 4096, 14336, TL_F8E4M3, {64, 16, 128, 5, 128, 8, 0, 0, 4, 1, 0, 0, 0, 0, 0}},
        {64, 8192, 8192, TL_F8E4M3, {64, 128, 128, 8, 128, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}}, /* stages of the same bytes */
        {256, 8192, 8192, TL_F8E4M3, {128, 128, 128, 5, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}},
        {256, 8192, 8192, TL_BF16, {128, 128, 64, 5, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}},
        {1024, 1024, 1024, TL_F8E4M3, {64, 128, 128, 6, 128, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}},
        {1024, 1024, 1024, TL_BF16, {64, 128, 64, 6, 128, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}},
        {4096, 4096, 4096, TL_F8E4M3, {128, 256, 128, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}},
        {8192, 8192, 1024, TL_F8E4M3, {128, 128, 128, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}}, /* K of 1024 bytes */
        {8192, 8192, 512, TL_BF16, {128, 128, 64, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}},
        {8192, 8192, 1024, TL_BF16, {128, 256, 64, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}},    /* 2048 bytes */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tl_gemm_desc d = {.m = cases[i].m, .n = cases[i].n, .k = cases[i].k, .in_dtype = cases[i].in,
                          .out_dtype = TL_BF16, .trans_b = 1};
        tl_gemm_schedule s = tl_op_gemm_schedule(ctx, &d), w = cases[i].want;
        if (memcmp(&s, &w, sizeof s) != 0)
            fail_msg("%s %lldx%lldx%lld: %dx%dx%d s%d t%d sk%d ab%d ps%d, want %dx%dx%d s%d t%d sk%d ab%d ps%d",
                     tl_dtype_name(d.in_dtype), (long long)d.m, (long long)d.n, (long long)d.k, s.block_m, s.block_n,
                     s.block_k, s.stages, s.threads, s.split_k, s.swap_ab, s.persistent, w.block_m, w.block_n,
                     w.block_k, w.stages, w.threads, w.split_k, w.swap_ab, w.persistent);
    }
    /* the tuner's space for 8-bit inputs: every K step a whole number of 128-byte rows */
    tl_gemm_desc d = {.m = 4096, .n = 4096, .k = 4096, .in_dtype = TL_F8E4M3, .out_dtype = TL_BF16, .trans_b = 1};
    tl_gemm_schedule cand[64];
    int n = tl_gemm_candidates(ctx, &d, cand, 64);
    assert_true(n > 20 && n <= 64);
    for (int i = 0; i < n; i++)
        if (cand[i].block_k % 128)
            fail_msg("candidate %d: block_k %d for 8-bit inputs", i, cand[i].block_k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interp_numerics),
        cmocka_unit_test(test_interp_bias_scales),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_generated_code),
        cmocka_unit_test(test_cubins),
        cmocka_unit_test(test_op_choices),
    };
    return cmocka_run_group_tests(tests, offline_setup, ctx_teardown);
}
