/*
 * autotune.c - the tutorial's chapter on autotuning (docs/tutorial.md,
 * "Autotuning"), run by `make demo`:
 *   1. what the GEMM op runs without tuning, and the space the tuner tries
 *      (no GPU needed);
 *   2. a custom kernel tuned over a list of configurations: the vector add
 *      with its tile and thread count, checked against a host reference;
 *   3. the GEMM tuned for one problem, the best recorded in the tuning
 *      database, and the op running it from then on.
 * Without a GPU it shows 1 and says what it skipped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilec.h"

static tl_ctx *ctx;

#define CHECK(expr)                                                                                \
    do {                                                                                           \
        tl_status st_ = (expr);                                                                    \
        if (st_ != TL_OK) {                                                                        \
            fprintf(stderr, "%s failed: %s: %s\n", #expr, tl_status_name(st_), tl_ctx_error(ctx)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static void show_schedule(const char *what, const tl_gemm_schedule *s)
{
    tl_tune_config c = tl_gemm_schedule_to_config(s);
    char text[160];
    printf("  %-34s %s\n", what, tl_tune_config_text("gemm", &c, text, sizeof text));
}

/* 1. The op's own choice and the tuner's space. */
static void before_tuning(const tl_gemm_desc *d)
{
    printf("\n==== 10. Autotuning ====\n\n");
    tl_gemm_schedule s = tl_op_gemm_schedule(ctx, d);
    show_schedule("tl_op_gemm runs now (heuristic):", &s);
    tl_gemm_schedule space[64];
    int n = tl_gemm_candidates(ctx, d, space, 64);
    printf("  the tuner's space for this GEMM on %s: %d schedules, e.g.\n", tl_ctx_target(ctx), n);
    for (int i = 0; i < n && i < 3; i++)
        show_schedule("", &space[i]);
    printf("  tuning database: %s\n", *tl_tune_db_path(ctx) ? tl_tune_db_path(ctx) : "(memory only)");
}

/* 2. A custom kernel: C = A + B with v[0] elements per block and v[1]
 * threads. */
static tl_status build_vadd(void *user, tl_ctx *c, const tl_tune_config *cfg, tl_kernel **out)
{
    (void)user;
    tl_kernel *k = tl_kernel_new(c, "vadd_tuned");
    tl_expr n = tl_dim(k, "N");
    tl_buf a = tl_param_tensor(k, "A", TL_F32, 1, &n, NULL);
    tl_buf b = tl_param_tensor(k, "B", TL_F32, 1, &n, NULL);
    tl_buf o = tl_param_tensor(k, "C", TL_F32, 1, &n, NULL);
    tl_grid(k, tl_ceildiv(k, n, tl_int(k, cfg->v[0])), TL_NONE_EXPR, TL_NONE_EXPR, cfg->v[1]);
    tl_expr i = tl_add(k, tl_mul(k, tl_block_idx(k, 0), tl_int(k, cfg->v[0])), tl_parallel1(k, cfg->v[0]));
    tl_store(k, o, &i, tl_add(k, tl_load(k, a, &i), tl_load(k, b, &i)));
    tl_end(k);
    *out = k;
    return tl_kernel_status(k);
}

/* The reference on host copies of the arguments: C = A + B. */
static tl_status vadd_reference(void *user, int nargs, const tl_arg *args)
{
    (void)user, (void)nargs;
    const float *a = args[1].v.hptr, *b = args[2].v.hptr;
    float *c = args[3].v.hptr;
    for (int64_t i = 0; i < args[0].v.i; i++)
        c[i] = a[i] + b[i];
    return TL_OK;
}

static void tune_custom(void)
{
    const int64_t n = (int64_t)1 << 26;
    uint64_t a, b, c;
    CHECK(tl_malloc(ctx, n * 4, &a));
    CHECK(tl_malloc(ctx, n * 4, &b));
    CHECK(tl_malloc(ctx, n * 4, &c));
    CHECK(tl_random_fill(ctx, a, TL_F32, n, 1, -1, 1, NULL));
    CHECK(tl_random_fill(ctx, b, TL_F32, n, 2, -1, 1, NULL));
    const tl_tune_config space[] = {{{512, 128}}, {{1024, 256}}, {{2048, 256}}, {{4096, 512}}, {{8192, 1024}}};
    const char *const names[] = {"tile", "threads", NULL};
    tl_arg args[] = {tl_arg_int(n), tl_arg_dptr(a), tl_arg_dptr(b), tl_arg_dptr(c)};
    tl_tune_request q = {.build = build_vadd, .nargs = 4, .args = args, .ref = vadd_reference,
                         .configs = space, .nconfigs = 5, .bytes = 12.0 * n, .param_names = names};
    tl_tune_result *r;
    CHECK(tl_autotune(ctx, &q, &r));
    printf("\n  custom kernel (vector add, 2^26 floats): %d of %d passed\n", r->passed, r->n);
    for (int i = 0; i < r->n; i++)
        printf("    %-22s %s %.4f ms %7.1f GB/s\n", r->entries[i].text, tl_tune_outcome_name(r->entries[i].outcome),
               r->entries[i].ms, r->entries[i].rate);
    tl_tune_result_destroy(r);
    tl_free(ctx, a), tl_free(ctx, b), tl_free(ctx, c);
}

/* 3. The GEMM, recorded for this GPU and shape class. */
static void tune_gemm(const tl_gemm_desc *d)
{
    tl_tune_request q = {.op = "gemm", .desc = d, .budget_s = 30, .save = 1, .progress = tl_tune_progress_stderr};
    tl_tune_result *r;
    CHECK(tl_autotune(ctx, &q, &r));
    printf("\n  gemm bf16 %s, B as [N, K]: %d candidates, %d compiled in %.1f s, %d passed, %.1f s in all\n",
           r->shape, r->n, r->compiled, r->compile_s, r->passed, r->total_s);
    for (int i = 0; i < r->passed && i < 5; i++)
        printf("    %d. %-48s %.4f ms %6.1f TFLOP/s %.3fx %s\n", i + 1, r->entries[i].text, r->entries[i].ms,
               r->entries[i].rate, r->entries[i].ratio, r->baseline);
    tl_gemm_schedule s = tl_op_gemm_schedule(ctx, d);
    show_schedule(r->saved ? "recorded; tl_op_gemm now runs:" : "not recorded; tl_op_gemm runs:", &s);
    tl_tune_result_destroy(r);
}

int main(void)
{
    char msg[512];
    int gpu = tl_ctx_create(NULL, &ctx, msg, sizeof msg) == TL_OK;
    if (!gpu) {
        tl_ctx_options o = tl_ctx_default_options();
        o.device = TL_NO_DEVICE;
        if (tl_ctx_create(&o, &ctx, NULL, 0) != TL_OK)
            return 1;
    }
    tl_gemm_desc d = {.m = 2048, .n = 2048, .k = 2048, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = 1};
    before_tuning(&d);
    if (gpu) {
        tune_custom();
        tune_gemm(&d);
    } else {
        printf("\n  skipped: tuning runs candidates on a GPU, and there is none here (%s)\n", msg);
    }
    tl_ctx_destroy(ctx);
    return 0;
}
