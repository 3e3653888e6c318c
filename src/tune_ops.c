/*
 * tune_ops.c - tl_autotune: the table of tunable prebuilt ops, the checks
 * of a request, the space it gives, and the record it saves.
 *
 * Adding an op to the tuner and the database is one row here: a
 * tli_tune_op (tune.h) with its parameter names, its space, a builder from
 * a configuration, its problem (operands, reference, baseline) and where
 * its records go (dtypes, layout, shape class). The op then consults
 * tli_tune_db_find for an all-zero schedule.
 */
#include "tune.h"

#include "ctx.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static const tli_tune_op *const tune_ops[] = {
    &tli_gemm_tune_op,
    &tli_softmax_tune_op,
    &tli_rmsnorm_tune_op,
    &tli_flash_attn_tune_op,
    NULL,
};

const tli_tune_op *tli_tune_op_find(const char *name)
{
    for (int i = 0; name && tune_ops[i]; i++)
        if (strcmp(tune_ops[i]->name, name) == 0)
            return tune_ops[i];
    return NULL;
}

char *tli_tune_op_names(char *buf, size_t len)
{
    buf[0] = '\0';
    for (int i = 0; tune_ops[i]; i++)
        tli_fmt(buf + strlen(buf), len - strlen(buf), "%s%s", i ? ", " : "", tune_ops[i]->name);
    return buf;
}

/* A size's bucket: the nearest power of two on a log scale (2^p when
 * x < 2^(p + 1/2)), with everything up to 64 in one bucket (and 65..127
 * in 128's): a block tile
 * is 64 to 256 wide, so below that one size is as good as another, and
 * M <= 64 is the decode class (a few tokens against a weight matrix). */
int tli_tune_log2_nearest(int64_t x)
{
    int p = 0;
    while (p < 62 && ((int64_t)1 << (p + 1)) <= x)
        p++;
    /* x >= 2^(p + 1/2)  <=>  x^2 >= 2^(2p + 1); x < 2^31 keeps x^2 exact */
    if (x < ((int64_t)1 << 31) ? (uint64_t)x * (uint64_t)x >= (uint64_t)1 << (2 * p + 1) : false)
        p++;
    return p;
}

void tli_tune_bucket(char axis, int64_t x, char *out, size_t len)
{
    if (x <= 64) {
        tli_fmt(out, len, "%c<=64", axis);
        return;
    }
    int p = tli_tune_log2_nearest(x);
    if (p < 7) /* 65..90 would round to 64, which names the bucket below */
        p = 7;
    tli_fmt(out, len, "%c%lld", axis, (long long)((int64_t)1 << p));
}

tl_status tli_tune_problem_done(tl_ctx *ctx, tl_status st, tli_tune_problem *pb, const char *what,
                                tli_tune_problem **out)
{
    if (st == TL_OK) {
        *out = pb;
        return TL_OK;
    }
    char why[512];
    tli_fmt(why, sizeof why, "%s", tl_ctx_error(ctx));
    pb->destroy(pb);
    return tli_fail(ctx, st, "tl_autotune: setting up the %s: %s", what, why);
}

int tli_tune_copies(tl_ctx *ctx, size_t set_bytes, int max)
{
    tl_device_info info;
    size_t l2 = tl_ctx_get_device_info(ctx, &info) == TL_OK && info.l2_bytes > 0 ? (size_t)info.l2_bytes : 64u << 20;
    size_t n = set_bytes > 2 * l2 ? 1 : 2 * l2 / (set_bytes ? set_bytes : 1) + 1;
    return n > (size_t)max ? max : (int)n;
}

TL_API char *tl_tune_config_text(const char *op, const tl_tune_config *c, char *buf, size_t len)
{
    if (!buf || !len)
        return buf;
    if (!c) {
        buf[0] = '\0';
        return buf;
    }
    const tli_tune_op *o = tli_tune_op_find(op);
    return tli_tune_config_format(o ? o->param_names : NULL, c, buf, len);
}

/* ------------------------------------------------------------------------ */
/* The request                                                               */
/* ------------------------------------------------------------------------ */

