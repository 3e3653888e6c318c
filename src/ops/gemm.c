/*
 * gemm.c - the prebuilt GEMM with its fused epilogue, written with the
 * public builder API: tiles of A and B move global -> shared through a
 * software pipeline, tl_gemm accumulates in an f32 fragment, the bias and
 * activation run on the fragment in registers, one store writes C.
 */
#include "ops.h"

#include "ctx.h"
#include "program.h"
#include "tune.h"

#include <string.h>

/* A schedule is all zero when the caller leaves the choice to the op. */
static bool schedule_is_zero(const tl_gemm_schedule *z)
{
    return !z->block_m && !z->block_n && !z->block_k && !z->stages && !z->threads && !z->swizzle &&
           !z->warp_policy && !z->pingpong;
}

/* The schedule of d with the choices filled in. An all-zero schedule is
 * the op's choice (gemm_schedule.c: the tuning database's record for this
 * GPU and shape class, else the heuristic table); in any other, zero
 * fields come from the target's schedule for large shapes and swizzle 0
 * means off. */
static tl_gemm_schedule effective_schedule(tl_ctx *ctx, const tl_gemm_desc *d)
{
    if (schedule_is_zero(&d->schedule))
        return tli_gemm_pick(ctx, d);
    const tl_gemm_schedule def = tli_gemm_generic_schedule(tl_ctx_target(ctx));
    tl_gemm_schedule s = d->schedule;
    if (!s.block_m)
        s.block_m = def.block_m;
    if (!s.block_n)
        s.block_n = def.block_n;
    if (!s.block_k)
        s.block_k = def.block_k;
    if (!s.stages)
        s.stages = def.stages;
    if (!s.threads)
        s.threads = def.threads;
    return s;
}

tl_status tli_gemm_check_desc(tl_ctx *ctx, const tl_gemm_desc *d, const char *api)
{
    if (!d)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: NULL descriptor", api);
    if (d->m < 1 || d->n < 1 || d->k < 1)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: M, N, K must be >= 1 (got %lld, %lld, %lld)", api,
                        (long long)d->m, (long long)d->n, (long long)d->k);
    if (d->in_dtype != TL_BF16 && d->in_dtype != TL_F16)
        return tli_fail(ctx, TL_ERR_DTYPE, "%s: inputs must be bf16 or f16, not %s", api, tl_dtype_name(d->in_dtype));
    if (d->out_dtype != TL_BF16 && d->out_dtype != TL_F16 && d->out_dtype != TL_F32)
        return tli_fail(ctx, TL_ERR_DTYPE, "%s: output must be bf16, f16 or f32, not %s", api,
                        tl_dtype_name(d->out_dtype));
    if ((unsigned)d->epilogue > TL_EPI_GELU_TANH)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: unknown epilogue %d", api, (int)d->epilogue);
    unsigned wp = d->schedule.warp_policy;
    if (wp != TL_GEMM_WARP_SQUARE && wp != TL_GEMM_WARP_ROWS && wp != TL_GEMM_WARP_COLS)
        return tli_fail(ctx, TL_ERR_INVALID_ARG,
                        "%s: unknown schedule.warp_policy 0x%x (TL_GEMM_WARP_SQUARE, _ROWS or _COLS)", api, wp);
    return TL_OK;
}

TL_API tl_gemm_schedule tl_op_gemm_schedule(tl_ctx *ctx, const tl_gemm_desc *d)
{
    tl_gemm_schedule zero = {0};
    if (!ctx || tli_gemm_check_desc(ctx, d, "tl_op_gemm_schedule") != TL_OK)
        return zero;
    return effective_schedule(ctx, d);
}

/* x -> act(x) on f32 values, as builder expressions, written for the FMA
 * pipe: with h = x/2 both GELUs end in h + h * f(...) (one FFMA), and the
 * tanh form's inner polynomial is x (c0 + c1 x^2) (two multiplies, one
 * FFMA), which is what keeps the fused epilogue within a few percent of
 * the GEMM. */
