/*
 * softmax_tune.c - the row softmax as a tunable op: its schedules as
 * configurations (width, rows, threads), the space the tuner tries, its
 * place in the tuning database, its problem (random rows rotated over
 * copies, a float64 reference computed on the host from the same random
 * bits, a device-to-device copy of the input as the baseline), and the
 * record the op consults for an all-zero schedule.
 */
#include "ops.h"

#include "ctx.h"
#include "target.h"
#include "tune.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COPIES 32
#define MAX_ONE_PASS 32768   /* widest one-pass row of the default table  */
#define MAX_TILE (1 << 24)   /* rows x width of a block (rows.c)          */

static const char *const param_names[] = {"width", "rows", "threads", "stages", "cluster", "loader", NULL};

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
static int space(tl_ctx *ctx, const void *desc, tl_tune_config *out, int max)
{
    const tl_softmax_desc *d = desc;
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
                    bool fits = s == 1 || s * rows * w * (int64_t)tl_dtype_size(d->in_dtype) + 1024 <= smem;
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
            if ((s == 1 || s * w * (int64_t)tl_dtype_size(d->in_dtype) + 1024 <= smem) && w / 32 <= 1024 && n < max)
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
static void key(const void *desc, tli_tune_key *out)
{
    const tl_softmax_desc *d = desc;
    memset(out, 0, sizeof *out);
    tli_fmt(out->op, sizeof out->op, "softmax");
    tli_fmt(out->dtypes, sizeof out->dtypes, "%s->%s", tl_dtype_name(d->in_dtype), tl_dtype_name(d->out_dtype));
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

bool tli_softmax_pick(tl_ctx *ctx, const tl_softmax_desc *d, tl_softmax_schedule *out)
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
    tli_log(ctx, TL_LOG_WARN, "tuning database: the record for softmax %s %s names a schedule the op cannot use "
            "(%s); using the default", k.dtypes, k.shape_class, rec.config);
    tli_tune_db_forget(ctx, &k);
    return false;
}

/* ------------------------------------------------------------------------ */
/* The problem                                                               */
/* ------------------------------------------------------------------------ */

typedef struct softmax_problem {
    tli_tune_problem base;
    tl_ctx *ctx;
    tl_softmax_desc d;      /* contiguous rows; the schedule ignored       */
    double tol;
    uint64_t x[MAX_COPIES], y[MAX_COPIES];
    uint64_t copy;          /* where the baseline copies x to              */
    int copies, turn;
    double *ref;            /* [rows cols], softmax of x[0] in float64     */
} softmax_problem;

static size_t bytes_of(const softmax_problem *s, tl_dtype dt)
{
    return (size_t)(s->d.rows * s->d.cols) * tl_dtype_size(dt);
}

/* Every candidate's program takes the arguments of its own schedule: the
 * tiles per block of a pipelined one come from its launch parameters. */
static tl_status launch(softmax_problem *s, const tl_program *p, int i, void *stream)
{
    tl_arg args[7];
    tli_rows_desc r = {.rows = s->d.rows, .cols = s->d.cols, .in_dtype = s->d.in_dtype,
                       .out_dtype = s->d.out_dtype};
    int n = tli_rows_args(&r, s->x[i], s->y[i], args);
    tl_program_info info;
    if (tl_program_get_info(p, &info) == TL_OK && info.num_params > n)
        args[n++] = tl_arg_int(tli_rows_wave(s->ctx, p));
    return tl_launch(p, stream, n, args);
}

static int next_turn(softmax_problem *s)
{
    int i = s->turn;
    s->turn = (s->turn + 1) % s->copies;
    return i;
}

static tl_status run_softmax(tli_tune_problem *pb, const tl_program *p, void *stream)
{
    softmax_problem *s = (softmax_problem *)pb;
    return launch(s, p, next_turn(s), stream);
}

static tl_status run_copy(tli_tune_problem *pb, void *stream)
{
    softmax_problem *s = (softmax_problem *)pb;
    return tl_memcpy_dtod(s->ctx, s->copy, s->x[next_turn(s)], bytes_of(s, s->d.in_dtype), stream);
}

static tl_status check_softmax(tli_tune_problem *pb, const tl_program *p, void *stream, tl_check_result *res)
{
    softmax_problem *s = (softmax_problem *)pb;
    tl_status st = tl_memset_u8(s->ctx, s->y[0], 0xFF, bytes_of(s, s->d.out_dtype), stream);
    if (st == TL_OK)
        st = launch(s, p, 0, stream);
    if (st == TL_OK)
        st = tl_synchronize(s->ctx);
    tl_span out = {.dtype = s->d.out_dtype, .n = s->d.rows * s->d.cols, .dptr = s->y[0]};
    tl_span ref = {.dtype = TL_F64, .n = s->d.rows * s->d.cols, .host = s->ref};
    return st == TL_OK ? tl_check(s->ctx, &out, &ref, s->tol, res) : st;
}

static void destroy_softmax(tli_tune_problem *pb)
{
    softmax_problem *s = (softmax_problem *)pb;
    for (int i = 0; i < MAX_COPIES; i++) {
        tl_free(s->ctx, s->x[i]);
        tl_free(s->ctx, s->y[i]);
    }
    tl_free(s->ctx, s->copy);
    free(s->ref);
    free(s);
}

/* The reference: the same random bits as copy 0 on the device, in f64. */
static tl_status reference(softmax_problem *s, uint64_t seed)
{
    int64_t n = s->d.rows * s->d.cols, cols = s->d.cols;
    void *raw = malloc(bytes_of(s, s->d.in_dtype) + 1);
    s->ref = malloc((size_t)n * sizeof *s->ref);
    if (!raw || !s->ref) {
        free(raw);
        return tli_fail(s->ctx, TL_ERR_OUT_OF_MEMORY, "out of host memory for the reference");
    }
    tl_status st = tl_random_host(raw, s->d.in_dtype, n, seed, -4, 4);
    for (int64_t r = 0; st == TL_OK && r < s->d.rows; r++) {
        double *row = s->ref + r * cols, m = -INFINITY, sum = 0;
        for (int64_t j = 0; j < cols; j++) {
            int64_t i = r * cols + j;
            row[j] = s->d.in_dtype == TL_F32   ? ((const float *)raw)[i]
                     : s->d.in_dtype == TL_F16 ? tl_f16_to_f32(((const uint16_t *)raw)[i])
                                               : tl_bf16_to_f32(((const uint16_t *)raw)[i]);
            m = fmax(m, row[j]);
        }
        for (int64_t j = 0; j < cols; j++)
            sum += row[j] = exp(row[j] - m);
        for (int64_t j = 0; j < cols; j++)
            row[j] /= sum;
    }
    free(raw);
    return st;
}

static tl_status setup(softmax_problem *s)
{
    size_t in = bytes_of(s, s->d.in_dtype), out = bytes_of(s, s->d.out_dtype);
    s->copies = tli_tune_copies(s->ctx, in + out, MAX_COPIES);
    tl_status st = tl_malloc(s->ctx, in, &s->copy);
    for (int i = 0; i < s->copies && st == TL_OK; i++) {
        st = tl_malloc(s->ctx, in, &s->x[i]);
        if (st == TL_OK)
            st = tl_malloc(s->ctx, out, &s->y[i]);
        if (st == TL_OK)
            st = tl_random_fill(s->ctx, s->x[i], s->d.in_dtype, s->d.rows * s->d.cols, 500 + (uint64_t)i, -4, 4,
                                NULL);
    }
    if (st == TL_OK)
        st = tl_synchronize(s->ctx);
    return st == TL_OK ? reference(s, 500) : st;
}

static tl_status problem(tl_ctx *ctx, const void *desc, double tol, tli_tune_problem **out)
{
    *out = NULL;
    softmax_problem *s = calloc(1, sizeof *s);
    if (!s)
        return tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "tl_autotune: out of host memory");
    s->base = (tli_tune_problem){.run = run_softmax, .check = check_softmax, .baseline = run_copy,
                                 .destroy = destroy_softmax, .unit = "GB/s"};
    tli_fmt(s->base.baseline_name, sizeof s->base.baseline_name, "copy of the input");
    s->ctx = ctx;
    s->d = *(const tl_softmax_desc *)desc;
    s->d.ld_in = s->d.ld_out = 0;
    memset(&s->d.schedule, 0, sizeof s->d.schedule);
    s->tol = tol > 0 ? tol : 1e-2;
    s->base.work = (double)(bytes_of(s, s->d.in_dtype) + bytes_of(s, s->d.out_dtype));
    tli_fmt(s->base.shape, sizeof s->base.shape, "%lldx%lld", (long long)s->d.rows, (long long)s->d.cols);
    return tli_tune_problem_done(ctx, setup(s), &s->base, "softmax", out);
}

