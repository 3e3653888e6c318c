/* test_builder_hostile.c - builder calls a hostile or careless user makes:
 * tiles whose element count overflows, negative constant extents, a tile
 * region copied after its loop closed, tl_gemm with unknown flags, two warp
 * policies, or before tl_grid, a tl_pipelined inside another, and a GEMM
 * descriptor with an unknown warp policy. Each is refused by the call that makes it, with its name. */
#include "fixture.h"

static tl_kernel *kernel_with_grid(void)
{
    tl_kernel *k = tl_kernel_new(ctx, "hostile");
    assert_non_null(k);
    tl_grid(k, tl_int(k, 4), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    return k;
}

static void expect_kernel_error(tl_kernel *k, tl_status want, const char *prefix)
{
    assert_status(tl_kernel_status(k), want);
    if (strncmp(tl_kernel_error(k), prefix, strlen(prefix)) != 0)
        fail_msg("message '%s' should start with '%s'", tl_kernel_error(k), prefix);
    tl_kernel_destroy(k);
}

/* 2^20 x 2^20 x 2^20 x 2^20 elements wrapped to 0 and passed. */
static void test_tile_size_overflow(void **state)
{
    (void)state;
    tl_kernel *k = kernel_with_grid();
    int64_t shape[4] = {1 << 20, 1 << 20, 1 << 20, 1 << 20};
    assert_true(tl_buf_is_null(tl_alloc_shared(k, TL_F32, 4, shape)));
    expect_kernel_error(k, TL_ERR_SHAPE, "tl_alloc_shared: more than 2^24 elements");
    k = kernel_with_grid();
    assert_true(tl_buf_is_null(tl_alloc_local(k, TL_F32, 3, shape)));
    expect_kernel_error(k, TL_ERR_SHAPE, "tl_alloc_local: more than 2^24 elements");
}

/* A constant extent of -5 was accepted. */
static void test_negative_constant_extent(void **state)
{
    (void)state;
    tl_kernel *k = tl_kernel_new(ctx, "hostile");
    tl_expr shape[2] = {tl_int(k, 4), tl_int(k, -5)};
    assert_true(tl_buf_is_null(tl_param_tensor(k, "A", TL_F32, 2, shape, NULL)));
    expect_kernel_error(k, TL_ERR_SHAPE, "tl_param_tensor: shape[1] is the constant -5");
    k = tl_kernel_new(ctx, "hostile");
    tl_expr n = tl_dim(k, "N"), strides[2] = {tl_int(k, -1), tl_int(k, 1)};
    shape[0] = n;
    shape[1] = n;
    assert_true(tl_buf_is_null(tl_param_tensor(k, "A", TL_F32, 2, shape, strides)));
    expect_kernel_error(k, TL_ERR_SHAPE, "tl_param_tensor: strides[0] is the constant -1");
    /* a constant row-major stride that overflows is the builder's error too */
    k = tl_kernel_new(ctx, "hostile");
    tl_expr big[3] = {tl_int(k, 2), tl_int(k, INT64_MAX / 4), tl_int(k, 8)};
    assert_true(tl_buf_is_null(tl_param_tensor(k, "A", TL_F32, 3, big, NULL)));
    expect_kernel_error(k, TL_ERR_INVALID_ARG, "tl_param_tensor: mul of the constants");
}

/* tl_tile inside a loop, tl_copy after it: TL_OK from the builder, then an
 * undeclared identifier from NVRTC and a stale index in the interpreter. */
static void test_tile_region_out_of_scope(void **state)
{
    (void)state;
    tl_kernel *k = kernel_with_grid();
    tl_expr n = tl_dim(k, "N");
    tl_expr shape[2] = {n, n};
    tl_buf a = tl_param_tensor(k, "A", TL_F32, 2, shape, NULL);
    tl_buf s = tl_alloc_shared(k, TL_F32, 2, (int64_t[]){16, 16});
    tl_expr i = tl_serial(k, tl_int(k, 4));
    tl_region r = tl_tile(k, a, i, tl_int(k, 0));
    tl_copy(k, r, tl_all(s)); /* inside the loop: fine */
    tl_end(k);
    assert_status(tl_kernel_status(k), TL_OK);
    tl_copy(k, r, tl_all(s));
    expect_kernel_error(k, TL_ERR_SCOPE, "tl_copy: src: tile index 0 uses a loop variable outside its loop");
    /* a region without loop variables stays usable anywhere */
    k = kernel_with_grid();
    n = tl_dim(k, "N");
    shape[0] = n;
    shape[1] = n;
    a = tl_param_tensor(k, "A", TL_F32, 2, shape, NULL);
    s = tl_alloc_shared(k, TL_F32, 2, (int64_t[]){16, 16});
    r = tl_tile(k, a, tl_block_idx(k, 0), tl_int(k, 0));
    tl_serial(k, tl_int(k, 2));
    tl_end(k);
    tl_copy(k, tl_all(s), r);
    assert_status(tl_kernel_status(k), TL_OK);
    tl_kernel_destroy(k);
}

/* A tl_pipelined inside another reached the lowering, which gave
 * TL_ERR_INTERNAL (found by the fuzzer: tests/fuzz/regress). */
static void test_nested_pipelined(void **state)
{
    (void)state;
    tl_kernel *k = kernel_with_grid();
    tl_expr m = tl_dim(k, "M");
    tl_expr v = tl_pipelined(k, m, 3);
    assert_true(tl_expr_is_null(tl_pipelined(k, v, 3)));
    expect_kernel_error(k, TL_ERR_UNSUPPORTED, "tl_pipelined: tl_pipelined inside tl_pipelined");
    /* inside a serial loop, and a serial loop inside it, are fine */
    k = kernel_with_grid();
    m = tl_dim(k, "M");
    tl_pipelined(k, tl_serial(k, m), 3);
    tl_serial(k, m);
    tl_end(k);
    tl_end(k);
    tl_end(k);
    char *src = NULL;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    tl_free_host(src);
    tl_kernel_destroy(k);
}

/* Operands of a valid GEMM: A [64, 32], B [32, 64] bf16 shared, C f32. */
static void gemm_operands(tl_kernel *k, tl_buf *A, tl_buf *B, tl_buf *C)
{
    *A = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){64, 32});
    *B = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){32, 64});
    *C = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){64, 64});
}

