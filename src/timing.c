/*
 * timing.c - CUDA-event timing of device work.
 *
 * Each repetition sits between its own pair of events, so one slow run does
 * not smear into the others, and the whole batch is enqueued before the one
 * synchronisation at the end, so the host never leaves the GPU idle between
 * repetitions. The optional L2 flush (a memset of a buffer twice the L2)
 * goes before each start event, outside the timed span. Several works can
 * be timed together, taking turns within every repetition, so that a
 * comparison is not skewed by the clocks drifting as the card warms.
 */
#include "ctx.h"
#include "program_ctx.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_WARMUP 5
#define DEFAULT_REPS 20
#define MAX_REPS 100000              /* two events per repetition */
#define FLUSH_BYTES_UNKNOWN_L2 (256u << 20) /* when the device hides its L2 size */

typedef struct timing_run {
    tl_ctx *ctx;
    CUstream stream;
    int nwork;
    tl_work_fn const *fns;
    void *const *users;
    int warmup, reps;
    bool flush;
    const char *api;
    CUevent *events; /* repetition i of work j: start 2 (i nwork + j), end + 1 */
    int n_events;    /* created so far */
} timing_run;

static tl_status read_options(timing_run *t, const tl_timing_options *opt)
{
    t->warmup = opt && opt->warmup ? opt->warmup : DEFAULT_WARMUP;
    t->reps = opt && opt->reps ? opt->reps : DEFAULT_REPS;
    t->flush = opt && opt->flush_l2;
    if (t->warmup < 0 || t->reps < 0 || t->reps > MAX_REPS)
        return tli_fail(t->ctx, TL_ERR_INVALID_ARG, "%s: warmup must be >= 0 and reps in "
                        "1..%d (0 picks the defaults %d and %d)", t->api, MAX_REPS, DEFAULT_WARMUP,
                        DEFAULT_REPS);
    return TL_OK;
}

/* The flush buffer lives on the context and is made on first use. */
static tl_status ensure_scratch_locked(tl_ctx *ctx)
{
    size_t want = ctx->info.l2_bytes > 0 ? 2 * (size_t)ctx->info.l2_bytes : FLUSH_BYTES_UNKNOWN_L2;
    if (ctx->scratch && ctx->scratch_bytes >= want)
        return TL_OK;
    tl_free(ctx, ctx->scratch);
    ctx->scratch = 0;
    ctx->scratch_bytes = 0;
    tl_status st = tl_malloc(ctx, want, &ctx->scratch);
    if (st == TL_OK)
        ctx->scratch_bytes = want;
    return st;
}

/* Timings on several threads share the one flush buffer (what it holds
 * does not matter). */
static tl_status ensure_scratch(tl_ctx *ctx)
{
    pthread_mutex_lock(&ctx->ops_lock);
    tl_status st = ensure_scratch_locked(ctx);
    pthread_mutex_unlock(&ctx->ops_lock);
    return st;
}

static tl_status create_events(timing_run *t)
{
    int want = 2 * t->reps * t->nwork;
    t->events = calloc((size_t)want, sizeof *t->events);
    if (!t->events)
        return tli_fail(t->ctx, TL_ERR_OUT_OF_MEMORY, "%s: out of memory for %d events", t->api, want);
    for (; t->n_events < want; t->n_events++) {
        CUresult r = t->ctx->cu->cuEventCreate(&t->events[t->n_events], CU_EVENT_DEFAULT);
        if (r != CUDA_SUCCESS)
            return tli_cu_check(t->ctx, r, "cuEventCreate");
    }
    return TL_OK;
}

static void destroy_events(timing_run *t)
{
    for (int i = 0; i < t->n_events; i++)
        t->ctx->cu->cuEventDestroy(t->events[i]);
    free(t->events);
}

/* Runs work j once. The message a failing fn leaves on the context is
 * kept; a failing fn that leaves none gets a generic one, and a succeeding
 * fn leaves the context's previous message as it was. */
static tl_status call_work(timing_run *t, int j)
{
    char *msg = tli_ctx_msg(t->ctx), saved = msg[0];
    msg[0] = '\0';
    tl_status st = t->fns[j](t->users[j], t->stream);
    if (st == TL_OK) {
        if (!msg[0])
            msg[0] = saved;
        return TL_OK;
    }
    if (!msg[0])
        return tli_fail(t->ctx, st, "%s: timed work %d failed with %s", t->api, j, tl_status_name(st));
    return st;
}

/* Repetition i runs every work once, in order, so that all of them see the
 * same clocks and temperature. */
static tl_status enqueue_repetitions(timing_run *t)
{
    const tli_driver_api *cu = t->ctx->cu;
    tl_status st = TL_OK;
    for (int i = 0; i < t->reps && st == TL_OK; i++)
        for (int j = 0; j < t->nwork && st == TL_OK; j++) {
            int e = 2 * (i * t->nwork + j);
            if (t->flush)
                st = tli_cu_check(t->ctx, cu->cuMemsetD8Async(t->ctx->scratch, (unsigned char)(i + j),
                                                              t->ctx->scratch_bytes, t->stream),
                                  "cuMemsetD8Async (L2 flush)");
            if (st == TL_OK)
                st = tli_cu_check(t->ctx, cu->cuEventRecord(t->events[e], t->stream), "cuEventRecord");
            if (st == TL_OK)
                st = call_work(t, j);
            if (st == TL_OK)
                st = tli_cu_check(t->ctx, cu->cuEventRecord(t->events[e + 1], t->stream), "cuEventRecord");
        }
    return st;
}

