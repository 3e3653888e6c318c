/* emit_internal.h - the printer's state and helpers, shared by emit_cuda.c
 * (the kernel, expressions, control flow, element-wise loops, the lowered
 * synchronisation statements) and emit_tile.c (shared tiles, fragments,
 * copies, tensor-core GEMM, reductions). The printer follows the lowered
 * kernel; every choice it prints was made by a pass. */
#ifndef TILEC_EMIT_INTERNAL_H
#define TILEC_EMIT_INTERNAL_H

#include "lower.h"

enum { VAR_I64, VAR_INT, VAR_INT_RANGE }; /* emitter.var_int */

typedef struct emitter {
    const tli_lowered *L;
    const tli_ir *ir;
    tli_str out;
    int indent;
    bool inside_parallel; /* printing the body of a thread-mapped loop */
    bool run_inside;      /* printing the copy of a run loop for runs that pass their masks
                             (comparisons marked run_mask print as true) */
    /* Per-node text overrides: loop variables and loads of vector chunks. */
    char **var_text;
    char **load_text;
    /* In-tile coordinates of a fragment loop (below 2^20): VAR_INT where
     * printed as `int` (run loops), VAR_INT_RANGE where declared long long
     * (register loops). A comparison `coordinate < 64-bit bound` takes the
     * 32-bit form (tl_lt_i32): one compare an element, the bound's clamp
     * shared by the elements it is the same for. */
    unsigned char *var_int;
    /* Multi-use subexpressions of the statement being printed; `touched`
     * lists the nodes whose entries must be cleared for the next one, so
     * a statement costs its own size. */
    int *uses;
    char **temp;
    int32_t *touched;
    int32_t ntouched, captouched;
    tli_str *pre;    /* where temporaries are declared */
    int ntemp;
    /* The statement's nodes whose temporaries are settled (stamped), with
     * the depth of operators their text nests (in done.val); pending: the
     * walk that settles them. printing: inside the text of a node, whose
     * operands are settled already. walk: the emitter's other walks. */
    tli_marks done, walk;
    int32_t (*pending)[2];
    int32_t npending, cappending;
    int printing;
    char **strs;     /* every string made by tli_e_fmt, freed at the end */
    int nstrs, capstrs;
    bool oom;
    const char **stage;  /* per shared buffer: its stage in the enclosing S_STAGE (NULL: 0) */
    int32_t frag_loop;   /* the fragment whose registers the loop being printed iterates */
    tli_str helpers;     /* device functions the kernel needs (wgmma shapes) */
    bool wgmma_fn[4][33][3]; /* helper (f16?, trans B?) x (N / 8) x (A in shared, in registers, transposed) made */
    tl_status st;        /* the first inconsistency found (TL_ERR_INTERNAL) */
    char err[256];
} emitter;

/* Strings owned by the emitter (freed with it). */
char *tli_e_keep(emitter *E, char *s);
char *tli_e_fmt(emitter *E, const char *fmt, ...) TLI_PRINTF(2, 3);
/* The text built in s (s is emptied), kept like tli_e_fmt's; "" with the
 * emitter's out-of-memory latched when s ran out of memory. */
char *tli_e_take(emitter *E, tli_str *s);
/* One line of output at the current indentation. */
void tli_e_line(emitter *E, const char *fmt, ...) TLI_PRINTF(2, 3);
/* Records that the lowered kernel is not what the printer can print. */
void tli_e_fail(emitter *E, const char *fmt, ...) TLI_PRINTF(2, 3);
/* An expression's text; subexpressions used more than once in the current
 * statement, or nested too deep, become temporaries (declared before it). */
const char *tli_e_expr(emitter *E, int32_t id);
/* The text of one expression used alone (its temporaries printed first). */
const char *tli_e_single(emitter *E, int32_t id);
/* Statements of a body. */
void tli_e_stmts(emitter *E, int32_t first);
/* Integer texts combined with the identities applied (no "+ 0", "* 1"). */
const char *tli_e_add(emitter *E, const char *a, const char *b);
const char *tli_e_mul(emitter *E, const char *a, int64_t k);
/* The names of a tensor's extent d and stride d in the generated code
 * ("1" for a stride that is the constant 1). */
const char *tli_e_dim(emitter *E, int32_t buf, int d);
const char *tli_e_stride(emitter *E, int32_t buf, int d);
/* The name a buffer, parameter or loop variable has in the source. */
const char *tli_e_buf(emitter *E, int32_t buf);
/* The suffix of the device functions that access global tensor buf with
 * its L2 policy (tl_use_cache_policy): "_ef" (evict first) or "". */
const char *tli_e_policy(emitter *E, int32_t buf);

/* Offset and in-bounds test of an access to a global tensor, given the
 * texts of its indices. */
void tli_e_global_access(emitter *E, int32_t buf, const char *const *idx, char **off, char **ok);

/* emit_tile.c */
/* Declarations of the tiles (shared pointers, fragment and local arrays). */
void tli_e_tile_decls(emitter *E);
void tli_e_copy(emitter *E, int32_t sid);
/* The TMA boxes of an S_TMA_STORE (its copy's round of the staging tile), then the bulk commit. */
void tli_e_tma_store(emitter *E, const tli_snode *s);
void tli_e_fill(emitter *E, int32_t sid);
void tli_e_gemm(emitter *E, int32_t sid);
void tli_e_reduce(emitter *E, int32_t sid);
void tli_e_cluster_reduce(emitter *E, int32_t sid);
/* A tl_parallel that iterates a fragment's registers. */
void tli_e_frag_parallel(emitter *E, int32_t sid);
/* The same, by runs of consecutive columns whose global accesses move
 * whole runs (emit_cuda.c). */
void tli_e_frag_runs(emitter *E, int32_t sid);
/* Coordinates of register r (text) of fragment buf, and the test that it
 * holds an element (NULL: every one does). */
void tli_e_frag_coords(emitter *E, int32_t buf, const char *r, const char **idx, const char **guard);
/* Text of a load from a shared, fragment or local buffer. */
char *tli_e_tile_load(emitter *E, const tli_enode *n);
/* Store statement to a shared, fragment or local buffer. */
void tli_e_tile_store(emitter *E, const tli_snode *s, const char *val, const char *const *idx);
/* Offset text of element idx of a shared buffer (at its current stage), and
 * its in-bounds test (ids: the index expressions, or NULL). */
void tli_e_smem_access(emitter *E, int32_t buf, const char *const *idx, const int32_t *ids, char **off, char **ok);
/* The mbarrier buf[idx] as a pointer text. */
const char *tli_e_mbar(emitter *E, int32_t buf, int32_t idx);

#endif
