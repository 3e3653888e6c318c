/*
 * rows.c - what the row-wise ops (softmax.c, rmsnorm.c) share: their
 * default schedules, the checks of their descriptors and pointers, and the
 * start and end of their kernels, with the loop over a block's row tiles.
 *
 * A block takes R consecutive rows and holds W columns of each in an f32
 * register fragment [R, W]; its T threads reduce each row with
 * tl_reduce_*. The ops are memory-bound (an H200 moves about 4.2 TB/s
 * device to device, and does over 60 TFLOP/s of f32): what matters is that
 * each row is read once and written once in wide accesses, with enough of
 * them in flight, and that the reductions stay cheap. They are written for
 * the fragment layout the lowering gives a fragment that is reduced along
 * its last dimension (the builder cannot see layouts; these are
 * assumptions, not checks):
 *   - each thread holds runs of 16 bytes of one row (8 f16/bf16 or 4 f32
 *     input elements), so the loads of X, the stores of Y and the loads of
 *     RMSNorm's w are 16-byte vectors when a row starts 16-byte aligned;
 *   - a row is spread over as few threads as possible, T / R of them, each
 *     with E = R W / T consecutive-run elements: the reduction is E - 1
 *     in-thread steps, log2(T / R) shuffles, and, only when a row spans
 *     several warps (T / R > 32), one step through shared memory;
 *   - the reduced fragment [R] is held by every thread of its row, so the
 *     loops that use it broadcast a register.
 *
 * The schedule's stages say how memory stays busy while a block reduces.
 * With 1 a block takes one tile and the overlap comes only from the other
 * blocks on its SM (as many as registers allow); its loads, reductions
 * and stores follow one another. With S >= 2 a block walks P tiles, P =
 * ceil(tiles / blocks) for the launch argument `blocks` (the blocks the
 * GPU runs at once: the grid is one wave), and the next S - 1 tiles are on
 * their way while this one is reduced. The tiles are dealt in stride, G =
 * ceil(tiles / P) blocks apart, so that the blocks at any moment work on
 * neighbouring rows and memory is swept in order, as a copy sweeps it
 * (consecutive runs of P tiles a block put the SMs' streams a run apart:
 * 2048x32768 f16 softmax 0.850-0.855 of the copy against 0.896-0.903 in
 * stride on the H200, bench/NOTES.md session 30):
 *   ring = shared [R, W] of X's type
 *   for t in tl_pipelined(P, S):                 the pipeline pass: a ring of S
 *       tl_copy(X tile (bx + t G) -> ring)       slots, cp.async S - 1 tiles ahead
 *       x = ring in f32, padded past N           16-byte ld.shared (pass_threads)
 *       ... the op's reductions, and stores of rows (bx + t G) R + i ...
 * An ordinary builder program: what a user's kernel would write. With
 * schedule.loader 2 the ring is filled by a producer warpgroup instead
 * (open_producer): one tile a block, the copy the only step of a
 * tl_pipelined(1, S), tl_use_warp_specialize and tl_use_persistent(k, 2),
 * so persistent CTAs take their tiles from a counter and end together.
 * (Tried
 * and dropped: the next tile loaded into a second register fragment of
 * X's type instead of shared memory; ptxas gave that 106 to 255 registers,
 * two fragments and the lane-by-lane paths of the loads.)
 */
#include "ops.h"

#include "ctx.h"
#include "program.h"

#include <string.h>

/* The defaults, by one-pass width: the first entry at least as wide as
 * the row. E = rows * width / threads elements per thread, the f32
 * registers of the row fragment: 16 up to 512 columns (a row inside one
 * warp, W / 16 threads), 32 from 1024 (one warp per row at 1024; from 2048
 * a row spans W / 1024 warps and each reduction takes one step through
 * shared memory), but 16 at 2048 (measured below) and 64 at 32768 beside
 * a producer warpgroup. 256 threads, up to 1024 for the longest rows, so
 * that E stays 32: at E = 64 the fragment and its temporaries no longer fit
 * the 64 registers a thread has at full occupancy. stages: see above; a
 * default ring that does not fit the target's shared memory (f32 rows)
 * shrinks, down to no pipeline. Meant to be tuned: the autotuner measures
 * others through tl_softmax_schedule. */
