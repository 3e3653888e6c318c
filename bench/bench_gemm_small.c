/*
 * bench_gemm_small.c - tl_op_gemm with its own choice of schedule (what a
 * user gets without tuning) against cuBLAS at the shapes where one pass of
 * large tiles cannot fill the GPU: decode (M from 1 to 64, large N and K,
 * memory-bound on B) and small squares. Each shape, B as [N, K] (NT) and
 * as [K, N] (NN), times in one interleaved set (tl_time_interleaved, L2
 * flushed before each run): ours, cuBLAS, and a device-to-device copy
 * that moves as many bytes as the GEMM (A and B read, C written: a copy of
 * half of them, read once and written once). Ours is checked
 * against cuBLAS's output (relative error, 1e-2).
 *
 * Prints CSV lines (bench.h; the GB/s lines' ratio is to the copy, the
 * TFLOP/s lines' to cuBLAS) and a table: GB/s of the three, ours/cuBLAS,
 * ours/copy, TFLOP/s, the schedule (split_k included).
 *
 * Usage: bench_gemm_small [MxNxK] [--sweep] [--try SCHEDULE]...
 *   MxNxK    one shape, both layouts
 *   --sweep  also explicit schedules around the op's choice at each shape
 *            (more stages, wider N tiles, half and twice the slices), all
 *            timed in one interleaved set with cuBLAS: what the decode row
 *            of the heuristic should be
 *   --try S  (implies --sweep) time these schedules instead of the sweep's
 *            list, after the op's choice; S is key=value pairs joined by
 *            commas, keys bm bn bk st t sw pp sk swap ps stk gemv (the
 *            tl_gemm_schedule fields), e.g. gemv=1,bn=64,bk=256,t=128,sk=8.
 *            Up to 23; a schedule the op refuses is reported and left out
 */
#include "bench.h"

#include <inttypes.h>
#include <stddef.h>
#include <string.h>

typedef struct shape {
    int64_t m, n, k;
} shape;

static const shape default_shapes[] = {
    {1, 4096, 4096},  {8, 14336, 4096}, {16, 4096, 14336}, {32, 8192, 8192}, {64, 8192, 8192},
    {128, 8192, 8192}, {256, 8192, 8192}, {512, 512, 512},  {1000, 1000, 1000}, {1024, 1024, 1024},
};

typedef struct work {
    tl_ctx *ctx;
    tl_gemm_desc d;
    uint64_t a, b, c, copy_dst;
    size_t bytes;
    int kind; /* 0 ours, 1 cuBLAS, 2 the copy */
} work;

static tl_status run(void *user, void *stream)
{
    work *w = user;
    switch (w->kind) {
    case 0: return tl_op_gemm(w->ctx, &w->d, w->a, w->b, 0, w->c, stream);
    case 1: return tl_baseline_gemm(w->ctx, &w->d, w->a, w->b, 0, w->c, stream);
    default: return tl_memcpy_dtod(w->ctx, w->copy_dst, w->a, w->bytes / 2, stream);
    }
}

/* The schedules --sweep tries: the op's choice o and its neighbours (for
 * M = 1 with B as [N, K]: the matrix-vector kernel's shapes and the
 * tensor cores' swapped 64x16 tiles at 4 and 8 stages, split in 2 or not,
 * and three with more of B in flight (K steps of 128 at 8 stages in 2
 * slices, at 4 in 4; steps of 64 at 8 stages in 4);
 * for a swapped one: 4, 6 and 8 stages, 32-wide tiles of A, twice the
 * block_k at half and all the stages; for the
 * others: 6 stages (8 for a persistent one of 6, and half its stages of
 * twice its block_k: the same bytes in longer boxes), N tiles of 256, and
 * swapped 64x32 and 64x64 tiles in 0 or 2 slices), the persistent 64x128
 * tile in stream-K shares for M <= 64, with half, one fewer (from 4), twice
 * and four times its slices. At most 24. */
