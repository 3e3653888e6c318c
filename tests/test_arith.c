/* test_arith.c - integer arithmetic is defined everywhere: constant folding
 * reports overflow and division by a constant 0 as build errors (it used to
 * raise SIGFPE or overflow a signed integer), the interpreter wraps and
 * never traps, and i32/i64 mix in every operation, max and min included. */
#include "fixture.h"

#include <limits.h>

/* A kernel with i64 scalars X and Y and a one-element i64 tensor OUT,
 * grid 1 x 32 threads, ready for one store. */
typedef struct scalar_kernel {
    tl_kernel *k;
    tl_expr x, y;
    tl_buf out;
} scalar_kernel;

static scalar_kernel scalar_kernel_new(tl_dtype dt)
{
    scalar_kernel s;
    s.k = tl_kernel_new(ctx, "arith");
    assert_non_null(s.k);
    s.x = tl_param_scalar(s.k, "X", dt);
    s.y = tl_param_scalar(s.k, "Y", dt);
    tl_expr one = tl_int(s.k, 1);
    s.out = tl_param_tensor(s.k, "OUT", TL_I64, 1, &one, NULL);
    tl_grid(s.k, TL_NONE_EXPR, TL_NONE_EXPR, TL_NONE_EXPR, 32);
    return s;
}

/* Stores value (cast to i64) to OUT[0] and interprets with X = x, Y = y. */
static int64_t run_scalar(scalar_kernel *s, tl_expr value, int64_t x, int64_t y)
{
    tl_expr zero = tl_int(s->k, 0);
    tl_store(s->k, s->out, &zero, tl_cast(s->k, value, TL_I64));
    int64_t out = 12345;
    tl_arg args[] = {tl_arg_int(x), tl_arg_int(y), tl_arg_hptr(&out)};
    assert_status(tl_interpret(s->k, 3, args), TL_OK);
    tl_kernel_destroy(s->k);
    return out;
}

/* A binary builder call on two constants fails with TL_ERR_INVALID_ARG and
 * a message naming it. */
typedef tl_expr (*binary_fn)(tl_kernel *, tl_expr, tl_expr);

static void expect_fold_error(binary_fn fn, const char *api, tl_expr (*mk)(tl_kernel *, int64_t), int64_t a,
                              int64_t b, const char *fragment)
{
    tl_kernel *k = tl_kernel_new(ctx, "fold");
    tl_expr r = fn(k, mk(k, a), mk(k, b));
    assert_true(tl_expr_is_null(r));
    assert_status(tl_kernel_status(k), TL_ERR_INVALID_ARG);
    const char *msg = tl_kernel_error(k);
    if (strncmp(msg, api, strlen(api)) != 0 || !strstr(msg, fragment))
        fail_msg("message '%s' should start with %s and mention '%s'", msg, api, fragment);
    tl_kernel_destroy(k);
}

static tl_expr mk_i64(tl_kernel *k, int64_t v) { return tl_int(k, v); }
static tl_expr mk_i32(tl_kernel *k, int64_t v) { return tl_i32(k, (int32_t)v); }

/* The constant a kernel folded an expression to, read back through the
 * interpreter (a folded constant needs no parameter). */
static int64_t folded(tl_expr (*build)(tl_kernel *))
{
    scalar_kernel s = scalar_kernel_new(TL_I64);
    tl_expr v = build(s.k);
    assert_status(tl_kernel_status(s.k), TL_OK);
    return run_scalar(&s, v, 0, 0);
}

static tl_expr ceil_neg7_2(tl_kernel *k) { return tl_ceildiv(k, tl_int(k, -7), tl_int(k, 2)); }
static tl_expr div_neg7_2(tl_kernel *k) { return tl_div(k, tl_int(k, -7), tl_int(k, 2)); }
static tl_expr mod_neg7_2(tl_kernel *k) { return tl_mod(k, tl_int(k, -7), tl_int(k, 2)); }
static tl_expr div_min_1(tl_kernel *k) { return tl_div(k, tl_int(k, INT64_MIN), tl_int(k, 1)); }
static tl_expr abs_min_plus_1(tl_kernel *k) { return tl_abs(k, tl_int(k, INT64_MIN + 1)); }

static void test_fold_overflow_is_an_error(void **state)
{
    (void)state;
    /* These raised SIGFPE in the folding. */
    expect_fold_error(tl_div, "tl_div", mk_i64, INT64_MIN, -1, "overflows i64");
    expect_fold_error(tl_mod, "tl_mod", mk_i64, INT64_MIN, -1, "overflows i64");
    /* These overflowed a signed integer (undefined behaviour). */
    expect_fold_error(tl_add, "tl_add", mk_i64, INT64_MAX, 1, "overflows i64");
    expect_fold_error(tl_sub, "tl_sub", mk_i64, INT64_MIN, 1, "overflows i64");
    expect_fold_error(tl_mul, "tl_mul", mk_i64, INT64_MAX / 2 + 1, 2, "overflows i64");
    expect_fold_error(tl_ceildiv, "tl_ceildiv", mk_i64, INT64_MAX, 2, "overflows i64");
    /* i32 constants fold in i32: these were silently truncated. */
    expect_fold_error(tl_add, "tl_add", mk_i32, INT32_MAX, 1, "overflows i32");
    expect_fold_error(tl_mul, "tl_mul", mk_i32, 65536, 65536, "overflows i32");
    expect_fold_error(tl_div, "tl_div", mk_i32, INT32_MIN, -1, "overflows i32");
    /* A division by the constant 0 is a bug of the kernel, said at once. */
    expect_fold_error(tl_div, "tl_div", mk_i64, 7, 0, "division by the constant 0");
    expect_fold_error(tl_mod, "tl_mod", mk_i64, 7, 0, "division by the constant 0");
    expect_fold_error(tl_ceildiv, "tl_ceildiv", mk_i64, 7, 0, "division by the constant 0");
}

