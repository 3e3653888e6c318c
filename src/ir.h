/*
 * ir.h - the kernel graph.
 *
 * Every node lives in a flat array of its kernel and is named by its index,
 * so a graph is copied with a few memcpy calls (a program keeps its own copy
 * and outlives the builder) and a handle is just (kernel tag, index). Index 0
 * of each array is a dummy so that 0 means "none".
 *
 * Expressions are pure and evaluated where they are used; a load reads the
 * memory as it is at the statement that uses it.
 */
#ifndef TILEC_IR_H
#define TILEC_IR_H

#include "internal.h"

typedef enum tli_eop {
    E_NONE = 0,
    /* leaves */
    E_CONST_INT,   /* ival */
    E_CONST_FLOAT, /* fval */
    E_PARAM,       /* a dim or scalar parameter: param = index into params */
    E_BLOCK_IDX,   /* ival = axis */
    E_LOOP_VAR,    /* loop = the statement, ival = which dimension of it */
    /* binary */
    E_ADD, E_SUB, E_MUL, E_DIV, E_MOD, E_CEILDIV, E_MAX, E_MIN,
    E_LT, E_LE, E_GT, E_GE, E_EQ, E_NE, E_AND, E_OR,
    /* unary */
    E_NEG, E_ABS, E_NOT, E_CAST,
    E_EXP, E_EXP2, E_LOG, E_SQRT, E_RSQRT, E_TANH, E_ERF,
    /* others */
    E_SELECT,      /* a[0] ? a[1] : a[2] */
    E_LOAD,        /* buf[pool[idx] ... pool[idx + rank - 1]] */
    E_BLOCK_VALUE, /* a[0], computed once a block (tl_block_value; pass_launch makes it a let) */
    /* leaves of lowered kernels (made by the passes, never by the builder) */
    E_LET,         /* the value of S_LET statement `loop` */
    E_THREAD,      /* ival: tli_thread_value */
    E_COUNT
} tli_eop;

/* E_THREAD: where the executing thread is. The lowered kernel defines
 * tl_tid, tl_warp, tl_lane and tl_wg (S_LET statements the launch pass
 * makes); TH_RAW_* are the hardware registers. */
typedef enum tli_thread_value {
    TH_TID = 0,   /* thread of the block (of the consumer group when warp-specialised) */
    TH_WARP,      /* tl_tid / 32 */
    TH_LANE,      /* tl_tid % 32 */
    TH_WG,        /* warpgroup of the CTA: threadIdx.x / 128 */
    TH_RAW_TID,   /* threadIdx.x */
    TH_RAW_BX,    /* blockIdx.x, .y, .z */
    TH_RAW_BY,
    TH_RAW_BZ,
    TH_GRID_X,    /* gridDim.x, .y */
    TH_GRID_Y,
    TH_TILE,      /* tl_t: the kernel block a persistent tile loop is at */
    TH_SK_J0,     /* tl_j0, tl_j1: the K steps [j0, j1) of block tl_t a stream-K unit takes */
    TH_SK_J1,
    TH_SK_BASE,   /* tl_sk_base: the K steps this CTA took before the unit (its ring position) */
    TH_RUN,       /* tl_run: the pipelined loop's iterations in this CTA's earlier blocks (a tile loop
                     whose blocks' trip counts differ: TLI_X_TILE_RUN) */
    TH_RUN_BLOCKS /* tl_run_blocks: those of its earlier blocks that ran at least one iteration */
} tli_thread_value;
#define TLI_TH_LAST TH_RUN_BLOCKS

typedef struct tli_enode {
    uint8_t op;      /* tli_eop */
    uint8_t dtype;   /* tl_dtype of the value */
    uint8_t vec;     /* E_LOAD in a vector-mode tl_parallel: loaded as whole chunks (pass_threads) */
    uint8_t run_mask;/* E_LT in a loop over runs of columns: `column < bound` that holds for a whole
                        run when it holds for the run's last column (pass_threads) */
    int32_t a[3];    /* operand expressions */
    int32_t buf;     /* E_LOAD */
    int32_t idx;     /* E_LOAD: start of the index list in the pool */
    int32_t param;   /* E_PARAM */
    int32_t loop;    /* E_LOOP_VAR: its statement */
    int32_t scope;   /* innermost loop statement this value depends on (0: none) */
    int64_t ival;
    double fval;
} tli_enode;