static void test_gemm_flags(void **state)
{
    (void)state;
    tl_buf A, B, C;
    tl_kernel *k = kernel_with_grid();
    gemm_operands(k, &A, &B, &C);
    tl_gemm(k, A, B, C, 1u << 9);
    expect_kernel_error(k, TL_ERR_INVALID_ARG, "tl_gemm: unknown flag bits 0x200");
    /* bit 2 together with TRANS_A used to be reported as "transposed A" */
    k = kernel_with_grid();
    gemm_operands(k, &A, &B, &C);
    tl_gemm(k, A, B, C, TL_GEMM_TRANS_A | (1u << 2));
    expect_kernel_error(k, TL_ERR_INVALID_ARG, "tl_gemm: unknown flag bits 0x4");
    k = kernel_with_grid();
    gemm_operands(k, &A, &B, &C);
    tl_gemm(k, A, B, C, TL_GEMM_WARP_ROWS | TL_GEMM_WARP_COLS);
    expect_kernel_error(k, TL_ERR_INVALID_ARG, "tl_gemm: TL_GEMM_WARP_ROWS and TL_GEMM_WARP_COLS");
    k = kernel_with_grid();
    gemm_operands(k, &A, &B, &C);
    tl_gemm(k, A, B, C, TL_GEMM_WARP_ROWS);
    assert_status(tl_kernel_status(k), TL_OK);
    tl_kernel_destroy(k);
}

/* Before tl_grid: TL_ERR_SHAPE "over 0 warps"; the documented status is
 * TL_ERR_INVALID_ARG, as for any statement before tl_grid. */
static void test_gemm_before_grid(void **state)
{
    (void)state;
    tl_buf A, B, C;
    tl_kernel *k = tl_kernel_new(ctx, "hostile");
    gemm_operands(k, &A, &B, &C);
    tl_gemm(k, A, B, C, 0);
    expect_kernel_error(k, TL_ERR_INVALID_ARG, "tl_gemm: call tl_grid before the first statement");
}

static void test_gemm_desc_warp_policy(void **state)
{
    (void)state;
    tl_gemm_desc d = {.m = 128, .n = 128, .k = 64, .in_dtype = TL_BF16, .out_dtype = TL_BF16};
    d.schedule.warp_policy = 7;
    tl_kernel *k = NULL;
    assert_status(tl_op_gemm_build(ctx, &d, &k), TL_ERR_INVALID_ARG);
    assert_null(k);
    assert_non_null(strstr(tl_ctx_error(ctx), "tl_op_gemm_build: unknown schedule.warp_policy 0x7"));
    tl_gemm_schedule s = tl_op_gemm_schedule(ctx, &d);
    assert_int_equal(s.block_m, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tile_size_overflow),
        cmocka_unit_test(test_negative_constant_extent),
        cmocka_unit_test(test_tile_region_out_of_scope),
        cmocka_unit_test(test_nested_pipelined),
        cmocka_unit_test(test_gemm_flags),
        cmocka_unit_test(test_gemm_before_grid),
        cmocka_unit_test(test_gemm_desc_warp_policy),
    };
    return cmocka_run_group_tests_name("builder_hostile", tests, offline_setup, ctx_teardown);
}