static tl_status check_numbers(tl_ctx *ctx, const tl_tune_request *q)
{
    const char *bad = q->budget_s < 0 || !(q->budget_s == q->budget_s) ? "budget_s < 0"
                      : q->tol < 0                                      ? "tol < 0"
                      : q->screen_reps < 0 || q->final_reps < 0       ? "negative reps"
                      : q->finalists < 0 || q->finalists > 64         ? "finalists not in 0..64"
                      : q->nconfigs < 0                                ? "nconfigs < 0"
                      : q->nconfigs > 0 && !q->configs                 ? "configs is NULL"
                      : q->compile_threads < 0                         ? "compile_threads < 0"
                      : q->nargs < 0 || (q->nargs > 0 && !q->args)     ? "bad nargs or args"
                                                                       : NULL;
    return bad ? tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_autotune: %s", bad) : TL_OK;
}

static tl_status check_request(tl_ctx *ctx, const tl_tune_request *q, const tli_tune_op **op)
{
    *op = NULL;
    tl_status st = check_numbers(ctx, q);
    if (st != TL_OK)
        return st;
    if (q->op) {
        char names[256];
        if (!(*op = tli_tune_op_find(q->op)))
            return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_autotune: op '%s' cannot be tuned (tunable: %s)", q->op,
                            tli_tune_op_names(names, sizeof names));
        if (!q->desc)
            return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_autotune: op '%s' needs its descriptor", q->op);
        if ((st = (*op)->check_desc(ctx, q->desc, "tl_autotune")) != TL_OK)
            return st;
    } else if (!q->build) {
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_autotune: give a prebuilt op or a build callback");
    } else if (q->save) {
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_autotune: save applies to prebuilt ops only");
    }
    if (!ctx->has_device)
        return tli_fail(ctx, TL_ERR_NO_DEVICE, "tl_autotune: the context has no device (TL_NO_DEVICE): candidates "
                        "are checked and timed on a GPU");
    return TL_OK;
}

/* c first in the n configs of out (moved there, or added when absent and
 * max allows); returns the new count. */
static int lead_with(tl_tune_config c, tl_tune_config *out, int n, int max)
{
    int at = 0;
    while (at < n && memcmp(&out[at], &c, sizeof c) != 0)
        at++;
    if (at == n) {
        if (n == max)
            at = n - 1; /* the last candidate makes room */
        else
            n++;
    }
    memmove(&out[1], &out[0], (size_t)at * sizeof *out);
    out[0] = c;
    return n;
}

int tli_tune_op_space(tl_ctx *ctx, const tli_tune_op *op, const void *desc, tl_tune_config *out, int max)
{
    int n = op->space(ctx, desc, out, max);
    if (op->fallback && max > 0)
        n = lead_with(op->fallback(ctx, desc), out, n, max);
    return n;
}

/* The candidates: the list, else the generator, else the op's own space
 * led by the op's untuned choice. */
static tl_status gather_space(tl_ctx *ctx, const tl_tune_request *q, const tli_tune_op *op, tl_tune_config **out,
                              int *n)
{
    *n = 0;
    if (!(*out = calloc(TLI_TUNE_MAX_CANDIDATES, sizeof **out)))
        return tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "tl_autotune: out of host memory");
    if (q->nconfigs > TLI_TUNE_MAX_CANDIDATES)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_autotune: more than %d candidates", TLI_TUNE_MAX_CANDIDATES);
    if (q->nconfigs > 0) {
        memcpy(*out, q->configs, (size_t)q->nconfigs * sizeof **out);
        *n = q->nconfigs;
    } else if (q->space) {
        tl_tune_config c;
        while (q->space(q->space_user, *n, &c)) {
            if (*n == TLI_TUNE_MAX_CANDIDATES)
                return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_autotune: the generator gives more than %d candidates",
                                TLI_TUNE_MAX_CANDIDATES);
            (*out)[(*n)++] = c;
        }
    } else if (op) {
        *n = tli_tune_op_space(ctx, op, q->desc, *out, TLI_TUNE_MAX_CANDIDATES);
    }
    return *n > 0 ? TL_OK : tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_autotune: the space of candidates is empty");
}

/* ------------------------------------------------------------------------ */
/* Building candidates and problems for the runner                           */
/* ------------------------------------------------------------------------ */

