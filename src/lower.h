/*
 * lower.h - lowering a kernel graph for a target: the entry point that runs
 * the passes (lower.c), the passes themselves (pass_*.c, one job each; the
 * pipeline pass in pass_pipeline.c and pipeline_*.c), and the queries over
 * the graph that several of them share (analysis.c).
 */
#ifndef TILEC_LOWER_H
#define TILEC_LOWER_H

#include "lowered.h"

/* ------------------------------------------------------------ lowering */

typedef struct tli_lower_options {
    int64_t smem_limit;   /* shared memory per block; 0: the target's      */
    bool safe;            /* the safe variant (lowered.h)                   */
    const char *dump;     /* pass name or "all": print the kernel after it  */
    tli_str *dump_out;    /* where dumps go (NULL: nowhere)                 */
} tli_lower_options;

/* Runs the passes over a copy of ir (verified by the builder) for target t.
 * On success *L holds the lowered kernel (free it with tli_lowered_free).
 * Errors (the message in L->err, which names the builder call at fault):
 * TL_ERR_SHAPE, TL_ERR_SCOPE, TL_ERR_UNSUPPORTED, TL_ERR_OUT_OF_MEMORY,
 * TL_ERR_INTERNAL. */
tl_status tli_lower(const tli_ir *ir, const tli_target *t, const tli_lower_options *opt, tli_lowered *L);
void tli_lowered_free(tli_lowered *L);
/* Whether `name` is a pass (or "all"). */
bool tli_pass_known(const char *name);

/* The passes, in the order tli_lower runs them. Each reads the lowered
 * kernel as the previous one left it and records its decisions in it. */
void tli_pass_verify(tli_lowered *L);   /* whole-kernel checks of the builder graph */
void tli_verify_reducers(tli_lowered *L); /* its rules of reducers (verify_reducers.c) */
void tli_pass_layout(tli_lowered *L);   /* fragment layouts, MMA atoms and warp splits */
void tli_pass_threads(tli_lowered *L);  /* tl_parallel onto threads, vector accesses */
void tli_pass_reduce(tli_lowered *L);   /* reductions: shuffles and the cross-warp step */
void tli_pass_pipeline(tli_lowered *L); /* copy engines, software pipelines, warp specialisation */
void tli_pass_smem(tli_lowered *L);     /* shared-memory offsets and stages */
/* The bytes of shared memory the tiles and mbarriers declared so far take
 * (as tli_pass_smem would place them; nothing recorded). */
int64_t tli_smem_need(tli_lowered *L);
void tli_pass_sync(tli_lowered *L);     /* barriers, deferred copy waits, wgmma waits */
void tli_pass_launch(tli_lowered *L);   /* threads, grid, block indices, TMA maps, launch bounds */

/* Whether fragments a and b have the same layout (a loop over one indexes
 * the other's registers directly). */
bool tli_layout_equal(const tli_lowered *L, int32_t a, int32_t b);
/* Whether fragment `slice` is a slice of a layout that keeps its elements
 * where `owner`'s layout does (a loop over owner reads it at the slice's
 * register of owner's register). */
bool tli_slice_of_alike(const tli_lowered *L, int32_t slice, int32_t owner);

/* Text of the graph (builder form or lowered), for dumps and tests. */
void tli_dump_ir(const tli_ir *ir, const tli_lowered *L, tli_str *out);

/* --------------------------------------------------- queries (analysis.c) */

/* How a tl_parallel maps onto the threads of a block when no fragment
 * decides it:
 *   vector: the flat iteration space is cut into chunks of V consecutive
 *     iterations along the last dimension; thread t takes chunks t, t+T, ...
 *     Accesses whose last index moves with the last loop variable at unit
 *     stride (and whose other indices do not move with it) read or write a
 *     whole chunk with one 4/8/16-byte access; the rest go lane by lane.
 *   scalar: thread t takes iterations t, t+T, ... one at a time. */
typedef struct tli_par_plan {
    bool vector;       /* vector mode (else scalar)                       */
    int lanes;         /* V: iterations per chunk (1 in scalar mode)      */
    int64_t total;     /* iterations of the loop                          */
    int64_t chunks;    /* total / lanes                                   */
    int64_t per_thread;/* ceil(chunks / threads)                          */
    int group;         /* chunks a thread loads before it computes        */
} tli_par_plan;

