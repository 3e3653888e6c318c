/* test_builder.c - the builder's argument checks and first-error latching:
 * every misuse yields a status and a message naming the call, and nothing
 * crashes or prints. */
#include "util.h"

typedef struct fixture {
    tl_ctx *ctx;
    tl_kernel *k;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->ctx = test_offline_ctx("sm_90a");
    f->k = tl_kernel_new(f->ctx, "k");
    assert_non_null(f->k);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    tl_kernel_destroy(f->k);
    tl_ctx_destroy(f->ctx);
    free(f);
    return 0;
}

/* tl_compile fails with `want`, which is then the kernel's first error, with
 * a message that starts with `api` (the call that failed) and is also on the
 * context. */
static void expect_error(fixture *f, tl_status want, const char *api, const char *fragment)
{
    tl_program *p = (tl_program *)0x1;
    assert_status(tl_compile(f->k, NULL, &p), want);
    assert_null(p);
    assert_status(tl_kernel_status(f->k), want);
    const char *msg = tl_kernel_error(f->k);
    if (strncmp(msg, api, strlen(api)) != 0)
        fail_msg("message '%s' does not name %s", msg, api);
    if (fragment && !strstr(msg, fragment))
        fail_msg("message '%s' lacks '%s'", msg, fragment);
    assert_non_null(strstr(tl_ctx_error(f->ctx), api));
}

/* A minimal valid prologue: N, A[N], grid. */
static tl_buf prologue(fixture *f, tl_expr *n)
{
    *n = tl_dim(f->k, "N");
    tl_buf a = tl_param_tensor(f->k, "A", TL_F32, 1, n, NULL);
    tl_grid(f->k, tl_ceildiv(f->k, *n, tl_int(f->k, 256)), TL_NONE_EXPR, TL_NONE_EXPR, 256);
    return a;
}

static void test_valid_kernel_compiles_to_source(void **state)
{
    fixture *f = *state;
    tl_expr n;
    tl_buf a = prologue(f, &n);
    tl_expr i = tl_add(f->k, tl_mul(f->k, tl_block_idx(f->k, 0), tl_int(f->k, 256)), tl_parallel1(f->k, 256));
    tl_store(f->k, a, &i, tl_mul(f->k, tl_load(f->k, a, &i), tl_f32(f->k, 2.0f)));
    tl_end(f->k);
    assert_status(tl_kernel_status(f->k), TL_OK);
    assert_string_equal(tl_kernel_error(f->k), "");
    char *src = NULL;
    assert_status(tl_kernel_source(f->k, NULL, &src), TL_OK);
    assert_non_null(strstr(src, "extern \"C\" __global__"));
    tl_free_host(src);
}

static void test_null_kernel_calls_do_not_crash(void **state)
{
    (void)state;
    tl_expr e = tl_int(NULL, 1);
    assert_true(tl_expr_is_null(e));
    tl_end(NULL);
    tl_store(NULL, TL_NONE_BUF, NULL, e);
    assert_status(tl_kernel_status(NULL), TL_ERR_INVALID_ARG);
    assert_null(tl_kernel_new(NULL, "x"));
    tl_program *p;
    assert_status(tl_compile(NULL, NULL, &p), TL_ERR_INVALID_ARG);
}

static void test_bad_kernel_name(void **state)
{
    fixture *f = *state;
    assert_null(tl_kernel_new(f->ctx, "9lives"));
    assert_non_null(strstr(tl_ctx_error(f->ctx), "tl_kernel_new"));
    assert_null(tl_kernel_new(f->ctx, NULL));
}

static void test_null_expression_operand(void **state)
{
    fixture *f = *state;
    tl_expr x = tl_add(f->k, tl_int(f->k, 1), TL_NONE_EXPR);
    assert_true(tl_expr_is_null(x));
    expect_error(f, TL_ERR_INVALID_ARG, "tl_add", "null");
}

static void test_foreign_handle(void **state)
{
    fixture *f = *state;
    tl_kernel *other = tl_kernel_new(f->ctx, "other");
    tl_expr e = tl_int(other, 3);
    tl_expr x = tl_mul(f->k, tl_int(f->k, 2), e);
    assert_true(tl_expr_is_null(x));
    expect_error(f, TL_ERR_INVALID_ARG, "tl_mul", "another kernel");
    assert_status(tl_kernel_status(other), TL_OK);
    tl_kernel_destroy(other);
}

