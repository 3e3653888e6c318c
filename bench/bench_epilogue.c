/*
 * bench_epilogue.c - what fusing bias + GELU into the GEMM is worth, bf16
 * in and out, all in one run:
 *
 *   (a) tl_op_gemm with bias + GELU fused (tanh form; the erf form too)
 *   (b) tl_op_gemm without epilogue, same schedule
 *   (c) (b) followed by tl_op_bias_act, the separate element-wise kernel
 *   (c2) (b) followed by a bias kernel and a GELU kernel: the two passes of
 *       an eager framework (x + bias, then gelu)
 *   (d) cuBLAS (no epilogue) followed by tl_op_bias_act
 *   (e) cuBLASLt with its fused GELU_BIAS epilogue (the baseline; its GELU
 *       is the tanh form, so it has no erf counterpart)
 *
 * Prints one CSV line per measurement (ratio: rate over (e)'s), the
 * overhead of (a) over (b) and the speedup of (a) over (c); (a) is checked
 * against (e) and (d), the erf form against (d) with erf.
 *
 * Usage: bench_epilogue [MxNxK] [nt|nn] [BMxBNxBKxSTAGESxTHREADS[p|P]]
 *   (default 4096^3 and 8192^3, NT, the op's default schedule; a trailing
 *   p: the ping-pong kernel, P: the persistent warp-specialised one)
 */
#include "bench.h"
#include "gemm_sweep.h"

#include <string.h>

enum kind { OURS, OURS_THEN_ACT, OURS_THEN_TWO, CUBLAS, CUBLAS_THEN_ACT, CUBLASLT_FUSED };

typedef struct work {
    gemm_operands *ops;
    enum kind kind;
    tl_gemm_desc d;     /* what the GEMM itself computes          */
    tl_epilogue act;    /* the separate kernel's activation       */
    int copy;           /* >= 0: this copy; -1: rotate            */
} work;

static tl_status run(void *user, void *stream)
{
    work *w = user;
    gemm_operands *o = w->ops;
    int i = w->copy >= 0 ? w->copy : gemm_operands_next(o);
    tl_status st;
    switch (w->kind) {
    case OURS:
    case OURS_THEN_ACT:
    case OURS_THEN_TWO: st = tl_op_gemm(o->ctx, &w->d, o->a[i], o->b[i], o->bias, o->c[i], stream); break;
    default: /* cuBLAS; cuBLASLt when d has a bias or an epilogue */
        st = tl_baseline_gemm(o->ctx, &w->d, o->a[i], o->b[i], o->bias, o->c[i], stream);
        break;
    }
    if (st == TL_OK && (w->kind == OURS_THEN_ACT || w->kind == CUBLAS_THEN_ACT))
        st = tl_op_bias_act(o->ctx, o->out, o->m, o->n, o->c[i], o->bias, w->act, stream);
    if (st == TL_OK && w->kind == OURS_THEN_TWO) {
        st = tl_op_bias_act(o->ctx, o->out, o->m, o->n, o->c[i], o->bias, TL_EPI_NONE, stream);
        if (st == TL_OK)
            st = tl_op_bias_act(o->ctx, o->out, o->m, o->n, o->c[i], 0, w->act, stream);
    }
    return st;
}

/* Runs w once on copy 0 (poisoned first) and keeps its output in keep
 * (when not 0). */
static tl_status run_once(work *w, uint64_t keep)
{
    gemm_operands *o = w->ops;
    size_t bytes = gemm_operands_c_bytes(o);
    tl_status st = tl_memset_u8(o->ctx, o->c[0], 0xFF, bytes, NULL);
    w->copy = 0;
    if (st == TL_OK)
        st = run(w, NULL);
    if (st == TL_OK && keep)
        st = tl_memcpy_dtod(o->ctx, keep, o->c[0], bytes, NULL);
    if (st == TL_OK)
        st = tl_synchronize(o->ctx);
    return st;
}

/* Relative error of copy 0's C against ref (both bf16, m n elements): two
 * roundings to bf16 and two GELU codes, so 2e-2 is the bar. */
static double rel_err(gemm_operands *o, uint64_t ref, int *pass)
{
    tl_span out = {.dtype = o->out, .n = o->m * o->n, .dptr = o->c[0]};
    tl_span r = {.dtype = o->out, .n = o->m * o->n, .dptr = ref};
    tl_check_result res;
    BENCH_CHECK(tl_check(o->ctx, &out, &r, 2e-2, &res));
    *pass = res.pass;
    return res.rel_err;
}

