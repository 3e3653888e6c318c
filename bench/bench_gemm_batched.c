/*
 * bench_gemm_batched.c - tl_op_gemm_ex against cuBLAS (tl_baseline_gemm_ex)
 * on the calls a BLAS user makes, bf16 in and out, in one run: strided
 * batches (cublasGemmStridedBatchedEx), pointer-array batches
 * (cublasGemmBatchedEx), a matrix shared by the batch (stride 0), leading
 * dimensions wider than the rows, and beta = 1 (C read). Each case times
 * ours and cuBLAS's interleaved (tl_time_interleaved) with the op's own
 * schedule, checks ours against cuBLAS's output (relative error, 1e-2) and
 * prints a CSV line per implementation (bench.h) and a table.
 *
 * Usage: bench_gemm_batched [BATCHxMxNxK]   (one strided shape, NT and NN)
 */
#include "bench.h"

#include <inttypes.h>
#include <string.h>

typedef enum form { STRIDED, SHARED_B, ARRAYS, LD_BETA } form;

typedef struct bcase {
    int64_t batch, m, n, k;
    form f;
} bcase;

static const char *form_name(form f)
{
    static const char *const names[] = {"strided", "B shared", "pointer arrays", "ld+64, beta 1"};
    return names[f];
}

static const bcase default_cases[] = {
    {8, 1024, 1024, 512, STRIDED},  {32, 512, 512, 512, STRIDED}, {64, 256, 256, 256, STRIDED},
    {16, 4096, 128, 4096, STRIDED}, {16, 1024, 1024, 1024, SHARED_B}, {8, 1024, 1024, 512, ARRAYS},
    {64, 256, 256, 256, ARRAYS},    {8, 1024, 1024, 512, LD_BETA},
};

/* One side of a case: its operands and arguments. */
typedef struct side {
    tl_ctx *ctx;
    tl_gemm_desc d;
    tl_gemm_args g;
    int baseline;
} side;

static tl_status run(void *user, void *stream)
{
    side *s = user;
    return s->baseline ? tl_baseline_gemm_ex(s->ctx, &s->d, &s->g, stream) : tl_op_gemm_ex(s->ctx, &s->d, &s->g, stream);
}

typedef struct buffers {
    uint64_t a, b, c[2], arr[2][3];
    int64_t ld_pad, sa, sb, sc;
} buffers;

/* Operands of case c in one buffer each (C twice: ours and cuBLAS's), the
 * arrays of pointers into them for the pointer-array form. */
static void make_buffers(tl_ctx *ctx, const bcase *c, int trans_b, buffers *bf, side sides[2])
{
    memset(bf, 0, sizeof *bf);
    int64_t pad = c->f == LD_BETA ? 64 : 0;
    int64_t lda = c->k + pad, brow = trans_b ? c->k : c->n, ldb = brow + pad, ldc = c->n + pad;
    int64_t brows = trans_b ? c->n : c->k;
    bf->sa = c->m * lda, bf->sb = c->f == SHARED_B ? 0 : brows * ldb, bf->sc = c->m * ldc;
    int64_t na = c->batch * bf->sa, nb = c->f == SHARED_B ? brows * ldb : c->batch * bf->sb, nc = c->batch * bf->sc;
    BENCH_CHECK(tl_malloc(ctx, (size_t)na * 2, &bf->a));
    BENCH_CHECK(tl_malloc(ctx, (size_t)nb * 2, &bf->b));
    BENCH_CHECK(tl_random_fill(ctx, bf->a, TL_BF16, na, 51, -1, 1, NULL));
    BENCH_CHECK(tl_random_fill(ctx, bf->b, TL_BF16, nb, 52, -1, 1, NULL));
    for (int w = 0; w < 2; w++) {
        BENCH_CHECK(tl_malloc(ctx, (size_t)nc * 2, &bf->c[w]));
        BENCH_CHECK(tl_random_fill(ctx, bf->c[w], TL_BF16, nc, 53, -1, 1, NULL)); /* the same C for beta */
        side *s = &sides[w];
        s->ctx = ctx;
        s->baseline = w;
        s->d = (tl_gemm_desc){.m = c->m, .n = c->n, .k = c->k, .in_dtype = TL_BF16, .out_dtype = TL_BF16,
                              .trans_b = trans_b};
        s->g = tl_gemm_default_args();
        s->g.batch = c->batch;
        s->g.lda = lda, s->g.ldb = ldb, s->g.ldc = ldc;
        s->g.beta = c->f == LD_BETA ? 1 : 0;
        if (c->f == ARRAYS) {
            uint64_t *p[3];
            for (int o = 0; o < 3; o++) {
                p[o] = malloc(8 * (size_t)c->batch);
                if (!p[o])
                    exit(1);
            }
            for (int64_t e = 0; e < c->batch; e++) {
                p[0][e] = bf->a + (uint64_t)(e * bf->sa) * 2;
                p[1][e] = bf->b + (uint64_t)(e * bf->sb) * 2;
                p[2][e] = bf->c[w] + (uint64_t)(e * bf->sc) * 2;
            }
            for (int o = 0; o < 3; o++) {
                BENCH_CHECK(tl_malloc(ctx, 8 * (size_t)c->batch, &bf->arr[w][o]));
                BENCH_CHECK(tl_memcpy_htod(ctx, bf->arr[w][o], p[o], 8 * (size_t)c->batch));
                free(p[o]);
            }
            s->g.a_array = bf->arr[w][0], s->g.b_array = bf->arr[w][1], s->g.c_array = bf->arr[w][2];
        } else {
            s->g.a = bf->a, s->g.b = bf->b, s->g.c = bf->c[w];
            s->g.stride_a = bf->sa, s->g.stride_b = bf->sb, s->g.stride_c = bf->sc;
        }
    }
}

