/*
 * bench_gemm_fp8.c - the prebuilt GEMM on 8-bit float inputs (E4M3; E5M2
 * with --e5m2), bf16 output, B as [N, K] (both operands K-major: the form
 * our FP8 kernels and cuBLASLt's take), the op's own schedule, against
 * cuBLASLt's FP8 GEMM (tl_baseline_gemm) in the same run.
 *
 * Timed as bench_gemm's sweep and bench_epilogue time: the operands
 * rotated over copies that move more than twice the L2 per pass
 * (gemm_operands), ours and cuBLASLt interleaved repetition by repetition
 * (tl_time_interleaved), the median of each. Every shape checks our C
 * against cuBLASLt's; 512x512x512 checks both against a float64 reference
 * computed on the host from the same 8-bit codes (tl_random_host gives the
 * device's values bit for bit).
 *
 * Until tl_op_gemm takes 8-bit inputs it answers TL_ERR_DTYPE: the message
 * is printed and cuBLASLt is timed alone; likewise, where cuBLASLt has no
 * kernel (E5M2 x E5M2 has none documented), ours is timed alone.
 *
 * Usage: bench_gemm_fp8 [MxNxK] [--e5m2] [--sweep]   (MxNxK: that shape
 * instead of the list; --sweep: every schedule of the tuner's space for
 * 8-bit inputs, tl_gemm_candidates, each timed with cuBLASLt in its own
 * interleaved run, instead of the op's own)
 */
#include "bench.h"
#include "gemm_sweep.h"

#include <math.h>
#include <string.h>

typedef struct shape {
    int64_t m, n, k;
} shape;

static const shape default_shapes[] = {
    {4096, 4096, 4096}, {8192, 8192, 8192}, {8192, 8192, 1024}, {4096, 14336, 4096}, {16384, 4096, 4096},
};

enum { OURS, CUBLASLT, NIMPL };
static const char *const impl_names[NIMPL] = {"tl_op_gemm", "cuBLASLt"};

typedef struct work {
    gemm_operands *ops;
    tl_gemm_desc d;
    int impl;
    int copy; /* >= 0: this copy; -1: rotate */
} work;

static tl_status run(void *user, void *stream)
{
    work *w = user;
    gemm_operands *o = w->ops;
    int i = w->copy >= 0 ? w->copy : gemm_operands_next(o);
    if (w->impl == OURS)
        return tl_op_gemm(o->ctx, &w->d, o->a[i], o->b[i], 0, o->c[i], stream);
    return tl_baseline_gemm(o->ctx, &w->d, o->a[i], o->b[i], 0, o->c[i], stream);
}

/* Runs w once on copy 0 into a poisoned C and keeps the output in keep.
 * A failure's message is printed; its status returned. */
static tl_status run_once(work *w, uint64_t keep)
{
    gemm_operands *o = w->ops;
    size_t bytes = gemm_operands_c_bytes(o);
    BENCH_CHECK(tl_memset_u8(o->ctx, o->c[0], 0xFF, bytes, NULL));
    w->copy = 0;
    tl_status st = run(w, NULL);
    if (st == TL_OK)
        st = tl_synchronize(o->ctx);
    w->copy = -1;
    if (st != TL_OK) {
        printf("  %s: %s: %s\n", impl_names[w->impl], tl_status_name(st), tl_ctx_error(o->ctx));
        return st;
    }
    BENCH_CHECK(tl_memcpy_dtod(o->ctx, keep, o->c[0], bytes, NULL));
    BENCH_CHECK(tl_synchronize(o->ctx));
    return TL_OK;
}

/* ||out - ref|| / ||ref|| of two device outputs of m n elements of dt, or
 * of a device output against a host reference (ref_host). */
static double rel_err(tl_ctx *ctx, tl_dtype dt, int64_t mn, uint64_t out, uint64_t ref, const double *ref_host)
{
    tl_span o = {.dtype = dt, .n = mn, .dptr = out};
    tl_span r = ref_host ? (tl_span){.dtype = TL_F64, .n = mn, .host = ref_host}
                         : (tl_span){.dtype = dt, .n = mn, .dptr = ref};
    tl_check_result res;
    BENCH_CHECK(tl_check(ctx, &o, &r, 1e-2, &res));
    return res.nonfinite ? INFINITY : res.rel_err;
}

/* A B^T in double from copy 0's codes, drawn again on the host (seeds 1
 * and 2 in [-1, 1), as gemm_operands draws copy 0). */
