/* test_bias_act.c - the separate bias + activation kernel (tl_op_bias_act_build)
 * through the CPU interpreter against a double-precision reference written
 * here, at ragged sizes, in place and out of place; its cubins for sm_80
 * and sm_90a; and the argument checks of tl_op_bias_act and tl_baseline_gemm
 * that need no GPU. */
#include "fixture.h"

#include <math.h>
#include <stdbool.h>


static const tl_dtype dtypes[] = {TL_F32, TL_BF16, TL_F16};
static const tl_epilogue epis[] = {TL_EPI_NONE, TL_EPI_RELU, TL_EPI_GELU_ERF, TL_EPI_GELU_TANH};

/* Tolerance of the comparison: the output's rounding (computed in f32). */
static double tol_for(tl_dtype dt) { return dt == TL_F32 ? 1e-5 : dt == TL_F16 ? 2e-3 : 1e-2; }

#define PAD 64 /* poisoned elements after Y that must stay untouched */

/* Runs the kernel in the interpreter on m x n and checks it. In place: X
 * and Y are one buffer; else X must come back unchanged and Y's padding
 * poisoned. */
static void check_case(tl_dtype dt, tl_epilogue epi, int has_bias, int64_t m, int64_t n, bool in_place,
                       uint64_t seed)
{
    tl_kernel *k;
    assert_status(tl_op_bias_act_build(ctx, dt, epi, has_bias, &k), TL_OK);
    size_t sz = tl_dtype_size(dt), elems = (size_t)(m * n);
    unsigned char *x = malloc(elems * sz + 1), *x0 = malloc(elems * sz + 1);
    unsigned char *y = malloc((elems + PAD) * sz), *bias = malloc((size_t)n * sz + 1);
    double *ref = malloc((elems ? elems : 1) * sizeof *ref);
    assert_true(x && x0 && y && bias && ref);
    assert_status(tl_random_host(x, dt, (int64_t)elems, seed, -4, 4), TL_OK);
    assert_status(tl_random_host(bias, dt, n, seed + 1, -1, 1), TL_OK);
    memcpy(x0, x, elems * sz);
    memset(y, 0xFF, (elems + PAD) * sz); /* NaN in every float type */
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double v = test_elem(dt, x, i * n + j) + (has_bias ? test_elem(dt, bias, j) : 0.0);
            ref[i * n + j] = test_act(epi, v);
        }
    void *out = in_place ? (void *)x : (void *)y;
    tl_arg args[5];
    int nargs = 0;
    args[nargs++] = tl_arg_int(m);
    args[nargs++] = tl_arg_int(n);
    args[nargs++] = tl_arg_hptr(x);
    if (has_bias)
        args[nargs++] = tl_arg_hptr(bias);
    args[nargs++] = tl_arg_hptr(out);
    tl_status st = tl_interpret(k, nargs, args);
    if (st != TL_OK)
        fail_msg("interpret: %s: %s", tl_status_name(st), tl_ctx_error(ctx));
    tl_span o = {.dtype = dt, .n = (int64_t)elems, .host = out};
    tl_span r = {.dtype = TL_F64, .n = (int64_t)elems, .host = ref};
    tl_check_result res;
    assert_status(tl_check(NULL, &o, &r, tol_for(dt), &res), TL_OK);
    if (!res.pass || res.first_bad >= 0)
        fail_msg("bias_act %s %d bias=%d %lldx%lld %s: rel %g max abs %g first bad %lld (got %g want %g)",
                 tl_dtype_name(dt), (int)epi, has_bias, (long long)m, (long long)n, in_place ? "in place" : "",
                 res.rel_err, res.max_abs_err, (long long)res.first_bad,
                 res.first_bad >= 0 ? test_elem(dt, out, res.first_bad) : 0.0,
                 res.first_bad >= 0 ? ref[res.first_bad] : 0.0);
    if (!in_place) {
        assert_memory_equal(x, x0, elems * sz);
        for (size_t b = elems * sz; b < (elems + PAD) * sz; b++)
            assert_int_equal(y[b], 0xFF);
    }
    free(x), free(x0), free(y), free(bias), free(ref);
    tl_kernel_destroy(k);
}