static int sweep_list(const tl_gemm_schedule *o, const tl_gemm_desc *d, tl_gemm_schedule *out)
{
    int n = 0;
    out[n++] = *o;
    tl_gemm_schedule x = *o;
    if (d->trans_b && d->m == 1) { /* the matrix-vector kernel: rows of B a block x K chunk / threads */
        static const int gv[][3] = {{1, 2048, 128}, {1, 1024, 64},  {1, 4096, 256}, {1, 2048, 64},
                                    {2, 1024, 128}, {2, 2048, 256}, {4, 1024, 256}, {1, 4096, 128}};
        for (int i = 0; i < 8; i++)
            if (!(o->gemv && o->block_n == gv[i][0] && o->block_k == gv[i][1] && o->threads == gv[i][2]))
                out[n++] = (tl_gemm_schedule){.block_n = gv[i][0], .block_k = gv[i][1], .threads = gv[i][2], .gemv = 1};
        for (int st = 4; st <= 8; st += 4) /* and the tensor cores' swapped tiles */
            for (int sk = 0; sk <= 2; sk += 2)
                out[n++] = (tl_gemm_schedule){64, 16, 64, st, 128, 8, 0, 0, sk, 1, 0, 0, 0, 0, 0};
        /* more of B in flight on each SM (128-160 KiB: two CTAs of 8 stages, or stages of 128-long
         * rows), for the short runs where the ramp is a large share (1x4096x4096: 17 us) */
        out[n++] = (tl_gemm_schedule){64, 16, 128, 8, 128, 8, 0, 0, 2, 1, 0, 0, 0, 0, 0};
        out[n++] = (tl_gemm_schedule){64, 16, 64, 8, 128, 8, 0, 0, 4, 1, 0, 0, 0, 0, 0};
        out[n++] = (tl_gemm_schedule){64, 16, 128, 4, 128, 8, 0, 0, 4, 1, 0, 0, 0, 0, 0};
        return n;
    }
    if (o->swap_ab) {
        for (int st = 4; st <= 8; st += 2)
            if (st != o->stages)
                x = *o, x.stages = st, out[n++] = x;
        if (o->block_n != 32)
            x = *o, x.block_n = 32, out[n++] = x;
        /* the same bytes in rows twice as long (two 128-byte boxes a row of a stage) */
        x = *o, x.block_k = 2 * o->block_k, x.stages = o->stages / 2 > 2 ? o->stages / 2 : 2, out[n++] = x;
        x.stages = o->stages > 2 ? o->stages : 2, out[n++] = x;
    } else {
        /* a deeper ring (8 stages where the op takes 6: more of B in flight on each SM, as cuBLAS's
         * decode kernel keeps, bench/NOTES.md session 19), and the same bytes in boxes twice as long */
        x.stages = o->persistent && o->stages >= 6 ? 8 : 6, out[n++] = x;
        if (o->persistent && o->block_k == 64)
            x = *o, x.block_k = 128, x.stages = o->stages / 2 > 2 ? o->stages / 2 : 2, out[n++] = x;
        x = *o, x.block_n = 256, x.stages = 4, out[n++] = x;
        for (int bn = 32; bn <= 64; bn *= 2)
            for (int sk = 0; sk <= 2; sk += 2)
                x = *o, x.block_m = 64, x.block_n = bn, x.stages = 4, x.swap_ab = 1, x.split_k = sk, x.pingpong = 0,
                out[n++] = x;
    }
    /* decode on every SM: the persistent 64x128 tile with each CTA an equal share of all tiles' K
     * steps (stream-K), where 64 tiles of it would leave half the SMs without a stream of B */
    if (d->m <= 64)
        for (int st = 4; st <= 6; st += 2)
            out[n++] = (tl_gemm_schedule){.block_m = 64, .block_n = 128, .block_k = 64, .stages = st, .threads = 128,
                                          .swizzle = 8, .persistent = 1, .stream_k = 1};
    int sk[4] = {o->split_k / 2 > 1 ? o->split_k / 2 : 0, o->split_k > 1 ? 2 * o->split_k : 2,
                 o->split_k > 1 ? 4 * o->split_k : 4, o->split_k > 3 ? o->split_k - 1 : 0};
    for (int i = 0; i < 4; i++)
        if (sk[i] != o->split_k && sk[i] <= 16 && (i == 0 ? o->split_k > 1 : i < 3 || sk[i] > 1))
            x = *o, x.split_k = sk[i], out[n++] = x;
    if (n > 24) { /* the callers' arrays hold 24 */
        fprintf(stderr, "bench_gemm_small: the sweep list grew past 24 schedules\n");
        exit(1);
    }
    return n;
}

