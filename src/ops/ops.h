/* ops.h - the prebuilt operations: each builds its kernel through the public
 * builder API (the ops are users of the API, which proves the API). */
#ifndef TILEC_OPS_H
#define TILEC_OPS_H

#include "tilec.h"

#include <stdbool.h>

/* Schedule of the vector add: elements per block and threads per block. */
typedef struct tli_vadd_schedule {
    int64_t tile;
    int threads;
} tli_vadd_schedule;

/* The default schedule for dtype on any target. */
tli_vadd_schedule tli_vadd_default_schedule(tl_dtype dtype);
/* Builds C[i] = A[i] + B[i]; its parameters, in launch order: N, A, B, C. */
tl_status tli_vadd_build(tl_ctx *ctx, tl_dtype dtype, const tli_vadd_schedule *s, tl_kernel **out);

/* TL_OK when device pointer p of element type dtype may be used: not null
 * and aligned to the element size, or not needed (no element is touched);
 * else TL_ERR_INVALID_ARG with "api: name ..." on ctx. */
tl_status tli_op_check_dptr(tl_ctx *ctx, const char *api, const char *name, uint64_t p, tl_dtype dtype,
                            bool needed);

#endif
