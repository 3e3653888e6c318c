/* util.h - helpers shared by the tests: contexts, vadd-like kernels. */
#ifndef TILEC_TEST_UTIL_H
#define TILEC_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tilec.h"

/* An offline context (no GPU) with the disk cache off, for CPU-tier tests. */
static inline tl_ctx *test_offline_ctx(const char *target)
{
    tl_ctx_options o = tl_ctx_default_options();
    o.device = TL_NO_DEVICE;
    o.disk_cache = 0;
    o.target = target;
    tl_ctx *ctx = NULL;
    char msg[256];
    tl_status st = tl_ctx_create(&o, &ctx, msg, sizeof msg);
    if (st != TL_OK)
        fprintf(stderr, "offline context: %s: %s\n", tl_status_name(st), msg);
    assert_int_equal(st, TL_OK);
    return ctx;
}

#define assert_status(expr, want)                                                                  \
    do {                                                                                           \
        tl_status st_ = (expr);                                                                    \
        if (st_ != (want))                                                                         \
            fail_msg("%s gave %s, wanted %s", #expr, tl_status_name(st_), tl_status_name(want));   \
    } while (0)

#endif
