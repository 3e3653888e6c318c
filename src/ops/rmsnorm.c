/*
 * rmsnorm.c - RMSNorm, the other row reduction an LLM runs every layer,
 * on the machinery of the softmax (rows.c):
 *
 *   y_ij = x_ij / sqrt(mean_j x_ij^2 + eps) * w_j
 *
 * A block copies its rows into an f32 fragment, squares them into a
 * second one (dead as soon as it is summed: the compiler keeps only the
 * running partial), tl_reduce_sum, and scales. Columns past the row's end
 * are read as 0 by the copy and add nothing to the sum of squares; the
 * mean divides by the true column count. Rows longer than the fragment
 * sum their squares chunk by chunk (clear = 0), then read the row again.
 */
#include "ops.h"

#include "ctx.h"
#include "tune.h"

#include <math.h>
#include <string.h>

typedef struct rms_kernel {
    tli_rows_kernel rk;
    tl_dtype out;
    tl_buf w;         /* [N], in_dtype: a launch argument after X, Y */
    tl_expr eps;      /* f32: the last launch argument */
    tl_buf x, sq, ss; /* the row tile, its squares, the sum of squares */
} rms_kernel;

/* x = the tile of X at (block, chunk c), in f32 (0 outside X). With a
 * ring of tiles that the block's threads fill (rows.c) the rows stay in
 * the ring's slot, which both loops below read: no fragment holds a row
 * across the reduction, only the running sums (with x held, ptxas needed
 * over 64 registers a thread at 1024 threads, the weights on top of the
 * row). With a producer warpgroup's ring (loader 2) the slot is read once
 * into x: the consumers then hand it back at once, and the producer
 * refills it while they reduce (pipeline_ws.c's early release; 96
 * registers and 44 bytes of spill at 512 threads and 32768 columns, and
 * on the H200 at 2048x32768 f16 0.915-0.918 of the copy against
 * 0.881-0.882 reading the slot twice, bench/NOTES.md session 32). */
static bool holds_rows(const rms_kernel *r) { return r->rk.stages == 1 || r->rk.producer; }

static void load_chunk(const rms_kernel *r, tl_expr c)
{
    tl_kernel *k = r->rk.k;
    if (r->rk.stages == 1)
        tl_copy(k, tl_tile(k, r->rk.X, r->rk.tile, tli_rows_chunk(&r->rk, c)), tl_all(r->x));
    else if (holds_rows(r))
        tli_rows_load(&r->rk, r->x, 0.0f);
}

/* x[i, j] inside a tl_parallel over [R, W] */
static tl_expr x_at(const rms_kernel *r, const tl_expr *v)
{
    return holds_rows(r) ? tl_load(r->rk.k, r->x, v) : tli_rows_ring_at(&r->rk, v, 0.0f);
}

/* ss[i] (+)= sum_j x[i, j]^2 */
static void sum_squares(const rms_kernel *r, int clear)
{
    tl_kernel *k = r->rk.k;
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){r->rk.R, r->rk.W}, v);
    tl_expr x = x_at(r, v);
    tl_store(k, r->sq, v, tl_mul(k, x, x));
    tl_end(k);
    tl_reduce_sum(k, r->sq, r->ss, 1, clear);
    tli_rows_cluster_sum(&r->rk, r->ss); /* a row split over a cluster: the whole row's */
}

/* Y[row0 + i, col] = x[i, j] * rsqrt(ss[i] / N + eps) * w[col]; from a
 * ring slot through x (the loop's own fragment): x = ring * rsqrt(...),
 * Y = x w. */
static void store_normalised(const rms_kernel *r, tl_expr c)
{
    tl_kernel *k = r->rk.k;
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){r->rk.R, r->rk.W}, v);
    tl_expr col = tli_rows_column(&r->rk, c, v[1]);
    tl_expr mean = tl_div(k, tl_load(k, r->ss, &v[0]), tl_cast(k, r->rk.N, TL_F32));
    tl_expr scale = tl_rsqrt(k, tl_add(k, mean, r->eps));
    tl_expr n = tl_mul(k, x_at(r, v), scale);
    if (!holds_rows(r)) {
        tl_store(k, r->x, v, n);
        n = tl_load(k, r->x, v);
    }
    tl_expr y = tl_mul(k, n, tl_cast(k, tl_load(k, r->w, &col), TL_F32));
    tl_store(k, r->rk.Y, (tl_expr[]){tl_add(k, r->rk.row0, v[0]), col}, tl_cast(k, y, r->out));
    tl_end(k);
}

/* One pass:  x = X rows; ss = sum_j x^2; Y = x rsqrt(ss / N + eps) w
 * Online:    ss = 0; for each chunk: x = chunk; ss += sum_j x^2
 *            for each chunk: x = chunk; Y = x rsqrt(ss / N + eps) w */
static void body(rms_kernel *r)
{
    tl_kernel *k = r->rk.k;
    int64_t R = r->rk.R, W = r->rk.W;
    r->x = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){R, W});
    r->sq = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){R, W});
    r->ss = tl_alloc_fragment(k, TL_F32, 1, &R);
    tli_rows_open(&r->rk);
    if (!r->rk.online) {
        tl_expr c0 = tl_int(k, 0);
        load_chunk(r, c0);
        sum_squares(r, 1);
        store_normalised(r, c0);
        tli_rows_close(&r->rk);
        return;
    }
    tl_expr chunks = tl_ceildiv(k, r->rk.N, tl_int(k, W));
    tl_clear(k, r->ss);
    tl_expr c = tl_serial(k, chunks);
    load_chunk(r, c);
    sum_squares(r, 0);
    tl_end(k);
    c = tl_serial(k, chunks);
    load_chunk(r, c);
    store_normalised(r, c);
    tl_end(k);
}

