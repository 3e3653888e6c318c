/*
 * lower.h - decisions the emitter follows: how a tl_parallel loop maps onto
 * the threads of a block, and which of its global accesses become vector
 * accesses.
 *
 * A parallel loop runs in one of two modes:
 *   vector: the flat iteration space is cut into chunks of V consecutive
 *     iterations along the last dimension; thread t takes chunks t, t+T, ...
 *     Accesses whose last index moves with the last loop variable at unit
 *     stride (and whose other indices do not move with it) read or write a
 *     whole chunk with one 4/8/16-byte access; the rest go lane by lane.
 *   scalar: thread t takes iterations t, t+T, ... one at a time.
 */
#ifndef TILEC_LOWER_H
#define TILEC_LOWER_H

#include "ir.h"

typedef struct tli_par_plan {
    bool vector;       /* vector mode (else scalar)                       */
    int lanes;         /* V: iterations per chunk (1 in scalar mode)      */
    int64_t total;     /* iterations of the loop                          */
    int64_t chunks;    /* total / lanes                                   */
    int64_t per_thread;/* ceil(chunks / threads)                          */
    int group;         /* chunks a thread loads before it computes        */
} tli_par_plan;

/* Plans parallel loop statement s for a block of `threads` threads. */
void tli_plan_parallel(const tli_ir *ir, int32_t s, int threads, tli_par_plan *plan);

/* true when access buf[idx...] (idx: pool start) inside parallel loop s can
 * move `lanes` elements at once: unit stride along the last loop variable,
 * 4..16 bytes. For loads, the buffer must not be written in the loop. */
bool tli_access_vectorizable(const tli_ir *ir, int32_t s, int32_t buf, int32_t idx, int lanes,
                             bool is_load);

/* true when statement s (or a statement inside it) stores to memory. */
bool tli_stmt_stores(const tli_ir *ir, int32_t s);

#endif
