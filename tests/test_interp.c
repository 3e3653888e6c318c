/* test_interp.c - the CPU interpreter (golden model) against independent
 * references written in C, at aligned and ragged sizes; plus the checker
 * and the host random generator it relies on. */
#include "fixture.h"

#include "kernels.h"

#include <math.h>


/* The sum as the device computes it: in f32, rounded to dt. */
static double add_in(tl_dtype dt, double a, double b)
{
    float s = (float)a + (float)b;
    switch (dt) {
    case TL_F16: return tl_f16_to_f32(tl_f32_to_f16(s));
    case TL_BF16: return tl_bf16_to_f32(tl_f32_to_bf16(s));
    default: return s;
    }
}

static void check_vadd(tl_dtype dt, int64_t n, uint64_t seed)
{
    tl_kernel *k;
    assert_status(tl_op_build(ctx, "vadd", dt, &k), TL_OK);
    size_t sz = tl_dtype_size(dt);
    void *a = malloc((size_t)n * sz + 1), *b = malloc((size_t)n * sz + 1), *c = malloc((size_t)n * sz + 1);
    assert_status(tl_random_host(a, dt, n, seed, -2, 2), TL_OK);
    assert_status(tl_random_host(b, dt, n, seed + 1, -2, 2), TL_OK);
    memset(c, 0xFF, (size_t)n * sz); /* poison: NaN in every float type */
    tl_arg args[] = {tl_arg_int(n), tl_arg_hptr(a), tl_arg_hptr(b), tl_arg_hptr(c)};
    assert_status(tl_interpret(k, 4, args), TL_OK);
    for (int64_t i = 0; i < n; i++) {
        double want = add_in(dt, test_elem(dt, a, i), test_elem(dt, b, i));
        if (test_elem(dt, c, i) != want)
            fail_msg("vadd %s n=%lld: c[%lld] = %g, want %g", tl_dtype_name(dt), (long long)n, (long long)i,
                     test_elem(dt, c, i), want);
    }
    free(a);
    free(b);
    free(c);
    tl_kernel_destroy(k);
}

static void test_vadd_all_dtypes_ragged(void **state)
{
    (void)state;
    const tl_dtype dts[] = {TL_F32, TL_F16, TL_BF16};
    const int64_t sizes[] = {1, 7, 4096, 4097, 10007, 3 * 8192 + 5};
    for (int d = 0; d < 3; d++)
        for (int s = 0; s < 6; s++)
            check_vadd(dts[d], sizes[s], 100 + (uint64_t)s);
}

static void test_vadd_zero_length(void **state)
{
    (void)state;
    tl_kernel *k;
    assert_status(tl_op_build(ctx, "vadd", TL_F32, &k), TL_OK);
    float dummy = 42;
    tl_arg args[] = {tl_arg_int(0), tl_arg_hptr(&dummy), tl_arg_hptr(&dummy), tl_arg_hptr(&dummy)};
    assert_status(tl_interpret(k, 4, args), TL_OK);
    assert_true(dummy == 42);
    tl_kernel_destroy(k);
}

static void test_wrong_arguments(void **state)
{
    (void)state;
    tl_kernel *k;
    assert_status(tl_op_build(ctx, "vadd", TL_F32, &k), TL_OK);
    float x[4];
    tl_arg few[] = {tl_arg_int(4), tl_arg_hptr(x)};
    assert_status(tl_interpret(k, 2, few), TL_ERR_LAUNCH_ARGS);
    assert_non_null(strstr(tl_ctx_error(ctx), "takes 4 arguments"));
    tl_arg swapped[] = {tl_arg_hptr(x), tl_arg_int(4), tl_arg_hptr(x), tl_arg_hptr(x)};
    assert_status(tl_interpret(k, 4, swapped), TL_ERR_LAUNCH_ARGS);
    assert_non_null(strstr(tl_ctx_error(ctx), "'N'"));
    tl_arg negative[] = {tl_arg_int(-1), tl_arg_hptr(x), tl_arg_hptr(x), tl_arg_hptr(x)};
    assert_status(tl_interpret(k, 4, negative), TL_ERR_LAUNCH_ARGS);
    tl_arg device[] = {tl_arg_int(4), tl_arg_dptr(16), tl_arg_hptr(x), tl_arg_hptr(x)};
    assert_status(tl_interpret(k, 4, device), TL_ERR_LAUNCH_ARGS);
    assert_status(tl_interpret(k, 4, NULL), TL_ERR_LAUNCH_ARGS);
    tl_kernel_destroy(k);
}

