/*
 * pipeline.h - what the files of the pipeline pass share (the pass's entry,
 * tli_pass_pipeline, is in lower.h): its state (piper), a tl_pipelined loop
 * as analysed (pipe_info), the plans of the warp-specialised schedule, the
 * one-line expression helpers, and the functions one file calls in another
 * (their comments are at their definitions; names with linkage start
 * tli_pipe_, so that they do not collide in the static library).
 *
 *   pass_pipeline.c    copy engines, the analysis of a pipelined loop, TMA
 *                      multicast, the TMA / cp.async / plain schedules, the
 *                      pass's walk
 *   pipeline_build.c   the statements the schedules are made of; the probe
 *   pipeline_ws.c      the warp-specialised schedule
 *   pipeline_turns.c   consumer warpgroups taking turns on the tensor cores
 *   pipeline_store.c   the epilogue's TMA stores
 */
#ifndef TILEC_PIPELINE_H
#define TILEC_PIPELINE_H

#include "lower.h"

/* The pass's state. */
typedef struct piper {
    tli_lowered *L;
    tli_ir *ir;
    int32_t sk_acc;   /* tl_use_stream_k: the accumulator the units' partial sums are of */
    int32_t sk_steps; /* ... and the K steps of a block (at least 1) */
    int32_t run;      /* a persistent CTA's blocks whose loops run different trip counts: the trip
                         count (TLI_X_TILE_RUN), else 0 */
    int32_t counter[3]; /* tl_use_persistent(k, 2): the slots of the blocks' numbers, their full
                           and empty mbarriers (TLI_X_TILE_COUNTER), else 0 */
} piper;

static inline const tli_bnode *B(piper *P, int32_t b) { return tli_B(P->ir, b); }
static inline int esize(const tli_bnode *b) { return (int)tl_dtype_size((tl_dtype)b->dtype); }
static inline int32_t I(piper *P, int64_t v) { return tli_low_int(P->L, v, TL_I64); }
static inline int32_t I32(piper *P, int64_t v) { return tli_low_int(P->L, v, TL_I32); }
static inline int32_t bin(piper *P, tli_eop op, int32_t a, int32_t b) { return tli_low_bin(P->L, op, a, b); }
static inline int32_t let_ref(piper *P, int32_t let) { return tli_low_let_ref(P->L, let); }

/* (x / S) % 2: the parity of the phase slot x % S is in at position x */
static inline int32_t parity(piper *P, int32_t x, int S) { return bin(P, E_MOD, bin(P, E_DIV, x, I(P, S)), I(P, 2)); }

/* A tl_pipelined loop, as analyse (pass_pipeline.c) finds it. */
typedef struct pipe_info {
    int32_t sid;           /* the S_PIPELINED statement */
    int32_t var;           /* its loop variable (an E_LOOP_VAR) */
    int32_t extent;        /* its trip count (the builder's expression) */
    int32_t first_consumer;
    int S;                 /* stages */
    int nprod;
    int32_t prod[TLI_MAX_TMA];
    int32_t bufs[TLI_MAX_TMA]; /* their shared destinations */
    int64_t stage_bytes;   /* bytes one iteration's producers bring */
    int tail;              /* wgmma groups the consumers leave running at the end of an iteration */
    bool all_wgmma;        /* the consumers are wgmma gemms and nothing else */
    int mcast[TLI_MAX_TMA]; /* each producer's TLI_X_COPY_MCAST (plan_multicast) */
    bool cluster_ring;     /* some producer multicasts: the ring's slots are freed cluster-wide */
} pipe_info;

/* Bookkeeping shared by the two mbarrier schedules. */
typedef struct ring {
    int32_t full, empty;  /* B_MBAR arrays of S */
} ring;

/* Rings of their own for groups of tiles read at different points of the
 * loop body (pipeline_ws.c says when and why, above plan_split). */
typedef struct ring_split {
    int G;                      /* groups (1: one ring for every tile, none of this) */
    int of[TLI_MAX_TMA];        /* each producer's group (all 0 when G is 1) */
    bool early[TLI_MAX_TMA];    /* released in its own iteration */
    int64_t bytes[TLI_MAX_TMA]; /* a slot's bytes */
    int32_t at;                 /* the release point */
} ring_split;

/* The warp-specialised schedule's plan (pipeline_ws.c). */
typedef struct ws_plan {
    ring_split sp;       /* the tiles' rings (sp.G of them) */
    ring r;
    int32_t order;       /* ping-pong's turn mbarriers (0: none) */
    tli_copy_how how;    /* the producer's engine */
    int persistent;      /* blocks a persistent CTA runs at once (0: not persistent): 2 for
                            ping-pong's blocks of one warpgroup, one per consumer group; 1 for
                            tl_use_persistent, every consumer group on the same block */
    bool turns;          /* the consumer warpgroups of one block take turns at each tl_gemm */
    int groups;          /* with turns: how many (2 or 3), in a ring: 0, 1, .., 0, .. */
    int consumer_threads; /* the CTA's, every consumer warpgroup (ping-pong's two blocks: both) */
    bool stream_k;       /* tl_use_stream_k: the tile loops walk units of K steps (lowered.h) */
    struct {             /* copies ahead of the loop that the producer issues (plan_pre_loads) */
        int n;
        int32_t copy[TLI_MAX_TMA];
        int64_t bytes;   /* what they bring: the full mbarrier's transaction count */
        int32_t full, empty; /* a one-slot ring: loaded; handed back (persistent CTAs) */
    } pre;
} ws_plan;

/* The shared tile pre-loaded copy i (plan_pre_loads) writes. */
static inline int32_t pre_buf(piper *P, const ws_plan *w, int i) { return tli_copy_buf(P->ir, tli_S(P->ir, w->pre.copy[i])->a1); }

