/*
 * vadd.c - the first kernel of the tutorial: c = a + b, element-wise.
 *
 * Each block takes a tile of `tile` elements; the parallel loop spreads it
 * over the threads, and the lowering turns the unit-stride accesses into
 * 16-byte loads and stores, several per thread in flight. The tile is sized
 * so each thread moves 64 bytes of each input per block: enough
 * independent loads to cover HBM latency without many registers.
 */
#include "ops.h"

#include "ctx.h"
#include "program.h"

#include <string.h>

tli_vadd_schedule tli_vadd_default_schedule(tl_dtype dtype)
{
    tli_vadd_schedule s = {.threads = 256};
    size_t sz = tl_dtype_size(dtype);
    s.tile = (int64_t)s.threads * (int64_t)(64 / (sz ? sz : 4));
    return s;
}

static bool vadd_dtype_ok(tl_dtype dt) { return dt == TL_F32 || dt == TL_F16 || dt == TL_BF16; }

tl_status tli_vadd_build(tl_ctx *ctx, tl_dtype dtype, const tli_vadd_schedule *s, tl_kernel **out)
{
    *out = NULL;
    if (!vadd_dtype_ok(dtype))
        return tli_fail(ctx, TL_ERR_DTYPE, "vadd: dtype %s is not f32, f16 or bf16", tl_dtype_name(dtype));
    char name[32];
    tli_fmt(name, sizeof name, "vadd_%s", tl_dtype_name(dtype));
    tl_kernel *k = tl_kernel_new(ctx, name);
    if (!k)
        return TL_ERR_OUT_OF_MEMORY;
    tl_expr n = tl_dim(k, "N");
    tl_buf a = tl_param_tensor(k, "A", dtype, 1, &n, NULL);
    tl_buf b = tl_param_tensor(k, "B", dtype, 1, &n, NULL);
    tl_buf c = tl_param_tensor(k, "C", dtype, 1, &n, NULL);
    tl_expr tile = tl_int(k, s->tile);
    tl_grid(k, tl_ceildiv(k, n, tile), TL_NONE_EXPR, TL_NONE_EXPR, s->threads);
    tl_expr base = tl_mul(k, tl_block_idx(k, 0), tile);
    tl_expr i = tl_parallel1(k, s->tile);
    tl_expr idx = tl_add(k, base, i);
    tl_store(k, c, &idx, tl_add(k, tl_load(k, a, &idx), tl_load(k, b, &idx)));
    tl_end(k);
    return tli_op_kernel_done(ctx, NULL, k, out);
}

static tl_status build_default(tl_ctx *ctx, const void *user, tl_kernel **out)
{
    tl_dtype dt = *(const tl_dtype *)user;
    tli_vadd_schedule s = tli_vadd_default_schedule(dt);
    return tli_vadd_build(ctx, dt, &s, out);
}

TL_API tl_status tl_op_vadd_program(tl_ctx *ctx, const tl_vadd_desc *d, const tl_program **out)
{
    if (!ctx || !d || !out)
        return ctx ? tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_op_vadd_program: NULL argument") : TL_ERR_INVALID_ARG;
    if (!vadd_dtype_ok(d->dtype))
        return tli_fail(ctx, TL_ERR_DTYPE, "tl_op_vadd_program: dtype %s is not f32, f16 or bf16",
                        tl_dtype_name(d->dtype));
    char key[32];
    tli_fmt(key, sizeof key, "vadd:%s", tl_dtype_name(d->dtype));
    unsigned since = tli_fail_count();
    return tli_fail_as(ctx, tli_op_program(ctx, key, build_default, &d->dtype, out), "tl_op_vadd_program", since);
}

TL_API tl_status tl_op_vadd(tl_ctx *ctx, const tl_vadd_desc *d, uint64_t a, uint64_t b, uint64_t c,
                            void *stream)
{
    static const char api[] = "tl_op_vadd";
    if (!ctx || !d)
        return ctx ? tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: d is NULL", api) : TL_ERR_INVALID_ARG;
    if (d->n < 0)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: n = %lld is negative", api, (long long)d->n);
    tl_status st;
    if ((st = tli_op_check_dptr(ctx, api, "a", a, d->dtype, d->n > 0)) != TL_OK ||
        (st = tli_op_check_dptr(ctx, api, "b", b, d->dtype, d->n > 0)) != TL_OK ||
        (st = tli_op_check_dptr(ctx, api, "c", c, d->dtype, d->n > 0)) != TL_OK)
        return st;
    const tl_program *p;
    unsigned since = tli_fail_count();
    if ((st = tl_op_vadd_program(ctx, d, &p)) != TL_OK)
        return tli_fail_as(ctx, st, api, since);
    tl_arg args[] = {tl_arg_int(d->n), tl_arg_dptr(a), tl_arg_dptr(b), tl_arg_dptr(c)};
    return tli_fail_as(ctx, tl_launch(p, stream, 4, args), api, since);
}
