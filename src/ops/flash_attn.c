/*
 * flash_attn.c - FlashAttention forward, written with the public builder
 * the way the tutorial writes it. A block owns block_m query rows of one
 * (batch, head): its Q tile sits in shared memory, and a tl_pipelined loop
 * walks the K/V tiles of the head:
 *
 *   S = Q K^T                      (tl_gemm into an f32 fragment)
 *   mask the tile's ragged columns and, causal, keys past the diagonal
 *   m = max(m_prev, rowmax S)      (tl_reduce_max, accumulating), kept at
 *                                  m_prev unless it grew by more than 8 / c
 *   alpha = exp2((m_prev - m) c)   (c = scale log2 e: exp2 with the scale folded)
 *   P = exp2(S c - m c), l = l alpha + rowsum P
 *   O = O alpha + P V              (P from registers as the A operand)
 *
 * and at the end O / l (and the log-sum-exp m scale + ln l). The scores
 * never leave the chip. Causal blocks past the diagonal are not visited
 * (the loop's trip count stops there), and the blocks with the most
 * keys start first; only the blocks that cross it, or the ragged last one,
 * run the mask. Which engines move the tiles, whether
 * a producer warpgroup feeds the consumers, the layouts of S, P, O and of
 * the row statistics, the waits on the tensor cores: all of that is the
 * lowering's (tl_use_warp_specialize asks for the producer).
 *
 * A negative scale flips which raw score is largest once scaled: the
 * kernel then tracks the row minimum (the program depends on the sign of
 * the scale, never on its value, which is a launch argument).
 */
#include "ops.h"

#include "ctx.h"
#include "program.h"
#include "target.h"
#include "tune.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define LOG2E 1.4426950408889634

/* The sm_90a default's persistent CTAs (bench/NOTES.md session 17, each same run against one block a
 * CTA). Causal blocks (longest first, of unequal length) from a counter (persistent = 2): D 128 +13 /
 * +9.5 / +5.8 / +3.4 / +2.2 / +1.4 % at 512 / 1k / 2k / 4k / 8k / 16k keys, D 64 +23 / +15 / +10 / +6.5 /
 * +4 % up to 8k, D 256 +8 / +6 % at 4k / 8k; dealt in turn instead, the CTAs running at once covered
 * many heads' K and V and D 128 lost up to 9 %. Non-causal blocks are all alike, and dealt in turn
 * (persistent = 1) they were 1.5 % faster than from the counter at D 128 2k-8k (level at D 64): D 128
 * +11 / +6.5 % at 512 / 1k keys, +1.5 / +1.2 / +0.7 % at 2k / 4k / 8k (session 15; longer ones within
 * the clocks' drift), D 64 +3 / +1.6 % at 2k / 4k (from 8k it lost before the producer loaded Q). D 256
 * (no turns) took the counter at 4k, +2.4 % (in turn +0.6 %). */
static int default_persistent(const tl_flash_attn_desc *d)
{
    if (d->causal)
        return 2;
    if (d->head_dim > 128)
        return d->seq_kv <= 4096 ? 2 : 0;
    return d->seq_kv <= (d->head_dim <= 64 ? 4096 : 8192);
}

/* Keys a D = 64 tile takes on sm_90a: 192 does 7 % more work per key than 128 (S = 8k, 433 against 404
 * TFLOP/s), unless the padding of its ragged last tile costs more than that: rounded up to tiles, the
 * keys of 192 against 1.07 times those of 128. So 512 and 1k keys take 128 (+6 / +2 %, causal +16 /
 * +6.5 %), 2k and 4k 192 (+7.5 / +7.5 %, causal +6.5 / +12 %; H200, same run, bench/NOTES.md
 * session 19). */
static int d64_block_n(int64_t seq_kv)
{
    int64_t wide = (seq_kv + 191) / 192 * 192, narrow = (seq_kv + 127) / 128 * 128;
    return wide * 100 <= narrow * 107 ? 192 : 128;
}

int64_t tli_flash_attn_smem(const tl_flash_attn_desc *d, int bm, int bn, int st)
{
    return ((int64_t)bm + 2 * (int64_t)st * bn) * d->head_dim * (int64_t)tl_dtype_size(d->dtype);
}

static tl_flash_attn_schedule default_schedule(tl_ctx *ctx, const tl_flash_attn_desc *d)
{
    tli_target t;
    bool wgmma = tli_target_get(tl_ctx_target(ctx), &t) && tli_target_has_mma(&t, MMA_WGMMA_M64NNK16);
    /* wgmma: two consumer warpgroups of 64 rows each taking turns on the tensor cores (one's softmax runs
     * under the other's GEMMs), a producer warpgroup. D = 64 causal, 2k keys: 192 keys a tile (d64_block_n):
     * more tensor work per softmax row. Persistent CTAs: above. D = 128
     * from 2048 keys (4096 causal): two stages of 176 keys, K and V each on a ring of its own (FlashAttention-3's tile; against
     * three stages of 128 on one ring, same run, bench/NOTES.md session 14: S = 8k 667 against 652
     * TFLOP/s, causal 602 against 590; fewer keys lose to the wider tile's ragged last one: causal 1k
     * -13 %, 2k -5 %, 512 keys -7 %; causal from 4096 keys, with its blocks from the counter: 4k 539
     * against 526 TFLOP/s, 2k 444 against 455, bench/NOTES.md session 17) */
    bool wide = d->head_dim > 64 && d->head_dim <= 128 && d->seq_kv >= (d->causal ? 4096 : 2048);
    /* D = 64 non-causal: three consumer warpgroups of 64 rows (192 a block) on 128 keys, not taking
     * turns (FlashAttention-3's shape there): with the two gemms this short, the softmax of two
     * groups fits under the third's gemms without an order. H200, same run, against the two groups'
     * 128 x 192 (bench/NOTES.md session 20): 2k 456 / 425, 4k 470 / 444, 8k 499 / 462 TFLOP/s; at
     * 512 / 1k keys (152 registers a consumer then, wgmma serialised) 340 / 377 against 342 / 374,
     * and at 16k 467-478 against 457-462. Causal keeps two groups below 8k keys: its diagonal blocks of 192 rows
     * mask more, and three groups of 128 keys lost 1 % at 8k, 5-23 % below. Turns in a ring of three lost
     * (8k 468, 2k 391). From 8k keys, 192 keys a tile at two stages (160 registers hold its 96-register
     * S): 8k 508 / 508 against 502 / 498, 16k 504 / 498 against 500 / 483 (session 21, two runs; 4k
     * lost, 452 against 471). */
    /* D = 64 causal from 8k keys: the same three groups on 192 x 192 at two stages, blocks from the
     * counter. The diagonal blocks of 192 rows mask more, which the longer rows pay back: H200, same run,
     * against 128 x 192 in turns at three stages (bench/NOTES.md session 22): 4k 411 / 404, 8k 475 / 438,
     * 16k 511 / 444 TFLOP/s; 2k lost (350 / 361). With four stages the turns win at 4k (426 / 426 against
     * 413 / 414) and still lose at 8k (463 / 463 against 476 / 475; session 23). */
    /* A few query rows (decoding, grouped-query heads stacked as rows: packed_desc): one consumer
     * warpgroup of 64 rows, its producer, the key tile as below; the block's turns would only pad more
     * rows, and the keys' split (default_split) fills the GPU instead of persistent CTAs. */
    if (wgmma && d->seq_q <= 64) {
        int bn = d->head_dim > 128 ? 64 : wide ? 176 : d->head_dim > 64 ? 128 : d64_block_n(d->seq_kv);
        return (tl_flash_attn_schedule){.block_m = 64, .block_n = bn,
                                        .stages = d->head_dim > 128 || wide ? 2 : bn == 192 ? 4 : 3,
                                        .threads = 128, .warp_specialize = 1};
    }
    if (wgmma && d->head_dim == 64 && (!d->causal || d->seq_kv >= 8192)) {
        bool long_kv = d->seq_kv >= 8192;
        return (tl_flash_attn_schedule){.block_m = 192, .block_n = long_kv ? 192 : 128, .stages = long_kv ? 2 : 3,
                                        .threads = 384, .warp_specialize = 1, .persistent = default_persistent(d)};
    }
    /* D = 64 causal below 8k keys on 192 keys a tile: four stages, not three (2k: 375 / 377 against
     * 364 / 363 TFLOP/s, 4k: 426 / 426 against 412 / 409, H200, same run, bench/NOTES.md session 23;
     * 208 KB of shared memory). D = 128 causal from 2k keys (below 4k: 128 keys a tile) at two stages
     * since its row sums are reducers: 514-515 against 502-503 TFLOP/s at 2k; at 512 and 1k keys three
     * stages stay ahead (342-345 / 336-337, 440-442 / 434-436; non-causal 512 and 1k level or three
     * ahead; H200, three rounds, session 33). */
    if (wgmma) {
        int bn = d->head_dim > 128 ? 64 : wide ? 176 : d->head_dim > 64 ? 128 : d64_block_n(d->seq_kv);
        bool two = d->head_dim > 128 || wide || (d->head_dim > 64 && d->causal && d->seq_kv >= 2048);
        return (tl_flash_attn_schedule){.block_m = 128,
                                        .block_n = bn,
                                        .stages = two ? 2 : bn == 192 ? 4 : 3, /* 192: D = 64's only */
                                        .threads = 256, .warp_specialize = 1,
                                        .pingpong = d->head_dim <= 128,
                                        .persistent = default_persistent(d)};
    }
    /* mma.sync (K/V through cp.async): four warps of 32 rows each up to
     * head_dim 128, FlashAttention-2's shape: each K and V fragment a warp
     * loads feeds two row tiles, half the shared-memory reads of eight warps
     * of 16 rows. It fits in 255 registers since ldmatrix takes register +
     * immediate addresses (H200, plain sm_90, bench/NOTES.md session 15:
     * D 128 S 8k 368 against 225 TFLOP/s, causal 318 against 214). D 64
     * takes 128 keys a tile, as FlashAttention-2 does (H200, session 33:
     * S 8k 319 against 273 with 64, causal 295 against 255). At head_dim
     * 256 a warp's output accumulator of 32 rows would need 256 registers:
     * eight warps of 16 rows there. Where the target's shared memory does
     * not hold that block's Q tile and K/V ring (sm_86 and sm_89, 99 KB,
     * at head_dim 256: 128 KB), 64 rows on four warps of 16 (96 KB). */
    tl_flash_attn_schedule s = {.block_m = 128, .block_n = d->head_dim > 128 ? 32 : d->head_dim > 64 ? 64 : 128,
                                .stages = 2, .threads = d->head_dim > 128 ? 256 : 128};
    bool fits = !tli_target_get(tl_ctx_target(ctx), &t) ||
                tli_flash_attn_smem(d, s.block_m, s.block_n, s.stages) + 1024 <= t.smem_limit;
    if (!fits && d->head_dim > 128)
        s.block_m = 64, s.threads = 128;
    return s;
}

