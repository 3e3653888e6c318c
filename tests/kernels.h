/* kernels.h - a small zoo of builder kernels that exercise every part of the
 * builder (2-D parallel loops, strides, scalars, serial loops, if/else,
 * select, casts, integer arithmetic, math, masked edges), each with an
 * independent CPU reference written directly in C. Used by the interpreter
 * tests (CPU tier), the NVRTC tests, and the GPU tests. */
#ifndef TILEC_TEST_KERNELS_H
#define TILEC_TEST_KERNELS_H

#include <math.h>

#include "tilec.h"

/* Y[i, j] = bf16(alpha * X[i, j] + exp(0.5 * X[i, j]) - tanh(X[i, j]))
 * X is [M, N] with row stride ldx (a dim); Y is [M, N] bf16, contiguous.
 * Launch arguments: M, N, ldx, alpha, X, Y. */
static inline tl_kernel *zoo_axpby_2d(tl_ctx *kctx)
{
    tl_kernel *k = tl_kernel_new(kctx, "axpby_2d");
    tl_expr M = tl_dim(k, "M"), N = tl_dim(k, "N"), ldx = tl_dim(k, "ldx");
    tl_expr alpha = tl_param_scalar(k, "alpha", TL_F32);
    tl_buf X = tl_param_tensor(k, "X", TL_F32, 2, (tl_expr[]){M, N}, (tl_expr[]){ldx, tl_int(k, 1)});
    tl_buf Y = tl_param_tensor(k, "Y", TL_BF16, 2, (tl_expr[]){M, N}, NULL);
    tl_grid(k, tl_ceildiv(k, N, tl_int(k, 64)), tl_ceildiv(k, M, tl_int(k, 4)), TL_NONE_EXPR, 128);
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){4, 64}, v);
    tl_expr i = tl_add(k, tl_mul(k, tl_block_idx(k, 1), tl_int(k, 4)), v[0]);
    tl_expr j = tl_add(k, tl_mul(k, tl_block_idx(k, 0), tl_int(k, 64)), v[1]);
    tl_expr x = tl_load(k, X, (tl_expr[]){i, j});
    tl_expr y = tl_sub(k, tl_add(k, tl_mul(k, alpha, x), tl_exp(k, tl_mul(k, tl_f32(k, 0.5f), x))), tl_tanh(k, x));
    tl_store(k, Y, (tl_expr[]){i, j}, tl_cast(k, y, TL_BF16));
    tl_end(k);
    return k;
}

static inline void zoo_axpby_2d_ref(int64_t M, int64_t N, int64_t ldx, float alpha, const float *X, double *Y)
{
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double x = X[i * ldx + j];
            Y[i * N + j] = alpha * x + exp(0.5 * x) - tanh(x);
        }
}

/* S[r] = sum_j X[r, j], a serial loop by one thread per row block:
 * exercises block-level stores (thread 0) and the barrier after them.
 * Launch arguments: M, N, X, S. */
static inline tl_kernel *zoo_rowsum(tl_ctx *kctx)
{
    tl_kernel *k = tl_kernel_new(kctx, "rowsum");
    tl_expr M = tl_dim(k, "M"), N = tl_dim(k, "N");
    tl_buf X = tl_param_tensor(k, "X", TL_F32, 2, (tl_expr[]){M, N}, NULL);
    tl_buf S = tl_param_tensor(k, "S", TL_F32, 1, &M, NULL);
    tl_grid(k, M, TL_NONE_EXPR, TL_NONE_EXPR, 32);
    tl_expr r = tl_block_idx(k, 0);
    tl_store(k, S, &r, tl_f32(k, 0));
    tl_expr j = tl_serial(k, N);
    tl_store(k, S, &r, tl_add(k, tl_load(k, S, &r), tl_load(k, X, (tl_expr[]){r, j})));
    tl_end(k);
    return k;
}

static inline void zoo_rowsum_ref(int64_t M, int64_t N, const float *X, double *S)
{
    for (int64_t r = 0; r < M; r++) {
        double s = 0;
        for (int64_t j = 0; j < N; j++)
            s += X[r * N + j];
        S[r] = s;
    }
}

