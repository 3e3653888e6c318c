/* precompile.h - a GPU test program's kernels compiled together before its
 * tests run. From a cold cache each op compiles its program at its first
 * launch, one after another; here the setup walks the tests once in
 * planning mode (their run functions build each kernel they would launch
 * and return), and tl_compile_many compiles the lot on every core. The
 * cubins stay in the context's cache, where the launches find them. A
 * kernel the walk misses is only compiled at its launch, as before. */
#ifndef TILEC_TESTS_PRECOMPILE_H
#define TILEC_TESTS_PRECOMPILE_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tilec.h"

typedef struct precompile {
    bool planning; /* the run functions collect kernels instead of launching */
    tl_compile_job *jobs;
    int n, cap;
} precompile;

static precompile plan;

/* Adds kernel k (built by the caller; the plan owns it) and whether its
 * safe variant will be launched too (rows or starts off 16 bytes). */
static inline void precompile_add(tl_kernel *k, int safe)
{
    if (plan.n == plan.cap) {
        int cap = plan.cap ? 2 * plan.cap : 64;
        tl_compile_job *j = realloc(plan.jobs, (size_t)cap * sizeof *j);
        if (!j) {
            tl_kernel_destroy(k);
            return; /* compiled at its launch instead */
        }
        plan.jobs = j, plan.cap = cap;
    }
    plan.jobs[plan.n++] = (tl_compile_job){.kernel = k, .safe_variant = safe};
}

/* Compiles what the walk collected, says how long it took, and frees it. */
static inline void precompile_run(tl_ctx *c, const char *what)
{
    struct timespec t0, t1;
    timespec_get(&t0, TIME_UTC);
    tl_status st = tl_compile_many(c, plan.jobs, plan.n, NULL, 0);
    timespec_get(&t1, TIME_UTC);
    int failed = 0;
    for (int i = 0; i < plan.n; i++) {
        failed += plan.jobs[i].status != TL_OK;
        tl_program_destroy(plan.jobs[i].program);
        tl_kernel_destroy(plan.jobs[i].kernel);
    }
    printf("precompiled %d %s programs in %.1f s (%d failed%s%s)\n", plan.n, what,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9, failed,
           st == TL_OK ? "" : ": ", st == TL_OK ? "" : tl_ctx_error(c));
    free(plan.jobs);
    plan = (precompile){0};
    const char *only = getenv("TILEC_TEST_PLAN_ONLY");
    if (failed && only && *only)
        exit(1); /* make plan-check: a kernel a test would launch does not compile */
}

#endif
