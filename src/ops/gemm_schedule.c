/*
 * gemm_schedule.c - which schedule the prebuilt GEMM runs: the tuning
 * database's record for this GPU and shape class when there is one, else
 * the heuristic table below; the space of schedules the tuner tries; the
 * GEMM's place in the database (shape classes).
 */
#include "ops.h"
#include "target.h"

#include "ctx.h"
#include "ir.h"
#include "tune.h"

#include <string.h>

const char *const tli_gemm_param_names[] = {"bm", "bn", "bk", "st", "th", "sw", "wp", "pp", "sk", "ab", "ps", "cm", "cn",
                                            "stk", "gv", NULL};

TL_API tl_tune_config tl_gemm_schedule_to_config(const tl_gemm_schedule *s)
{
    tl_tune_config c;
    memset(&c, 0, sizeof c);
    if (!s)
        return c;
    const int v[] = {s->block_m, s->block_n, s->block_k, s->stages, s->threads, s->swizzle, (int)s->warp_policy,
                     s->pingpong, s->split_k, s->swap_ab, s->persistent, s->cluster_m, s->cluster_n, s->stream_k,
                     s->gemv};
    memcpy(c.v, v, sizeof v);
    return c;
}

TL_API tl_gemm_schedule tl_gemm_schedule_from_config(const tl_tune_config *c)
{
    tl_gemm_schedule s;
    memset(&s, 0, sizeof s);
    if (!c)
        return s;
    s = (tl_gemm_schedule){.block_m = c->v[0], .block_n = c->v[1], .block_k = c->v[2], .stages = c->v[3],
                           .threads = c->v[4], .swizzle = c->v[5], .warp_policy = (unsigned)c->v[6],
                           .pingpong = c->v[7], .split_k = c->v[8], .swap_ab = c->v[9],
                           .persistent = c->v[10], .cluster_m = c->v[11], .cluster_n = c->v[12],
                           .stream_k = c->v[13], .gemv = c->v[14]};
    return s;
}

bool tli_gemm_tma_rows(const tl_gemm_desc *d)
{
    int64_t per = 16 / (int64_t)tl_dtype_size(d->in_dtype); /* elements in 16 bytes */
    return d->k % per == 0 && (d->trans_b ? d->k : d->n) % per == 0;
}

/* Rows of B of ldb elements (K of B as [N, K], N of B as [K, N] when
 * dense) that are not whole 32-byte sectors long: each row of a tile then
 * starts half a sector off, and its reads cost the L2 several requests
 * each. ncu at 4096x4096x4104 NT
 * (session 31): 3.6 times the L2 requests of 4096^3 for the same DRAM
 * bytes, the L2 76 % busy, 0.64 x cuBLAS against 0.99. The same rows of A
 * cost nothing measurable (4096x4096x4104 NN 0.99): B's tile is the taller
 * one, read by more CTAs. Measured for 16-bit inputs only: 8-bit ones
 * keep their rows (8-bit rows off the sectors: not yet swept). */
bool tli_gemm_b_rows_off_sectors(int64_t ldb, tl_dtype in)
{
    return tl_dtype_size(in) == 2 && ldb * 2 % 32 != 0;
}

unsigned tli_gemm_dense_rows(const tl_gemm_desc *d)
{
    return TLI_GEMM_TMA | (tli_gemm_b_rows_off_sectors(d->trans_b ? d->k : d->n, d->in_dtype) ? TLI_GEMM_B_OFF : 0);
}

/* The tables below count block_k in 16-bit elements; 8-bit inputs take the
 * same bytes a stage, twice the columns (one 128-byte swizzled row is 128
 * of them, what wgmma reads them in). */
static tl_gemm_schedule for_inputs(tl_gemm_schedule s, const tl_gemm_desc *d)
{
    if (d && tli_dtype_is_f8(d->in_dtype))
        s.block_k *= 2;
    return s;
}

/* ------------------------------------------------------------------------ */
/* The heuristic table                                                       */
/* ------------------------------------------------------------------------ */

/* Conditions of a row (all that it names must hold). */
enum {
    H_SM90A = 1 << 0,    /* the target is sm_90a (wgmma, TMA)                     */
    H_TMA = 1 << 2,      /* TMA can read the rows (tli_gemm_tma_rows)             */
    H_FEW_TILES = 1 << 3,/* at most 64 tiles of 128x256: under half a wave of
                            the large tile on a 132-SM H200                       */
    H_DECODE = 1 << 5,   /* M <= 64 and K >= 1024: a GEMV in all but name,
                            memory-bound on B                                     */
    H_NARROW = 1 << 6,   /* M <= 16: C^T = B^T A^T takes tiles of 64 rows of B^T
                            by 16 of A (swap_ab; B as [K, N] read as a
                            transposed A, which only wgmma does: the row is
                            sm_90a's)                                             */
    H_NARROW32 = 1 << 7, /* M <= 32: the same with tiles of 64 rows of B^T by 32
                            of A                                                  */
    H_WIDE = 1 << 8,     /* at least 64 tiles of 64x128: enough CTAs without a
                            split of K                                            */
    H_WAVE128 = 1 << 9,  /* 97 to 132 tiles of 128x128: about one wave of them on
                            a 132-SM H200, where 64x128 tiles make two ragged
                            ones                                                  */
    H_SHORT_K = 1 << 10, /* K of at most 1024 bytes (8 steps of 128-byte rows): a
                            tile's main loop is short against its epilogue     */
    H_GEMV = 1 << 11,    /* M = 1, B as [N, K], 16-bit inputs: the matrix-vector
                            kernel on the CUDA cores (gemv.c)                   */
    H_B_OFF = 1 << 12,   /* B's rows are not whole 32-byte sectors (16-bit
                            inputs; TLI_GEMM_B_OFF)                             */
    H_B_KN = 1 << 13,    /* B as [K, N] (not trans_b)                           */
};

