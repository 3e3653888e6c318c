/*
 * bench_tune.c - the autotuner on the GPU, in a cache directory of its own
 * (so the run starts cold and leaves the user's database alone):
 *
 *   cold     tl_autotune of the GEMM at 4096^3 (B as [N, K]) over its whole
 *            space from an empty cache: every candidate compiled, checked
 *            and timed; the wall time of the call is the figure
 *   anchors  at every GEMM shape of ANCHORS.md: tune (recording the best),
 *            then time together, interleaved, tl_op_gemm with its own
 *            choice (now the record), the tuner's best schedule given
 *            explicitly, the heuristic's schedule, and cuBLAS; the op
 *            should run as fast as the best of the sweep
 *   softmax  the same for the row softmax at the shapes of ANCHORS.md
 *            (fp16): the op after tuning, its untuned default, and a copy
 *            of the input, in GB/s
 *
 * Usage: bench_tune [cold] [anchors] [softmax] [nt|nn|both] [--budget SECONDS]
 *   (default: cold anchors both, 120 s per tuning run)
 */
#define _XOPEN_SOURCE 700
#include "bench.h"
#include "gemm_sweep.h"

#include <ftw.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char cache_dir[] = "/tmp/tilec-bench-tune-XXXXXX";

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void remove_cache_dir(void) { nftw(cache_dir, rm_one, 8, FTW_DEPTH | FTW_PHYS); }

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static tl_tune_result *tune(tl_ctx *ctx, const tl_gemm_desc *d, double budget, int save)
{
    tl_tune_request q = {.op = "gemm", .desc = d, .budget_s = budget, .save = save,
                         .progress = tl_tune_progress_stderr};
    tl_tune_result *r = NULL;
    BENCH_CHECK(tl_autotune(ctx, &q, &r));
    return r;
}

static void print_ranking(const tl_tune_result *r)
{
    for (int i = 0; i < r->n; i++) {
        const tl_tune_entry *e = &r->entries[i];
        if (e->outcome == TL_TUNE_PASSED)
            printf("  %-48s %9.4f ms %7.1f TFLOP/s %6.3fx %s%s\n", e->text, e->ms, e->rate, e->ratio,
                   e->finalist ? "final" : "", "");
        else
            printf("  %-48s %s: %s\n", e->text, tl_tune_outcome_name(e->outcome), e->note);
    }
}

/* (a): the whole space from a cold cache. */
static void cold(tl_ctx *ctx, double budget)
{
    tl_gemm_desc d = {.m = 4096, .n = 4096, .k = 4096, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = 1};
    double t0 = now_s();
    tl_tune_result *r = tune(ctx, &d, budget, 0);
    double wall = now_s() - t0;
    int measured = 0;
    for (int i = 0; i < r->n; i++)
        measured += r->entries[i].outcome == TL_TUNE_PASSED || r->entries[i].outcome == TL_TUNE_WRONG;
    printf("\ncold tuning, gemm bf16 NT 4096^3: %d candidates, %d compiled in %.1f s, %d checked, %d passed and "
           "timed; wall time %.1f s (target: 20 or more in at most 30 s)\n",
           r->n, r->compiled, r->compile_s, measured, r->passed, wall);
    print_ranking(r);
    bench_csv("tune_cold", "gemm_nt 4096x4096x4096", "bf16", "tl_autotune (wall s)", wall * 1e3, r->passed / wall,
              "candidates/s", 0, 0);
    tl_tune_result_destroy(r);
}

/* ------------------------------------------------------------------------ */
/* (b): after tuning, the op against the best of the sweep                   */
/* ------------------------------------------------------------------------ */

enum { OP, BEST, HEURISTIC, CUBLAS, NWORK };
static const char *const work_names[NWORK] = {"tl_op_gemm (tuned)", "tuned best, explicit", "heuristic schedule",
                                              "cuBLAS"};

typedef struct work {
    gemm_operands *ops;
    tl_gemm_desc d;
    int cublas;
} work;

static tl_status run(void *user, void *stream)
{
    work *w = user;
    gemm_operands *o = w->ops;
    int i = gemm_operands_next(o);
    return w->cublas ? tl_baseline_gemm(o->ctx, &w->d, o->a[i], o->b[i], 0, o->c[i], stream)
                     : tl_op_gemm(o->ctx, &w->d, o->a[i], o->b[i], 0, o->c[i], stream);
}

