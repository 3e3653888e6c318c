/*
 * gemm_sweep.c - times schedules of the prebuilt GEMM against cuBLAS in
 * one run, through the library's tuner (tl_autotune: the schedules
 * compiled in one parallel batch, each checked against cuBLAS with an f32
 * output on poisoned outputs, then timed on random inputs rotated among
 * copies so that they never sit in L2; the fastest few timed again
 * together with cuBLAS). Also the operand copies bench_epilogue rotates.
 */
#include "gemm_sweep.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Schedules                                                                 */
/* ------------------------------------------------------------------------ */

/* The tuner's whole space, unfiltered (static storage, filled once). */
const tl_gemm_schedule *gemm_default_sweep(int *n)
{
    static tl_gemm_schedule list[128];
    static int count;
    if (!count)
        count = tl_gemm_candidates(NULL, NULL, list, 128);
    if (n)
        *n = count < 128 ? count : 128;
    return list;
}

void gemm_schedule_text(const tl_gemm_schedule *s, char *buf, size_t len)
{
    tl_tune_config c = tl_gemm_schedule_to_config(s);
    tl_tune_config_text("gemm", &c, buf, len);
}

int gemm_parse_shape(const char *text, int64_t *m, int64_t *n, int64_t *k)
{
    long long v[3];
    char tail;
    if (!text || sscanf(text, "%lldx%lldx%lld%c", &v[0], &v[1], &v[2], &tail) != 3)
        return -1;
    if (v[0] < 1 || v[1] < 1 || v[2] < 1)
        return -1;
    *m = v[0], *n = v[1], *k = v[2];
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Operands                                                                  */
/* ------------------------------------------------------------------------ */

size_t gemm_operands_c_bytes(const gemm_operands *ops)
{
    return (size_t)(ops->m * ops->n) * tl_dtype_size(ops->out);
}

void gemm_operands_free(gemm_operands *ops)
{
    for (int i = 0; i < GEMM_MAX_COPIES; i++) {
        tl_free(ops->ctx, ops->a[i]);
        tl_free(ops->ctx, ops->b[i]);
        tl_free(ops->ctx, ops->c[i]);
        ops->a[i] = ops->b[i] = ops->c[i] = 0;
    }
    tl_free(ops->ctx, ops->bias);
    ops->bias = 0;
}

/* Enough copies that one pass over them moves more than twice the L2. */
static int copies_for(tl_ctx *ctx, size_t set_bytes)
{
    tl_device_info info;
    size_t l2 = (size_t)64 << 20;
    if (tl_ctx_get_device_info(ctx, &info) == TL_OK && info.l2_bytes > 0)
        l2 = (size_t)info.l2_bytes;
    if (set_bytes == 0 || set_bytes > 2 * l2)
        return 1;
    size_t c = 2 * l2 / set_bytes + 1;
    return c > GEMM_MAX_COPIES ? GEMM_MAX_COPIES : (int)c;
}

static tl_status fill_copy(gemm_operands *ops, int i)
{
    size_t in = tl_dtype_size(ops->in);
    int64_t na = ops->m * ops->k, nb = ops->k * ops->n;
    uint64_t seed = 1 + 16 * (uint64_t)i;
    tl_status st = tl_malloc(ops->ctx, (size_t)na * in, &ops->a[i]);
    if (st == TL_OK)
        st = tl_malloc(ops->ctx, (size_t)nb * in, &ops->b[i]);
    if (st == TL_OK)
        st = tl_malloc(ops->ctx, gemm_operands_c_bytes(ops), &ops->c[i]);
    if (st == TL_OK)
        st = tl_random_fill(ops->ctx, ops->a[i], ops->in, na, seed, -1, 1, NULL);
    if (st == TL_OK)
        st = tl_random_fill(ops->ctx, ops->b[i], ops->in, nb, seed + 1, -1, 1, NULL);
    return st;
}

tl_status gemm_operands_init(gemm_operands *ops, tl_ctx *ctx, int64_t m, int64_t n, int64_t k, tl_dtype in,
                             tl_dtype out)
{
    memset(ops, 0, sizeof *ops);
    ops->ctx = ctx;
    ops->m = m, ops->n = n, ops->k = k;
    ops->in = in, ops->out = out;
    size_t set = (size_t)(m * k + k * n) * tl_dtype_size(in) + gemm_operands_c_bytes(ops);
    ops->copies = copies_for(ctx, set);
    tl_status st = tl_malloc(ctx, (size_t)n * tl_dtype_size(in), &ops->bias);
    if (st == TL_OK)
        st = tl_random_fill(ctx, ops->bias, in, n, 3, -1, 1, NULL);
    for (int i = 0; i < ops->copies && st == TL_OK; i++)
        st = fill_copy(ops, i);
    if (st == TL_OK)
        st = tl_synchronize(ctx);
    if (st != TL_OK)
        gemm_operands_free(ops);
    return st;
}

int gemm_operands_next(gemm_operands *ops)
{
    int i = ops->next;
    ops->next = (ops->next + 1) % ops->copies;
    return i;
}

/* ------------------------------------------------------------------------ */
/* The sweep                                                                 */
/* ------------------------------------------------------------------------ */

static void print_sweep(FILE *out, const char *op, const char *shape, const char *dtype, const tl_tune_result *r,
                        const gemm_sweep_entry *e, int n)
{
    fprintf(out, "  %-48s %9s %9s %9s %9s\n", "impl", "ms", "TFLOP/s", "rel err", "x cuBLAS");
    if (r->baseline_ms > 0) {
        fprintf(out, "csv,%s,%s,%s,baseline:%s,%.4f,%.1f,TFLOP/s,1.000,0\n", op, shape, dtype, r->baseline,
                r->baseline_ms, r->baseline_rate);
        fprintf(out, "  %-48s %9.4f %9.1f %9s %9.3f\n", r->baseline, r->baseline_ms, r->baseline_rate, "-", 1.0);
    }
    for (int i = 0; i < n; i++) {
        char impl[160];
        gemm_schedule_text(&e[i].schedule, impl, sizeof impl);
        if (!e[i].ok) {
            fprintf(out, "  %-48s skipped: %s\n", impl, e[i].note);
            continue;
        }
        fprintf(out, "csv,%s,%s,%s,%s,%.4f,%.1f,TFLOP/s,%.3f,%.2e\n", op, shape, dtype, impl, e[i].ms, e[i].tflops,
                e[i].ratio, e[i].rel_err);
        fprintf(out, "  %-48s %9.4f %9.1f %9.1e %9.3f\n", impl, e[i].ms, e[i].tflops, e[i].rel_err, e[i].ratio);
    }
}

/* The tuner's entries back in the order of the caller's list. */
static int unrank(const tl_tune_result *r, const tl_gemm_schedule *configs, gemm_sweep_entry *e)
{
    for (int j = 0; j < r->n; j++) {
        const tl_tune_entry *t = &r->entries[j];
        gemm_sweep_entry *x = &e[t->index];
        memset(x, 0, sizeof *x);
        x->schedule = configs[t->index];
        x->ok = x->ran = t->outcome == TL_TUNE_PASSED;
        x->ms = t->ms;
        x->tflops = t->rate;
        x->rel_err = t->rel_err;
        x->ratio = t->ratio;
        if (!x->ok)
            snprintf(x->note, sizeof x->note, "%s: %s", tl_tune_outcome_name(t->outcome), t->note);
    }
    return r->passed > 0 ? r->entries[0].index : -1;
}

int gemm_sweep_ex(tl_ctx *ctx, int64_t m, int64_t n, int64_t k, tl_dtype in, int trans_b,
                  const tl_gemm_schedule *configs, int nconfigs, FILE *out, gemm_sweep_result *res)
{
    if (!ctx || !out || !res || !res->entries || nconfigs < 1 || !configs) {
        fprintf(stderr, "gemm_sweep: bad arguments\n");
        return -2;
    }
    tl_gemm_desc d = {.m = m, .n = n, .k = k, .in_dtype = in, .out_dtype = in, .trans_b = trans_b};
    tl_tune_config *cfg = calloc((size_t)nconfigs, sizeof *cfg);
    if (!cfg)
        return -2;
    for (int i = 0; i < nconfigs; i++)
        cfg[i] = tl_gemm_schedule_to_config(&configs[i]);
    tl_tune_request q = {.op = "gemm", .desc = &d, .configs = cfg, .nconfigs = nconfigs,
                         .progress = tl_tune_progress_stderr};
    tl_tune_result *r = NULL;
    tl_status st = tl_autotune(ctx, &q, &r);
    free(cfg);
    if (st != TL_OK) {
        fprintf(stderr, "gemm_sweep: %s: %s\n", tl_status_name(st), tl_ctx_error(ctx));
        return -2;
    }
    char op[16];
    snprintf(op, sizeof op, "gemm_%s", trans_b ? "nt" : "nn");
    fprintf(out, "\n%s %s %s: %d configurations, %d compiled in %.1f s, %d passed\n", op, tl_dtype_name(in),
            r->shape, nconfigs, r->compiled, r->compile_s, r->passed);
    res->best = unrank(r, configs, res->entries);
    res->cublas_ms = r->baseline_ms;
    res->cublas_tflops = r->baseline_rate;
    print_sweep(out, op, r->shape, tl_dtype_name(in), r, res->entries, nconfigs);
    if (res->best >= 0)
        fprintf(out, "best: %s: %.4f ms, %.1f TFLOP/s = %.3f x cuBLAS (%.1f TFLOP/s)\n", r->entries[0].text,
                r->entries[0].ms, r->entries[0].rate, r->entries[0].ratio, r->baseline_rate);
    else
        fprintf(out, "best: none (no configuration passed its check)\n");
    tl_tune_result_destroy(r);
    fflush(out);
    return res->best;
}
