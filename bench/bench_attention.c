/*
 * bench_attention.c - tl_op_flash_attn over the FlashAttention-3 paper's
 * grid as ANCHORS.md measured it on this GPU (bf16, batch x seqlen = 16k,
 * heads x head_dim = 2048, causal and not). FLOPs = 4 B H S^2 D, halved
 * when causal. The ratio printed is to ANCHORS.md's cuDNN figure (another
 * day's measurement: a lead, not a bar); bench/torch_compare.py times
 * cuDNN and FlashAttention-2 in the same process where PyTorch is there.
 * Usage: bench_attention [S D causal [block_m block_n stages threads ws pingpong [persistent [split_kv
 *        [split_tail]]]]]
 *        bench_attention --persistent
 *        bench_attention --mma-sync [block_m block_n stages threads]
 *        bench_attention --decode
 * (default: the whole grid, then on an sm_90a device the --mma-sync rows;
 * a schedule's zero sizes keep the op's (its flags are taken as given,
 * 0 off: an all-zero schedule is the op's whole choice); --persistent: each
 * point, causal and not, with the op's schedule in each persistent mode
 * (0, 1, 2), timed interleaved; --mma-sync: the grid from 2048 keys compiled
 * for the device's architecture without its arch-specific features (sm_90
 * on an H200: mma.sync and cp.async, the sm_80 path), against ANCHORS.md's
 * FlashAttention-2, which runs on mma.sync too; --decode: a few query
 * rows against many keys, grouped-query heads, where the query blocks
 * alone leave most SMs idle: the op's choice (grouped-query heads stacked
 * as rows, keys split over blocks), the keys unsplit (split_kv = split_tail
 * = 1) and
 * 128-row blocks of two groups taking turns, timed interleaved, with the
 * bytes of Q, K, V and O over the time against a device copy of as many
 * bytes)
 */
#include "bench.h"

#include <string.h>

typedef struct point {
    int s, d;
    double cudnn, cudnn_causal; /* ANCHORS.md, TFLOP/s (0: not measured) */
    double fa2, fa2_causal;     /* ANCHORS.md's FlashAttention-2 (PyTorch's SDPA flash) */
} point;

static const point grid[] = {
    {512, 64, 387, 260, 262, 154},     {1024, 64, 0, 0, 0, 0},            {2048, 64, 451, 393, 300, 261},
    {4096, 64, 0, 0, 0, 0},            {8192, 64, 467, 438, 306, 292},    {16384, 64, 467, 441, 308, 297},
    {512, 128, 512, 333, 300, 181},    {1024, 128, 567, 425, 331, 244},   {2048, 128, 599, 486, 337, 278},
    {4096, 128, 623, 529, 343, 299},   {8192, 128, 611, 591, 345, 304},   {16384, 128, 612, 566, 346, 320},
};

typedef struct work {
    tl_ctx *ctx;
    tl_flash_attn_desc d;
    uint64_t q, k, v, o;
} work;

static tl_status run(void *user, void *stream)
{
    work *w = user;
    return tl_op_flash_attn(w->ctx, &w->d, w->q, w->k, w->v, w->o, 0, stream);
}

static tl_flash_attn_schedule sched; /* from the command line; zeros: the op's */

/* A point of the grid: B = 16k / S, H = 2048 / D, Q, K, V and O allocated
 * on the device and filled with random bf16 in [-1, 1]. */
static work point_work(tl_ctx *ctx, int s, int d, int causal)
{
    int64_t b = 16384 / s, h = 2048 / d, n = b * h * (int64_t)s * d;
    work w = {ctx, {.batch = b, .heads = h, .kv_heads = h, .seq_q = s, .seq_kv = s, .head_dim = d, .dtype = TL_BF16,
                    .causal = causal, .schedule = sched}, 0, 0, 0, 0};
    uint64_t *bufs[] = {&w.q, &w.k, &w.v, &w.o};
    for (int i = 0; i < 4; i++) {
        BENCH_CHECK(tl_malloc(ctx, (size_t)n * 2, bufs[i]));
        BENCH_CHECK(tl_random_fill(ctx, *bufs[i], TL_BF16, n, 10 + i, -1, 1, NULL));
    }
    return w;
}