static int compare_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static void summarise(float *ms, int reps, tl_timing *out)
{
    qsort(ms, (size_t)reps, sizeof *ms, compare_float);
    double sum = 0;
    for (int i = 0; i < reps; i++)
        sum += ms[i];
    int h = reps / 2;
    out->median_ms = reps % 2 ? ms[h] : 0.5 * ((double)ms[h - 1] + ms[h]);
    out->min_ms = ms[0];
    out->max_ms = ms[reps - 1];
    out->mean_ms = sum / reps;
    out->reps = reps;
}

/* Waits for the last event and reduces each work's times to its summary. */
static tl_status collect(timing_run *t, tl_timing *out)
{
    const tli_driver_api *cu = t->ctx->cu;
    tl_status st = tli_cu_check(t->ctx, cu->cuEventSynchronize(t->events[t->n_events - 1]),
                                "cuEventSynchronize");
    float *ms = st == TL_OK ? malloc(sizeof *ms * (size_t)t->reps) : NULL;
    if (st == TL_OK && !ms)
        st = tli_fail(t->ctx, TL_ERR_OUT_OF_MEMORY, "%s: out of memory", t->api);
    for (int j = 0; st == TL_OK && j < t->nwork; j++) {
        for (int i = 0; st == TL_OK && i < t->reps; i++) {
            int e = 2 * (i * t->nwork + j);
            st = tli_cu_check(t->ctx, cu->cuEventElapsedTime(&ms[i], t->events[e], t->events[e + 1]),
                              "cuEventElapsedTime");
        }
        if (st == TL_OK)
            summarise(ms, t->reps, &out[j]);
    }
    free(ms);
    return st;
}

static tl_status time_prepared(timing_run *t, tl_timing *out)
{
    tl_status st = TL_OK;
    for (int i = 0; i < t->warmup && st == TL_OK; i++)
        for (int j = 0; j < t->nwork && st == TL_OK; j++)
            st = call_work(t, j);
    if (st == TL_OK && t->flush)
        st = ensure_scratch(t->ctx);
    if (st == TL_OK)
        st = create_events(t);
    if (st == TL_OK)
        st = enqueue_repetitions(t);
    if (st == TL_OK)
        st = collect(t, out);
    destroy_events(t);
    return st;
}

static tl_status time_works(tl_ctx *ctx, void *stream, int n, tl_work_fn const *fns, void *const *users,
                            const tl_timing_options *opt, tl_timing *out, const char *api)
{
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    if (n < 1 || !fns || !users || !out)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: %s", api,
                        n < 1 ? "n must be >= 1" : !fns ? "fns is NULL" : !users ? "users is NULL" : "out is NULL");
    for (int j = 0; j < n; j++)
        if (!fns[j])
            return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: fn %d is NULL", api, j);
    memset(out, 0, sizeof *out * (size_t)n);
    timing_run t = {.ctx = ctx, .stream = (CUstream)stream, .nwork = n, .fns = fns, .users = users, .api = api};
    tl_status st = read_options(&t, opt);
    if (st == TL_OK && (int64_t)t.reps * n > MAX_REPS)
        st = tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: reps x n = %lld is above %d", api,
                      (long long)t.reps * n, MAX_REPS);
    if (st != TL_OK)
        return st;
    if (!ctx->has_device)
        return tli_fail(ctx, TL_ERR_NO_DEVICE, "%s: the context has no device (it was "
                        "created with TL_NO_DEVICE)", api);
    if ((st = tli_ctx_bind(ctx)) != TL_OK)
        return st;
    return time_prepared(&t, out);
}

tl_status tl_time(tl_ctx *ctx, void *stream, tl_work_fn fn, void *user,
                  const tl_timing_options *opt, tl_timing *out)
{
    if (ctx && !fn)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_time: fn is NULL");
    return time_works(ctx, stream, 1, &fn, &user, opt, out, "tl_time");
}

tl_status tl_time_interleaved(tl_ctx *ctx, void *stream, int n, tl_work_fn const *fns, void *const *users,
                              const tl_timing_options *opt, tl_timing *out)
{
    return time_works(ctx, stream, n, fns, users, opt, out, "tl_time_interleaved");
}

typedef struct launch_work {
    const tl_program *p;
    int nargs;
    const tl_arg *args;
} launch_work;

static tl_status launch_once(void *user, void *stream)
{
    const launch_work *w = user;
    return tl_launch(w->p, stream, w->nargs, w->args);
}

tl_status tl_time_launch(const tl_program *p, void *stream, int nargs, const tl_arg *args,
                         const tl_timing_options *opt, tl_timing *out)
{
    tl_ctx *ctx = p ? tli_program_ctx(p) : NULL;
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    launch_work w = {p, nargs, args};
    tl_work_fn fn = launch_once;
    void *user = &w;
    return time_works(ctx, stream, 1, &fn, &user, opt, out, "tl_time_launch");
}