static void test_fold_neg_abs_overflow(void **state)
{
    (void)state;
    tl_expr (*const fns[])(tl_kernel *, tl_expr) = {tl_neg, tl_abs};
    const char *names[] = {"tl_neg", "tl_abs"};
    for (int f = 0; f < 2; f++)
        for (int w = 0; w < 2; w++) {
            tl_kernel *k = tl_kernel_new(ctx, "fold");
            tl_expr c = w ? tl_i32(k, INT32_MIN) : tl_int(k, INT64_MIN);
            assert_true(tl_expr_is_null(fns[f](k, c)));
            assert_status(tl_kernel_status(k), TL_ERR_INVALID_ARG);
            if (strncmp(tl_kernel_error(k), names[f], strlen(names[f])) != 0 || !strstr(tl_kernel_error(k), "overflows"))
                fail_msg("message '%s'", tl_kernel_error(k));
            tl_kernel_destroy(k);
        }
}

static void test_fold_values(void **state)
{
    (void)state;
    /* The fold computes what the operation does at run time. */
    assert_int_equal(folded(ceil_neg7_2), -3); /* (-7 + 2 - 1) / 2 */
    assert_int_equal(folded(div_neg7_2), -3);  /* truncation toward 0 */
    assert_int_equal(folded(mod_neg7_2), -1);
    assert_int_equal(folded(div_min_1), INT64_MIN);
    assert_int_equal(folded(abs_min_plus_1), INT64_MAX);
}

/* The interpreter's integer arithmetic: wrap-around, no trap. */
static void test_interp_ceildiv_no_trap(void **state)
{
    (void)state;
    /* x + y - 1 is INT64_MIN, then / -1: SIGFPE before. */
    scalar_kernel s = scalar_kernel_new(TL_I64);
    assert_int_equal(run_scalar(&s, tl_ceildiv(s.k, s.x, s.y), INT64_MIN + 2, -1), INT64_MIN);
    s = scalar_kernel_new(TL_I64);
    assert_int_equal(run_scalar(&s, tl_div(s.k, s.x, s.y), INT64_MIN, -1), INT64_MIN);
    s = scalar_kernel_new(TL_I64);
    assert_int_equal(run_scalar(&s, tl_mod(s.k, s.x, s.y), INT64_MIN, -1), 0);
    s = scalar_kernel_new(TL_I64);
    assert_int_equal(run_scalar(&s, tl_div(s.k, s.x, s.y), 5, 0), 0);
    s = scalar_kernel_new(TL_I32);
    assert_int_equal(run_scalar(&s, tl_div(s.k, s.x, s.y), INT32_MIN, -1), INT32_MIN);
}

static void test_interp_wraps(void **state)
{
    (void)state;
    scalar_kernel s = scalar_kernel_new(TL_I64);
    assert_int_equal(run_scalar(&s, tl_add(s.k, s.x, s.y), INT64_MAX, 1), INT64_MIN);
    s = scalar_kernel_new(TL_I64);
    assert_int_equal(run_scalar(&s, tl_mul(s.k, s.x, s.y), INT64_MAX, 2), -2);
    s = scalar_kernel_new(TL_I64);
    assert_int_equal(run_scalar(&s, tl_neg(s.k, s.x), INT64_MIN, 0), INT64_MIN);
    s = scalar_kernel_new(TL_I64);
    assert_int_equal(run_scalar(&s, tl_abs(s.k, s.x), INT64_MIN, 0), INT64_MIN);
    s = scalar_kernel_new(TL_I32);
    assert_int_equal(run_scalar(&s, tl_add(s.k, s.x, s.y), INT32_MAX, 1), INT32_MIN);
}

/* tl_max / tl_min of an i32 and an i64: accepted by the builder, they used
 * to reach NVRTC as tl_max(int, long long), which no template matches. */
static tl_kernel *max_min_kernel(void)
{
    tl_kernel *k = tl_kernel_new(ctx, "maxmin");
    tl_expr a = tl_param_scalar(k, "A", TL_I32), n = tl_dim(k, "N");
    tl_expr two = tl_int(k, 2);
    tl_buf out = tl_param_tensor(k, "OUT", TL_I64, 1, &two, NULL);
    tl_grid(k, TL_NONE_EXPR, TL_NONE_EXPR, TL_NONE_EXPR, 32);
    tl_expr i0 = tl_int(k, 0), i1 = tl_int(k, 1);
    tl_store(k, out, &i0, tl_max(k, a, n));
    tl_store(k, out, &i1, tl_min(k, n, a));
    assert_status(tl_kernel_status(k), TL_OK);
    return k;
}

static void test_max_min_mixed_ints(void **state)
{
    (void)state;
    tl_kernel *k = max_min_kernel();
    int64_t out[2] = {0, 0};
    tl_arg args[] = {tl_arg_int(-3), tl_arg_int(7), tl_arg_hptr(out)};
    assert_status(tl_interpret(k, 3, args), TL_OK);
    assert_int_equal(out[0], 7);
    assert_int_equal(out[1], -3);
    test_ptx_or_skip(ctx, k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fold_overflow_is_an_error),
        cmocka_unit_test(test_fold_neg_abs_overflow),
        cmocka_unit_test(test_fold_values),
        cmocka_unit_test(test_interp_ceildiv_no_trap),
        cmocka_unit_test(test_interp_wraps),
        cmocka_unit_test(test_max_min_mixed_ints),
    };
    return cmocka_run_group_tests_name("arith", tests, offline_setup, ctx_teardown);
}