typedef enum tli_sop {
    S_NONE = 0,
    S_STORE,
    S_SERIAL,
    S_PARALLEL,
    S_IF,
    S_PIPELINED, /* a serial loop whose leading shared-memory copies run ahead */
    S_COPY,      /* region a0 -> region a1 (ids into ir->r) */
    S_FILL,      /* every element of buf = value */
    S_GEMM,      /* buf C += A * B: a[3] = {A, B, C} buffers, flags */
    S_REDUCE,    /* gemm[0] = src, gemm[1] = dst buffers; rank = the reduced
                    dimension of src; a1 = tli_redop, | TLI_REDUCE_ACCUM to
                    combine with dst's old values instead of overwriting */
    S_CLUSTER_REDUCE, /* buf = a fragment all-reduced across the cluster's
                    blocks; a1 = tli_redop; a0 = 0, or 1 + the rank of the
                    only block that gets the result (tl_cluster_reduce_sum_to) */
    S_FINALIZE,  /* buf = a reducer (tl_alloc_reducer): the parts its holders
                    keep of each element summed, so that each holds the whole
                    (tl_finalize_reducer); the reduce pass makes it an S_REDUCE
                    of buf into itself with TLI_REDUCE_FINAL */
    /* --- lowered statements: made by the passes (see lowered.h) --- */
    S_LET,        /* const <dtype of a0> <name> = a0; E_LET reads it */
    S_STAGE,      /* body runs with shared buffers vars[0..rank) at stage a0 */
    S_BARRIER,    /* a0 == 0: the CTA barrier; else named barrier a0 of a1 threads */
    S_FENCE_ASYNC,/* shared-memory writes visible to the async proxy (wgmma, TMA) */
    S_CP_COMMIT,  /* closes a cp.async group */
    S_CP_WAIT,    /* waits until at most a1 cp.async groups are in flight */
    S_WGMMA_WAIT, /* waits until at most a1 wgmma groups are in flight */
    S_MBAR_INIT,  /* thread 0 initialises every mbarrier of buf for a1 arrivals */
    S_MBAR_WAIT,  /* waits for phase parity `value` of mbarrier buf[a0] */
    S_MBAR_ARRIVE,/* arrives on buf[a0]; a1 == 1: when this thread's cp.async land */
    S_MBAR_EXPECT,/* arrives on buf[a0] expecting a1 more transaction bytes */
    S_SETMAXNREG, /* a0 == 1: raise to a1 registers per thread; 0: lower to a1 */
    S_TILE_LOOP,  /* persistent: this CTA's blocks p = a0, a0 + a1, ... (lowered.h) */
    S_ARRAY_BASE, /* tensor buf (tl_param_tensor_array) is pointer a0 of its array
                     from here on (a0: the block's index along the array's axis) */
    S_TMA_STORE,  /* TMA boxes of staging buffer buf to the destination of copy
                     a0 (a CP_TMA_STORE copy: its round), then a bulk commit */
    S_BULK_WAIT,  /* waits for this thread's bulk stores: a1 == 1 until their reads
                     of shared memory are done, 0 until they are complete */
    S_CLUSTER_SYNC, /* every thread of every block of the cluster arrives, then waits
                     (release / acquire: shared memory and mbarriers across the cluster) */
    S_SK_FIXUP,   /* stream-K, after a unit's K steps into accumulator buf: a unit
                     that does not start a block's K steps hands its partial sum on and
                     skips the rest of the block; the one that starts them adds the
                     others' partial sums, in order (lowered.h) */
    S_WARP_SYNC,  /* __syncwarp: the warp's lanes meet, their shared-memory reads
                     ordered before what lane 0 does next (an mbarrier arrival) */
    S_ATOMIC,     /* when `value` holds (0: always), an atomic add (a1 == 0) or exchange
                     (a1 == 1) of a0 on word x[0] of the kernel's block counter; when
                     named, a let of its old value plus x[1] (0: none), or of x[2]
                     (0: zero) where `value` fails */
    S_BREAK,      /* leaves the innermost loop (S_TILE_LOOP's exit, under an S_IF) */
    S_SOP_COUNT
} tli_sop;

/* Reductions (S_REDUCE): dst[rest] = op over src[..., i_dim, ...]. */
typedef enum tli_redop { R_MAX = 0, R_SUM, R_MIN, R_ABSMAX } tli_redop;
#define TLI_REDUCE_OP_MASK 0xff
#define TLI_REDUCE_ACCUM 0x100
/* lowered from S_FINALIZE: no per-thread part; each thread's partial is its
 * own value of dst (gemm[0] == gemm[1]), combined across the holders */
#define TLI_REDUCE_FINAL 0x200

