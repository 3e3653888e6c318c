/*
 * lowered.h - the lowered kernel: a copy of the kernel graph that the passes
 * rewrite into target-level statements, with every decision they take
 * recorded in it (fragment layouts, how each tl_parallel maps onto threads,
 * each copy's engine, the pipeline's structure and barriers, the shared
 * memory plan, the launch plan). The emitter prints it and decides nothing.
 *
 * The pipeline of passes (lower.c) reads top to bottom:
 *   verify -> layout -> threads -> reduce -> pipeline -> smem -> sync -> launch
 * and TILEC_DUMP=<pass>|all prints the kernel after each one.
 *
 * What the passes write into the graph:
 *   - the x[] fields of statements (TLI_X_* below), the vec field of loads;
 *   - new statements (S_LET ... S_ARRAY_BASE of ir.h) and expressions (E_LET,
 *     E_THREAD);
 *   - new buffers: mbarrier arrays (B_MBAR), scratch tiles for reductions;
 *   - the S_LETs the generated code reads by name: tl_tid, tl_warp, tl_lane,
 *     tl_wg (E_THREAD) and tl_bx, tl_by, tl_bz (E_BLOCK_IDX), made by the
 *     launch pass at the top of the kernel or of each persistent tile loop.
 */
#ifndef TILEC_LOWERED_H
#define TILEC_LOWERED_H

#include "ir.h"
#include "target.h"

/* ------------------------------------------------------------- layouts */

typedef enum tli_frag_kind {
    FRAG_NONE = 0,
    FRAG_ROWS,   /* blocked rows: see tli_frag_layout.rows */
    FRAG_MMA,    /* the m16n8 accumulator of mma.sync */
    FRAG_WGMMA,  /* the m64nN accumulator of wgmma */
    FRAG_SLICE   /* a fragment reduced from another along one dimension */
} tli_frag_kind;

/* How a block's warps split a tl_gemm's C tile: wgm x wgn warps, each owning
 * a wm x wn warp tile of mt x nt m16n8 MMA tiles. wgmma: wgm warpgroups
 * stacked along M, each owning wm rows as mt m64 tiles over the whole N
 * (wn = N, nt = N / 8); warp w of a warpgroup holds rows 16 (w % 4) .. + 15
 * of each m64 tile. */
typedef struct tli_warp_layout {
    int wgm, wgn;
    int64_t wm, wn;
    int mt, nt;
    bool wgmma;
} tli_warp_layout;

/* FRAG_ROWS of a fragment [R, C] (leading dimensions flattened into R):
 * the threads form a tr x tc grid (thread t: row group t / tc, column group
 * t % tc); each holds runs of v consecutive elements of a row. Column run
 * j (elements j v .. j v + v - 1) belongs to column group j % tc; row r to
 * row group r % tr. Register (ri, cj, e) of a thread, at
 * (ri * ncj + cj) * v + e, holds row ri tr + (t / tc) and column
 * (cj tc + t % tc) v + e. The spread layout of small fragments is the case
 * tr = 1, v = 1. */
typedef struct tli_rows_layout {
    int tr, tc, v;
    int64_t rows, cols;  /* R and C */
    int64_t nri, ncj;    /* row slots and column runs per thread */
} tli_rows_layout;

typedef struct tli_frag_layout {
    tli_frag_kind kind;
    tli_warp_layout w;     /* FRAG_MMA, FRAG_WGMMA */
    tli_rows_layout rows;  /* FRAG_ROWS */
    int32_t parent;        /* FRAG_SLICE: the fragment it was reduced from */
    int dim;               /* FRAG_SLICE: the dimension reduced away */
    int64_t per_thread;    /* registers per thread */
    bool replicated;       /* several threads hold each element (slices) */
} tli_frag_layout;

/* ------------------------------------------------------ shared memory */