static tl_expr activation(tl_kernel *k, tl_expr x, tl_epilogue epi)
{
    tl_expr h = tl_mul(k, x, tl_f32(k, 0.5f));
    switch (epi) {
    case TL_EPI_RELU: return tl_max(k, x, tl_f32(k, 0.0f));
    case TL_EPI_GELU_ERF: /* x/2 (1 + erf(x / sqrt 2)) */
        return tl_add(k, h, tl_mul(k, h, tl_erf(k, tl_mul(k, x, tl_f32(k, 0.70710678118654752f)))));
    case TL_EPI_GELU_TANH: { /* x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
        const float c0 = 0.79788456080286536f, c1 = 0.79788456080286536f * 0.044715f;
        tl_expr inner = tl_mul(k, x, tl_add(k, tl_f32(k, c0), tl_mul(k, tl_f32(k, c1), tl_mul(k, x, x))));
        return tl_add(k, h, tl_mul(k, h, tl_tanh(k, inner)));
    }
    default: return x;
    }
}

/* The epilogue on the accumulator, in registers:
 *   Cf[i, j] = act(Cf[i, j] + bias_s[j])
 * with the block's bias slab in shared memory (bias_s, loaded before the
 * main loop): loading it from global memory here let the compiler hoist
 * the 64 loads per thread into the main loop, where the registers they
 * hold pushed the kernel into spills. */
static void epilogue(tl_kernel *k, const tl_gemm_desc *d, const tl_gemm_schedule *s, tl_buf Cf, tl_buf bias_s)
{
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){s->block_m, s->block_n}, v);
    tl_expr x = tl_load(k, Cf, v);
    if (d->has_bias)
        x = tl_add(k, x, tl_cast(k, tl_load(k, bias_s, &v[1]), TL_F32));
    tl_store(k, Cf, v, activation(k, x, d->epilogue));
    tl_end(k);
}

TL_API tl_status tl_op_gemm_build(tl_ctx *ctx, const tl_gemm_desc *d, tl_kernel **out)
{
    if (!ctx || !out)
        return ctx ? tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_op_gemm_build: NULL argument") : TL_ERR_INVALID_ARG;
    *out = NULL;
    tl_status st = tli_gemm_check_desc(ctx, d, "tl_op_gemm_build");
    if (st != TL_OK)
        return st;
    tl_gemm_schedule s = effective_schedule(ctx, d);
    char name[48];
    tli_fmt(name, sizeof name, "gemm_%s%s_%s", d->trans_b ? "nt" : "nn", tl_dtype_name(d->in_dtype),
            tl_dtype_name(d->out_dtype));
    tl_kernel *k = tl_kernel_new(ctx, name);
    if (!k)
        return TL_ERR_OUT_OF_MEMORY;
    tl_expr M = tl_dim(k, "M"), N = tl_dim(k, "N"), K = tl_dim(k, "K");
    tl_buf A = tl_param_tensor(k, "A", d->in_dtype, 2, (tl_expr[]){M, K}, NULL);
    tl_buf B = tl_param_tensor(k, "B", d->in_dtype, 2, d->trans_b ? (tl_expr[]){N, K} : (tl_expr[]){K, N}, NULL);
    tl_buf bias = d->has_bias ? tl_param_tensor(k, "bias", d->in_dtype, 1, &N, NULL) : TL_NONE_BUF;
    tl_buf C = tl_param_tensor(k, "C", d->out_dtype, 2, (tl_expr[]){M, N}, NULL);
    tl_grid(k, tl_ceildiv(k, N, tl_int(k, s.block_n)), tl_ceildiv(k, M, tl_int(k, s.block_m)), TL_NONE_EXPR,
            s.threads);
    tl_use_swizzle(k, s.swizzle);
    /* the activations in f32 with the hardware tanh: its 2^-11 is far below
     * what the bf16/f16 operands carry (see tl_op_gemm in tilec.h) */
    tl_use_fast_math(k, 1);
    if (s.pingpong)
        tl_use_pingpong(k, 1);
    tl_expr bx = tl_block_idx(k, 0), by = tl_block_idx(k, 1);
    tl_buf As = tl_alloc_shared(k, d->in_dtype, 2, (int64_t[]){s.block_m, s.block_k});
    tl_buf Bs = tl_alloc_shared(k, d->in_dtype, 2,
                                d->trans_b ? (int64_t[]){s.block_n, s.block_k} : (int64_t[]){s.block_k, s.block_n});
    tl_buf Cf = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){s.block_m, s.block_n});
    tl_buf bias_s = TL_NONE_BUF;
    if (d->has_bias) {
        bias_s = tl_alloc_shared(k, d->in_dtype, 1, (int64_t[]){s.block_n});
        tl_copy(k, tl_tile(k, bias, bx), tl_all(bias_s));
    }
    tl_clear(k, Cf);
    tl_expr ko = tl_pipelined(k, tl_ceildiv(k, K, tl_int(k, s.block_k)), s.stages);
    tl_copy(k, tl_tile(k, A, by, ko), tl_all(As));
    tl_copy(k, d->trans_b ? tl_tile(k, B, bx, ko) : tl_tile(k, B, ko, bx), tl_all(Bs));
    tl_gemm(k, As, Bs, Cf, (d->trans_b ? TL_GEMM_TRANS_B : 0) | s.warp_policy);
    tl_end(k);
    if (d->has_bias || d->epilogue != TL_EPI_NONE)
        epilogue(k, d, &s, Cf, bias_s);
    tl_copy(k, tl_all(Cf), tl_tile(k, C, by, bx));
    st = tl_kernel_status(k);
    if (st != TL_OK) {
        tl_kernel_destroy(k);
        return st;
    }
    *out = k;
    return TL_OK;
}