/* Control flow and conversions, one element per iteration:
 *   F[i] = i % 3 == 0 ? erf(x) : (x > 0 ? sqrt(x) : -rsqrt(1 + |x|)) (as if/else)
 *   G[i] = f16(max(log(1 + x*x), exp2(min(x, 1))))
 *   I[i] = i32(x * 100) / 7 + i % 5
 * with x = H[i] (f16 input). Launch arguments: N, H, F, G, I. */
static inline tl_kernel *zoo_mixed(tl_ctx *kctx)
{
    tl_kernel *k = tl_kernel_new(kctx, "mixed");
    tl_expr N = tl_dim(k, "N");
    tl_buf H = tl_param_tensor(k, "H", TL_F16, 1, &N, NULL);
    tl_buf F = tl_param_tensor(k, "F", TL_F32, 1, &N, NULL);
    tl_buf G = tl_param_tensor(k, "G", TL_F16, 1, &N, NULL);
    tl_buf I = tl_param_tensor(k, "I", TL_I32, 1, &N, NULL);
    tl_grid(k, tl_ceildiv(k, N, tl_int(k, 512)), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_expr p = tl_parallel1(k, 512);
    tl_expr i = tl_add(k, tl_mul(k, tl_block_idx(k, 0), tl_int(k, 512)), p);
    tl_expr x = tl_cast(k, tl_load(k, H, &i), TL_F32);
    tl_if(k, tl_eq(k, tl_mod(k, i, tl_int(k, 3)), tl_int(k, 0)));
    tl_store(k, F, &i, tl_erf(k, x));
    tl_else(k);
    tl_expr neg = tl_neg(k, tl_rsqrt(k, tl_add(k, tl_f32(k, 1), tl_abs(k, x))));
    tl_store(k, F, &i, tl_select(k, tl_gt(k, x, tl_f32(k, 0)), tl_sqrt(k, x), neg));
    tl_end(k);
    tl_expr g = tl_max(k, tl_log(k, tl_add(k, tl_f32(k, 1), tl_mul(k, x, x))), tl_exp2(k, tl_min(k, x, tl_f32(k, 1))));
    tl_store(k, G, &i, tl_cast(k, g, TL_F16));
    tl_expr q = tl_div(k, tl_cast(k, tl_mul(k, x, tl_f32(k, 100)), TL_I32), tl_i32(k, 7));
    tl_store(k, I, &i, tl_add(k, q, tl_cast(k, tl_mod(k, i, tl_int(k, 5)), TL_I32)));
    tl_end(k);
    return k;
}

static inline void zoo_mixed_ref(int64_t n, const float *x, double *F, double *G, int32_t *I)
{
    for (int64_t i = 0; i < n; i++) {
        double v = x[i];
        F[i] = i % 3 == 0 ? erf(v) : (v > 0 ? sqrt(v) : -1.0 / sqrt(1 + fabs(v)));
        double a = log(1 + v * v), b = exp2(fmin(v, 1));
        G[i] = a > b ? a : b;
        I[i] = (int32_t)(float)(v * 100) / 7 + (int32_t)(i % 5);
    }
}

/* Conversions to narrow floats at their ties: with s = +1 for even i, -1
 * for odd, and j = i % 127, m = i % 8,
 *   B[i] = bf16(s * (2^24 + 2^16 + 1 + j * 2^17))             (from i64)
 *   D[i] = bf16(f64(s * (2^24 + 2^16 + 1 + j * 2^17)) * 2^-24) (from f64)
 *   E[i] = f8e4m3(f64(s * (2^40 + 2^36 + 1 + m * 2^37)) * 2^-40)
 * Each value lies just past the midpoint of two neighbours of the narrow
 * type, so it rounds away from zero; through f32 the bit past the midpoint
 * is lost and the tie goes to even, half the time the wrong way. Launch
 * arguments: N, B, D, E. */
static inline tl_kernel *zoo_round_once(tl_ctx *kctx)
{
    tl_kernel *k = tl_kernel_new(kctx, "round_once");
    tl_expr N = tl_dim(k, "N");
    tl_buf B = tl_param_tensor(k, "B", TL_BF16, 1, &N, NULL);
    tl_buf D = tl_param_tensor(k, "D", TL_BF16, 1, &N, NULL);
    tl_buf E = tl_param_tensor(k, "E", TL_F8E4M3, 1, &N, NULL);
    tl_grid(k, tl_ceildiv(k, N, tl_int(k, 256)), TL_NONE_EXPR, TL_NONE_EXPR, 256);
    tl_expr i = tl_add(k, tl_mul(k, tl_block_idx(k, 0), tl_int(k, 256)), tl_parallel1(k, 256));
    tl_expr s = tl_sub(k, tl_int(k, 1), tl_mul(k, tl_int(k, 2), tl_mod(k, i, tl_int(k, 2))));
    tl_expr v = tl_mul(k, s, tl_add(k, tl_int(k, (1LL << 24) + (1LL << 16) + 1),
                                    tl_mul(k, tl_mod(k, i, tl_int(k, 127)), tl_int(k, 1LL << 17))));
    tl_expr w = tl_mul(k, s, tl_add(k, tl_int(k, (1LL << 40) + (1LL << 36) + 1),
                                    tl_mul(k, tl_mod(k, i, tl_int(k, 8)), tl_int(k, 1LL << 37))));
    tl_store(k, B, &i, tl_cast(k, v, TL_BF16));
    tl_store(k, D, &i, tl_cast(k, tl_mul(k, tl_cast(k, v, TL_F64), tl_float(k, 0x1p-24, TL_F64)), TL_BF16));
    tl_store(k, E, &i, tl_cast(k, tl_mul(k, tl_cast(k, w, TL_F64), tl_float(k, 0x1p-40, TL_F64)), TL_F8E4M3));
    tl_end(k);
    return k;
}

/* D[i] = A[i + 1] - A[i]: the last element reads past the end, which the
 * masking turns into 0; the shifted access cannot move whole aligned chunks.
 * Launch arguments: N, A, D. */
static inline tl_kernel *zoo_shift(tl_ctx *kctx, tl_dtype dt)
{
    tl_kernel *k = tl_kernel_new(kctx, "shift");
    tl_expr N = tl_dim(k, "N");
    tl_buf A = tl_param_tensor(k, "A", dt, 1, &N, NULL);
    tl_buf D = tl_param_tensor(k, "D", dt, 1, &N, NULL);
    tl_grid(k, tl_ceildiv(k, N, tl_int(k, 1024)), TL_NONE_EXPR, TL_NONE_EXPR, 256);
    tl_expr p = tl_parallel1(k, 1024);
    tl_expr i = tl_add(k, tl_mul(k, tl_block_idx(k, 0), tl_int(k, 1024)), p);
    tl_expr next = tl_add(k, i, tl_int(k, 1));
    tl_store(k, D, &i, tl_sub(k, tl_load(k, A, &next), tl_load(k, A, &i)));
    tl_end(k);
    return k;
}

/* Iterated smoothing of one 256-element row per block, in place:
 *   repeat R times: Y[i] = 0.5 * X[(i + 1) % 256] + X[i];  X[i] = Y[i]
 * Each iteration reads neighbours the previous one wrote through other
 * threads: the block barriers between the loops and at the end of the
 * serial body are what make it right. Launch arguments: R, B, X, Y with X,
 * Y of [B, 256]. */
static inline tl_kernel *zoo_smooth(tl_ctx *kctx)
{
    tl_kernel *k = tl_kernel_new(kctx, "smooth");
    tl_expr R = tl_dim(k, "R"), B = tl_dim(k, "B");
    tl_expr shape[2] = {B, tl_int(k, 256)};
    tl_buf X = tl_param_tensor(k, "X", TL_F32, 2, shape, NULL);
    tl_buf Y = tl_param_tensor(k, "Y", TL_F32, 2, shape, NULL);
    tl_grid(k, B, TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_expr b = tl_block_idx(k, 0);
    tl_serial(k, R);
    tl_expr i = tl_parallel1(k, 256);
    tl_expr nb = tl_mod(k, tl_add(k, i, tl_int(k, 1)), tl_int(k, 256));
    tl_expr v = tl_add(k, tl_mul(k, tl_f32(k, 0.5f), tl_load(k, X, (tl_expr[]){b, nb})), tl_load(k, X, (tl_expr[]){b, i}));
    tl_store(k, Y, (tl_expr[]){b, i}, v);
    tl_end(k);
    tl_expr j = tl_parallel1(k, 256);
    tl_store(k, X, (tl_expr[]){b, j}, tl_load(k, Y, (tl_expr[]){b, j}));
    tl_end(k);
    tl_end(k);
    return k;
}

/* The approximate math of tl_use_fast_math, on f32 x = X[i]:
 *   Y[i] = tanh(x) + erf(x) + exp(x) / (1 + exp2(x)) + log(1 + x * x)
 * Launch arguments: N, X, Y. */
static inline tl_kernel *zoo_fastmath(tl_ctx *kctx)
{
    tl_kernel *k = tl_kernel_new(kctx, "fastmath");
    tl_expr N = tl_dim(k, "N");
    tl_buf X = tl_param_tensor(k, "X", TL_F32, 1, &N, NULL);
    tl_buf Y = tl_param_tensor(k, "Y", TL_F32, 1, &N, NULL);
    tl_grid(k, tl_ceildiv(k, N, tl_int(k, 256)), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_use_fast_math(k, 1);
    tl_expr p = tl_parallel1(k, 256);
    tl_expr i = tl_add(k, tl_mul(k, tl_block_idx(k, 0), tl_int(k, 256)), p);
    tl_expr x = tl_load(k, X, &i);
    tl_expr one = tl_f32(k, 1.0f);
    tl_expr y = tl_add(k, tl_tanh(k, x), tl_erf(k, x));
    y = tl_add(k, y, tl_div(k, tl_exp(k, x), tl_add(k, one, tl_exp2(k, x))));
    y = tl_add(k, y, tl_log(k, tl_add(k, one, tl_mul(k, x, x))));
    tl_store(k, Y, &i, y);
    tl_end(k);
    return k;
}

static inline void zoo_fastmath_ref(int64_t n, const float *x, double *y)
{
    for (int64_t i = 0; i < n; i++) {
        double v = x[i];
        y[i] = tanh(v) + erf(v) + exp(v) / (1 + exp2(v)) + log(1 + v * v);
    }
}

/* A tile copy whose wait is deferred past a statement that does not touch
 * its buffer, then read at a neighbour's index (another thread's copy):
 *   S = X[64 b : 64 b + 64] (0 past N);  Y[64 b + i] = 1;
 *   Y[64 b + i] += 2 S[(i + 1) % 64]
 * Launch arguments: N, X, Y. */
static inline tl_kernel *zoo_staged(tl_ctx *kctx)
{
    tl_kernel *k = tl_kernel_new(kctx, "staged");
    tl_expr N = tl_dim(k, "N");
    tl_buf X = tl_param_tensor(k, "X", TL_F32, 1, &N, NULL);
    tl_buf Y = tl_param_tensor(k, "Y", TL_F32, 1, &N, NULL);
    tl_grid(k, tl_ceildiv(k, N, tl_int(k, 64)), TL_NONE_EXPR, TL_NONE_EXPR, 64);
    tl_expr b = tl_block_idx(k, 0);
    tl_buf S = tl_alloc_shared(k, TL_F32, 1, (int64_t[]){64});
    tl_copy(k, tl_tile(k, X, b), tl_all(S));
    tl_expr i = tl_parallel1(k, 64);
    tl_expr g = tl_add(k, tl_mul(k, b, tl_int(k, 64)), i);
    tl_store(k, Y, &g, tl_f32(k, 1.0f));
    tl_end(k);
    tl_expr j = tl_parallel1(k, 64);
    tl_expr h = tl_add(k, tl_mul(k, b, tl_int(k, 64)), j);
    tl_expr nb = tl_mod(k, tl_add(k, j, tl_int(k, 1)), tl_int(k, 64));
    tl_store(k, Y, &h, tl_add(k, tl_load(k, Y, &h), tl_mul(k, tl_f32(k, 2.0f), tl_load(k, S, &nb))));
    tl_end(k);
    return k;
}

static inline void zoo_staged_ref(int64_t n, const float *x, double *y)
{
    for (int64_t g = 0; g < n; g++) {
        int64_t src = g / 64 * 64 + (g % 64 + 1) % 64;
        y[g] = 1.0 + 2.0 * (src < n ? (double)x[src] : 0.0);
    }
}

/* A tensor-core gemm whose operand tiles the block's threads write with
 * plain stores (tl_parallel into shared memory, no copy engine): on sm_90a
 * wgmma reads them through the async proxy, which sees those stores only
 * after a proxy fence, then the barrier. C = A W^T for A [N, 64] (bf16, N
 * a multiple of 64) and W[n, k] = ((n + 3k) mod 7 - 3) / 4, exact in bf16.
 * Launch arguments: N, A, C (f32 [N, 64]). */
static inline tl_kernel *zoo_written_operand(tl_ctx *kctx)
{
    tl_kernel *k = tl_kernel_new(kctx, "written_operand");
    tl_expr N = tl_dim(k, "N"), n64 = tl_int(k, 64), z = tl_int(k, 0);
    tl_buf A = tl_param_tensor(k, "A", TL_BF16, 2, (tl_expr[]){N, n64}, NULL);
    tl_buf C = tl_param_tensor(k, "C", TL_F32, 2, (tl_expr[]){N, n64}, NULL);
    tl_grid(k, tl_ceildiv(k, N, n64), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_buf As = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){64, 64});
    tl_buf Ws = tl_alloc_shared(k, TL_BF16, 2, (int64_t[]){64, 64});
    tl_buf Cf = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){64, 64});
    tl_name(k, As, "As");
    tl_name(k, Ws, "Ws");
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){64, 64}, v);
    tl_store(k, As, v, tl_load(k, A, (tl_expr[]){tl_add(k, tl_mul(k, tl_block_idx(k, 0), n64), v[0]), v[1]}));
    tl_expr w = tl_sub(k, tl_mod(k, tl_add(k, v[0], tl_mul(k, v[1], tl_int(k, 3))), tl_int(k, 7)), tl_int(k, 3));
    tl_store(k, Ws, v, tl_cast(k, tl_mul(k, tl_cast(k, w, TL_F32), tl_f32(k, 0.25f)), TL_BF16));
    tl_end(k);
    tl_clear(k, Cf);
    tl_gemm(k, As, Ws, Cf, TL_GEMM_TRANS_B);
    tl_copy(k, tl_all(Cf), tl_tile(k, C, tl_block_idx(k, 0), z));
    return k;
}