typedef struct tli_snode {
    uint8_t op;       /* tli_sop */
    int32_t next;     /* next statement in the same body (0: last) */
    int32_t parent;   /* enclosing S_SERIAL/S_PARALLEL/S_IF (0: the kernel body) */
    int32_t body;     /* first statement of the body (loops, then-branch of if) */
    int32_t orelse;   /* first statement of the else branch (S_IF) */
    /* S_STORE */
    int32_t buf, idx, value;
    /* S_SERIAL, S_PIPELINED: extent; S_IF: cond; S_COPY: source region */
    int32_t a0;
    /* S_COPY: destination region; S_PIPELINED: stages; S_GEMM: flags */
    int32_t a1;
    /* S_GEMM: A, B, C buffers */
    int32_t gemm[3];
    /* loops: rank, constant extents (S_PARALLEL), variables */
    int32_t rank;
    int64_t extents[TL_MAX_RANK];
    int32_t vars[TL_MAX_RANK];
    /* what the passes decided about this statement (lowered.h: TLI_X_*) */
    int32_t x[8];
    int32_t name;     /* S_LET: its name; others: a pass's note (offsets into ir->str) */
} tli_snode;

/* B_MBAR: an array of cshape[0] mbarriers in shared memory (lowered kernels); B_WORDS: cshape[0]
 * plain 64-bit words placed with them (a persistent CTA's block numbers). */
typedef enum tli_bscope { B_GLOBAL = 1, B_SHARED, B_FRAGMENT, B_LOCAL, B_MBAR, B_WORDS } tli_bscope;

typedef struct tli_bnode {
    char name[64];
    uint8_t scope;   /* tli_bscope */
    uint8_t dtype;
    int32_t rank;
    int32_t shape[TL_MAX_RANK];  /* integer expressions */
    int32_t stride[TL_MAX_RANK]; /* integer expressions (always filled) */
    bool explicit_strides;
    int32_t param;   /* index into params (B_GLOBAL) */
    int32_t array_count; /* B_GLOBAL of tl_param_tensor_array: the number of
                            pointers in its argument (an expression); 0 for
                            an ordinary tensor */
    int32_t array_axis;  /* ... and the block axis whose index picks one */
    int64_t cshape[TL_MAX_RANK]; /* constant shape (B_SHARED, B_FRAGMENT, B_LOCAL) */
    bool written, read;
    bool reducer;    /* B_FRAGMENT of tl_alloc_reducer: each holder of an element
                        keeps a part of it until tl_finalize_reducer sums them */
    uint8_t cache;   /* B_GLOBAL: tl_cache_policy (tl_use_cache_policy) */
    int32_t at;      /* expressions the kernel had when the buffer was made:
                        where a replay of the builder calls makes it (repro.c) */
} tli_bnode;

/* A region of a buffer: the whole of it, or the tile of a global tensor at
 * tile indices (its extents come from the other side of the copy). */
typedef struct tli_rnode {
    int32_t buf;
    bool tiled;
    int32_t idx[TL_MAX_RANK]; /* tile indices (tiled) */
} tli_rnode;

typedef struct tli_param {
    char name[64];
    uint8_t kind;    /* tl_param_kind */
    uint8_t dtype;
    int32_t buf;     /* TL_PARAM_TENSOR */
    int32_t expr;    /* TL_PARAM_DIM, TL_PARAM_SCALAR: its E_PARAM node */
} tli_param;

#define TLI_VEC(T) struct { T *v; int32_t n, cap; }

typedef struct tli_ir {
    char name[64];
    TLI_VEC(tli_enode) e;
    TLI_VEC(tli_snode) s;
    TLI_VEC(tli_bnode) b;
    TLI_VEC(tli_param) p;
    TLI_VEC(int32_t) pool;
    TLI_VEC(tli_rnode) r;
    TLI_VEC(char) str;   /* names of lowered statements, NUL-terminated */
    int32_t grid[3];     /* expressions; 0 means 1 */
    int swizzle;         /* L2 rasterisation panel (0: off) */
    bool fast_math;      /* f32 math lowered to the approximate units */
    uint8_t pingpong;    /* consumers take turns on the tensor cores (tl_use_pingpong: 1, or 2 with
                            the next tile's first gemm issued in the turn of the last one's) */
    bool warp_specialize;/* a producer warpgroup issues the copies (tl_use_warp_specialize) */
    uint8_t persistent;  /* min(blocks, SMs) CTAs loop over the blocks (tl_use_persistent): 1 in turn,
                            2 each taking its next block from a counter in global memory */
    bool stream_k;       /* ... in equal shares of every block's K steps (tl_use_stream_k) */
    int threads;         /* 0 until tl_grid */
    int cluster[3];      /* tl_cluster's extents; 0 (or all 1): no clusters */
    int min_blocks;      /* tl_use_min_blocks: blocks an SM must hold (0: the lowering's choice) */
    int32_t body;        /* first statement of the kernel body */
} tli_ir;

