/* test_pass_dumps.c - golden dumps of the kernel after every pass (what
 * tl_kernel_lower_dump(k, target, "all", ...) prints) for the kernels whose
 * lowering the passes must keep: the vector add, the classic sm_90a GEMM,
 * the ping-pong GEMM with a fused epilogue, the persistent warp-specialised
 * GEMM (and its 8-bit form, and its stream-K form), the sm_80 GEMM, the dual
 * GEMM, the decode path's kernels (a split K over a cluster, swapped or
 * not; the slices of a split K into a workspace, and their sum), a softmax whose rows are split over a
 * cluster of two blocks (the exchange of the partial maxima and sums), and
 * an RMSNorm whose ring a producer warpgroup fills. A change to a pass shows here as a diff of what it decided; review
 * it like code, then rewrite the files with TILEC_UPDATE_GOLDEN=1 (from the
 * repo root). Needs no NVRTC and no GPU. */
#include "fixture.h"
#include "tune.h"

#include "../examples/dual_gemm.h"

static void check_dump(tl_kernel *k, const char *target, const char *name)
{
    assert_non_null(k);
    char *text = NULL;
    if (tl_kernel_lower_dump(k, target, "all", &text) != TL_OK)
        fail_msg("%s: %s", name, tl_ctx_error(ctx));
    char path[256];
    snprintf(path, sizeof path, "tests/golden/passes/%s.txt", name);
    test_check_golden(path, text, name);
    /* every pass is there, in order */
    const char *passes[] = {"verify", "layout", "threads", "reduce", "pipeline", "smem", "sync", "launch"};
    const char *at = text;
    for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++) {
        char head[64];
        snprintf(head, sizeof head, "after pass '%s'", passes[i]);
        at = strstr(at, head);
        if (!at)
            fail_msg("%s: no dump %s, or out of order", name, head);
    }
    tl_free_host(text);
    tl_kernel_destroy(k);
}

static tl_kernel *gemm(const tl_gemm_schedule *s, int trans_b, int epilogue)
{
    tl_gemm_desc d = {.m = 1, .n = 1, .k = 1, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = trans_b,
                      .has_bias = epilogue, .epilogue = epilogue ? TL_EPI_GELU_TANH : TL_EPI_NONE, .schedule = *s};
    tl_kernel *k = NULL;
    assert_status(tl_op_gemm_build(ctx, &d, &k), TL_OK);
    return k;
}

static void test_vadd(void **state)
{
    (void)state;
    tl_kernel *k = NULL;
    assert_status(tl_op_build(ctx, "vadd", TL_F32, &k), TL_OK);
    check_dump(k, "sm_90a", "vadd_f32_sm90a");
}

static void test_gemm_classic_sm90a(void **state)
{
    (void)state;
    const tl_gemm_schedule s = {.block_m = 128, .block_n = 256, .block_k = 64, .stages = 4, .threads = 256, .swizzle = 8};
    check_dump(gemm(&s, 1, 0), "sm_90a", "gemm_classic_nt_sm90a");
}

static void test_gemm_pingpong_sm90a(void **state)
{
    (void)state;
    const tl_gemm_schedule s = {.block_m = 128, .block_n = 128, .block_k = 64, .stages = 4, .threads = 128,
                                .swizzle = 8, .pingpong = 1};
    check_dump(gemm(&s, 1, 1), "sm_90a", "gemm_pingpong_bias_gelu_sm90a");
}

/* tl_use_persistent: the producer's tile loop runs ahead of the consumers'
 * into the next block; no barrier between blocks (nothing shared outside
 * the ring). */
static void test_gemm_persistent_sm90a(void **state)
{
    (void)state;
    const tl_gemm_schedule s = {.block_m = 128, .block_n = 256, .block_k = 64, .stages = 4, .threads = 256,
                                .swizzle = 8, .persistent = 1};
    check_dump(gemm(&s, 1, 1), "sm_90a", "gemm_persistent_bias_gelu_sm90a");
}