#define MAX_SPLIT 64
#define MAX_TAIL 16
#define MIN_SPLIT_TILES 4 /* key tiles a split block walks at least */

/* The SMs of the context's GPU; an H200's 132 without one (offline). */
static int64_t sm_count(tl_ctx *ctx) { return tli_ctx_sms(ctx, 132); }

static int64_t query_blocks(const tl_flash_attn_desc *d, const tl_flash_attn_schedule *s)
{
    return (d->seq_q + s->block_m - 1) / s->block_m * d->heads * d->batch;
}

static int64_t key_tiles(const tl_flash_attn_desc *d, const tl_flash_attn_schedule *s)
{
    return (d->seq_kv + s->block_n - 1) / s->block_n;
}

/* The op's split of the keys: none where the query blocks fill half of the
 * GPU's SMs; else about one wave of blocks, each walking at least
 * MIN_SPLIT_TILES key tiles (decoding: 32 heads of one query row against
 * 8k keys ran 32 blocks of 47 tiles on 132 SMs). */
static int default_split(tl_ctx *ctx, const tl_flash_attn_desc *d, const tl_flash_attn_schedule *s)
{
    int64_t sms = sm_count(ctx), blocks = query_blocks(d, s);
    int64_t tiles = key_tiles(d, s);
    if (blocks == 0 || 2 * blocks > sms)
        return 1;
    int64_t n = sms / blocks, most = tiles / MIN_SPLIT_TILES;
    n = n < most ? n : most;
    n = n < MAX_SPLIT ? n : MAX_SPLIT;
    return n >= 2 ? (int)n : 1;
}

/* What a part of a split block pays on top of its run of key tiles, and
 * what the combine's launch costs, in key tiles' time (a model). */
#define TAIL_PART_TILES 2
#define TAIL_COMBINE_TILES 3
#define TAIL_MOST_PARTS 3 /* the op's choice: more parts measured no better */

/* The op's balanced last wave (split_tail): N query blocks of one a SM on W
 * SMs leave the last N mod W = R blocks to run on R SMs while the others
 * idle. Cut into k parts each, they run as ceil(R k / W) rounds of parts
 * of ceil(tiles / k) tiles; the k up to three with the fewest tiles' time,
 * counting the parts' and the combine's costs, where that beats the whole
 * blocks. Only non-causal blocks (causal ones come from the counter longest
 * first, which already ends on short ones) whose shared memory keeps them
 * one an SM (so that W is the SMs), and not where persistent CTAs dealt
 * blocks in turn take turns on the tensor cores. H200, same run, bench/NOTES.md
 * session 27, TFLOP/s whole / 3 parts / 5 parts: D 64 4k (three groups,
 * persistent) 476-480 / 500-504 / 498, 2k 0.984 -> 1.014 of cuDNN; D 128
 * 16k (one block a CTA) 703 / 715-717 / 648-673; but D 128 4k and 8k
 * (persistent, turns) 684-686 / 681-682 / 678-679 and 706-708 / 706-708 /
 * 707-708: nothing to gain there. */
static int default_tail(tl_ctx *ctx, const tl_flash_attn_desc *d, const tl_flash_attn_schedule *s)
{
    int64_t smem = tli_flash_attn_smem(d, s->block_m, s->block_n, s->stages);
    if (d->causal || s->split_kv >= 2 || smem <= 114 * 1024 || (s->persistent == 1 && s->pingpong))
        return 1;
    int64_t w = sm_count(ctx), n = query_blocks(d, s), r = n % w;
    int64_t tiles = key_tiles(d, s), best = tiles;
    int parts = 1;
    for (int k = 2; k <= TAIL_MOST_PARTS && r; k++) {
        int64_t cost = (r * k + w - 1) / w * ((tiles + k - 1) / k + TAIL_PART_TILES) + TAIL_COMBINE_TILES;
        if (cost < best)
            best = cost, parts = k;
    }
    return parts;
}

tl_flash_attn_schedule tli_flash_attn_untuned(tl_ctx *ctx, const tl_flash_attn_desc *d)
{
    return default_schedule(ctx, d);
}

static tl_flash_attn_schedule effective_schedule(tl_ctx *ctx, const tl_flash_attn_desc *d)
{
    tl_flash_attn_schedule s = d->schedule, def = default_schedule(ctx, d);
    bool zero = !s.block_m && !s.block_n && !s.stages && !s.threads && !s.warp_specialize && !s.pingpong &&
                !s.persistent;
    if (zero) { /* the tuning database's record (flash_attn_tune.c), else the default, with the caller's
                 * splits (the default's are 0: the op's choice below); no record where the default splits
                 * every block's keys (decoding), which the tuner does not measure */
        if (default_split(ctx, d, &def) >= 2 || !tli_flash_attn_pick(ctx, d, &s))
            s = def;
        s.split_kv = d->schedule.split_kv;
        s.split_tail = d->schedule.split_tail;
    } else {
        if (!s.block_m)
            s.block_m = def.block_m;
        if (!s.block_n)
            s.block_n = def.block_n;
        if (!s.stages)
            s.stages = def.stages;
        if (!s.threads)
            s.threads = def.threads;
    }
    if (!s.split_kv)
        s.split_kv = default_split(ctx, d, &s);
    if (!s.split_tail)
        s.split_tail = default_tail(ctx, d, &s);
    return s;
}

