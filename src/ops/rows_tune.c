/*
 * rows_tune.c - the row-wise ops (softmax, RMSNorm) as tunable ops: their
 * schedules as configurations (width, rows, threads, ...), the space the
 * tuner tries, their place in the tuning database, their problem (random
 * rows rotated over copies, a float64 reference computed on the host from
 * the same random bits, a device-to-device copy of the input as the
 * baseline), and the record each op consults for an all-zero schedule.
 * The two ops share all of it but the descriptor, the reference and the
 * launch arguments: each entry point turns its descriptor into a
 * rows_task first.
 */
#include "ops.h"

#include "ctx.h"
#include "half.h"
#include "target.h"
#include "tune.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COPIES 32
#define MAX_ONE_PASS 32768   /* widest one-pass row of the default table  */
#define MAX_TILE (1 << 24)   /* rows x width of a block (rows.c)          */

static const char *const param_names[] = {"width", "rows", "threads", "stages", "cluster", "loader", NULL};

/* One row op's problem, whatever its descriptor. */
typedef struct rows_task {
    bool rms;                 /* RMSNorm; else the softmax                */
    int64_t rows, cols;
    tl_dtype in, out;
    double eps;               /* RMSNorm's                                */
} rows_task;

static rows_task softmax_task(const void *desc)
{
    const tl_softmax_desc *d = desc;
    return (rows_task){.rows = d->rows, .cols = d->cols, .in = d->in_dtype, .out = d->out_dtype};
}

static rows_task rmsnorm_task(const void *desc)
{
    const tl_rmsnorm_desc *d = desc;
    return (rows_task){.rms = true, .rows = d->rows, .cols = d->cols, .in = d->in_dtype, .out = d->out_dtype,
                       .eps = d->eps};
}

static const char *op_name(const rows_task *t) { return t->rms ? "rmsnorm" : "softmax"; }

/* t's descriptors, contiguous, with schedule s. */
static tl_softmax_desc softmax_desc(const rows_task *t, tl_softmax_schedule s)
{
    return (tl_softmax_desc){.rows = t->rows, .cols = t->cols, .in_dtype = t->in, .out_dtype = t->out,
                             .schedule = s};
}

static tl_rmsnorm_desc rmsnorm_desc(const rows_task *t, tl_softmax_schedule s)
{
    return (tl_rmsnorm_desc){.rows = t->rows, .cols = t->cols, .in_dtype = t->in, .out_dtype = t->out,
                             .eps = t->eps, .schedule = s};
}

/* t's kernel for schedule s (zeros: the op's choice). */
static tl_status build_task(tl_ctx *ctx, const rows_task *t, tl_softmax_schedule s, tl_kernel **out)
{
    if (t->rms) {
        tl_rmsnorm_desc d = rmsnorm_desc(t, s);
        return tl_op_rmsnorm_build(ctx, &d, out);
    }
    tl_softmax_desc d = softmax_desc(t, s);
    return tl_op_softmax_build(ctx, &d, out);
}

/* (a record written before stages, cluster or loader existed reads 0
 * there: the default's stages, no cluster, the default's loader) */
static tl_softmax_schedule schedule_of(const tl_tune_config *c)
{
    return (tl_softmax_schedule){.width = c->v[0], .rows = c->v[1], .threads = c->v[2], .stages = c->v[3],
                                 .cluster = c->v[4] > 1 ? c->v[4] : 1, .loader = c->v[5]};
}

static int pow2_at_least(int64_t x)
{
    int w = 1;
    while (w < x && w < (1 << 20))
        w *= 2;
    return w;
}

/* ------------------------------------------------------------------------ */
/* Space, key, record                                                        */
/* ------------------------------------------------------------------------ */

/* One-pass schedules hold the row in registers: E = width x rows /
 * threads elements per thread, of which 8 to 32 fit (the default table
 * uses 32), each without a pipeline and with a ring of 3 shared tiles
 * where the target's shared memory holds one (rows.c), the ring filled by
 * the block's threads. A ring filled by a producer warpgroup (loader 2)
 * comes only with the untuned schedule that leads the space (the default
 * past 16384 columns): its CTAs run one an SM, which narrower rows need
 * several of (H200, bench/NOTES.md session 32: 0.32-0.76 of the copy at
 * 32768x2048 and 0.66-0.73 at 4096x8192, against 0.97 and 0.95 for the
 * defaults). The online path takes chunks narrower than the row. */
