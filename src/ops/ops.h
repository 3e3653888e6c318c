/* ops.h - the prebuilt operations: each builds its kernel through the public
 * builder API (the ops are users of the API, which proves the API). */
#ifndef TILEC_OPS_H
#define TILEC_OPS_H

#include "tilec.h"

/* Schedule of the vector add: elements per block and threads per block. */
typedef struct tli_vadd_schedule {
    int64_t tile;
    int threads;
} tli_vadd_schedule;

/* The default schedule for dtype on any target. */
tli_vadd_schedule tli_vadd_default_schedule(tl_dtype dtype);
/* Builds C[i] = A[i] + B[i]; its parameters, in launch order: N, A, B, C. */
tl_status tli_vadd_build(tl_ctx *ctx, tl_dtype dtype, const tli_vadd_schedule *s, tl_kernel **out);

#endif