/* How schedule s splits d's keys: the number of parts of each split block
 * (1: none, the plain kernel) and, in *nfull, the blocks before the first
 * split one. split_kv splits them all; split_tail those past the last
 * whole wave of one block a SM (all of them when there is less than a
 * wave; none when the waves are whole). */
static int split_plan(tl_ctx *ctx, const tl_flash_attn_desc *d, const tl_flash_attn_schedule *s, int64_t *nfull)
{
    *nfull = 0;
    if (s->split_kv >= 2)
        return s->split_kv;
    int64_t n = query_blocks(d, s), w = sm_count(ctx);
    if (s->split_tail < 2 || n % w == 0)
        return 1;
    *nfull = n / w * w;
    return s->split_tail;
}

static bool strides_given(const int64_t *s) { return s[0] || s[1] || s[2]; }

static tl_status check_desc(tl_ctx *ctx, const tl_flash_attn_desc *d, const char *api)
{
    if (!d)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: NULL descriptor", api);
    if (d->batch < 0 || d->heads < 1 || d->kv_heads < 1 || d->seq_q < 0 || d->seq_kv < 0)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: batch %lld, heads %lld, kv_heads %lld, seq_q %lld, seq_kv %lld: "
                        "sizes must be >= 0 and head counts >= 1", api, (long long)d->batch, (long long)d->heads,
                        (long long)d->kv_heads, (long long)d->seq_q, (long long)d->seq_kv);
    if (d->heads % d->kv_heads)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: heads = %lld is not a multiple of kv_heads = %lld", api,
                        (long long)d->heads, (long long)d->kv_heads);
    if (d->head_dim != 64 && d->head_dim != 128 && d->head_dim != 256)
        return tli_fail(ctx, TL_ERR_UNSUPPORTED, "%s: head_dim = %lld (64, 128 or 256)", api, (long long)d->head_dim);
    if (d->dtype != TL_BF16 && d->dtype != TL_F16)
        return tli_fail(ctx, TL_ERR_DTYPE, "%s: dtype must be bf16 or f16, not %s", api, tl_dtype_name(d->dtype));
    if (!isfinite(d->scale))
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: scale is not finite", api);
    const int64_t *st[4] = {d->q_stride, d->k_stride, d->v_stride, d->o_stride};
    static const char *names[4] = {"q", "k", "v", "o"};
    for (int i = 0; i < 4; i++)
        if (strides_given(st[i]) && (st[i][0] < 0 || st[i][1] < 0 || st[i][2] < d->head_dim))
            return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: %s strides (%lld, %lld, %lld): batch and head strides must "
                            "be >= 0 and the sequence stride at least head_dim", api, names[i], (long long)st[i][0],
                            (long long)st[i][1], (long long)st[i][2]);
    tl_flash_attn_schedule s = effective_schedule(ctx, d);
    if (s.block_m < 16 || s.block_m > 256 || s.block_m % 16 || s.block_n < 16 || s.block_n > 256 || s.block_n % 16 ||
        s.stages < 1 || s.stages > 8 || s.threads < 32 || s.threads > 1024 || s.threads % 32)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule %dx%d, %d stages, %d threads is out of range", api,
                        s.block_m, s.block_n, s.stages, s.threads);
    if (s.split_kv < 0 || s.split_kv > MAX_SPLIT)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule.split_kv = %d is outside 0..%d", api, s.split_kv,
                        MAX_SPLIT);
    if (s.split_tail < 0 || s.split_tail > MAX_TAIL)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule.split_tail = %d is outside 0..%d", api, s.split_tail,
                        MAX_TAIL);
    int64_t nfull, nsplit = split_plan(ctx, d, &s, &nfull), blocks = query_blocks(d, &s);
    if (nsplit >= 2 && blocks > (INT32_MAX - nfull) / nsplit + nfull)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: %lld query blocks split %lld ways are more than the grid's "
                        "2^31 - 1 blocks", api, (long long)blocks, (long long)nsplit);
    return TL_OK;
}

/* The strides of a [B, heads, S, D] tensor: given, or contiguous. */
static void strides_of(const int64_t *given, int64_t heads, int64_t seq, int64_t D, int64_t out[3])
{
    if (strides_given(given)) {
        memcpy(out, given, 3 * sizeof *out);
        return;
    }
    out[2] = D;
    out[1] = seq * D;
    out[0] = heads * seq * D;
}

#define PACK_MAX_SEQ_Q 64 /* query rows of a head that leave most of a block's rows empty */

/* Grouped-query attention with few query rows (decoding) as the problem
 * with the heads of each K/V head stacked as rows: heads / kv_heads query
 * heads of seq_q rows each become one head of G seq_q rows, which fill the
 * blocks the lone rows left padded (32 heads of one row against 8 K/V
 * heads: 8 blocks of 4 rows instead of 32 of one, each K/V tile read once
 * for four heads). Row g seq_q + i of the stacked head is row i of head
 * hk G + g: one stride when seq_q = 1 (the head stride) or when each
 * head's rows are contiguous in Q and O (head stride seq_q x row stride).
 * Causal only at seq_q = 1, where the one row sees every key. The
 * log-sum-exp [B, H, seq_q] is [B, kv_heads, G seq_q] as it is. */
static bool packed_desc(const tl_flash_attn_desc *d, tl_flash_attn_desc *out)
{
    int64_t G = d->heads / d->kv_heads, sq[3], so[3];
    if (G < 2 || d->seq_q < 1 || d->seq_q > PACK_MAX_SEQ_Q || (d->causal && d->seq_q > 1))
        return false;
    strides_of(d->q_stride, d->heads, d->seq_q, d->head_dim, sq);
    strides_of(d->o_stride, d->heads, d->seq_q, d->head_dim, so);
    if (d->seq_q > 1 && (sq[1] != d->seq_q * sq[2] || so[1] != d->seq_q * so[2]))
        return false;
    int64_t rq = d->seq_q == 1 ? sq[1] : sq[2], ro = d->seq_q == 1 ? so[1] : so[2];
    if (rq < d->head_dim || ro < d->head_dim)
        return false;
    *out = *d;
    out->heads = d->kv_heads;
    out->seq_q = G * d->seq_q;
    out->causal = 0;
    int64_t q3[3] = {sq[0], G * sq[1], rq}, o3[3] = {so[0], G * so[1], ro};
    memcpy(out->q_stride, q3, sizeof q3);
    memcpy(out->o_stride, o3, sizeof o3);
    return true;
}

TL_API tl_flash_attn_schedule tl_op_flash_attn_schedule(tl_ctx *ctx, const tl_flash_attn_desc *d)
{
    tl_flash_attn_schedule zero = {0};
    if (!ctx || check_desc(ctx, d, "tl_op_flash_attn_schedule") != TL_OK)
        return zero;
    tl_flash_attn_desc packed;
    return effective_schedule(ctx, packed_desc(d, &packed) ? &packed : d);
}

bool tli_flash_attn_decoding(tl_ctx *ctx, const tl_flash_attn_desc *d)
{
    tl_flash_attn_desc packed;
    if (packed_desc(d, &packed))
        return true;
    tl_flash_attn_schedule s = default_schedule(ctx, d);
    return default_split(ctx, d, &s) >= 2;
}

