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
 * Prints a CSV line per measurement (ratio: to the copy; and a line whose
 * ratio is to Triton's figure) and a readable table.
 * Usage: bench_softmax [ROWSxCOLS]   (default: the five shapes below)
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

typedef struct work {
    tl_ctx *ctx;
    int kind;
    int64_t rows, cols;
    int copies, next;   /* rotation over the copies */
    uint64_t *x, *y, w; /* x[c], y[c]: rows x cols f16; w: cols f16 */
    tl_softmax_desc sd;
    tl_rmsnorm_desc rd;
} work;

static size_t tensor_bytes(const work *w) { return (size_t)(w->rows * w->cols) * 2; }

static tl_status run_on(work *w, int c, void *stream)
{
    switch (w->kind) {
    case COPY: return tl_memcpy_dtod(w->ctx, w->y[c], w->x[c], tensor_bytes(w), stream);
    case SOFTMAX: return tl_op_softmax(w->ctx, &w->sd, w->x[c], w->y[c], stream);
    default: return tl_op_rmsnorm(w->ctx, &w->rd, w->x[c], w->w, w->y[c], stream);
    }
}

static tl_status run_rotating(void *user, void *stream)
{
    work *w = user;
    w->next = (w->next + 1) % w->copies;
    return run_on(w, w->next, stream);
}

/* Reference of row i of copy 0 (seed 1) into ref[cols]. */
static void reference_row(const work *w, int kind, const uint16_t *x, const uint16_t *wt, int64_t i, float *ref)
{
    const uint16_t *row = x + i * w->cols;
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < w->cols; j++) {
        double v = tl_f16_to_f32(row[j]);
        m = fmax(m, v);
        s += v * v;
    }
    if (kind == RMSNORM) {
        double r = 1 / sqrt(s / (double)w->cols + w->rd.eps);
        for (int64_t j = 0; j < w->cols; j++)
            ref[j] = (float)(tl_f16_to_f32(row[j]) * r * tl_f16_to_f32(wt[j]));
        return;
    }
    s = 0;
    for (int64_t j = 0; j < w->cols; j++)
        s += exp(tl_f16_to_f32(row[j]) - m);
    for (int64_t j = 0; j < w->cols; j++)
        ref[j] = (float)(exp(tl_f16_to_f32(row[j]) - m) / s);
}

/* Runs the op once on copy 0 (output poisoned first) and returns the
 * relative error of its output against the float64 reference, or -1 when
 * the check fails (NaN, or an error above 1e-2). */
