/*
 * softmax.c - the fused row softmax, written with the public builder the
 * way the tutorial writes it: load a tile of rows into a register
 * fragment, tl_reduce_max, exp2 of the shifted values, tl_reduce_sum,
 * scale, store. One read and one write of every element when the row fits
 * the fragment; longer rows take an online normaliser (a running maximum
 * and a running sum rescaled as the maximum grows) and read the row twice.
 *
 *   y_ij = exp(x_ij - m_i) / s_i = exp2((x_ij - m_i) log2 e) / s_i
 *
 * Two guards keep a row of -inf from turning into NaN (-inf - -inf, and
 * 0 / 0): the maximum is clamped to -FLT_MAX before it is subtracted, so
 * every exponent is -inf and every exp2 0, and the sum to FLT_MIN before
 * it divides, so the outputs are 0 / FLT_MIN = 0. Any other row has a
 * finite maximum, whose own term is exp2(0) = 1, so neither clamp changes
 * it. Schedules and the layout they assume: rows.c.
 */
#include "ops.h"

#include "ctx.h"
#include "tune.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define LOG2E 1.4426950408889634f

static tl_expr safe_max(tl_kernel *k, tl_expr m) { return tl_max(k, m, tl_f32(k, -FLT_MAX)); }

/* exp(x - m) as exp2((x - m) log2 e), m a row maximum. */
static tl_expr exp_shifted(tl_kernel *k, tl_expr x, tl_expr m)
{
    return tl_exp2(k, tl_mul(k, tl_sub(k, x, safe_max(k, m)), tl_f32(k, LOG2E)));
}

static tl_expr inverse_sum(tl_kernel *k, tl_expr s)
{
    return tl_div(k, tl_f32(k, 1.0f), tl_max(k, s, tl_f32(k, FLT_MIN)));
}


/* x[i, j] = X[row0 + i, col] in f32, -inf past the last column, so that
 * padding takes no part in the maximum and adds exp2(-inf) = 0 to the sum. */
static void load_chunk(const tli_rows_kernel *rk, tl_buf x, tl_expr c)
{
    tl_kernel *k = rk->k;
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){rk->R, rk->W}, v);
    tl_expr col = tli_rows_column(rk, c, v[1]);
    tl_expr xv = tl_cast(k, tl_load(k, rk->X, (tl_expr[]){tl_add(k, rk->row0, v[0]), col}), TL_F32);
    tl_store(k, x, v, tl_select(k, tl_lt(k, col, rk->N), xv, tl_f32(k, -INFINITY)));
    tl_end(k);
}

/* Y[row0 + i, col] = e[i, j] / s[i], e already exp(x - m). */
static void store_scaled(const tli_rows_kernel *rk, tl_buf e, tl_buf s, tl_expr c, tl_dtype out)
{
    tl_kernel *k = rk->k;
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){rk->R, rk->W}, v);
    tl_expr y = tl_mul(k, tl_load(k, e, v), inverse_sum(k, tl_load(k, s, &v[0])));
    tl_store(k, rk->Y, (tl_expr[]){tl_add(k, rk->row0, v[0]), tli_rows_column(rk, c, v[1])}, tl_cast(k, y, out));
    tl_end(k);
}

/* x[i, j] = exp(x[i, j] - m[i]), in place. */
static void exponentiate(const tli_rows_kernel *rk, tl_buf x, tl_buf m)
{
    tl_kernel *k = rk->k;
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){rk->R, rk->W}, v);
    tl_store(k, x, v, exp_shifted(k, tl_load(k, x, v), tl_load(k, m, &v[0])));
    tl_end(k);
}

/* An f32 fragment of the block's rows: [R, W] (the row tile), or [R] (a
 * value per row). */
static tl_buf rows_tile(const tli_rows_kernel *rk)
{
    return tl_alloc_fragment(rk->k, TL_F32, 2, (int64_t[]){rk->R, rk->W});
}
static tl_buf per_row(const tli_rows_kernel *rk) { return tl_alloc_fragment(rk->k, TL_F32, 1, &rk->R); }

/* The whole row in registers, for each of the block's tiles (rows.c):
 *   x = X rows (-inf padding); m = max_j x; x = exp(x - m); s = sum_j x;
 *   Y = x / s */