static void point_free(work *w)
{
    uint64_t bufs[] = {w->q, w->k, w->v, w->o};
    for (int i = 0; i < 4; i++)
        tl_free(w->ctx, bufs[i]);
}

/* 4 B H Sq Skv D, halved when causal */
static double point_flop(const tl_flash_attn_desc *d)
{
    return 4.0 * (double)d->batch * (double)d->heads * (double)d->seq_q * (double)d->seq_kv * (double)d->head_dim /
           (d->causal ? 2 : 1);
}

static void bench_point(tl_ctx *ctx, int s, int d, int causal, double anchor, const char *anchor_name)
{
    work w = point_work(ctx, s, d, causal);
    tl_timing t;
    tl_timing_options opt = {.warmup = 5, .reps = 20};
    BENCH_CHECK(tl_time(ctx, NULL, run, &w, &opt, &t));
    double tf = point_flop(&w.d) / t.median_ms * 1e-9;
    char shape[64];
    snprintf(shape, sizeof shape, "b%lld_h%lld_s%d_d%d%s", (long long)w.d.batch, (long long)w.d.heads, s, d,
             causal ? "_causal" : "");
    char impl[48];
    snprintf(impl, sizeof impl, "tilec %s", tl_ctx_target(ctx));
    bench_csv("flash_attn", shape, "bf16", impl, t.median_ms, tf, "TFLOP/s", anchor ? tf / anchor : 0, 0);
    tl_flash_attn_schedule e = tl_op_flash_attn_schedule(ctx, &w.d);
    printf("%-28s %8.3f ms %6.0f TFLOP/s  [%dx%d st%d th%d ws%d pp%d ps%d kv%d tail%d]", shape, t.median_ms, tf,
           e.block_m, e.block_n, e.stages, e.threads, e.warp_specialize, e.pingpong, e.persistent, e.split_kv,
           e.split_tail);
    if (anchor)
        printf("   %.2fx ANCHORS %s (%.0f)", tf / anchor, anchor_name, anchor);
    printf("\n");
    point_free(&w);
}

/* The op's schedule at one point with each `persistent` mode (0: one
 * block a CTA, 1: persistent CTAs dealt blocks in turn, 2: taking them
 * from a counter), in one interleaved set (all see the same clocks). A
 * mode the schedule cannot take (no producer: the mma.sync path) is left
 * out. */
static void persistent_modes(tl_ctx *ctx, int s, int d, int causal)
{
    work w[3];
    w[0] = point_work(ctx, s, d, causal);
    w[0].d.schedule = tl_op_flash_attn_schedule(ctx, &w[0].d);
    int mine = w[0].d.schedule.persistent, n = w[0].d.schedule.warp_specialize ? 3 : 1;
    for (int j = 0; j < n; j++) {
        w[j] = w[0];
        w[j].d.schedule.persistent = j;
    }
    tl_work_fn fns[3] = {run, run, run};
    void *users[3] = {&w[0], &w[1], &w[2]};
    tl_timing t[3];
    tl_timing_options opt = {.warmup = 5, .reps = 20};
    BENCH_CHECK(tl_time_interleaved(ctx, NULL, n, fns, users, &opt, t));
    for (int j = 0; j < n; j++)
        printf("s%-6d d%-4d %-6s ps%d  %8.3f ms %6.0f TFLOP/s%s\n", s, d, causal ? "causal" : "none", j,
               t[j].median_ms, point_flop(&w[j].d) / t[j].median_ms * 1e-9, j == mine ? "  (the op's choice)" : "");
    point_free(&w[0]);
}

typedef struct copy_work {
    tl_ctx *ctx;
    uint64_t src, dst;
    size_t bytes;
} copy_work;

static tl_status run_copy(void *user, void *stream)
{
    copy_work *c = user;
    return tl_memcpy_dtod(c->ctx, c->dst, c->src, c->bytes, stream);
}

/* Decoding shapes: batch x heads (kv_heads) x seq_q against seq_kv keys at
 * head_dim 128, bf16, non-causal and causal (bottom-right: the last query
 * row sees every key). */