static void test_interpreter_against_reference(void **state)
{
    (void)state;
    /* ragged on both axes, less than a tile, several tiles */
    const int64_t sizes[][2] = {{1, 1}, {3, 17}, {37, 300}, {33, 520}};
    uint64_t seed = 500;
    for (int d = 0; d < 3; d++)
        for (int e = 0; e < 4; e++)
            for (int b = 0; b < 2; b++)
                for (int s = 0; s < 4; s++, seed += 2)
                    check_case(dtypes[d], epis[e], b, sizes[s][0], sizes[s][1], (s + e + b) % 2 == 0, seed);
}

/* Every configuration compiles with NVRTC for both targets, and the loads
 * of X and bias are vectorised (X is not written: Y is another parameter,
 * even when it is the same memory). */
static void test_cubins_sm80_sm90a(void **state)
{
    (void)state;
    int maj = 0;
    tl_runtime_versions(NULL, &maj, NULL, NULL, 0);
    if (!maj) {
        printf("  skip: NVRTC cannot be loaded\n");
        skip();
    }
    const char *targets[] = {"sm_80", "sm_90a"};
    for (int d = 0; d < 3; d++)
        for (int e = 0; e < 4; e++)
            for (int b = 0; b < 2; b++)
                for (int t = 0; t < 2; t++) {
                    if (t == 0 && e != TL_EPI_GELU_ERF && e != TL_EPI_NONE)
                        continue; /* sm_80: enough to see each dtype and the erf */
                    tl_kernel *k;
                    assert_status(tl_op_bias_act_build(ctx, dtypes[d], epis[e], b, &k), TL_OK);
                    tl_compile_options o = {.target = targets[t]};
                    tl_program *p = NULL;
                    tl_status st = tl_compile(k, &o, &p);
                    if (st != TL_OK)
                        fail_msg("%s %s: %s", targets[t], tl_status_name(st), tl_ctx_error(ctx));
                    size_t bytes = 0;
                    assert_non_null(tl_program_cubin(p, &bytes));
                    assert_true(bytes > 0);
                    tl_program_destroy(p);
                    tl_kernel_destroy(k);
                }
    tl_kernel *k;
    assert_status(tl_op_bias_act_build(ctx, TL_BF16, TL_EPI_GELU_TANH, 1, &k), TL_OK);
    char *ptx = NULL;
    assert_status(tl_kernel_ptx(k, "sm_90a", &ptx), TL_OK);
    assert_non_null(strstr(ptx, "ld.global.v4"));
    tl_free_host(ptx);
    tl_kernel_destroy(k);
}

static void test_launch_parameters(void **state)
{
    (void)state;
    tl_kernel *k;
    assert_status(tl_op_bias_act_build(ctx, TL_F16, TL_EPI_RELU, 1, &k), TL_OK);
    char *src = NULL;
    assert_status(tl_kernel_source(k, NULL, &src), TL_OK);
    assert_non_null(strstr(src, "bias_act_f16_relu_bias"));
    tl_free_host(src);
    /* M, N, X, bias, Y: five arguments; four is an error */
    tl_arg args[4] = {tl_arg_int(1), tl_arg_int(1), tl_arg_hptr(NULL), tl_arg_hptr(NULL)};
    assert_status(tl_interpret(k, 4, args), TL_ERR_LAUNCH_ARGS);
    tl_kernel_destroy(k);
}

