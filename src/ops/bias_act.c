/*
 * bias_act.c - the unfused GEMM epilogue as a kernel of its own:
 * Y[i, j] = act(X[i, j] + bias[j]), in f32 whatever the element type.
 *
 * A block takes a [rows, 256] tile; the 2-D parallel loop gives every
 * thread four 16-byte chunks along a row (the lowering vectorises X, bias
 * and Y, and falls back to element accesses at ragged edges or rows that
 * do not start 16-byte aligned). tl_op_bias_act works in place by passing one
 * pointer as both X and Y: each element is read and written by the same
 * thread, loads first, and a tensor that is only read keeps its vector
 * loads.
 */
#include "ctx.h"
#include "ops.h"
#include "program.h"

#define TILE_COLS 256
#define THREADS 256
#define CHUNKS_PER_THREAD 4

typedef struct bias_act_key {
    tl_dtype dtype;
    tl_epilogue epi;
    int has_bias;
} bias_act_key;

static bool dtype_ok(tl_dtype dt) { return dt == TL_F32 || dt == TL_F16 || dt == TL_BF16; }

static bool epi_ok(tl_epilogue e)
{
    return e == TL_EPI_NONE || e == TL_EPI_RELU || e == TL_EPI_GELU_ERF || e == TL_EPI_GELU_TANH;
}

static const char *epi_name(tl_epilogue e)
{
    switch (e) {
    case TL_EPI_RELU: return "relu";
    case TL_EPI_GELU_ERF: return "gelu_erf";
    case TL_EPI_GELU_TANH: return "gelu_tanh";
    default: return "none";
    }
}

/* Rows of the tile: four 16-byte chunks per thread over 256 columns
 * (f32: 16 rows, f16/bf16: 32). */
static int64_t tile_rows(tl_dtype dt)
{
    int64_t per_chunk = 16 / (int64_t)tl_dtype_size(dt);
    return (int64_t)THREADS * CHUNKS_PER_THREAD * per_chunk / TILE_COLS;
}

/* act(x) for f32 x:
 *   relu       max(x, 0)
 *   gelu_erf   0.5 x (1 + erf(x / sqrt 2))
 *   gelu_tanh  0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
static tl_expr activation(tl_kernel *k, tl_epilogue epi, tl_expr x)
{
    tl_expr half_x = tl_mul(k, tl_f32(k, 0.5f), x);
    tl_expr one = tl_f32(k, 1.0f);
    switch (epi) {
    case TL_EPI_RELU: return tl_max(k, x, tl_f32(k, 0.0f));
    case TL_EPI_GELU_ERF:
        return tl_mul(k, half_x, tl_add(k, one, tl_erf(k, tl_mul(k, x, tl_f32(k, 0.70710678118654752f)))));
    case TL_EPI_GELU_TANH: {
        tl_expr x3 = tl_mul(k, tl_mul(k, x, x), x);
        tl_expr inner = tl_add(k, x, tl_mul(k, tl_f32(k, 0.044715f), x3));
        tl_expr u = tl_mul(k, tl_f32(k, 0.79788456080286536f), inner); /* sqrt(2/pi) */
        return tl_mul(k, half_x, tl_add(k, one, tl_tanh(k, u)));
    }
    default: return x;
    }
}

static tl_expr to_f32(tl_kernel *k, tl_expr v, tl_dtype dt) { return dt == TL_F32 ? v : tl_cast(k, v, TL_F32); }