/* tl_use_stream_k: both roles walk units of K steps (whole blocks for all
 * full waves but the last, then shares of the rest), the ring position is
 * the CTA's steps so far, and the consumers end each unit with the
 * fixup (hand the partial sum on, or add the others'). The kernel
 * compiles (NVRTC), and the requirements are checked with messages naming
 * tl_use_stream_k; the op refuses stream_k without persistent. */
static void test_gemm_stream_k_sm90a(void **state)
{
    (void)state;
    const tl_gemm_schedule s = {.block_m = 128, .block_n = 256, .block_k = 64, .stages = 4, .threads = 256,
                                .swizzle = 8, .persistent = 1, .stream_k = 1};
    tl_kernel *k = gemm(&s, 1, 1);
    tl_program *p = NULL;
    if (tl_compile(k, NULL, &p) != TL_OK) /* the offline context aims at sm_90a */
        fail_msg("stream-K GEMM: %s", tl_ctx_error(ctx));
    const char *src = tl_program_source(p);
    assert_non_null(strstr(src, "tl_sk_put<128>"));
    assert_non_null(strstr(src, "tl_sk_await(tl_sk_flags + tl_c)"));
    tl_program_destroy(p);
    check_dump(k, "sm_90a", "gemm_stream_k_bias_gelu_sm90a");

    k = gemm(&(tl_gemm_schedule){.block_m = 128, .block_n = 256, .block_k = 64, .stages = 4, .threads = 256,
                                 .swizzle = 8, .persistent = 1}, 1, 0);
    tl_use_persistent(k, 0);
    tl_use_stream_k(k, 1);
    char *text = NULL;
    assert_status(tl_kernel_lower_dump(k, "sm_90a", "all", &text), TL_ERR_UNSUPPORTED);
    assert_non_null(strstr(tl_ctx_error(ctx), "tl_use_stream_k: it needs tl_use_persistent"));
    tl_kernel_destroy(k);

    tl_gemm_desc d = {.m = 64, .n = 64, .k = 64, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = 1,
                      .schedule = {.block_m = 128, .block_n = 256, .block_k = 64, .stages = 4, .threads = 256,
                                   .swizzle = 8, .stream_k = 1}};
    k = NULL;
    assert_status(tl_op_gemm_build(ctx, &d, &k), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "stream_k needs persistent"));
    assert_null(k);
}

/* 8-bit inputs: blocks of 128 columns (one 128-byte row), TMA boxes of
 * 128 x rows, K steps of 32 (m64nNk32), the bias in the output's type. */
static void test_gemm_f8_persistent_sm90a(void **state)
{
    (void)state;
    tl_gemm_desc d = {.m = 1, .n = 1, .k = 1, .in_dtype = TL_F8E4M3, .out_dtype = TL_BF16, .trans_b = 1,
                      .has_bias = 1, .epilogue = TL_EPI_GELU_TANH,
                      .schedule = {.block_m = 128, .block_n = 256, .block_k = 128, .stages = 4, .threads = 256,
                                   .swizzle = 8, .persistent = 1}};
    tl_kernel *k = NULL;
    assert_status(tl_op_gemm_build(ctx, &d, &k), TL_OK);
    check_dump(k, "sm_90a", "gemm_f8e4m3_persistent_bias_gelu_sm90a");
}

static void test_gemm_sm80(void **state)
{
    (void)state;
    const tl_gemm_schedule s = {.block_m = 128, .block_n = 256, .block_k = 32, .stages = 3, .threads = 256, .swizzle = 8};
    check_dump(gemm(&s, 0, 0), "sm_80", "gemm_nn_sm80");
}

/* The decode path: 64x32 tiles with K split 2 ways over a cluster (the
 * slices added through distributed shared memory); C^T on 64x16 tiles,
 * split over a cluster of 2; 64x128 tiles in 4 slices through a workspace
 * (an all-reduce of that many elements costs more), and the slices' sum
 * with bias and GELU. */