static void decode_rows(tl_ctx *ctx)
{
    static const struct { int64_t b, h, hkv, sq, skv; } shapes[] = {
        {1, 32, 8, 1, 8192}, {4, 32, 8, 1, 8192}, {1, 32, 8, 1, 32768}, {8, 32, 8, 1, 4096}, {1, 32, 32, 1, 16384},
        {2, 32, 8, 16, 16384},
    };
    printf("# decode: ms, GB/s of Q, K, V and O, x a device copy of the same bytes; op's choice / keys unsplit\n");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int causal = 0; causal < 2; causal++) {
            work w[3]; /* the op's choice; the keys unsplit; 128-row blocks in two groups taking turns */
            for (int j = 0; j < 3; j++) {
                w[j] = (work){ctx, {.batch = shapes[i].b, .heads = shapes[i].h, .kv_heads = shapes[i].hkv,
                                    .seq_q = shapes[i].sq, .seq_kv = shapes[i].skv, .head_dim = 128, .dtype = TL_BF16,
                                    .causal = causal, .schedule = {.split_kv = j == 1, .split_tail = j == 1}},
                        0, 0, 0, 0};
                if (j == 2)
                    w[j].d.schedule = (tl_flash_attn_schedule){.block_m = 128, .threads = 256, .warp_specialize = 1,
                                                               .pingpong = 1};
                int64_t nq = w[j].d.batch * w[j].d.heads * w[j].d.seq_q * 128,
                        nk = w[j].d.batch * w[j].d.kv_heads * w[j].d.seq_kv * 128;
                int64_t n[4] = {nq, nk, nk, nq};
                uint64_t *bufs[] = {&w[j].q, &w[j].k, &w[j].v, &w[j].o};
                for (int t = 0; t < 4; t++) {
                    BENCH_CHECK(tl_malloc(ctx, (size_t)n[t] * 2, bufs[t]));
                    BENCH_CHECK(tl_random_fill(ctx, *bufs[t], TL_BF16, n[t], 20 + t, -1, 1, NULL));
                }
            }
            double bytes = 2.0 * 2 * (double)(w[0].d.batch * w[0].d.heads * w[0].d.seq_q * 128 +
                                              w[0].d.batch * w[0].d.kv_heads * w[0].d.seq_kv * 128);
            copy_work cw = {ctx, 0, 0, (size_t)(bytes / 2)}; /* read and written: as many bytes as the op's */
            BENCH_CHECK(tl_malloc(ctx, cw.bytes, &cw.src));
            BENCH_CHECK(tl_malloc(ctx, cw.bytes, &cw.dst));
            /* the copy timed on its own: a kernel right after it in an interleaved set paid for its
             * write-backs (5 % on the same program, session 26) */
            tl_work_fn fns[3] = {run, run, run};
            void *users[3] = {&w[0], &w[1], &w[2]};
            tl_timing t[3], tc;
            tl_timing_options opt = {.warmup = 5, .reps = 30};
            BENCH_CHECK(tl_time_interleaved(ctx, NULL, 3, fns, users, &opt, t));
            BENCH_CHECK(tl_time(ctx, NULL, run_copy, &cw, &opt, &tc));
            double copy = bytes / tc.median_ms * 1e-6;
            tl_free(ctx, cw.src);
            tl_free(ctx, cw.dst);
            tl_flash_attn_schedule e = tl_op_flash_attn_schedule(ctx, &w[0].d);
            char shape[80];
            snprintf(shape, sizeof shape, "b%lld_h%lld_kv%lld_sq%lld_skv%lld%s", (long long)w[0].d.batch,
                     (long long)w[0].d.heads, (long long)w[0].d.kv_heads, (long long)w[0].d.seq_q,
                     (long long)w[0].d.seq_kv, causal ? "_causal" : "");
            bench_csv("copy", shape, "bf16", "cuMemcpyDtoD", tc.median_ms, copy, "GB/s", 1.0, 0);
            static const char *const names[3] = {"op     ", "unsplit", "128rows"};
            for (int j = 0; j < 3; j++) {
                double gbs = bytes / t[j].median_ms * 1e-6;
                printf("%-36s %s %8.4f ms %7.0f GB/s %5.3fx copy", shape, names[j], t[j].median_ms, gbs, gbs / copy);
                if (!j)
                    printf("  [%dx%d t%d kv%d]  %.2fx unsplit, %.2fx 128 rows", e.block_m, e.block_n, e.threads,
                           e.split_kv, t[1].median_ms / t[0].median_ms, t[2].median_ms / t[0].median_ms);
                printf("\n");
                bench_csv("flash_attn_decode", shape, "bf16", j == 0 ? "tilec" : j == 1 ? "tilec unsplit" : "tilec 128 rows",
                          t[j].median_ms, gbs, "GB/s", gbs / copy, 0);
            }
            for (int j = 0; j < 3; j++)
                point_free(&w[j]);
        }
}