static int space(tl_ctx *ctx, const rows_task *d, tl_tune_config *out, int max)
{
    int n = 0;
    const int per_thread[] = {8, 16, 32};
    tli_target tg = {0};
    int64_t smem = tli_target_get(ctx->target, &tg) ? tg.smem_limit : 48 * 1024;
    if (d->cols <= MAX_ONE_PASS) {
        int w = pow2_at_least(d->cols);
        for (int s = 1; s <= 3; s += 2)
            for (int e = 0; e < 3; e++)
                for (int t = 128; t <= 1024; t *= 2) {
                    int64_t rows = (int64_t)per_thread[e] * t / w;
                    bool fits = s == 1 || s * rows * w * (int64_t)tl_dtype_size(d->in) + 1024 <= smem;
                    if (rows >= 1 && rows * w <= MAX_TILE && (int64_t)per_thread[e] * t == rows * w && fits &&
                        n < max)
                        out[n++] = (tl_tune_config){{w, (int)rows, t, s, 1, 1}};
                }
    }
    /* rows split over a cluster of 2 or 4 blocks (one row each, 32
     * elements a thread), where the GPU has clusters and a block's share
     * is at least 4096 columns */
    for (int c = 2; tg.clusters && c <= 4 && d->cols <= MAX_ONE_PASS; c *= 2) {
        int w = pow2_at_least((d->cols + c - 1) / c);
        for (int s = 1; s <= 3 && w >= 4096; s += 2)
            if ((s == 1 || s * w * (int64_t)tl_dtype_size(d->in) + 1024 <= smem) && w / 32 <= 1024 && n < max)
                out[n++] = (tl_tune_config){{w, 1, w / 32, s, c, 1}};
    }
    for (int w = 2048; w <= 8192 && w < d->cols; w *= 2)
        for (int e = 0; e < 3; e++) {
            int t = w / per_thread[e];
            if (t >= 32 && t <= 1024 && n < max)
                out[n++] = (tl_tune_config){{w, 1, t, 1, 1, 1}};
        }
    return n;
}

/* Rows round to the nearest power of two; columns to the one-pass width
 * they need (the next power of two), since a schedule's width decides
 * whether a row fits in one pass. */
static void key(const rows_task *d, tli_tune_key *out)
{
    memset(out, 0, sizeof *out);
    tli_fmt(out->op, sizeof out->op, "%s", op_name(d));
    tli_fmt(out->dtypes, sizeof out->dtypes, "%s->%s", tl_dtype_name(d->in), tl_dtype_name(d->out));
    tli_fmt(out->layout, sizeof out->layout, "rows");
    char r[32];
    tli_tune_bucket('r', d->rows, r, sizeof r);
    tli_fmt(out->shape_class, sizeof out->shape_class, "%s,c<=%d", r, pow2_at_least(d->cols));
}

/* The checks rows.c makes of a schedule, so that a record (a line of a
 * file) can never make the op fail. */
static bool valid(const tl_softmax_schedule *s)
{
    bool pow2 = s->width >= 1 && s->width <= (1 << 20) && (s->width & (s->width - 1)) == 0;
    bool producer = s->loader != 2 || tli_rows_producer_fits(s);
    return pow2 && s->rows >= 1 && (int64_t)s->rows * s->width <= MAX_TILE && s->threads >= 32 &&
           s->threads <= 1024 && s->threads % 32 == 0 && s->stages >= 0 && s->stages <= 8 && s->cluster >= 0 &&
           s->cluster <= 8 && s->loader >= 0 && s->loader <= 2 && producer;
}

static bool pick(tl_ctx *ctx, const rows_task *d, tl_softmax_schedule *out)
{
    tli_tune_key k;
    key(d, &k);
    tl_tune_record rec;
    tl_tune_config c;
    if (!tli_tune_db_find(ctx, &k, &rec))
        return false;
    if (tli_tune_config_parse(param_names, rec.config, &c) &&
        valid(&(tl_softmax_schedule){.width = c.v[0], .rows = c.v[1], .threads = c.v[2], .stages = c.v[3],
                                     .cluster = c.v[4], .loader = c.v[5]}) &&
        (c.v[4] <= 1 || d->cols <= (int64_t)c.v[4] * c.v[0])) {
        *out = schedule_of(&c);
        return true;
    }
    tli_tune_db_unusable(ctx, &k, rec.config);
    return false;
}