#define SPLIT_AUTO (-1) /* split_k of a heuristic row: as many slices as fill the GPU (auto_split) */

typedef struct heuristic_row {
    unsigned when;
    tl_gemm_schedule s;
} heuristic_row;

/* Tried in order; the first row whose conditions hold is the schedule.
 * Each row is the best of the measurements in bench/NOTES.md (H200,
 * schedule sweeps against cuBLAS in the same run, v6):
 *   00. a matrix-vector product (M = 1, B as [N, K]): the CUDA cores'
 *      kernel, one row of B a block of 64 threads, K in chunks of 2048
 *      (session 12), unless row 0's tiles fill the GPU without a split
 *      (session 29);
 *   0. narrow decode (M <= 16, B as [N, K]): C^T = B A^T on 64x16 tiles
 *      (64 rows of B, 16 of A: no empty M rows), 8 stages of 10 KiB, split
 *      as below (session 7);
 *   0'. decode (M <= 64, K >= 1024): one warpgroup on 64x128 tiles (the
 *      least wgmma M); with at least 64 tiles a producer warpgroup, 8
 *      stages and C by TMA (sessions 10, 20), else K split so that tiles x
 *      slices give each SM about one CTA:
 *      at 1x4096x4096 the 32 tiles of one pass left 100 SMs idle and read
 *      B at a fifth of the copy's bandwidth (session 7);
 *   1'. about one wave of 128x128 tiles (256x8192x8192: 128 of them):
 *      128x128 on two consumer warpgroups and a producer, 5 stages, C by
 *      TMA, instead of 1.94 waves of 64x128 (session 11);
 *   1. few tiles (1024^3): 64x128 tiles on one warpgroup, four times the
 *      blocks of 128x256: 0.751x / 0.722x cuBLAS NT / NN at 1024^3 against
 *      0.648x / 0.635x for 128x128 on two (session 7 sweep); with a producer
 *      warpgroup, 6 stages and C stored by TMA (persistent: one tile a CTA
 *      here) where TMA reads the rows, 1.008x / 0.955x (session 10); where
 *      B's rows are off the L2's 32-byte sectors, 128x128 tiles as in 1'
 *      (session 31);
 *   1''. K of at most 1024 bytes (8-bit K <= 1024, 16-bit K <= 512): 128x128
 *      on two consumer warpgroups, 4 stages, persistent: the shorter tile
 *      keeps the epilogue's share down (session 11);
 *   2. everything else TMA can read, with or without an epilogue: the
 *      128x256x64 tile, 4 stages, in persistent CTAs with a producer
 *      warpgroup (the next tile's loads under this one's store) and C
 *      stored through shared memory by TMA (the store under the next
 *      tile's main loop): 0.98x-1.06x cuBLAS at every ANCHORS shape from
 *      2048^3 up, NT and NN (session 9, bench_gemm), where the ping-pong
 *      kernel that rows 1 and 3 used to give short K and epilogues reached
 *      0.72x-0.85x; with bias + GELU 1.006x cuBLASLt's fused epilogue at
 *      4096^3 against 0.940x for the ping-pong kernel (same run); where
 *      B's rows are off the L2's 32-byte sectors, B as [N, K]: the tile
 *      without persistence in clusters of two along M that TMA multicasts
 *      B to; B as [K, N]: 256x128 tiles, persistent (session 31);
 *   3. rows TMA cannot read: the same tile one CTA a tile (a producer
 *      would copy element by element);
 *   4. other targets: mma.sync with a footprint an A100 holds (163 KiB). */
