/*
 * rows.c - what the row-wise ops (softmax.c, rmsnorm.c) share: their
 * default schedules, the checks of their descriptors and pointers, and the
 * start and end of their kernels.
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
 * shared memory). 256 threads, up to 1024 for the longest rows, so that
 * E stays 32: at E = 64 the fragment and its temporaries no longer fit
 * the 64 registers a thread has at full occupancy. Meant to be tuned: the
 * autotuner measures others through tl_softmax_schedule. */
static const tl_softmax_schedule one_pass[] = {
    {.width = 1, .rows = 4096, .threads = 256},    {.width = 2, .rows = 2048, .threads = 256},
    {.width = 4, .rows = 1024, .threads = 256},    {.width = 8, .rows = 512, .threads = 256},
    {.width = 16, .rows = 256, .threads = 256},    {.width = 32, .rows = 128, .threads = 256},
    {.width = 64, .rows = 64, .threads = 256},     {.width = 128, .rows = 32, .threads = 256},
    {.width = 256, .rows = 16, .threads = 256},    {.width = 512, .rows = 8, .threads = 256},
    {.width = 1024, .rows = 8, .threads = 256},    {.width = 2048, .rows = 4, .threads = 256},
    {.width = 4096, .rows = 2, .threads = 256},    {.width = 8192, .rows = 1, .threads = 256},
    {.width = 16384, .rows = 1, .threads = 512},   {.width = 32768, .rows = 1, .threads = 1024},
};
/* Longer rows: the online path in chunks of 8192 columns, 256 threads per
 * row. Smaller blocks than the widest one-pass entry keep 8 of them per
 * SM, and several rows in flight, across the reductions of each chunk. */
static const tl_softmax_schedule online_chunk = {.width = 8192, .rows = 1, .threads = 256};

#define MAX_WIDTH (1 << 20)  /* a tile's extent */
#define MAX_ELEMS (1 << 24)  /* a tile's elements */

static const tl_softmax_schedule *default_for(int64_t cols)
{
    for (size_t i = 0; i < sizeof one_pass / sizeof one_pass[0]; i++)
        if (cols <= one_pass[i].width)
            return &one_pass[i];
    return &online_chunk;
}

tl_softmax_schedule tli_rows_schedule(const tli_rows_desc *d)
{
    tl_softmax_schedule s = d->schedule;
    const tl_softmax_schedule *def = default_for(s.width ? s.width : d->cols);
    if (!s.width)
        s.width = def->width;
    if (!s.rows)
        s.rows = def->rows;
    if (!s.threads)
        s.threads = def->threads;
    return s;
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
    tl_softmax_schedule s = tli_rows_schedule(d);
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
    tl_softmax_schedule s = tli_rows_schedule(d);
    memset(rk, 0, sizeof *rk);
    rk->R = s.rows;
    rk->W = s.width;
    rk->online = d->cols > s.width;
    char name[64];
    tli_fmt(name, sizeof name, "%s_%s_%s_w%d%s", op, tl_dtype_name(d->in_dtype), tl_dtype_name(d->out_dtype),
            s.width, rk->online ? "_online" : "");
    tl_kernel *k = rk->k = tl_kernel_new(ctx, name);
    if (!k)
        return TL_ERR_OUT_OF_MEMORY;
    rk->M = tl_dim(k, "M");
    rk->N = tl_dim(k, "N");
    tl_expr ldx = tl_dim(k, "ld_in"), ldy = tl_dim(k, "ld_out"), one = tl_int(k, 1);
    rk->X = tl_param_tensor(k, "X", d->in_dtype, 2, (tl_expr[]){rk->M, rk->N}, (tl_expr[]){ldx, one});
    rk->Y = tl_param_tensor(k, "Y", d->out_dtype, 2, (tl_expr[]){rk->M, rk->N}, (tl_expr[]){ldy, one});
    /* rows along x, which takes 2^31 - 1 blocks */
    tl_grid(k, tl_ceildiv(k, rk->M, tl_int(k, rk->R)), TL_NONE_EXPR, TL_NONE_EXPR, s.threads);
    rk->bx = tl_block_idx(k, 0);
    rk->row0 = tl_mul(k, rk->bx, tl_int(k, rk->R));
    return TL_OK;
}

tl_status tli_rows_end(tl_ctx *ctx, tli_rows_kernel *rk, const char *api, tl_kernel **out)
{
    tl_status st = tl_kernel_status(rk->k);
    if (st != TL_OK) {
        tli_fail(ctx, st, "%s: %s", api, tl_kernel_error(rk->k));
        tl_kernel_destroy(rk->k);
        rk->k = NULL;
        return st;
    }
    *out = rk->k;
    return TL_OK;
}

tl_status tli_rows_program(tl_ctx *ctx, const char *op, const tli_rows_desc *d,
                           tl_status (*build)(tl_ctx *, const void *, tl_kernel **), const void *user,
                           const tl_program **out)
{
    /* what the code depends on: dtypes and the effective schedule, never
     * the sizes (the one-pass program of a width serves every cols up to it) */
    tl_softmax_schedule s = tli_rows_schedule(d);
    char key[128];
    tli_fmt(key, sizeof key, "%s:%s:%s:%d:%d:%d:%d", op, tl_dtype_name(d->in_dtype), tl_dtype_name(d->out_dtype),
            s.width, s.rows, s.threads, d->cols > s.width);
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