#define ONE_PASS_STAGES 1 /* the pipeline of the wide rows (1024 columns and more) */
/* Rows of more than 16384 columns a block (cluster) by default, both ops: a ring of 2 shared tiles,
 * the next row's loads under this one's reductions. H200, f16, bench_softmax --variants, x copy,
 * 2048x32768 / 4096x32768 (session 30, tiles dealt in stride): softmax 0.876 / 0.906 against
 * 0.866 / 0.902 for a ring of 3 and 0.701 / 0.733 without; RMSNorm 0.853 / 0.892 against 0.751 /
 * 0.767 and 0.825-0.833 / 0.853. */
#define WIDE_STAGES 2
/* ... filled by a producer warpgroup of its own (schedule.loader 2), in
 * persistent blocks that take their rows from a counter, 512 threads
 * reducing (E = 64: 96 registers, ptxas): H200, f16, 2048x32768, x copy
 * (session 32): softmax 0.932-0.933 against 0.883-0.884 for the ring
 * loop of 1024 threads, RMSNorm 0.888-0.889 against 0.876-0.877; the
 * same blocks dealt their rows by CTA (tl_use_persistent 1) 0.881 and
 * 0.867: the counter is the gain (the blocks no longer end unevenly). */
#define PRODUCER_MAX_THREADS 896 /* 1024 less the producer's warpgroup */
static const tl_softmax_schedule one_pass[] = {
    {.width = 1, .rows = 4096, .threads = 256, .stages = 1},
    {.width = 2, .rows = 2048, .threads = 256, .stages = 1},
    {.width = 4, .rows = 1024, .threads = 256, .stages = 1},
    {.width = 8, .rows = 512, .threads = 256, .stages = 1},
    {.width = 16, .rows = 256, .threads = 256, .stages = 1},
    {.width = 32, .rows = 128, .threads = 256, .stages = 1},
    {.width = 64, .rows = 64, .threads = 256, .stages = 1},
    {.width = 128, .rows = 32, .threads = 256, .stages = 1},
    {.width = 256, .rows = 16, .threads = 256, .stages = 1},
    {.width = 512, .rows = 8, .threads = 256, .stages = 1},
    /* 128 threads from 1024 to 4096 columns (E = 32 still; 2048 below): twice the blocks per SM, each with half the
     * rows in its reductions; bench_softmax --variants on the H200, f16, softmax / RMSNorm x copy:
     * 0.857 -> 0.900 / 0.880 -> 0.982 (16384x1024), 0.904 -> 0.950 / 0.959 -> 0.983 (32768x2048),
     * 0.880 -> 0.919 / 0.886 -> 0.968 (8192x4096) */
    {.width = 1024, .rows = 4, .threads = 128, .stages = ONE_PASS_STAGES},
    /* one row a block at 2048 (E = 16): smaller blocks, more of them an SM; 32768x2048 f16, x copy
     * (session 32, bench_softmax --schedule, two rounds): softmax 0.994-0.995 against 0.974-0.976
     * for 2 rows (1.014-1.015 x Triton against 0.994), RMSNorm 0.990-0.994 against 0.972-0.978 */
    {.width = 2048, .rows = 1, .threads = 128, .stages = ONE_PASS_STAGES},
    {.width = 4096, .rows = 1, .threads = 128, .stages = ONE_PASS_STAGES},
    {.width = 8192, .rows = 1, .threads = 256, .stages = ONE_PASS_STAGES},
    {.width = 16384, .rows = 1, .threads = 512, .stages = ONE_PASS_STAGES},
    {.width = 32768, .rows = 1, .threads = 1024, .stages = ONE_PASS_STAGES},
};
/* Longer rows: the online path in chunks of 8192 columns, 256 threads per
 * row, unless the op names its own chunk (tli_rows_desc.online_width:
 * E = 32 on width / 32 threads). Smaller blocks than the widest one-pass
 * entry keep several of them per SM, and several rows in flight, across
 * the reductions of each chunk. */
static const tl_softmax_schedule online_chunk = {.width = 8192, .rows = 1, .threads = 256, .stages = 1};
/* No default splits a row over a cluster (schedule.cluster): measured at
 * 2048x32768 f16 on the H200 (bench_softmax --variants, bench/NOTES.md),
 * the best split (2 blocks of 512 threads, ring of 3) ran at 0.70 of the
 * copy against 0.84-0.85 for one block of 1024 threads per row. */

#define MAX_WIDTH (1 << 20)  /* a tile's extent */
#define MAX_ELEMS (1 << 24)  /* a tile's elements */

static const tl_softmax_schedule *default_for(int64_t cols)
{
    for (size_t i = 0; i < sizeof one_pass / sizeof one_pass[0]; i++)
        if (cols <= one_pass[i].width)
            return &one_pass[i];
    return &online_chunk;
}

