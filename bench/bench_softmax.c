/*
 * bench_softmax.c - the fused row softmax and RMSNorm, fp16 in and out,
 * against a device-to-device copy of the same bytes measured in the same
 * run (interleaved: each repetition runs the copy, then the op, so both see
 * the same clocks), at the shapes of ANCHORS.md's Triton figures.
 *
 * Bytes counted: each element read once and written once (2 x rows x cols
 * x 2 bytes), for the op and for the copy; RMSNorm's weight row is not
 * counted. Inputs and outputs rotate over enough copies that one pass over
 * them is more than twice the L2, so no run finds its data in cache. The
 * output of a run on copy 0 (poisoned first) is checked against a float64
 * reference on the host from the same random inputs.
 *
 * --variants: at each shape, the default schedule and the alternatives
 * (elements per thread 32, 16, 8; stages 1 = no pipeline, 2 to 4 = a ring
 * of shared tiles, rows.c; from 16384 columns the online path in chunks)
 * of both ops, each checked, then all of them
 * timed in one interleaved set with the copy; a table per shape, and the
 * fastest schedule of each op with its ratios.
 *
 * Prints a CSV line per measurement (ratio: to the copy; and a line whose
 * ratio is to Triton's figure) and a readable table.
 * --schedule W,R,T,S,C,L: the default mode with that tl_softmax_schedule
 * (width, rows, threads, stages, cluster, loader; trailing fields may be
 * left out, zeros are the default's) in place of the default.
 * Usage: bench_softmax [--variants] [--reps N] [--schedule ...] [ROWSxCOLS]
 *        (default: the five shapes below; 50 timed runs each, 100 with
 *        --variants)
 */
#include "bench.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

typedef struct shape {
    int64_t rows, cols;
    double triton_gbs; /* ANCHORS.md: Triton's fused softmax, fp16, H200 */
} shape;

static const shape shapes[] = {
    {16384, 1024, 3000}, {8192, 4096, 3579}, {4096, 8192, 3510}, {32768, 2048, 3885}, {2048, 32768, 2812},
};

enum { COPY, SOFTMAX, RMSNORM };

/* The buffers of one shape, shared by every work timed on it. */
typedef struct data {
    tl_ctx *ctx;
    int64_t rows, cols;
    int copies;         /* rotation over the copies */
    uint64_t *x, *y, w; /* x[c], y[c]: rows x cols f16; w: cols f16 */
} data;

/* One thing to time: the copy, or an op with a schedule. */
typedef struct work {
    data *d;
    int kind;
    int next;
    tl_softmax_desc sd;
    tl_rmsnorm_desc rd;
} work;

static size_t tensor_bytes(const data *d) { return (size_t)(d->rows * d->cols) * 2; }

static tl_status run_on(work *w, int c, void *stream)
{
    data *d = w->d;
    switch (w->kind) {
    case COPY: return tl_memcpy_dtod(d->ctx, d->y[c], d->x[c], tensor_bytes(d), stream);
    case SOFTMAX: return tl_op_softmax(d->ctx, &w->sd, d->x[c], d->y[c], stream);
    default: return tl_op_rmsnorm(d->ctx, &w->rd, d->x[c], d->w, d->y[c], stream);
    }
}

static tl_status run_rotating(void *user, void *stream)
{
    work *w = user;
    w->next = (w->next + 1) % w->d->copies;
    return run_on(w, w->next, stream);
}

/* Reference of row i of copy 0 (seed 1) into ref[cols]. */
static void reference_row(const data *d, int kind, const uint16_t *x, const uint16_t *wt, int64_t i, float *ref)
{
    const uint16_t *row = x + i * d->cols;
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < d->cols; j++) {
        double v = tl_f16_to_f32(row[j]);
        m = fmax(m, v);
        s += v * v;
    }
    if (kind == RMSNORM) {
        double r = 1 / sqrt(s / (double)d->cols + 1e-6);
        for (int64_t j = 0; j < d->cols; j++)
            ref[j] = (float)(tl_f16_to_f32(row[j]) * r * tl_f16_to_f32(wt[j]));
        return;
    }
    s = 0;
    for (int64_t j = 0; j < d->cols; j++)
        s += exp(tl_f16_to_f32(row[j]) - m);
    for (int64_t j = 0; j < d->cols; j++)
        ref[j] = (float)(exp(tl_f16_to_f32(row[j]) - m) / s);
}