static tl_status build_for_op(tl_ctx *ctx, const void *user, tl_kernel **out)
{
    return tl_op_gemm_build(ctx, (const tl_gemm_desc *)user, out);
}

/* The op's program of d for schedule s: one program serves every size, so
 * the key holds only what the code depends on. */
static tl_status program_for(tl_ctx *ctx, const tl_gemm_desc *d, const tl_gemm_schedule *s, const tl_program **out)
{
    tl_gemm_desc with = *d;
    with.schedule = *s;
    char key[128];
    tli_fmt(key, sizeof key, "gemm:%s:%s:%d:%d:%d:%d.%d.%d.%d.%d.%d.%u.%d", tl_dtype_name(d->in_dtype),
            tl_dtype_name(d->out_dtype), d->trans_b, d->has_bias, (int)d->epilogue, s->block_m, s->block_n,
            s->block_k, s->stages, s->threads, s->swizzle, s->warp_policy, s->pingpong != 0);
    return tli_op_program(ctx, key, build_for_op, &with, out);
}

TL_API tl_status tl_op_gemm_program(tl_ctx *ctx, const tl_gemm_desc *d, const tl_program **out)
{
    if (!ctx || !out)
        return ctx ? tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_op_gemm_program: NULL argument") : TL_ERR_INVALID_ARG;
    unsigned since = tli_fail_count();
    tl_status st = tli_gemm_check_desc(ctx, d, "tl_op_gemm_program");
    if (st != TL_OK)
        return st;
    tl_gemm_schedule s = effective_schedule(ctx, d);
    st = tli_fail_as(ctx, program_for(ctx, d, &s, out), "tl_op_gemm_program", since);
    if (st == TL_OK || !schedule_is_zero(&d->schedule))
        return st;
    /* A tuning record whose schedule no longer compiles (another NVRTC, an
     * edited file) must not break the op: the heuristic's schedule runs. */
    tl_gemm_schedule h = tli_gemm_heuristic(tl_ctx_target(ctx), d);
    if (memcmp(&h, &s, sizeof h) == 0)
        return st;
    tli_log(ctx, TL_LOG_WARN, "tl_op_gemm: the tuned schedule failed (%s: %s); using the heuristic's",
            tl_status_name(st), tl_ctx_error(ctx));
    return tli_fail_as(ctx, program_for(ctx, d, &h, out), "tl_op_gemm_program", since);
}

/* Pointers must hold whole elements; 16-byte alignment only picks the fast
 * copy path inside the kernel. */
static tl_status check_pointers(tl_ctx *ctx, const tl_gemm_desc *d, uint64_t a, uint64_t b, uint64_t bias, uint64_t c)
{
    static const char api[] = "tl_op_gemm";
    tl_status st;
    if ((st = tli_op_check_dptr(ctx, api, "a", a, d->in_dtype, true)) != TL_OK ||
        (st = tli_op_check_dptr(ctx, api, "b", b, d->in_dtype, true)) != TL_OK ||
        (st = tli_op_check_dptr(ctx, api, "bias", bias, d->in_dtype, d->has_bias != 0)) != TL_OK ||
        (st = tli_op_check_dptr(ctx, api, "c", c, d->out_dtype, true)) != TL_OK)
        return st;
    return TL_OK;
}

TL_API tl_status tl_op_gemm(tl_ctx *ctx, const tl_gemm_desc *d, uint64_t a, uint64_t b, uint64_t bias, uint64_t c,
                            void *stream)
{
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    unsigned since = tli_fail_count();
    tl_status st = tli_gemm_check_desc(ctx, d, "tl_op_gemm");
    if (st == TL_OK)
        st = check_pointers(ctx, d, a, b, bias, c);
    if (st != TL_OK)
        return st;
    /* tensors TMA or 16-byte copies cannot take (misaligned pointers,
     * rows of a length not a multiple of 16 bytes) run the program's safe
     * variant: tl_launch picks it */
    const tl_program *p;
    if ((st = tl_op_gemm_program(ctx, d, &p)) != TL_OK)
        return tli_fail_as(ctx, st, "tl_op_gemm", since);
    tl_arg args[7];
    int n = 0;
    args[n++] = tl_arg_int(d->m);
    args[n++] = tl_arg_int(d->n);
    args[n++] = tl_arg_int(d->k);
    args[n++] = tl_arg_dptr(a);
    args[n++] = tl_arg_dptr(b);
    if (d->has_bias)
        args[n++] = tl_arg_dptr(bias);
    args[n++] = tl_arg_dptr(c);
    return tli_fail_as(ctx, tl_launch(p, stream, n, args), "tl_op_gemm", since);
}
