/* test_dual_gemm.c - a kernel the old emitter could not pipeline: two
 * tl_gemm of the same A in one pipelined loop and a gate in registers
 * (examples/dual_gemm.h). CPU tier: the interpreter against a naive
 * reference at ragged sizes, and the lowering on sm_90a (a TMA producer
 * warpgroup feeding both gemms) and sm_80 (cp.async, mma.sync), compiled to
 * cubins. */
#include "fixture.h"

#include "../examples/dual_gemm.h"

static void test_interpreter_ragged(void **state)
{
    (void)state;
    const int64_t sizes[][3] = {{1, 1, 1}, {37, 70, 33}, {130, 129, 100}};
    for (size_t c = 0; c < 2 * sizeof sizes / sizeof sizes[0]; c++) {
        /* the plain kernel, and A copied to registers before the gemms */
        dual_gemm_schedule s = {64, 64, 32, 2, 128, 0, 0, c % 2, 0};
        int64_t M = sizes[c / 2][0], N = sizes[c / 2][1], K = sizes[c / 2][2];
        tl_kernel *k = dual_gemm_build(ctx, TL_BF16, &s);
        assert_non_null(k);
        uint16_t *a = malloc(2 * (size_t)(M * K)), *g = malloc(2 * (size_t)(N * K)), *u = malloc(2 * (size_t)(N * K));
        uint16_t *h = malloc(2 * (size_t)(M * N));
        assert_status(tl_random_host(a, TL_BF16, M * K, 1 + c, -1, 1), TL_OK);
        assert_status(tl_random_host(g, TL_BF16, N * K, 2 + c, -1, 1), TL_OK);
        assert_status(tl_random_host(u, TL_BF16, N * K, 3 + c, -1, 1), TL_OK);
        tl_arg args[] = {tl_arg_int(M), tl_arg_int(N), tl_arg_int(K), tl_arg_hptr(a), tl_arg_hptr(g),
                         tl_arg_hptr(u), tl_arg_hptr(h)};
        assert_status(tl_interpret(k, 7, args), TL_OK);
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
                num += (got - want) * (got - want);
                den += want * want;
            }
        double err = den > 0 ? sqrt(num / den) : sqrt(num);
        if (err > 1e-2)
            fail_msg("%lldx%lldx%lld: rel err %g", (long long)M, (long long)N, (long long)K, err);
        tl_kernel_destroy(k);
        free(a), free(g), free(u), free(h);
    }
}

static void test_lowering(void **state)
{
    (void)state;
    tl_kernel *k = dual_gemm_build(ctx, TL_BF16, &dual_gemm_default);
    assert_non_null(k);
    char *src;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    /* persistent CTAs, H stored through a staging tile and TMA; the two gemms of one A are one m64n256 wgmma
     * (pass_layout's pairing): Wu_s's stages sit right after Wg_s's (a stage stride of both tiles), one commit
     * group a K step */
    const char *want[] = {"tl_tma_load_2d(Wg_s", "tl_tma_load_2d(Wu_s", "tl_tma_load_2d(As", "tl_setmaxnreg_dec<",
                          "tl_wgmma_m64n256k16_bf16_tb_pair64(gate + tl_i * 64, up + tl_i * 64",
                          "Wg_s = (tl_bf16 *)(tl_smem + 65536)", "Wu_s = (tl_bf16 *)(tl_smem + 81920)",
                          "tl_tma_load_2d(Wu_s + (tl_sn", "tl_wgmma_wait<1>();",
                          "const long long tl_t = ((tl_p * (long long)gridDim.x) + (long long)blockIdx.x);",
                          "tl_tma_store_2d(&tl_map3, tl_stage_H + 8192, (int)((tl_bx) * 128LL + 64)"};
    const char *never[] = {"tl_wgmma_m64n128k16_bf16(up"};
    test_expect_text(src, "dual GEMM source", want, TEST_COUNT(want), never, TEST_COUNT(never));
    tl_free_host(src);
    tl_kernel_destroy(k);
    /* the persistent ping-pong variant: each consumer warpgroup walks its
     * own blocks, both gemms fed by the one producer */
    k = dual_gemm_build(ctx, TL_BF16, &dual_gemm_variants[2]);
    assert_non_null(k);
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    const char *want_pp[] = {"this CTA's blocks, 2 at a time", "tl_tma_load_2d(Wu_s", "tl_setmaxnreg_inc<",
                             "tl_wgmma_m64n256k16_bf16_tb_pair64(gate + tl_i * 64, up + tl_i * 64"};
    test_expect_text(src, "ping-pong dual GEMM source", want_pp, TEST_COUNT(want_pp), NULL, 0);
    tl_free_host(src);
    tl_program *pp;
    if (tl_compile(k, &(tl_compile_options){.target = "sm_90a"}, &pp) != TL_OK)
        fail_msg("ping-pong: %s", tl_ctx_error(ctx));
    tl_program_destroy(pp);
    tl_kernel_destroy(k);
    /* A in registers: copied from its shared slot once a K step, read by
     * both gemms from there (wgmma's register-A form), the copy waiting
     * for the previous step's wgmmas, which read the same registers */
    k = dual_gemm_build(ctx, TL_BF16, &dual_gemm_variants[0]);
    assert_non_null(k);
    assert_true(dual_gemm_variants[0].a_regs);
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    const char *want_regs[] = {"tl_wgmma_m64n128k16_bf16_rs(gate", "tl_wgmma_m64n128k16_bf16_rs(up",
                               "tl_wgmma_wait<0>();\n            { // tl_copy As -> A_regs"};
    test_expect_text(src, "dual GEMM with A in registers: the source", want_regs, TEST_COUNT(want_regs), NULL, 0);
    tl_free_host(src);
    if (tl_compile(k, &(tl_compile_options){.target = "sm_90a"}, &pp) != TL_OK)
        fail_msg("A in registers: %s", tl_ctx_error(ctx));
    tl_program_destroy(pp);
    /* sm_80's 128x128 accumulator splits the columns over warps too: no
     * operand layout for A, and the message says what it needs */
    tl_program *p80;
    assert_status(tl_compile(k, &(tl_compile_options){.target = "sm_80"}, &p80), TL_ERR_SHAPE);
    assert_non_null(strstr(tl_ctx_error(ctx), "A in registers ('A_regs') must have the accumulator layout"));
    tl_kernel_destroy(k);
    /* sm_80 holds 163 KiB: three stages of the three tiles; and both in
     * persistent CTAs (cp.async producer on sm_80, TMA on sm_90a) */
    const char *targets[] = {"sm_80", "sm_90a", "sm_80", "sm_90a"};
    const dual_gemm_schedule sched[] = {{128, 128, 64, 3, 256, 1, 0, 0, 0}, dual_gemm_default,
                                        {128, 128, 64, 3, 256, 1, 0, 0, 1}, {128, 128, 64, 4, 256, 1, 0, 0, 1}};
    for (int t = 0; t < 4; t++) {
        k = dual_gemm_build(ctx, TL_BF16, &sched[t]);
        tl_program *p;
        if (tl_compile(k, &(tl_compile_options){.target = targets[t]}, &p) != TL_OK)
            fail_msg("%s: %s", targets[t], tl_ctx_error(ctx));
        size_t n;
        assert_memory_equal(tl_program_cubin(p, &n), "\x7f" "ELF", 4);
        tl_program_destroy(p);
        tl_kernel_destroy(k);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interpreter_ragged),
        cmocka_unit_test(test_lowering),
    };
    return cmocka_run_group_tests(tests, offline_setup, ctx_teardown);
}