/* The float64 reference of op `kind` on copy 0, [rows, cols] f32. */
static float *reference(const data *d, int kind)
{
    size_t n = (size_t)(d->rows * d->cols);
    uint16_t *x = malloc(n * 2), *wt = malloc((size_t)d->cols * 2);
    float *ref = malloc(n * 4);
    if (!x || !wt || !ref) {
        fprintf(stderr, "bench_softmax: out of host memory\n");
        exit(1);
    }
    tl_random_host(x, TL_F16, (int64_t)n, 1, -4, 4);
    tl_random_host(wt, TL_F16, d->cols, 99, 0.5, 1.5);
    for (int64_t i = 0; i < d->rows; i++)
        reference_row(d, kind, x, wt, i, ref + i * d->cols);
    free(x), free(wt);
    return ref;
}

/* Runs w once on copy 0 (output poisoned first) and returns the relative
 * error of its output against ref, or -1 when the check fails (NaN, or an
 * error above 1e-2) or the launch does (said on stdout). */
static double check(work *w, const float *ref)
{
    data *d = w->d;
    size_t n = (size_t)(d->rows * d->cols);
    BENCH_CHECK(tl_memset_u8(d->ctx, d->y[0], 0xFF, tensor_bytes(d), NULL));
    tl_status st = run_on(w, 0, NULL);
    if (st == TL_OK)
        st = tl_synchronize(d->ctx);
    if (st != TL_OK) {
        printf("# launch failed: %s: %s\n", tl_status_name(st), tl_ctx_error(d->ctx));
        return -1;
    }
    tl_span out = {.dtype = TL_F16, .n = (int64_t)n, .dptr = d->y[0]};
    tl_span r = {.dtype = TL_F32, .n = (int64_t)n, .host = (void *)ref};
    tl_check_result res;
    BENCH_CHECK(tl_check(d->ctx, &out, &r, 1e-2, &res));
    return res.pass ? res.rel_err : -1;
}

/* Enough copies that one pass over inputs and outputs is > 2 x L2. */
static int copies_for(tl_ctx *ctx, size_t set_bytes)
{
    tl_device_info info;
    size_t l2 = (size_t)64 << 20;
    if (tl_ctx_get_device_info(ctx, &info) == TL_OK && info.l2_bytes > 0)
        l2 = (size_t)info.l2_bytes;
    return set_bytes > 2 * l2 ? 1 : (int)(2 * l2 / set_bytes) + 1;
}

static void alloc_data(tl_ctx *ctx, const shape *s, data *d)
{
    memset(d, 0, sizeof *d);
    d->ctx = ctx;
    d->rows = s->rows, d->cols = s->cols;
    d->copies = copies_for(ctx, 2 * tensor_bytes(d));
    d->x = calloc((size_t)d->copies, sizeof *d->x);
    d->y = calloc((size_t)d->copies, sizeof *d->y);
    for (int c = 0; c < d->copies; c++) {
        BENCH_CHECK(tl_malloc(ctx, tensor_bytes(d), &d->x[c]));
        BENCH_CHECK(tl_malloc(ctx, tensor_bytes(d), &d->y[c]));
        BENCH_CHECK(tl_random_fill(ctx, d->x[c], TL_F16, d->rows * d->cols, 1 + (uint64_t)c, -4, 4, NULL));
    }
    BENCH_CHECK(tl_malloc(ctx, (size_t)d->cols * 2, &d->w));
    BENCH_CHECK(tl_random_fill(ctx, d->w, TL_F16, d->cols, 99, 0.5, 1.5, NULL));
}

static void free_data(data *d)
{
    for (int c = 0; c < d->copies; c++)
        tl_free(d->ctx, d->x[c]), tl_free(d->ctx, d->y[c]);
    tl_free(d->ctx, d->w);
    free(d->x), free(d->y);
}