/* ------------------------------------------------------------------------ */
/* The problem                                                               */
/* ------------------------------------------------------------------------ */

typedef struct rows_problem {
    tli_tune_problem base;
    tl_ctx *ctx;
    rows_task t;            /* contiguous rows                            */
    double tol;
    uint64_t x[MAX_COPIES], y[MAX_COPIES];
    uint64_t w;             /* RMSNorm's weights                          */
    uint64_t copy;          /* where the baseline copies x to              */
    int copies, turn;
    double *ref;            /* [rows cols], the op on x[0] in float64      */
} rows_problem;

#define X_SEED 500 /* copy i's rows: seed X_SEED + i */
#define W_SEED 499

static size_t bytes_of(const rows_problem *s, tl_dtype dt)
{
    return (size_t)(s->t.rows * s->t.cols) * tl_dtype_size(dt);
}

/* Every candidate's program takes the arguments of its own schedule: the
 * tiles per block of a pipelined one come from its launch parameters. */
static tl_status launch(rows_problem *s, const tl_program *p, int i, void *stream)
{
    tl_arg args[9];
    tli_rows_desc r = {.rows = s->t.rows, .cols = s->t.cols, .in_dtype = s->t.in, .out_dtype = s->t.out};
    int n = tli_rows_args(&r, s->x[i], s->y[i], args);
    if (s->t.rms) {
        args[n++] = tl_arg_dptr(s->w);
        args[n++] = tl_arg_float(s->t.eps);
    }
    tl_program_info info;
    if (tl_program_get_info(p, &info) == TL_OK && info.num_params > n)
        args[n++] = tl_arg_int(tli_rows_wave(s->ctx, p));
    return tl_launch(p, stream, n, args);
}

static int next_turn(rows_problem *s)
{
    int i = s->turn;
    s->turn = (s->turn + 1) % s->copies;
    return i;
}

static tl_status run_rows(tli_tune_problem *pb, const tl_program *p, void *stream)
{
    rows_problem *s = (rows_problem *)pb;
    return launch(s, p, next_turn(s), stream);
}

static tl_status run_copy(tli_tune_problem *pb, void *stream)
{
    rows_problem *s = (rows_problem *)pb;
    return tl_memcpy_dtod(s->ctx, s->copy, s->x[next_turn(s)], bytes_of(s, s->t.in), stream);
}

static tl_status check_rows(tli_tune_problem *pb, const tl_program *p, void *stream, tl_check_result *res)
{
    rows_problem *s = (rows_problem *)pb;
    tl_status st = tl_memset_u8(s->ctx, s->y[0], 0xFF, bytes_of(s, s->t.out), stream);
    if (st == TL_OK)
        st = launch(s, p, 0, stream);
    if (st == TL_OK)
        st = tl_synchronize(s->ctx);
    tl_span out = {.dtype = s->t.out, .n = s->t.rows * s->t.cols, .dptr = s->y[0]};
    tl_span ref = {.dtype = TL_F64, .n = s->t.rows * s->t.cols, .host = s->ref};
    return st == TL_OK ? tl_check(s->ctx, &out, &ref, s->tol, res) : st;
}

static void destroy_rows(tli_tune_problem *pb)
{
    rows_problem *s = (rows_problem *)pb;
    for (int i = 0; i < MAX_COPIES; i++) {
        tl_free(s->ctx, s->x[i]);
        tl_free(s->ctx, s->y[i]);
    }
    tl_free(s->ctx, s->w);
    tl_free(s->ctx, s->copy);
    free(s->ref);
    free(s);
}

