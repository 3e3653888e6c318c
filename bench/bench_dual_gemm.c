/*
 * bench_dual_gemm.c - the gated MLP layer H = silu(A Wg^T) * (A Wu^T) as
 * one kernel (examples/dual_gemm.h: two tl_gemm in one warp-specialised,
 * TMA-fed pipelined loop, the gate in registers) against what a framework
 * runs: two cuBLAS GEMMs and an element-wise kernel, bf16, in one run
 * (interleaved). FLOPs: 2 x 2 M N K. Checked against the unfused result.
 * Usage: bench_dual_gemm [MxNxK]   (default 4096x4096x4096, 8192x14336x4096)
 */
#include "bench.h"

#include "../examples/dual_gemm.h"

#include <math.h>
#include <string.h>

typedef struct operands {
    tl_ctx *ctx;
    int64_t m, n, k;
    uint64_t a, wg, wu, g, u, h_fused, h_unfused;
    const tl_program *fused, *gate;
} operands;

typedef struct work {
    operands *o;
    int fused;
} work;

static tl_status run(void *user, void *stream)
{
    work *w = user;
    operands *o = w->o;
    if (w->fused) {
        tl_arg args[] = {tl_arg_int(o->m), tl_arg_int(o->n), tl_arg_int(o->k), tl_arg_dptr(o->a), tl_arg_dptr(o->wg),
                         tl_arg_dptr(o->wu), tl_arg_dptr(o->h_fused)};
        return tl_launch(o->fused, stream, 7, args);
    }
    tl_gemm_desc d = {.m = o->m, .n = o->n, .k = o->k, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = 1};
    tl_status st = tl_baseline_gemm(o->ctx, &d, o->a, o->wg, 0, o->g, stream);
    if (st == TL_OK)
        st = tl_baseline_gemm(o->ctx, &d, o->a, o->wu, 0, o->u, stream);
    tl_arg args[] = {tl_arg_int(o->m), tl_arg_int(o->n), tl_arg_dptr(o->g), tl_arg_dptr(o->u),
                     tl_arg_dptr(o->h_unfused)};
    return st == TL_OK ? tl_launch(o->gate, stream, 5, args) : st;
}

static uint64_t alloc_random(tl_ctx *ctx, int64_t n, uint64_t seed)
{
    uint64_t p;
    BENCH_CHECK(tl_malloc(ctx, (size_t)n * 2, &p));
    BENCH_CHECK(tl_random_fill(ctx, p, TL_BF16, n, seed, -1, 1, NULL));
    return p;
}

static void bench_shape(tl_ctx *ctx, int64_t m, int64_t n, int64_t k, const tl_program *fused, const tl_program *gate)
{
    operands o = {ctx, m, n, k, alloc_random(ctx, m * k, 1), alloc_random(ctx, n * k, 2), alloc_random(ctx, n * k, 3),
                  0, 0, 0, 0, fused, gate};
    uint64_t *outs[] = {&o.g, &o.u, &o.h_fused, &o.h_unfused};
    for (int i = 0; i < 4; i++) {
        BENCH_CHECK(tl_malloc(ctx, (size_t)(m * n) * 2, outs[i]));
        BENCH_CHECK(tl_memset_u8(ctx, *outs[i], 0xFF, (size_t)(m * n) * 2, NULL));
    }
    work wf = {&o, 1}, wu = {&o, 0};
    BENCH_CHECK(run(&wf, NULL));
    BENCH_CHECK(run(&wu, NULL));
    tl_check_result r;
    tl_span out = {TL_BF16, m * n, NULL, o.h_fused}, ref = {TL_BF16, m * n, NULL, o.h_unfused};
    BENCH_CHECK(tl_check(ctx, &out, &ref, 2e-2, &r));
    tl_work_fn fns[] = {run, run};
    void *users[] = {&wu, &wf};
    tl_timing t[2];
    tl_timing_options opt = {.warmup = 5, .reps = 30};
    BENCH_CHECK(tl_time_interleaved(ctx, NULL, 2, fns, users, &opt, t));
    double flop = 4.0 * (double)m * (double)n * (double)k;
    char shape[64];
    snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
    bench_csv("dual_gemm", shape, "bf16", "cublas_x2+silu_mul", t[0].median_ms, flop / t[0].median_ms * 1e-9,
              "TFLOP/s", 1.0, 0);
    bench_csv("dual_gemm", shape, "bf16", "tilec_fused", t[1].median_ms, flop / t[1].median_ms * 1e-9, "TFLOP/s",
              t[0].median_ms / t[1].median_ms, r.rel_err);
    printf("%-18s unfused %8.3f ms %6.0f TFLOP/s | fused %8.3f ms %6.0f TFLOP/s | speedup %.3fx | rel err %.1e%s\n",
           shape, t[0].median_ms, flop / t[0].median_ms * 1e-9, t[1].median_ms, flop / t[1].median_ms * 1e-9,
           t[0].median_ms / t[1].median_ms, r.rel_err, r.pass ? "" : "  CHECK FAILED");
    tl_free(ctx, o.a), tl_free(ctx, o.wg), tl_free(ctx, o.wu);
    for (int i = 0; i < 4; i++)
        tl_free(ctx, *outs[i]);
}

int main(int argc, char **argv)
{
    tl_ctx *ctx = bench_open("bench_dual_gemm");
    tl_kernel *k = dual_gemm_build(ctx, TL_BF16, &dual_gemm_default), *g = dual_gemm_gate_build(ctx, TL_BF16);
    if (!k || !g) {
        fprintf(stderr, "build: %s\n", tl_ctx_error(ctx));
        return 1;
    }
    tl_program *fused, *gate;
    BENCH_CHECK(tl_compile(k, NULL, &fused));
    BENCH_CHECK(tl_compile(g, NULL, &gate));
    long long m, n, kk;
    if (argc > 1 && sscanf(argv[1], "%lldx%lldx%lld", &m, &n, &kk) == 3) {
        bench_shape(ctx, m, n, kk, fused, gate);
    } else {
        bench_shape(ctx, 4096, 4096, 4096, fused, gate);
        bench_shape(ctx, 8192, 14336, 4096, fused, gate);
    }
    tl_program_destroy(fused), tl_program_destroy(gate);
    tl_kernel_destroy(k), tl_kernel_destroy(g);
    tl_ctx_destroy(ctx);
    return 0;
}
