/* test_names.c - parameter names become identifiers of the generated C++:
 * the builder refuses those NVRTC would not read as plain free names (C++
 * keywords, alternative tokens, reserved spellings, NULL, CUDA built-ins,
 * the math functions the kernel body calls), with a message that names the
 * call and the rule; names close to them stay valid and compile; and a
 * kernel takes at most TL_MAX_PARAMS parameters, refused when declared
 * rather than at launch. */
#include "fixture.h"

/* Declares a dim named `name` and returns the kernel's status. */
static tl_status declare(const char *name, char *msg, size_t n)
{
    tl_kernel *k = tl_kernel_new(ctx, "names");
    assert_non_null(k);
    tl_dim(k, name);
    tl_status st = tl_kernel_status(k);
    snprintf(msg, n, "%s", tl_kernel_error(k));
    tl_kernel_destroy(k);
    return st;
}

static void expect_refused(const char *name, const char *rule)
{
    char msg[512];
    tl_status st = declare(name, msg, sizeof msg);
    if (st != TL_ERR_INVALID_ARG)
        fail_msg("'%s' was accepted (%s)", name, tl_status_name(st));
    char quoted[80];
    snprintf(quoted, sizeof quoted, "'%s'", name);
    if (strncmp(msg, "tl_dim: ", 8) != 0 || !strstr(msg, quoted) || !strstr(msg, rule))
        fail_msg("message for '%s' should name tl_dim, the name and '%s': %s", name, rule, msg);
}

static void test_cxx_keywords_refused(void **state)
{
    (void)state;
    /* Each of these used to pass the builder and break NVRTC. */
    const char *words[] = {"namespace", "asm",      "try",     "constexpr", "nullptr", "char8_t", "co_await",
                           "requires",  "decltype", "noexcept", "typename", "throw",   "catch",   "export",
                           "mutable",   "friend",   "alignas", "static_assert", "thread_local", NULL};
    for (int i = 0; words[i]; i++)
        expect_refused(words[i], "C++ keyword");
    const char *tokens[] = {"and", "and_eq", "bitand", "bitor", "compl", "not", "not_eq", "or", "or_eq", "xor",
                            "xor_eq", NULL};
    for (int i = 0; tokens[i]; i++)
        expect_refused(tokens[i], "alternative token");
}

static void test_other_reserved_names(void **state)
{
    (void)state;
    expect_refused("NULL", "macro or built-in");
    expect_refused("threadIdx", "macro or built-in");
    expect_refused("warpSize", "macro or built-in");
    expect_refused("expf", "math function");
    expect_refused("fmaxf", "math function");
    expect_refused("tl_n", "tl_");
    expect_refused("a__b", "reserved by C++");
    expect_refused("_Size", "reserved by C++");
    char msg[512];
    assert_status(declare("", msg, sizeof msg), TL_ERR_INVALID_ARG);
    assert_status(declare("1x", msg, sizeof msg), TL_ERR_INVALID_ARG);
    assert_status(declare(NULL, msg, sizeof msg), TL_ERR_INVALID_ARG);
    char longname[80];
    memset(longname, 'x', 64);
    longname[64] = '\0';
    assert_status(declare(longname, msg, sizeof msg), TL_ERR_INVALID_ARG);
    longname[63] = '\0';
    assert_status(declare(longname, msg, sizeof msg), TL_OK);
}

/* Names next to the reserved ones are plain identifiers: accepted, and the
 * kernel they name compiles. So are the names the emitter once derived
 * from user names or made up (A_d0 beside a tensor A, i1_0_c0, t1: issue
 * 12 items 1 and 12): every generated name now starts with tl_. */
static void test_near_names_compile(void **state)
{
    (void)state;
    const char *names[] = {"andy", "Null",  "NULL_", "exp10", "final", "override", "restrict", "main",
                           "min",  "max",   "size_t", "_x",   "x_",    "uint",     "A_d0",     "A_s0",
                           "A_d1", "t1",    "i1_0_c0", "L5_c0", "S2_c0", "c0",     "f1",       "bx", NULL};
    tl_kernel *k = tl_kernel_new(ctx, "near");
    tl_expr n = tl_dim(k, "N");
    tl_buf a = tl_param_tensor(k, "A", TL_F32, 1, &n, NULL);
    tl_expr sum = tl_f32(k, 0.0f);
    for (int i = 0; names[i]; i++)
        sum = tl_add(k, sum, tl_param_scalar(k, names[i], TL_F32));
    tl_grid(k, tl_ceildiv(k, n, tl_int(k, 256)), TL_NONE_EXPR, TL_NONE_EXPR, 256);
    tl_expr i = tl_add(k, tl_mul(k, tl_block_idx(k, 0), tl_int(k, 256)), tl_parallel1(k, 256));
    tl_store(k, a, &i, tl_exp(k, tl_add(k, tl_load(k, a, &i), sum)));
    tl_end(k);
    assert_status(tl_kernel_status(k), TL_OK);
    test_ptx_or_skip(ctx, k);
}

/* The 65th parameter is refused by the builder (it used to be refused only
 * by tl_launch, after compiling). */
static void test_parameter_limit(void **state)
{
    (void)state;
    tl_kernel *k = tl_kernel_new(ctx, "params");
    char name[16];
    for (int i = 0; i < TL_MAX_PARAMS; i++) {
        snprintf(name, sizeof name, "p%d", i);
        tl_param_scalar(k, name, TL_F32);
    }
    assert_status(tl_kernel_status(k), TL_OK);
    tl_expr one = tl_int(k, 1);
    tl_buf b = tl_param_tensor(k, "T", TL_F32, 1, &one, NULL);
    assert_true(tl_buf_is_null(b));
    assert_status(tl_kernel_status(k), TL_ERR_UNSUPPORTED);
    const char *msg = tl_kernel_error(k);
    if (strncmp(msg, "tl_param_tensor: ", 17) != 0 || !strstr(msg, "at most 64"))
        fail_msg("message: %s", msg);
    tl_kernel_destroy(k);
    k = tl_kernel_new(ctx, "params");
    for (int i = 0; i <= TL_MAX_PARAMS; i++) {
        snprintf(name, sizeof name, "d%d", i);
        tl_dim(k, name);
    }
    assert_status(tl_kernel_status(k), TL_ERR_UNSUPPORTED);
    assert_non_null(strstr(tl_kernel_error(k), "tl_dim: 'd64' would be parameter 65"));
    tl_kernel_destroy(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cxx_keywords_refused),
        cmocka_unit_test(test_other_reserved_names),
        cmocka_unit_test(test_near_names_compile),
        cmocka_unit_test(test_parameter_limit),
    };
    return cmocka_run_group_tests_name("names", tests, offline_setup, ctx_teardown);
}