/* Tensors of both types, shared tiles and a fragment of them, copies from
 * them (to f32 and to their own type), casts both ways, constants and
 * arithmetic (through f32): the interpreter computes what the definition
 * says, and NVRTC takes the source for sm_80 and sm_90a (test_fp8); its
 * reproducer replays it (test_repro). Launch arguments: N, X, Y. */
static inline tl_kernel *zoo_fp8(tl_ctx *kctx)
{
    tl_kernel *k = tl_kernel_new(kctx, "fp8");
    tl_expr N = tl_dim(k, "N");
    tl_buf X = tl_param_tensor(k, "X", TL_F8E4M3, 2, (tl_expr[]){N, tl_int(k, 64)}, NULL);
    tl_buf Y = tl_param_tensor(k, "Y", TL_F8E5M2, 2, (tl_expr[]){N, tl_int(k, 64)}, NULL);
    tl_grid(k, tl_ceildiv(k, N, tl_int(k, 32)), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_buf Xs = tl_alloc_shared(k, TL_F8E4M3, 2, (int64_t[]){32, 64});
    tl_buf Ys = tl_alloc_shared(k, TL_F8E5M2, 2, (int64_t[]){32, 64});
    tl_buf acc = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){32, 64});
    tl_buf xf = tl_alloc_fragment(k, TL_F8E4M3, 2, (int64_t[]){32, 64});
    tl_copy(k, tl_tile(k, X, tl_block_idx(k, 0), tl_int(k, 0)), tl_all(Xs));
    tl_copy(k, tl_all(Xs), tl_all(acc));
    tl_copy(k, tl_all(Xs), tl_all(xf));
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){32, 64}, v);
    /* y = x * 1.5 - 2^-9 in e4m3 (each step rounded to it), then to e5m2 */
    tl_expr x = tl_add(k, tl_load(k, xf, v), tl_cast(k, tl_mul(k, tl_load(k, acc, v), tl_f32(k, 0)), TL_F8E4M3));
    tl_expr y = tl_add(k, tl_mul(k, x, tl_float(k, 1.5, TL_F8E4M3)), tl_float(k, -0x1p-9, TL_F8E4M3));
    tl_store(k, Ys, v, tl_cast(k, y, TL_F8E5M2));
    tl_end(k);
    tl_copy(k, tl_all(Ys), tl_tile(k, Y, tl_block_idx(k, 0), tl_int(k, 0)));
    return k;
}

