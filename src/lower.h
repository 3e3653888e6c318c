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
/* true when statement s (or one inside it) reads or writes buffer buf. */
bool tli_stmt_uses_buf(const tli_ir *ir, int32_t s, int32_t buf);

/* ---------------------------------------------------------------- tiles */

/* How a block's warps split a tl_gemm's C tile: wgm x wgn warps, each owning
 * a wm x wn warp tile of mt x nt m16n8 MMA tiles. */
typedef struct tli_warp_layout {
    int wgm, wgn;
    int64_t wm, wn;
    int mt, nt;
    /* wgmma (sm_90a): wgm warpgroups stacked along M, each owning wm rows
     * as mt m64 tiles over the whole N (wn = N, nt = N / 8); warp w of a
     * warpgroup holds rows 16 (w % 4) .. + 15 of each m64 tile. */
    bool wgmma;
} tli_warp_layout;

/* Picks the warp split for C [m, n] (k: the reduction) under the policy in
 * flags (TL_GEMM_WARP_*); false with the reason in why when none fits. */
bool tli_gemm_warp_layout(int64_t m, int64_t n, int64_t k, int threads, unsigned flags, tli_warp_layout *out,
                          char *why, size_t why_len);

/* Where each element of a fragment lives. mma: the m16n8 accumulator layout
 * of tl_gemm (element (i, j) in thread (warp, lane) at register r); spread:
 * flat element e in thread e % threads, register e / threads. */
typedef struct tli_frag_layout {
    bool mma;
    tli_warp_layout w;
    int64_t per_thread; /* registers per thread */
} tli_frag_layout;

/* A shared buffer: its place in the dynamic shared memory and its copies. */
typedef struct tli_smem_info {
    /* mn_major: a [K, N] operand of wgmma stored as 64-column blocks of
     * 128-byte rows ([N / 64][K][64], each row swizzled), the MN-major
     * layout the tensor cores read with a transposed descriptor */
    bool mn_major;
    int64_t offset;      /* bytes from the start                 */
    int stages;          /* copies (multi-buffering)             */
    int64_t stage_elems; /* elements between copies              */
} tli_smem_info;

/* A TMA descriptor a kernel takes as an extra parameter: a 2-D box of
 * box_inner x box_outer elements of global tensor `buf`, 128-byte swizzle. */
typedef struct tli_tma_map {
    int32_t buf;
    int64_t box_inner, box_outer;
} tli_tma_map;

#define TLI_MAX_TMA 8

typedef struct tli_tile_plan {
    tli_frag_layout *frag; /* by buffer id */
    tli_smem_info *smem;   /* by buffer id */
    int64_t smem_bytes;
    int64_t barriers;      /* offset of 32 mbarriers (wgmma kernels), else -1 */
    bool wgmma;            /* some gemm runs on wgmma (sm_90a) */
} tli_tile_plan;

/* Lays out the kernel's tiles and checks their uses: fragment layouts agree
 * (one per fragment; element-wise loops over a fragment index it by their
 * variables), pipelined loops start with their copies, shared memory fits
 * smem_limit bytes. Errors (explained in err): TL_ERR_SHAPE (layout
 * conflicts, too much shared memory), TL_ERR_UNSUPPORTED, OOM. */
tl_status tli_plan_tiles(const tli_ir *ir, const char *target, int64_t smem_limit, tli_tile_plan *plan, char *err,
                         size_t errlen);
void tli_tile_plan_free(tli_tile_plan *plan);

/* The wgmma layout of C [m, n] for a gemm on sm_90a, when its operands
 * allow it: A [m, 64] and B [n, 64] (K-major, 128-byte rows), m split into
 * m64 tiles per warpgroup, n a multiple of 16 up to 256. */
bool tli_gemm_wgmma_layout(const tli_ir *ir, int32_t gemm, const char *target, tli_warp_layout *out);

/* true when copy statement s moves global -> shared (a pipeline producer). */
bool tli_is_producer(const tli_ir *ir, int32_t s);
/* The buffer of a copy operand (a0 or a1 of S_COPY). */
int32_t tli_copy_buf(const tli_ir *ir, int32_t operand);

#endif