/* The measurements, and the reference each is checked against. */
enum { A, A_ERF, B, B_DEF, C, C2, C_ERF, D, D_ERF, E, PLAIN, NM };
enum { REF_LT, REF_D_TANH, REF_D_ERF, REF_PLAIN, NREF };
enum { DESC_PLAIN, DESC_TANH, DESC_ERF, DESC_DEFAULT };

static const struct variant {
    const char *name;
    enum kind kind;
    int desc;          /* DESC_*                              */
    tl_epilogue act;   /* of the separate kernel              */
    int ref;           /* REF_* it is checked against         */
} variants[NM] = {
    [A] = {"(a) tl_op_gemm fused bias+gelu_tanh", OURS, DESC_TANH, TL_EPI_NONE, REF_LT},
    [A_ERF] = {"(a') tl_op_gemm fused bias+gelu_erf", OURS, DESC_ERF, TL_EPI_NONE, REF_D_ERF},
    [B] = {"(b) tl_op_gemm no epilogue, (a)'s schedule", OURS, DESC_PLAIN, TL_EPI_NONE, REF_PLAIN},
    [B_DEF] = {"(b') tl_op_gemm no epilogue, its own default", OURS, DESC_DEFAULT, TL_EPI_NONE, REF_PLAIN},
    [C] = {"(c) tl_op_gemm + tl_op_bias_act gelu_tanh", OURS_THEN_ACT, DESC_PLAIN, TL_EPI_GELU_TANH, REF_D_TANH},
    [C2] = {"(c2) tl_op_gemm + bias kernel + gelu_tanh kernel", OURS_THEN_TWO, DESC_PLAIN, TL_EPI_GELU_TANH, REF_D_TANH},
    [C_ERF] = {"(c') tl_op_gemm + tl_op_bias_act gelu_erf", OURS_THEN_ACT, DESC_PLAIN, TL_EPI_GELU_ERF, REF_D_ERF},
    [D] = {"(d) cublas + tl_op_bias_act gelu_tanh", CUBLAS_THEN_ACT, DESC_PLAIN, TL_EPI_GELU_TANH, REF_D_TANH},
    [D_ERF] = {"(d') cublas + tl_op_bias_act gelu_erf", CUBLAS_THEN_ACT, DESC_PLAIN, TL_EPI_GELU_ERF, REF_D_ERF},
    [E] = {"(e) cublasLt fused GELU_BIAS", CUBLASLT_FUSED, DESC_TANH, TL_EPI_NONE, REF_D_TANH},
    [PLAIN] = {"cublas no epilogue", CUBLAS, DESC_PLAIN, TL_EPI_NONE, REF_PLAIN},
};

typedef struct measure {
    work w;
    int ran;
    double ms, tflops, rel;
    int pass;
} measure;

typedef struct bench {
    gemm_operands ops;
    measure ms[NM];
    uint64_t ref[NREF];  /* outputs of (e), (d), (d'), cuBLAS alone on copy 0 */
    int have_lt;         /* cuBLASLt offers the fused epilogue               */
    int custom;          /* (b') runs another schedule than (a) and (b)      */
    double a_vs_d;       /* (a) against (d) too                              */
    int a_vs_d_pass;
} bench;

static void setup(bench *b, tl_ctx *ctx, int64_t m, int64_t n, int64_t k, int trans_b,
                  const tl_gemm_schedule *sched)
{
    memset(b, 0, sizeof *b);
    BENCH_CHECK(gemm_operands_init(&b->ops, ctx, m, n, k, TL_BF16, TL_BF16));
    for (int r = 0; r < NREF; r++)
        BENCH_CHECK(tl_malloc(ctx, gemm_operands_c_bytes(&b->ops), &b->ref[r]));
    tl_gemm_desc d[4];
    d[DESC_PLAIN] = (tl_gemm_desc){.m = m, .n = n, .k = k, .in_dtype = TL_BF16, .out_dtype = TL_BF16,
                                   .trans_b = trans_b, .schedule = *sched};
    d[DESC_TANH] = d[DESC_ERF] = d[DESC_PLAIN];
    d[DESC_TANH].has_bias = d[DESC_ERF].has_bias = 1;
    d[DESC_TANH].epilogue = TL_EPI_GELU_TANH;
    d[DESC_ERF].epilogue = TL_EPI_GELU_ERF;
    d[DESC_DEFAULT] = d[DESC_PLAIN];
    memset(&d[DESC_DEFAULT].schedule, 0, sizeof d[DESC_DEFAULT].schedule);
    /* (b) is (a)'s kernel without the epilogue: the schedule the op picks
     * for (a), spelled out (the default may differ with an epilogue) */
    d[DESC_PLAIN].schedule = tl_op_gemm_schedule(ctx, &d[DESC_TANH]);
    {
        tl_gemm_schedule own = tl_op_gemm_schedule(ctx, &d[DESC_DEFAULT]);
        b->custom = memcmp(&own, &d[DESC_PLAIN].schedule, sizeof own) != 0;
    }
    for (int i = 0; i < NM; i++)
        b->ms[i].w = (work){.ops = &b->ops, .kind = variants[i].kind, .d = d[variants[i].desc],
                            .act = variants[i].act, .copy = -1};
}

