/*
 * dual_gemm.h - a gated MLP's first layer as one kernel, written with the
 * public builder: two GEMMs of the same A in one pipelined loop, then the
 * gate in registers before the single store,
 *
 *   H = silu(A Wg^T) * (A Wu^T),   A [M, K], Wg and Wu [N, K], H [M, N],
 *
 * silu(x) = x / (1 + e^-x). The loop body is three copies and two tl_gemm;
 * nothing in the library knows this shape: tl_use_warp_specialize asks the
 * lowering for a producer warpgroup that feeds all three tiles to the two
 * gemms (TMA on sm_90a), as it would for any other body. Used by
 * examples/dual_gemm.c, the tests and bench/bench_dual_gemm.c.
 */
#ifndef TILEC_EXAMPLE_DUAL_GEMM_H
#define TILEC_EXAMPLE_DUAL_GEMM_H

#include "tilec.h"

#include <math.h>

typedef struct dual_gemm_schedule {
    int block_m, block_n, block_k, stages, threads;
    int warp_specialize;
    int pingpong; /* tl_use_pingpong: with 128 threads a persistent kernel
                     whose two consumer warpgroups overlap one block's gate
                     and store with the other's main loop */
    int a_regs;   /* 1: the A tile is copied to a register fragment once a
                     K step and both gemms read it there (shared memory
                     then serves only the two weight tiles) */
    int persistent; /* tl_use_persistent: min(blocks, SMs) CTAs, the
                       producer loading the next block's tiles while the
                       consumers gate and store this one's */
} dual_gemm_schedule;

/* 128 x 128 blocks (two consumer warpgroups of 64 rows, each with two
 * 64 x 128 accumulators), 64-wide K tiles, 4 stages: 48 KiB a stage; in
 * persistent CTAs, so that the producer loads the next block's tiles while
 * the consumers gate this one's, and H goes out through shared memory by
 * TMA while the next block's main loop runs (1.055-1.063x the unfused
 * cuBLAS pair plus silu_mul on the H200, against 0.98-0.99x one CTA a
 * block). */
static const dual_gemm_schedule dual_gemm_default = {128, 128, 64, 4, 256, 1, 0, 0, 1};

/* Other schedules the benchmark (--variants) and the GPU tests run beside
 * the default: A read from registers (the default's blocks, 3 and 4
 * stages), the persistent ping-pong kernel, each consumer warpgroup
 * holding its own block (two accumulators of 64 x 128, or of 128 x 64; 4
 * or 5 stages), the default's blocks with its two warpgroups taking
 * turns at the gemm, the default's blocks one CTA a block (the default
 * before session 9), and A from registers in persistent CTAs. */
static const dual_gemm_schedule dual_gemm_variants[] = {
    {128, 128, 64, 4, 256, 1, 0, 1, 0}, {128, 128, 64, 3, 256, 1, 0, 1, 0}, {64, 128, 64, 4, 128, 1, 1, 0, 0},
    {128, 64, 64, 4, 128, 1, 1, 0, 0},  {128, 128, 64, 3, 256, 1, 0, 0, 0}, {64, 128, 64, 5, 128, 1, 1, 0, 0},
    {128, 128, 64, 4, 256, 1, 1, 0, 0},
    {128, 128, 64, 4, 256, 1, 0, 0, 0}, {128, 128, 64, 3, 256, 1, 0, 1, 1},
};

/* The kernel; launch arguments M, N, K, A, Wg, Wu, H. NULL on a failure
 * (its reason on c). */