static void test_axpby_2d_strided(void **state)
{
    (void)state;
    tl_kernel *k = zoo_axpby_2d(ctx);
    assert_status(tl_kernel_status(k), TL_OK);
    const int64_t shapes[][3] = {{4, 64, 64}, {13, 100, 131}, {1, 1, 1}, {33, 257, 300}};
    for (int s = 0; s < 4; s++) {
        int64_t M = shapes[s][0], N = shapes[s][1], ldx = shapes[s][2];
        float *X = malloc(sizeof(float) * (size_t)(M * ldx));
        uint16_t *Y = malloc(2 * (size_t)(M * N));
        double *R = malloc(sizeof(double) * (size_t)(M * N));
        tl_random_host(X, TL_F32, M * ldx, 7 + (uint64_t)s, -3, 3);
        memset(Y, 0xFF, 2 * (size_t)(M * N));
        float alpha = 0.75f;
        tl_arg args[] = {tl_arg_int(M), tl_arg_int(N), tl_arg_int(ldx), tl_arg_float(alpha), tl_arg_hptr(X),
                         tl_arg_hptr(Y)};
        assert_status(tl_interpret(k, 6, args), TL_OK);
        zoo_axpby_2d_ref(M, N, ldx, alpha, X, R);
        tl_span out = {.dtype = TL_BF16, .n = M * N, .host = Y}, ref = {.dtype = TL_F64, .n = M * N, .host = R};
        tl_check_result res;
        assert_status(tl_check(NULL, &out, &ref, 1e-2, &res), TL_OK);
        if (!res.pass)
            fail_msg("axpby %lldx%lld: rel %g first bad %lld", (long long)M, (long long)N, res.rel_err,
                     (long long)res.first_bad);
        assert_true(res.rel_err < 4e-3); /* bf16 rounding: about 2^-9 */
        free(X);
        free(Y);
        free(R);
    }
    tl_kernel_destroy(k);
}

static void test_rowsum_serial(void **state)
{
    (void)state;
    tl_kernel *k = zoo_rowsum(ctx);
    int64_t M = 9, N = 333;
    float *X = malloc(sizeof(float) * (size_t)(M * N)), S[9];
    double R[9];
    tl_random_host(X, TL_F32, M * N, 3, -1, 1);
    memset(S, 0xFF, sizeof S);
    tl_arg args[] = {tl_arg_int(M), tl_arg_int(N), tl_arg_hptr(X), tl_arg_hptr(S)};
    assert_status(tl_interpret(k, 4, args), TL_OK);
    zoo_rowsum_ref(M, N, X, R);
    tl_span out = {.dtype = TL_F32, .n = M, .host = S}, ref = {.dtype = TL_F64, .n = M, .host = R};
    tl_check_result res;
    assert_status(tl_check(NULL, &out, &ref, 1e-5, &res), TL_OK);
    assert_true(res.pass);
    free(X);
    tl_kernel_destroy(k);
}

static void test_mixed_control_and_casts(void **state)
{
    (void)state;
    tl_kernel *k = zoo_mixed(ctx);
    assert_status(tl_kernel_status(k), TL_OK);
    int64_t n = 2000;
    uint16_t *H = malloc(2 * (size_t)n), *G = malloc(2 * (size_t)n);
    float *F = malloc(4 * (size_t)n), *x = malloc(4 * (size_t)n);
    int32_t *I = malloc(4 * (size_t)n), *IR = malloc(4 * (size_t)n);
    double *FR = malloc(8 * (size_t)n), *GR = malloc(8 * (size_t)n);
    tl_random_host(H, TL_F16, n, 11, -4, 4);
    for (int64_t i = 0; i < n; i++)
        x[i] = tl_f16_to_f32(H[i]);
    memset(F, 0xFF, 4 * (size_t)n);
    memset(G, 0xFF, 2 * (size_t)n);
    memset(I, 0xAB, 4 * (size_t)n);
    tl_arg args[] = {tl_arg_int(n), tl_arg_hptr(H), tl_arg_hptr(F), tl_arg_hptr(G), tl_arg_hptr(I)};
    assert_status(tl_interpret(k, 5, args), TL_OK);
    zoo_mixed_ref(n, x, FR, GR, IR);
    tl_check_result res;
    tl_span f = {.dtype = TL_F32, .n = n, .host = F}, fr = {.dtype = TL_F64, .n = n, .host = FR};
    assert_status(tl_check(NULL, &f, &fr, 1e-5, &res), TL_OK);
    assert_true(res.pass);
    tl_span g = {.dtype = TL_F16, .n = n, .host = G}, gr = {.dtype = TL_F64, .n = n, .host = GR};
    assert_status(tl_check(NULL, &g, &gr, 2e-3, &res), TL_OK);
    assert_true(res.pass);
    for (int64_t i = 0; i < n; i++)
        if (I[i] != IR[i])
            fail_msg("I[%lld] = %d, want %d", (long long)i, I[i], IR[i]);
    free(H), free(G), free(F), free(x), free(I), free(IR), free(FR), free(GR);
    tl_kernel_destroy(k);
}

