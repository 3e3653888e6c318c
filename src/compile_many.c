/*
 * compile_many.c - tl_compile_many: a batch of kernels compiled with NVRTC
 * on several threads.
 *
 * Lowering takes milliseconds and NVRTC takes tens to thousands, so only
 * the NVRTC phase is spread: every kernel is prepared (verified, lowered,
 * emitted) and looked up in the cache on the calling thread; the misses
 * go to a pool of threads that pull them from a shared counter; then the
 * cubins are stored and the modules loaded on the calling thread again.
 * The NVRTC phase (tli_program_nvrtc) touches neither the context nor the
 * cache, which is what makes it safe off the calling thread.
 */
#include "program.h"

#include "kernel.h"
#include "nvrtc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_THREADS 256

typedef struct batch_item {
    tl_compile_job *job;
    tl_program *p;      /* prepared; NULL when preparing failed            */
    uint8_t key[32];    /* cache key of its cubin                          */
    int same_as;        /* -1, or an earlier item with the same key        */
    bool compile;       /* its NVRTC phase runs in the pool                */
    tl_status st;       /* of the NVRTC phase                              */
    char *log;          /* NVRTC's log (malloc'ed), explains a failure     */
} batch_item;

typedef struct batch {
    batch_item *items;
    int n;
    int *todo;          /* indices of the items to compile                 */
    int ntodo;
    atomic_int next;    /* the next entry of todo to take                  */
    const tl_compile_options *opt;
} batch;

/* ------------------------------------------------------------------------ */
/* Messages                                                                  */
/* ------------------------------------------------------------------------ */

static void job_fail(tl_compile_job *job, tl_status st, const char *fmt, ...) TLI_PRINTF(3, 4);
static void job_fail(tl_compile_job *job, tl_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(job->message, sizeof job->message, fmt, ap);
    va_end(ap);
    job->status = st;
}

/* NVRTC ran without a context, so the message is made here from its log. */
static void nvrtc_failure(batch_item *it)
{
    const char *log = it->log ? it->log : "";
    job_fail(it->job, it->st, "tl_compile_many: NVRTC could not compile kernel '%s' for %s (%s)%s%s",
             it->p->kname, it->p->target, tl_status_name(it->st), *log ? ":\n" : "", log);
}

/* ------------------------------------------------------------------------ */
/* Phase 1: prepare and look up, on the calling thread                       */
/* ------------------------------------------------------------------------ */

static void prepare_item(tl_ctx *ctx, batch_item *it, const tl_compile_options *opt)
{
    tl_kernel *k = it->job->kernel;
    if (!k) {
        job_fail(it->job, TL_ERR_INVALID_ARG, "tl_compile_many: the job's kernel is NULL");
        return;
    }
    if (k->ctx != ctx) {
        job_fail(it->job, TL_ERR_INVALID_ARG, "tl_compile_many: kernel '%s' belongs to another context",
                 k->ir.name);
        return;
    }
    tl_status st = tli_program_prepare(k, opt, "tl_compile_many", &it->p);
    if (st != TL_OK) {
        job_fail(it->job, st, "%s", tl_ctx_error(ctx));
        return;
    }
    if (tli_program_cache_lookup(ctx, it->p, opt))
        return;
    tli_program_cache_key(it->p, opt, it->key);
    it->compile = true;
}

typedef struct sized {
    size_t len; /* of the source */
    int item;
} sized;

static int longer_first(const void *pa, const void *pb)
{
    const sized *a = pa, *b = pb;
    return a->len != b->len ? (a->len < b->len) - (a->len > b->len) : a->item - b->item;
}

/* Longest source first: compile time grows with the source, and a long
 * kernel taken last would leave the other threads idle at the end. */
static void order_todo(batch *b)
{
    sized *s = malloc((size_t)(b->ntodo ? b->ntodo : 1) * sizeof *s);
    if (!s)
        return; /* the given order works too */
    for (int t = 0; t < b->ntodo; t++)
        s[t] = (sized){strlen(b->items[b->todo[t]].p->source), b->todo[t]};
    qsort(s, (size_t)b->ntodo, sizeof *s, longer_first);
    for (int t = 0; t < b->ntodo; t++)
        b->todo[t] = s[t].item;
    free(s);
}

/* Kernels with one source share one NVRTC run: the later ones wait for the
 * first and copy its cubin. */
static void find_duplicates(batch *b)
{
    for (int i = 0; i < b->n; i++) {
        batch_item *it = &b->items[i];
        if (!it->compile)
            continue;
        for (int j = 0; j < i; j++)
            if (b->items[j].compile && b->items[j].same_as < 0 && memcmp(b->items[j].key, it->key, 32) == 0) {
                it->same_as = j;
                break;
            }
        if (it->same_as < 0)
            b->todo[b->ntodo++] = i;
    }
}

/* ------------------------------------------------------------------------ */
/* Phase 2: NVRTC on the pool                                                */
/* ------------------------------------------------------------------------ */

static void *worker(void *arg)
{
    batch *b = arg;
    for (int t; (t = atomic_fetch_add(&b->next, 1)) < b->ntodo;) {
        batch_item *it = &b->items[b->todo[t]];
        it->st = tli_program_nvrtc(it->p, b->opt, &it->log);
    }
    return NULL;
}

