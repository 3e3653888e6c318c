/* test_statuses.c - statuses for bad input outside the builder: targets
 * NVRTC cannot compile for are refused when the context is made (they used
 * to fail only at the first compile), and random ranges an element type
 * cannot hold are refused (i32 with hi = 1e30 returned TL_OK and wrote
 * negative values). */
#include "util.h"

#include <stdbool.h>

static tl_status create_with_target(const char *target, char *msg, size_t n)
{
    tl_ctx_options o = tl_ctx_default_options();
    o.device = TL_NO_DEVICE;
    o.disk_cache = 0;
    o.target = target;
    tl_ctx *ctx = NULL;
    tl_status st = tl_ctx_create(&o, &ctx, msg, n);
    tl_ctx_destroy(ctx);
    return st;
}

static void test_targets_checked_at_creation(void **state)
{
    (void)state;
    char msg[1024];
    const char *bad[] = {"sm_12", "sm_999", "sm_80a", "sm_0", NULL};
    for (int i = 0; bad[i]; i++) {
        tl_status st = create_with_target(bad[i], msg, sizeof msg);
        if (st != TL_ERR_INVALID_ARG || strncmp(msg, "tl_ctx_create: invalid target", 29) != 0)
            fail_msg("target %s: %s: %s", bad[i], tl_status_name(st), msg);
    }
    assert_non_null(strstr(msg, "NVRTC compiles for"));
    const char *good[] = {"sm_80", "sm_90a", "sm_120", NULL};
    for (int i = 0; good[i]; i++)
        if (create_with_target(good[i], msg, sizeof msg) != TL_OK)
            fail_msg("target %s refused: %s", good[i], msg);
}

/* A compile option's target goes through the same check. */
static void test_compile_option_target(void **state)
{
    (void)state;
    tl_ctx *ctx = test_offline_ctx("sm_90a");
    tl_kernel *k = tl_kernel_new(ctx, "t");
    tl_expr n = tl_dim(k, "N");
    tl_buf a = tl_param_tensor(k, "A", TL_F32, 1, &n, NULL);
    tl_grid(k, TL_NONE_EXPR, TL_NONE_EXPR, TL_NONE_EXPR, 32);
    tl_expr i = tl_parallel1(k, 32);
    tl_store(k, a, &i, tl_f32(k, 1.0f));
    tl_end(k);
    char *src = NULL;
    assert_status(tl_kernel_source(k, "sm_999", &src), TL_ERR_INVALID_ARG);
    assert_null(src);
    tl_program *p = NULL;
    tl_compile_options o = {.target = "sm_12"};
    assert_status(tl_compile(k, &o, &p), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "sm_12"));
    tl_kernel_destroy(k);
    tl_ctx_destroy(ctx);
}

static void test_random_ranges(void **state)
{
    (void)state;
    int32_t v[256];
    assert_status(tl_random_host(v, TL_I32, 256, 1, 0, 1e30), TL_ERR_INVALID_ARG);
    assert_status(tl_random_host(v, TL_I32, 256, 1, -1e30, 0), TL_ERR_INVALID_ARG);
    assert_status(tl_random_host(v, TL_F32, 256, 1, 0, INFINITY), TL_ERR_INVALID_ARG);
    assert_status(tl_random_host(v, TL_F32, 256, 1, NAN, 1), TL_ERR_INVALID_ARG);
    assert_status(tl_random_host(v, TL_F64, 256, 1, -1e308, 1e308), TL_ERR_INVALID_ARG); /* hi - lo overflows */
    /* the whole i32 range is allowed, and every value lies in it */
    assert_status(tl_random_host(v, TL_I32, 256, 7, -2147483648.0, 2147483648.0), TL_OK);
    bool negative = false, positive = false;
    for (int i = 0; i < 256; i++)
        negative |= v[i] < 0, positive |= v[i] > 0;
    assert_true(negative && positive);
    assert_status(tl_random_host(v, TL_I32, 256, 7, -5, 5), TL_OK);
    for (int i = 0; i < 256; i++)
        assert_true(v[i] >= -5 && v[i] < 5);
    tl_ctx *ctx = test_offline_ctx("sm_90a");
    assert_status(tl_random_fill(ctx, 0x1000, TL_I32, 16, 1, 0, 1e30, NULL), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "tl_random_fill: "));
    assert_status(tl_random_fill(ctx, 0x1002, TL_F32, 16, 1, 0, 1, NULL), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "not aligned"));
    tl_ctx_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_targets_checked_at_creation),
        cmocka_unit_test(test_compile_option_target),
        cmocka_unit_test(test_random_ranges),
    };
    return cmocka_run_group_tests_name("statuses", tests, NULL, NULL);
}