/* The kernel under construction: its parameters and the tiles of a block. */
typedef struct attn {
    tl_kernel *k;
    const tl_flash_attn_desc *d;
    tl_flash_attn_schedule s;
    bool min_mode;                  /* negative scale: track the row minimum */
    tl_expr SQ, SKV, c;             /* lengths; c = scale log2 e */
    bool parts;                     /* the split kernel: some blocks cut into parts (split_plan) */
    tl_expr b, h, hk, qi;           /* batch, head, K/V head, query block */
    tl_expr whole, j, kv0;          /* parts: the item is a whole block; else part j; its first key tile */
    tl_buf Q, K, V, O, LSE, WO, WL; /* WO, WL: the parts, f32 */
    tl_buf Qs, Ks, Vs, S, P, acc, m, m_prev, l, alpha, rowsum;
} attn;

static tl_buf fragment(tl_kernel *k, tl_dtype dt, int64_t rows, int64_t cols, const char *name)
{
    tl_buf f = cols ? tl_alloc_fragment(k, dt, 2, (int64_t[]){rows, cols}) : tl_alloc_fragment(k, dt, 1, &rows);
    tl_name(k, f, name);
    return f;
}

/* A row sum: a reducer where defer_row_sums says so, else a fragment. */
static tl_buf row_sum(tl_kernel *k, int64_t rows, bool reducer, const char *name)
{
    if (!reducer)
        return fragment(k, TL_F32, rows, 0, name);
    tl_buf f = tl_alloc_reducer(k, TL_F32, 1, &rows);
    tl_name(k, f, name);
    return f;
}

/* Whether the row sums and l are reducers: each thread sums its own columns
 * of a row, tile after tile (l = l alpha + rowsum is linear in them), and
 * the four lanes holding a row add their parts once, after the loop, where
 * every tile's sum ended with two shuffles and adds. H200, the same
 * kernels with and without (bench/NOTES.md session 33, two rounds, cubin
 * overrides): D 128 non-causal 2k +1.4 %, 4k +1.6 %, 8k +1-7 %, causal 4k
 * +0.9 %, 2k level; D 64 non-causal 2k +1 %, 8k +2-5 %; but D 64 causal on
 * two groups of 128 rows (below 8k keys) -2.1 to -3 % at 2k and 4k, so
 * that kernel keeps the exchange in its loop. There ptxas, without the
 * shuffles, puts P's 48 conversions after the turn's wait, inside the
 * tensor cores' turn (SASS and ncu, session 34; three ways of pinning
 * them measured no better). */
static bool defer_row_sums(const tl_flash_attn_desc *d, const tl_flash_attn_schedule *s)
{
    return !(d->head_dim == 64 && d->causal && s->block_m == 128);
}

static tl_buf shared(tl_kernel *k, tl_dtype dt, int64_t rows, int64_t cols, const char *name)
{
    tl_buf s = tl_alloc_shared(k, dt, 2, (int64_t[]){rows, cols});
    tl_name(k, s, name);
    return s;
}

/* The key tile of the pipelined loop's iteration kv: a part's run starts
 * at its first tile kv0. */
static tl_expr key_tile(attn *A, tl_expr kv) { return A->parts ? tl_add(A->k, A->kv0, kv) : kv; }

/* The extreme a row starts from and pads with: -inf, or +inf in min mode. */
static tl_expr far(attn *A) { return tl_f32(A->k, A->min_mode ? INFINITY : -INFINITY); }

/* m clamped to a finite value, so that a row with nothing to attend yet
 * (m = -inf) gives exp2(-inf) = 0 and never inf - inf. */
static tl_expr finite_m(attn *A, tl_expr m)
{
    tl_kernel *k = A->k;
    return A->min_mode ? tl_min(k, m, tl_f32(k, FLT_MAX)) : tl_max(k, m, tl_f32(k, -FLT_MAX));
}

/* S[i, j] = far for the keys row i may not see: past seq_kv, and, causal,
 * past the diagonal i + seq_kv - seq_q (bottom-right aligned). Only the
 * blocks where that can happen run it. In the tile's own coordinates
 * (row r, column c) both limits are one bound a row, c < min(seq_kv - col0,
 * r + row0 + shift - col0 + 1): the tile's column compared with it directly
 * is one 32-bit compare an element (tl_lt_i32), where the key's global
 * index cost a 64-bit add and two 64-bit compares (D 64 causal 2k: 24 %
 * more instructions than cuDNN's kernel, bench/NOTES.md session 21). */
static void mask(attn *A, tl_expr kv)
{
    tl_kernel *k = A->k;
    int64_t BM = A->s.block_m, BN = A->s.block_n;
    tl_expr col0 = tl_mul(k, key_tile(A, kv), tl_int(k, BN)), row0 = tl_mul(k, A->qi, tl_int(k, BM));
    tl_expr shift = tl_sub(k, A->SKV, A->SQ); /* key j is visible to query i when j <= i + shift */
    tl_expr end = tl_add(k, col0, tl_int(k, BN));
    tl_expr need = tl_gt(k, end, A->SKV);
    if (A->d->causal)
        need = tl_or(k, need, tl_gt(k, tl_sub(k, end, tl_int(k, 1)), tl_add(k, row0, shift)));
    tl_if(k, need);
    tl_expr kv_left = tl_sub(k, A->SKV, col0);                                   /* keys from col0 on */
    tl_expr diag = tl_add(k, tl_sub(k, tl_add(k, row0, shift), col0), tl_int(k, 1)); /* row 0's bound */
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){BM, BN}, v);
    /* non-causal, the bound is the same for every row: clamped to the tile and
     * in 32 bits, a compare of two ints an element. The 64-bit bound of the
     * causal form cost the sm_80 path's non-causal kernels their registers
     * (ptxas: 1384 bytes of spill at D 64 on 128 keys, 248 at D 128; H200,
     * mma.sync, D 128 334-340 -> 360-375 TFLOP/s, D 64 202-205 -> 305-324;
     * wgmma level; bench/NOTES.md session 33) */
    tl_expr bound = A->d->causal ? tl_min(k, kv_left, tl_add(k, v[0], diag))
                                 : tl_cast(k, tl_min(k, kv_left, tl_int(k, BN)), TL_I32);
    tl_expr col = A->d->causal ? v[1] : tl_cast(k, v[1], TL_I32);
    tl_store(k, A->S, v, tl_select(k, tl_lt(k, col, bound), tl_load(k, A->S, v), far(A)));
    tl_end(k);
    tl_end(k);
}

/* The online softmax of one K/V tile (S holds its scores):
 *   m_prev = m; m = max(m, rowmax S); alpha = exp2((m_prev - m) c)
 *   S = exp2(S c - m c); l = l alpha + rowsum S; O = O alpha; P = S */
