/* fixture.h - the cmocka group fixtures the test files share. `ctx` is an
 * offline context for the CPU tier (offline_setup), or the GPU's context for
 * the GPU tier (gpu_setup): NULL when there is none, and NEED_GPU() then
 * skips the test, saying why in one short line (tests/run.sh shows it). TILEC_TEST_SMALL=1 sets `small` (small sizes,
 * for compute-sanitizer runs). */
#ifndef TILEC_TEST_FIXTURE_H
#define TILEC_TEST_FIXTURE_H

#include <stdbool.h>

#include "util.h"

static tl_ctx *ctx;
static char skip_reason[512];
static bool small;

static inline int offline_setup(void **state)
{
    (void)state;
    ctx = test_offline_ctx("sm_90a");
    return 0;
}

/* TILEC_TEST_PLAN_ONLY=target (make plan-check): a GPU test program
 * builds and compiles the kernels its tests would launch (precompile.h)
 * for that target on an offline context, fails if any does not compile,
 * and skips the tests: a schedule a test asks for that the lowering
 * refuses shows without a GPU. */
static inline const char *test_plan_only(void)
{
    const char *t = getenv("TILEC_TEST_PLAN_ONLY");
    return t && *t ? t : NULL;
}

/* The plan's offline context: memory cache only, or, with
 * TILEC_TEST_PLAN_CACHE=dir, the disk cache in dir too, so that a machine
 * without a GPU fills the cache a GPU machine's tier then finds warm (the
 * key is the source, target, flags and NVRTC version, never the device). */
static inline tl_ctx *test_plan_ctx(const char *target)
{
    const char *dir = getenv("TILEC_TEST_PLAN_CACHE");
    if (!dir || !*dir)
        return test_offline_ctx(target);
    tl_ctx_options o = tl_ctx_default_options();
    o.device = TL_NO_DEVICE;
    o.disk_cache = 1;
    o.cache_dir = dir;
    o.target = target;
    tl_ctx *c = NULL;
    char msg[256];
    if (tl_ctx_create(&o, &c, msg, sizeof msg) != TL_OK) {
        fprintf(stderr, "plan context with the cache in %s: %s\n", dir, msg);
        exit(1);
    }
    return c;
}

static inline int gpu_setup(void **state)
{
    (void)state;
    const char *s = getenv("TILEC_TEST_SMALL");
    small = s && strcmp(s, "1") == 0;
    if (test_plan_only()) {
        ctx = test_plan_ctx(test_plan_only());
        return 0;
    }
    char msg[400];
    tl_status st = tl_ctx_create(NULL, &ctx, msg, sizeof msg);
    if (st != TL_OK) {
        ctx = NULL;
        snprintf(skip_reason, sizeof skip_reason, "no GPU (%s: %s)", tl_status_name(st), test_first_clause(msg));
    }
    return 0;
}

static inline int ctx_teardown(void **state)
{
    (void)state;
    tl_ctx_destroy(ctx);
    return 0;
}

/* A second context for ctx's device without the target's arch-specific
 * features (sm_90a -> sm_90: no wgmma, so tl_gemm takes the mma.sync path
 * sm_80 runs, and copies cp.async); NULL where ctx's target is plain
 * already (its tests ran that path). Fails the test if it cannot be made. */
static inline tl_ctx *test_plain_ctx(void)
{
    const char *t = ctx ? tl_ctx_target(ctx) : "";
    size_t n = strlen(t);
    if (n < 2 || t[n - 1] != 'a')
        return NULL;
    tl_ctx_options o = tl_ctx_default_options();
    char plain[16], msg[256];
    snprintf(plain, sizeof plain, "%.*s", (int)(n - 1), t);
    if (test_plan_only())
        return test_plan_ctx(plain);
    o.target = plain;
    tl_ctx *c = NULL;
    if (tl_ctx_create(&o, &c, msg, sizeof msg) != TL_OK)
        fail_msg("a context for %s: %s", plain, msg);
    return c;
}

/* TILEC_TEST_FILTER=pattern runs only the tests whose names match it
 * (cmocka's wildcards), for a quick look at one test on the GPU. */
static inline void test_apply_filter(void)
{
    const char *f = getenv("TILEC_TEST_FILTER");
    if (f && *f)
        cmocka_set_test_filter(f);
}

/* The end of a GPU test program's setup: with TILEC_TEST_PLAN_ONLY the
 * offline context goes and the tests skip (their kernels were compiled). */
static inline void test_plan_only_end(void)
{
    if (!test_plan_only())
        return;
    tl_ctx_destroy(ctx);
    ctx = NULL;
    snprintf(skip_reason, sizeof skip_reason, "planned and compiled only (TILEC_TEST_PLAN_ONLY)");
}

#define NEED_GPU()                                                                                 \
    do {                                                                                           \
        if (!ctx) {                                                                                \
            printf("  skip: %s\n", skip_reason);                                                   \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

#endif
