/* test_gpu_dual_gemm.c - the GPU tier of the gated dual GEMM
 * (examples/dual_gemm.h): the warp-specialised kernel on the device
 * against a float64 reference at ragged sizes, with misaligned rows (K not
 * a multiple of 8, which runs the safe variant) and outputs poisoned, for
 * the default schedule and each of dual_gemm_variants. Skips,
 * saying why, without a GPU; TILEC_TEST_SMALL=1 keeps sizes small. */
#include "fixture.h"

#include "../examples/dual_gemm.h"

static void run_size(const tl_program *p, int64_t M, int64_t N, int64_t K, uint64_t seed)
{
    uint16_t *a = malloc(2 * (size_t)(M * K)), *g = malloc(2 * (size_t)(N * K)), *u = malloc(2 * (size_t)(N * K));
    uint16_t *h = malloc(2 * (size_t)(M * N));
    assert_status(tl_random_host(a, TL_BF16, M * K, seed, -1, 1), TL_OK);
    assert_status(tl_random_host(g, TL_BF16, N * K, seed + 1, -1, 1), TL_OK);
    assert_status(tl_random_host(u, TL_BF16, N * K, seed + 2, -1, 1), TL_OK);
    memset(h, 0xFF, 2 * (size_t)(M * N));
    uint64_t da, dg, du, dh;
    assert_status(tl_malloc(ctx, 2 * (size_t)(M * K), &da), TL_OK);
    assert_status(tl_malloc(ctx, 2 * (size_t)(N * K), &dg), TL_OK);
    assert_status(tl_malloc(ctx, 2 * (size_t)(N * K), &du), TL_OK);
    assert_status(tl_malloc(ctx, 2 * (size_t)(M * N), &dh), TL_OK);
    assert_status(tl_memcpy_htod(ctx, da, a, 2 * (size_t)(M * K)), TL_OK);
    assert_status(tl_memcpy_htod(ctx, dg, g, 2 * (size_t)(N * K)), TL_OK);
    assert_status(tl_memcpy_htod(ctx, du, u, 2 * (size_t)(N * K)), TL_OK);
    assert_status(tl_memcpy_htod(ctx, dh, h, 2 * (size_t)(M * N)), TL_OK);
    tl_arg args[] = {tl_arg_int(M), tl_arg_int(N), tl_arg_int(K), tl_arg_dptr(da), tl_arg_dptr(dg), tl_arg_dptr(du),
                     tl_arg_dptr(dh)};
    if (tl_launch(p, NULL, 7, args) != TL_OK)
        fail_msg("%lldx%lldx%lld: %s", (long long)M, (long long)N, (long long)K, tl_ctx_error(ctx));
    assert_status(tl_synchronize(ctx), TL_OK);
    assert_status(tl_memcpy_dtoh(ctx, h, dh, 2 * (size_t)(M * N)), TL_OK);
    double num = 0, den = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double sg = 0, su = 0;
            for (int64_t q = 0; q < K; q++) {
                double x = tl_bf16_to_f32(a[i * K + q]);
                sg += x * tl_bf16_to_f32(g[j * K + q]);
                su += x * tl_bf16_to_f32(u[j * K + q]);
            }
            double want = dual_gemm_gate_ref(sg, su), got = tl_bf16_to_f32(h[i * N + j]);
            if (!isfinite(got))
                fail_msg("%lldx%lldx%lld: H[%lld, %lld] = %g", (long long)M, (long long)N, (long long)K, (long long)i,
                         (long long)j, got);
            num += (got - want) * (got - want);
            den += want * want;
        }
    double err = den > 0 ? sqrt(num / den) : sqrt(num);
    if (err > 1e-2)
        fail_msg("%lldx%lldx%lld: rel err %g", (long long)M, (long long)N, (long long)K, err);
    tl_free(ctx, da), tl_free(ctx, dg), tl_free(ctx, du), tl_free(ctx, dh);
    free(a), free(g), free(u), free(h);
}

/* The default schedule and every variant the benchmark times (the
 * persistent ping-pong kernels among them), at the same ragged sizes. */
static void test_ragged_sizes(void **state)
{
    (void)state;
    NEED_GPU();
    size_t nv = sizeof dual_gemm_variants / sizeof dual_gemm_variants[0];
    bool sm90a = strcmp(tl_ctx_target(ctx), "sm_90a") == 0;
    for (size_t v = 0; v <= nv; v++) {
        const dual_gemm_schedule *s = v == 0 ? &dual_gemm_default : &dual_gemm_variants[v - 1];
        if ((s->pingpong || s->a_regs) && !sm90a)
            continue; /* Hopper's schedules (wgmma with A in registers, the persistent ping-pong) */
        tl_kernel *k = dual_gemm_build(ctx, TL_BF16, s);
        assert_non_null(k);
        tl_program *p;
        if (tl_compile(k, NULL, &p) != TL_OK)
            fail_msg("schedule %zu: %s", v, tl_ctx_error(ctx));
        const int64_t sizes[][3] = {{128, 128, 64}, {1, 1, 8}, {200, 300, 72}, {257, 129, 520}, {100, 100, 33},
                                    {512, 384, 256},
                                    {2000, 1100, 136}}; /* more blocks than SMs: persistent CTAs take several */
        size_t n = sizeof sizes / sizeof sizes[0];
        for (size_t i = 0; i < n; i++)
            if (!small || i < 3 || i == n - 1) /* the sanitizers too see CTAs of several blocks */
                run_size(p, sizes[i][0], sizes[i][1], sizes[i][2], 10 + 3 * i + 100 * v);
        tl_program_destroy(p);
        tl_kernel_destroy(k);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ragged_sizes),
    };
    return cmocka_run_group_tests(tests, gpu_setup, ctx_teardown);
}
