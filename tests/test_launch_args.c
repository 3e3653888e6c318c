/* test_launch_args.c - launch and interpretation check every tensor against
 * its arguments before touching memory: extents and strides that evaluate
 * negative, offsets beyond 2^63 bytes, null and misaligned pointers, a NULL
 * argument array; and the ops refuse misaligned device pointers before
 * launching (a misaligned address poisons the whole CUDA context). */
#include "fixture.h"

/* out[i] = 1 for i < N - 5 (or the extent given), f32, any stride S. */
static tl_kernel *shape_kernel(int neg_stride)
{
    tl_kernel *k = tl_kernel_new(ctx, "shapes");
    tl_expr n = tl_dim(k, "N");
    tl_expr s = tl_param_scalar(k, "S", TL_I64);
    tl_expr ext = tl_sub(k, n, tl_int(k, 5));
    tl_buf out = tl_param_tensor(k, "OUT", TL_F32, 1, &ext, neg_stride ? &s : NULL);
    tl_grid(k, TL_NONE_EXPR, TL_NONE_EXPR, TL_NONE_EXPR, 32);
    tl_expr i = tl_parallel1(k, 64);
    tl_store(k, out, &i, tl_f32(k, 1.0f));
    tl_end(k);
    assert_status(tl_kernel_status(k), TL_OK);
    return k;
}

static void expect_launch_error(tl_kernel *k, int nargs, const tl_arg *args, const char *fragment)
{
    assert_status(tl_interpret(k, nargs, args), TL_ERR_LAUNCH_ARGS);
    const char *msg = tl_ctx_error(ctx);
    if (strncmp(msg, "tl_interpret: ", 14) != 0 || !strstr(msg, fragment))
        fail_msg("message '%s' should start with tl_interpret and mention '%s'", msg, fragment);
}

/* Shape N - 5 with N = 2: -3 passed the unsigned bounds test and the
 * interpreter wrote 64 floats into a 4-byte buffer. */
static void test_negative_extent(void **state)
{
    (void)state;
    tl_kernel *k = shape_kernel(0);
    float *out = malloc(sizeof(float));
    tl_arg args[] = {tl_arg_int(2), tl_arg_int(1), tl_arg_hptr(out)};
    expect_launch_error(k, 3, args, "extent 0 evaluates to -3");
    /* N = 6: one element, written, and nothing else touched */
    out[0] = 0;
    args[0] = tl_arg_int(6);
    assert_status(tl_interpret(k, 3, args), TL_OK);
    assert_true(out[0] == 1.0f);
    free(out);
    tl_kernel_destroy(k);
}

static void test_negative_stride(void **state)
{
    (void)state;
    tl_kernel *k = shape_kernel(1);
    float out[8];
    tl_arg args[] = {tl_arg_int(8), tl_arg_int(-1), tl_arg_hptr(out)};
    expect_launch_error(k, 3, args, "stride 0 evaluates to -1");
    tl_kernel_destroy(k);
}

/* Extents whose offsets do not fit in 64 bits in bytes. */
static void test_span_overflow(void **state)
{
    (void)state;
    tl_kernel *k = shape_kernel(0);
    float out[1];
    tl_arg args[] = {tl_arg_int(INT64_MAX / 2), tl_arg_int(1), tl_arg_hptr(out)};
    expect_launch_error(k, 3, args, "beyond 2^63 bytes");
    tl_kernel_destroy(k);
    k = shape_kernel(1);
    args[0] = tl_arg_int(6);
    args[1] = tl_arg_int(INT64_MAX / 2); /* one element, but a stride in bytes beyond 2^63 */
    expect_launch_error(k, 3, args, "beyond 2^63 bytes");
    tl_kernel_destroy(k);
}

/* A NULL host pointer crashed tl_interpret; one for an empty tensor is
 * fine (nothing is touched). */
static void test_null_pointer(void **state)
{
    (void)state;
    tl_kernel *k = shape_kernel(0);
    tl_arg args[] = {tl_arg_int(8), tl_arg_int(1), tl_arg_hptr(NULL)};
    expect_launch_error(k, 3, args, "'OUT') is a null pointer");
    args[0] = tl_arg_int(5);
    assert_status(tl_interpret(k, 3, args), TL_OK);
    tl_kernel_destroy(k);
}

static void test_misaligned_pointer(void **state)
{
    (void)state;
    tl_kernel *k = shape_kernel(0);
    float buf[8];
    tl_arg args[] = {tl_arg_int(8), tl_arg_int(1), tl_arg_hptr((char *)buf + 1)};
    expect_launch_error(k, 3, args, "not aligned to its 4-byte elements");
    tl_kernel_destroy(k);
}

/* "takes 3 arguments, got 3" when the array was NULL. */
static void test_null_argument_array(void **state)
{
    (void)state;
    tl_kernel *k = shape_kernel(0);
    expect_launch_error(k, 3, NULL, "args is NULL");
    expect_launch_error(k, 2, NULL, "args is NULL");
    float out[8];
    tl_arg args[] = {tl_arg_int(8), tl_arg_int(1), tl_arg_hptr(out)};
    expect_launch_error(k, 2, args, "takes 3 arguments, got 2");
    tl_kernel_destroy(k);
}

/* The ops check their pointers before compiling or launching: a pointer
 * one byte off used to reach the GPU and fault. */
static void test_ops_refuse_misaligned(void **state)
{
    (void)state;
    tl_vadd_desc d = {.dtype = TL_F16, .n = 100};
    assert_status(tl_op_vadd(ctx, &d, 0x10000, 0x20001, 0x30000, NULL), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "tl_op_vadd: b = 0x20001 is not aligned to its 2-byte elements"));
    assert_status(tl_op_vadd(ctx, &d, 0x10000, 0, 0x30000, NULL), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "tl_op_vadd: b is a null device pointer"));
    assert_status(tl_op_bias_act(ctx, TL_F32, 4, 4, 0x10002, 0, TL_EPI_RELU, NULL), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "tl_op_bias_act: c = 0x10002 is not aligned"));
    assert_status(tl_op_bias_act(ctx, TL_F32, 4, 4, 0x10000, 0x20001, TL_EPI_RELU, NULL), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "tl_op_bias_act: bias = 0x20001 is not aligned"));
    tl_gemm_desc g = {.m = 16, .n = 16, .k = 16, .in_dtype = TL_BF16, .out_dtype = TL_F32};
    assert_status(tl_op_gemm(ctx, &g, 0x10000, 0x20000, 0, 0x30002, NULL), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "tl_op_gemm: c = 0x30002 is not aligned to its 4-byte elements"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_negative_extent),
        cmocka_unit_test(test_negative_stride),
        cmocka_unit_test(test_span_overflow),
        cmocka_unit_test(test_null_pointer),
        cmocka_unit_test(test_misaligned_pointer),
        cmocka_unit_test(test_null_argument_array),
        cmocka_unit_test(test_ops_refuse_misaligned),
    };
    return cmocka_run_group_tests_name("launch_args", tests, offline_setup, ctx_teardown);
}