typedef struct tli_smem_info {
    /* blocked: a [R, C] operand of wgmma stored as C / W blocks of 128-byte
     * rows ([C / W][R][W], each row's 16-byte chunks swizzled by row % 8:
     * the 128-byte swizzle of the tensor cores and of TMA), W =
     * tli_row128(dtype) columns: 64 of 16-bit elements, 128 of 8-bit ones.
     * A [M, K] and a [N, K] B are read K-major through it, a [K, N] B
     * MN-major (with a transposed descriptor; 16-bit only). */
    bool blocked;
    int32_t after;       /* a tile whose every stage sits right after the same
                            stage of tile `after` (a paired gemm's second B) */
    int64_t offset;      /* bytes from the start of the dynamic area */
    int stages;          /* copies (multi-buffering); 1 when not staged */
    int64_t stage_elems; /* elements between copies */
} tli_smem_info;

/* ---------------------------------------------------------- launch plan */

/* A TMA descriptor the kernel takes as a parameter: a 2-D box of
 * box_inner x box_outer elements of global tensor `buf`, 128-byte swizzle. */
typedef struct tli_tma_map {
    int32_t buf;
    int64_t box_inner, box_outer; /* leading dimensions of a rank-3/4 tensor: boxes of 1 */
} tli_tma_map;

#define TLI_MAX_TMA 8

/* What a launch must satisfy for this program, or the launcher takes the
 * program's safe variant: a tensor read by TMA has a 16-byte aligned base,
 * strides of whole 16 bytes but the last, which is 1 (ALIGN_TMA); one read
 * in 16-byte cp.async chunks also has rows of whole 16 bytes (ALIGN_CHUNKS,
 * which implies ALIGN_TMA). */
#define TLI_MAX_ALIGN_REQ 16
enum { TLI_ALIGN_TMA = 1, TLI_ALIGN_CHUNKS = 2 };
typedef struct tli_align_req {
    int32_t buf;
    int kind;
} tli_align_req;

typedef struct tli_launch_plan {
    int threads;          /* threads per CTA */
    int block_threads;    /* threads of one block of the kernel (tl_grid) */
    int min_blocks;       /* __launch_bounds__'s minimum CTAs per SM; 0: none */
    int64_t smem_bytes;   /* dynamic shared memory per CTA */
    int32_t grid[3];      /* the kernel's blocks (expressions; 0 means 1) */
    int persistent;       /* 0; else CTAs walk blocks, `persistent` at a time:
                             min(ceil(blocks / persistent), SMs) CTAs on x */
    int nmaps;
    tli_tma_map maps[TLI_MAX_TMA];
    int nalign;
    tli_align_req align[TLI_MAX_ALIGN_REQ];
    int max_regs;         /* registers per thread the launch bounds allow */
    int64_t sk_slot_floats; /* stream-K: the accumulator's floats a CTA's workspace slot holds (0: no stream-K) */
    bool block_counter;   /* tl_use_persistent(k, 2): the kernel takes a block counter (two unsigned words,
                             zero before the launch and left zero by it) */
} tli_launch_plan;

/* -------------------------------------------- statement annotations (x[]) */

/* S_PARALLEL */
enum { TLI_X_PAR_MODE = 0, TLI_X_PAR_LANES, TLI_X_PAR_GROUP, TLI_X_PAR_PER_THREAD, TLI_X_PAR_FRAG,
       TLI_X_PAR_UNIT_SCALE /* a 1-D fragment f: the loop only scales its fragment by f along the rows, so a
                               thread whose registers of f are all 1 skips it (pass_threads) */ };
typedef enum tli_par_mode {
    PAR_SCALAR = 1, /* thread t takes iterations t, t + T, ... */
    PAR_VECTOR,     /* chunks of `lanes` along the last axis, `group` loaded ahead */
    PAR_FRAGMENT    /* iterates the registers of fragment TLI_X_PAR_FRAG */
} tli_par_mode;

/* The most comparisons of one loop over runs marked run_mask (ir.h). */
#define TLI_MAX_RUN_MASKS 4