static void one_pass(tli_rows_kernel *rk, tl_dtype out)
{
    tl_kernel *k = rk->k;
    tl_buf x = rows_tile(rk), m = per_row(rk), s = per_row(rk);
    tl_expr c0 = tl_int(k, 0);
    tli_rows_open(rk);
    if (rk->stages == 1)
        load_chunk(rk, x, c0);
    else
        tli_rows_load(rk, x, -INFINITY);
    tl_reduce_max(k, x, m, 1, 1);
    tli_rows_cluster_max(rk, m); /* a row split over a cluster: the whole row's */
    exponentiate(rk, x, m);
    tl_reduce_sum(k, x, s, 1, 1);
    tli_rows_cluster_sum(rk, s);
    store_scaled(rk, x, s, c0, out);
    tli_rows_close(rk);
}

/* Before the running maximum grows from m_old to m: s = s exp(m_old - m),
 * and remember m_old for the next chunk. When m_old is -inf, s is 0 and
 * the clamped difference gives a factor 0 (or 1 when m is -inf too). */
static void rescale_sum(const tli_rows_kernel *rk, tl_buf s, tl_buf m_old, tl_buf m)
{
    tl_kernel *k = rk->k;
    tl_expr i = tl_parallel1(k, rk->R);
    tl_expr factor = exp_shifted(k, safe_max(k, tl_load(k, m_old, &i)), tl_load(k, m, &i));
    tl_store(k, s, &i, tl_mul(k, tl_load(k, s, &i), factor));
    tl_store(k, m_old, &i, tl_load(k, m, &i));
    tl_end(k);
}

/* Rows longer than the fragment, in chunks of W columns:
 *   m = -inf, s = 0, m_old = -inf
 *   for each chunk: x = chunk (-inf padding); m = max(m, max_j x);
 *                   s = s exp(m_old - m); m_old = m; x = exp(x - m); s += sum_j x
 *   for each chunk: x = chunk; Y = exp(x - m) / s */
static void online(tli_rows_kernel *rk, tl_dtype out)
{
    tl_kernel *k = rk->k;
    tl_buf x = rows_tile(rk), m = per_row(rk), m_old = per_row(rk), s = per_row(rk);
    tli_rows_open(rk); /* one tile per block: no loop */
    tl_expr chunks = tl_ceildiv(k, rk->N, tl_int(k, rk->W));
    tl_fill(k, m, tl_f32(k, -INFINITY));
    tl_fill(k, m_old, tl_f32(k, -INFINITY));
    tl_clear(k, s);
    tl_expr c = tl_serial(k, chunks);
    load_chunk(rk, x, c);
    tl_reduce_max(k, x, m, 1, 0);
    rescale_sum(rk, s, m_old, m);
    exponentiate(rk, x, m);
    tl_reduce_sum(k, x, s, 1, 0);
    tl_end(k);
    c = tl_serial(k, chunks);
    load_chunk(rk, x, c);
    exponentiate(rk, x, m);
    store_scaled(rk, x, s, c, out);
    tl_end(k);
}

/* An all-zero schedule takes the tuning record for this GPU and class
 * when there is one (rows_tune.c) and use_db is set, else rows.c's
 * default table. */
static tli_rows_desc rows_desc(tl_ctx *ctx, const tl_softmax_desc *d, bool use_db)
{
    tli_rows_desc r = {.rows = d->rows, .cols = d->cols, .ld_in = d->ld_in, .ld_out = d->ld_out,
                       .in_dtype = d->in_dtype, .out_dtype = d->out_dtype, .schedule = d->schedule};
    if (use_db && !r.schedule.width && !r.schedule.rows && !r.schedule.threads) {
        tli_softmax_pick(ctx, d, &r.schedule);
    }
    /* past 32768 columns, chunks of 16384 on 512 threads: 0.636 x copy at 1024x65536 f16 on the
     * H200 against 0.551 with 8192 on 256 (bench_softmax --variants, bench/NOTES.md) */
    r.online_width = 16384;
    return r;
}

static tli_rows_desc rows_of(tl_ctx *ctx, const tl_softmax_desc *d) { return rows_desc(ctx, d, true); }