static double *host_reference(const gemm_operands *o)
{
    int64_t m = o->m, n = o->n, k = o->k;
    uint8_t *a = malloc((size_t)(m * k)), *b = malloc((size_t)(n * k));
    double *fa = malloc((size_t)(m * k) * sizeof *fa), *fb = malloc((size_t)(n * k) * sizeof *fb);
    double *c = malloc((size_t)(m * n) * sizeof *c);
    if (!a || !b || !fa || !fb || !c) {
        fprintf(stderr, "bench_gemm_fp8: out of host memory\n");
        exit(1);
    }
    BENCH_CHECK(tl_random_host(a, o->in, m * k, 1, -1, 1));
    BENCH_CHECK(tl_random_host(b, o->in, n * k, 2, -1, 1));
    float (*decode)(uint8_t) = o->in == TL_F8E5M2 ? tl_f8e5m2_to_f32 : tl_f8e4m3_to_f32;
    for (int64_t i = 0; i < m * k; i++)
        fa[i] = decode(a[i]);
    for (int64_t i = 0; i < n * k; i++)
        fb[i] = decode(b[i]);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t kk = 0; kk < k; kk++)
                s += fa[i * k + kk] * fb[j * k + kk];
            c[i * n + j] = s;
        }
    free(a), free(b), free(fa), free(fb);
    return c;
}

typedef struct row {
    shape s;
    int ok[NIMPL];
    double ms[NIMPL], tflops[NIMPL];
    double rel; /* ours against cuBLASLt; NAN when either failed */
} row;

static void print_row(const row *r, const char *dtype)
{
    char shp[64];
    snprintf(shp, sizeof shp, "%lldx%lldx%lld", (long long)r->s.m, (long long)r->s.n, (long long)r->s.k);
    for (int i = 0; i < NIMPL; i++)
        if (r->ok[i])
            printf("  %-12s %9.4f ms %8.1f TFLOP/s\n", impl_names[i], r->ms[i], r->tflops[i]);
    if (r->ok[OURS] && r->ok[CUBLASLT])
        printf("  ours / cuBLASLt: %.3f x, rel err against cuBLASLt %.1e%s\n", r->tflops[OURS] / r->tflops[CUBLASLT],
               r->rel, r->rel <= 1e-2 ? "" : "  CHECK FAILED");
    if (r->ok[CUBLASLT])
        bench_csv_baseline("gemm_fp8_nt", shp, dtype, "cuBLASLt", r->ms[CUBLASLT], r->tflops[CUBLASLT], "TFLOP/s");
    if (r->ok[OURS])
        bench_csv("gemm_fp8_nt", shp, dtype, "tl_op_gemm", r->ms[OURS], r->tflops[OURS], "TFLOP/s",
                  r->ok[CUBLASLT] ? r->tflops[OURS] / r->tflops[CUBLASLT] : 0, r->ok[CUBLASLT] ? r->rel : 0);
}

/* One shape: each implementation run once and checked, then those that
 * ran timed together. With check_host, both also against the host's
 * float64 product. */
static row bench_shape(tl_ctx *ctx, const shape *s, tl_dtype in, int check_host, const tl_gemm_schedule *sched)
{
    row r = {.s = *s, .rel = NAN};
    gemm_operands ops;
    BENCH_CHECK(gemm_operands_init(&ops, ctx, s->m, s->n, s->k, in, TL_BF16));
    tl_gemm_desc d = {.m = s->m, .n = s->n, .k = s->k, .in_dtype = in, .out_dtype = TL_BF16, .trans_b = 1};
    if (sched)
        d.schedule = *sched;
    printf("\ngemm_fp8_nt %s -> bf16 %lldx%lldx%lld, operands rotated over %d cop%s\n", tl_dtype_name(in),
           (long long)s->m, (long long)s->n, (long long)s->k, ops.copies, ops.copies == 1 ? "y" : "ies");
    tl_gemm_schedule own = tl_op_gemm_schedule(ctx, &d);
    if (own.block_m) {
        char text[96];
        gemm_schedule_text(&own, text, sizeof text);
        printf("  the op's schedule: %s\n", text);
    }
    int64_t mn = s->m * s->n;
    size_t bytes = gemm_operands_c_bytes(&ops);
    uint64_t out[NIMPL];
    work w[NIMPL];
    for (int i = 0; i < NIMPL; i++) {
        BENCH_CHECK(tl_malloc(ctx, bytes, &out[i]));
        w[i] = (work){.ops = &ops, .d = d, .impl = i, .copy = -1};
        r.ok[i] = run_once(&w[i], out[i]) == TL_OK;
    }
    if (r.ok[OURS] && r.ok[CUBLASLT])
        r.rel = rel_err(ctx, TL_BF16, mn, out[OURS], out[CUBLASLT], NULL);
    if (check_host) {
        double *ref = host_reference(&ops);
        for (int i = 0; i < NIMPL; i++)
            if (r.ok[i])
                printf("  %-12s rel err against the host's float64 product: %.1e\n", impl_names[i],
                       rel_err(ctx, TL_BF16, mn, out[i], 0, ref));
        free(ref);
    }
    tl_work_fn fns[NIMPL];
    void *users[NIMPL];
    int which[NIMPL], n = 0;
    for (int i = 0; i < NIMPL; i++)
        if (r.ok[i])
            fns[n] = run, users[n] = &w[i], which[n++] = i;
    if (n) {
        tl_timing t[NIMPL];
        tl_timing_options opt = {.warmup = 3, .reps = s->m * s->n * s->k > ((int64_t)1 << 37) ? 30 : 60};
        BENCH_CHECK(tl_time_interleaved(ctx, NULL, n, fns, users, &opt, t));
        double flop = 2.0 * (double)s->m * (double)s->n * (double)s->k;
        for (int j = 0; j < n; j++) {
            r.ms[which[j]] = t[j].median_ms;
            r.tflops[which[j]] = flop / t[j].median_ms / 1e9;
        }
    }
    print_row(&r, tl_dtype_name(in));
    for (int i = 0; i < NIMPL; i++)
        tl_free(ctx, out[i]);
    gemm_operands_free(&ops);
    return r;
}