/* The references, each run once on copy 0. Without cuBLASLt's fused
 * epilogue (e) is left out and (a) is checked against (d). */
static void make_references(bench *b)
{
    tl_status st = run_once(&b->ms[E].w, b->ref[REF_LT]);
    b->have_lt = st == TL_OK;
    if (st == TL_ERR_UNSUPPORTED)
        printf("note: cuBLASLt offers no fused GELU_BIAS here (%s); (a) is checked against (d)\n",
               tl_ctx_error(b->ops.ctx));
    else
        BENCH_CHECK(st);
    BENCH_CHECK(run_once(&b->ms[D].w, b->ref[REF_D_TANH]));
    BENCH_CHECK(run_once(&b->ms[D_ERF].w, b->ref[REF_D_ERF]));
    BENCH_CHECK(run_once(&b->ms[PLAIN].w, b->ref[REF_PLAIN]));
}

/* Every variant is timed in one interleaved batch (each repetition runs
 * them all in turn), so the overhead of (a) over (b) is not skewed by the
 * clocks drifting between separate batches. */
static void time_and_check(bench *b)
{
    double flop = 2.0 * (double)b->ops.m * (double)b->ops.n * (double)b->ops.k;
    tl_work_fn fns[NM];
    void *users[NM];
    int which[NM], n = 0;
    for (int i = 0; i < NM; i++) {
        if ((i == E && !b->have_lt) || (i == B_DEF && !b->custom))
            continue;
        b->ms[i].w.copy = -1;
        fns[n] = run;
        users[n] = &b->ms[i].w;
        which[n++] = i;
    }
    tl_timing t[NM];
    tl_timing_options opt = {.warmup = 3, .reps = b->ops.m * b->ops.n * b->ops.k > ((int64_t)1 << 37) ? 30 : 60};
    BENCH_CHECK(tl_time_interleaved(b->ops.ctx, NULL, n, fns, users, &opt, t));
    for (int j = 0; j < n; j++) {
        measure *x = &b->ms[which[j]];
        x->ms = t[j].median_ms;
        x->tflops = flop / x->ms / 1e9;
        x->ran = 1;
    }
    for (int i = 0; i < NM; i++) {
        measure *x = &b->ms[i];
        if (!x->ran)
            continue;
        int ref = i == A && !b->have_lt ? REF_D_TANH : variants[i].ref;
        BENCH_CHECK(run_once(&x->w, 0));
        x->rel = rel_err(&b->ops, b->ref[ref], &x->pass);
        if (i == A)
            b->a_vs_d = rel_err(&b->ops, b->ref[REF_D_TANH], &b->a_vs_d_pass);
    }
}