/* The other half of loader 2's needs: the target has mbarriers. */
static bool producer_target(tl_ctx *ctx)
{
    tli_target t;
    return tli_target_get(ctx->target, &t) && t.mbarrier;
}

/* Shared memory a block may use on the context's target. */
static int64_t smem_budget(tl_ctx *ctx)
{
    tli_target t;
    return tli_target_get(ctx->target, &t) ? t.smem_limit : 48 * 1024;
}

tl_softmax_schedule tli_rows_schedule(tl_ctx *ctx, const tli_rows_desc *d)
{
    tl_softmax_schedule s = d->schedule;
    if (s.cluster < 1)
        s.cluster = 1;
    /* a split row: each block's share of it sets the default width */
    const tl_softmax_schedule *def = default_for(s.width ? s.width : (d->cols + s.cluster - 1) / s.cluster);
    tl_softmax_schedule own = {.width = d->online_width, .rows = 1, .threads = d->online_width / 32, .stages = 1};
    if (def == &online_chunk && d->online_width)
        def = &own;
    if (!s.width)
        s.width = def->width;
    if (!s.rows)
        s.rows = def->rows;
    if (!s.threads)
        s.threads = def->threads;
    if (!s.stages) {
        s.stages = (int64_t)s.width * s.cluster > 16384 ? WIDE_STAGES : def->stages;
        /* a default ring that the target's shared memory cannot hold shrinks */
        int64_t tile = (int64_t)s.rows * s.width * (int64_t)tl_dtype_size(d->in_dtype);
        int64_t room = smem_budget(ctx) - 1024; /* the reductions' scratch */
        while (s.stages > 2 && s.stages * tile > room)
            s.stages--;
        if (s.stages == 2 && 2 * tile > room)
            s.stages = 1;
    }
    if (d->cols > (int64_t)s.width * s.cluster) { /* the online path has no tile loop */
        s.stages = 1;
        s.loader = 1;
    }
    /* the loader: a producer warpgroup by default where the default ring
     * is (rows wider than 16384 columns: measured there, see WIDE_STAGES); a default
     * thread count that leaves it no room halves */
    bool producer = s.loader == 2 || (!s.loader && s.stages >= 2 && s.cluster == 1 && s.width > 16384 &&
                                      producer_target(ctx));
    if (producer && !d->schedule.threads && s.threads > PRODUCER_MAX_THREADS &&
        (int64_t)s.rows * s.width / (s.threads / 2) <= 64)
        s.threads /= 2;
    if (!s.loader)
        s.loader = producer && tli_rows_producer_fits(&s) ? 2 : 1;
    return s;
}

bool tli_rows_producer_fits(const tl_softmax_schedule *s)
{
    return s->stages >= 2 && s->cluster <= 1 && s->threads % 128 == 0 && s->threads <= PRODUCER_MAX_THREADS;
}

static bool dtype_ok(tl_dtype dt) { return dt == TL_F32 || dt == TL_F16 || dt == TL_BF16; }

static tl_status check_schedule(tl_ctx *ctx, const tli_rows_desc *d, const char *api)
{
    const tl_softmax_schedule *z = &d->schedule;
    if (z->width < 0 || z->width > MAX_WIDTH || (z->width & (z->width - 1)))
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule.width = %d is not a power of two up to 2^20", api,
                        z->width);
    if (z->rows < 0 || z->rows > MAX_WIDTH)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule.rows = %d is not in 1..2^20", api, z->rows);
    if (z->threads && (z->threads < 32 || z->threads > 1024 || z->threads % 32))
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule.threads = %d is not a multiple of 32 in 32..1024",
                        api, z->threads);
    if (z->stages < 0 || z->stages > 8)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule.stages = %d is not in 0..8", api, z->stages);
    if (z->cluster < 0 || z->cluster > 8)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule.cluster = %d is not in 0..8", api, z->cluster);
    if (z->loader < 0 || z->loader > 2)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule.loader = %d is not in 0..2", api, z->loader);
    tl_softmax_schedule s = tli_rows_schedule(ctx, d);
    bool online = d->cols > (int64_t)s.cluster * s.width;
    if (z->loader == 2 && !online && !(tli_rows_producer_fits(&s) && producer_target(ctx)))
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule.loader = 2 needs stages >= 2 (%d), no cluster (%d), "
                        "threads a multiple of 128 up to %d (%d) and mbarriers (sm_80 or later: %s)", api, s.stages,
                        s.cluster, PRODUCER_MAX_THREADS, s.threads, ctx->target);
    if (s.cluster > 1 && online)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule: cols = %lld is more than cluster x width = %d x %d; "
                        "a row split over a cluster takes one pass (cluster 1 for the online path)", api,
                        (long long)d->cols, s.cluster, s.width);
    if ((int64_t)s.rows * s.width > MAX_ELEMS)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule: %d rows of %d columns is more than 2^24 elements "
                        "per block", api, s.rows, s.width);
    return TL_OK;
}

