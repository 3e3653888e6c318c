/*
 * gemm_sweep.c - times schedules of the prebuilt GEMM against cuBLAS in
 * one run (DESIGN.md's method: CUDA events, warm-up, median of 20, random
 * inputs rotated among copies so that they never sit in L2, outputs
 * poisoned and checked against cuBLAS with an f32 output).
 */
#include "gemm_sweep.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define WARMUP 5
#define REPS 20
#define CHECK_TOL 1e-2  /* bf16 / f16 output rounding is ~2^-9 relative */

/* ------------------------------------------------------------------------ */
/* Schedules                                                                 */
/* ------------------------------------------------------------------------ */

static const tl_gemm_schedule default_sweep[] = {
    /* block_m, block_n, block_k, stages, threads, swizzle, warp_policy, pingpong */
    {128, 128, 32, 3, 256, 8, 0, 0},
    {128, 128, 32, 4, 256, 8, 0, 0},
    {128, 128, 64, 3, 256, 8, 0, 0},
    {128, 128, 64, 4, 256, 8, 0, 0},
    {128, 128, 64, 2, 256, 8, 0, 0}, /* small footprint: 2 blocks per SM */
    {128, 128, 32, 3, 256, 0, 0, 0}, /* what the swizzle is worth */
    {128, 128, 32, 2, 128, 0, 0, 0},
    {128, 256, 32, 3, 256, 8, 0, 0},
    {128, 256, 32, 4, 256, 8, 0, 0},
    {128, 256, 64, 3, 256, 8, 0, 0},
    {128, 256, 64, 4, 256, 8, 0, 0}, /* sm_90a's classic default; 192 KiB of shared memory */
    {256, 128, 32, 3, 256, 8, 0, 0},
    {256, 128, 32, 4, 256, 8, 0, 0},
    {256, 128, 64, 3, 256, 8, 0, 0},
    {256, 128, 64, 4, 256, 8, 0, 0},
    {64, 128, 32, 4, 128, 8, 0, 0},
    {128, 64, 32, 4, 128, 8, 0, 0},
    {64, 64, 64, 3, 128, 0, 0, 0},
    {64, 64, 32, 2, 128, 8, 0, 0},
    /* persistent, warp-specialised: one 128-thread warpgroup per block,
     * two of them taking turns per SM (sm_90a) */
    {128, 128, 64, 4, 128, 8, 0, 1}, /* sm_90a's default with a bias or an activation */
    {128, 128, 64, 5, 128, 8, 0, 1},
    {128, 128, 64, 6, 128, 8, 0, 1},
    {64, 256, 64, 4, 128, 8, 0, 1},
};

const tl_gemm_schedule *gemm_default_sweep(int *n)
{
    if (n)
        *n = (int)(sizeof default_sweep / sizeof default_sweep[0]);
    return default_sweep;
}

void gemm_schedule_text(const tl_gemm_schedule *s, char *buf, size_t len)
{
    snprintf(buf, len, "bm=%d bn=%d bk=%d st=%d th=%d sw=%d", s->block_m, s->block_n, s->block_k, s->stages,
             s->threads, s->swizzle);
    if (s->warp_policy && strlen(buf) + 12 < len)
        snprintf(buf + strlen(buf), len - strlen(buf), " wp=%s",
                 s->warp_policy == TL_GEMM_WARP_ROWS ? "rows" : s->warp_policy == TL_GEMM_WARP_COLS ? "cols" : "?");
    if (s->pingpong && strlen(buf) + 10 < len)
        snprintf(buf + strlen(buf), len - strlen(buf), " pingpong");
}