/* tl_op_gemm's output (its own choice) against cuBLAS's with f32 output. */
static double check_op(gemm_operands *o, const tl_gemm_desc *d, int *pass)
{
    uint64_t ref;
    BENCH_CHECK(tl_malloc(o->ctx, (size_t)(o->m * o->n) * 4, &ref));
    tl_gemm_desc f = *d;
    f.out_dtype = TL_F32;
    BENCH_CHECK(tl_baseline_gemm(o->ctx, &f, o->a[0], o->b[0], 0, ref, NULL));
    BENCH_CHECK(tl_memset_u8(o->ctx, o->c[0], 0xFF, gemm_operands_c_bytes(o), NULL));
    BENCH_CHECK(tl_op_gemm(o->ctx, d, o->a[0], o->b[0], 0, o->c[0], NULL));
    BENCH_CHECK(tl_synchronize(o->ctx));
    tl_span out = {.dtype = d->out_dtype, .n = o->m * o->n, .dptr = o->c[0]};
    tl_span r = {.dtype = TL_F32, .n = o->m * o->n, .dptr = ref};
    tl_check_result res;
    BENCH_CHECK(tl_check(o->ctx, &out, &r, 1e-2, &res));
    tl_free(o->ctx, ref);
    *pass = res.pass;
    return res.rel_err;
}

typedef struct row {
    char shape[64], layout[4], tuned[160];
    double tf[NWORK];
    int pass;
} row;

static void compare(tl_ctx *ctx, tl_ctx *plain, const tl_gemm_desc *d, const tl_tune_result *r, row *out)
{
    gemm_operands ops;
    BENCH_CHECK(gemm_operands_init(&ops, ctx, d->m, d->n, d->k, d->in_dtype, d->out_dtype));
    work w[NWORK];
    for (int i = 0; i < NWORK; i++)
        w[i] = (work){.ops = &ops, .d = *d, .cublas = i == CUBLAS};
    w[BEST].d.schedule = tl_gemm_schedule_from_config(&r->entries[0].config);
    w[HEURISTIC].d.schedule = tl_op_gemm_schedule(plain, d); /* a context without records */
    tl_work_fn fns[NWORK] = {run, run, run, run};
    void *users[NWORK] = {&w[0], &w[1], &w[2], &w[3]};
    tl_timing t[NWORK];
    tl_timing_options opt = {.warmup = 3, .reps = 30};
    BENCH_CHECK(tl_time_interleaved(ctx, NULL, NWORK, fns, users, &opt, t));
    double rel = check_op(&ops, d, &out->pass);
    double flop = 2.0 * (double)d->m * (double)d->n * (double)d->k;
    snprintf(out->layout, sizeof out->layout, "%s", d->trans_b ? "NT" : "NN");
    snprintf(out->tuned, sizeof out->tuned, "%s", r->entries[0].text);
    for (int i = 0; i < NWORK; i++) /* all rates first: the ratios need cuBLAS's */
        out->tf[i] = flop / (t[i].median_ms * 1e-3) / 1e12;
    for (int i = 0; i < NWORK; i++) {
        char op[24];
        snprintf(op, sizeof op, "gemm_%s_tuned", d->trans_b ? "nt" : "nn");
        if (i == CUBLAS)
            bench_csv_baseline(op, out->shape, "bf16", work_names[i], t[i].median_ms, out->tf[i], "TFLOP/s");
        else
            bench_csv(op, out->shape, "bf16", work_names[i], t[i].median_ms, out->tf[i], "TFLOP/s",
                      out->tf[i] / out->tf[CUBLAS], i == OP ? rel : 0);
    }
    gemm_operands_free(&ops);
}

