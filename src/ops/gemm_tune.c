/*
 * gemm_tune.c - the GEMM's problem for the tuner: random operands, rotated
 * over enough copies that a timed run never finds its inputs in L2; a
 * reference with an f32 output, copied to the host once; cuBLAS(Lt) as the
 * baseline.
 */
#include "ops.h"

#include "ctx.h"
#include "half.h"
#include "tune.h"

#include <stdlib.h>
#include <string.h>

#define MAX_COPIES 32

typedef struct operand_set {
    uint64_t a, b, c;
} operand_set;

typedef struct gemm_problem {
    tli_tune_problem base;
    tl_ctx *ctx;
    tl_gemm_desc d;          /* the problem (its schedule is ignored)     */
    double tol;
    operand_set set[MAX_COPIES];
    int copies, turn;        /* turn: the set the next timed run takes    */
    uint64_t bias;           /* [n] of the bias's type (tli_gemm_bias_dtype),
                                shared by the sets                       */
    float *ref;              /* [m n], the reference on the host          */
    bool baseline_ok;        /* cuBLAS(Lt) offers d                        */
} gemm_problem;

static size_t c_bytes(const gemm_problem *g)
{
    return (size_t)(g->d.m * g->d.n) * tl_dtype_size(g->d.out_dtype);
}

/* Sets whose one pass moves more than twice the L2. */
static int copies_needed(tl_ctx *ctx, const tl_gemm_desc *d)
{
    size_t in = tl_dtype_size(d->in_dtype), out = tl_dtype_size(d->out_dtype);
    size_t set = (size_t)(d->m * d->k + d->k * d->n) * in + (size_t)(d->m * d->n) * out;
    return tli_tune_copies(ctx, set, MAX_COPIES);
}

static tl_status launch(gemm_problem *g, const tl_program *p, int i, void *stream)
{
    tl_arg args[7];
    int n = 0;
    args[n++] = tl_arg_int(g->d.m);
    args[n++] = tl_arg_int(g->d.n);
    args[n++] = tl_arg_int(g->d.k);
    args[n++] = tl_arg_dptr(g->set[i].a);
    args[n++] = tl_arg_dptr(g->set[i].b);
    if (g->d.has_bias)
        args[n++] = tl_arg_dptr(g->bias);
    args[n++] = tl_arg_dptr(g->set[i].c);
    return tl_launch(p, stream, n, args);
}

static tl_status run_gemm(tli_tune_problem *pb, const tl_program *p, void *stream)
{
    gemm_problem *g = (gemm_problem *)pb;
    int i = g->turn;
    g->turn = (g->turn + 1) % g->copies;
    return launch(g, p, i, stream);
}

static tl_status run_baseline(tli_tune_problem *pb, void *stream)
{
    gemm_problem *g = (gemm_problem *)pb;
    int i = g->turn;
    g->turn = (g->turn + 1) % g->copies;
    return tl_baseline_gemm(g->ctx, &g->d, g->set[i].a, g->set[i].b, g->bias, g->set[i].c, stream);
}

static tl_status check_gemm(tli_tune_problem *pb, const tl_program *p, void *stream, tl_check_result *res)
{
    gemm_problem *g = (gemm_problem *)pb;
    tl_status st = tl_memset_u8(g->ctx, g->set[0].c, 0xFF, c_bytes(g), stream);
    if (st == TL_OK)
        st = launch(g, p, 0, stream);
    if (st == TL_OK)
        st = tl_synchronize(g->ctx);
    if (st != TL_OK)
        return st;
    tl_span out = {.dtype = g->d.out_dtype, .n = g->d.m * g->d.n, .dptr = g->set[0].c};
    tl_span ref = {.dtype = TL_F32, .n = g->d.m * g->d.n, .host = g->ref};
    return tl_check(g->ctx, &out, &ref, g->tol, res);
}

static void destroy_gemm(tli_tune_problem *pb)
{
    gemm_problem *g = (gemm_problem *)pb;
    for (int i = 0; i < MAX_COPIES; i++) {
        tl_free(g->ctx, g->set[i].a);
        tl_free(g->ctx, g->set[i].b);
        tl_free(g->ctx, g->set[i].c);
    }
    tl_free(g->ctx, g->bias);
    free(g->ref);
    free(g);
}