static work make_work(data *d, int kind, tl_softmax_schedule sched)
{
    work w = {.d = d, .kind = kind};
    w.sd = (tl_softmax_desc){.rows = d->rows, .cols = d->cols, .in_dtype = TL_F16, .out_dtype = TL_F16,
                             .schedule = sched};
    w.rd = (tl_rmsnorm_desc){.rows = d->rows, .cols = d->cols, .in_dtype = TL_F16, .out_dtype = TL_F16,
                             .eps = 1e-6, .schedule = sched};
    return w;
}

/* The schedule the op runs for w (defaults filled in). */
static tl_softmax_schedule effective(work *w)
{
    return w->kind == SOFTMAX ? tl_op_softmax_schedule(w->d->ctx, &w->sd) : tl_op_rmsnorm_schedule(w->d->ctx, &w->rd);
}

static void schedule_text(tl_softmax_schedule s, bool online, char *buf, size_t len)
{
    char split[16] = "";
    if (s.cluster > 1)
        snprintf(split, sizeof split, " c=%d", s.cluster);
    snprintf(buf, len, "w=%d r=%d t=%d s=%d%s%s%s", s.width, s.rows, s.threads, s.stages,
             s.stages > 1 && s.loader == 2 ? " producer" : "", split, online ? " online" : "");
}

/* ------------------------------------------------------------------ default */

/* --schedule: the schedule bench_op runs instead of the default (all
 * zeros: the default). */
static tl_softmax_schedule given_schedule;

/* The copy and one op with its default schedule (or --schedule's),
 * interleaved; prints their lines. */
static void bench_op(data *d, const shape *s, int kind, int reps)
{
    const char *op = kind == SOFTMAX ? "softmax" : "rmsnorm";
    float *ref = reference(d, kind);
    work copy = make_work(d, COPY, (tl_softmax_schedule){0}), ours = make_work(d, kind, given_schedule);
    double rel = check(&ours, ref);
    free(ref);
    tl_work_fn fns[2] = {run_rotating, run_rotating};
    void *users[2] = {&copy, &ours};
    tl_timing t[2];
    tl_timing_options opt = {.warmup = 10, .reps = reps};
    BENCH_CHECK(tl_time_interleaved(d->ctx, NULL, 2, fns, users, &opt, t));
    double bytes = 2.0 * (double)tensor_bytes(d);
    double copy_gbs = bytes / t[0].median_ms / 1e6, gbs = bytes / t[1].median_ms / 1e6;
    char shp[48], impl[96], sch[64];
    snprintf(shp, sizeof shp, "%lldx%lld", (long long)s->rows, (long long)s->cols);
    schedule_text(effective(&ours), s->cols > (int64_t)effective(&ours).width * (effective(&ours).cluster > 1 ? effective(&ours).cluster : 1), sch, sizeof sch);
    snprintf(impl, sizeof impl, "tl_op_%s %s", op, sch);
    bench_csv("copy", shp, "f16", "cuMemcpyDtoD", t[0].median_ms, copy_gbs, "GB/s", 1.0, 0);
    bench_csv(op, shp, "f16", impl, t[1].median_ms, gbs, "GB/s", gbs / copy_gbs, rel);
    bool anchored = kind == SOFTMAX && !isnan(s->triton_gbs);
    if (anchored)
        bench_csv(op, shp, "f16", "tl_op_softmax vs Triton (ANCHORS.md)", t[1].median_ms, gbs, "GB/s",
                  gbs / s->triton_gbs, rel);
    printf("%-8s %-12s %-38s %7.1f GB/s  copy %7.1f GB/s  %.3f x copy", op, shp, impl, gbs, copy_gbs,
           gbs / copy_gbs);
    if (anchored)
        printf("  %.3f x Triton (%.0f)", gbs / s->triton_gbs, s->triton_gbs);
    printf("  rel err %.1e%s\n", rel, rel < 0 ? "  CHECK FAILED" : "");
}

/* ----------------------------------------------------------------- variants */

#define MAX_VARIANTS 96