static int sweep;
static tl_gemm_schedule tries[23];
static int ntries;

/* One --try: "key=value,..." into a schedule; 0 on a key or value it does not know. */
static int parse_try(const char *text, tl_gemm_schedule *s)
{
    static const struct {
        const char *key;
        size_t off;
    } keys[] = {
        {"bm", offsetof(tl_gemm_schedule, block_m)}, {"bn", offsetof(tl_gemm_schedule, block_n)},
        {"bk", offsetof(tl_gemm_schedule, block_k)}, {"st", offsetof(tl_gemm_schedule, stages)},
        {"t", offsetof(tl_gemm_schedule, threads)},  {"sw", offsetof(tl_gemm_schedule, swizzle)},
        {"pp", offsetof(tl_gemm_schedule, pingpong)}, {"sk", offsetof(tl_gemm_schedule, split_k)},
        {"swap", offsetof(tl_gemm_schedule, swap_ab)}, {"ps", offsetof(tl_gemm_schedule, persistent)},
        {"stk", offsetof(tl_gemm_schedule, stream_k)}, {"gemv", offsetof(tl_gemm_schedule, gemv)},
    };
    *s = (tl_gemm_schedule){0};
    for (const char *p = text; *p;) {
        char key[8];
        int value, used;
        if (sscanf(p, "%7[a-z]=%d%n", key, &value, &used) != 2)
            return 0;
        size_t i = 0;
        while (i < sizeof keys / sizeof keys[0] && strcmp(keys[i].key, key))
            i++;
        if (i == sizeof keys / sizeof keys[0])
            return 0;
        *(int *)((char *)s + keys[i].off) = value;
        p += used;
        if (*p == ',')
            p++;
        else if (*p)
            return 0;
    }
    return 1;
}