/* zoo_round_once: each value just past a midpoint rounds away from zero, once. */
static void test_round_once(void **state)
{
    (void)state;
    tl_kernel *k = zoo_round_once(ctx);
    assert_status(tl_kernel_status(k), TL_OK);
    enum { n = 300 };
    uint16_t B[n], D[n];
    uint8_t E[n];
    memset(B, 0xFF, sizeof B), memset(D, 0xFF, sizeof D), memset(E, 0xFF, sizeof E);
    tl_arg args[] = {tl_arg_int(n), tl_arg_hptr(B), tl_arg_hptr(D), tl_arg_hptr(E)};
    assert_status(tl_interpret(k, 4, args), TL_OK);
    for (int i = 0; i < n; i++) {
        unsigned sign = i % 2, j = (unsigned)(i % 127), m = (unsigned)(i % 8);
        /* s (2^24 + (j + 1) 2^17), s (1 + (j + 1) / 128), s (1 + (m + 1) / 8) */
        uint16_t b = (uint16_t)(sign << 15 | 151u << 7 | (j + 1)), d = (uint16_t)(sign << 15 | 127u << 7 | (j + 1));
        uint8_t e = (uint8_t)(sign << 7 | ((7u << 3) + m + 1));
        if (B[i] != b || D[i] != d || E[i] != e)
            fail_msg("i = %d: B %#x D %#x E %#x, want %#x %#x %#x", i, B[i], D[i], E[i], b, d, e);
    }
    tl_kernel_destroy(k);
}

static void test_shift_masks_edge(void **state)
{
    (void)state;
    tl_kernel *k = zoo_shift(ctx, TL_F32);
    int64_t n = 1500;
    float *A = malloc(4 * (size_t)n), *D = malloc(4 * (size_t)n);
    tl_random_host(A, TL_F32, n, 5, -1, 1);
    tl_arg args[] = {tl_arg_int(n), tl_arg_hptr(A), tl_arg_hptr(D)};
    assert_status(tl_interpret(k, 3, args), TL_OK);
    for (int64_t i = 0; i + 1 < n; i++)
        assert_true(D[i] == A[i + 1] - A[i]);
    assert_true(D[n - 1] == 0.0f - A[n - 1]); /* A[n] is outside: reads 0 */
    free(A);
    free(D);
    tl_kernel_destroy(k);
}

static void test_smooth_serial_of_parallel(void **state)
{
    (void)state;
    tl_kernel *k = zoo_smooth(ctx);
    enum { B = 3, R = 5, W = 256 };
    float X[B * W], Y[B * W];
    double ref[B * W], tmp[W];
    tl_random_host(X, TL_F32, B * W, 21, -1, 1);
    for (int i = 0; i < B * W; i++)
        ref[i] = X[i];
    for (int b = 0; b < B; b++)
        for (int r = 0; r < R; r++) {
            for (int i = 0; i < W; i++)
                tmp[i] = 0.5 * ref[b * W + (i + 1) % W] + ref[b * W + i];
            for (int i = 0; i < W; i++)
                ref[b * W + i] = tmp[i];
        }
    tl_arg args[] = {tl_arg_int(R), tl_arg_int(B), tl_arg_hptr(X), tl_arg_hptr(Y)};
    assert_status(tl_interpret(k, 4, args), TL_OK);
    tl_span out = {.dtype = TL_F32, .n = B * W, .host = X}, r = {.dtype = TL_F64, .n = B * W, .host = ref};
    tl_check_result res;
    assert_status(tl_check(NULL, &out, &r, 1e-5, &res), TL_OK);
    assert_true(res.pass);
    tl_kernel_destroy(k);
}

/* Fast math changes the generated code only: the interpreter computes the
 * exact functions. */
static void test_fastmath_interpreted_exactly(void **state)
{
    (void)state;
    tl_kernel *k = zoo_fastmath(ctx);
    assert_status(tl_kernel_status(k), TL_OK);
    int64_t n = 777;
    float *X = malloc(4 * (size_t)n), *Y = malloc(4 * (size_t)n);
    double *R = malloc(8 * (size_t)n);
    tl_random_host(X, TL_F32, n, 31, -3, 3);
    memset(Y, 0xFF, 4 * (size_t)n);
    tl_arg args[] = {tl_arg_int(n), tl_arg_hptr(X), tl_arg_hptr(Y)};
    assert_status(tl_interpret(k, 3, args), TL_OK);
    zoo_fastmath_ref(n, X, R);
    tl_span y = {.dtype = TL_F32, .n = n, .host = Y}, r = {.dtype = TL_F64, .n = n, .host = R};
    tl_check_result res;
    assert_status(tl_check(NULL, &y, &r, 1e-6, &res), TL_OK);
    assert_true(res.pass);
    free(X), free(Y), free(R);
    tl_kernel_destroy(k);
}