tl_status tli_rows_check(tl_ctx *ctx, const tli_rows_desc *d, const char *api)
{
    if (d->rows < 0 || d->cols < 1)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: rows = %lld, cols = %lld (rows must be >= 0, cols >= 1)",
                        api, (long long)d->rows, (long long)d->cols);
    if ((d->ld_in && d->ld_in < d->cols) || (d->ld_out && d->ld_out < d->cols))
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: ld_in = %lld, ld_out = %lld must be 0 or at least cols = "
                        "%lld", api, (long long)d->ld_in, (long long)d->ld_out, (long long)d->cols);
    if (!dtype_ok(d->in_dtype) || !dtype_ok(d->out_dtype))
        return tli_fail(ctx, TL_ERR_DTYPE, "%s: in_dtype %s and out_dtype %s must each be f32, f16 or bf16", api,
                        tl_dtype_name(d->in_dtype), tl_dtype_name(d->out_dtype));
    return check_schedule(ctx, d, api);
}

tl_status tli_rows_check_pointers(tl_ctx *ctx, const tli_rows_desc *d, const char *api, int n,
                                  const tli_rows_ptr *ptrs)
{
    for (int i = 0; i < n; i++) {
        size_t align = tl_dtype_size(ptrs[i].dtype);
        if (!ptrs[i].p && d->rows > 0)
            return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: %s is a null device pointer", api, ptrs[i].name);
        if (ptrs[i].p % align)
            return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: %s = 0x%llx is not aligned to its %zu-byte elements", api,
                            ptrs[i].name, (unsigned long long)ptrs[i].p, align);
    }
    return TL_OK;
}

tl_status tli_rows_begin(tl_ctx *ctx, const char *op, const tli_rows_desc *d, tli_rows_kernel *rk)
{
    tl_softmax_schedule s = tli_rows_schedule(ctx, d);
    memset(rk, 0, sizeof *rk);
    rk->R = s.rows;
    rk->W = s.width;
    rk->threads = s.threads;
    rk->stages = s.stages;
    rk->in = d->in_dtype;
    rk->C = s.cluster;
    rk->online = d->cols > (int64_t)s.width * s.cluster;
    rk->producer = s.loader == 2; /* (the online path's effective loader is 1) */
    char name[64], pipe[16] = "", split[16] = "";
    if (s.stages > 1)
        tli_fmt(pipe, sizeof pipe, "_ring%d%s", s.stages, rk->producer ? "p" : "");
    if (s.cluster > 1)
        tli_fmt(split, sizeof split, "_c%d", s.cluster);
    tli_fmt(name, sizeof name, "%s_%s_%s_w%d%s%s%s", op, tl_dtype_name(d->in_dtype), tl_dtype_name(d->out_dtype),
            s.width, rk->online ? "_online" : "", pipe, split);
    tl_kernel *k = rk->k = tl_kernel_new(ctx, name);
    if (!k)
        return TL_ERR_OUT_OF_MEMORY;
    if (s.cluster > 1) {
        tl_cluster(k, s.cluster, 1, 1);
        /* two blocks an SM, or the split gains nothing: unbounded, ptxas
         * gave the 512 threads of a half row 67 (RMSNorm) to 109 (softmax
         * with the ring) registers, one block an SM (at 1024 threads two
         * blocks would leave 32 registers a thread: not asked for) */
        if (s.threads <= 512)
            tl_use_min_blocks(k, 2);
    }
    rk->M = tl_dim(k, "M");
    rk->N = tl_dim(k, "N");
    tl_expr ldx = tl_dim(k, "ld_in"), ldy = tl_dim(k, "ld_out"), one = tl_int(k, 1);
    rk->X = tl_param_tensor(k, "X", d->in_dtype, 2, (tl_expr[]){rk->M, rk->N}, (tl_expr[]){ldx, one});
    rk->Y = tl_param_tensor(k, "Y", d->out_dtype, 2, (tl_expr[]){rk->M, rk->N}, (tl_expr[]){ldy, one});
    return TL_OK;
}