static void online_softmax(attn *A)
{
    tl_kernel *k = A->k;
    int64_t BM = A->s.block_m, BN = A->s.block_n, D = A->d->head_dim;
    tl_copy(k, tl_all(A->m), tl_all(A->m_prev));
    if (A->min_mode)
        tl_reduce_min(k, A->S, A->m, 1, 0);
    else
        tl_reduce_max(k, A->S, A->m, 1, 0);
    /* The maximum the scores are taken against moves only when the row's
     * grows past it by more than 8 in exp2's units; until then P is at most
     * 2^8 (which bf16 and the f32 sums hold), alpha is exactly 1 and O's
     * rescale is a scaling by 1, which the lowering lets a thread skip
     * (FlashAttention-4's trick: +3-4 % at head_dim 128 on the H200). The
     * log-sum-exp and O / l do not depend on which maximum was used. In
     * min mode c < 0 and m falls: the product is positive all the same. */
    tl_expr i = tl_parallel1(k, BM);
    tl_expr grew = tl_mul(k, tl_sub(k, tl_load(k, A->m, &i), tl_load(k, A->m_prev, &i)), A->c);
    tl_store(k, A->m, &i, tl_select(k, tl_gt(k, grew, tl_f32(k, 8.0f)), tl_load(k, A->m, &i), tl_load(k, A->m_prev, &i)));
    tl_end(k);
    i = tl_parallel1(k, BM);
    tl_expr mc = tl_mul(k, finite_m(A, tl_load(k, A->m, &i)), A->c);
    tl_store(k, A->alpha, &i, tl_exp2(k, tl_sub(k, tl_mul(k, tl_load(k, A->m_prev, &i), A->c), mc)));
    tl_end(k);
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){BM, BN}, v);
    mc = tl_mul(k, finite_m(A, tl_load(k, A->m, &v[0])), A->c);
    tl_store(k, A->S, v, tl_exp2(k, tl_sub(k, tl_mul(k, tl_load(k, A->S, v), A->c), mc)));
    tl_end(k);
    tl_reduce_sum(k, A->S, A->rowsum, 1, 1);
    i = tl_parallel1(k, BM);
    tl_store(k, A->l, &i, tl_add(k, tl_mul(k, tl_load(k, A->l, &i), tl_load(k, A->alpha, &i)), tl_load(k, A->rowsum, &i)));
    tl_end(k);
    tl_parallel(k, 2, (int64_t[]){BM, D}, v);
    tl_store(k, A->acc, v, tl_mul(k, tl_load(k, A->acc, v), tl_load(k, A->alpha, &v[0])));
    tl_end(k);
    tl_copy(k, tl_all(A->S), tl_all(A->P));
}

/* The rows' log-sum-exp from m and l: natural, m scale + ln l = (m c +
 * log2 l) ln 2, or (base2) m c + log2 l; -inf for a row with nothing to
 * attend (l = 0). */
static tl_expr row_lse(attn *A, tl_expr i, bool base2)
{
    tl_kernel *k = A->k;
    tl_expr l = tl_load(k, A->l, &i), mc = tl_mul(k, tl_load(k, A->m, &i), A->c);
    tl_expr lse = base2 ? tl_add(k, mc, tl_mul(k, tl_log(k, l), tl_f32(k, (float)LOG2E)))
                        : tl_add(k, tl_mul(k, mc, tl_f32(k, (float)M_LN2)), tl_log(k, l));
    return tl_select(k, tl_gt(k, l, tl_f32(k, 0.0f)), lse, tl_f32(k, -INFINITY));
}

/* O = acc / l (0 for a row with nothing to attend), and the log-sum-exp.
 * In the split kernel a part writes its O the same way, f32, to its rows
 * of WO, with the base-2 log-sum-exp that the combine weighs the parts by
 * to WL. */
static void epilogue(attn *A)
{
    tl_kernel *k = A->k;
    int64_t BM = A->s.block_m, D = A->d->head_dim;
    tl_expr v[2], zero = tl_int(k, 0);
    tl_parallel(k, 2, (int64_t[]){BM, D}, v);
    tl_expr inv = tl_div(k, tl_f32(k, 1.0f), tl_max(k, tl_load(k, A->l, &v[0]), tl_f32(k, FLT_MIN)));
    tl_store(k, A->acc, v, tl_mul(k, tl_load(k, A->acc, v), inv));
    tl_end(k);
    if (A->parts)
        tl_if(k, A->whole);
    tl_copy(k, tl_all(A->acc), tl_tile(k, A->O, A->b, A->h, A->qi, zero));
    if (A->d->lse) {
        tl_expr i = tl_parallel1(k, BM);
        tl_expr lse = row_lse(A, i, false), row = tl_add(k, tl_mul(k, A->qi, tl_int(k, BM)), i);
        tl_store(k, A->LSE, (tl_expr[]){A->b, A->h, row}, lse);
        tl_end(k);
    }
    if (!A->parts)
        return;
    tl_else(k);
    tl_copy(k, tl_all(A->acc), tl_tile(k, A->WO, A->j, zero, zero));
    tl_expr i = tl_parallel1(k, BM);
    tl_expr lse = row_lse(A, i, true);
    tl_store(k, A->WL, (tl_expr[]){A->j, i}, lse);
    tl_end(k);
    tl_end(k);
}

/* The arguments of a build checked, *out cleared. */
static tl_status begin_build(tl_ctx *ctx, const tl_flash_attn_desc *d, tl_kernel **out, const char *api)
{
    if (!ctx || !out)
        return ctx ? tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: NULL argument", api) : TL_ERR_INVALID_ARG;
    *out = NULL;
    return check_desc(ctx, d, api);
}

/* The linear query block blk of the split kernel and its combine as (qi,
 * h, b): query block fastest, the last first when causal (longest first),
 * then head, then batch. Each a block value: the divisions by run-time
 * sizes once a block, not at every tile's address (the producer's loop
 * ran 1.8 times as long with them there, bench/NOTES.md session 27). */
static void block_at(tl_kernel *k, tl_expr blk, tl_expr QB, tl_expr H, bool causal, tl_expr *qi, tl_expr *h,
                     tl_expr *b)
{
    tl_expr q = tl_mod(k, blk, QB), rest = tl_block_value(k, tl_div(k, blk, QB));
    *qi = tl_block_value(k, causal ? tl_sub(k, tl_sub(k, QB, tl_int(k, 1)), q) : q);
    *h = tl_block_value(k, tl_mod(k, rest, H));
    *b = tl_block_value(k, tl_div(k, rest, H));
}