static void print_rows(const row *rows, int n)
{
    printf("\nAfter tuning: tl_op_gemm (its own choice, from the record) against the best schedule of the\n"
           "sweep given explicitly, the heuristic's schedule and cuBLAS, timed together (TFLOP/s)\n");
    printf("%-18s %-3s %9s %9s %9s %9s %8s %8s  %s\n", "M x N x K", "B", "op", "best", "heur.", "cuBLAS",
           "op/best", "op/cuB", "tuned schedule");
    int below = 0;
    for (int i = 0; i < n; i++) {
        const row *x = &rows[i];
        double ratio = x->tf[OP] / x->tf[BEST];
        below += ratio < 0.98;
        printf("%-18s %-3s %9.1f %9.1f %9.1f %9.1f %8.3f %8.3f  %s%s\n", x->shape, x->layout, x->tf[OP], x->tf[BEST],
               x->tf[HEURISTIC], x->tf[CUBLAS], ratio, x->tf[OP] / x->tf[CUBLAS], x->tuned,
               x->pass ? "" : "  CHECK FAILED");
    }
    printf("op/best below 0.98 (beyond timing noise) at %d of %d shapes\n", below, n);
}

static const int64_t anchor_shapes[][3] = {
    {1024, 1024, 1024},  {2048, 2048, 2048},   {4096, 4096, 4096},   {8192, 8192, 8192},  {16384, 16384, 16384},
    {8192, 8192, 1024},  {4096, 14336, 4096},  {16384, 4096, 4096},  {4096, 4096, 16384},
};
#define N_ANCHORS (int)(sizeof anchor_shapes / sizeof anchor_shapes[0])

static void anchors(tl_ctx *ctx, int nt, int nn, double budget)
{
    tl_ctx_options o = tl_ctx_default_options();
    o.disk_cache = 0;
    tl_ctx *plain;
    BENCH_CHECK(tl_ctx_create(&o, &plain, NULL, 0));
    row rows[2 * N_ANCHORS];
    int n = 0;
    for (int t = 1; t >= 0; t--) {
        if ((t && !nt) || (!t && !nn))
            continue;
        for (int i = 0; i < N_ANCHORS; i++) {
            tl_gemm_desc d = {.m = anchor_shapes[i][0], .n = anchor_shapes[i][1], .k = anchor_shapes[i][2],
                              .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = t};
            tl_tune_result *r = tune(ctx, &d, budget, 1);
            printf("\ntuned gemm bf16 %s %s: %d passed of %d, %.1f s%s\n", t ? "NT" : "NN", r->shape, r->passed, r->n,
                   r->total_s, r->saved ? ", recorded" : "");
            print_ranking(r);
            memset(&rows[n], 0, sizeof rows[n]);
            snprintf(rows[n].shape, sizeof rows[n].shape, "%s", r->shape);
            if (r->passed > 0)
                compare(ctx, plain, &d, r, &rows[n++]);
            tl_tune_result_destroy(r);
        }
    }
    print_rows(rows, n);
    tl_ctx_destroy(plain);
}

/* ------------------------------------------------------------------------ */
/* The softmax after tuning                                                  */
/* ------------------------------------------------------------------------ */

typedef struct softmax_work {
    tl_ctx *ctx;
    tl_softmax_desc d;
    uint64_t x, y;
    int copy;
} softmax_work;

static tl_status run_softmax(void *user, void *stream)
{
    softmax_work *w = user;
    size_t bytes = (size_t)(w->d.rows * w->d.cols) * tl_dtype_size(w->d.in_dtype);
    return w->copy ? tl_memcpy_dtod(w->ctx, w->y, w->x, bytes, stream)
                   : tl_op_softmax(w->ctx, &w->d, w->x, w->y, stream);
}

