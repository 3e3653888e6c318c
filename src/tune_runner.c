/*
 * tune_runner.c - the tuner's real runner: builds every candidate, compiles
 * them in one tl_compile_many batch, and runs them on the problem (the
 * op's operands or the caller's arguments) for checking and timing with
 * the library's own tl_time and tl_time_interleaved.
 */
#include "tune.h"

#include "ctx.h"

#include <stdlib.h>
#include <string.h>

typedef struct runner {
    const tli_tune_setup *setup;
    tli_tune_runner *api;     /* gets the problem's work and baseline      */
    tl_program **progs;       /* by candidate; NULL when it did not compile */
    tli_tune_problem *pb;
    tl_status problem_st;     /* of making the problem                     */
    char problem_err[512];
} runner;

/* The first line of a message, short enough for a table's note. */
static void first_line(const char *msg, char *out, size_t len)
{
    size_t n = strcspn(msg, "\n");
    tli_fmt(out, len, "%.*s", (int)(n > 400 ? 400 : n), msg);
}

/* Which step refused a candidate, from tl_compile's status: NVRTC says
 * TL_ERR_COMPILE, loading TL_ERR_CUDA; the builder and the lowering give
 * the others (shapes, shared memory, unsupported features). */
static tl_tune_outcome outcome_of(tl_status st)
{
    if (st == TL_ERR_COMPILE || st == TL_ERR_NO_NVRTC)
        return TL_TUNE_COMPILE_FAILED;
    if (st == TL_ERR_CUDA)
        return TL_TUNE_RUN_FAILED;
    return TL_TUNE_REJECTED;
}

static void build_all(runner *r, int n, tl_tune_entry *e, tl_compile_job *jobs)
{
    const tli_tune_setup *s = r->setup;
    for (int i = 0; i < n; i++) {
        tl_status st = s->build(s->build_user, s->ctx, &s->configs[i], &jobs[i].kernel);
        if (st == TL_OK)
            continue;
        jobs[i].kernel = NULL;
        e[i].outcome = TL_TUNE_REJECTED;
        e[i].status = st;
        first_line(tl_ctx_error(s->ctx), e[i].note, sizeof e[i].note);
    }
}

static const tl_program *first_program(const runner *r)
{
    for (int i = 0; i < r->setup->n; i++)
        if (r->progs[i])
            return r->progs[i];
    return NULL;
}

/* The problem is made once the candidates are compiled (a custom kernel's
 * comes from its first program); the core reads the work and the baseline
 * after the compile step. */
static void make_problem(runner *r)
{
    const tli_tune_setup *s = r->setup;
    r->problem_st = s->problem(s->problem_user, s->ctx, first_program(r), &r->pb);
    if (r->problem_st != TL_OK) {
        tli_fmt(r->problem_err, sizeof r->problem_err, "%s", tl_ctx_error(s->ctx));
        r->pb = NULL;
        return;
    }
    r->api->has_baseline = r->pb->baseline != NULL;
    r->api->work = r->pb->work;
    r->api->unit = r->pb->unit;
}

static void compile_all(void *self, int n, tl_tune_entry *e)
{
    runner *r = self;
    tl_compile_job *jobs = calloc((size_t)n, sizeof *jobs);
    tl_compile_job **batch = calloc((size_t)n, sizeof *batch);
    if (!jobs || !batch) {
        for (int i = 0; i < n; i++)
            e[i].outcome = TL_TUNE_REJECTED, e[i].status = TL_ERR_OUT_OF_MEMORY;
        free(jobs), free(batch);
        return;
    }
    build_all(r, n, e, jobs);
    /* only the kernels that were built go into the batch */
    tl_compile_job *packed = jobs;
    int m = 0;
    for (int i = 0; i < n; i++)
        if (jobs[i].kernel)
            batch[m++] = &jobs[i];
    tl_compile_job *dense = calloc((size_t)(m ? m : 1), sizeof *dense);
    for (int j = 0; dense && j < m; j++)
        dense[j].kernel = batch[j]->kernel;
    if (dense)
        tl_compile_many(r->setup->ctx, dense, m, NULL, r->setup->compile_threads);
    for (int j = 0; j < m; j++) {
        int i = (int)(batch[j] - packed);
        tl_status st = dense ? dense[j].status : TL_ERR_OUT_OF_MEMORY;
        r->progs[i] = dense ? dense[j].program : NULL;
        if (st != TL_OK) {
            e[i].outcome = outcome_of(st);
            e[i].status = st;
            first_line(dense ? dense[j].message : "out of host memory", e[i].note, sizeof e[i].note);
        }
        tl_kernel_destroy(batch[j]->kernel);
    }
    free(dense), free(jobs), free(batch);
    make_problem(r);
}