/* schedule.loader 2: the program of one tile a block, its copy to the
 * ring in a pipelined loop of one step, and the lowering's warp
 * specialisation (a producer warpgroup of cp.async copies beside the
 * block's threads, which become its consumers) in persistent CTAs that
 * take their blocks from a counter (tl_use_persistent 2): the producer
 * runs ahead into the next block, up to S - 1 tiles, so the ring is the
 * same as the loop's below, and a CTA whose rows went fast takes more. */
static void open_producer(tli_rows_kernel *rk)
{
    tl_kernel *k = rk->k;
    tl_grid(k, tl_ceildiv(k, rk->M, tl_int(k, rk->R)), TL_NONE_EXPR, TL_NONE_EXPR, rk->threads);
    tl_use_warp_specialize(k, 1);
    tl_use_persistent(k, 2);
    rk->bx = rk->tile = tl_block_idx(k, 0);
    rk->part = tl_int(k, 0);
    rk->ring = tl_alloc_shared(k, rk->in, 2, (int64_t[]){rk->R, rk->W});
    rk->P = tl_int(k, 1);
    rk->t = tl_pipelined(k, rk->P, rk->stages);
    tl_copy(k, tl_tile(k, rk->X, rk->tile, rk->part), tl_all(rk->ring));
    rk->row0 = tl_mul(k, rk->tile, tl_int(k, rk->R));
}

/* Blocks come in clusters of C consecutive ones along x (C = 1: each its
 * own): the cluster's index picks the tile of rows, the rank the part of
 * the row. */
void tli_rows_open(tli_rows_kernel *rk)
{
    tl_kernel *k = rk->k;
    tl_expr R = tl_int(k, rk->R), C = tl_int(k, rk->C);
    int64_t shape[2] = {rk->R, rk->W};
    if (rk->stages == 1) { /* rows along x, which takes 2^31 - 1 blocks */
        tl_expr tiles = tl_ceildiv(k, rk->M, R);
        tl_grid(k, rk->C > 1 ? tl_mul(k, tiles, C) : tiles, TL_NONE_EXPR, TL_NONE_EXPR, rk->threads);
        rk->bx = tl_block_idx(k, 0);
        rk->tile = rk->C > 1 ? tl_div(k, rk->bx, C) : rk->bx;
        rk->part = rk->C > 1 ? tl_mod(k, rk->bx, C) : tl_int(k, 0);
        rk->row0 = tl_mul(k, rk->tile, R);
        return;
    }
    if (rk->producer) {
        open_producer(rk);
        return;
    }
    /* the last launch argument: how many blocks the GPU runs at once; each
     * block (cluster) takes P tiles, so that the grid is one wave, dealt in
     * stride: tile first + t used, the used blocks (clusters) sweeping the
     * rows together (t < P and first < used cover each tile below used P once) */
    tl_expr wave = tl_dim(k, "blocks");
    tl_expr tiles = tl_ceildiv(k, rk->M, R);
    tl_expr clusters = rk->C > 1 ? tl_div(k, wave, C) : wave;
    /* block values: computed once before the loop, not at each use in it
     * (the stride is in every row's copy and store; as plain expressions
     * the loop recomputed both 64-bit divisions at each) */
    rk->P = tl_block_value(k, tl_max(k, tl_ceildiv(k, tiles, tl_max(k, clusters, tl_int(k, 1))), tl_int(k, 1)));
    tl_expr used = tl_block_value(k, tl_ceildiv(k, tiles, rk->P));
    tl_grid(k, rk->C > 1 ? tl_mul(k, used, C) : used, TL_NONE_EXPR, TL_NONE_EXPR, rk->threads);
    rk->bx = tl_block_idx(k, 0);
    rk->part = rk->C > 1 ? tl_mod(k, rk->bx, C) : tl_int(k, 0);
    tl_expr first = rk->C > 1 ? tl_div(k, rk->bx, C) : rk->bx;
    rk->ring = tl_alloc_shared(k, rk->in, 2, shape);
    rk->t = tl_pipelined(k, rk->P, rk->stages);
    rk->tile = tl_add(k, first, tl_mul(k, rk->t, used));
    tl_copy(k, tl_tile(k, rk->X, rk->tile, rk->part), tl_all(rk->ring));
    rk->row0 = tl_mul(k, rk->tile, R);
}