/* A running row sum carried tile after tile, as FlashAttention's
 * denominator is: l[r] = l[r] Alpha[t, r] + sum_j X[t, r, j] for t = 0..T-1
 * from l = 0, then Out[r] = l[r]. With `reducer`, rowsum and l are
 * reducers (each thread keeps its part of a row until the finalize after
 * the loop); without, plain fragments. R x C rows of `threads`: 4 x 256 on
 * 128 threads has a row's holders within a warp (shuffles only), 2 x 4096
 * on 256 spreads a row over warps (the exchange through shared memory).
 * Launch arguments: T, X [T, R, C], Alpha [T, R], Out [R] (f32). */
static inline tl_kernel *zoo_running_sum(tl_ctx *kctx, bool reducer, int64_t R, int64_t C, int threads)
{
    tl_kernel *k = tl_kernel_new(kctx, reducer ? "running_sum_reducer" : "running_sum");
    tl_expr T = tl_dim(k, "T"), zero = tl_int(k, 0);
    tl_buf X = tl_param_tensor(k, "X", TL_F32, 3, (tl_expr[]){T, tl_int(k, R), tl_int(k, C)}, NULL);
    tl_buf Alpha = tl_param_tensor(k, "Alpha", TL_F32, 2, (tl_expr[]){T, tl_int(k, R)}, NULL);
    tl_buf Out = tl_param_tensor(k, "Out", TL_F32, 1, (tl_expr[]){tl_int(k, R)}, NULL);
    tl_grid(k, tl_int(k, 1), TL_NONE_EXPR, TL_NONE_EXPR, threads);
    tl_buf F = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){R, C});
    tl_buf a = tl_alloc_fragment(k, TL_F32, 1, &R);
    tl_buf rs = reducer ? tl_alloc_reducer(k, TL_F32, 1, &R) : tl_alloc_fragment(k, TL_F32, 1, &R);
    tl_buf l = reducer ? tl_alloc_reducer(k, TL_F32, 1, &R) : tl_alloc_fragment(k, TL_F32, 1, &R);
    tl_clear(k, l);
    tl_expr t = tl_serial(k, T);
    tl_copy(k, tl_tile(k, X, t, zero, zero), tl_all(F));
    tl_expr i = tl_parallel1(k, R);
    tl_store(k, a, &i, tl_load(k, Alpha, (tl_expr[]){t, i}));
    tl_end(k);
    tl_reduce_sum(k, F, rs, 1, 1);
    i = tl_parallel1(k, R);
    tl_store(k, l, &i, tl_add(k, tl_mul(k, tl_load(k, l, &i), tl_load(k, a, &i)), tl_load(k, rs, &i)));
    tl_end(k);
    tl_end(k);
    if (reducer)
        tl_finalize_reducer(k, l);
    i = tl_parallel1(k, R);
    tl_store(k, Out, &i, tl_load(k, l, &i));
    tl_end(k);
    return k;
}

static inline void zoo_running_sum_ref(int64_t T, int64_t R, int64_t C, const float *X, const float *Alpha, double *Out)
{
    for (int64_t r = 0; r < R; r++) {
        double l = 0;
        for (int64_t t = 0; t < T; t++) {
            double s = 0;
            for (int64_t j = 0; j < C; j++)
                s += X[(t * R + r) * C + j];
            l = l * Alpha[t * R + r] + s;
        }
        Out[r] = l;
    }
}

#endif