size_t gemm_schedule_smem(const tl_gemm_schedule *s, tl_dtype in)
{
    return (size_t)s->stages * ((size_t)s->block_m * (size_t)s->block_k + (size_t)s->block_k * (size_t)s->block_n) *
           tl_dtype_size(in);
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
    if (tl_ctx_device_info(ctx, &info) == TL_OK && info.l2_bytes > 0)
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
/* Work to time                                                              */
/* ------------------------------------------------------------------------ */

typedef struct sweep_work {
    gemm_operands *ops;
    const tl_program *prog; /* NULL: cuBLAS with desc d */
    tl_gemm_desc d;
    int copy;               /* >= 0: always this copy; -1: rotate */
    uint64_t c;             /* 0: the copy's C; else write here   */
} sweep_work;

static tl_status run_work(void *user, void *stream)
{
    sweep_work *w = user;
    gemm_operands *ops = w->ops;
    int i = w->copy >= 0 ? w->copy : gemm_operands_next(ops);
    uint64_t c = w->c ? w->c : ops->c[i];
    if (!w->prog)
        return tl_baseline_gemm(ops->ctx, &w->d, ops->a[i], ops->b[i], ops->bias, c, stream);
    tl_arg args[] = {tl_arg_int(ops->m), tl_arg_int(ops->n), tl_arg_int(ops->k),
                     tl_arg_dptr(ops->a[i]), tl_arg_dptr(ops->b[i]), tl_arg_dptr(c)};
    return tl_launch(w->prog, stream, 6, args);
}

static tl_status time_work(sweep_work *w, double *ms)
{
    tl_timing_options opt = {.warmup = WARMUP, .reps = REPS};
    tl_timing t;
    w->copy = -1;
    w->c = 0;
    tl_status st = tl_time(w->ops->ctx, NULL, run_work, w, &opt, &t);
    *ms = st == TL_OK ? t.median_ms : 0;
    return st;
}

/* Runs once on copy 0 into a poisoned C and compares with ref (f32). */
static tl_status check_work(sweep_work *w, uint64_t ref, tl_check_result *res)
{
    gemm_operands *ops = w->ops;
    tl_status st = tl_memset_u8(ops->ctx, ops->c[0], 0xFF, gemm_operands_c_bytes(ops), NULL);
    w->copy = 0;
    w->c = 0;
    if (st == TL_OK)
        st = run_work(w, NULL);
    if (st == TL_OK)
        st = tl_synchronize(ops->ctx);
    if (st != TL_OK)
        return st;
    int64_t n = ops->m * ops->n;
    tl_span out = {.dtype = ops->out, .n = n, .dptr = ops->c[0]};
    tl_span r = {.dtype = TL_F32, .n = n, .dptr = ref};
    return tl_check(ops->ctx, &out, &r, CHECK_TOL, res);
}

/* ------------------------------------------------------------------------ */
/* Output                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct sweep_labels {
    char op[16], shape[64];
    const char *dtype;
    double flop;
} sweep_labels;

static void csv_line(FILE *out, const sweep_labels *l, const char *impl, double ms, double rate, double ratio,
                     double rel)
{
    fprintf(out, "csv,%s,%s,%s,%s,%.4f,%.1f,%s,%.3f,%.2e\n", l->op, l->shape, l->dtype, impl, ms, rate, "TFLOP/s",
            ratio, rel);
}

static void table_row(FILE *out, const char *impl, double ms, double tflops, double rel, double ratio, int pass)
{
    fprintf(out, "  %-40s %9.4f %9.1f %9.1e %9.3f%s\n", impl, ms, tflops, rel, ratio, pass ? "" : "  CHECK FAILED");
}

/* The first line of the context's message, shortened: NVRTC logs are long. */
static void first_line(tl_ctx *ctx, tl_status st, char *buf, size_t len)
{
    const char *msg = tl_ctx_error(ctx);
    size_t n = strcspn(msg, "\n");
    snprintf(buf, len, "%s: %.*s", tl_status_name(st), (int)(n > 200 ? 200 : n), msg);
}

static int fatal(tl_ctx *ctx, tl_status st, const char *what)
{
    fprintf(stderr, "gemm_sweep: %s: %s: %s\n", what, tl_status_name(st), tl_ctx_error(ctx));
    return -2;
}

/* ------------------------------------------------------------------------ */
/* The sweep                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct sweep {
    tl_ctx *ctx;
    FILE *out;
    gemm_operands ops;
    uint64_t ref;           /* cuBLAS, f32 output, copy 0 */
    sweep_labels labels;
    tl_gemm_desc d;         /* out = in, no bias, no epilogue */
    int smem_limit;
    double cublas_tflops;
} sweep;