/* The schedules tried at a width: the default, then E = 32, 16, 8
 * elements per thread (256 threads, or W / E with one row when a row needs
 * more) with stages 1 to 4 where the ring fits 227 KiB, a ring filled by
 * the block's threads (loader 1) and, where E stays at most 64, by a
 * producer warpgroup (loader 2, half the threads when the block has no
 * room for it), and E = 32 on 128 threads without a pipeline (smaller
 * blocks: a shorter tail). */
static int variants_for(int64_t cols, tl_softmax_schedule *out)
{
    int W = 1;
    while (W < cols && W < 32768)
        W *= 2;
    int n = 0;
    out[n++] = (tl_softmax_schedule){0};
    const int per_thread[] = {32, 16, 8};
    for (int e = 0; e < 3; e++) {
        int T = 256, R = per_thread[e] * T / W;
        if (R < 1)
            R = 1, T = W / per_thread[e];
        if (T > 1024 || T < 32)
            continue;
        for (int S = 1; S <= 4; S++) {
            if ((int64_t)S * R * W * 2 > 227 * 1024 || n + 2 > MAX_VARIANTS)
                continue;
            out[n++] = (tl_softmax_schedule){.width = W, .rows = R, .threads = T, .stages = S, .loader = 1};
            int t = T > 896 ? T / 2 : T; /* room for the producer's warpgroup */
            if (S > 1 && t % 128 == 0 && (int64_t)R * W / t <= 64)
                out[n++] = (tl_softmax_schedule){.width = W, .rows = R, .threads = t, .stages = S, .loader = 2};
        }
    }
    if (32 * 128 / W >= 1 && n < MAX_VARIANTS)
        out[n++] = (tl_softmax_schedule){.width = W, .rows = 32 * 128 / W, .threads = 128, .stages = 1};
    /* rows of 16384 columns and more: the online path in chunks of 4096 to
     * 16384 columns (E = 32; the row read twice, the second time mostly
     * from L2), smaller blocks than the one-pass kernel's 1024 threads */
    for (int w = 4096; cols >= 16384 && w < cols && w <= 16384 && n < MAX_VARIANTS; w *= 2)
        out[n++] = (tl_softmax_schedule){.width = w, .rows = 1, .threads = w / 32, .stages = 1};
    /* rows of 8192 columns and more split over a cluster of 2, 4 or 8
     * blocks of up to 16384 columns each (E = 32 or 16), without a
     * pipeline and with a ring of 3: one pass where the online path reads
     * rows longer than 32768 twice (the GPU refuses them where it has no
     * clusters: they are then skipped) */
    int whole = 1;
    while (whole < cols)
        whole *= 2;
    for (int c = 2; cols >= 8192 && c <= 8 && n < MAX_VARIANTS; c *= 2)
        for (int e = 32; e >= 16 && whole / c <= 16384; e /= 2)
            for (int S = 1; S <= 3 && whole / c / e <= 1024 && n < MAX_VARIANTS; S += 2)
                out[n++] = (tl_softmax_schedule){.width = whole / c, .rows = 1, .threads = whole / c / e,
                                                 .stages = S, .cluster = c};
    return n;
}

typedef struct result {
    char label[80];
    int regs, blocks_per_sm, smem;
    double gbs, rel;
} result;

/* What the summary at the end shows of a shape: the copy, and per op the
 * default and the fastest variant. */
typedef struct summary {
    char shape[48];
    double copy, triton;
    result def[2], best[2];
} summary;

/* Every variant of both ops at shape s, checked, then timed with the copy
 * in one interleaved set. */