/* The three lists of a rotated loop body (pipeline_turns.c says what they
 * are, above tli_pipe_find_rotation). */
typedef struct rotation {
    int32_t a1, a2, b;   /* the three lists (a2 may not be empty) */
} rotation;

/* The buffers statements read and write, the sets allocated once for a
 * walk. Out of memory, the lowering fails (a silent fallback would change
 * the code) and probe_init answers false. */
typedef struct probe {
    tli_bufset rd, wr;
} probe;

/* ------------------------------------------------------ pass_pipeline.c */

/* Whether a global -> shared copy can move whole 16-byte chunks (cp.async),
 * whether a producer can be TMA boxes. */
bool tli_pipe_chunkable(piper *P, int32_t s);
bool tli_pipe_tma_ok(piper *P, int32_t s);
/* Whether buffer b is one of the ring's (a producer's destination). */
bool tli_pipe_staged_buf(const pipe_info *pi, int32_t b);

/* ----------------------------------------------------- pipeline_build.c */

/* Loop variable var replaced by expression with in statement s's own
 * expressions. */
void tli_pipe_shift_one(piper *P, int32_t s, int32_t var, int32_t with);
/* Producer copies for an iteration, in their slot (S_STAGE). */
int32_t tli_pipe_producer_copy(piper *P, const pipe_info *pi, int32_t c, int32_t it, tli_copy_how how, int32_t bar,
                               int32_t bar_idx, int threads, int mcast);
int32_t tli_pipe_mbar_expect(piper *P, int32_t bar, int32_t idx, int64_t bytes);
int32_t tli_pipe_stage_of(piper *P, const pipe_info *pi, int32_t stage, int32_t body);
int32_t tli_pipe_producers_of(piper *P, const pipe_info *pi, const int *of, int g, int32_t it, int32_t stage,
                              tli_copy_how how, int32_t bar, int32_t bar_idx, int64_t bytes, int threads);
int32_t tli_pipe_producers(piper *P, const pipe_info *pi, int32_t it, int32_t stage, tli_copy_how how, int32_t bar,
                           int threads);
/* Statements: a serial loop, a body set, mbarriers, a bare op (an if: tli_low_if). */
int32_t tli_pipe_mk_serial(piper *P, int32_t extent, int32_t *var, bool unroll);
void tli_pipe_set_body(piper *P, int32_t s, int32_t body);
int32_t tli_pipe_mbar_array(piper *P, const char *name, int64_t n);
int32_t tli_pipe_mbar_init(piper *P, int32_t bar, int count);
int32_t tli_pipe_op_stmt(piper *P, tli_sop op, int32_t a0, int32_t a1);
/* A ring's mbarriers, their releases and the barriers around them,
 * cluster-wide where the producers multicast. */
int32_t tli_pipe_ring_init(piper *P, const pipe_info *pi, int32_t bar, int count);
int32_t tli_pipe_empty_init(piper *P, const pipe_info *pi, int32_t bar, int warps);
int32_t tli_pipe_release_if(piper *P, const pipe_info *pi, int32_t when, int32_t bar, int32_t idx);
void tli_pipe_init_done(piper *P, const pipe_info *pi, tli_list *l);
void tli_pipe_loop_exit_sync(piper *P, const pipe_info *pi, tli_list *l);
/* Lists, the stream-K and persistent tile loops, wgmma waits, the
 * consumers in their slot. */
void tli_pipe_splice_around(piper *P, int32_t s, int32_t before, int32_t after);
int32_t tli_pipe_sk_value(piper *P, tli_thread_value v);
int32_t tli_pipe_cast32(piper *P, int32_t e);
int32_t tli_pipe_mk_tile_loop(piper *P, int32_t start, int step, int counter_role, int32_t *p);
void tli_pipe_wgmma_wait(piper *P, tli_list *l, int n);
int32_t tli_pipe_consumers_at(piper *P, const pipe_info *pi, int32_t stage);
/* The probe (above). */
void tli_pipe_probe_free(probe *q);
bool tli_pipe_probe_init(piper *P, probe *q);
void tli_pipe_probe_fill(piper *P, probe *q, int32_t x);
void tli_pipe_probe_stmt(piper *P, probe *q, int32_t x, int32_t b, bool *reads, bool *writes);

/* -------------------------------------------------------- pipeline_ws.c */

/* The producer engine of a warp-specialised loop. */
tli_copy_how tli_pipe_producer_engine(piper *P, const pipe_info *pi);
/* The warp-specialised schedule of loop pi (the block body rewritten). */
void tli_pipe_schedule_warp_specialized(piper *P, const pipe_info *pi);

/* ----------------------------------------------------- pipeline_turns.c */

/* The turn barriers around the gemms of a consumer loop's slot. */
void tli_pipe_add_turns(piper *P, const ws_plan *w, int32_t stage_node, int32_t i, int32_t n, int32_t p, int stages);
/* The rotated consumer loop: its lists (false: the loop does not rotate),
 * the loop; the shift of a list's loop variable it makes. */
bool tli_pipe_find_rotation(piper *P, const pipe_info *pi, rotation *r);
void tli_pipe_rotated_loop(piper *P, const pipe_info *pi, const ws_plan *w, const rotation *r, int32_t n,
                           tli_list *out);
void tli_pipe_shift_stmts(piper *P, int32_t first, int32_t var, int32_t with);

/* ----------------------------------------------------- pipeline_store.c */

/* The epilogue's accumulator stores through TMA where they qualify;
 * whether any did. */
bool tli_pipe_epilogue_tma_stores(piper *P, int32_t body);

#endif