static void sweep_shape(tl_ctx *ctx, const shape *s, int trans_b, uint64_t a, uint64_t b, uint64_t c,
                        uint64_t c_ref)
{
    tl_gemm_desc d = {.m = s->m, .n = s->n, .k = s->k, .in_dtype = TL_BF16, .out_dtype = TL_BF16,
                      .trans_b = trans_b};
    tl_gemm_schedule list[24];
    tl_gemm_schedule own = tl_op_gemm_schedule(ctx, &d);
    int n = 1;
    list[0] = own;
    if (ntries) /* the op's choice, then the --try list */
        for (int i = 0; i < ntries; i++)
            list[n++] = tries[i];
    else
        n = sweep_list(&own, &d, list);
    work w[25];
    tl_work_fn fns[25];
    void *users[25];
    for (int i = 0; i <= n; i++) {
        w[i] = (work){.ctx = ctx, .d = d, .a = a, .b = b, .c = i < n ? c : c_ref, .kind = i < n ? 0 : 1};
        if (i < n)
            w[i].d.schedule = list[i];
        fns[i] = run, users[i] = &w[i];
    }
    size_t nc = (size_t)(s->m * s->n);
    BENCH_CHECK(run(&w[n], NULL));
    for (int i = 0; i < n; i++) { /* each checked against cuBLAS first; one the op refuses is left out */
        tl_status st = run(&w[i], NULL);
        if (st != TL_OK) {
            printf("  sweep: schedule %d refused: %s\n", i, tl_ctx_error(ctx));
            for (int j = i; j < n; j++) { /* the later ones (and cuBLAS, last) move down one */
                w[j] = w[j + 1];
                if (j + 1 < n)
                    list[j] = list[j + 1];
            }
            n--, i--;
            continue;
        }
        tl_span o = {.dtype = TL_BF16, .n = (int64_t)nc, .dptr = c};
        tl_span r = {.dtype = TL_BF16, .n = (int64_t)nc, .dptr = c_ref};
        tl_check_result res;
        BENCH_CHECK(tl_check(ctx, &o, &r, 1e-2, &res));
        if (!res.pass)
            printf("  MISMATCH: schedule %d, rel err %.1e\n", i, res.rel_err);
    }
    tl_timing t[25]; /* the sweep's schedules (at most 24) and cuBLAS */
    tl_timing_options opt = {.warmup = 5, .reps = 50, .flush_l2 = 1};
    BENCH_CHECK(tl_time_interleaved(ctx, NULL, n + 1, fns, users, &opt, t));
    for (int i = 0; i < n; i++) {
        const tl_gemm_schedule *x = &list[i];
        printf("  sweep %" PRId64 "x%" PRId64 "x%" PRId64 "_%s  %dx%dx%d s%d t%d sk%-2d%s%s%s  %.4f ms  x cuBLAS %.3f%s\n",
               s->m, s->n, s->k, trans_b ? "nt" : "nn", x->block_m, x->block_n, x->block_k, x->stages, x->threads,
               x->split_k, x->gemv ? " gemv" : "", x->persistent ? " ps" : "", x->stream_k ? " stk" : "",
               t[i].median_ms, t[n].median_ms / t[i].median_ms,
               i ? "" : "  (the op's choice)");
    }
}