/* Set i: A and B from their own seeds, C allocated. */
static tl_status fill_set(gemm_problem *g, int i)
{
    const tl_gemm_desc *d = &g->d;
    size_t in = tl_dtype_size(d->in_dtype);
    uint64_t seed = 1000 + 8 * (uint64_t)i;
    tl_status st = tl_malloc(g->ctx, (size_t)(d->m * d->k) * in, &g->set[i].a);
    if (st == TL_OK)
        st = tl_malloc(g->ctx, (size_t)(d->k * d->n) * in, &g->set[i].b);
    if (st == TL_OK)
        st = tl_malloc(g->ctx, c_bytes(g), &g->set[i].c);
    if (st == TL_OK)
        st = tl_random_fill(g->ctx, g->set[i].a, d->in_dtype, d->m * d->k, seed, -1, 1, NULL);
    if (st == TL_OK)
        st = tl_random_fill(g->ctx, g->set[i].b, d->in_dtype, d->k * d->n, seed + 1, -1, 1, NULL);
    return st;
}

/* The bias as f32 in a new device buffer *out (through the host: n
 * elements, once a tuning run). */
static tl_status widen_bias(gemm_problem *g, uint64_t *out)
{
    tl_dtype dt = tli_gemm_bias_dtype(&g->d);
    size_t n = (size_t)g->d.n, sz = tl_dtype_size(dt);
    void *raw = malloc(n * sz);
    float *wide = malloc(n * sizeof *wide);
    tl_status st = raw && wide ? TL_OK : tli_fail(g->ctx, TL_ERR_OUT_OF_MEMORY, "tl_autotune: out of host memory");
    if (st == TL_OK)
        st = tl_memcpy_dtoh(g->ctx, raw, g->bias, n * sz);
    for (size_t i = 0; st == TL_OK && i < n; i++)
        wide[i] = (float)tli_load_as_double(dt, raw, (int64_t)i);
    if (st == TL_OK)
        st = tl_malloc(g->ctx, n * sizeof *wide, out);
    if (st == TL_OK)
        st = tl_memcpy_htod(g->ctx, *out, wide, n * sizeof *wide);
    free(raw), free(wide);
    return st;
}

/* The reference on set 0 with an f32 output: cuBLAS(Lt) where it offers
 * the epilogue; else the heuristic's schedule of our own kernel, which the
 * test suite checks against float64 references. */
static tl_status make_reference(gemm_problem *g)
{
    uint64_t ref = 0;
    size_t bytes = (size_t)(g->d.m * g->d.n) * sizeof(float);
    tl_status st = tl_malloc(g->ctx, bytes, &ref);
    tl_gemm_desc f = g->d;
    f.out_dtype = TL_F32;
    /* the bias of an 8-bit GEMM is of the output's type: f32 for the
     * reference, the same values */
    uint64_t bias = g->bias, bias32 = 0;
    if (st == TL_OK && g->d.has_bias && tli_gemm_bias_dtype(&f) != tli_gemm_bias_dtype(&g->d))
        st = widen_bias(g, &bias32), bias = bias32;
    if (st == TL_OK) {
        st = tl_baseline_gemm(g->ctx, &f, g->set[0].a, g->set[0].b, bias, ref, NULL);
        if (st == TL_ERR_NO_CUBLAS || st == TL_ERR_UNSUPPORTED) {
            f.schedule = tli_gemm_heuristic(g->ctx, &f);
            st = tl_op_gemm(g->ctx, &f, g->set[0].a, g->set[0].b, bias, ref, NULL);
        }
    }
    if (st == TL_OK)
        st = tl_synchronize(g->ctx);
    tl_free(g->ctx, bias32);
    if (st == TL_OK && !(g->ref = malloc(bytes)))
        st = tli_fail(g->ctx, TL_ERR_OUT_OF_MEMORY, "tl_autotune: out of host memory for the reference");
    if (st == TL_OK)
        st = tl_memcpy_dtoh(g->ctx, g->ref, ref, bytes);
    tl_free(g->ctx, ref);
    return st;
}

/* Whether cuBLAS(Lt) runs d itself: the baseline of the ratios. */
static void probe_baseline(gemm_problem *g)
{
    tl_status st = tl_baseline_gemm(g->ctx, &g->d, g->set[0].a, g->set[0].b, g->bias, g->set[0].c, NULL);
    if (st == TL_OK)
        st = tl_synchronize(g->ctx);
    g->baseline_ok = st == TL_OK;
    if (g->baseline_ok) {
        g->base.baseline = run_baseline;
        tli_fmt(g->base.baseline_name, sizeof g->base.baseline_name, "%s",
                g->d.has_bias || g->d.epilogue != TL_EPI_NONE ? "cuBLASLt" : "cuBLAS");
    }
}

static tl_status setup(gemm_problem *g)
{
    const tl_gemm_desc *d = &g->d;
    g->copies = copies_needed(g->ctx, d);
    tl_dtype bias_dt = tli_gemm_bias_dtype(d);
    tl_status st = tl_malloc(g->ctx, (size_t)d->n * tl_dtype_size(bias_dt), &g->bias);
    if (st == TL_OK)
        st = tl_random_fill(g->ctx, g->bias, bias_dt, d->n, 999, -1, 1, NULL);
    for (int i = 0; i < g->copies && st == TL_OK; i++)
        st = fill_set(g, i);
    if (st == TL_OK)
        st = make_reference(g);
    if (st == TL_OK)
        probe_baseline(g);
    return st;
}

