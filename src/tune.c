/*
 * tune.c - the autotuner's core: from a list of candidates to a ranked
 * table, through a runner (tune.h) that compiles, checks and times them.
 * It knows nothing of GPUs, so a test drives it with a fake runner and a
 * fake clock.
 *
 *   compile   every candidate at once (the runner batches them)
 *   measure   in space order: check, then a short timing (tl_time), until
 *             the budget is spent
 *   final     the fastest few and the baseline timed together, taking
 *             turns (tl_time_interleaved): the top of the table is ranked
 *             under one set of clocks, not across minutes of drift
 *   rank      passed (finalists first), then the rest in space order
 */
#include "tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCREEN_WARMUP 2
#define FINAL_WARMUP 3

/* ------------------------------------------------------------------------ */
/* Configurations as text                                                    */
/* ------------------------------------------------------------------------ */

char *tli_tune_config_format(const char *const *names, const tl_tune_config *c, char *buf, size_t len)
{
    int last = TL_TUNE_MAX_PARAMS - 1;
    if (!names)
        while (last > 0 && c->v[last] == 0)
            last--;
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i <= last && (!names || names[i]) && used < len; i++) {
        int w = names ? snprintf(buf + used, len - used, "%s%s=%d", i ? " " : "", names[i], c->v[i])
                      : snprintf(buf + used, len - used, "%sp%d=%d", i ? " " : "", i, c->v[i]);
        used += w > 0 ? (size_t)w : 0;
    }
    return buf;
}

static int name_index(const char *const *names, const char *name, size_t n)
{
    for (int i = 0; names[i] && i < TL_TUNE_MAX_PARAMS; i++)
        if (strlen(names[i]) == n && strncmp(names[i], name, n) == 0)
            return i;
    return -1;
}

/* names NULL: any names, taken in order (the text's shape is checked). */
bool tli_tune_config_parse(const char *const *names, const char *text, tl_tune_config *out)
{
    memset(out, 0, sizeof *out);
    bool seen[TL_TUNE_MAX_PARAMS] = {false};
    int count = 0;
    for (const char *p = text; *p;) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        const char *eq = strchr(p, '=');
        size_t n = eq ? (size_t)(eq - p) : 0;
        if (!n || memchr(p, ' ', n))
            return false;
        int i = names ? name_index(names, p, n) : count;
        if (i < 0 || i >= TL_TUNE_MAX_PARAMS || seen[i])
            return false;
        char *end;
        long v = strtol(eq + 1, &end, 10);
        if (end == eq + 1 || (*end && *end != ' ') || v < -(1L << 30) || v > (1L << 30))
            return false;
        seen[i] = true;
        out->v[i] = (int)v;
        count++;
        p = end;
    }
    return count > 0;
}

TL_API const char *tl_tune_outcome_name(tl_tune_outcome o)
{
    switch (o) {
    case TL_TUNE_PASSED: return "passed";
    case TL_TUNE_REJECTED: return "rejected";
    case TL_TUNE_COMPILE_FAILED: return "compile failed";
    case TL_TUNE_RUN_FAILED: return "run failed";
    case TL_TUNE_WRONG: return "wrong";
    case TL_TUNE_SKIPPED: return "skipped";
    }
    return "unknown";
}

/* ------------------------------------------------------------------------ */
/* Results                                                                   */
/* ------------------------------------------------------------------------ */

tl_tune_result *tli_tune_result_new(int n)
{
    tl_tune_result *r = calloc(1, sizeof *r);
    if (r && !(r->entries = calloc((size_t)(n > 0 ? n : 1), sizeof *r->entries))) {
        free(r);
        return NULL;
    }
    if (r)
        r->n = n;
    return r;
}

TL_API void tl_tune_result_destroy(tl_tune_result *r)
{
    if (r)
        free(r->entries);
    free(r);
}

/* ------------------------------------------------------------------------ */
/* The run                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct run {
    const tli_tune_runner *r;
    const tli_tune_plan *plan;
    tl_tune_result *res;
    double t0;
    double measure_t0;   /* when the measure phase began          */
    int measured;        /* candidates the measure phase finished */
    int best;            /* entry of the fastest so far; -1       */
} run;

static double elapsed(const run *u) { return u->r->now(u->r->self) - u->t0; }

