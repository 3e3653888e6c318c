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

/* Scratch memory for evaluating the expressions of one graph: a value and
 * a validity stamp per node, and the evaluation stack. One per launch or
 * interpretation (tli_bind_args makes it), never shared between threads.
 * NULL on OOM. */
tli_evalmem *tli_evalmem_new(const tli_ir *ir);
void tli_evalmem_free(tli_evalmem *m);

/* Evaluates an expression that needs no block, loop or memory (b->mem
 * keeps the values of its nodes). */
tli_value tli_interp_eval_host(const tli_ir *ir, const tli_bound *b, int32_t e);

/* Runs the whole grid on host buffers (b bound with TL_ARG_HOST_PTR); the
 * blocks of a cluster (tl_cluster) run in lockstep, statement by
 * statement, so that tl_cluster_reduce_* can combine them. Errors:
 * TL_ERR_LAUNCH_ARGS (a bad grid, one that is not whole clusters, or a
 * cluster reduction reached by only some blocks of a cluster; explained in
 * err), TL_ERR_OUT_OF_MEMORY. */
tl_status tli_interp_run(const tli_ir *ir, const tli_bound *b, char *err, size_t errlen);
/* The same, stopping with TL_ERR_UNSUPPORTED once `budget` units of work
 * (blocks, loop iterations, statements and expression nodes evaluated,
 * elements touched by tile operations) are spent; 0 means no limit. For the fuzzer, which must not wait on a kernel that loops
 * 2^40 times. */
tl_status tli_interp_run_budget(const tli_ir *ir, const tli_bound *b, uint64_t budget, char *err, size_t errlen);

#endif