static tl_status check_one(void *self, int i, tl_check_result *res)
{
    runner *r = self;
    if (!r->pb)
        return tli_fail(r->setup->ctx, r->problem_st, "%s", r->problem_err);
    return r->pb->check(r->pb, r->progs[i], r->setup->stream, res);
}

typedef struct timed_work {
    runner *r;
    int idx; /* candidate, or -1: the baseline */
} timed_work;

static tl_status run_work(void *user, void *stream)
{
    timed_work *w = user;
    tli_tune_problem *pb = w->r->pb;
    return w->idx < 0 ? pb->baseline(pb, stream) : pb->run(pb, w->r->progs[w->idx], stream);
}

static tl_status time_some(void *self, int n, const int *idx, int warmup, int reps, double *ms)
{
    runner *r = self;
    timed_work w[n];
    tl_work_fn fns[n];
    void *users[n];
    tl_timing t[n];
    for (int j = 0; j < n; j++) {
        w[j] = (timed_work){r, idx[j]};
        fns[j] = run_work;
        users[j] = &w[j];
    }
    tl_timing_options opt = {.warmup = warmup, .reps = reps};
    tl_ctx *ctx = r->setup->ctx;
    tl_status st = n == 1 ? tl_time(ctx, r->setup->stream, fns[0], users[0], &opt, t)
                          : tl_time_interleaved(ctx, r->setup->stream, n, fns, users, &opt, t);
    for (int j = 0; j < n; j++)
        ms[j] = st == TL_OK ? t[j].median_ms : 0;
    return st;
}

static double now_s(void *self)
{
    (void)self;
    return tli_now_ms() / 1e3;
}

static const char *error_text(void *self)
{
    runner *r = self;
    return tl_ctx_error(r->setup->ctx);
}

tl_status tli_tune_with_programs(const tli_tune_setup *setup, const tli_tune_plan *plan, tl_tune_result *res)
{
    tli_tune_runner api = {.compile = compile_all, .check = check_one, .time = time_some, .now = now_s,
                           .error = error_text};
    runner r = {.setup = setup, .api = &api};
    api.self = &r;
    if (!(r.progs = calloc((size_t)setup->n, sizeof *r.progs)))
        return tli_fail(setup->ctx, TL_ERR_OUT_OF_MEMORY, "tl_autotune: out of host memory");
    tl_status st = tli_tune_run(&api, plan, res);
    if (r.problem_st != TL_OK)
        st = tli_fail(setup->ctx, r.problem_st, "%s", r.problem_err);
    if (r.pb) {
        tli_fmt(res->baseline, sizeof res->baseline, "%s", r.pb->baseline ? r.pb->baseline_name : "");
        tli_fmt(res->shape, sizeof res->shape, "%s", r.pb->shape);
        tli_fmt(res->unit, sizeof res->unit, "%s", r.pb->unit ? r.pb->unit : "");
        r.pb->destroy(r.pb);
    }
    for (int i = 0; i < setup->n; i++)
        tl_program_destroy(r.progs[i]);
    free(r.progs);
    return st;
}
