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
    uint8_t *device_only;           /* per expression: needs the device (a
                                       load, block index or loop variable) */
    int32_t device_only_cap;
    tl_status status;               /* first error */
    char err[512];
};

/* Helpers shared by the builder's files (builder.c, builder_tile.c). */
/* Records the first error on k (and its context); later ones are dropped. */
void tli_kfail(tl_kernel *k, tl_status st, const char *api, const char *fmt, ...) TLI_PRINTF(4, 5);
void tli_koom(tl_kernel *k, const char *api);
/* true when builder calls on k should do work (k live, no error yet). */
bool tli_klive(tl_kernel *k);
/* Resolves handles, or records why not and returns 0. */
int32_t tli_kexpr(tl_kernel *k, tl_expr e, const char *api, const char *what);
int32_t tli_kbuf(tl_kernel *k, tl_buf b, const char *api);
/* true when loop statement `loop` is open (0, no loop, always is). */
bool tli_kscope_open(const tl_kernel *k, int32_t loop);
/* The deeper of two open loop scopes. */
int32_t tli_kinner_scope(const tl_kernel *k, int32_t a, int32_t b);
/* Appends a statement to the innermost open body; its id or 0. */
int32_t tli_kappend(tl_kernel *k, tli_snode *n, const char *api);
/* Opens statement sid as a scope (closed by tl_end). */
bool tli_kpush_scope(tl_kernel *k, int32_t sid, const char *api);
/* Makes the variables of loop statement sid into vars[0..rank). */
bool tli_kloop_vars(tl_kernel *k, int32_t sid, int rank, tl_expr *vars, const char *api);
bool tli_kinside_parallel(const tl_kernel *k);
/* Whether `name` may name a parameter or buffer of k (records why not). */
bool tli_kname_free(tl_kernel *k, const char *name, const char *api);

/* Checks that the kernel is complete and consistent before lowering:
 * no error latched, scopes closed, grid set, at least one statement.
 * Records and returns the failure on k (and its context). */
tl_status tli_kernel_verify(tl_kernel *k, const char *api);

#endif
