/* interp.h - the CPU interpreter (golden model) of a kernel graph. */
#ifndef TILEC_INTERP_H
#define TILEC_INTERP_H

#include "args.h"

/* A value: integers and bools in i, floats in f (already rounded to their
 * dtype). */
typedef struct tli_value {
    int64_t i;
    double f;
} tli_value;

/* Evaluates an expression that needs no block, loop or memory. */
tli_value tli_interp_eval_host(const tli_ir *ir, const tli_bound *b, int32_t e);

/* Runs the whole grid on host buffers (b bound with TL_ARG_HOST_PTR).
 * Errors: TL_ERR_LAUNCH_ARGS (bad grid, explained in err),
 * TL_ERR_OUT_OF_MEMORY. */
tl_status tli_interp_run(const tli_ir *ir, const tli_bound *b, char *err, size_t errlen);

#endif
