/* args.h - checking launch arguments against a kernel's parameters and
 * evaluating host-side expressions (grid, shapes) from them. */
#ifndef TILEC_ARGS_H
#define TILEC_ARGS_H

#include "ir.h"

typedef struct tli_evalmem tli_evalmem; /* interp.c */

/* Argument values by parameter index (1..ir->p.n-1). */
typedef struct tli_bound {
    int n;
    int64_t *i;   /* dims and integer scalars */
    double *f;    /* float scalars            */
    uint64_t *ptr;/* tensors: device address or host pointer */
    tli_evalmem *mem; /* scratch of the expression evaluator */
} tli_bound;

/* Checks count and kinds (tensors take ptr_kind, dims non-negative ints,
 * integer scalars ints, float scalars floats) and fills *b. On failure
 * returns TL_ERR_LAUNCH_ARGS (or OOM) and explains in err. */
tl_status tli_bind_args(const tli_ir *ir, int nargs, const tl_arg *args, tl_arg_kind ptr_kind,
                        tli_bound *b, char *err, size_t errlen);
void tli_bound_free(tli_bound *b);

/* Evaluates a host expression (constants, parameters, arithmetic) to an
 * integer. */
int64_t tli_eval_host_int(const tli_ir *ir, const tli_bound *b, int32_t e);

/* The grid of a launch; false (with err) when a dimension is negative or
 * beyond CUDA's limits. */
bool tli_eval_grid(const tli_ir *ir, const tli_bound *b, int64_t grid[3], char *err, size_t errlen);

/* The name of the first tensor parameter of tl_param_tensor_array (whose
 * tensors are behind device pointers in device memory, which what copies
 * tensors to the host cannot follow), or NULL when there is none. */
const char *tli_array_param(const tli_ir *ir);

/* Elements spanned by tensor buf: 1 + the largest offset (0 when empty),
 * or -1 when that does not fit in 64 bits (arguments tli_check_tensors
 * has not accepted). */
int64_t tli_tensor_span(const tli_ir *ir, const tli_bound *b, int32_t buf);

#endif