TL_API tl_status tl_op_bias_act_build(tl_ctx *ctx, tl_dtype dtype, tl_epilogue epi, int has_bias, tl_kernel **out)
{
    if (!ctx || !out)
        return ctx ? tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_op_bias_act_build: NULL argument") : TL_ERR_INVALID_ARG;
    *out = NULL;
    if (!dtype_ok(dtype))
        return tli_fail(ctx, TL_ERR_DTYPE, "tl_op_bias_act_build: dtype %s is not f32, f16 or bf16",
                        tl_dtype_name(dtype));
    if (!epi_ok(epi))
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_op_bias_act_build: unknown epilogue %d", (int)epi);
    char name[64];
    tli_fmt(name, sizeof name, "bias_act_%s_%s%s", tl_dtype_name(dtype), epi_name(epi), has_bias ? "_bias" : "");
    tl_kernel *k = tl_kernel_new(ctx, name);
    if (!k)
        return TL_ERR_OUT_OF_MEMORY;
    int64_t rows = tile_rows(dtype);
    tl_expr M = tl_dim(k, "M"), N = tl_dim(k, "N");
    tl_expr shape[2] = {M, N};
    tl_buf X = tl_param_tensor(k, "X", dtype, 2, shape, NULL);
    tl_buf bias = has_bias ? tl_param_tensor(k, "bias", dtype, 1, &N, NULL) : TL_NONE_BUF;
    tl_buf Y = tl_param_tensor(k, "Y", dtype, 2, shape, NULL);
    /* rows along x: M may be large; N / 256 blocks fit gridDim.y for any N
     * below 2^24. */
    tl_grid(k, tl_ceildiv(k, M, tl_int(k, rows)), tl_ceildiv(k, N, tl_int(k, TILE_COLS)), TL_NONE_EXPR, THREADS);
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){rows, TILE_COLS}, v);
    tl_expr i = tl_add(k, tl_mul(k, tl_block_idx(k, 0), tl_int(k, rows)), v[0]);
    tl_expr j = tl_add(k, tl_mul(k, tl_block_idx(k, 1), tl_int(k, TILE_COLS)), v[1]);
    tl_expr idx[2] = {i, j};
    tl_expr x = to_f32(k, tl_load(k, X, idx), dtype);
    if (has_bias)
        x = tl_add(k, x, to_f32(k, tl_load(k, bias, &j), dtype));
    tl_expr y = activation(k, epi, x);
    tl_store(k, Y, idx, dtype == TL_F32 ? y : tl_cast(k, y, dtype));
    tl_end(k);
    return tli_op_kernel_done(ctx, "tl_op_bias_act_build", k, out);
}

static tl_status build_cached(tl_ctx *ctx, const void *user, tl_kernel **out)
{
    const bias_act_key *key = user;
    return tl_op_bias_act_build(ctx, key->dtype, key->epi, key->has_bias, out);
}

TL_API tl_status tl_op_bias_act(tl_ctx *ctx, tl_dtype dtype, int64_t m, int64_t n, uint64_t c, uint64_t bias,
                             tl_epilogue epi, void *stream)
{
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    if (!dtype_ok(dtype))
        return tli_fail(ctx, TL_ERR_DTYPE, "tl_op_bias_act: dtype %s is not f32, f16 or bf16", tl_dtype_name(dtype));
    if (!epi_ok(epi))
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_op_bias_act: unknown epilogue %d", (int)epi);
    if (m < 0 || n < 0)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_op_bias_act: m = %lld, n = %lld must not be negative",
                        (long long)m, (long long)n);
    tl_status st;
    if ((st = tli_op_check_dptr(ctx, "tl_op_bias_act", "c", c, dtype, m > 0 && n > 0)) != TL_OK ||
        (st = tli_op_check_dptr(ctx, "tl_op_bias_act", "bias", bias, dtype, bias != 0)) != TL_OK)
        return st;
    if (!ctx->has_device)
        return tli_fail(ctx, TL_ERR_NO_DEVICE, "tl_op_bias_act: the context has no device (it was created "
                        "with TL_NO_DEVICE)");
    if (m == 0 || n == 0)
        return TL_OK;
    bias_act_key key = {.dtype = dtype, .epi = epi, .has_bias = bias != 0};
    char name[64];
    tli_fmt(name, sizeof name, "bias_act:%s:%s:%d", tl_dtype_name(dtype), epi_name(epi), key.has_bias);
    const tl_program *p;
    unsigned since = tli_fail_count();
    st = tli_op_program(ctx, name, build_cached, &key, &p);
    if (st != TL_OK)
        return tli_fail_as(ctx, st, "tl_op_bias_act", since);
    tl_arg args[5];
    int nargs = 0;
    args[nargs++] = tl_arg_int(m);
    args[nargs++] = tl_arg_int(n);
    args[nargs++] = tl_arg_dptr(c);
    if (bias)
        args[nargs++] = tl_arg_dptr(bias);
    args[nargs++] = tl_arg_dptr(c);
    return tli_fail_as(ctx, tl_launch(p, stream, nargs, args), "tl_op_bias_act", since);
}