tl_softmax_schedule tli_softmax_untuned(tl_ctx *ctx, const tl_softmax_desc *d)
{
    tl_softmax_desc plain = *d;
    memset(&plain.schedule, 0, sizeof plain.schedule);
    tli_rows_desc r = rows_desc(ctx, &plain, false);
    return tli_rows_schedule(ctx, &r);
}

static tl_status check(tl_ctx *ctx, const tl_softmax_desc *d, const char *api)
{
    if (!d)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: NULL descriptor", api);
    tli_rows_desc r = rows_of(ctx, d);
    return tli_rows_check(ctx, &r, api);
}

TL_API tl_softmax_schedule tl_op_softmax_schedule(tl_ctx *ctx, const tl_softmax_desc *d)
{
    tl_softmax_schedule zero = {0};
    if (!ctx || check(ctx, d, "tl_op_softmax_schedule") != TL_OK)
        return zero;
    tli_rows_desc r = rows_of(ctx, d);
    return tli_rows_schedule(ctx, &r);
}

TL_API tl_status tl_op_softmax_build(tl_ctx *ctx, const tl_softmax_desc *d, tl_kernel **out)
{
    static const char api[] = "tl_op_softmax_build";
    if (!ctx || !out)
        return ctx ? tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: NULL argument", api) : TL_ERR_INVALID_ARG;
    *out = NULL;
    tl_status st = check(ctx, d, api);
    if (st != TL_OK)
        return st;
    tli_rows_desc r = rows_of(ctx, d);
    tli_rows_kernel rk;
    if ((st = tli_rows_begin(ctx, "softmax", &r, &rk)) != TL_OK)
        return st;
    /* exp2 on the hardware unit (ex2.approx.ftz, relative error ~2^-22):
     * exp2f's range fix-up cost three more instructions an element in a
     * kernel whose wide rows are issue-bound (ncu at 2048x32768: 0.73
     * instructions a cycle per scheduler, DRAM at 56%). What it flushes,
     * results below 2^-126, are terms of a sum of at least 1. The
     * reciprocal of the sum (at least FLT_MIN, at most the row length) is
     * __fdividef's, exact enough in that range. */
    tl_use_fast_math(rk.k, 1);
    if (rk.online)
        online(&rk, d->out_dtype);
    else
        one_pass(&rk, d->out_dtype);
    return tli_rows_end(ctx, &rk, api, out);
}

static tl_status build_for_op(tl_ctx *ctx, const void *user, tl_kernel **out)
{
    return tl_op_softmax_build(ctx, (const tl_softmax_desc *)user, out);
}

TL_API tl_status tl_op_softmax_program(tl_ctx *ctx, const tl_softmax_desc *d, const tl_program **out)
{
    static const char api[] = "tl_op_softmax_program";
    if (!ctx || !out)
        return ctx ? tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: NULL argument", api) : TL_ERR_INVALID_ARG;
    tl_status st = check(ctx, d, api);
    if (st != TL_OK)
        return st;
    tli_rows_desc r = rows_of(ctx, d);
    unsigned since = tli_fail_count();
    return tli_fail_as(ctx, tli_rows_program(ctx, "softmax", &r, build_for_op, d, out), api, since);
}

TL_API tl_status tl_op_softmax(tl_ctx *ctx, const tl_softmax_desc *d, uint64_t x, uint64_t y, void *stream)
{
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    tl_status st = check(ctx, d, "tl_op_softmax");
    if (st != TL_OK)
        return st;
    tli_rows_desc r = rows_of(ctx, d);
    const tli_rows_ptr ptrs[] = {{"x", x, d->in_dtype}, {"y", y, d->out_dtype}};
    const tl_program *p;
    if ((st = tli_rows_check_pointers(ctx, &r, "tl_op_softmax", 2, ptrs)) != TL_OK)
        return st;
    unsigned since = tli_fail_count();
    if ((st = tl_op_softmax_program(ctx, d, &p)) != TL_OK)
        return tli_fail_as(ctx, st, "tl_op_softmax", since);
    tl_arg args[7];
    int n = tli_rows_args(&r, x, y, args);
    n += tli_rows_tail_args(ctx, p, &r, args + n);
    return tli_fail_as(ctx, tl_launch(p, stream, n, args), "tl_op_softmax", since);
}
