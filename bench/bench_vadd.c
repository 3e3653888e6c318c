/*
 * bench_vadd.c - vector add bandwidth against a device-to-device copy
 * measured in the same run (DESIGN.md's method: CUDA events, warm-up,
 * median of many runs, inputs far larger than L2, random data).
 *
 * Bytes counted: vadd reads two arrays and writes one (3 n e); the copy reads
 * and writes one (2 n e). Usage: bench_vadd [log2(n) = 28]
 */
#include "bench.h"

#include <string.h>

/* The tutorial's vector add, through the public builder, with a schedule. */
static tl_kernel *build_vadd(tl_ctx *ctx, tl_dtype dt, int64_t tile, int threads)
{
    tl_kernel *k = tl_kernel_new(ctx, "bench_vadd");
    tl_expr n = tl_dim(k, "N");
    tl_buf a = tl_param_tensor(k, "A", dt, 1, &n, NULL);
    tl_buf b = tl_param_tensor(k, "B", dt, 1, &n, NULL);
    tl_buf c = tl_param_tensor(k, "C", dt, 1, &n, NULL);
    tl_grid(k, tl_ceildiv(k, n, tl_int(k, tile)), TL_NONE_EXPR, TL_NONE_EXPR, threads);
    tl_expr i = tl_add(k, tl_mul(k, tl_block_idx(k, 0), tl_int(k, tile)), tl_parallel1(k, tile));
    tl_store(k, c, &i, tl_add(k, tl_load(k, a, &i), tl_load(k, b, &i)));
    tl_end(k);
    return k;
}

typedef struct work {
    tl_ctx *ctx;
    const tl_program *prog; /* NULL: tl_op_vadd */
    tl_vadd_desc d;
    uint64_t a, b, c;
    double *ref; /* a + b on the host, made once per dtype */
} work;

static tl_status run_op(void *user, void *stream)
{
    work *w = user;
    if (!w->prog)
        return tl_op_vadd(w->ctx, &w->d, w->a, w->b, w->c, stream);
    tl_arg args[] = {tl_arg_int(w->d.n), tl_arg_dptr(w->a), tl_arg_dptr(w->b), tl_arg_dptr(w->c)};
    return tl_launch(w->prog, stream, 4, args);
}

static tl_status run_copy(void *user, void *stream)
{
    work *w = user;
    return tl_memcpy_dtod(w->ctx, w->c, w->a, (size_t)w->d.n * tl_dtype_size(w->d.dtype), stream);
}

/* a + b on the host from the same seeds as the device inputs (the
 * generator is bit-identical on both sides). */
static double *host_reference(tl_dtype dt, int64_t n)
{
    size_t sz = tl_dtype_size(dt);
    void *ha = malloc((size_t)n * sz), *hb = malloc((size_t)n * sz);
    double *ref = malloc((size_t)n * sizeof(double));
    tl_random_host(ha, dt, n, 1, -1, 1);
    tl_random_host(hb, dt, n, 2, -1, 1);
    for (int64_t i = 0; i < n; i++) {
        double x, y;
        if (dt == TL_F32) {
            x = ((float *)ha)[i];
            y = ((float *)hb)[i];
        } else if (dt == TL_F16) {
            x = tl_f16_to_f32(((uint16_t *)ha)[i]);
            y = tl_f16_to_f32(((uint16_t *)hb)[i]);
        } else {
            x = tl_bf16_to_f32(((uint16_t *)ha)[i]);
            y = tl_bf16_to_f32(((uint16_t *)hb)[i]);
        }
        ref[i] = x + y;
    }
    free(ha), free(hb);
    return ref;
}

/* Relative error of c against the reference; -1 when the check fails. */
static double check(work *w)
{
    tl_span out = {.dtype = w->d.dtype, .n = w->d.n, .dptr = w->c}, r = {.dtype = TL_F64, .n = w->d.n, .host = w->ref};
    tl_check_result res;
    BENCH_CHECK(tl_check(w->ctx, &out, &r, 1e-2, &res));
    return res.pass ? res.rel_err : -1;
}

