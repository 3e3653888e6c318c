/*
 * gemv.c - the GEMM of decode (M up to 8, B as [N, K]) as a matrix-vector
 * kernel on the CUDA cores, written with the public builder: every row of
 * B is read once, in 16-byte vectors, and dotted with the M rows of A.
 *
 *   grid (ceil(N / R), 1, 1) of T threads; MG = the rows of A it serves
 *   acc_m = 0                                    f32 fragments [R, W], m < MG
 *   for c in 0 .. ceil(K / W):                   K in chunks of W columns
 *       for (i, j) in tl_parallel(R, W):         b = B[bx R + i, c W + j]
 *           acc_m[i, j] += b * A[m, c W + j]     (each b loaded once, for all m)
 *   s_m = tl_reduce_sum(acc_m, 1)                [R]
 *   C[m, bx R + i] = act(s_m[i] + bias[bx R + i])
 *
 * A tensor-core tile of at least 64 rows would be M / 64 empty here, and
 * what bounds the kernel is reading B (2 N K bytes) at the device's
 * bandwidth: each thread keeps its runs of 16 bytes of B in flight, and
 * several blocks an SM hide the latency. Reads past B's or A's edge give
 * 0 (tl_load), and stores past C's are dropped, so any M <= MG, N and K
 * take the same program. The f32 sums associate like a tree over each
 * thread's columns, then the reduction's shuffles.
 */
#include "ops.h"

#include "internal.h"
#include "tune.h"

tl_status tli_gemv_build(tl_ctx *ctx, const tl_gemm_desc *d, const tl_gemm_schedule *s, tl_kernel **out)
{
    char name[64];
    tli_fmt(name, sizeof name, "gemv_%s_%s_m%d", tl_dtype_name(d->in_dtype), tl_dtype_name(d->out_dtype), s->block_m);
    tl_kernel *k = tl_kernel_new(ctx, name);
    if (!k)
        return TL_ERR_OUT_OF_MEMORY;
    /* the plain GEMM's parameters, in its order: the same launch */
    tl_expr M = tl_dim(k, "M"), N = tl_dim(k, "N"), K = tl_dim(k, "K");
    tl_buf A = tl_param_tensor(k, "A", d->in_dtype, 2, (tl_expr[]){M, K}, NULL);
    tl_buf B = tl_param_tensor(k, "B", d->in_dtype, 2, (tl_expr[]){N, K}, NULL);
    tl_buf bias = d->has_bias ? tl_param_tensor(k, "bias", tli_gemm_bias_dtype(d), 1, &N, NULL) : TL_NONE_BUF;
    tl_buf C = tl_param_tensor(k, "C", d->out_dtype, 2, (tl_expr[]){M, N}, NULL);
    int64_t R = s->block_n, W = s->block_k;
    int mg = s->block_m;
    tl_grid(k, tl_ceildiv(k, N, tl_int(k, R)), TL_NONE_EXPR, TL_NONE_EXPR, s->threads);
    tl_use_fast_math(k, 1); /* the epilogue's activations, as the tensor-core kernels' */
    tl_expr row0 = tl_mul(k, tl_block_idx(k, 0), tl_int(k, R));
    tl_buf acc[8], sum[8];
    for (int m = 0; m < mg; m++) {
        acc[m] = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){R, W});
        sum[m] = tl_alloc_fragment(k, TL_F32, 1, &R);
        tl_clear(k, acc[m]);
    }
    tl_expr c = tl_serial(k, tl_ceildiv(k, K, tl_int(k, W)));
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){R, W}, v);
    tl_expr col = tl_add(k, tl_mul(k, c, tl_int(k, W)), v[1]);
    tl_expr b = tl_cast(k, tl_load(k, B, (tl_expr[]){tl_add(k, row0, v[0]), col}), TL_F32);
    for (int m = 0; m < mg; m++) {
        tl_expr a = tl_cast(k, tl_load(k, A, (tl_expr[]){tl_int(k, m), col}), TL_F32);
        tl_store(k, acc[m], v, tl_add(k, tl_load(k, acc[m], v), tl_mul(k, b, a)));
    }
    tl_end(k);
    tl_end(k);
    for (int m = 0; m < mg; m++)
        tl_reduce_sum(k, acc[m], sum[m], 1, 1);
    tl_expr i = tl_parallel1(k, R);
    tl_expr n = tl_add(k, row0, i);
    tl_expr bv = d->has_bias ? tl_cast(k, tl_load(k, bias, &n), TL_F32) : TL_NONE_EXPR;
    for (int m = 0; m < mg; m++) {
        tl_expr x = tl_load(k, sum[m], &i);
        if (d->has_bias)
            x = tl_add(k, x, bv);
        tl_store(k, C, (tl_expr[]){tl_int(k, m), n}, tl_cast(k, tli_gemm_activation(k, x, d->epilogue), d->out_dtype));
    }
    tl_end(k);
    return tli_op_kernel_done(ctx, NULL, k, out);
}