static void test_errors(void **state)
{
    (void)state;
    tl_kernel *k = (tl_kernel *)0x1;
    assert_status(tl_op_bias_act_build(ctx, TL_I32, TL_EPI_NONE, 0, &k), TL_ERR_DTYPE);
    assert_null(k);
    assert_status(tl_op_bias_act_build(ctx, TL_F32, (tl_epilogue)99, 0, &k), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "epilogue"));
    assert_status(tl_op_bias_act_build(ctx, TL_F32, TL_EPI_NONE, 0, NULL), TL_ERR_INVALID_ARG);
    assert_status(tl_op_bias_act_build(NULL, TL_F32, TL_EPI_NONE, 0, &k), TL_ERR_INVALID_ARG);

    assert_status(tl_op_bias_act(ctx, TL_F64, 4, 4, 256, 0, TL_EPI_NONE, NULL), TL_ERR_DTYPE);
    assert_status(tl_op_bias_act(ctx, TL_BF16, -1, 4, 256, 0, TL_EPI_NONE, NULL), TL_ERR_INVALID_ARG);
    assert_status(tl_op_bias_act(ctx, TL_BF16, 4, 4, 0, 0, TL_EPI_NONE, NULL), TL_ERR_INVALID_ARG);
    assert_status(tl_op_bias_act(ctx, TL_BF16, 4, 4, 256, 0, TL_EPI_GELU_ERF, NULL), TL_ERR_NO_DEVICE);
    assert_non_null(strstr(tl_ctx_error(ctx), "no device"));
    assert_status(tl_op_bias_act(NULL, TL_BF16, 4, 4, 256, 0, TL_EPI_NONE, NULL), TL_ERR_INVALID_ARG);
}

/* What tl_baseline_gemm says without a GPU: the arguments are checked
 * first, then the device. */
static void test_baseline_offline(void **state)
{
    (void)state;
    tl_gemm_desc d = {.m = 64, .n = 64, .k = 64, .in_dtype = TL_BF16, .out_dtype = TL_BF16};
    assert_status(tl_baseline_gemm(ctx, &d, 256, 256, 0, 256, NULL), TL_ERR_NO_DEVICE);
    assert_non_null(strstr(tl_ctx_error(ctx), "no device"));
    d.epilogue = TL_EPI_GELU_ERF;
    assert_status(tl_baseline_gemm(ctx, &d, 256, 256, 0, 256, NULL), TL_ERR_UNSUPPORTED);
    assert_non_null(strstr(tl_ctx_error(ctx), "tanh"));
    d.epilogue = TL_EPI_NONE;
    d.out_dtype = TL_F16;
    assert_status(tl_baseline_gemm(ctx, &d, 256, 256, 0, 256, NULL), TL_ERR_UNSUPPORTED);
    d.out_dtype = TL_F32;
    d.in_dtype = TL_F32;
    assert_status(tl_baseline_gemm(ctx, &d, 256, 256, 0, 256, NULL), TL_ERR_DTYPE);
    d.in_dtype = TL_F16;
    d.has_bias = 1;
    assert_status(tl_baseline_gemm(ctx, &d, 256, 256, 0, 256, NULL), TL_ERR_INVALID_ARG);
    d.has_bias = 0;
    d.k = -1;
    assert_status(tl_baseline_gemm(ctx, &d, 256, 256, 0, 256, NULL), TL_ERR_INVALID_ARG);
    d.k = 64;
    assert_status(tl_baseline_gemm(ctx, &d, 256, 0, 0, 256, NULL), TL_ERR_INVALID_ARG);
    assert_status(tl_baseline_gemm(ctx, NULL, 256, 256, 0, 256, NULL), TL_ERR_INVALID_ARG);
    assert_status(tl_baseline_gemm(NULL, &d, 256, 256, 0, 256, NULL), TL_ERR_INVALID_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interpreter_against_reference),
        cmocka_unit_test(test_cubins_sm80_sm90a),
        cmocka_unit_test(test_launch_parameters),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_baseline_offline),
    };
    return cmocka_run_group_tests_name("bias_act", tests, offline_setup, ctx_teardown);
}