/* S_STORE inside a vector-mode tl_parallel: 1 when it writes whole chunks.
 * TLI_X_STORE_PACKED (a loop over runs): the chunk is of 16-bit floats
 * rounded from f32 values, gathered as f32 and rounded a pair at a time
 * (tl_pack: one cvt.rn.f16x2/bf16x2 per pair, where one value at a time
 * costs a convert each and a byte permute per pair to join them). */
enum { TLI_X_STORE_VEC = 0, TLI_X_STORE_PACKED };

/* S_COPY */
enum { TLI_X_COPY_HOW = 0, TLI_X_COPY_BAR, TLI_X_COPY_BAR_IDX, TLI_X_COPY_MAP, TLI_X_COPY_THREADS, TLI_X_COPY_MANAGED,
       TLI_X_COPY_MCAST, TLI_X_COPY_QUADS };
typedef enum tli_copy_how {
    CP_ELEMENTS = 1, /* element by element over the block's threads */
    CP_ASYNC16,      /* 16-byte cp.async per chunk (commit and wait are statements) */
    CP_TMA,          /* TMA boxes completing on mbarrier X_COPY_BAR[X_COPY_BAR_IDX] */
    CP_FRAG,         /* register by register, in the fragment's layout */
    CP_FRAG_ROWS,    /* FRAG_ROWS <-> global: a run of v elements per access */
    CP_TMA_STORE     /* accumulator -> global through a staging tile: the
                        threads write round X_COPY_ROUND's 64-column blocks
                        of the tile into X_COPY_STAGING (128-byte swizzled
                        rows, as TMA reads them); an S_FENCE_ASYNC, a
                        barrier and an S_TMA_STORE follow it */
} tli_copy_how;
/* A CP_TMA_STORE copy has no mbarrier: its slots hold the staging buffer
 * and the round (blocks [round * per, (round + 1) * per) of the tile, per
 * = the staging buffer's columns / 64). */
enum { TLI_X_COPY_STAGING = TLI_X_COPY_BAR, TLI_X_COPY_ROUND = TLI_X_COPY_BAR_IDX };
/* TLI_X_COPY_THREADS: the threads that run an element or cp.async copy
 * (0: the block's); the producer warpgroup of a warp-specialised kernel
 * copies with its own 128. TLI_X_COPY_MANAGED: a pipeline's copy, ordered
 * by the pipeline's own waits and mbarriers (the sync pass leaves it be).
 * TLI_X_COPY_MCAST (CP_TMA in a cluster): bit a set when the copy's source
 * tile does not depend on the block index along cluster axis a, so the
 * blocks of the cluster that differ only along those axes (its multicast
 * group, g of them) load the same tile: each loads 1/g of its rows (of
 * every box) and TMA multicasts them into the same offset of every group
 * member's shared memory, completing on each member's mbarrier. 0: a plain
 * load. (pass_pipeline.c, multicast_axes) TLI_X_COPY_QUADS (CP_FRAG): 1
 * when the copy is an f32 mma.sync / wgmma accumulator, its warp tile's
 * column blocks in fours, to 16-bit elements of a global tensor, so that
 * where the tile is inside and its rows 16-byte aligned each quad's
 * column pairs can be transposed into one 16-byte store a lane
 * (pass_pipeline.c, quad_stores; emit_tile.c, emit_frag_quad_rows). */
static inline int tli_mcast_group(const tli_ir *ir, int axes)
{
    int g = 1;
    for (int a = 0; a < 3; a++)
        if (axes >> a & 1)
            g *= ir->cluster[a];
    return g;
}

/* S_GEMM: its MMA atom; 1 when A comes from registers; 1 when it starts
 * from zero (the tl_clear of C just before it is folded into the first
 * k-step's scale-d = 0 of wgmma: no zeroing of the accumulator registers) */