static const heuristic_row heuristic[] = {
    /* 1x4096x4096, 1x14336x4096, 1x4096x14336, x cuBLAS: 1.117, 1.027, 1.033 against 1.091,
     * 0.976, 0.947 for the swapped 64x16 tiles in 2 slices; at M = 2 and 4 the tensor cores'
     * tiles win (1.06 against 0.88 and 0.63: A is read again for every row of B), bench_gemm_small
     * --sweep, session 12 */
    {H_GEMV, {1, 1, 2048, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}},
    {H_SM90A | H_DECODE | H_NARROW | H_TMA, {64, 16, 64, 8, 128, 8, 0, 0, SPLIT_AUTO, 1, 0, 0, 0, 0, 0}},
    /* 32x8192x8192, x cuBLAS NT / NN: 0.917 / 0.917 against 0.865 / 0.883 for 64x128 tiles in
     * 2 slices (bench_gemm_small --sweep, session 8) */
    {H_SM90A | H_DECODE | H_NARROW32 | H_TMA, {64, 32, 64, 4, 128, 8, 0, 0, SPLIT_AUTO, 1, 0, 0, 0, 0, 0}},
    /* 64x8192x8192, x cuBLAS (bench_gemm, same run): 0.939 against 0.86 split in 2; 64x14336x4096
     * 1.042 / 0.985 (session 10). 8 stages rather than 6 (more of B in flight, as cuBLAS's decode
     * kernel keeps): 64x8192x8192 NT / NN 1.003 / 0.982 against 0.968 / 0.934, 48x8192x8192
     * 0.986 / 0.982 against 0.955 / 0.938, 64x14336x4096 level (1.026 / 1.023 against 1.029 /
     * 1.029; bench_gemm_small --sweep, session 20) */
    {H_SM90A | H_DECODE | H_WIDE | H_TMA, {64, 128, 64, 8, 128, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}},
    {H_SM90A | H_DECODE | H_TMA, {64, 128, 64, 4, 128, 8, 0, 0, SPLIT_AUTO, 0, 0, 0, 0, 0, 0}},
    /* 256x8192x8192, x cuBLAS NT / NN: 0.927 / 0.931 against 0.758 / 0.758 for 64x128 tiles
     * (256 of them: 1.94 waves); 8-bit inputs 0.925 of cuBLASLt against 0.802 (session 11) */
    {H_SM90A | H_WAVE128 | H_TMA, {128, 128, 64, 5, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}},
    /* B's rows off the sectors: 1000^3, x cuBLAS NT / NN: 0.876 / 0.862 against 0.816 / 0.822
     * for the row below (tilec bench gemm, the tuner's 43 schedules, session 31): half the CTAs,
     * each reading its tile of B for twice the work */
    {H_SM90A | H_FEW_TILES | H_TMA | H_B_OFF, {128, 128, 64, 5, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}},
    /* 1024^3, x cuBLAS NT / NN: 1.008 / 0.955 against 0.750 / 0.741 for the same tile one CTA a
     * tile with thread 0 feeding it (bench_gemm, session 10) */
    {H_SM90A | H_FEW_TILES | H_TMA, {64, 128, 64, 6, 128, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}},
    {H_SM90A | H_FEW_TILES, {64, 128, 64, 4, 128, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
    /* 8-bit 4096x4096x1024 and 8192x8192x1024, x cuBLASLt: 1.016 and 0.975 against 0.981 and
     * 0.949 for 128x256; 16-bit 8192x8192x512 NT 0.953 against 0.943 (session 11) */
    {H_SM90A | H_SHORT_K | H_TMA, {128, 128, 64, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}},
    /* B's rows off the sectors, B as [K, N]: 256x128 tiles, persistent, each reading half the B
     * of a 128x256 tile for the same work. x cuBLAS (tilec bench gemm, the tuner's 43 schedules,
     * session 31): 8192x8200x8192 1.009, 4096x4104x4096 0.938-0.956, 2048x3000x2048 0.786
     * against 0.920, 0.757-0.760 and under 0.74 for the clusters of the next row (0.66 or less
     * for the default); 3000x5000x2000 0.783 against 0.845 there (the one loss) */
    {H_SM90A | H_TMA | H_B_OFF | H_B_KN, {256, 128, 64, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}},
    /* B's rows off the sectors, B as [N, K]: each tile of B read once for a cluster of two CTAs
     * along M (TMA multicast), half its L2 requests. x cuBLAS (same sweeps): 4096x4096x4104 0.907
     * against 0.640 for the default, 2000x2000x1000 0.821 against 0.751 */
    {H_SM90A | H_TMA | H_B_OFF, {128, 256, 64, 4, 256, 8, 0, 0, 0, 0, 0, 2, 0, 0, 0}},
    {H_SM90A | H_TMA, {128, 256, 64, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}},
    {H_SM90A, {128, 256, 64, 4, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
    {0, {128, 256, 32, 3, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
};
#define N_HEURISTIC (int)(sizeof heuristic / sizeof heuristic[0])

/* Whether target has the Hopper GEMM machinery the sm_90a rows assume:
 * wgmma, TMA and register reallocation (targets as data, not names). */
static bool hopper_gemm(const char *target)
{
    tli_target t;
    return tli_target_get(target, &t) && tli_target_has_mma(&t, MMA_WGMMA_M64NNK16) && t.setmaxnreg;
}

static unsigned conditions(const char *target, const tl_gemm_desc *d, unsigned rows, int sms)
{
    unsigned c = 0;
    if (hopper_gemm(target))
        c |= H_SM90A;
    if (!d)
        return c;
    if ((rows & TLI_GEMM_TMA) && tli_gemm_tma_rows(d))
        c |= H_TMA;
    if (((d->m + 127) / 128) * ((d->n + 255) / 256) <= 64)
        c |= H_FEW_TILES;
    if (d->m <= 64 && d->k >= 1024)
        c |= H_DECODE;
    if (d->m <= 16)
        c |= H_NARROW;
    if (d->m <= 32)
        c |= H_NARROW32;
    if (((d->m + 63) / 64) * ((d->n + 127) / 128) >= 64)
        c |= H_WIDE;
    int64_t t128 = ((d->m + 127) / 128) * ((d->n + 127) / 128);
    if (t128 > 96 && t128 <= 132)
        c |= H_WAVE128;
    if (d->k * (int64_t)tl_dtype_size(d->in_dtype) <= 1024)
        c |= H_SHORT_K;
    if (rows & TLI_GEMM_B_OFF)
        c |= H_B_OFF;
    if (!d->trans_b)
        c |= H_B_KN;
    /* the matrix-vector kernel unless the swapped tensor-core tiles (64 rows of B) alone give
     * every SM a CTA: 1x14336x4096 read B at 0.94 of the copy that way (no split) against 0.86
     * for the GEMV, whose 14336 blocks of 64 threads run in three ragged waves; 1x4096x4096
     * and 1x4096x14336 (64 tiles, a split) stay faster on the GEMV (session 29) */
    unsigned swapped_fills = H_SM90A | H_TMA | H_DECODE;
    if (d->m == 1 && d->trans_b && !tli_dtype_is_f8(d->in_dtype) &&
        !((c & swapped_fills) == swapped_fills && (d->n + 63) / 64 >= sms))
        c |= H_GEMV;
    return c;
}

/* The tiles of d under s (a swapped schedule tiles C^T: N rows by M). */
static int64_t tile_count(const tl_gemm_desc *d, const tl_gemm_schedule *s)
{
    int64_t rows = s->swap_ab ? d->n : d->m, cols = s->swap_ab ? d->m : d->n;
    return ((rows + s->block_m - 1) / s->block_m) * ((cols + s->block_n - 1) / s->block_n);
}

/* A CTA's shared memory under s: its stages, the f32 exchange tile of a
 * split, a KiB of barriers. */
static int64_t cta_smem(const tl_gemm_desc *d, const tl_gemm_schedule *s)
{
    int64_t stage = (int64_t)(s->block_m + s->block_n) * s->block_k * (int64_t)tl_dtype_size(d->in_dtype);
    return s->stages * stage + (int64_t)s->block_m * s->block_n * 4 + 1024;
}

/* The slices of K for s's tiles on sms SMs: about one CTA an SM for the
 * 64x128 kernel, two for the swapped 64x16 one (stages of 10 KiB), at
 * most 16 slices of at least 4 K steps (32 swapped; 16-bit swapped tiles
 * take one CTA an SM where that splits, below); 0 (no split) when
 * the tiles alone come near that. Slices of whole K steps, as many as the
 * steps need (a last slice is never empty). Session 7 sweeps, x cuBLAS:
 * 8x14336x4096 0.81 with 2 slices of 64x128, 0.90 without; 64x8192x8192
 * 0.84 with 4, 0.88 with 2; swapped, 16x4096x14336 0.90 with 2, 0.96 with
 * 4, 1x4096x4096 the same with 2 and 4 (16-step slices), 0.61 without. */
static int auto_split(const tl_gemm_desc *d, const tl_gemm_schedule *s, int sms, const char *target)
{
    int64_t tiles = tile_count(d, s);
    int64_t steps = (d->k + s->block_k - 1) / s->block_k;
    /* 8-bit inputs: the same bytes a step, half the steps of a K; a
     * swapped slice of 16 of them is as long (in bytes) as 8 of 16-bit ones */
    int64_t want = (s->swap_ab ? 2 : 1) * (int64_t)sms / tiles,
            min_steps = s->swap_ab ? (tli_dtype_is_f8(d->in_dtype) ? 16 : 32) : 4;
    if (want > 16)
        want = 16;
    if (want > steps / min_steps)
        want = steps / min_steps;
    /* 16-bit swapped tiles (8-bit ones unmeasured): one CTA an SM where that is a split at all,
     * in slices of at least 16 steps where a cluster sums them (tli_gemm_cluster_split) and of
     * at least 32 where the sums go through global memory; the count above (two CTAs an SM)
     * only where it is not. x cuBLAS, K steps of 128 (the rule
     * in resolved(); bench_gemm_small --try, two rounds, session 35):
     * 1x2048x4096 NN / NT 1.103-1.137 / 1.113-1.121 in 4 slices of 1024 against 1.018-1.035 /
     * 0.997-1.006 in 2; 1x4096x2048 NN 0.973-1.011 in 2 against 0.766 unsplit; 16x4096x14336
     * NT / NN 1.123-1.127 / 1.127-1.130 in 2 against 1.097-1.104 / 1.112-1.115 in 4 slices of
     * 64; 32x2048x8192 (64x32) 1.045-1.052 in 4 (through global memory) against 0.92-0.94 in
     * 2. Not past one CTA an SM: 1x4096x4096 in 4 slices (256 CTAs) 0.91 against 1.19 in 2;
     * not short slices through global memory: 1x1024x8192 in 8 slices of 1024 0.92-0.95 against
     * 1.01-1.03 in 4. 32x8192x8192's 128 tiles of 64x32 keep two slices (1.04-1.07 against
     * 0.92-0.95 unsplit). */
    if (s->swap_ab && tl_dtype_size(d->in_dtype) == 2) {
        int64_t one = (int64_t)sms / tiles;
        if (one > 16)
            one = 16;
        for (; one >= 2; one--) {
            tl_gemm_schedule x = *s;
            x.split_k = (int)one;
            if (steps / one >= (tli_gemm_cluster_split(target, &x) ? min_steps / 2 : min_steps))
                break;
        }
        if (one >= 2)
            want = one;
    }
    if (want < 2)
        return 0;
    int64_t per = (steps + want - 1) / want;
    return (int)((steps + per - 1) / per);
}

bool tli_gemm_cluster_split(const char *target, const tl_gemm_schedule *s)
{
    tli_target t;
    return s->split_k > 1 && s->split_k <= 8 && (int64_t)s->block_m * s->block_n * s->split_k <= 4096 &&
           !s->pingpong && tli_target_get(target, &t) && t.clusters;
}

/* A split over clusters (tli_gemm_cluster_split) runs every CTA in one
 * wave only if the GPU holds its clusters, which it places whole: fewer
 * stages (shared memory) where the CTAs would need more than half of the
 * slots. Measured (bench_gemm_small, session 8): 16x4096x14336, 64x16
 * tiles in 4 slices, 256 CTAs: 8 stages (two CTAs an SM) 0.72 x cuBLAS, 7
 * (three) 0.91, 6 0.95, 4 0.97; 1x4096x4096 in 2 slices, 128 CTAs: 8
 * stages 1.06, 4 stages 0.86. */
static int fit_stages(const tl_gemm_desc *d, const tl_gemm_schedule *s, int sms)
{
    int64_t ctas = tile_count(d, s) * s->split_k;
    tl_gemm_schedule x = *s;
    for (; x.stages > 2; x.stages--) {
        int64_t per_sm = (228 * 1024) / cta_smem(d, &x);
        if (per_sm > 2048 / s->threads)
            per_sm = 2048 / s->threads;
        if (2 * ctas <= per_sm * sms)
            break;
    }
    return x.stages;
}

/* The heuristic's schedule with its automatic split resolved for sms SMs
 * (its stages fitted when the split runs over clusters on target). */
static tl_gemm_schedule resolved(tl_gemm_schedule s, const tl_gemm_desc *d, int sms, const char *target)
{
    if (s.split_k == SPLIT_AUTO) {
        s.split_k = d ? auto_split(d, &s, sms, target) : 0;
        if (d && tli_gemm_cluster_split(target, &s))
            s.stages = fit_stages(d, &s, sms);
    }
    /* Swapped tiles of B as [K, N] with at least a CTA an SM: 4 stages. Measured after B's
     * evict-first policy (bench_gemm_small --sweep, two rounds, x cuBLAS): 16x4096x14336 1.085
     * against 1.013-1.018 at 5 stages, 1x4096x14336 1.088 against 1.054-1.062, 8x14336x4096
     * 1.072-1.092 against 1.057-1.062 at 8, 1x14336x4096 1.096-1.102 against 1.087; with fewer
     * CTAs than SMs 8 stages stay ahead (1x4096x4096, 128 CTAs: 1.050-1.060 against 1.006-1.019).
     * B as [N, K] keeps its stages: 8x14336x4096 1.063-1.066 at 8 against 1.043-1.049 at 4,
     * 16x4096x14336 level at 4 and 5 (session 29). */
    if (!d || !s.swap_ab)
        return s;
    int64_t ctas = tile_count(d, &s) * (s.split_k > 1 ? s.split_k : 1);
    if (!d->trans_b && s.stages > 4 && ctas >= sms)
        s.stages = 4;
    /* K steps of 128 (rows of 256 bytes, two TMA boxes of 128 a row of a stage) at 4 stages,
     * 16-bit inputs: unsplit with at least a CTA an SM, 8x14336x4096 NT 1.091-1.092 x cuBLAS
     * against 1.049-1.053 for 8 stages of 64 (the same bytes a CTA), NN 1.088-1.099 against
     * 1.079, 1x14336x4096 NN 1.104-1.109 against 1.090-1.104; 64x32 tiles of B as [N, K] in
     * pairs of slices with at least a CTA an SM, 32x8192x8192 NT 1.052-1.054 against
     * 1.000-1.003 (NN 0.94-0.96: not there), its 256 CTAs two an SM where every CTA fits the
     * one wave (the fit above, for clusters of any size, is not needed for pairs). Split in 4,
     * 16x4096x14336 lost at 2 and 4 stages of 128 (1.01 / 0.81 against 1.05-1.09;
     * bench_gemm_small --sweep, two rounds, session 29). */
    if (tl_dtype_size(d->in_dtype) != 2 || s.block_k != 64)
        return s;
    tl_gemm_schedule longer = s;
    longer.block_k = 128, longer.stages = 4;
    /* ... and with fewer CTAs than SMs, split or not, either layout: each CTA is alone on its SM
     * and its stream of B is all the SM reads. x cuBLAS, the same split (bench_gemm_small --try,
     * two rounds, session 35): 1x4096x4096 NN 1.186-1.201 against 1.092-1.108 for 8 stages of 64,
     * 8x4096x4096 NT / NN 1.157 / 1.184 against 1.102 / 1.092, 16x4096x4096 1.148 / 1.192
     * against 1.104 / 1.115, 4x3072x4096 1.129 / 1.163 against 0.995 / 0.978, 1x4096x2048 NN
     * 1.011 against 0.950 (2 slices), and at every other split of these shapes tried; 64x32
     * tiles, 32x4096x4096 NT / NN 1.144-1.150 / 1.192-1.203 against 0.999-1.001 / 1.042-1.046
     * for the row's 4 stages of 64 (1.084-1.097 / 1.110-1.115 at 8), 24x4096x4096 alike */
    bool unsplit = s.split_k <= 1 && ctas >= sms;
    bool few = ctas < sms;
    bool pair = s.split_k == 2 && d->trans_b && s.block_n == 32 && ctas >= sms &&
                ctas <= (228 * 1024 / cta_smem(d, &longer)) * sms;
    /* 4 stages rather than 5 though a CTA alone on its SM has the room: 5 gained 1-3 % at
     * 16x4096x14336 and 1x4096x14336 (128 CTAs) and lost 6 % at 1x1024x8192 (64 CTAs; same
     * runs, session 35) */
    return unsplit || pair || few ? longer : s;
}

/* The SMs of the context's GPU; an H200's 132 without one (offline). */
static int sm_count(tl_ctx *ctx) { return tli_ctx_sms(ctx, 132); }

static tl_gemm_schedule heuristic_row_for(const char *target, const tl_gemm_desc *d, unsigned rows, int sms)
{
    unsigned have = conditions(target, d, rows, sms);
    for (int i = 0; i < N_HEURISTIC; i++)
        if ((heuristic[i].when & have) == heuristic[i].when)
            return heuristic[i].s;
    return heuristic[N_HEURISTIC - 1].s;
}

tl_gemm_schedule tli_gemm_heuristic_for(tl_ctx *ctx, const tl_gemm_desc *d, unsigned rows)
{
    int sms = sm_count(ctx);
    return resolved(for_inputs(heuristic_row_for(tl_ctx_target(ctx), d, rows, sms), d), d, sms, tl_ctx_target(ctx));
}

tl_gemm_schedule tli_gemm_heuristic(tl_ctx *ctx, const tl_gemm_desc *d)
{
    return tli_gemm_heuristic_for(ctx, d, tli_gemm_dense_rows(d));
}

tl_gemm_schedule tli_gemm_generic_schedule(const char *target, tl_dtype in)
{
    tl_gemm_desc d = {.in_dtype = in}; /* for_inputs reads only the type */
    return for_inputs(resolved(heuristic_row_for(target, NULL, TLI_GEMM_TMA, 0), NULL, 0, target), &d);
}

/* ------------------------------------------------------------------------ */
/* The database's view of a GEMM                                             */
/* ------------------------------------------------------------------------ */

static const char *epilogue_name(tl_epilogue e)
{
    switch (e) {
    case TL_EPI_RELU: return "+relu";
    case TL_EPI_GELU_ERF: return "+gelu_erf";
    case TL_EPI_GELU_TANH: return "+gelu_tanh";
    default: return "";
    }
}

/* Rows TMA cannot read take other kernels (no ping-pong), so they are a
 * class of their own; so are rows of B off the L2's sectors (other
 * schedules win there). */
static void tune_key(const tl_gemm_desc *d, unsigned rows, tli_tune_key *out)
{
    memset(out, 0, sizeof *out);
    tli_fmt(out->op, sizeof out->op, "gemm");
    tli_fmt(out->dtypes, sizeof out->dtypes, "%s->%s", tl_dtype_name(d->in_dtype), tl_dtype_name(d->out_dtype));
    tli_fmt(out->layout, sizeof out->layout, "%s%s%s", d->trans_b ? "nt" : "nn", d->has_bias ? "+bias" : "",
            epilogue_name(d->epilogue));
    char m[32], n[32], k[32];
    tli_tune_bucket('m', d->m, m, sizeof m);
    tli_tune_bucket('n', d->n, n, sizeof n);
    tli_tune_bucket('k', d->k, k, sizeof k);
    tli_fmt(out->shape_class, sizeof out->shape_class, "%s,%s,%s%s", m, n, k,
            !((rows & TLI_GEMM_TMA) && tli_gemm_tma_rows(d)) ? ",unaligned"
            : rows & TLI_GEMM_B_OFF                         ? ",b-off-sectors"
                                                            : "");
}

void tli_gemm_tune_key(const tl_gemm_desc *d, tli_tune_key *out) { tune_key(d, tli_gemm_dense_rows(d), out); }

/* A record's schedule is used only when it is one the op can build for
 * this problem: a database is a file, and files get edited; and a context
 * may aim at another target than the GPU's own (no ping-pong on sm_80). */
static bool plausible(const tl_gemm_schedule *s, const tl_gemm_desc *d, bool sm90a, bool tma)
{
    bool f8 = tli_dtype_is_f8(d->in_dtype);
    if (s->gemv) /* the matrix-vector kernel's own fields (gemm.c checks them in full) */
        return s->gemv == 1 && d->trans_b && !f8 && s->block_m >= 0 && s->block_m <= 8 &&
               d->m <= (s->block_m ? s->block_m : 8) && s->block_n >= 0 && s->block_n <= 64 && s->block_k >= 0 &&
               s->block_k <= 8192 && s->threads >= 0 && s->threads <= 1024 && !s->pingpong && s->split_k < 2 &&
               !s->swap_ab && !s->persistent && !s->stream_k;
    bool tile = s->block_m >= 16 && s->block_m <= 256 && s->block_m % 16 == 0 && s->block_n >= 16 &&
                s->block_n <= 256 && s->block_n % 16 == 0 && s->block_k >= 16 && s->block_k <= (f8 ? 256 : 128) &&
                s->block_k % (f8 ? 128 : 16) == 0;
    bool rest = s->stages >= 1 && s->stages <= 8 && s->threads >= 32 && s->threads <= 1024 &&
                s->threads % 32 == 0 && s->swizzle >= 0 && s->swizzle <= 64 && s->pingpong >= 0 && s->pingpong <= 1 &&
                s->split_k >= 0 && s->split_k <= 16 && !(s->pingpong && s->split_k > 1) && s->swap_ab >= 0 &&
                s->swap_ab <= 1 && !(s->swap_ab && (s->pingpong || !d->trans_b)) && s->persistent >= 0 &&
                s->persistent <= 1 && !(s->persistent && (s->pingpong || s->split_k > 1 || s->swap_ab)) &&
                s->cluster_m >= 0 && s->cluster_n >= 0 && s->stream_k >= 0 && s->stream_k <= 1 &&
                (!s->stream_k || s->persistent) &&
                (s->cluster_m ? s->cluster_m : 1) * (s->cluster_n ? s->cluster_n : 1) <= 8 &&
                ((s->cluster_m < 2 && s->cluster_n < 2) ||
                 (sm90a && !s->pingpong && !s->persistent && s->split_k < 2 && !s->swap_ab));
    bool policy = s->warp_policy == TL_GEMM_WARP_SQUARE || s->warp_policy == TL_GEMM_WARP_ROWS ||
                  s->warp_policy == TL_GEMM_WARP_COLS;
    return tile && rest && policy && (!s->pingpong || (sm90a && tma && tli_gemm_tma_rows(d)));
}

tl_gemm_schedule tli_gemm_pick_for(tl_ctx *ctx, const tl_gemm_desc *d, unsigned rows)
{
    /* The tuner does not measure split-K yet: where the heuristic splits,
     * a record (of a one-pass schedule) would be a step back. */
    bool tma = rows & TLI_GEMM_TMA;
    tl_gemm_schedule h = tli_gemm_heuristic_for(ctx, d, rows);
    if (h.split_k > 1)
        return h;
    tli_tune_key key;
    tune_key(d, rows, &key);
    tl_tune_record rec;
    tl_tune_config c;
    bool sm90a = hopper_gemm(tl_ctx_target(ctx));
    if (tli_tune_db_find(ctx, &key, &rec) && tli_tune_config_parse(tli_gemm_param_names, rec.config, &c)) {
        tl_gemm_schedule s = tl_gemm_schedule_from_config(&c);
        if (plausible(&s, d, sm90a, tma))
            return s;
        tli_tune_db_unusable(ctx, &key, rec.config);
    }
    return h;
}

tl_gemm_schedule tli_gemm_pick(tl_ctx *ctx, const tl_gemm_desc *d)
{
    return tli_gemm_pick_for(ctx, d, tli_gemm_dense_rows(d));
}

/* ------------------------------------------------------------------------ */
/* The tuner's space                                                         */
/* ------------------------------------------------------------------------ */

/* Every schedule measured in the sweeps of bench/NOTES.md: block tiles of
 * 64 to 256, K steps of 32 and 64, 2 to 6 stages, 128 or 256 threads,
 * swizzle off, 8 or 16, and the ping-pong kernel; with N tiles of 192 and
 * more ping-pong stages since session 6. */
static const tl_gemm_schedule space[] = {
    /* block_m, block_n, block_k, stages, threads, swizzle, warp_policy, pingpong, split_k, swap_ab, persistent,
     * cluster_m, cluster_n, stream_k */
    {128, 128, 32, 3, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {128, 128, 32, 4, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {128, 128, 64, 3, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {128, 128, 64, 4, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {128, 128, 64, 2, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0}, /* small footprint: 2 blocks per SM */
    {128, 128, 32, 3, 256, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, /* what the swizzle is worth */
    {128, 128, 32, 2, 128, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {128, 256, 32, 3, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {128, 256, 32, 4, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {128, 256, 64, 3, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {128, 256, 64, 4, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0}, /* 192 KiB of shared memory */
    {256, 128, 32, 3, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {256, 128, 32, 4, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {256, 128, 64, 3, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {256, 128, 64, 4, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {128, 192, 64, 4, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0}, /* between the two: N tiles of 192 (160 KiB) */
    {128, 192, 64, 5, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {128, 256, 64, 4, 256, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0}, /* wider swizzle panels (won 6 of the 18 ANCHORS shapes tuned in session 6) */
    {256, 128, 64, 4, 256, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {128, 192, 64, 4, 256, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {64, 128, 32, 4, 128, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {128, 64, 32, 4, 128, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {64, 64, 64, 3, 128, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {64, 64, 32, 2, 128, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    /* one warpgroup on 64-wide wgmma tiles: twice the blocks of 128x128
     * where a problem has too few tiles for 132 SMs (1024^3: 128 blocks
     * instead of 64) */
    {64, 128, 64, 4, 128, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {128, 64, 64, 4, 128, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {64, 128, 64, 6, 128, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    /* persistent, warp-specialised (sm_90a, TMA-readable rows) */
    {128, 128, 64, 4, 128, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0},
    {128, 128, 64, 5, 128, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0},
    {128, 128, 64, 6, 128, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0},
    {128, 128, 64, 3, 128, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0},
    {128, 128, 64, 4, 128, 16, 0, 1, 0, 0, 0, 0, 0, 0, 0},
    {128, 128, 64, 5, 128, 16, 0, 1, 0, 0, 0, 0, 0, 0, 0},
    {64, 256, 64, 4, 128, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0},
    {64, 256, 64, 5, 128, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0},
    /* the classic tiles in persistent CTAs with a producer warpgroup: the
     * next tile's loads under this one's epilogue (session 9) */
    {128, 256, 64, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0},
    {128, 256, 64, 3, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0},
    {256, 128, 64, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0},
    /* 128x128 on two consumer warpgroups: one wave of tiles where 64x128
     * tiles make two ragged ones (256x8192x8192: 128 tiles against 256) */
    {128, 128, 64, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0},
    {128, 128, 64, 5, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0},
    /* clusters whose blocks share a tile of B (along M) or of A (along N)
     * through TMA multicast: less L2 traffic for the small tiles of
     * few-tile problems (session 10) */
    {64, 128, 64, 4, 128, 8, 0, 0, 0, 0, 0, 2, 0, 0, 0},
    {64, 128, 64, 6, 128, 8, 0, 0, 0, 0, 0, 2, 0, 0, 0},
    {64, 128, 64, 4, 128, 8, 0, 0, 0, 0, 0, 2, 2, 0, 0},
    {128, 64, 64, 4, 128, 8, 0, 0, 0, 0, 0, 0, 2, 0, 0},
    {128, 64, 64, 6, 128, 8, 0, 0, 0, 0, 0, 0, 2, 0, 0},
    {128, 128, 64, 4, 256, 8, 0, 0, 0, 0, 0, 2, 0, 0, 0},
    {128, 256, 64, 4, 256, 8, 0, 0, 0, 0, 0, 2, 0, 0, 0},
    /* few-tile problems with a producer warpgroup: 64x128 on one consumer
     * warpgroup, 128x64 on two (cuBLAS's 1024^3 tile), persistent or not */
    {64, 128, 64, 4, 128, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0},
    {64, 128, 64, 6, 128, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0},
    {128, 64, 64, 4, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {128, 64, 64, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0},
    {128, 64, 64, 6, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0},
    /* stream-K: the persistent CTAs share the K steps of the last, ragged
     * wave's tiles (4096^3: 0.88 of a wave of 128x256) instead of leaving
     * SMs idle (session 12: within 1 % of whole tiles at 13-16 waves) */
    {128, 256, 64, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 1, 0},
    {256, 128, 64, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 1, 0},
};
#define N_SPACE (int)(sizeof space / sizeof space[0])

/* Ping-pong schedules need sm_90a and TMA. On sm_90a K steps of 32 are
 * left out: wgmma reads its shared operands in 128-byte swizzled rows (64
 * bf16 columns), so the lowering gives a 32-wide K step the mma.sync
 * kernel, which ran at 0.3-0.45x the 64-wide wgmma kernels in every sweep
 * on the H200 (bench/NOTES.md, session 6) and would only spend a tuning
 * budget. Schedules over the shared memory limit stay in, for the
 * lowering to refuse and the tuner to report. */
TL_API int tl_gemm_candidates(tl_ctx *ctx, const tl_gemm_desc *d, tl_gemm_schedule *out, int max)
{
    bool all = !ctx || !d;
    bool hopper = !all && hopper_gemm(tl_ctx_target(ctx));
    bool pingpong_ok = all || (hopper && tli_gemm_tma_rows(d));
    int n = 0;
    for (int i = 0; i < N_SPACE; i++) {
        if (space[i].pingpong && !pingpong_ok)
            continue;
        if ((space[i].cluster_m > 1 || space[i].cluster_n > 1) && !all && !hopper)
            continue; /* no clusters (or no TMA to multicast with) */
        if (hopper && space[i].block_k % 64)
            continue;
        if (out && n < max)
            out[n] = for_inputs(space[i], d);
        n++;
    }
    return n;
}