/* The reference, then cuBLAS timed and checked against it. */
static int measure_cublas(sweep *s, gemm_sweep_result *res)
{
    sweep_work w = {.ops = &s->ops, .d = s->d};
    w.d.out_dtype = TL_F32;
    w.copy = 0;
    w.c = s->ref;
    tl_status st = run_work(&w, NULL);
    if (st == TL_OK)
        st = tl_synchronize(s->ctx);
    if (st != TL_OK)
        return fatal(s->ctx, st, "cuBLAS reference");
    w.d = s->d;
    double ms = 0;
    tl_check_result r;
    if ((st = time_work(&w, &ms)) != TL_OK || (st = check_work(&w, s->ref, &r)) != TL_OK)
        return fatal(s->ctx, st, "cuBLAS baseline");
    res->cublas_ms = ms;
    res->cublas_tflops = s->cublas_tflops = s->labels.flop / ms / 1e9;
    res->cublas_rel_err = r.rel_err;
    csv_line(s->out, &s->labels, "cublas", ms, s->cublas_tflops, 1.0, r.rel_err);
    table_row(s->out, "cuBLAS", ms, s->cublas_tflops, r.rel_err, 1.0, 1);
    return 0;
}

/* Builds, compiles, checks and times one schedule; fills e. */
static void measure_config(sweep *s, const tl_gemm_schedule *cfg, gemm_sweep_entry *e)
{
    char impl[96];
    gemm_schedule_text(cfg, impl, sizeof impl);
    memset(e, 0, sizeof *e);
    e->schedule = *cfg;
    size_t smem = gemm_schedule_smem(cfg, s->d.in_dtype);
    if (s->smem_limit > 0 && smem > (size_t)s->smem_limit) {
        snprintf(e->note, sizeof e->note, "needs %zu KiB of shared memory, the device allows %d KiB", smem >> 10,
                 s->smem_limit >> 10);
        fprintf(s->out, "  %-40s skipped: %s\n", impl, e->note);
        return;
    }
    tl_gemm_desc d = s->d;
    d.schedule = *cfg;
    tl_kernel *k = NULL;
    tl_program *p = NULL;
    tl_status st = tl_op_gemm_build(s->ctx, &d, &k);
    if (st == TL_OK)
        st = tl_compile(k, NULL, &p);
    sweep_work w = {.ops = &s->ops, .prog = p, .d = d};
    tl_check_result r;
    if (st == TL_OK)
        st = check_work(&w, s->ref, &r);
    if (st == TL_OK)
        st = time_work(&w, &e->ms);
    if (st != TL_OK) {
        first_line(s->ctx, st, e->note, sizeof e->note);
        fprintf(s->out, "  %-40s skipped: %s\n", impl, e->note);
    } else {
        e->ran = 1;
        e->ok = r.pass;
        e->rel_err = r.rel_err;
        e->tflops = s->labels.flop / e->ms / 1e9;
        e->ratio = e->tflops / s->cublas_tflops;
        if (!r.pass)
            snprintf(e->note, sizeof e->note, "check failed: rel err %.2e, %lld non-finite, first bad %lld",
                     r.rel_err, (long long)r.nonfinite, (long long)r.first_bad);
        csv_line(s->out, &s->labels, impl, e->ms, e->tflops, e->ratio, r.rel_err);
        table_row(s->out, impl, e->ms, e->tflops, r.rel_err, e->ratio, r.pass);
    }
    tl_program_destroy(p);
    tl_kernel_destroy(k);
}