static bool budget_spent(const run *u)
{
    return u->plan->budget_s > 0 && elapsed(u) >= u->plan->budget_s;
}

static void fail(run *u, tl_tune_entry *e, tl_tune_outcome o, tl_status st)
{
    e->outcome = o;
    e->status = st;
    tli_fmt(e->note, sizeof e->note, "%s", u->r->error ? u->r->error(u->r->self) : "");
}

static void report(run *u, const char *phase, int done, int total, double left)
{
    if (!u->plan->progress)
        return;
    tl_tune_progress p = {.phase = phase, .done = done, .total = total, .elapsed_s = elapsed(u), .left_s = left,
                          .best = ""};
    for (int i = 0; i < u->res->n; i++)
        p.passed += u->res->entries[i].outcome == TL_TUNE_PASSED && u->res->entries[i].ms > 0;
    if (u->best >= 0) {
        p.best_ms = u->res->entries[u->best].ms;
        p.best = u->res->entries[u->best].text;
    }
    u->plan->progress(u->plan->progress_user, &p);
}

/* Time left in the measure phase: the pace so far times what remains,
 * capped by the budget. */
static double time_left(const run *u, int remaining)
{
    if (u->measured == 0)
        return u->plan->budget_s > 0 ? u->plan->budget_s - elapsed(u) : -1;
    double pace = (u->r->now(u->r->self) - u->measure_t0) / u->measured;
    double left = pace * remaining;
    if (u->plan->budget_s > 0 && left > u->plan->budget_s - elapsed(u))
        left = u->plan->budget_s - elapsed(u);
    return left < 0 ? 0 : left;
}

static void measure_one(run *u, int i)
{
    tl_tune_entry *e = &u->res->entries[i];
    tl_check_result cr;
    tl_status st = u->r->check(u->r->self, i, &cr);
    if (st != TL_OK) {
        fail(u, e, TL_TUNE_RUN_FAILED, st);
        return;
    }
    e->rel_err = cr.rel_err;
    if (!cr.pass) {
        e->outcome = TL_TUNE_WRONG;
        tli_fmt(e->note, sizeof e->note, "check failed: rel err %.3e, %lld non-finite, first bad element %lld",
                cr.rel_err, (long long)cr.nonfinite, (long long)cr.first_bad);
        return;
    }
    double ms = 0;
    st = u->r->time(u->r->self, 1, &i, SCREEN_WARMUP, u->plan->screen_reps, &ms);
    if (st != TL_OK) {
        fail(u, e, TL_TUNE_RUN_FAILED, st);
        return;
    }
    e->ms = ms;
    if (u->best < 0 || ms < u->res->entries[u->best].ms)
        u->best = i;
}

static void measure_all(run *u)
{
    int total = 0;
    for (int i = 0; i < u->res->n; i++)
        total += u->res->entries[i].outcome == TL_TUNE_PASSED;
    u->measure_t0 = u->r->now(u->r->self);
    report(u, "measure", 0, total, time_left(u, total));
    for (int i = 0; i < u->res->n; i++) {
        tl_tune_entry *e = &u->res->entries[i];
        if (e->outcome != TL_TUNE_PASSED)
            continue;
        if (budget_spent(u)) {
            e->outcome = TL_TUNE_SKIPPED;
            tli_fmt(e->note, sizeof e->note, "not measured: the time budget of %g s was spent", u->plan->budget_s);
            continue;
        }
        measure_one(u, i);
        u->measured++;
        report(u, "measure", u->measured, total, time_left(u, total - u->measured));
    }
}

/* Indices of the (at most k) fastest measured candidates, fastest first. */
static int fastest(const tl_tune_result *res, int k, int *idx)
{
    int n = 0;
    for (int i = 0; i < res->n; i++) {
        const tl_tune_entry *e = &res->entries[i];
        if (e->outcome != TL_TUNE_PASSED || e->ms <= 0)
            continue;
        int at = n < k ? n++ : k;
        while (at > 0 && res->entries[idx[at - 1]].ms > e->ms) {
            if (at < k)
                idx[at] = idx[at - 1];
            at--;
        }
        if (at < k)
            idx[at] = i;
    }
    return n;
}

/* When the interleaved round fails, each work is timed alone, so that
 * one that fails is marked and the others keep a time. */