typedef struct request_ctx {
    const tl_tune_request *q;
    const tli_tune_op *op;
} request_ctx;

static tl_status build_candidate(void *user, tl_ctx *ctx, const tl_tune_config *cfg, tl_kernel **out)
{
    const request_ctx *r = user;
    if (r->op)
        return r->op->build(ctx, r->q->desc, cfg, out);
    return r->q->build(r->q->build_user, ctx, cfg, out);
}

static tl_status make_problem(void *user, tl_ctx *ctx, const tl_program *first, tli_tune_problem **out)
{
    const request_ctx *r = user;
    if (r->op)
        return r->op->problem(ctx, r->q->desc, r->q->tol, out);
    return tli_tune_custom_problem(ctx, first, r->q, out);
}

/* ------------------------------------------------------------------------ */
/* Saving                                                                    */
/* ------------------------------------------------------------------------ */

static void save_best(tl_ctx *ctx, const request_ctx *r, tl_tune_result *res)
{
    char why[160];
    if (r->op->ignores_records && r->op->ignores_records(ctx, r->q->desc, why, sizeof why)) {
        tli_log(ctx, TL_LOG_WARN, "tl_autotune: %s: %s; nothing recorded", r->op->name, why);
        return;
    }
    if (r->op->baseline_untuned && res->baseline_ms > 0 && !(res->entries[0].ratio > 1)) {
        tli_log(ctx, TL_LOG_WARN, "tl_autotune: %s: no candidate beat the untuned op (the best: %.3f x); nothing "
                "recorded", r->op->name, res->entries[0].ratio);
        return;
    }
    tli_tune_key key;
    r->op->key(r->q->desc, &key);
    tl_tune_record rec;
    tli_tune_record_init(ctx, &key, &rec);
    tli_tune_config_format(r->op->param_names, &res->entries[0].config, rec.config, sizeof rec.config);
    rec.ms = res->entries[0].ms;
    rec.ratio = res->entries[0].ratio;
    tli_fmt(rec.shape, sizeof rec.shape, "%s", res->shape);
    rec.when = (int64_t)time(NULL);
    if (tli_tune_db_save(ctx, &rec) == TL_OK)
        res->saved = 1;
    else
        tli_log(ctx, TL_LOG_WARN, "tl_autotune: the best configuration was not saved: %s", tl_ctx_error(ctx));
}

TL_API tl_status tl_autotune(tl_ctx *ctx, const tl_tune_request *q, tl_tune_result **out)
{
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    if (!q || !out)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_autotune: %s is NULL", q ? "out" : "the request");
    *out = NULL;
    request_ctx r = {.q = q};
    tl_status st = check_request(ctx, q, &r.op);
    tl_tune_config *configs = NULL;
    int n = 0;
    if (st == TL_OK)
        st = gather_space(ctx, q, r.op, &configs, &n);
    tl_tune_result *res = st == TL_OK ? tli_tune_result_new(n) : NULL;
    if (st == TL_OK && !res)
        st = tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "tl_autotune: out of host memory");
    if (st == TL_OK) {
        tli_tune_setup setup = {.ctx = ctx, .n = n, .configs = configs, .build = build_candidate, .build_user = &r,
                                .problem = make_problem, .problem_user = &r,
                                .compile_threads = q->compile_threads, .stream = q->stream,
                                .safe_variants = r.op && r.op->unaligned && r.op->unaligned(q->desc)};
        tli_tune_plan plan = {.n = n, .configs = configs, .param_names = r.op ? r.op->param_names : q->param_names,
                              .budget_s = q->budget_s, .screen_reps = q->screen_reps ? q->screen_reps : 10,
                              .final_reps = q->final_reps ? q->final_reps : 20,
                              .finalists = q->finalists ? q->finalists : 4, .progress = q->progress,
                              .progress_user = q->progress_user};
        st = tli_tune_with_programs(&setup, &plan, res);
    }
    free(configs);
    if (st != TL_OK) {
        tl_tune_result_destroy(res);
        return st;
    }
    tli_fmt(res->op, sizeof res->op, "%s", r.op ? r.op->name : "custom");
    if (q->save && res->passed > 0)
        save_best(ctx, &r, res);
    *out = res;
    return TL_OK;
}
