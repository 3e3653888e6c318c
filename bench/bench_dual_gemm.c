/*
 * bench_dual_gemm.c - the gated MLP layer H = silu(A Wg^T) * (A Wu^T) as
 * one kernel (examples/dual_gemm.h: two tl_gemm in one warp-specialised,
 * TMA-fed pipelined loop, the gate in registers) against what a framework
 * runs: two cuBLAS GEMMs and an element-wise kernel, bf16, in one run
 * (interleaved). FLOPs: 2 x 2 M N K. Checked against the unfused result.
 * Usage: bench_dual_gemm [--variants] [MxNxK]
 *   (default 4096x4096x4096 and 8192x14336x4096; --variants times the
 *   schedules of dual_gemm_variants beside the default, all interleaved)
 */
#include "bench.h"

#include "../examples/dual_gemm.h"

#include <math.h>
#include <string.h>

#define MAX_FUSED 12

typedef struct operands {
    tl_ctx *ctx;
    int64_t m, n, k;
    uint64_t a, wg, wu, g, u, h_fused, h_unfused;
    const tl_program *gate;
} operands;

typedef struct work {
    operands *o;
    const tl_program *fused; /* NULL: the unfused baseline */
} work;

static tl_status run(void *user, void *stream)
{
    work *w = user;
    operands *o = w->o;
    if (w->fused) {
        tl_arg args[] = {tl_arg_int(o->m), tl_arg_int(o->n), tl_arg_int(o->k), tl_arg_dptr(o->a), tl_arg_dptr(o->wg),
                         tl_arg_dptr(o->wu), tl_arg_dptr(o->h_fused)};
        return tl_launch(w->fused, stream, 7, args);
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

static void schedule_text(const dual_gemm_schedule *s, char *buf, size_t n)
{
    snprintf(buf, n, "%dx%dx%d s%d t%d%s%s%s", s->block_m, s->block_n, s->block_k, s->stages, s->threads,
             s->pingpong ? " pingpong" : "", s->a_regs ? " A-regs" : "", s->persistent ? " persistent" : "");
}

/* Times the unfused baseline and the nf fused programs (the first is the
 * default schedule) interleaved, each fused result checked first. */
static void bench_shape(tl_ctx *ctx, int64_t m, int64_t n, int64_t k, int nf, const tl_program *const *fused,
                        const dual_gemm_schedule *sched, const tl_program *gate)
{
    operands o = {ctx, m, n, k, alloc_random(ctx, m * k, 1), alloc_random(ctx, n * k, 2), alloc_random(ctx, n * k, 3),
                  0, 0, 0, 0, gate};
    uint64_t *outs[] = {&o.g, &o.u, &o.h_fused, &o.h_unfused};
    for (int i = 0; i < 4; i++) {
        BENCH_CHECK(tl_malloc(ctx, (size_t)(m * n) * 2, outs[i]));
        BENCH_CHECK(tl_memset_u8(ctx, *outs[i], 0xFF, (size_t)(m * n) * 2, NULL));
    }
    work w[1 + MAX_FUSED] = {{&o, NULL}};
    BENCH_CHECK(run(&w[0], NULL));
    tl_check_result r[MAX_FUSED];
    tl_span out = {TL_BF16, m * n, NULL, o.h_fused}, ref = {TL_BF16, m * n, NULL, o.h_unfused};
    tl_work_fn fns[1 + MAX_FUSED];
    void *users[1 + MAX_FUSED];
    fns[0] = run, users[0] = &w[0];
    for (int i = 0; i < nf; i++) {
        w[1 + i] = (work){&o, fused[i]};
        BENCH_CHECK(tl_memset_u8(ctx, o.h_fused, 0xFF, (size_t)(m * n) * 2, NULL));
        BENCH_CHECK(run(&w[1 + i], NULL));
        BENCH_CHECK(tl_check(ctx, &out, &ref, 2e-2, &r[i]));
        fns[1 + i] = run, users[1 + i] = &w[1 + i];
    }
    tl_timing t[1 + MAX_FUSED];
    tl_timing_options opt = {.warmup = 5, .reps = 30};
    BENCH_CHECK(tl_time_interleaved(ctx, NULL, 1 + nf, fns, users, &opt, t));
    double flop = 4.0 * (double)m * (double)n * (double)k;
    char shape[64];
    snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
    bench_csv_baseline("dual_gemm", shape, "bf16", "cublas_x2+silu_mul", t[0].median_ms,
                       flop / t[0].median_ms * 1e-9, "TFLOP/s");
    printf("%-18s unfused (2 cuBLAS GEMMs + silu_mul) %8.3f ms %6.0f TFLOP/s\n", shape, t[0].median_ms,
           flop / t[0].median_ms * 1e-9);
    for (int i = 0; i < nf; i++) {
        char text[64], impl[96];
        schedule_text(&sched[i], text, sizeof text);
        snprintf(impl, sizeof impl, i == 0 ? "tilec_fused" : "tilec_fused[%s]", text);
        const tl_timing *ti = &t[1 + i];
        bench_csv("dual_gemm", shape, "bf16", impl, ti->median_ms, flop / ti->median_ms * 1e-9, "TFLOP/s",
                  t[0].median_ms / ti->median_ms, r[i].rel_err);
        printf("%-18s fused %-28s %8.3f ms %6.0f TFLOP/s | speedup %.3fx | rel err %.1e%s%s\n", shape, text,
               ti->median_ms, flop / ti->median_ms * 1e-9, t[0].median_ms / ti->median_ms, r[i].rel_err,
               i == 0 ? " (default)" : "", r[i].pass ? "" : "  CHECK FAILED");
    }
    tl_free(ctx, o.a), tl_free(ctx, o.wg), tl_free(ctx, o.wu);
    for (int i = 0; i < 4; i++)
        tl_free(ctx, *outs[i]);
}

int main(int argc, char **argv)
{
    tl_ctx *ctx = bench_open("bench_dual_gemm");
    int variants = 0;
    long long m = 0, n = 0, kk = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--variants") == 0)
            variants = 1;
        else if (sscanf(argv[i], "%lldx%lldx%lld", &m, &n, &kk) != 3 || m < 1 || n < 1 || kk < 1) {
            fprintf(stderr, "usage: bench_dual_gemm [--variants] [MxNxK]\n");
            return 2;
        }
    }
    dual_gemm_schedule sched[MAX_FUSED] = {dual_gemm_default};
    int nf = 1;
    for (size_t i = 0; variants && i < sizeof dual_gemm_variants / sizeof dual_gemm_variants[0] && nf < MAX_FUSED; i++)
        sched[nf++] = dual_gemm_variants[i];
    tl_compile_job jobs[MAX_FUSED] = {{0}};
    tl_program *fused[MAX_FUSED];
    for (int i = 0; i < nf; i++) {
        jobs[i].kernel = dual_gemm_build(ctx, TL_BF16, &sched[i]);
        if (!jobs[i].kernel) {
            fprintf(stderr, "build: %s\n", tl_ctx_error(ctx));
            return 1;
        }
    }
    BENCH_CHECK(tl_compile_many(ctx, jobs, nf, NULL, 0));
    for (int i = 0; i < nf; i++)
        fused[i] = jobs[i].program;
    tl_kernel *g = dual_gemm_gate_build(ctx, TL_BF16);
    if (!g) {
        fprintf(stderr, "build: %s\n", tl_ctx_error(ctx));
        return 1;
    }
    tl_program *gate;
    BENCH_CHECK(tl_compile(g, NULL, &gate));
    if (m > 0) {
        bench_shape(ctx, m, n, kk, nf, (const tl_program *const *)fused, sched, gate);
    } else {
        bench_shape(ctx, 4096, 4096, 4096, nf, (const tl_program *const *)fused, sched, gate);
        bench_shape(ctx, 8192, 14336, 4096, nf, (const tl_program *const *)fused, sched, gate);
    }
    for (int i = 0; i < nf; i++)
        tl_program_destroy(fused[i]), tl_kernel_destroy(jobs[i].kernel);
    tl_program_destroy(gate), tl_kernel_destroy(g);
    tl_ctx_destroy(ctx);
    return 0;
}