/* The op on row `row` (cols values) in place; w: RMSNorm's weights. */
static void reference_row(const rows_task *t, double *row, const double *w)
{
    int64_t cols = t->cols;
    if (t->rms) {
        double sq = 0;
        for (int64_t j = 0; j < cols; j++)
            sq += row[j] * row[j];
        double inv = 1 / sqrt(sq / (double)cols + t->eps);
        for (int64_t j = 0; j < cols; j++)
            row[j] = row[j] * inv * w[j];
        return;
    }
    double m = -INFINITY, sum = 0;
    for (int64_t j = 0; j < cols; j++)
        m = fmax(m, row[j]);
    for (int64_t j = 0; j < cols; j++)
        sum += row[j] = exp(row[j] - m);
    for (int64_t j = 0; j < cols; j++)
        row[j] /= sum;
}

/* The reference: the same random bits as copy 0 (and w) on the device, in
 * f64. */
static tl_status reference(rows_problem *s)
{
    int64_t n = s->t.rows * s->t.cols, cols = s->t.cols;
    size_t wcols = s->t.rms ? (size_t)cols : 0; /* RMSNorm's weights */
    void *raw = malloc(bytes_of(s, s->t.in) + 1), *wraw = malloc(wcols * tl_dtype_size(s->t.in) + 1);
    double *w = malloc(wcols * sizeof *w + 1);
    s->ref = malloc((size_t)n * sizeof *s->ref);
    tl_status st = raw && wraw && w && s->ref ? TL_OK
                   : tli_fail(s->ctx, TL_ERR_OUT_OF_MEMORY, "out of host memory for the reference");
    if (st == TL_OK)
        st = tl_random_host(raw, s->t.in, n, X_SEED, -4, 4);
    if (st == TL_OK && s->t.rms)
        st = tl_random_host(wraw, s->t.in, cols, W_SEED, -1, 1);
    for (int64_t j = 0; st == TL_OK && s->t.rms && j < cols; j++)
        w[j] = tli_load_as_double(s->t.in, wraw, j);
    for (int64_t r = 0; st == TL_OK && r < s->t.rows; r++) {
        double *row = s->ref + r * cols;
        for (int64_t j = 0; j < cols; j++)
            row[j] = tli_load_as_double(s->t.in, raw, r * cols + j);
        reference_row(&s->t, row, w);
    }
    free(raw), free(wraw), free(w);
    return st;
}

static tl_status setup(rows_problem *s)
{
    size_t in = bytes_of(s, s->t.in), out = bytes_of(s, s->t.out);
    s->copies = tli_tune_copies(s->ctx, in + out, MAX_COPIES);
    tl_status st = tl_malloc(s->ctx, in, &s->copy);
    if (st == TL_OK && s->t.rms)
        st = tl_malloc(s->ctx, (size_t)s->t.cols * tl_dtype_size(s->t.in), &s->w);
    if (st == TL_OK && s->t.rms)
        st = tl_random_fill(s->ctx, s->w, s->t.in, s->t.cols, W_SEED, -1, 1, NULL);
    for (int i = 0; i < s->copies && st == TL_OK; i++) {
        st = tl_malloc(s->ctx, in, &s->x[i]);
        if (st == TL_OK)
            st = tl_malloc(s->ctx, out, &s->y[i]);
        if (st == TL_OK)
            st = tl_random_fill(s->ctx, s->x[i], s->t.in, s->t.rows * s->t.cols, X_SEED + (uint64_t)i, -4, 4,
                                NULL);
    }
    if (st == TL_OK)
        st = tl_synchronize(s->ctx);
    return st == TL_OK ? reference(s) : st;
}

static tl_status problem(tl_ctx *ctx, const rows_task *t, double tol, tli_tune_problem **out)
{
    *out = NULL;
    rows_problem *s = calloc(1, sizeof *s);
    if (!s)
        return tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "tl_autotune: out of host memory");
    s->base = (tli_tune_problem){.run = run_rows, .check = check_rows, .baseline = run_copy,
                                 .destroy = destroy_rows, .unit = "GB/s"};
    tli_fmt(s->base.baseline_name, sizeof s->base.baseline_name, "copy of the input");
    s->ctx = ctx;
    s->t = *t;
    s->tol = tol > 0 ? tol : 1e-2;
    s->base.work = (double)(bytes_of(s, s->t.in) + bytes_of(s, s->t.out));
    tli_fmt(s->base.shape, sizeof s->base.shape, "%lldx%lld", (long long)s->t.rows, (long long)s->t.cols);
    return tli_tune_problem_done(ctx, setup(s), &s->base, op_name(t), out);
}