static void bench_variants(data *d, const shape *s, int reps, summary *sum)
{
    tl_softmax_schedule sched[MAX_VARIANTS];
    int nv = variants_for(s->cols, sched);
    int nw = 1 + 2 * nv;
    work *works = calloc((size_t)nw, sizeof *works);
    result *res = calloc((size_t)nw, sizeof *res);
    tl_work_fn *fns = calloc((size_t)nw, sizeof *fns);
    void **users = calloc((size_t)nw, sizeof *users);
    tl_timing *t = calloc((size_t)nw, sizeof *t);
    works[0] = make_work(d, COPY, (tl_softmax_schedule){0});
    for (int kind = SOFTMAX; kind <= RMSNORM; kind++) {
        float *ref = reference(d, kind);
        for (int v = 0; v < nv; v++) {
            int i = 1 + (kind - SOFTMAX) * nv + v;
            works[i] = make_work(d, kind, sched[v]);
            tl_softmax_schedule e = effective(&works[i]);
            char sch[64];
            schedule_text(e, s->cols > (int64_t)e.width * (e.cluster > 1 ? e.cluster : 1), sch, sizeof sch);
            snprintf(res[i].label, sizeof res[i].label, "%s%s", v ? "" : "default ", sch);
            const tl_program *p;
            tl_status st = kind == SOFTMAX ? tl_op_softmax_program(d->ctx, &works[i].sd, &p)
                                           : tl_op_rmsnorm_program(d->ctx, &works[i].rd, &p);
            if (st != TL_OK) {
                printf("# %s %s: %s\n", kind == SOFTMAX ? "softmax" : "rmsnorm", sch, tl_ctx_error(d->ctx));
                res[i].rel = -2;
                continue;
            }
            tl_program_info info;
            if (tl_program_get_info(p, &info) == TL_OK)
                res[i].regs = info.regs, res[i].blocks_per_sm = info.blocks_per_sm, res[i].smem = info.smem_bytes;
            res[i].rel = check(&works[i], ref);
        }
        free(ref);
    }
    /* the ones that run and are right, interleaved with the copy */
    int n = 0, *idx = calloc((size_t)nw, sizeof *idx);
    for (int i = 0; i < nw; i++)
        if (i == 0 || res[i].rel >= 0) {
            fns[n] = run_rotating;
            users[n] = &works[i];
            idx[n++] = i;
        }
    tl_timing_options opt = {.warmup = 5, .reps = reps};
    BENCH_CHECK(tl_time_interleaved(d->ctx, NULL, n, fns, users, &opt, t));
    double bytes = 2.0 * (double)tensor_bytes(d);
    for (int j = 0; j < n; j++)
        res[idx[j]].gbs = bytes / t[j].median_ms / 1e6;
    double copy = res[0].gbs;
    char shp[48];
    snprintf(shp, sizeof shp, "%lldx%lld", (long long)s->rows, (long long)s->cols);
    bench_csv("copy", shp, "f16", "cuMemcpyDtoD", bytes / copy / 1e6, copy, "GB/s", 1.0, 0);
    printf("\n%s: copy %.1f GB/s; Triton's softmax %.0f GB/s (%.3f x copy)\n", shp, copy, s->triton_gbs,
           s->triton_gbs / copy);
    printf("  %-8s %-34s %5s %5s %7s %9s %8s %9s %8s\n", "op", "schedule", "regs", "b/SM", "smem", "GB/s", "x copy",
           "x Triton", "rel err");
    for (int kind = SOFTMAX; kind <= RMSNORM; kind++) {
        const char *op = kind == SOFTMAX ? "softmax" : "rmsnorm";
        int best = 0;
        for (int v = 0; v < nv; v++) {
            int i = 1 + (kind - SOFTMAX) * nv + v;
            if (res[i].rel < 0) {
                printf("  %-8s %-34s %s\n", op, res[i].label, res[i].rel == -2 ? "does not compile" : "CHECK FAILED");
                continue;
            }
            double r = res[i].gbs / copy, tr = res[i].gbs / s->triton_gbs;
            char impl[96];
            snprintf(impl, sizeof impl, "tl_op_%s %s", op, res[i].label);
            bench_csv(op, shp, "f16", impl, bytes / res[i].gbs / 1e6, res[i].gbs, "GB/s", r, res[i].rel);
            printf("  %-8s %-34s %5d %5d %7d %9.1f %8.3f", op, res[i].label, res[i].regs, res[i].blocks_per_sm,
                   res[i].smem, res[i].gbs, r);
            if (kind == SOFTMAX && !isnan(s->triton_gbs))
                printf(" %9.3f", tr);
            else
                printf(" %9s", "");
            printf(" %8.1e\n", res[i].rel);
            if (!best || res[i].gbs > res[best].gbs)
                best = i;
        }
        if (best) {
            printf("  best %s: %s, %.3f x copy", op, res[best].label, res[best].gbs / copy);
            if (kind == SOFTMAX && !isnan(s->triton_gbs))
                printf(", %.3f x Triton", res[best].gbs / s->triton_gbs);
            printf("\n");
            sum->best[kind - SOFTMAX] = res[best];
        }
        sum->def[kind - SOFTMAX] = res[1 + (kind - SOFTMAX) * nv];
    }
    snprintf(sum->shape, sizeof sum->shape, "%s", shp);
    sum->copy = copy;
    sum->triton = s->triton_gbs;
    free(works), free(res), free(fns), free(users), free(t), free(idx);
}