static void free_buffers(tl_ctx *ctx, buffers *bf)
{
    tl_free(ctx, bf->a), tl_free(ctx, bf->b);
    for (int w = 0; w < 2; w++) {
        tl_free(ctx, bf->c[w]);
        for (int o = 0; o < 3; o++)
            tl_free(ctx, bf->arr[w][o]);
    }
}

static void run_case(tl_ctx *ctx, const bcase *c, int trans_b)
{
    buffers bf;
    side sides[2];
    make_buffers(ctx, c, trans_b, &bf, sides);
    char shape[96];
    snprintf(shape, sizeof shape, "%" PRId64 "x%" PRId64 "x%" PRId64 "x%" PRId64 "_%s_%s", c->batch, c->m, c->n,
             c->k, trans_b ? "nt" : "nn", c->f == STRIDED ? "strided" : c->f == SHARED_B ? "bshared"
                                          : c->f == ARRAYS  ? "ptrarray"
                                                            : "ldbeta");
    /* once each, on the same C: the outputs must agree (beta reads C, so
     * each side runs exactly once before the comparison) */
    tl_status st = run(&sides[1], NULL);
    if (st == TL_ERR_NO_CUBLAS || st == TL_ERR_UNSUPPORTED) {
        printf("%-40s cuBLAS: %s\n", shape, tl_ctx_error(ctx));
        free_buffers(ctx, &bf);
        return;
    }
    BENCH_CHECK(st);
    BENCH_CHECK(run(&sides[0], NULL));
    BENCH_CHECK(tl_synchronize(ctx));
    int64_t nc = c->batch * bf.sc;
    tl_span o = {.dtype = TL_BF16, .n = nc, .dptr = bf.c[0]}, r = {.dtype = TL_BF16, .n = nc, .dptr = bf.c[1]};
    tl_check_result res;
    BENCH_CHECK(tl_check(ctx, &o, &r, 1e-2, &res));
    tl_work_fn fns[2] = {run, run};
    void *users[2] = {&sides[0], &sides[1]};
    tl_timing t[2];
    tl_timing_options opt = {.warmup = 5, .reps = 30, .flush_l2 = 1};
    BENCH_CHECK(tl_time_interleaved(ctx, NULL, 2, fns, users, &opt, t));
    double flop = 2.0 * (double)c->batch * (double)c->m * (double)c->n * (double)c->k;
    double ours = flop / (t[0].median_ms * 1e9), theirs = flop / (t[1].median_ms * 1e9);
    bench_csv_baseline("gemm_batched", shape, "bf16", "cublas", t[1].median_ms, theirs, "TFLOP/s");
    bench_csv("gemm_batched", shape, "bf16", "tl_op_gemm_ex", t[0].median_ms, ours, "TFLOP/s", ours / theirs,
              res.rel_err);
    printf("%-40s %-15s ours %7.1f  cuBLAS %7.1f TFLOP/s  %.3fx  rel err %.1e%s\n", shape, form_name(c->f), ours,
           theirs, ours / theirs, res.rel_err, res.pass ? "" : "  MISMATCH");
    free_buffers(ctx, &bf);
}

int main(int argc, char **argv)
{
    tl_ctx *ctx = bench_open("bench_gemm_batched");
    bcase one;
    const bcase *cases = default_cases;
    int n = (int)(sizeof default_cases / sizeof default_cases[0]);
    if (argc > 1) {
        if (sscanf(argv[1], "%" SCNd64 "x%" SCNd64 "x%" SCNd64 "x%" SCNd64, &one.batch, &one.m, &one.n, &one.k) != 4 ||
            one.batch < 1 || one.m < 1 || one.n < 1 || one.k < 1) {
            fprintf(stderr, "usage: bench_gemm_batched [BATCHxMxNxK]\n");
            return 2;
        }
        one.f = STRIDED;
        cases = &one, n = 1;
    }
    for (int i = 0; i < n; i++)
        for (int t = 1; t >= 0; t--)
            run_case(ctx, &cases[i], t);
    tl_ctx_destroy(ctx);
    return 0;
}