TL_API tl_status tl_op_flash_attn_build(tl_ctx *ctx, const tl_flash_attn_desc *d, tl_kernel **out)
{
    static const char api[] = "tl_op_flash_attn_build";
    tl_status st = begin_build(ctx, d, out, api);
    if (st != TL_OK)
        return st;
    attn A = {.d = d, .s = effective_schedule(ctx, d), .min_mode = d->scale < 0};
    int64_t BM = A.s.block_m, BN = A.s.block_n, D = d->head_dim, nfull;
    A.parts = split_plan(ctx, d, &A.s, &nfull) >= 2;
    char name[64];
    tli_fmt(name, sizeof name, "flash_attn_%s_d%lld%s%s%s", tl_dtype_name(d->dtype), (long long)D,
            d->causal ? "_causal" : "", A.parts ? "_split" : "", d->lse ? "_lse" : "");
    tl_kernel *k = A.k = tl_kernel_new(ctx, name);
    if (!k)
        return TL_ERR_OUT_OF_MEMORY;
    tl_expr B = tl_dim(k, "B"), H = tl_dim(k, "H"), HKV = tl_dim(k, "HKV");
    A.SQ = tl_dim(k, "SQ");
    A.SKV = tl_dim(k, "SKV");
    tl_expr NFULL = A.parts ? tl_dim(k, "NFULL") : TL_NONE_EXPR, NSPLIT = A.parts ? tl_dim(k, "NSPLIT") : TL_NONE_EXPR;
    static const char *const sn[4][3] = {{"q_sb", "q_sh", "q_ss"}, {"k_sb", "k_sh", "k_ss"}, {"v_sb", "v_sh", "v_ss"},
                                         {"o_sb", "o_sh", "o_ss"}};
    tl_expr strides[4][4];
    for (int t = 0; t < 4; t++) {
        for (int j = 0; j < 3; j++)
            strides[t][j] = tl_dim(k, sn[t][j]);
        strides[t][3] = tl_int(k, 1);
    }
    tl_expr Dx = tl_int(k, D), zero = tl_int(k, 0), one = tl_int(k, 1);
    A.Q = tl_param_tensor(k, "Q", d->dtype, 4, (tl_expr[]){B, H, A.SQ, Dx}, strides[0]);
    A.K = tl_param_tensor(k, "K", d->dtype, 4, (tl_expr[]){B, HKV, A.SKV, Dx}, strides[1]);
    A.V = tl_param_tensor(k, "V", d->dtype, 4, (tl_expr[]){B, HKV, A.SKV, Dx}, strides[2]);
    A.O = tl_param_tensor(k, "O", d->dtype, 4, (tl_expr[]){B, H, A.SQ, Dx}, strides[3]);
    if (d->lse)
        A.LSE = tl_param_tensor(k, "LSE", TL_F32, 3, (tl_expr[]){B, H, A.SQ}, NULL);
    tl_expr QB = tl_ceildiv(k, A.SQ, tl_int(k, BM)), items = TL_NONE_EXPR;
    if (A.parts) { /* (N - NFULL) NSPLIT parts of min(SQ, BM) rows each */
        tl_expr nw = tl_mul(k, tl_sub(k, tl_mul(k, tl_mul(k, QB, H), B), NFULL), NSPLIT);
        tl_expr rows = tl_min(k, A.SQ, tl_int(k, BM));
        A.WO = tl_param_tensor(k, "WO", TL_F32, 3, (tl_expr[]){nw, rows, Dx}, NULL);
        A.WL = tl_param_tensor(k, "WL", TL_F32, 2, (tl_expr[]){nw, rows}, NULL);
        items = tl_add(k, NFULL, nw);
    }
    A.c = tl_param_scalar(k, "scale_log2", TL_F32);
    /* causal in persistent CTAs: the query blocks are the grid's slowest axis. CTAs are dealt
     * blocks in turn (block p G + c to CTA c), so with the query blocks fastest a CTA's blocks
     * sit at a few fixed query positions (G mod their count apart) and the CTAs' loads differ by
     * up to half (a model of the default tiles: the longest share 1.08-1.57 times the mean at
     * 2k-16k keys); slowest, every CTA gets blocks of each length in turn (1.03-1.06). Blocks taken
     * from a counter (persistent = 2) keep the grid's order: a CTA that finishes early takes more.
     * The split kernel keeps the order of block_at. */
    bool q_slowest = d->causal && A.s.persistent == 1 && !A.parts;
    if (A.parts)
        tl_grid(k, items, TL_NONE_EXPR, TL_NONE_EXPR, A.s.threads);
    else if (q_slowest)
        tl_grid(k, H, B, QB, A.s.threads);
    else
        tl_grid(k, QB, H, B, A.s.threads);
    tl_use_fast_math(k, 1); /* exp2 on the hardware unit, as every FlashAttention does */
    tl_use_warp_specialize(k, A.s.warp_specialize);
    tl_use_pingpong(k, A.s.pingpong);
    tl_use_persistent(k, A.s.persistent);
    if (d->seq_q <= BM) { /* one query block a head: every key and value row is read once */
        tl_use_cache_policy(k, A.K, TL_CACHE_EVICT_FIRST);
        tl_use_cache_policy(k, A.V, TL_CACHE_EVICT_FIRST);
    }
    tl_expr nparts = TL_NONE_EXPR;
    if (A.parts) { /* item i: block i while i < NFULL, then part j = i - NFULL: part j mod NSPLIT of
                    * block NFULL + j / NSPLIT */
        /* in 32 bits (the items are below 2^31): a 64-bit division by a run-time value is a
         * software sequence several times as long, and a block's prologue runs these before its
         * first load */
        tl_expr it = tl_cast(k, tl_block_idx(k, 0), TL_I32), nf = tl_cast(k, NFULL, TL_I32);
        tl_expr ns = tl_cast(k, NSPLIT, TL_I32);
        A.whole = tl_block_value(k, tl_lt(k, it, nf));
        A.j = tl_sub(k, it, nf);
        tl_expr blk = tl_block_value(k, tl_select(k, A.whole, it, tl_add(k, nf, tl_div(k, A.j, ns))));
        nparts = tl_select(k, A.whole, tl_i32(k, 1), ns);
        A.kv0 = tl_select(k, A.whole, tl_i32(k, 0), tl_mod(k, A.j, ns)); /* the part; its first tile below */
        block_at(k, blk, tl_cast(k, QB, TL_I32), tl_cast(k, H, TL_I32), d->causal != 0, &A.qi, &A.h, &A.b);
    } else {
        /* causal: the query blocks in reverse, so that the longest (those with the most keys below the
         * diagonal) start first and the last wave holds the short ones (longest-first order, as
         * FlashAttention-3 schedules it) */
        A.qi = tl_block_idx(k, q_slowest ? 2 : 0);
        if (d->causal)
            A.qi = tl_sub(k, tl_sub(k, QB, one), A.qi);
        A.h = tl_block_idx(k, q_slowest ? 0 : 1);
        A.b = tl_block_idx(k, q_slowest ? 1 : 2);
    }
    A.hk = tl_div(k, A.h, tl_div(k, H, HKV)); /* grouped-query attention */
    if (A.parts)
        A.hk = tl_block_value(k, tl_div(k, A.h, tl_cast(k, tl_div(k, H, HKV), TL_I32)));
    A.Qs = shared(k, d->dtype, BM, D, "Qs");
    A.Ks = shared(k, d->dtype, BN, D, "Ks");
    A.Vs = shared(k, d->dtype, BN, D, "Vs");
    A.S = fragment(k, TL_F32, BM, BN, "S");
    A.P = fragment(k, d->dtype, BM, BN, "P");
    A.acc = fragment(k, TL_F32, BM, D, "acc");
    A.m = fragment(k, TL_F32, BM, 0, "m");
    A.m_prev = fragment(k, TL_F32, BM, 0, "m_prev");
    bool defer = defer_row_sums(d, &A.s);
    A.l = row_sum(k, BM, defer, "l");
    A.alpha = fragment(k, TL_F32, BM, 0, "alpha");
    A.rowsum = row_sum(k, BM, defer, "rowsum");
    tl_copy(k, tl_tile(k, A.Q, A.b, A.h, A.qi, zero), tl_all(A.Qs));
    tl_clear(k, A.acc);
    tl_fill(k, A.m, far(&A));
    tl_clear(k, A.l);
    /* K/V tiles: all of them, or (causal) up to the diagonal of the block's
     * last row: key j <= (qi + 1) BM - 1 + seq_kv - seq_q */
    tl_expr tiles = tl_ceildiv(k, A.SKV, tl_int(k, BN));
    if (d->causal) {
        tl_expr last = tl_add(k, tl_mul(k, tl_add(k, A.qi, one), tl_int(k, BM)), tl_sub(k, A.SKV, A.SQ));
        tiles = tl_min(k, tiles, tl_max(k, tl_ceildiv(k, last, tl_int(k, BN)), zero));
    }
    if (A.parts) { /* a part's run of ceil(tiles / parts) tiles */
        tiles = tl_cast(k, tiles, TL_I32);
        zero = tl_i32(k, 0);
        tl_expr per = tl_block_value(k, tl_ceildiv(k, tiles, nparts));
        A.kv0 = tl_block_value(k, tl_mul(k, A.kv0, per));
        tiles = tl_block_value(k, tl_max(k, tl_min(k, per, tl_sub(k, tiles, A.kv0)), zero));
    }
    tl_expr kv = tl_pipelined(k, tiles, A.s.stages);
    tl_copy(k, tl_tile(k, A.K, A.b, A.hk, key_tile(&A, kv), zero), tl_all(A.Ks));
    tl_copy(k, tl_tile(k, A.V, A.b, A.hk, key_tile(&A, kv), zero), tl_all(A.Vs));
    tl_clear(k, A.S);
    tl_gemm(k, A.Qs, A.Ks, A.S, TL_GEMM_TRANS_B | TL_GEMM_WARP_ROWS);
    mask(&A, kv);
    online_softmax(&A);
    tl_gemm(k, A.P, A.Vs, A.acc, TL_GEMM_WARP_ROWS);
    tl_end(k);
    if (defer)
        tl_finalize_reducer(k, A.l);
    epilogue(&A);
    return tli_op_kernel_done(ctx, api, k, out);
}

static tl_status build_for_op(tl_ctx *ctx, const void *user, tl_kernel **out)
{
    return tl_op_flash_attn_build(ctx, (const tl_flash_attn_desc *)user, out);
}