tl_expr tli_rows_chunk(const tli_rows_kernel *rk, tl_expr c)
{
    tl_kernel *k = rk->k;
    return rk->C > 1 ? tl_add(k, tl_mul(k, c, tl_int(k, rk->C)), rk->part) : c;
}

tl_expr tli_rows_column(const tli_rows_kernel *rk, tl_expr c, tl_expr j)
{
    tl_kernel *k = rk->k;
    return tl_add(k, tl_mul(k, tli_rows_chunk(rk, c), tl_int(k, rk->W)), j);
}

void tli_rows_cluster_max(const tli_rows_kernel *rk, tl_buf s)
{
    if (rk->C > 1)
        tl_cluster_reduce_max(rk->k, s);
}

void tli_rows_cluster_sum(const tli_rows_kernel *rk, tl_buf s)
{
    if (rk->C > 1)
        tl_cluster_reduce_sum(rk->k, s);
}

tl_expr tli_rows_ring_at(const tli_rows_kernel *rk, const tl_expr *v, float pad)
{
    tl_kernel *k = rk->k;
    tl_expr raw = tl_cast(k, tl_load(k, rk->ring, v), TL_F32);
    tl_expr col = rk->C > 1 ? tli_rows_column(rk, tl_int(k, 0), v[1]) : v[1];
    return tl_select(k, tl_lt(k, col, rk->N), raw, tl_f32(k, pad));
}

void tli_rows_load(const tli_rows_kernel *rk, tl_buf x, float pad)
{
    tl_kernel *k = rk->k;
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){rk->R, rk->W}, v);
    tl_store(k, x, v, tli_rows_ring_at(rk, v, pad));
    tl_end(k);
}

void tli_rows_close(tli_rows_kernel *rk)
{
    if (rk->stages != 1)
        tl_end(rk->k);
}

tl_status tli_rows_end(tl_ctx *ctx, tli_rows_kernel *rk, const char *api, tl_kernel **out)
{
    tl_status st = tli_op_kernel_done(ctx, api, rk->k, out);
    if (st != TL_OK)
        rk->k = NULL; /* destroyed */
    return st;
}

tl_status tli_rows_program(tl_ctx *ctx, const char *op, const tli_rows_desc *d,
                           tl_status (*build)(tl_ctx *, const void *, tl_kernel **), const void *user,
                           const tl_program **out)
{
    /* what the code depends on: dtypes and the effective schedule, never
     * the sizes (the one-pass program of a width serves every cols up to it) */
    tl_softmax_schedule s = tli_rows_schedule(ctx, d);
    char key[128];
    tli_fmt(key, sizeof key, "%s:%s:%s:%d:%d:%d:%d:%d:%d:%d", op, tl_dtype_name(d->in_dtype),
            tl_dtype_name(d->out_dtype), s.width, s.rows, s.threads, d->cols > (int64_t)s.width * s.cluster, s.stages,
            s.cluster, s.loader);
    return tli_op_program(ctx, key, build, user, out);
}

int tli_rows_args(const tli_rows_desc *d, uint64_t x, uint64_t y, tl_arg *args)
{
    args[0] = tl_arg_int(d->rows);
    args[1] = tl_arg_int(d->cols);
    args[2] = tl_arg_int(d->ld_in ? d->ld_in : d->cols);
    args[3] = tl_arg_int(d->ld_out ? d->ld_out : d->cols);
    args[4] = tl_arg_dptr(x);
    args[5] = tl_arg_dptr(y);
    return 6;
}

int64_t tli_rows_wave(tl_ctx *ctx, const tl_program *p)
{
    tl_device_info dev;
    tl_program_info info;
    if (tl_ctx_get_device_info(ctx, &dev) != TL_OK || tl_program_get_info(p, &info) != TL_OK)
        return 1;
    /* too few is only slower (fewer blocks, more tiles each); too many
     * would leave a second wave of whole blocks */
    return (int64_t)(dev.sm_count > 0 ? dev.sm_count : 1) * (info.blocks_per_sm > 0 ? info.blocks_per_sm : 1);
}

int tli_rows_tail_args(tl_ctx *ctx, const tl_program *p, const tli_rows_desc *d, tl_arg *args)
{
    tl_softmax_schedule s = tli_rows_schedule(ctx, d);
    if (s.stages == 1 || s.loader == 2) /* a producer's persistent CTAs: the launch sizes their grid */
        return 0;
    args[0] = tl_arg_int(tli_rows_wave(ctx, p));
    return 1;
}