enum { TLI_X_GEMM_ATOM = 0, TLI_X_GEMM_A_REGS, TLI_X_GEMM_ZERO, TLI_X_GEMM_PAIR_B, TLI_X_GEMM_PAIR_C };
/* TLI_X_GEMM_PAIR_B / _C (wgmma): a second gemm of the same A, B2 and C2,
 * folded into this one by the layout pass (and taken out of the body):
 * B2's tile sits right after B's in shared memory (tli_smem_info.after),
 * so the two are one [N1 + N2, K] operand, and each k16 step is one
 * m64n(N1 + N2) wgmma whose accumulator registers are C's then C2's. A
 * is read once a step instead of twice. */
static inline int32_t tli_gemm_acc2(const tli_snode *n) { return n->op == S_GEMM ? n->x[TLI_X_GEMM_PAIR_C] : 0; }

/* S_REDUCE of a fragment. The threads that hold one element of the result
 * differ in the bits X_RED_LANES of their lane (a butterfly of shuffles)
 * and X_RED_WARPS of their warp; when warps share an element the pass
 * splits the statement in two phases around a shared scratch tile: phase
 * 1 leaves each warp's partial there, phase 2 combines them into dst. */
enum { TLI_X_RED_SCRATCH = 0, TLI_X_RED_LANES, TLI_X_RED_WARPS, TLI_X_RED_PHASE, TLI_X_RED_GROUP };
/* S_CLUSTER_REDUCE: X_RED_SCRATCH is the kernel's exchange tile (f32, in
 * X_RED_GROUP halves taken in turn: 2, or 1 when the kernel's only cluster
 * reduction runs once), X_RED_LANES the bits of tl_tid that vary among the
 * threads holding one element (the holder with them zero writes it). */

/* S_MBAR_INIT: 1 when a fence.mbarrier_init follows the initialisation
 * (the target's mbarrier_init_fence) */
enum { TLI_X_MBAR_FENCE = 0 };
/* S_MBAR_ARRIVE: 1 when the arrival goes to the same mbarrier in block
 * `value` (an expression: its rank) of the cluster (a ring whose slots
 * other blocks multicast into is free only when every block that reads
 * them has released it) */
enum { TLI_X_MBAR_CLUSTER = 1 };

/* S_LET made by the launch pass: 1 when its value is the same in every
 * lane of a warp and every lane of the block computes it (tl_wgi, the
 * warpgroup whose rows of A a wgmma reads). The emitter takes it from
 * lane 0 (tl_warp_uniform): the compiler then knows it is warp-uniform and
 * keeps it, and what is computed from it (the wgmma descriptors), in
 * uniform registers, rather than moving each descriptor into them before
 * every wgmma. */
enum { TLI_X_LET_WARP_UNIFORM = 0 };

/* S_SERIAL made by a pass: 1 to unroll it */
enum { TLI_X_SERIAL_UNROLL = 0 };

/* S_IF whose branches are the producer (then) and the consumers (else) of
 * a warp-specialised kernel: each side synchronises on its own. */
enum { TLI_X_IF_ROLES = 0 };

/* S_TILE_LOOP: this CTA's blocks p = a0, a0 + a1, ... (vars[0] is p, an
 * E_LOOP_VAR); block p is tile
 *   t = p / persistent * persistent * gridDim.x + persistent * blockIdx.x + p % persistent
 * of the kernel's grid, and the loop ends past the last tile. The emitter
 * prints only `for (p = a0;; p += a1)`: the launch pass starts the body
 * with t (the S_LET tl_t, or the counter's protocol below, made of
 * S_MBAR_*, S_ATOMIC and word loads and stores), the exit past the last
 * tile (S_IF t >= ntiles: S_BREAK), then the S_LETs of t's block indices.
 * A stream-K loop's body starts with its unit instead (below; pass_launch.c,
 * stream_k_unit), each a function of p. */
enum { TLI_X_TILE_PERSIST = 0, TLI_X_TILE_STREAMK, TLI_X_TILE_RUN, TLI_X_TILE_COUNTER, TLI_X_TILE_SLOTS,
       TLI_X_TILE_SLOT_FULL, TLI_X_TILE_SLOT_EMPTY };