/* Initialises an empty graph (each array holds its dummy entry 0).
 * false on OOM. */
bool tli_ir_init(tli_ir *ir, const char *name);
void tli_ir_free(tli_ir *ir);
/* Deep copy; false on OOM (dst is then empty). */
bool tli_ir_clone(tli_ir *dst, const tli_ir *src);

/* Appenders; each returns the new index, or 0 on OOM. */
int32_t tli_ir_add_expr(tli_ir *ir, const tli_enode *n);
int32_t tli_ir_add_stmt(tli_ir *ir, const tli_snode *n);
int32_t tli_ir_add_buf(tli_ir *ir, const tli_bnode *n);
int32_t tli_ir_add_param(tli_ir *ir, const tli_param *n);
int32_t tli_ir_add_region(tli_ir *ir, const tli_rnode *n);
/* Appends count indices to the pool; returns the start (or -1 on OOM). */
int32_t tli_ir_add_indices(tli_ir *ir, const int32_t *ids, int count);
/* Appends a NUL-terminated string; returns its offset (or -1 on OOM). */
int32_t tli_ir_add_str(tli_ir *ir, const char *s);
static inline const char *tli_str_at(const tli_ir *ir, int32_t off) { return off > 0 ? ir->str.v + off : ""; }

static inline const tli_enode *tli_E(const tli_ir *ir, int32_t i) { return &ir->e.v[i]; }
static inline const tli_snode *tli_S(const tli_ir *ir, int32_t i) { return &ir->s.v[i]; }
static inline const tli_bnode *tli_B(const tli_ir *ir, int32_t i) { return &ir->b.v[i]; }
static inline const tli_rnode *tli_R(const tli_ir *ir, int32_t i) { return &ir->r.v[i]; }
/* Elements of a buffer with a constant shape. */
static inline int64_t tli_buf_elems(const tli_bnode *b)
{
    int64_t n = 1;
    for (int d = 0; d < b->rank; d++)
        n *= b->cshape[d];
    return n;
}

/* Operand count of an expression op (0 for leaves and loads). */
int tli_eop_arity(tli_eop op);
/* Short name of an op for messages and dumps ("add", "exp", ...). */
const char *tli_eop_name(tli_eop op);
/* Both questions below look at most TLI_EXPR_LOOK nodes deep and wide (a
 * DAG's shared nodes once per path): index expressions are small, and a
 * larger one gets the cautious answer at once rather than a walk that is
 * exponential in a DAG's depth or overflows the stack on a long chain. */
#define TLI_EXPR_LOOK 4096
/* true when expression e mentions loop variable (loop, dim), or may (too
 * large to tell). */
bool tli_expr_uses_var(const tli_ir *ir, int32_t e, int32_t loop, int dim);
/* true when e is an integer constant; its value in *v. */
bool tli_expr_const_int(const tli_ir *ir, int32_t e, int64_t *v);
/* true when every value integer expression e can take lies in [*lo, *hi]
 * (constants, loop variables with constant extents, + - * max min, and /
 * and % of non-negative values by positive constants); false when that
 * is not known (or e is too large to tell). */
bool tli_expr_range(const tli_ir *ir, int32_t e, int64_t *lo, int64_t *hi);

/* Blocks per cluster (1 without clusters). */
static inline int tli_cluster_size(const tli_ir *ir)
{
    int n = 1;
    for (int i = 0; i < 3; i++)
        n *= ir->cluster[i] > 0 ? ir->cluster[i] : 1;
    return n;
}

static inline bool tli_dtype_is_f8(tl_dtype d) { return d == TL_F8E4M3 || d == TL_F8E5M2; }
/* A 16- or 8-bit float: computed in f32 and rounded back (tl_to_<name>). */
static inline bool tli_dtype_is_narrow_float(tl_dtype d) { return d == TL_F16 || d == TL_BF16 || tli_dtype_is_f8(d); }
static inline bool tli_dtype_is_float(tl_dtype d)
{
    return d == TL_F32 || d == TL_F16 || d == TL_BF16 || d == TL_F64 || tli_dtype_is_f8(d);
}
/* Columns of dtype in a 128-byte row: the width of a block of the
 * tensor cores' 128-byte swizzle (lowered.h, tli_smem_info.blocked). */
static inline int64_t tli_row128(tl_dtype d) { return 128 / (int64_t)tl_dtype_size(d); }
static inline bool tli_dtype_is_int(tl_dtype d) { return d == TL_I32 || d == TL_I64; }

#endif