static int default_threads(void)
{
    const char *env = getenv("TILEC_COMPILE_THREADS");
    long n = env && *env ? strtol(env, NULL, 10) : 0;
    if (n < 1)
        n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (int)n;
}

/* The calling thread works too; a thread that cannot be started only
 * leaves more work to the others. */
static void run_pool(batch *b, int threads)
{
    if (threads == 0)
        threads = default_threads();
    if (threads > b->ntodo)
        threads = b->ntodo;
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;
    pthread_t tid[MAX_THREADS];
    int started = 0;
    for (int i = 1; i < threads; i++)
        if (pthread_create(&tid[started], NULL, worker, b) == 0)
            started++;
    worker(b);
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
}

/* Without NVRTC no miss can compile: each says why, in the loader's words. */
static bool nvrtc_present(batch *b)
{
    const tli_nvrtc_api *rtc;
    char msg[512];
    if (b->ntodo == 0 || tli_load_nvrtc(&rtc, msg, sizeof msg) == TL_OK)
        return true;
    for (int i = 0; i < b->n; i++)
        if (b->items[i].compile)
            job_fail(b->items[i].job, TL_ERR_NO_NVRTC, "tl_compile_many: %s", msg);
    return false;
}

/* ------------------------------------------------------------------------ */
/* Phase 3: store, load, hand over; on the calling thread                    */
/* ------------------------------------------------------------------------ */

static tl_status copy_cubin(tl_program *dst, const tl_program *src)
{
    dst->cubin = malloc(src->cubin_len ? src->cubin_len : 1);
    if (!dst->cubin)
        return TL_ERR_OUT_OF_MEMORY;
    memcpy(dst->cubin, src->cubin, src->cubin_len);
    dst->cubin_len = src->cubin_len;
    return TL_OK;
}

/* Kernels that waited for an earlier one with the same source take its
 * outcome, while every prepared program is still at hand. */
static void share_results(batch *b)
{
    for (int i = 0; i < b->n; i++) {
        batch_item *it = &b->items[i];
        if (!it->compile || it->same_as < 0)
            continue;
        const batch_item *src = &b->items[it->same_as];
        it->st = src->st;
        it->log = src->log ? tli_strdup(src->log) : NULL;
        if (it->st == TL_OK && copy_cubin(it->p, src->p) != TL_OK)
            job_fail(it->job, TL_ERR_OUT_OF_MEMORY, "tl_compile_many: out of host memory");
    }
}

static void finish_item(tl_ctx *ctx, batch *b, batch_item *it)
{
    if (!it->p || it->job->status != TL_OK)
        return;
    if (it->compile) {
        if (it->st != TL_OK) {
            nvrtc_failure(it);
            return;
        }
        tli_program_cache_store(ctx, it->p, b->opt);
    }
    tl_status st = tli_program_load(ctx, it->p);
    if (st != TL_OK) {
        job_fail(it->job, st, "%s", tl_ctx_error(ctx));
        return;
    }
    if (it->p->from_cache)
        it->p->compile_ms = 0;
    it->job->program = it->p;
    it->p = NULL;
}

/* The context's message names the first failure and how many there were. */
static tl_status summarise(tl_ctx *ctx, const tl_compile_job *jobs, int n)
{
    int failed = 0, first = -1;
    for (int i = 0; i < n; i++)
        if (jobs[i].status != TL_OK) {
            failed++;
            if (first < 0)
                first = i;
        }
    if (!failed)
        return TL_OK;
    return tli_fail(ctx, jobs[first].status, "tl_compile_many: %d of %d kernels failed; job %d: %s", failed, n,
                    first, jobs[first].message);
}

static tl_status check_call(tl_ctx *ctx, tl_compile_job *jobs, int n, int threads)
{
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    if (n < 0 || (n > 0 && !jobs) || threads < 0)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_compile_many: %s",
                        n < 0 ? "n < 0" : threads < 0 ? "threads < 0" : "jobs is NULL");
    return TL_OK;
}

TL_API tl_status tl_compile_many(tl_ctx *ctx, tl_compile_job *jobs, int n, const tl_compile_options *opt,
                                 int threads)
{
    tl_status st = check_call(ctx, jobs, n, threads);
    if (st != TL_OK || n == 0)
        return st;
    batch b = {.n = n, .opt = opt};
    b.items = calloc((size_t)n, sizeof *b.items);
    b.todo = calloc((size_t)n, sizeof *b.todo);
    if (!b.items || !b.todo) {
        free(b.items);
        free(b.todo);
        return tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "tl_compile_many: out of host memory");
    }
    for (int i = 0; i < n; i++) {
        jobs[i].program = NULL;
        jobs[i].status = TL_OK;
        jobs[i].message[0] = '\0';
        b.items[i] = (batch_item){.job = &jobs[i], .same_as = -1};
        prepare_item(ctx, &b.items[i], opt);
    }
    find_duplicates(&b);
    order_todo(&b);
    if (nvrtc_present(&b)) {
        run_pool(&b, threads);
        share_results(&b);
    }
    for (int i = 0; i < n; i++)
        finish_item(ctx, &b, &b.items[i]);
    for (int i = 0; i < n; i++) {
        tl_program_destroy(b.items[i].p); /* those that did not make it */
        free(b.items[i].log);
    }
    free(b.items);
    free(b.todo);
    return summarise(ctx, jobs, n);
}