void tli_plan_parallel(tli_lowered *L, int32_t s, int threads, tli_par_plan *plan);
/* true when access buf[idx...] (idx: pool start) inside parallel loop s can
 * move `lanes` elements at once: unit stride along the last loop variable,
 * 4..16 bytes. For loads, the buffer must not be written in the loop. */
bool tli_access_vectorizable(tli_lowered *L, int32_t s, int32_t buf, int32_t idx, int lanes, bool is_load);

/* Buffers statement s (with what is inside it) reads and writes, as bit
 * sets over buffer ids (tli_bufset); async copies and gemms count their
 * operands. */
typedef struct tli_bufset {
    uint64_t *bits;
    int32_t words;
} tli_bufset;
bool tli_bufset_init(tli_bufset *s, int32_t nbufs);
void tli_bufset_free(tli_bufset *s);
void tli_bufset_clear(tli_bufset *s);
void tli_bufset_add(tli_bufset *s, int32_t b);
bool tli_bufset_has(const tli_bufset *s, int32_t b);
bool tli_bufset_meets(const tli_bufset *a, const tli_bufset *b);
void tli_bufset_union(tli_bufset *a, const tli_bufset *b);
bool tli_bufset_empty(const tli_bufset *s);
/* Adds what statement s (and its body) reads to rd and writes to wr. */
void tli_stmt_access(tli_lowered *L, int32_t s, tli_bufset *rd, tli_bufset *wr);
/* Adds the buffers expression e loads from to rd. */
void tli_expr_reads(tli_lowered *L, int32_t e, tli_bufset *rd);

/* true when copy statement s moves global -> shared (a pipeline producer). */
bool tli_is_producer(const tli_ir *ir, int32_t s);
/* The buffer of a copy operand (a0 or a1 of S_COPY): a region id, or minus
 * a whole buffer's id. */
int32_t tli_copy_buf(const tli_ir *ir, int32_t operand);
/* The first statement of pipelined loop s after its leading producers. */
int32_t tli_first_consumer(const tli_ir *ir, int32_t s);

/* Picks the mma.sync warp split for C [m, n] (k: the reduction) under the
 * policy in flags (TL_GEMM_WARP_*); false with the reason in why when none
 * fits. */
bool tli_gemm_warp_layout(int64_t m, int64_t n, int64_t k, int threads, unsigned flags, tli_warp_layout *out,
                          char *why, size_t why_len);
/* The wgmma layout of C [m, n] for gemm statement `gemm`, when its operands
 * allow it: A [m, 64] (or a fragment), B [n, 64] (K-major, 128-byte rows) or
 * [64, n], m split into m64 tiles per warpgroup, n a multiple of 16 up to
 * 256. threads: the block's. */
bool tli_gemm_wgmma_layout(const tli_ir *ir, int32_t gemm, int threads, tli_warp_layout *out);

/* Whether expression root depends on the block or on memory (a persistent
 * CTA's blocks must all run the same number of iterations). */
bool tli_uses_block(tli_lowered *L, int32_t root);
bool tli_uses_block_axis(tli_lowered *L, int32_t root, int axis);

/* Walks over the expression DAG with marks m (L->walk, or an emitter's):
 *     if (tli_marks_begin(m, ir)) { tli_marks_push(m, root);
 *         for (int32_t e; (e = tli_marks_next(m));) { ...; tli_marks_push_operands(m, ir, e); } }
 * visits each node reached once, in depth-first order (last pushed first),
 * without recursion. begin is false when out of memory (m->oom, as when a
 * push fails: the walk then misses nodes, and its user must fail). */
bool tli_marks_begin(tli_marks *m, const tli_ir *ir);
void tli_marks_push(tli_marks *m, int32_t e);
/* The next node not yet visited in this walk (now visited), or 0. */
int32_t tli_marks_next(tli_marks *m);
/* Pushes the operands of e (not a load's indices). */
void tli_marks_push_operands(tli_marks *m, const tli_ir *ir, int32_t e);
bool tli_marks_seen(const tli_marks *m, int32_t e);
void tli_marks_set(tli_marks *m, int32_t e);
void tli_marks_free(tli_marks *m);

#endif