TL_API tl_status tl_op_flash_attn_program(tl_ctx *ctx, const tl_flash_attn_desc *d, const tl_program **out)
{
    static const char api[] = "tl_op_flash_attn_program";
    if (!ctx || !out)
        return ctx ? tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: NULL argument", api) : TL_ERR_INVALID_ARG;
    tl_status st = check_desc(ctx, d, api);
    if (st != TL_OK)
        return st;
    /* what the code depends on: never the sizes, strides or the scale */
    tl_flash_attn_schedule s = effective_schedule(ctx, d);
    char key[128];
    /* the split kernel's blocks before the first split one and the number of parts are launch
     * arguments */
    int64_t nfull;
    bool parts = split_plan(ctx, d, &s, &nfull) >= 2;
    tli_fmt(key, sizeof key, "flash_attn:%s:%lld:%d:%d:%d:%d.%d.%d.%d.%d.%d.%d%s", tl_dtype_name(d->dtype),
            (long long)d->head_dim, d->causal != 0, d->lse != 0, d->scale < 0, s.block_m, s.block_n, s.stages,
            s.threads, s.warp_specialize, s.pingpong, s.persistent, parts ? ":split" : "");
    unsigned since = tli_fail_count();
    return tli_fail_as(ctx, tli_op_program(ctx, key, build_for_op, d, out), api, since);
}

/* The combine of a split schedule, written with the builder like the rest:
 * a block of up to 64 query rows of a split block folds its NSPLIT parts
 * in order with a running maximum of their base-2 log-sum-exps
 * (FlashDecoding's merge): for part s, mx' = max(mx, lse_s), the sum so far
 * and O so far scaled by 2^(mx - mx'), part s added with weight
 * 2^(lse_s - mx'). Parts with no key (lse -inf) weigh 0; the maximum is
 * clamped to a finite value so that two of them never give inf - inf. */
#define COMBINE_THREADS 256

TL_API tl_status tl_op_flash_attn_combine_build(tl_ctx *ctx, const tl_flash_attn_desc *d, tl_kernel **out)
{
    static const char api[] = "tl_op_flash_attn_combine_build";
    tl_status st = begin_build(ctx, d, out, api);
    if (st != TL_OK)
        return st;
    int64_t BM = effective_schedule(ctx, d).block_m, D = d->head_dim;
    int64_t R = BM % 64 == 0 ? 64 : BM % 32 == 0 ? 32 : 16; /* rows a block: a divisor of BM */
    char name[64];
    tli_fmt(name, sizeof name, "flash_attn_combine_%s_d%lld%s%s", tl_dtype_name(d->dtype), (long long)D,
            d->causal ? "_causal" : "", d->lse ? "_lse" : "");
    tl_kernel *k = tl_kernel_new(ctx, name);
    if (!k)
        return TL_ERR_OUT_OF_MEMORY;
    tl_expr B = tl_dim(k, "B"), H = tl_dim(k, "H"), SQ = tl_dim(k, "SQ"), NFULL = tl_dim(k, "NFULL");
    tl_expr NSPLIT = tl_dim(k, "NSPLIT");
    tl_expr so[4] = {tl_dim(k, "o_sb"), tl_dim(k, "o_sh"), tl_dim(k, "o_ss"), tl_int(k, 1)};
    tl_expr Dx = tl_int(k, D), zero = tl_int(k, 0), BMx = tl_int(k, BM);
    tl_expr QB = tl_ceildiv(k, SQ, BMx), rows = tl_min(k, SQ, BMx);
    tl_expr split = tl_sub(k, tl_mul(k, tl_mul(k, QB, H), B), NFULL); /* the split blocks */
    tl_expr nw = tl_mul(k, split, NSPLIT);
    tl_buf WO = tl_param_tensor(k, "WO", TL_F32, 3, (tl_expr[]){nw, rows, Dx}, NULL);
    tl_buf WL = tl_param_tensor(k, "WL", TL_F32, 2, (tl_expr[]){nw, rows}, NULL);
    tl_buf O = tl_param_tensor(k, "O", d->dtype, 4, (tl_expr[]){B, H, SQ, Dx}, so);
    tl_buf LSE = d->lse ? tl_param_tensor(k, "LSE", TL_F32, 3, (tl_expr[]){B, H, SQ}, NULL) : TL_NONE_BUF;
    tl_grid(k, split, tl_ceildiv(k, rows, tl_int(k, R)), TL_NONE_EXPR, COMBINE_THREADS);
    tl_use_fast_math(k, 1);
    tl_expr r = tl_block_idx(k, 0), sub = tl_block_idx(k, 1), qi, h, b;
    block_at(k, tl_add(k, NFULL, r), QB, H, d->causal != 0, &qi, &h, &b);
    tl_expr ot = tl_add(k, tl_mul(k, qi, tl_int(k, BM / R)), sub); /* O's tile of R rows */
    tl_buf acc = fragment(k, TL_F32, R, D, "acc"), part = fragment(k, TL_F32, R, D, "part");
    tl_buf mx = fragment(k, TL_F32, R, 0, "mx"), sum = fragment(k, TL_F32, R, 0, "sum");
    tl_buf lp = fragment(k, TL_F32, R, 0, "lse_part"), alpha = fragment(k, TL_F32, R, 0, "alpha");
    tl_buf w = fragment(k, TL_F32, R, 0, "weight");
    tl_clear(k, acc);
    tl_clear(k, sum);
    tl_fill(k, mx, tl_f32(k, -INFINITY));
    tl_expr sp = tl_serial(k, NSPLIT);
    tl_expr z = tl_add(k, tl_mul(k, r, NSPLIT), sp);
    tl_copy(k, tl_tile(k, WL, z, sub), tl_all(lp));
    tl_copy(k, tl_tile(k, WO, z, sub, zero), tl_all(part));
    tl_expr i = tl_parallel1(k, R);
    tl_expr now = tl_max(k, tl_load(k, mx, &i), tl_load(k, lp, &i));
    tl_expr fin = tl_max(k, now, tl_f32(k, -FLT_MAX));
    tl_store(k, alpha, &i, tl_exp2(k, tl_sub(k, tl_load(k, mx, &i), fin)));
    tl_store(k, w, &i, tl_exp2(k, tl_sub(k, tl_load(k, lp, &i), fin)));
    tl_store(k, sum, &i, tl_add(k, tl_mul(k, tl_load(k, sum, &i), tl_load(k, alpha, &i)), tl_load(k, w, &i)));
    tl_store(k, mx, &i, now);
    tl_end(k);
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){R, D}, v);
    tl_store(k, acc, v, tl_add(k, tl_mul(k, tl_load(k, acc, v), tl_load(k, alpha, &v[0])),
                               tl_mul(k, tl_load(k, part, v), tl_load(k, w, &v[0]))));
    tl_end(k);
    tl_end(k);
    tl_parallel(k, 2, (int64_t[]){R, D}, v);
    tl_expr inv = tl_div(k, tl_f32(k, 1.0f), tl_max(k, tl_load(k, sum, &v[0]), tl_f32(k, FLT_MIN)));
    tl_store(k, acc, v, tl_mul(k, tl_load(k, acc, v), inv));
    tl_end(k);
    tl_copy(k, tl_all(acc), tl_tile(k, O, b, h, ot, zero));
    if (d->lse) { /* (mx + log2 sum) ln 2 = mx ln 2 + ln sum */
        i = tl_parallel1(k, R);
        tl_expr l = tl_load(k, sum, &i);
        tl_expr lse = tl_add(k, tl_mul(k, tl_load(k, mx, &i), tl_f32(k, (float)M_LN2)), tl_log(k, l));
        lse = tl_select(k, tl_gt(k, l, tl_f32(k, 0.0f)), lse, tl_f32(k, -INFINITY));
        tl_store(k, LSE, (tl_expr[]){b, h, tl_add(k, tl_mul(k, ot, tl_int(k, R)), i)}, lse);
        tl_end(k);
    }
    return tli_op_kernel_done(ctx, api, k, out);
}

