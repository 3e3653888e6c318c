/* emit_internal.h - the emitter's state and helpers, shared by
 * emit_cuda.c (kernels, expressions, element-wise loops) and emit_tile.c
 * (shared tiles, fragments, copies, pipelines, tensor-core GEMM). */
#ifndef TILEC_EMIT_INTERNAL_H
#define TILEC_EMIT_INTERNAL_H

#include "lower.h"

#define TLI_MAX_PENDING 8

typedef struct emitter {
    const tli_ir *ir;
    const char *target;
    tli_str out;
    int indent;
    bool inside_parallel;
    /* Per-node text overrides: loop variables and hoisted vector loads. */
    char **var_text;
    char **load_text;
    /* Multi-use subexpressions of the statement being emitted. */
    int *uses;
    char **temp;
    tli_str *pre;    /* where temporaries are declared */
    int ntemp;
    char **strs;     /* every string made by sfmt, freed at the end */
    int nstrs, capstrs;
    bool oom;
    /* tiles */
    tli_tile_plan plan;
    const char **stage;  /* per shared buffer: its current stage (NULL: 0) */
    int32_t frag_loop;   /* the fragment-mapped tl_parallel being emitted */
    tli_str helpers;     /* device functions the kernel needs (wgmma shapes) */
    bool wgmma_n[4][33]; /* helper for (f16?, N / 8) already emitted */
    struct tli_tma_list *tma; /* TMA descriptors the kernel takes */
    /* Shared buffers filled by a standalone cp.async copy not yet waited
     * for: the wait and the barrier come before the first statement that
     * touches one of them, so the copy overlaps what runs in between. */
    int32_t pending[TLI_MAX_PENDING];
    int npending;
    /* Emitting a consumer warpgroup's block body of a ping-pong kernel:
     * block barriers are the warpgroup's named barrier, the pipelined loop
     * is the consumer side of the shared pipeline. */
    bool pingpong;
    tl_status st;        /* first lowering failure */
    char err[256];
} emitter;

/* Strings owned by the emitter (freed with it). */
char *tli_e_keep(emitter *E, char *s);
char *tli_e_fmt(emitter *E, const char *fmt, ...) TLI_PRINTF(2, 3);
/* One line of output at the current indentation. */
void tli_e_line(emitter *E, const char *fmt, ...) TLI_PRINTF(2, 3);
/* An expression's text; shared subexpressions of the current statement
 * become temporaries. */
const char *tli_e_expr(emitter *E, int32_t id);
/* The text of one expression used alone (its temporaries emitted first). */
const char *tli_e_single(emitter *E, int32_t id);
/* A barrier over the block's threads: __syncthreads(), or the consumer
 * warpgroup's named barrier in a ping-pong kernel. */
void tli_e_sync(emitter *E);
/* Statements of a body. */
void tli_e_stmts(emitter *E, int32_t first);
/* Loop variables i<sid>_<d><suffix> of parallel loop sid from a flat index. */
void tli_e_decompose(emitter *E, int32_t sid, const char *flat, const char *suffix);

/* Offset and in-bounds test of an access to a global tensor, given the
 * texts of its indices. */
void tli_e_global_access(emitter *E, int32_t buf, const char *const *idx, char **off, char **ok);

/* emit_pingpong.c */
/* Whether the kernel can be lowered as a ping-pong one; why not in why. */
bool tli_pingpong_ok(emitter *E, char *why, size_t len);
/* The whole body of a ping-pong kernel (after the tile prologue). */
void tli_e_pingpong_body(emitter *E);
/* The consumer side of the pipelined loop sid in a ping-pong kernel. */
void tli_e_pingpong_pipelined(emitter *E, int32_t sid, int32_t first_consumer);

/* emit_tile.c */
/* wgmma of gemm statement s on the current stages, then wgmma.wait_group(wait). */
void tli_e_gemm_wgmma(emitter *E, const tli_snode *s, int wait);
/* The stage text the consumers of pipelined loop `loop` read (NULL: 0). */
void tli_e_consumer_stage(emitter *E, const tli_snode *loop, int32_t first_consumer, const char *stage);
/* Whether producer copy c of a pipelined loop can be TMA boxes. */
bool tli_e_tma_copy_ok(emitter *E, int32_t c);
/* Fills stage `stage` of pipelined loop `loop` with the tiles of iteration
 * `it` by TMA: the expect of the stage's bytes on barrier `bar`, then the
 * loads of its producers, completing on it. */
void tli_e_tma_stage(emitter *E, const tli_snode *loop, int32_t first_consumer, const char *it, const char *stage,
                     const char *bar);
/* Shared memory pointers, fragment and local arrays, the block remap of
 * tl_use_swizzle: the start of the kernel body. */
void tli_e_tile_prologue(emitter *E);
void tli_e_copy(emitter *E, int32_t sid);
/* Waits for the pending standalone copies: cp.async wait, proxy fence
 * where the async proxy reads shared memory, block barrier. Entries from
 * `from` on are then done (earlier ones, of an enclosing body, stay
 * pending: this point may not run). */
void tli_e_flush_pending(emitter *E, int from);
void tli_e_fill(emitter *E, int32_t sid);
void tli_e_gemm(emitter *E, int32_t sid);
void tli_e_pipelined(emitter *E, int32_t sid);
/* Emits parallel loop sid mapped onto a fragment's layout; false when the
 * loop touches no fragment (then it is an ordinary parallel loop). */
bool tli_e_frag_parallel(emitter *E, int32_t sid);
/* Text of a load from a shared, fragment or local buffer. */
char *tli_e_tile_load(emitter *E, const tli_enode *n);
/* Store statement to a shared, fragment or local buffer. */
void tli_e_tile_store(emitter *E, const tli_snode *s, const char *val, const char *const *idx);
/* Offset text of element idx of a shared buffer, and its in-bounds test. */
void tli_e_smem_access(emitter *E, int32_t buf, const char *const *idx, const int32_t *ids, char **off, char **ok);

#endif