static void test_dtype_mismatch(void **state)
{
    fixture *f = *state;
    tl_expr x = tl_add(f->k, tl_f32(f->k, 1), tl_float(f->k, 1, TL_BF16));
    assert_true(tl_expr_is_null(x));
    expect_error(f, TL_ERR_DTYPE, "tl_add", "bf16");
}

static void test_int_and_float_do_not_mix(void **state)
{
    fixture *f = *state;
    tl_add(f->k, tl_f32(f->k, 1), tl_int(f->k, 1));
    expect_error(f, TL_ERR_DTYPE, "tl_add", NULL);
}

static void test_i32_i64_promote(void **state)
{
    fixture *f = *state;
    tl_expr n;
    tl_buf a = prologue(f, &n);
    (void)a;
    tl_expr x = tl_add(f->k, tl_i32(f->k, 1), n);
    assert_false(tl_expr_is_null(x));
    assert_status(tl_kernel_status(f->k), TL_OK);
}

static void test_store_dtype_mismatch(void **state)
{
    fixture *f = *state;
    tl_expr n;
    tl_buf a = prologue(f, &n);
    tl_expr i = tl_parallel1(f->k, 256);
    tl_store(f->k, a, &i, tl_float(f->k, 1.0, TL_F16));
    expect_error(f, TL_ERR_DTYPE, "tl_store", "tl_cast");
}

static void test_wrong_rank_and_bad_rank(void **state)
{
    fixture *f = *state;
    tl_expr n = tl_dim(f->k, "N");
    tl_buf b = tl_param_tensor(f->k, "B", TL_F32, 5, (tl_expr[]){n, n, n, n, n}, NULL);
    assert_true(tl_buf_is_null(b));
    expect_error(f, TL_ERR_SHAPE, "tl_param_tensor", "rank 5");
}

static void test_float_extent_rejected(void **state)
{
    fixture *f = *state;
    tl_expr x = tl_f32(f->k, 4);
    tl_buf b = tl_param_tensor(f->k, "B", TL_F32, 1, &x, NULL);
    assert_true(tl_buf_is_null(b));
    expect_error(f, TL_ERR_DTYPE, "tl_param_tensor", "integer");
}

static void test_float_index_rejected(void **state)
{
    fixture *f = *state;
    tl_expr n;
    tl_buf a = prologue(f, &n);
    tl_expr i = tl_f32(f->k, 0);
    tl_load(f->k, a, &i);
    expect_error(f, TL_ERR_DTYPE, "tl_load", "indices are integers");
}

static void test_unclosed_loop(void **state)
{
    fixture *f = *state;
    tl_expr n;
    tl_buf a = prologue(f, &n);
    tl_expr i = tl_parallel1(f->k, 256);
    tl_store(f->k, a, &i, tl_f32(f->k, 1));
    assert_status(tl_kernel_status(f->k), TL_OK);
    expect_error(f, TL_ERR_SCOPE, "tl_compile", "tl_parallel");
}

static void test_end_without_scope(void **state)
{
    fixture *f = *state;
    tl_end(f->k);
    expect_error(f, TL_ERR_SCOPE, "tl_end", NULL);
}

static void test_loop_var_used_after_loop(void **state)
{
    fixture *f = *state;
    tl_expr n;
    tl_buf a = prologue(f, &n);
    tl_expr i = tl_parallel1(f->k, 256);
    tl_store(f->k, a, &i, tl_f32(f->k, 1));
    tl_end(f->k);
    tl_store(f->k, a, &i, tl_f32(f->k, 2));
    expect_error(f, TL_ERR_SCOPE, "tl_store", "outside its loop");
}

static void test_empty_kernel(void **state)
{
    fixture *f = *state;
    tl_expr n;
    prologue(f, &n);
    expect_error(f, TL_ERR_INVALID_ARG, "tl_compile", "empty");
}

static void test_missing_grid(void **state)
{
    fixture *f = *state;
    tl_expr n = tl_dim(f->k, "N");
    tl_buf a = tl_param_tensor(f->k, "A", TL_F32, 1, &n, NULL);
    tl_expr i = tl_int(f->k, 0);
    tl_store(f->k, a, &i, tl_f32(f->k, 1));
    expect_error(f, TL_ERR_INVALID_ARG, "tl_store", "tl_grid");
}