/* One line per shape and op: the default and the fastest variant. */
static void print_summary(const summary *sum, size_t n)
{
    printf("\nsummary (ratios to the copy of the same run; softmax also to Triton's GB/s; targets: softmax >= 0.9 "
           "x copy and >= 1 x Triton, RMSNorm >= 0.9 x copy)\n");
    printf("  %-12s %-8s %8s %8s   %-34s %8s %8s\n", "shape", "op", "default", "x Triton", "fastest", "x copy",
           "x Triton");
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 2; k++) {
            const result *df = &sum[i].def[k], *b = &sum[i].best[k];
            bool anchored = k == 0 && !isnan(sum[i].triton);
            char dt[16] = "", bt[16] = "";
            if (anchored && df->rel >= 0)
                snprintf(dt, sizeof dt, "%.3f", df->gbs / sum[i].triton);
            if (anchored && b->gbs > 0)
                snprintf(bt, sizeof bt, "%.3f", b->gbs / sum[i].triton);
            printf("  %-12s %-8s %8.3f %8s   %-34s %8.3f %8s\n", sum[i].shape, k ? "rmsnorm" : "softmax",
                   df->rel >= 0 ? df->gbs / sum[i].copy : 0.0, dt, b->label, b->gbs / sum[i].copy, bt);
        }
}

int main(int argc, char **argv)
{
    long long r = 0, c = 0;
    bool variants = false;
    int reps = 0, given = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--variants") == 0)
            variants = true;
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--schedule") == 0 && i + 1 < argc) {
            tl_softmax_schedule *g = &given_schedule;
            if (sscanf(argv[++i], "%d,%d,%d,%d,%d,%d", &g->width, &g->rows, &g->threads, &g->stages, &g->cluster,
                       &g->loader) < 1) {
                fprintf(stderr, "bench_softmax: --schedule W[,R[,T[,S[,C[,L]]]]]: %s\n", argv[i]);
                return 2;
            }
        }
        else if (sscanf(argv[i], "%lldx%lld", &r, &c) == 2 && r >= 1 && c >= 1)
            given = 1;
        else {
            fprintf(stderr, "usage: bench_softmax [--variants] [--reps N] [--schedule W,R,T,S,C,L] [ROWSxCOLS]\n");
            return 2;
        }
    }
    if (reps < 1)
        reps = variants ? 100 : 50;
    shape one = {r, c, NAN}; /* no Triton figure for it */
    for (size_t i = 0; given && i < sizeof shapes / sizeof shapes[0]; i++)
        if (shapes[i].rows == r && shapes[i].cols == c)
            one.triton_gbs = shapes[i].triton_gbs;
    tl_ctx *ctx = bench_open("bench_softmax");
    printf("csv,op,shape,dtype,impl,ms,rate,unit,ratio_to_baseline,rel_err\n");
    const shape *list = given ? &one : shapes;
    size_t n = given ? 1 : sizeof shapes / sizeof shapes[0];
    summary sum[sizeof shapes / sizeof shapes[0]];
    memset(sum, 0, sizeof sum);
    for (size_t i = 0; i < n; i++) {
        data d;
        alloc_data(ctx, &list[i], &d);
        if (variants) {
            bench_variants(&d, &list[i], reps, &sum[i]);
        } else {
            bench_op(&d, &list[i], SOFTMAX, reps);
            bench_op(&d, &list[i], RMSNORM, reps);
        }
        free_data(&d);
    }
    if (variants)
        print_summary(sum, n);
    tl_ctx_destroy(ctx);
    return 0;
}