static void report(const bench *b, int trans_b)
{
    const measure *ms = b->ms;
    char shape[64];
    snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)b->ops.m, (long long)b->ops.n, (long long)b->ops.k);
    const char *op = trans_b ? "gemm_bias_gelu_nt" : "gemm_bias_gelu_nn";
    double base = b->have_lt ? ms[E].tflops : ms[D].tflops;
    printf("\n%s bf16 %s, operands rotated over %d cop%s; ratio = rate / (%s)'s\n", op, shape, b->ops.copies,
           b->ops.copies == 1 ? "y" : "ies", b->have_lt ? "e" : "d");
    char sched[96];
    tl_gemm_schedule used = tl_op_gemm_schedule(b->ops.ctx, &ms[A].w.d);
    gemm_schedule_text(&used, sched, sizeof sched);
    printf("  (a)'s schedule: %s%s\n", sched, ms[A].w.d.schedule.block_m ? "" : " (the op's default)");
    printf("  %-42s %9s %9s %9s %9s\n", "impl", "ms", "TFLOP/s", "ratio", "rel err");
    for (int i = 0; i < NM; i++) {
        if (!ms[i].ran)
            continue;
        /* the fused op (a, a') is ours; cuBLAS's other forms are peers, our
         * unfused forms context */
        enum kind kd = variants[i].kind;
        int fused = i == A || i == A_ERF, cublas = kd == CUBLAS || kd == CUBLAS_THEN_ACT || kd == CUBLASLT_FUSED;
        char impl[128];
        snprintf(impl, sizeof impl, "%s%s", fused ? "" : cublas ? "peer:" : "context:", variants[i].name);
        if (i == (b->have_lt ? E : D))
            bench_csv_baseline(op, shape, "bf16", variants[i].name, ms[i].ms, ms[i].tflops, "TFLOP/s");
        else
            bench_csv(op, shape, "bf16", impl, ms[i].ms, ms[i].tflops, "TFLOP/s", ms[i].tflops / base, ms[i].rel);
        printf("  %-42s %9.4f %9.1f %9.3f %9.1e%s\n", variants[i].name, ms[i].ms, ms[i].tflops,
               ms[i].tflops / base, ms[i].rel, ms[i].pass ? "" : "  CHECK FAILED");
    }
    printf("  (a) against (d): rel err %.1e%s\n", b->a_vs_d, b->a_vs_d_pass ? "" : "  CHECK FAILED");
    printf("  fused epilogue overhead, (a) over (b): %+.1f %%   (erf form: %+.1f %%)\n",
           (ms[A].ms / ms[B].ms - 1) * 100, (ms[A_ERF].ms / ms[B].ms - 1) * 100);
    if (ms[B_DEF].ran)
        printf("  (a) over the plain GEMM's own default schedule (b'): %+.1f %%\n",
               (ms[A].ms / ms[B_DEF].ms - 1) * 100);
    printf("  speedup of fusing, (c) / (a): %.3f x   (erf form: %.3f x); two passes, (c2) / (a): %.3f x\n",
           ms[C].ms / ms[A].ms, ms[C_ERF].ms / ms[A_ERF].ms, ms[C2].ms / ms[A].ms);
    printf("  the most fusing can give against (c): (c) / (b) = %.3f x\n", ms[C].ms / ms[B].ms);
    if (b->have_lt)
        printf("  (a) against cuBLASLt fused (e): %.3f x its rate\n", ms[A].tflops / ms[E].tflops);
    printf("  the separate kernel alone: %.4f ms after cuBLAS, %.4f ms after ours\n", ms[D].ms - ms[PLAIN].ms,
           ms[C].ms - ms[B].ms);
}

static void bench_shape(tl_ctx *ctx, int64_t m, int64_t n, int64_t k, int trans_b, const tl_gemm_schedule *sched)
{
    bench b;
    setup(&b, ctx, m, n, k, trans_b, sched);
    make_references(&b);
    time_and_check(&b);
    report(&b, trans_b);
    for (int r = 0; r < NREF; r++)
        tl_free(ctx, b.ref[r]);
    gemm_operands_free(&b.ops);
}

int main(int argc, char **argv)
{
    int64_t m = 0, n = 0, k = 0;
    int trans_b = 1, one = 0;
    tl_gemm_schedule sched = {0}; /* the op's default */
    for (int i = 1; i < argc; i++) {
        int bm, bn, bk, st, th, f;
        char end, extra;
        if (strcmp(argv[i], "nn") == 0)
            trans_b = 0;
        else if (strcmp(argv[i], "nt") == 0)
            trans_b = 1;
        else if ((f = sscanf(argv[i], "%dx%dx%dx%dx%d%c%c", &bm, &bn, &bk, &st, &th, &end, &extra)) == 5 ||
                 (f == 6 && (end == 'p' || end == 'P')))
            sched = (tl_gemm_schedule){.block_m = bm, .block_n = bn, .block_k = bk, .stages = st, .threads = th,
                                       .swizzle = 8, .pingpong = f == 6 && end == 'p',
                                       .persistent = f == 6 && end == 'P'};
        else if (gemm_parse_shape(argv[i], &m, &n, &k) == 0)
            one = 1;
        else {
            fprintf(stderr, "usage: bench_epilogue [MxNxK] [nt|nn] [BMxBNxBKxSTAGESxTHREADS[p|P]] (p: ping-pong, P: persistent)\n");
            return 2;
        }
    }
    tl_ctx *ctx = bench_open("bench_epilogue");
    printf("csv,op,shape,dtype,impl,ms,rate,unit,ratio_to_baseline,rel_err\n");
    if (one) {
        bench_shape(ctx, m, n, k, trans_b, &sched);
    } else {
        bench_shape(ctx, 4096, 4096, 4096, trans_b, &sched);
        bench_shape(ctx, 8192, 8192, 8192, trans_b, &sched);
    }
    tl_ctx_destroy(ctx);
    return 0;
}