/* An all-zero schedule takes the tuning record for this GPU and class
 * when there is one (rows_tune.c) and use_db is set, else rows.c's default
 * table. */
static tli_rows_desc rows_desc(tl_ctx *ctx, const tl_rmsnorm_desc *d, bool use_db)
{
    /* past 32768 columns, chunks of a whole 32768 on 1024 threads: at 1024x65536 f16 on the H200
     * 0.697 x copy against 0.625 with 8192 on 256 (bench_softmax --variants, bench/NOTES.md) */
    tli_rows_desc r = {.rows = d->rows, .cols = d->cols, .ld_in = d->ld_in, .ld_out = d->ld_out,
                       .in_dtype = d->in_dtype, .out_dtype = d->out_dtype, .schedule = d->schedule,
                       .online_width = 32768};
    if (use_db && !r.schedule.width && !r.schedule.rows && !r.schedule.threads)
        tli_rmsnorm_pick(ctx, d, &r.schedule);
    return r;
}

static tli_rows_desc rows_of(tl_ctx *ctx, const tl_rmsnorm_desc *d) { return rows_desc(ctx, d, true); }

tl_softmax_schedule tli_rmsnorm_untuned(tl_ctx *ctx, const tl_rmsnorm_desc *d)
{
    tl_rmsnorm_desc plain = *d;
    memset(&plain.schedule, 0, sizeof plain.schedule);
    tli_rows_desc r = rows_desc(ctx, &plain, false);
    return tli_rows_schedule(ctx, &r);
}

static tl_status check(tl_ctx *ctx, const tl_rmsnorm_desc *d, const char *api)
{
    if (!d)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: NULL descriptor", api);
    if (!(d->eps >= 0) || isinf(d->eps))
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: eps = %g must be finite and >= 0", api, d->eps);
    tli_rows_desc r = rows_of(ctx, d);
    return tli_rows_check(ctx, &r, api);
}

TL_API tl_softmax_schedule tl_op_rmsnorm_schedule(tl_ctx *ctx, const tl_rmsnorm_desc *d)
{
    tl_softmax_schedule zero = {0};
    if (!ctx || check(ctx, d, "tl_op_rmsnorm_schedule") != TL_OK)
        return zero;
    tli_rows_desc r = rows_of(ctx, d);
    return tli_rows_schedule(ctx, &r);
}

TL_API tl_status tl_op_rmsnorm_build(tl_ctx *ctx, const tl_rmsnorm_desc *d, tl_kernel **out)
{
    static const char api[] = "tl_op_rmsnorm_build";
    if (!ctx || !out)
        return ctx ? tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: NULL argument", api) : TL_ERR_INVALID_ARG;
    *out = NULL;
    tl_status st = check(ctx, d, api);
    if (st != TL_OK)
        return st;
    tli_rows_desc rd = rows_of(ctx, d);
    rms_kernel r = {.out = d->out_dtype};
    if ((st = tli_rows_begin(ctx, "rmsnorm", &rd, &r.rk)) != TL_OK)
        return st;
    r.w = tl_param_tensor(r.rk.k, "W", d->in_dtype, 1, &r.rk.N, NULL);
    r.eps = tl_param_scalar(r.rk.k, "eps", TL_F32);
    body(&r);
    return tli_rows_end(ctx, &r.rk, api, out);
}

static tl_status build_for_op(tl_ctx *ctx, const void *user, tl_kernel **out)
{
    return tl_op_rmsnorm_build(ctx, (const tl_rmsnorm_desc *)user, out);
}

TL_API tl_status tl_op_rmsnorm_program(tl_ctx *ctx, const tl_rmsnorm_desc *d, const tl_program **out)
{
    static const char api[] = "tl_op_rmsnorm_program";
    if (!ctx || !out)
        return ctx ? tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: NULL argument", api) : TL_ERR_INVALID_ARG;
    tl_status st = check(ctx, d, api);
    if (st != TL_OK)
        return st;
    tli_rows_desc r = rows_of(ctx, d);
    unsigned since = tli_fail_count();
    return tli_fail_as(ctx, tli_rows_program(ctx, "rmsnorm", &r, build_for_op, d, out), api, since);
}

TL_API tl_status tl_op_rmsnorm(tl_ctx *ctx, const tl_rmsnorm_desc *d, uint64_t x, uint64_t w, uint64_t y,
                               void *stream)
{
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    tl_status st = check(ctx, d, "tl_op_rmsnorm");
    if (st != TL_OK)
        return st;
    tli_rows_desc r = rows_of(ctx, d);
    const tli_rows_ptr ptrs[] = {{"x", x, d->in_dtype}, {"w", w, d->in_dtype}, {"y", y, d->out_dtype}};
    const tl_program *p;
    if ((st = tli_rows_check_pointers(ctx, &r, "tl_op_rmsnorm", 3, ptrs)) != TL_OK)
        return st;
    unsigned since = tli_fail_count();
    if ((st = tl_op_rmsnorm_program(ctx, d, &p)) != TL_OK)
        return tli_fail_as(ctx, st, "tl_op_rmsnorm", since);
    tl_arg args[9];
    int n = tli_rows_args(&r, x, y, args);
    args[n++] = tl_arg_dptr(w);
    args[n++] = tl_arg_float(d->eps);
    n += tli_rows_tail_args(ctx, p, &r, args + n);
    return tli_fail_as(ctx, tl_launch(p, stream, n, args), "tl_op_rmsnorm", since);
}