static double check(work *w, int kind)
{
    size_t n = (size_t)(w->rows * w->cols);
    BENCH_CHECK(tl_memset_u8(w->ctx, w->y[0], 0xFF, tensor_bytes(w), NULL));
    w->kind = kind;
    BENCH_CHECK(run_on(w, 0, NULL));
    BENCH_CHECK(tl_synchronize(w->ctx));
    uint16_t *x = malloc(n * 2), *wt = malloc((size_t)w->cols * 2);
    float *ref = malloc(n * 4);
    if (!x || !wt || !ref) {
        fprintf(stderr, "bench_softmax: out of host memory\n");
        exit(1);
    }
    tl_random_host(x, TL_F16, (int64_t)n, 1, -4, 4);
    tl_random_host(wt, TL_F16, w->cols, 99, 0.5, 1.5);
    for (int64_t i = 0; i < w->rows; i++)
        reference_row(w, kind, x, wt, i, ref + i * w->cols);
    tl_span out = {.dtype = TL_F16, .n = (int64_t)n, .dptr = w->y[0]};
    tl_span r = {.dtype = TL_F32, .n = (int64_t)n, .host = ref};
    tl_check_result res;
    BENCH_CHECK(tl_check(w->ctx, &out, &r, 1e-2, &res));
    free(x), free(wt), free(ref);
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

static void alloc_work(tl_ctx *ctx, const shape *s, work *w)
{
    memset(w, 0, sizeof *w);
    w->ctx = ctx;
    w->rows = s->rows, w->cols = s->cols;
    w->copies = copies_for(ctx, 2 * tensor_bytes(w));
    w->x = calloc((size_t)w->copies, sizeof *w->x);
    w->y = calloc((size_t)w->copies, sizeof *w->y);
    for (int c = 0; c < w->copies; c++) {
        BENCH_CHECK(tl_malloc(ctx, tensor_bytes(w), &w->x[c]));
        BENCH_CHECK(tl_malloc(ctx, tensor_bytes(w), &w->y[c]));
        BENCH_CHECK(tl_random_fill(ctx, w->x[c], TL_F16, w->rows * w->cols, 1 + (uint64_t)c, -4, 4, NULL));
    }
    BENCH_CHECK(tl_malloc(ctx, (size_t)w->cols * 2, &w->w));
    BENCH_CHECK(tl_random_fill(ctx, w->w, TL_F16, w->cols, 99, 0.5, 1.5, NULL));
    w->sd = (tl_softmax_desc){.rows = w->rows, .cols = w->cols, .in_dtype = TL_F16, .out_dtype = TL_F16};
    w->rd = (tl_rmsnorm_desc){.rows = w->rows, .cols = w->cols, .in_dtype = TL_F16, .out_dtype = TL_F16,
                              .eps = 1e-6};
}

static void free_work(work *w)
{
    for (int c = 0; c < w->copies; c++)
        tl_free(w->ctx, w->x[c]), tl_free(w->ctx, w->y[c]);
    tl_free(w->ctx, w->w);
    free(w->x), free(w->y);
}

/* The copy and one op, interleaved; prints their lines. */
static void bench_op(work *base, const shape *s, int kind)
{
    const char *op = kind == SOFTMAX ? "softmax" : "rmsnorm";
    double rel = check(base, kind);
    work copy = *base, ours = *base;
    copy.kind = COPY, ours.kind = kind;
    tl_work_fn fns[2] = {run_rotating, run_rotating};
    void *users[2] = {&copy, &ours};
    tl_timing t[2];
    tl_timing_options opt = {.warmup = 10, .reps = 50};
    BENCH_CHECK(tl_time_interleaved(base->ctx, NULL, 2, fns, users, &opt, t));
    double bytes = 2.0 * (double)tensor_bytes(base);
    double copy_gbs = bytes / t[0].median_ms / 1e6, gbs = bytes / t[1].median_ms / 1e6;
    char shp[48], impl[64];
    snprintf(shp, sizeof shp, "%lldx%lld", (long long)s->rows, (long long)s->cols);
    tl_softmax_schedule sc = kind == SOFTMAX ? tl_op_softmax_schedule(base->ctx, &base->sd)
                                             : tl_op_rmsnorm_schedule(base->ctx, &base->rd);
    snprintf(impl, sizeof impl, "tl_op_%s w=%d r=%d t=%d%s", op, sc.width, sc.rows, sc.threads,
             s->cols > sc.width ? " online" : "");
    bench_csv("copy", shp, "f16", "cuMemcpyDtoD", t[0].median_ms, copy_gbs, "GB/s", 1.0, 0);
    bench_csv(op, shp, "f16", impl, t[1].median_ms, gbs, "GB/s", gbs / copy_gbs, rel);
    bool anchored = kind == SOFTMAX && !isnan(s->triton_gbs);
    if (anchored)
        bench_csv(op, shp, "f16", "tl_op_softmax vs Triton (ANCHORS.md)", t[1].median_ms, gbs, "GB/s",
                  gbs / s->triton_gbs, rel);
    printf("%-8s %-12s %-34s %7.1f GB/s  copy %7.1f GB/s  %.3f x copy", op, shp, impl, gbs, copy_gbs,
           gbs / copy_gbs);
    if (anchored)
        printf("  %.3f x Triton (%.0f)", gbs / s->triton_gbs, s->triton_gbs);
    printf("  rel err %.1e%s\n", rel, rel < 0 ? "  CHECK FAILED" : "");
}

int main(int argc, char **argv)
{
    long long r = 0, c = 0;
    if (argc > 1 && (sscanf(argv[1], "%lldx%lld", &r, &c) != 2 || r < 1 || c < 1)) {
        fprintf(stderr, "usage: bench_softmax [ROWSxCOLS]\n");
        return 2;
    }
    shape one = {r, c, NAN}; /* no Triton figure for it */
    tl_ctx *ctx = bench_open("bench_softmax");
    printf("csv,op,shape,dtype,impl,ms,rate,unit,ratio_to_baseline,rel_err\n");
    const shape *list = argc > 1 ? &one : shapes;
    size_t n = argc > 1 ? 1 : sizeof shapes / sizeof shapes[0];
    for (size_t i = 0; i < n; i++) {
        work w;
        alloc_work(ctx, &list[i], &w);
        bench_op(&w, &list[i], SOFTMAX);
        bench_op(&w, &list[i], RMSNORM);
        free_work(&w);
    }
    tl_ctx_destroy(ctx);
    return 0;
}