static void run_shape(tl_ctx *ctx, const shape *s, int trans_b)
{
    size_t na = (size_t)(s->m * s->k), nb = (size_t)(s->k * s->n), nc = (size_t)(s->m * s->n);
    size_t bytes = (na + nb + nc) * 2;
    uint64_t a, b, c[2], dst;
    /* one buffer holds A, B and room for the copy's source span */
    BENCH_CHECK(tl_malloc(ctx, bytes, &a));
    b = a + na * 2;
    BENCH_CHECK(tl_random_fill(ctx, a, TL_BF16, (int64_t)(na + nb + nc), 61, -1, 1, NULL));
    BENCH_CHECK(tl_malloc(ctx, nc * 2, &c[0]));
    BENCH_CHECK(tl_malloc(ctx, nc * 2, &c[1]));
    BENCH_CHECK(tl_malloc(ctx, bytes, &dst));
    work w[3];
    for (int i = 0; i < 3; i++)
        w[i] = (work){.ctx = ctx,
                      .d = {.m = s->m, .n = s->n, .k = s->k, .in_dtype = TL_BF16, .out_dtype = TL_BF16,
                            .trans_b = trans_b},
                      .a = a, .b = b, .c = c[i == 1], .copy_dst = dst, .bytes = bytes, .kind = i};
    char shp[64];
    snprintf(shp, sizeof shp, "%" PRId64 "x%" PRId64 "x%" PRId64 "_%s", s->m, s->n, s->k, trans_b ? "nt" : "nn");
    tl_status st = run(&w[1], NULL);
    if (st == TL_ERR_NO_CUBLAS || st == TL_ERR_UNSUPPORTED) {
        printf("%-24s cuBLAS: %s\n", shp, tl_ctx_error(ctx));
    } else {
        BENCH_CHECK(st);
        BENCH_CHECK(run(&w[0], NULL));
        BENCH_CHECK(tl_synchronize(ctx));
        tl_span o = {.dtype = TL_BF16, .n = (int64_t)nc, .dptr = c[0]};
        tl_span r = {.dtype = TL_BF16, .n = (int64_t)nc, .dptr = c[1]};
        tl_check_result res;
        BENCH_CHECK(tl_check(ctx, &o, &r, 1e-2, &res));
        tl_work_fn fns[3] = {run, run, run};
        void *users[3] = {&w[0], &w[1], &w[2]};
        tl_timing t[3];
        tl_timing_options opt = {.warmup = 5, .reps = 50, .flush_l2 = 1};
        BENCH_CHECK(tl_time_interleaved(ctx, NULL, 3, fns, users, &opt, t));
        double gbs[3], flop = 2.0 * (double)s->m * (double)s->n * (double)s->k;
        for (int i = 0; i < 3; i++)
            gbs[i] = (double)bytes / (t[i].median_ms * 1e6);
        tl_gemm_schedule sc = tl_op_gemm_schedule(ctx, &w[0].d);
        char impl[96];
        snprintf(impl, sizeof impl, "tl_op_gemm %dx%dx%d s%d t%d pp%d sk%d%s", sc.block_m, sc.block_n, sc.block_k,
                 sc.stages, sc.threads, sc.pingpong, sc.split_k, sc.gemv ? " gemv" : "");
        bench_csv_baseline("gemm_small_bw", shp, "bf16", "cuMemcpyDtoD", t[2].median_ms, gbs[2], "GB/s");
        bench_csv("gemm_small_bw", shp, "bf16", impl, t[0].median_ms, gbs[0], "GB/s", gbs[0] / gbs[2], res.rel_err);
        bench_csv("gemm_small_bw", shp, "bf16", "peer:cuBLAS", t[1].median_ms, gbs[1], "GB/s", gbs[1] / gbs[2], 0);
        bench_csv_baseline("gemm_small", shp, "bf16", "cublas", t[1].median_ms, flop / (t[1].median_ms * 1e9),
                           "TFLOP/s");
        bench_csv("gemm_small", shp, "bf16", impl, t[0].median_ms, flop / (t[0].median_ms * 1e9), "TFLOP/s",
                  t[1].median_ms / t[0].median_ms, res.rel_err);
        printf("%-22s ours %7.1f  cuBLAS %7.1f  copy %7.1f GB/s  x cuBLAS %.3f  x copy %.3f  %7.1f TFLOP/s  "
               "rel err %.1e%s  %s\n",
               shp, gbs[0], gbs[1], gbs[2], t[1].median_ms / t[0].median_ms, gbs[0] / gbs[2],
               flop / (t[0].median_ms * 1e9), res.rel_err, res.pass ? "" : "  MISMATCH", impl + 11);
    }
    if (sweep)
        sweep_shape(ctx, s, trans_b, a, b, c[0], c[1]);
    tl_free(ctx, a), tl_free(ctx, c[0]), tl_free(ctx, c[1]), tl_free(ctx, dst);
}

int main(int argc, char **argv)
{
    tl_ctx *ctx = bench_open("bench_gemm_small");
    shape one;
    const shape *shapes = default_shapes;
    int n = (int)(sizeof default_shapes / sizeof default_shapes[0]);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--sweep")) {
            sweep = 1;
        } else if (!strcmp(argv[i], "--try") && i + 1 < argc) {
            i++;
            if (ntries == 23 || !parse_try(argv[i], &tries[ntries++])) {
                fprintf(stderr, "bench_gemm_small: --try '%s': at most 23, each key=value,... with keys "
                                "bm bn bk st t sw pp sk swap ps stk gemv\n", argv[i]);
                return 2;
            }
            sweep = 1;
        } else if (sscanf(argv[i], "%" SCNd64 "x%" SCNd64 "x%" SCNd64, &one.m, &one.n, &one.k) == 3 && one.m >= 1 &&
                   one.n >= 1 && one.k >= 1) {
            shapes = &one, n = 1;
        } else {
            fprintf(stderr, "usage: bench_gemm_small [MxNxK] [--sweep] [--try SCHEDULE]...\n");
            return 2;
        }
    }
    for (int i = 0; i < n; i++)
        for (int t = 1; t >= 0; t--)
            run_shape(ctx, &shapes[i], t);
    tl_ctx_destroy(ctx);
    return 0;
}