static int setup(sweep *s, tl_ctx *ctx, int64_t m, int64_t n, int64_t k, tl_dtype in, int trans_b, FILE *out)
{
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->out = out;
    tl_device_info info;
    tl_status st = tl_ctx_device_info(ctx, &info);
    if (st != TL_OK)
        return fatal(ctx, st, "device");
    s->smem_limit = info.smem_per_block_optin;
    s->d = (tl_gemm_desc){.m = m, .n = n, .k = k, .in_dtype = in, .out_dtype = in, .trans_b = trans_b};
    snprintf(s->labels.op, sizeof s->labels.op, "gemm_%s", trans_b ? "nt" : "nn");
    snprintf(s->labels.shape, sizeof s->labels.shape, "%lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
    s->labels.dtype = tl_dtype_name(in);
    s->labels.flop = 2.0 * (double)m * (double)n * (double)k;
    if ((st = gemm_operands_init(&s->ops, ctx, m, n, k, in, in)) != TL_OK)
        return fatal(ctx, st, "operands");
    if ((st = tl_malloc(ctx, (size_t)(m * n) * sizeof(float), &s->ref)) != TL_OK) {
        gemm_operands_free(&s->ops);
        return fatal(ctx, st, "reference buffer");
    }
    return 0;
}

int gemm_sweep_ex(tl_ctx *ctx, int64_t m, int64_t n, int64_t k, tl_dtype in, int trans_b,
                  const tl_gemm_schedule *configs, int nconfigs, FILE *out, gemm_sweep_result *res)
{
    gemm_sweep_result local;
    if (!res)
        res = &local;
    gemm_sweep_entry *entries = res == &local ? NULL : res->entries;
    memset(res, 0, sizeof *res);
    res->entries = entries;
    res->best = -1;
    if (!ctx || !out || m < 1 || n < 1 || k < 1 || (in != TL_BF16 && in != TL_F16) || nconfigs < 0 ||
        (nconfigs > 0 && !configs)) {
        fprintf(stderr, "gemm_sweep: bad arguments\n");
        return -2;
    }
    gemm_sweep_entry *e = calloc((size_t)(nconfigs ? nconfigs : 1), sizeof *e);
    if (!e) {
        fprintf(stderr, "gemm_sweep: out of memory\n");
        return -2;
    }
    sweep s;
    int rc = setup(&s, ctx, m, n, k, in, trans_b, out);
    bool allocated = rc == 0;
    if (rc == 0) {
        fprintf(out, "\n%s %s %s: %d configurations, operands rotated over %d cop%s\n", s.labels.op,
                s.labels.dtype, s.labels.shape, nconfigs, s.ops.copies, s.ops.copies == 1 ? "y" : "ies");
        fprintf(out, "  %-40s %9s %9s %9s %9s\n", "impl", "ms", "TFLOP/s", "rel err", "x cuBLAS");
        rc = measure_cublas(&s, res);
    }
    for (int i = 0; rc == 0 && i < nconfigs; i++) {
        measure_config(&s, &configs[i], &e[i]);
        if (e[i].ok && (res->best < 0 || e[i].ms < e[res->best].ms))
            res->best = i;
    }
    if (rc == 0) {
        char impl[96];
        if (res->best >= 0) {
            gemm_schedule_text(&configs[res->best], impl, sizeof impl);
            fprintf(out, "best: %s: %.4f ms, %.1f TFLOP/s = %.3f x cuBLAS (%.1f TFLOP/s)\n", impl, e[res->best].ms,
                    e[res->best].tflops, e[res->best].ratio, res->cublas_tflops);
        } else {
            fprintf(out, "best: none (no configuration passed its check)\n");
        }
        rc = res->best;
    }
    if (allocated) {
        tl_free(ctx, s.ref);
        gemm_operands_free(&s.ops);
    }
    if (entries)
        memcpy(entries, e, (size_t)nconfigs * sizeof *e);
    free(e);
    fflush(out);
    return rc;
}

int gemm_sweep(tl_ctx *ctx, int64_t m, int64_t n, int64_t k, tl_dtype in, int trans_b,
               const tl_gemm_schedule *configs, int nconfigs, FILE *out)
{
    return gemm_sweep_ex(ctx, m, n, k, in, trans_b, configs, nconfigs, out, NULL);
}