enum { TLI_COUNTER_TAKER = 1, TLI_COUNTER_READER, TLI_COUNTER_PRODUCERS };
/* TLI_X_TILE_COUNTER (tl_use_persistent(k, 2), one block at a time): block
 * p is not p G + blockIdx.x but the CTA's p-th number from the block
 * counter (a kernel parameter, launch.block_counter): blockIdx.x for p = 0,
 * then the counter's next value + G. TLI_COUNTER_TAKER: the loop of the
 * producer's one thread (TMA), which takes the number and writes it to slot p % 2 of
 * TLI_X_TILE_SLOTS (64-bit words in shared memory) once the consumers have
 * read what it held (TLI_X_TILE_SLOT_EMPTY[p % 2], one arrival a consumer
 * thread), then arrives on TLI_X_TILE_SLOT_FULL[p % 2]; past the last block
 * it counts itself done, and the CTA that counts last sets the counter's
 * two words back to 0 for the stream's next launch. TLI_COUNTER_READER: a
 * consumer loop, which reads its numbers from the slots.
 * TLI_COUNTER_PRODUCERS: the loop of a producer of several threads
 * (cp.async), whose first takes the numbers and the others read them.
 * TLI_X_TILE_SLOT_EMPTY counts every reader's arrival (pass_launch.c,
 * tile_number, writes it out). Both sides see the same blocks
 * in the same order, so the ring's positions and the turns (p n + j, or
 * the running sums) agree. */
/* TLI_X_TILE_RUN (one block at a time, blocks whose pipelined loops run
 * different trip counts, `value`: the trip count, an expression of the
 * block's indices): the loop keeps running sums over the CTA's earlier
 * blocks, TH_RUN of their trip counts and TH_RUN_BLOCKS of those with a
 * trip count above 0, which give the ring's positions and ping-pong's turn
 * numbers where a uniform trip count n would give p n and p (n + 1). */
/* TLI_X_TILE_STREAMK (tl_use_stream_k): the CTA takes whole blocks p G +
 * blockIdx.x for p < dp = ntiles / G (G = gridDim.x), then the
 * K steps [lo, hi) of the other blocks' (ntiles - dp G) x nk (nk: `value`,
 * the pipelined loop's trip count, at least 1 counted), lo = dp G nk +
 * blockIdx.x W / G for W = (ntiles - dp G) nk, in units that each stay in
 * one block t: steps [j0, j1) of it (TH_SK_J0, TH_SK_J1), TH_SK_BASE the
 * steps this CTA ran before the unit (its ring position); the loop ends
 * when the share is used up.
 * A block's first unit is the last a CTA takes, so the units of later
 * steps (each the first unit of its CTA) are done before it needs them.
 *
 * S_SK_FIXUP (the consumers, right after the unit's loop; buf: the one
 * accumulator, the block's f32 fragment): a unit with j0 > 0 writes its
 * partial sum to its CTA's slot of the workspace, raises the CTA's flag
 * and goes on to the next unit (the block's
 * epilogue is not its); the unit with j0 = 0 and j1 < nk waits for the
 * flag of each following CTA whose steps start inside the block, lowers
 * it and adds its slot, in CTA order, so the sum does not depend on
 * timing. */

/* ---------------------------------------------------- the lowered kernel */

/* Stamps for walks over the expression DAG (analysis.c). A walk takes a
 * new stamp instead of a fresh array as large as the kernel, so a question
 * costs the nodes it visits, each once however often the DAG shares it. */
typedef struct tli_marks {
    uint32_t *stamp;  /* by expression id: the walk that last reached it */
    int64_t *val;     /* by expression id: what a memoising walk found    */
    int32_t n;        /* entries of stamp and val                         */
    uint32_t now;     /* the current walk's stamp                         */
    int32_t *stack;   /* nodes still to visit                             */
    int32_t sp, cap;
    bool oom;         /* an allocation failed: answers may be incomplete  */
} tli_marks;