static void test_gemm_decode_sm90a(void **state)
{
    (void)state;
    const tl_gemm_schedule s = {.block_m = 64, .block_n = 32, .block_k = 64, .stages = 4, .threads = 128,
                                .swizzle = 8, .split_k = 2};
    check_dump(gemm(&s, 1, 0), "sm_90a", "gemm_cluster_split_nt_sm90a");
    const tl_gemm_schedule w = {.block_m = 64, .block_n = 16, .block_k = 64, .stages = 8, .threads = 128,
                                .swizzle = 8, .split_k = 2, .swap_ab = 1};
    check_dump(gemm(&w, 1, 0), "sm_90a", "gemm_swapped_cluster_split_nt_sm90a");
    check_dump(gemm(&w, 0, 0), "sm_90a", "gemm_swapped_cluster_split_nn_sm90a"); /* B^T a transposed A */
    const tl_gemm_schedule many = {.block_m = 64, .block_n = 128, .block_k = 64, .stages = 4, .threads = 128,
                                   .swizzle = 8, .split_k = 4};
    check_dump(gemm(&many, 1, 0), "sm_90a", "gemm_slices_nt_sm90a");
    tl_gemm_desc d = {.m = 1, .n = 1, .k = 1, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = 1,
                      .has_bias = 1, .epilogue = TL_EPI_GELU_TANH};
    tl_kernel *k = NULL;
    assert_status(tli_gemm_slices_sum_build(ctx, &d, 4, &k), TL_OK);
    check_dump(k, "sm_90a", "gemm_slices_sum_bias_gelu_sm90a");
}

static void test_dual_gemm(void **state)
{
    (void)state;
    check_dump(dual_gemm_build(ctx, TL_BF16, &dual_gemm_default), "sm_90a", "dual_gemm_sm90a");
}

/* A row split over a cluster of 2 blocks, with the ring of 3: the
 * cluster reductions' exchange slots and writers, the launch bounds of two
 * blocks an SM. */
static void test_softmax_cluster_sm90a(void **state)
{
    (void)state;
    tl_softmax_desc d = {.rows = 1, .cols = 32768, .in_dtype = TL_F16, .out_dtype = TL_F16,
                         .schedule = {.width = 16384, .rows = 1, .threads = 512, .stages = 3, .cluster = 2}};
    tl_kernel *k = NULL;
    assert_status(tl_op_softmax_build(ctx, &d, &k), TL_OK);
    check_dump(k, "sm_90a", "softmax_cluster2_ring3_sm90a");
}

/* RMSNorm's ring filled by a producer warpgroup (schedule.loader 2): the
 * warp specialisation, persistent CTAs taking their blocks from a
 * counter, and the slot handed back after the tile's one read (a
 * __syncwarp, then lane 0's arrival), not at the next iteration's end. */
static void test_rmsnorm_producer_sm90a(void **state)
{
    (void)state;
    tl_rmsnorm_desc d = {.rows = 1, .cols = 1000, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .eps = 1e-6,
                         .schedule = {.width = 1024, .rows = 4, .threads = 128, .stages = 2, .loader = 2}};
    tl_kernel *k = NULL;
    assert_status(tl_op_rmsnorm_build(ctx, &d, &k), TL_OK);
    check_dump(k, "sm_90a", "rmsnorm_producer_ring2_sm90a");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vadd),
        cmocka_unit_test(test_gemm_classic_sm90a),
        cmocka_unit_test(test_gemm_pingpong_sm90a),
        cmocka_unit_test(test_gemm_persistent_sm90a),
        cmocka_unit_test(test_gemm_stream_k_sm90a),
        cmocka_unit_test(test_gemm_f8_persistent_sm90a),
        cmocka_unit_test(test_gemm_sm80),
        cmocka_unit_test(test_gemm_decode_sm90a),
        cmocka_unit_test(test_dual_gemm),
        cmocka_unit_test(test_softmax_cluster_sm90a),
        cmocka_unit_test(test_rmsnorm_producer_sm90a),
    };
    return cmocka_run_group_tests(tests, offline_setup, ctx_teardown);
}
