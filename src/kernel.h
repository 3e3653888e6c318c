/* kernel.h - the builder object: a graph under construction, its open scopes
 * and its first error. */
#ifndef TILEC_KERNEL_H
#define TILEC_KERNEL_H

#include "ir.h"

#define TLI_MAX_DEPTH 32

struct tl_kernel {
    tl_ctx *ctx;
    uint32_t tag;                   /* kid of every handle made here     */
    tli_ir ir;
    int32_t open[TLI_MAX_DEPTH];    /* open scope statements, outermost first */
    bool in_else[TLI_MAX_DEPTH];
    int32_t tail[TLI_MAX_DEPTH + 1]; /* last statement of each open body (0: empty) */
    int depth;
    int ncalls;                     /* builder calls so far, for messages */
    tl_status status;               /* first error */
    char err[512];
};

/* Checks that the kernel is complete and consistent before lowering:
 * no error latched, scopes closed, grid set, at least one statement.
 * Records and returns the failure on k (and its context). */
tl_status tli_kernel_verify(tl_kernel *k, const char *api);

#endif