static void time_separately(run *u, int n, const int *idx, double *ms)
{
    for (int j = 0; j < n; j++) {
        tl_status st = u->r->time(u->r->self, 1, &idx[j], FINAL_WARMUP, u->plan->final_reps, &ms[j]);
        if (st == TL_OK)
            continue;
        ms[j] = 0;
        if (idx[j] >= 0)
            fail(u, &u->res->entries[idx[j]], TL_TUNE_RUN_FAILED, st);
    }
}

static void final_round(run *u)
{
    int k = u->plan->finalists;
    int *idx = calloc((size_t)k + 1, sizeof *idx);
    double *ms = calloc((size_t)k + 1, sizeof *ms);
    if (!idx || !ms) {
        free(idx), free(ms);
        return; /* the screening times stand */
    }
    int n = fastest(u->res, k, idx);
    if (u->r->has_baseline)
        idx[n++] = -1;
    report(u, "final", 0, n, -1);
    if (n > 0 && u->r->time(u->r->self, n, idx, FINAL_WARMUP, u->plan->final_reps, ms) != TL_OK)
        time_separately(u, n, idx, ms);
    for (int j = 0; j < n; j++) {
        if (idx[j] < 0) {
            u->res->baseline_ms = ms[j];
            continue;
        }
        tl_tune_entry *e = &u->res->entries[idx[j]];
        if (e->outcome == TL_TUNE_PASSED) {
            e->ms = ms[j];
            e->finalist = 1;
        }
    }
    free(idx), free(ms);
}

/* Passed first (finalists by their final time, then the others by their
 * screening time), then the rest in space order. */
static int rank_cmp(const void *pa, const void *pb)
{
    const tl_tune_entry *a = pa, *b = pb;
    int ga = a->outcome == TL_TUNE_PASSED ? (a->finalist ? 0 : 1) : 2;
    int gb = b->outcome == TL_TUNE_PASSED ? (b->finalist ? 0 : 1) : 2;
    if (ga != gb)
        return ga - gb;
    if (ga < 2 && a->ms != b->ms)
        return a->ms < b->ms ? -1 : 1;
    return a->index - b->index;
}

/* Work per second in the unit's scale: TFLOP/s or GB/s. */
static double rate_of(const tli_tune_runner *r, double ms)
{
    if (r->work <= 0 || ms <= 0 || !r->unit)
        return 0;
    return r->work / (ms * 1e-3) / (r->unit[0] == 'T' ? 1e12 : 1e9);
}

static void rank(run *u)
{
    tl_tune_result *res = u->res;
    res->passed = 0;
    for (int i = 0; i < res->n; i++) {
        tl_tune_entry *e = &res->entries[i];
        if (e->outcome == TL_TUNE_PASSED && e->ms <= 0)
            fail(u, e, TL_TUNE_RUN_FAILED, TL_ERR_INTERNAL); /* not timed: cannot be ranked */
        if (e->outcome != TL_TUNE_PASSED)
            continue;
        res->passed++;
        e->rate = rate_of(u->r, e->ms);
        e->ratio = res->baseline_ms > 0 ? res->baseline_ms / e->ms : 0;
    }
    res->baseline_rate = res->baseline_ms > 0 ? rate_of(u->r, res->baseline_ms) : 0;
    qsort(res->entries, (size_t)res->n, sizeof *res->entries, rank_cmp);
}

tl_status tli_tune_run(const tli_tune_runner *r, const tli_tune_plan *plan, tl_tune_result *res)
{
    run u = {.r = r, .plan = plan, .res = res, .best = -1};
    u.t0 = r->now(r->self);
    for (int i = 0; i < plan->n; i++) {
        tl_tune_entry *e = &res->entries[i];
        e->index = i;
        e->config = plan->configs[i];
        tli_tune_config_format(plan->param_names, &e->config, e->text, sizeof e->text);
    }
    report(&u, "compile", 0, plan->n, -1);
    r->compile(r->self, plan->n, res->entries);
    res->compile_s = elapsed(&u);
    for (int i = 0; i < plan->n; i++)
        res->compiled += res->entries[i].outcome == TL_TUNE_PASSED;
    report(&u, "compile", plan->n, plan->n, -1);
    measure_all(&u);
    final_round(&u);
    rank(&u);
    res->total_s = elapsed(&u);
    u.best = res->passed > 0 ? 0 : -1;
    report(&u, "done", u.measured, u.measured, 0);
    return TL_OK;
}