static double time_ms(work *w, tl_work_fn fn)
{
    tl_timing_options opt = {.warmup = 10, .reps = 50};
    tl_timing t;
    BENCH_CHECK(tl_time(w->ctx, NULL, fn, w, &opt, &t));
    return t.median_ms;
}

static void bench_dtype(tl_ctx *ctx, tl_dtype dt, int64_t n)
{
    size_t bytes = (size_t)n * tl_dtype_size(dt);
    work w = {.ctx = ctx, .d = {.dtype = dt, .n = n}};
    BENCH_CHECK(tl_malloc(ctx, bytes, &w.a));
    BENCH_CHECK(tl_malloc(ctx, bytes, &w.b));
    BENCH_CHECK(tl_malloc(ctx, bytes, &w.c));
    BENCH_CHECK(tl_random_fill(ctx, w.a, dt, n, 1, -1, 1, NULL));
    BENCH_CHECK(tl_random_fill(ctx, w.b, dt, n, 2, -1, 1, NULL));
    w.ref = host_reference(dt, n);
    char shape[32];
    snprintf(shape, sizeof shape, "n=2^%d", __builtin_ctzll((unsigned long long)n));
    double copy_ms = time_ms(&w, run_copy);
    double copy_gbs = 2.0 * (double)bytes / copy_ms / 1e6;
    bench_csv_baseline("vadd", shape, tl_dtype_name(dt), "cuMemcpyDtoD", copy_ms, copy_gbs, "GB/s");

    /* the library's prebuilt op, checked after it ran */
    BENCH_CHECK(tl_memset_u8(ctx, w.c, 0xFF, bytes, NULL));
    double ms = time_ms(&w, run_op);
    double rel = check(&w);
    double gbs = 3.0 * (double)bytes / ms / 1e6;
    bench_csv("vadd", shape, tl_dtype_name(dt), "tl_op_vadd", ms, gbs, "GB/s", gbs / copy_gbs, rel);
    printf("%-5s %-8s  copy %7.1f GB/s   tl_op_vadd %7.1f GB/s  = %.3f x copy   rel err %.1e%s\n",
           tl_dtype_name(dt), shape, copy_gbs, gbs, gbs / copy_gbs, rel, rel < 0 ? "  CHECK FAILED" : "");

    /* the schedule sweep of the tutorial: bytes per thread and threads */
    const int threads[] = {128, 256, 512};
    const int per_thread[] = {16, 32, 64, 128};
    for (int t = 0; t < 3; t++)
        for (int p = 0; p < 4; p++) {
            int64_t tile = (int64_t)threads[t] * per_thread[p] / (int64_t)tl_dtype_size(dt);
            tl_kernel *k = build_vadd(ctx, dt, tile, threads[t]);
            tl_program *prog;
            BENCH_CHECK(tl_compile(k, NULL, &prog));
            w.prog = prog;
            BENCH_CHECK(tl_memset_u8(ctx, w.c, 0xFF, bytes, NULL));
            double sms = time_ms(&w, run_op);
            double srel = check(&w);
            double sgbs = 3.0 * (double)bytes / sms / 1e6;
            char impl[64];
            snprintf(impl, sizeof impl, "builder tile=%lld threads=%d", (long long)tile, threads[t]);
            bench_csv("vadd", shape, tl_dtype_name(dt), impl, sms, sgbs, "GB/s", sgbs / copy_gbs, srel);
            w.prog = NULL;
            tl_program_destroy(prog);
            tl_kernel_destroy(k);
        }
    tl_free(ctx, w.a), tl_free(ctx, w.b), tl_free(ctx, w.c);
    free(w.ref);
}

int main(int argc, char **argv)
{
    int lg = argc > 1 ? atoi(argv[1]) : 28;
    tl_ctx *ctx = bench_open("bench_vadd");
    printf("csv,op,shape,dtype,impl,ms,rate,unit,ratio_to_baseline,rel_err\n");
    const tl_dtype dts[] = {TL_F32, TL_F16, TL_BF16};
    for (int d = 0; d < 3; d++)
        bench_dtype(ctx, dts[d], (int64_t)1 << lg);
    tl_ctx_destroy(ctx);
    return 0;
}