/* ------------------------------------------------------------------------ */
/* The two rows in the table of tunable ops                                  */
/* ------------------------------------------------------------------------ */

static tl_status check_task(tl_ctx *ctx, const rows_task *t, const char *api)
{
    tl_kernel *k = NULL;
    tl_status st = t->rows < 1 ? tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: %s with no rows", api, op_name(t))
                               : build_task(ctx, t, (tl_softmax_schedule){0}, &k);
    tl_kernel_destroy(k);
    return st;
}

static tl_tune_config config_of(const tl_softmax_schedule *s)
{
    return (tl_tune_config){{s->width, s->rows, s->threads, s->stages, s->cluster, s->loader}};
}

/* Contiguous rows whose length is not whole 16-byte units make every launch
 * take the programs' safe variants, then compiled with the candidates. */
static bool unaligned(const rows_task *t)
{
    return t->cols % (int64_t)(16 / tl_dtype_size(t->in)) || t->cols % (int64_t)(16 / tl_dtype_size(t->out));
}

/* Each op's entry points: its descriptor as a rows_task, then the shared
 * code (the descriptor's checks included: building the kernel makes them). */
#define ROWS_OP_ROW(OP, DESC, TASK, UNTUNED)                                                                          \
    static tl_status OP##_check(tl_ctx *ctx, const void *desc, const char *api)                                  \
    {                                                                                                            \
        if (!desc)                                                                                               \
            return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: NULL descriptor", api);                                \
        rows_task t = TASK(desc);                                                                                \
        return check_task(ctx, &t, api);                                                                         \
    }                                                                                                            \
    static int OP##_space(tl_ctx *ctx, const void *desc, tl_tune_config *out, int max)                           \
    {                                                                                                            \
        rows_task t = TASK(desc);                                                                                \
        return space(ctx, &t, out, max);                                                                         \
    }                                                                                                            \
    static tl_tune_config OP##_fallback(tl_ctx *ctx, const void *desc)                                           \
    {                                                                                                            \
        tl_softmax_schedule s = UNTUNED(ctx, desc);                                                              \
        return config_of(&s);                                                                                    \
    }                                                                                                            \
    static tl_status OP##_build(tl_ctx *ctx, const void *desc, const tl_tune_config *cfg, tl_kernel **out)       \
    {                                                                                                            \
        rows_task t = TASK(desc);                                                                                \
        return build_task(ctx, &t, schedule_of(cfg), out);                                                       \
    }                                                                                                            \
    static tl_status OP##_problem(tl_ctx *ctx, const void *desc, double tol, tli_tune_problem **out)            \
    {                                                                                                            \
        rows_task t = TASK(desc);                                                                                \
        return problem(ctx, &t, tol, out);                                                                       \
    }                                                                                                            \
    static void OP##_key(const void *desc, tli_tune_key *out)                                                    \
    {                                                                                                            \
        rows_task t = TASK(desc);                                                                                \
        key(&t, out);                                                                                            \
    }                                                                                                            \
    static bool OP##_unaligned(const void *desc)                                                                 \
    {                                                                                                            \
        rows_task t = TASK(desc);                                                                                \
        return unaligned(&t);                                                                                    \
    }                                                                                                            \
    bool tli_##OP##_pick(tl_ctx *ctx, const DESC *desc, tl_softmax_schedule *out)                                \
    {                                                                                                            \
        rows_task t = TASK(desc);                                                                                \
        return pick(ctx, &t, out);                                                                               \
    }                                                                                                            \
    const tli_tune_op tli_##OP##_tune_op = {.name = #OP,                                                         \
                                            .param_names = param_names,                                          \
                                            .check_desc = OP##_check,                                            \
                                            .space = OP##_space,                                                 \
                                            .fallback = OP##_fallback,                                           \
                                            .build = OP##_build,                                                 \
                                            .problem = OP##_problem,                                             \
                                            .key = OP##_key,                                                     \
                                            .unaligned = OP##_unaligned};

ROWS_OP_ROW(softmax, tl_softmax_desc, softmax_task, tli_softmax_untuned)
ROWS_OP_ROW(rmsnorm, tl_rmsnorm_desc, rmsnorm_task, tli_rmsnorm_untuned)