static void test_bad_threads(void **state)
{
    fixture *f = *state;
    tl_grid(f->k, tl_int(f->k, 1), TL_NONE_EXPR, TL_NONE_EXPR, 100);
    expect_error(f, TL_ERR_INVALID_ARG, "tl_grid", "100");
}

static void test_grid_from_loop_var_rejected(void **state)
{
    fixture *f = *state;
    tl_grid(f->k, tl_block_idx(f->k, 0), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    expect_error(f, TL_ERR_INVALID_ARG, "tl_grid", "computable");
}

static void test_duplicate_and_reserved_names(void **state)
{
    fixture *f = *state;
    tl_dim(f->k, "N");
    tl_dim(f->k, "N");
    expect_error(f, TL_ERR_INVALID_ARG, "tl_dim", "already a parameter");
}

static void test_reserved_name(void **state)
{
    fixture *f = *state;
    tl_param_scalar(f->k, "float", TL_F32);
    expect_error(f, TL_ERR_INVALID_ARG, "tl_param_scalar", "float");
}

static void test_nested_parallel_unsupported(void **state)
{
    fixture *f = *state;
    tl_expr n;
    prologue(f, &n);
    tl_parallel1(f->k, 16);
    tl_parallel1(f->k, 16);
    expect_error(f, TL_ERR_UNSUPPORTED, "tl_parallel", NULL);
}

static void test_else_rules(void **state)
{
    fixture *f = *state;
    tl_expr n;
    prologue(f, &n);
    tl_else(f->k);
    expect_error(f, TL_ERR_SCOPE, "tl_else", "tl_if");
}

static void test_if_needs_bool(void **state)
{
    fixture *f = *state;
    tl_expr n;
    prologue(f, &n);
    tl_if(f->k, n);
    expect_error(f, TL_ERR_DTYPE, "tl_if", "bool");
}

static void test_math_on_int_rejected(void **state)
{
    fixture *f = *state;
    tl_exp(f->k, tl_int(f->k, 2));
    expect_error(f, TL_ERR_DTYPE, "tl_exp", "float");
}

static void test_select_branch_types(void **state)
{
    fixture *f = *state;
    tl_expr c = tl_lt(f->k, tl_int(f->k, 1), tl_int(f->k, 2));
    tl_select(f->k, c, tl_f32(f->k, 1), tl_int(f->k, 2));
    expect_error(f, TL_ERR_DTYPE, "tl_select", NULL);
}

static void test_error_latches_first(void **state)
{
    fixture *f = *state;
    tl_exp(f->k, tl_int(f->k, 2));      /* first error: dtype */
    tl_end(f->k);                       /* would be a scope error */
    tl_expr e = tl_int(f->k, 5);        /* every later call does nothing */
    assert_true(tl_expr_is_null(e));
    expect_error(f, TL_ERR_DTYPE, "tl_exp", NULL);
}

static void test_constant_folding(void **state)
{
    fixture *f = *state;
    tl_expr n;
    tl_buf a = prologue(f, &n);
    tl_expr i = tl_parallel1(f->k, 256);
    /* (3 * 4 + 1) folds to 13: visible in the generated code */
    tl_expr off = tl_add(f->k, tl_add(f->k, tl_mul(f->k, tl_int(f->k, 3), tl_int(f->k, 4)), tl_int(f->k, 1)), i);
    tl_store(f->k, a, &off, tl_f32(f->k, 1));
    tl_end(f->k);
    char *src = NULL;
    assert_status(tl_kernel_source(f->k, "sm_80", &src), TL_OK);
    assert_non_null(strstr(src, "13LL"));
    tl_free_host(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_valid_kernel_compiles_to_source, setup, teardown),
        cmocka_unit_test(test_null_kernel_calls_do_not_crash),
        cmocka_unit_test_setup_teardown(test_bad_kernel_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_null_expression_operand, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_handle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dtype_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_int_and_float_do_not_mix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_i32_i64_promote, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_dtype_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_rank_and_bad_rank, setup, teardown),
        cmocka_unit_test_setup_teardown(test_float_extent_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_float_index_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unclosed_loop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_end_without_scope, setup, teardown),
        cmocka_unit_test_setup_teardown(test_loop_var_used_after_loop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_kernel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_grid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grid_from_loop_var_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_and_reserved_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reserved_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nested_parallel_unsupported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_else_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_if_needs_bool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_math_on_int_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_select_branch_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_latches_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_constant_folding, setup, teardown),
    };
    return cmocka_run_group_tests_name("builder", tests, NULL, NULL);
}