static inline tl_kernel *dual_gemm_build(tl_ctx *c, tl_dtype dt, const dual_gemm_schedule *s)
{
    tl_kernel *k = tl_kernel_new(c, "dual_gemm");
    tl_expr M = tl_dim(k, "M"), N = tl_dim(k, "N"), K = tl_dim(k, "K");
    tl_buf A = tl_param_tensor(k, "A", dt, 2, (tl_expr[]){M, K}, NULL);
    tl_buf Wg = tl_param_tensor(k, "Wg", dt, 2, (tl_expr[]){N, K}, NULL);
    tl_buf Wu = tl_param_tensor(k, "Wu", dt, 2, (tl_expr[]){N, K}, NULL);
    tl_buf H = tl_param_tensor(k, "H", dt, 2, (tl_expr[]){M, N}, NULL);
    tl_grid(k, tl_ceildiv(k, N, tl_int(k, s->block_n)), tl_ceildiv(k, M, tl_int(k, s->block_m)), TL_NONE_EXPR,
            s->threads);
    tl_use_swizzle(k, 8);
    tl_use_fast_math(k, 1);
    tl_use_warp_specialize(k, s->warp_specialize);
    if (s->pingpong)
        tl_use_pingpong(k, s->pingpong);
    tl_use_persistent(k, s->persistent);
    tl_expr bx = tl_block_idx(k, 0), by = tl_block_idx(k, 1);
    tl_buf As = tl_alloc_shared(k, dt, 2, (int64_t[]){s->block_m, s->block_k});
    tl_buf Gs = tl_alloc_shared(k, dt, 2, (int64_t[]){s->block_n, s->block_k});
    tl_buf Us = tl_alloc_shared(k, dt, 2, (int64_t[]){s->block_n, s->block_k});
    tl_buf gate = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){s->block_m, s->block_n});
    tl_buf up = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){s->block_m, s->block_n});
    tl_name(k, As, "As");
    tl_name(k, Gs, "Wg_s");
    tl_name(k, Us, "Wu_s");
    tl_name(k, gate, "gate");
    tl_name(k, up, "up");
    tl_clear(k, gate);
    tl_clear(k, up);
    tl_expr ko = tl_pipelined(k, tl_ceildiv(k, K, tl_int(k, s->block_k)), s->stages);
    tl_copy(k, tl_tile(k, A, by, ko), tl_all(As));
    tl_copy(k, tl_tile(k, Wg, bx, ko), tl_all(Gs));
    tl_copy(k, tl_tile(k, Wu, bx, ko), tl_all(Us));
    if (s->a_regs) {
        tl_buf Af = tl_alloc_fragment(k, dt, 2, (int64_t[]){s->block_m, s->block_k});
        tl_name(k, Af, "A_regs");
        tl_copy(k, tl_all(As), tl_all(Af));
        tl_gemm(k, Af, Gs, gate, TL_GEMM_TRANS_B);
        tl_gemm(k, Af, Us, up, TL_GEMM_TRANS_B);
    } else {
        tl_gemm(k, As, Gs, gate, TL_GEMM_TRANS_B);
        tl_gemm(k, As, Us, up, TL_GEMM_TRANS_B);
    }
    tl_end(k);
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){s->block_m, s->block_n}, v);
    tl_expr g = tl_load(k, gate, v);
    tl_expr silu = tl_div(k, g, tl_add(k, tl_f32(k, 1.0f), tl_exp(k, tl_neg(k, g))));
    tl_store(k, gate, v, tl_mul(k, silu, tl_load(k, up, v)));
    tl_end(k);
    tl_copy(k, tl_all(gate), tl_tile(k, H, by, bx));
    if (tl_kernel_status(k) != TL_OK) {
        tl_kernel_destroy(k);
        return NULL;
    }
    return k;
}

/* The unfused epilogue the fused kernel is measured against: H = silu(G) *
 * U element-wise, G and U [M, N] (the outputs of two plain GEMMs).
 * Launch arguments M, N, G, U, H. */
static inline tl_kernel *dual_gemm_gate_build(tl_ctx *c, tl_dtype dt)
{
    tl_kernel *k = tl_kernel_new(c, "silu_mul");
    tl_expr M = tl_dim(k, "M"), N = tl_dim(k, "N");
    tl_expr shape[2] = {M, N};
    tl_buf G = tl_param_tensor(k, "G", dt, 2, shape, NULL);
    tl_buf U = tl_param_tensor(k, "U", dt, 2, shape, NULL);
    tl_buf H = tl_param_tensor(k, "H", dt, 2, shape, NULL);
    tl_grid(k, tl_ceildiv(k, N, tl_int(k, 256)), tl_ceildiv(k, M, tl_int(k, 16)), TL_NONE_EXPR, 256);
    tl_use_fast_math(k, 1);
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){16, 256}, v);
    tl_expr i = tl_add(k, tl_mul(k, tl_block_idx(k, 1), tl_int(k, 16)), v[0]);
    tl_expr j = tl_add(k, tl_mul(k, tl_block_idx(k, 0), tl_int(k, 256)), v[1]);
    tl_expr g = tl_cast(k, tl_load(k, G, (tl_expr[]){i, j}), TL_F32);
    tl_expr silu = tl_div(k, g, tl_add(k, tl_f32(k, 1.0f), tl_exp(k, tl_neg(k, g))));
    tl_expr h = tl_mul(k, silu, tl_cast(k, tl_load(k, U, (tl_expr[]){i, j}), TL_F32));
    tl_store(k, H, (tl_expr[]){i, j}, tl_cast(k, h, dt));
    tl_end(k);
    if (tl_kernel_status(k) != TL_OK) {
        tl_kernel_destroy(k);
        return NULL;
    }
    return k;
}

/* silu(g) * u in float64, the reference of both. */
static inline double dual_gemm_gate_ref(double g, double u) { return g / (1.0 + exp(-g)) * u; }

#endif