/* A shared tile read at a neighbour's index, ragged last block (zeros). */
static void test_staged_tile(void **state)
{
    (void)state;
    tl_kernel *k = zoo_staged(ctx);
    assert_status(tl_kernel_status(k), TL_OK);
    const int64_t sizes[] = {1000, 1001, 64, 1};
    for (int s = 0; s < 4; s++) {
        int64_t n = sizes[s];
        float *X = malloc(4 * (size_t)n), *Y = malloc(4 * (size_t)n);
        double *R = malloc(8 * (size_t)n);
        tl_random_host(X, TL_F32, n, 41, -1, 1);
        memset(Y, 0xFF, 4 * (size_t)n);
        tl_arg args[] = {tl_arg_int(n), tl_arg_hptr(X), tl_arg_hptr(Y)};
        assert_status(tl_interpret(k, 3, args), TL_OK);
        zoo_staged_ref(n, X, R);
        for (int64_t i = 0; i < n; i++)
            if (Y[i] != (float)R[i])
                fail_msg("n %lld: Y[%lld] = %g, want %g", (long long)n, (long long)i, Y[i], R[i]);
        free(X), free(Y), free(R);
    }
    tl_kernel_destroy(k);
}

static void test_check_catches_nan_and_error(void **state)
{
    (void)state;
    float out[4] = {1, 2, 3, 4};
    double ref[4] = {1, 2, 3, 4};
    tl_span o = {.dtype = TL_F32, .n = 4, .host = out}, r = {.dtype = TL_F64, .n = 4, .host = ref};
    tl_check_result res;
    assert_status(tl_check(NULL, &o, &r, 1e-6, &res), TL_OK);
    assert_true(res.pass);
    assert_int_equal(res.first_bad, -1);
    out[2] = NAN;
    assert_status(tl_check(NULL, &o, &r, 1e-6, &res), TL_OK);
    assert_false(res.pass);
    assert_int_equal(res.nonfinite, 1);
    assert_int_equal(res.first_bad, 2);
    out[2] = 3;
    out[1] = 2.5f;
    assert_status(tl_check(NULL, &o, &r, 1e-3, &res), TL_OK);
    assert_false(res.pass);
    assert_int_equal(res.first_bad, 1);
    assert_true(fabs(res.max_abs_err - 0.5) < 1e-12);
    assert_true(fabs(res.rel_err - 0.5 / sqrt(30.0)) < 1e-12);
    out[1] = INFINITY;
    assert_status(tl_check(NULL, &o, &r, 1e9, &res), TL_OK);
    assert_false(res.pass);
    tl_span shorter = {.dtype = TL_F32, .n = 3, .host = out};
    assert_status(tl_check(NULL, &shorter, &r, 1e-3, &res), TL_ERR_INVALID_ARG);
}

static void test_random_host_is_deterministic_and_uniform(void **state)
{
    (void)state;
    enum { N = 100000 };
    static float a[N], b[N];
    assert_status(tl_random_host(a, TL_F32, N, 42, -1, 1), TL_OK);
    assert_status(tl_random_host(b, TL_F32, N, 42, -1, 1), TL_OK);
    assert_memory_equal(a, b, sizeof a);
    assert_status(tl_random_host(b, TL_F32, N, 43, -1, 1), TL_OK);
    assert_memory_not_equal(a, b, sizeof a);
    double mean = 0, lo = 1, hi = -1;
    int zeros = 0;
    for (int i = 0; i < N; i++) {
        mean += a[i];
        lo = fmin(lo, a[i]);
        hi = fmax(hi, a[i]);
        zeros += a[i] == 0.0f;
    }
    mean /= N;
    assert_true(fabs(mean) < 0.01);
    assert_true(lo >= -1 && lo < -0.999 && hi < 1 && hi > 0.999);
    assert_true(zeros < 5);
    assert_status(tl_random_host(a, TL_BOOL, 4, 1, 0, 1), TL_ERR_INVALID_ARG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vadd_all_dtypes_ragged),
        cmocka_unit_test(test_vadd_zero_length),
        cmocka_unit_test(test_wrong_arguments),
        cmocka_unit_test(test_axpby_2d_strided),
        cmocka_unit_test(test_rowsum_serial),
        cmocka_unit_test(test_mixed_control_and_casts),
        cmocka_unit_test(test_round_once),
        cmocka_unit_test(test_shift_masks_edge),
        cmocka_unit_test(test_smooth_serial_of_parallel),
        cmocka_unit_test(test_fastmath_interpreted_exactly),
        cmocka_unit_test(test_staged_tile),
        cmocka_unit_test(test_check_catches_nan_and_error),
        cmocka_unit_test(test_random_host_is_deterministic_and_uniform),
    };
    return cmocka_run_group_tests_name("interpreter", tests, offline_setup, ctx_teardown);
}