/* ------------------------------------------------------------------------ */
/* The row in the table of tunable ops                                       */
/* ------------------------------------------------------------------------ */

static tl_status check_desc(tl_ctx *ctx, const void *desc, const char *api)
{
    const tl_softmax_desc *d = desc;
    tl_softmax_desc plain = *d;
    memset(&plain.schedule, 0, sizeof plain.schedule);
    tl_kernel *k = NULL;
    tl_status st = d->rows < 1 ? tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: softmax with no rows", api)
                               : tl_op_softmax_build(ctx, &plain, &k);
    tl_kernel_destroy(k);
    return st;
}

static tl_tune_config fallback(tl_ctx *ctx, const void *desc)
{
    tl_softmax_schedule s = tli_softmax_untuned(ctx, desc);
    return (tl_tune_config){{s.width, s.rows, s.threads, s.stages, s.cluster, s.loader}};
}

static tl_status build(tl_ctx *ctx, const void *desc, const tl_tune_config *cfg, tl_kernel **out)
{
    tl_softmax_desc d = *(const tl_softmax_desc *)desc;
    d.ld_in = d.ld_out = 0;
    d.schedule = schedule_of(cfg);
    return tl_op_softmax_build(ctx, &d, out);
}

/* Contiguous rows whose length is not whole 16-byte units make every launch
 * take the programs' safe variants, then compiled with the candidates. */
static bool unaligned_rows(const void *desc)
{
    const tl_softmax_desc *d = desc;
    return d->cols % (int64_t)(16 / tl_dtype_size(d->in_dtype)) || d->cols % (int64_t)(16 / tl_dtype_size(d->out_dtype));
}

const tli_tune_op tli_softmax_tune_op = {
    .name = "softmax",
    .param_names = param_names,
    .check_desc = check_desc,
    .space = space,
    .fallback = fallback,
    .build = build,
    .problem = problem,
    .key = key,
    .unaligned = unaligned_rows,
};