static void softmax_shapes(tl_ctx *ctx, tl_ctx *plain, double budget)
{
    const int64_t shapes[][2] = {{16384, 1024}, {8192, 4096}, {4096, 8192}, {32768, 2048}, {2048, 32768}};
    printf("\nRow softmax fp16 after tuning: GB/s (input read + output written once)\n");
    printf("%-14s %9s %9s %9s %8s  %s\n", "rows x cols", "tuned", "default", "copy", "t/dflt", "tuned schedule");
    for (int i = 0; i < 5; i++) {
        tl_softmax_desc d = {.rows = shapes[i][0], .cols = shapes[i][1], .in_dtype = TL_F16, .out_dtype = TL_F16};
        tl_tune_request q = {.op = "softmax", .desc = &d, .budget_s = budget, .save = 1,
                             .progress = tl_tune_progress_stderr};
        tl_tune_result *r = NULL;
        BENCH_CHECK(tl_autotune(ctx, &q, &r));
        print_ranking(r);
        size_t bytes = (size_t)(d.rows * d.cols) * 2;
        softmax_work w[3] = {{ctx, d, 0, 0, 0}, {ctx, d, 0, 0, 0}, {ctx, d, 0, 0, 1}};
        w[1].d.schedule = tl_op_softmax_schedule(plain, &d); /* the untuned default */
        BENCH_CHECK(tl_malloc(ctx, bytes, &w[0].x));
        BENCH_CHECK(tl_malloc(ctx, bytes, &w[0].y));
        BENCH_CHECK(tl_random_fill(ctx, w[0].x, TL_F16, d.rows * d.cols, 9, -4, 4, NULL));
        for (int j = 1; j < 3; j++)
            w[j].x = w[0].x, w[j].y = w[0].y;
        tl_work_fn fns[3] = {run_softmax, run_softmax, run_softmax};
        void *users[3] = {&w[0], &w[1], &w[2]};
        tl_timing t[3];
        tl_timing_options opt = {.warmup = 3, .reps = 30, .flush_l2 = 1};
        BENCH_CHECK(tl_time_interleaved(ctx, NULL, 3, fns, users, &opt, t));
        double gbs[3];
        for (int j = 0; j < 3; j++)
            gbs[j] = 2.0 * (double)bytes / (t[j].median_ms * 1e-3) / 1e9;
        char shape[48];
        snprintf(shape, sizeof shape, "%lldx%lld", (long long)d.rows, (long long)d.cols);
        bench_csv_baseline("softmax_tuned", shape, "f16", "copy", t[2].median_ms, gbs[2], "GB/s");
        bench_csv("softmax_tuned", shape, "f16", "tl_op_softmax (tuned)", t[0].median_ms, gbs[0], "GB/s",
                  gbs[0] / gbs[2], 0);
        bench_csv("softmax_tuned", shape, "f16", "tl_op_softmax (default)", t[1].median_ms, gbs[1], "GB/s",
                  gbs[1] / gbs[2], 0);
        printf("%-14s %9.1f %9.1f %9.1f %8.3f  %s\n", shape, gbs[0], gbs[1], gbs[2], gbs[0] / gbs[1],
               r->passed ? r->entries[0].text : "(none passed)");
        tl_free(ctx, w[0].x), tl_free(ctx, w[0].y);
        tl_tune_result_destroy(r);
    }
}

int main(int argc, char **argv)
{
    int do_cold = 0, do_anchors = 0, do_softmax = 0, nt = 1, nn = 1;
    double budget = 120;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "cold") == 0)
            do_cold = 1;
        else if (strcmp(argv[i], "anchors") == 0)
            do_anchors = 1;
        else if (strcmp(argv[i], "softmax") == 0)
            do_softmax = 1;
        else if (strcmp(argv[i], "nt") == 0)
            nn = 0;
        else if (strcmp(argv[i], "nn") == 0)
            nt = 0;
        else if (strcmp(argv[i], "both") == 0)
            nt = nn = 1;
        else if (strcmp(argv[i], "--budget") == 0 && i + 1 < argc)
            budget = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_tune [cold] [anchors] [softmax] [nt|nn|both] [--budget SECONDS]\n");
            return 2;
        }
    }
    if (!do_cold && !do_anchors && !do_softmax)
        do_cold = do_anchors = 1;
    /* a cache of its own: cold for (a), and the user's records untouched */
    if (!mkdtemp(cache_dir))
        return 1;
    atexit(remove_cache_dir);
    setenv("TILEC_CACHE_DIR", cache_dir, 1);
    tl_ctx *ctx = bench_open("bench_tune");
    printf("csv,op,shape,dtype,impl,ms,rate,unit,ratio_to_baseline,rel_err\n");
    if (do_cold)
        cold(ctx, budget);
    if (do_anchors)
        anchors(ctx, nt, nn, budget);
    if (do_softmax) {
        tl_ctx_options o = tl_ctx_default_options();
        o.disk_cache = 0;
        tl_ctx *plain;
        BENCH_CHECK(tl_ctx_create(&o, &plain, NULL, 0));
        softmax_shapes(ctx, plain, budget);
        tl_ctx_destroy(plain);
    }
    tl_ctx_destroy(ctx);
    return 0;
}
