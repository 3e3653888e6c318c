/*
 * gemv.c - the GEMM of decode (M up to 8, B as [N, K]) as a matrix-vector
 * kernel on the CUDA cores, written with the public builder: every row of
 * B is read once, in 16-byte vectors, and dotted with the M rows of A.
 *
 *   grid (ceil(N / R), 1, 1) of T threads; MG = the rows of A it serves
 *   acc_m = 0                                    f32 reducers [R], m < MG
 *   for c in 0 .. ceil(K / W):                   K in chunks of W columns
 *       for (i, j) in tl_parallel(R, W):         b = B[bx R + i, c W + j]
 *           p_m[i, j] = b * A[m, c W + j]        (each b loaded once, for all m)
 *       acc_m += tl_reduce_sum(p_m, 1)           each thread its own part
 *   tl_finalize_reducer(acc_m)                   the parts summed, once
 *   C[m, bx R + i] = act(acc_m[i] + bias[bx R + i])
 *
 * A tensor-core tile of at least 64 rows would be M / 64 empty here, and
 * what bounds the kernel is reading B (2 N K bytes) at the device's
 * bandwidth: each thread keeps its runs of 16 bytes of B in flight, and
 * several blocks an SM hide the latency. Reads past B's or A's edge give
 * 0 (tl_load), and stores past C's are dropped, so any M <= MG, N and K
 * take the same program. The f32 sums associate like a tree over each
 * thread's columns of a chunk, chunk after chunk, then the finalize's
 * shuffles.
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
    /* Each row of B is read by one block, once: its lines go first when the
     * L2 needs room, so streaming B neither evicts (and writes back) the
     * dirty lines the L2 holds nor displaces A. H200, 1x4096x4096 under
     * ncu: 9.5 MB written back during the kernel without, 1.4 MB with;
     * bench/NOTES.md session 34. */
    tl_use_cache_policy(k, B, TL_CACHE_EVICT_FIRST);
    tl_expr row0 = tl_mul(k, tl_block_idx(k, 0), tl_int(k, R));
    /* acc_m is a reducer: each thread adds its products of a chunk into its
     * own part, and the parts meet once, after the loop. A plain [R, W]
     * accumulator kept W / T f32 registers a thread live across the loop
     * (77 registers at W 2048, T 64: 12 blocks an SM, 1x4096x4096 in 2.6
     * waves); the products of a chunk die as they are summed. */
    tl_buf prod[8], acc[8];
    for (int m = 0; m < mg; m++) {
        prod[m] = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){R, W});
        acc[m] = tl_alloc_reducer(k, TL_F32, 1, &R);
        tl_clear(k, acc[m]);
    }
    tl_expr c = tl_serial(k, tl_ceildiv(k, K, tl_int(k, W)));
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){R, W}, v);
    tl_expr col = tl_add(k, tl_mul(k, c, tl_int(k, W)), v[1]);
    tl_expr b = tl_cast(k, tl_load(k, B, (tl_expr[]){tl_add(k, row0, v[0]), col}), TL_F32);
    for (int m = 0; m < mg; m++) {
        tl_expr a = tl_cast(k, tl_load(k, A, (tl_expr[]){tl_int(k, m), col}), TL_F32);
        tl_store(k, prod[m], v, tl_mul(k, b, a));
    }
    tl_end(k);
    for (int m = 0; m < mg; m++)
        tl_reduce_sum(k, prod[m], acc[m], 1, 0);
    tl_end(k);
    for (int m = 0; m < mg; m++)
        tl_finalize_reducer(k, acc[m]);
    tl_expr i = tl_parallel1(k, R);
    tl_expr n = tl_add(k, row0, i);
    tl_expr bv = d->has_bias ? tl_cast(k, tl_load(k, bias, &n), TL_F32) : TL_NONE_EXPR;
    for (int m = 0; m < mg; m++) {
        tl_expr x = tl_load(k, acc[m], &i);
        if (d->has_bias)
            x = tl_add(k, x, bv);
        tl_store(k, C, (tl_expr[]){tl_int(k, m), n}, tl_cast(k, tli_gemm_activation(k, x, d->epilogue), d->out_dtype));
    }
    tl_end(k);
    return tli_op_kernel_done(ctx, NULL, k, out);
}