/* The grid from 2048 keys on mma.sync: a second context for the device's
 * architecture without the arch-specific features (sm_90a -> sm_90), so
 * the op takes its non-wgmma schedule; NULL-safe when there is none. */
static void mma_sync_rows(tl_ctx *ctx)
{
    const char *t = tl_ctx_target(ctx);
    size_t n = strlen(t);
    if (n < 2 || t[n - 1] != 'a') {
        printf("# mma.sync rows: the context's target %s is already the plain one (the grid above)\n", t);
        return;
    }
    char plain[16];
    snprintf(plain, sizeof plain, "%.*s", (int)(n - 1), t);
    tl_ctx_options o = tl_ctx_default_options();
    o.target = plain;
    tl_ctx *mctx;
    char msg[256];
    if (tl_ctx_create(&o, &mctx, msg, sizeof msg) != TL_OK) {
        printf("# mma.sync rows: no context for %s (%s)\n", plain, msg);
        return;
    }
    printf("# mma.sync (%s, the sm_80 path) against ANCHORS.md's FlashAttention-2\n", plain);
    for (int causal = 0; causal < 2; causal++)
        for (size_t i = 0; i < sizeof grid / sizeof grid[0]; i++)
            if (grid[i].s >= 2048)
                bench_point(mctx, grid[i].s, grid[i].d, causal, causal ? grid[i].fa2_causal : grid[i].fa2, "FA2");
    tl_ctx_destroy(mctx);
}

int main(int argc, char **argv)
{
    tl_ctx *ctx = bench_open("bench_attention");
    if ((argc == 2 || argc == 6) && strcmp(argv[1], "--mma-sync") == 0) {
        if (argc == 6)
            sched = (tl_flash_attn_schedule){atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), 0, 0, 0, 0, 0};
        mma_sync_rows(ctx);
        tl_ctx_destroy(ctx);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--decode") == 0) {
        decode_rows(ctx);
        tl_ctx_destroy(ctx);
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--persistent") == 0) {
        for (int causal = 0; causal < 2; causal++)
            for (size_t i = 0; i < sizeof grid / sizeof grid[0]; i++)
                persistent_modes(ctx, grid[i].s, grid[i].d, causal);
        tl_ctx_destroy(ctx);
        return 0;
    }
    if (argc >= 10 && argc <= 13)
        sched = (tl_flash_attn_schedule){atoi(argv[4]), atoi(argv[5]), atoi(argv[6]), atoi(argv[7]), atoi(argv[8]),
                                         atoi(argv[9]), argc >= 11 ? atoi(argv[10]) : 0, argc >= 12 ? atoi(argv[11]) : 0,
                                         argc == 13 ? atoi(argv[12]) : 0};
    if (argc == 4 || (argc >= 10 && argc <= 13)) {
        bench_point(ctx, atoi(argv[1]), atoi(argv[2]), atoi(argv[3]), 0, "");
    } else {
        for (int causal = 0; causal < 2; causal++)
            for (size_t i = 0; i < sizeof grid / sizeof grid[0]; i++)
                bench_point(ctx, grid[i].s, grid[i].d, causal, causal ? grid[i].cudnn_causal : grid[i].cudnn,
                            "cuDNN");
        mma_sync_rows(ctx);
    }
    tl_ctx_destroy(ctx);
    return 0;
}