typedef struct tli_lowered {
    tli_ir ir;                /* the graph, rewritten by the passes      */
    tli_target target;
    bool safe;                /* the safe variant: no alignment assumed,
                                 so no TMA and no 16-byte cp.async       */
    int64_t smem_limit;       /* shared memory a block may use            */
    tli_frag_layout *frag;    /* by buffer id (grown with ir.b)          */
    tli_smem_info *smem;      /* by buffer id                            */
    int32_t nbufs_planned;    /* entries in frag and smem                */
    tli_launch_plan launch;
    bool wgmma;               /* some gemm runs on wgmma                 */
    bool warp_specialized;    /* a producer warpgroup feeds the others   */
    /* the tensor cores' async proxy reads shared memory in this kernel:
     * ordinary shared stores it reads need a proxy fence */
    bool async_proxy;
    /* scratch of the analyses: `walk` for the walks that only visit,
     * `coef` for the memo of affine coefficients (one may run inside a
     * walk; neither nests in itself). Lowering fails with
     * TL_ERR_OUT_OF_MEMORY when either ran out of memory. */
    tli_marks walk, coef;
    tl_status st;
    char err[512];
} tli_lowered;

/* Attaches a note to statement s (printed as a comment above it: what the
 * pass made of it). */
void tli_low_note(tli_lowered *L, int32_t s, const char *fmt, ...) TLI_PRINTF(3, 4);
/* Records the first failure of a pass (later ones are dropped). */
void tli_low_fail(tli_lowered *L, tl_status st, const char *fmt, ...) TLI_PRINTF(3, 4);
/* Grows frag and smem to cover every buffer; false (and OOM) on failure. */
bool tli_low_plan_bufs(tli_lowered *L);

/* Builders of lowered nodes (0 and an OOM failure on L when memory runs
 * out; every caller checks L->st before relying on the result). */
int32_t tli_low_expr(tli_lowered *L, const tli_enode *n);
int32_t tli_low_int(tli_lowered *L, int64_t v, tl_dtype dt);
int32_t tli_low_bin(tli_lowered *L, tli_eop op, int32_t a, int32_t b);
int32_t tli_low_thread(tli_lowered *L, tli_thread_value v);
int32_t tli_low_let_ref(tli_lowered *L, int32_t let);
/* A statement (not linked anywhere yet). */
int32_t tli_low_stmt(tli_lowered *L, const tli_snode *n);
/* S_LET `name` = value; the statement id (read it with tli_low_let_ref). */
int32_t tli_low_let(tli_lowered *L, const char *name, int32_t value);
int32_t tli_low_buf(tli_lowered *L, const tli_bnode *b);
/* if (cond) body else orelse (orelse 0: none), parents set. */
int32_t tli_low_if(tli_lowered *L, int32_t cond, int32_t body, int32_t orelse);
/* S_MBAR_WAIT (parity), S_MBAR_ARRIVE (a1) or S_MBAR_EXPECT (bytes) on mbarrier bar[idx]. */
int32_t tli_low_mbar(tli_lowered *L, tli_sop op, int32_t bar, int32_t idx, int32_t parity_or_n);

/* Statement lists under construction: append, then link into a body. */
typedef struct tli_list {
    int32_t first, last;
} tli_list;
void tli_list_add(tli_lowered *L, tli_list *l, int32_t s);
/* A simple statement of op with fields a0, a1 appended to l. */
int32_t tli_list_op(tli_lowered *L, tli_list *l, tli_sop op, int32_t a0, int32_t a1);
/* Sets the parent of every statement of the list starting at first. */
void tli_set_parent(tli_lowered *L, int32_t first, int32_t parent);

/* Copy of expression e with every use of loop variable `var` (an
 * E_LOOP_VAR node) replaced by expression `with`; e itself when it does not
 * use it. Visits each node once. */
int32_t tli_low_subst(tli_lowered *L, int32_t e, int32_t var, int32_t with);

/* The pass names, in order, for dumps ("verify", "layout", ...). */
extern const char *const tli_pass_names[];

#endif