tl_status tli_gemm_tune_problem(tl_ctx *ctx, const void *desc, double tol, tli_tune_problem **out)
{
    *out = NULL;
    gemm_problem *g = calloc(1, sizeof *g);
    if (!g)
        return tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "tl_autotune: out of host memory");
    g->base = (tli_tune_problem){.run = run_gemm, .check = check_gemm, .destroy = destroy_gemm, .unit = "TFLOP/s"};
    g->ctx = ctx;
    g->d = *(const tl_gemm_desc *)desc;
    memset(&g->d.schedule, 0, sizeof g->d.schedule);
    g->tol = tol > 0 ? tol : 1e-2;
    g->base.work = 2.0 * (double)g->d.m * (double)g->d.n * (double)g->d.k;
    tli_fmt(g->base.shape, sizeof g->base.shape, "%lldx%lldx%lld", (long long)g->d.m, (long long)g->d.n,
            (long long)g->d.k);
    char what[80];
    tli_fmt(what, sizeof what, "GEMM %s", g->base.shape);
    return tli_tune_problem_done(ctx, setup(g), &g->base, what, out);
}

/* ------------------------------------------------------------------------ */
/* The GEMM's row in the table of tunable ops                                */
/* ------------------------------------------------------------------------ */

static tl_status check_for_tuner(tl_ctx *ctx, const void *desc, const char *api)
{
    return tli_gemm_check_desc(ctx, desc, api);
}

static int space_for_tuner(tl_ctx *ctx, const void *desc, tl_tune_config *out, int max)
{
    tl_gemm_schedule s[256]; /* the space has a few dozen */
    int n = tl_gemm_candidates(ctx, desc, s, 256);
    n = n < max ? n : max;
    n = n < 256 ? n : 256;
    for (int i = 0; i < n; i++)
        out[i] = tl_gemm_schedule_to_config(&s[i]);
    return n;
}

/* What tl_op_gemm runs without a record: the heuristic (the tuner's
 * operands are aligned, so TMA can take them where the rows allow). */
static tl_tune_config fallback_for_tuner(tl_ctx *ctx, const void *desc)
{
    tl_gemm_schedule s = tli_gemm_heuristic(ctx, desc);
    s.split_k = 0; /* the tuner times one program a run: the one-pass form of a split schedule */
    return tl_gemm_schedule_to_config(&s);
}

static tl_status build_for_tuner(tl_ctx *ctx, const void *desc, const tl_tune_config *cfg, tl_kernel **out)
{
    tl_gemm_desc d = *(const tl_gemm_desc *)desc;
    d.schedule = tl_gemm_schedule_from_config(cfg);
    if (d.schedule.split_k > 1) /* two kernels and a workspace: not one program to time */
        return tli_fail(ctx, TL_ERR_UNSUPPORTED, "tl_autotune: gemm: split_k = %d: the tuner does not measure "
                        "split-K schedules", d.schedule.split_k);
    return tl_op_gemm_build(ctx, &d, out);
}

static void key_for_tuner(const void *desc, tli_tune_key *out)
{
    tli_gemm_tune_key(desc, out);
}

/* tl_op_gemm keeps its heuristic where that splits K (tli_gemm_pick_for):
 * the tuner times one-pass programs only, so a record there would never be
 * read. */
static bool ignores_records(tl_ctx *ctx, const void *desc, char *why, size_t len)
{
    tl_gemm_schedule h = tli_gemm_heuristic(ctx, desc);
    if (h.split_k < 2)
        return false;
    tli_fmt(why, len, "the op splits K over %d blocks for this shape, which the tuner does not measure, and keeps "
            "that schedule", h.split_k);
    return true;
}

/* The problem's operands come from tl_malloc (aligned); rows of K or N
 * elements that are not whole 16-byte units make every launch take the
 * safe variant, which is then compiled with the candidates. */
static bool unaligned_rows(const void *desc)
{
    const tl_gemm_desc *d = desc;
    return d->k % 8 || d->n % 8;
}

const tli_tune_op tli_gemm_tune_op = {
    .name = "gemm",
    .param_names = tli_gemm_param_names,
    .check_desc = check_for_tuner,
    .space = space_for_tuner,
    .fallback = fallback_for_tuner,
    .build = build_for_tuner,
    .problem = tli_gemm_tune_problem,
    .key = key_for_tuner,
    .unaligned = unaligned_rows,
    .ignores_records = ignores_records,
};