static tl_status build_combine(tl_ctx *ctx, const void *user, tl_kernel **out)
{
    return tl_op_flash_attn_combine_build(ctx, (const tl_flash_attn_desc *)user, out);
}

/* The kernel's leading launch arguments: B, H, HKV, SQ, SKV, [NFULL,
 * NSPLIT (the split kernel, nsplit >= 2),] then the strides of Q, K, V, O.
 * Returns their number. */
static int size_args(const tl_flash_attn_desc *d, int64_t nfull, int nsplit, const int64_t st[4][3], tl_arg *args)
{
    int n = 0;
    args[n++] = tl_arg_int(d->batch);
    args[n++] = tl_arg_int(d->heads);
    args[n++] = tl_arg_int(d->kv_heads);
    args[n++] = tl_arg_int(d->seq_q);
    args[n++] = tl_arg_int(d->seq_kv);
    if (nsplit >= 2) {
        args[n++] = tl_arg_int(nfull);
        args[n++] = tl_arg_int(nsplit);
    }
    for (int t = 0; t < 4; t++)
        for (int j = 0; j < 3; j++)
            args[n++] = tl_arg_int(st[t][j]);
    return n;
}

/* The strides of Q, K, V and O: given, or contiguous. */
static void all_strides(const tl_flash_attn_desc *d, int64_t st4[4][3])
{
    strides_of(d->q_stride, d->heads, d->seq_q, d->head_dim, st4[0]);
    strides_of(d->k_stride, d->kv_heads, d->seq_kv, d->head_dim, st4[1]);
    strides_of(d->v_stride, d->kv_heads, d->seq_kv, d->head_dim, st4[2]);
    strides_of(d->o_stride, d->heads, d->seq_q, d->head_dim, st4[3]);
}

int tli_flash_attn_args(const tl_flash_attn_desc *d, const uint64_t ptr[5], tl_arg *args)
{
    int64_t st4[4][3];
    all_strides(d, st4);
    int n = size_args(d, 0, 1, (const int64_t(*)[3])st4, args);
    for (int i = 0; i < 4 + (d->lse != 0); i++)
        args[n++] = tl_arg_dptr(ptr[i]);
    double scale = d->scale ? d->scale : 1.0 / sqrt((double)d->head_dim);
    args[n++] = tl_arg_float(scale * LOG2E);
    return n;
}

/* The split schedule's two kernels (sch: d's effective schedule) on a
 * workspace from the stream-ordered allocator; TL_ERR_UNSUPPORTED (without
 * touching the stream) where the driver has no such allocator. */
static tl_status run_split(tl_ctx *ctx, const tl_flash_attn_desc *d, const tl_flash_attn_schedule *sch, int64_t nfull,
                           int nsplit, const int64_t st[4][3], const uint64_t ptr[5], double scale, void *stream,
                           const char *api)
{
    const tl_program *parts, *combine;
    int64_t BM = sch->block_m;
    char key[80];
    tli_fmt(key, sizeof key, "flash_attn_combine:%s:%lld:%d:%d:%lld", tl_dtype_name(d->dtype),
            (long long)d->head_dim, d->causal != 0, d->lse != 0, (long long)BM);
    tl_status s = tl_op_flash_attn_program(ctx, d, &parts);
    if (s == TL_OK)
        s = tli_op_program(ctx, key, build_combine, d, &combine);
    if (s != TL_OK)
        return s;
    int64_t rows = d->seq_q < BM ? d->seq_q : BM;
    size_t items = (size_t)(query_blocks(d, sch) - nfull) * (size_t)nsplit;
    if (!items || !rows)
        return TL_OK;
    uint64_t w;
    if ((s = tli_malloc_async(ctx, items * (size_t)rows * (size_t)(d->head_dim + 1) * sizeof(float), stream, &w,
                              api)) != TL_OK)
        return s;
    uint64_t wl = w + items * (size_t)rows * (size_t)d->head_dim * sizeof(float);
    tl_arg args[32];
    int n = size_args(d, nfull, nsplit, st, args);
    for (int i = 0; i < 4 + (d->lse != 0); i++)
        args[n++] = tl_arg_dptr(ptr[i]);
    args[n++] = tl_arg_dptr(w);
    args[n++] = tl_arg_dptr(wl);
    args[n++] = tl_arg_float(scale * LOG2E);
    s = tl_launch(parts, stream, n, args);
    if (s == TL_OK) {
        n = 0;
        int64_t dims[] = {d->batch, d->heads, d->seq_q, nfull, nsplit, st[3][0], st[3][1], st[3][2]};
        for (int i = 0; i < 8; i++)
            args[n++] = tl_arg_int(dims[i]);
        args[n++] = tl_arg_dptr(w);
        args[n++] = tl_arg_dptr(wl);
        args[n++] = tl_arg_dptr(ptr[3]);
        if (d->lse)
            args[n++] = tl_arg_dptr(ptr[4]);
        s = tl_launch(combine, stream, n, args);
    }
    tl_status fr = tli_free_async(ctx, w, stream);
    return s != TL_OK ? s : fr;
}

TL_API tl_status tl_op_flash_attn(tl_ctx *ctx, const tl_flash_attn_desc *d, uint64_t q, uint64_t k, uint64_t v,
                                  uint64_t o, uint64_t lse, void *stream)
{
    static const char api[] = "tl_op_flash_attn";
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    tl_status st = check_desc(ctx, d, api);
    if (st != TL_OK)
        return st;
    const struct { const char *name; uint64_t p; bool used; } ptrs[] = {
        {"q", q, true}, {"k", k, true}, {"v", v, true}, {"o", o, true}, {"lse", lse, d->lse != 0}};
    size_t esz = tl_dtype_size(d->dtype);
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) {
        if (!ptrs[i].used)
            continue;
        size_t align = i == 4 ? 4 : esz;
        if (!ptrs[i].p && d->batch && d->seq_q)
            return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: %s is a null device pointer", api, ptrs[i].name);
        if (ptrs[i].p % align)
            return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: %s = 0x%llx is not aligned to its %zu-byte elements", api,
                            ptrs[i].name, (unsigned long long)ptrs[i].p, align);
    }
    tl_flash_attn_desc packed;
    if (packed_desc(d, &packed))
        d = &packed;
    unsigned since = tli_fail_count();
    tl_flash_attn_schedule s = effective_schedule(ctx, d);
    /* the schedule resolved once: the programs' look-ups below take it as given (no tuning database,
     * no default) */
    tl_flash_attn_desc whole = *d;
    whole.schedule = s;
    const uint64_t ptr[5] = {q, k, v, o, lse};
    int64_t nfull;
    int nsplit = split_plan(ctx, d, &s, &nfull);
    if (nsplit >= 2) {
        double scale = d->scale ? d->scale : 1.0 / sqrt((double)d->head_dim);
        int64_t st4[4][3];
        all_strides(d, st4);
        st = run_split(ctx, &whole, &s, nfull, nsplit, (const int64_t(*)[3])st4, ptr, scale, stream, api);
        if (st != TL_ERR_UNSUPPORTED)
            return tli_fail_as(ctx, st, api, since);
        tli_log(ctx, TL_LOG_WARN, "%s: %s; the keys are not split", api, tl_ctx_error(ctx));
        whole.schedule.split_kv = whole.schedule.split_tail = 1;
    }
    const tl_program *p;
    if ((st = tl_op_flash_attn_program(ctx, &whole, &p)) != TL_OK)
        return tli_fail_as(ctx, st, api, since);
    tl_arg args[32];
    int n = tli_flash_attn_args(d, ptr, args);
    return tli_fail_as(ctx, tl_launch(p, stream, n, args), api, since);
}