static void print_summary(const row *rows, int n, tl_dtype in)
{
    printf("\nGEMM %s in, f32 accumulate, bf16 out, B as [N, K]: the op's own schedule against cuBLASLt in the "
           "same run\n", tl_dtype_name(in));
    printf("%-20s %9s %9s %7s %9s\n", "M x N x K", "ours", "cuBLASLt", "ratio", "rel err");
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        char sh[48], ours[16] = "-", lt[16] = "-", ratio[16] = "-", rel[16] = "-";
        snprintf(sh, sizeof sh, "%lldx%lldx%lld", (long long)r->s.m, (long long)r->s.n, (long long)r->s.k);
        if (r->ok[OURS])
            snprintf(ours, sizeof ours, "%.1f", r->tflops[OURS]);
        if (r->ok[CUBLASLT])
            snprintf(lt, sizeof lt, "%.1f", r->tflops[CUBLASLT]);
        if (r->ok[OURS] && r->ok[CUBLASLT]) {
            snprintf(ratio, sizeof ratio, "%.3f", r->tflops[OURS] / r->tflops[CUBLASLT]);
            snprintf(rel, sizeof rel, "%.1e", r->rel);
        }
        printf("%-20s %9s %9s %7s %9s\n", sh, ours, lt, ratio, rel);
    }
    printf("(TFLOP/s = 2 M N K / median time; rel err: ours against cuBLASLt)\n");
}

int main(int argc, char **argv)
{
    shape one;
    const shape *shapes = default_shapes;
    int nshapes = (int)(sizeof default_shapes / sizeof default_shapes[0]);
    tl_dtype in = TL_F8E4M3;
    int sweep = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--e5m2")) {
            in = TL_F8E5M2;
        } else if (!strcmp(argv[i], "--sweep")) {
            sweep = 1;
        } else if (gemm_parse_shape(argv[i], &one.m, &one.n, &one.k) == 0) {
            shapes = &one, nshapes = 1;
        } else {
            fprintf(stderr, "usage: bench_gemm_fp8 [MxNxK] [--e5m2] [--sweep]\n");
            return 2;
        }
    }
    tl_ctx *ctx = bench_open("bench_gemm_fp8");
    printf("csv,op,shape,dtype,impl,ms,rate,unit,ratio_to_baseline,rel_err\n");
    if (sweep) { /* each schedule of the space against cuBLASLt, one line each at the end */
        for (int i = 0; i < nshapes; i++) {
            tl_gemm_desc d = {.m = shapes[i].m, .n = shapes[i].n, .k = shapes[i].k, .in_dtype = in,
                              .out_dtype = TL_BF16, .trans_b = 1};
            tl_gemm_schedule cand[64];
            int nc = tl_gemm_candidates(ctx, &d, cand, 64);
            nc = nc > 64 ? 64 : nc;
            double ratio[64];
            for (int c = 0; c < nc; c++) {
                row r = bench_shape(ctx, &shapes[i], in, 0, &cand[c]);
                ratio[c] = r.ok[OURS] && r.ok[CUBLASLT] ? r.tflops[OURS] / r.tflops[CUBLASLT] : 0;
            }
            printf("\nsweep %lldx%lldx%lld %s, x cuBLASLt:\n", (long long)d.m, (long long)d.n, (long long)d.k,
                   tl_dtype_name(in));
            for (int c = 0; c < nc; c++) {
                char text[96];
                gemm_schedule_text(&cand[c], text, sizeof text);
                printf("  %6.3f  %s\n", ratio[c], text);
            }
        }
        tl_ctx_destroy(ctx);
        return 0;
    }
    /* accuracy first, at a size the host multiplies in a moment */
    bench_shape(ctx, &(shape){512, 512, 512}, in, 1, NULL);
    row rows[sizeof default_shapes / sizeof default_shapes[0]];
    for (int i = 0; i < nshapes; i++)
        rows[i] = bench_shape(ctx, &shapes[i], in, 0, NULL);
    print_summary(rows, nshapes, in);
    tl_ctx_destroy(ctx);
    return 0;
}
