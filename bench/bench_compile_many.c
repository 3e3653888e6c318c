/*
 * bench_compile_many.c - a batch of kernels compiled serially (one thread)
 * and in parallel (tl_compile_many on every core), the cache bypassed:
 * the GEMM schedules the tuner tries, for the GPU's target, or sm_90a on
 * a machine without one (NVRTC needs no GPU). The two batches must give
 * the same cubins, byte for byte.
 *
 * Usage: bench_compile_many [threads]   (default: every online CPU)
 */
#include "bench.h"

#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec t;
    timespec_get(&t, TIME_UTC);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* A context on the GPU, else an offline one for sm_90a. */
static tl_ctx *open_any(char *where, size_t len)
{
    tl_ctx *ctx = NULL;
    tl_device_info info;
    if (tl_ctx_create(NULL, &ctx, NULL, 0) == TL_OK && tl_ctx_get_device_info(ctx, &info) == TL_OK) {
        snprintf(where, len, "%s", info.name);
        return ctx;
    }
    tl_ctx_options o = tl_ctx_default_options();
    o.device = TL_NO_DEVICE;
    o.target = "sm_90a";
    char msg[256];
    if (tl_ctx_create(&o, &ctx, msg, sizeof msg) != TL_OK) {
        printf("bench_compile_many: skipped (%s)\n", msg);
        exit(0);
    }
    snprintf(where, len, "no GPU (offline)");
    return ctx;
}

/* The kernels of the batch: every candidate schedule of a bf16 GEMM with
 * B as [N, K] (the ping-pong ones included on sm_90a). */
static int build_batch(tl_ctx *ctx, tl_compile_job *jobs, int max)
{
    tl_gemm_desc d = {.m = 4096, .n = 4096, .k = 4096, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = 1};
    tl_gemm_schedule s[64];
    int n = tl_gemm_candidates(ctx, &d, s, 64);
    n = n < max ? n : max;
    for (int i = 0; i < n; i++) {
        d.schedule = s[i];
        memset(&jobs[i], 0, sizeof jobs[i]);
        if (tl_op_gemm_build(ctx, &d, &jobs[i].kernel) != TL_OK)
            jobs[i].kernel = NULL; /* its job will say so */
    }
    return n;
}

/* Wall milliseconds of the batch; *cpu_s the process's CPU seconds, which
 * tell a batch that had the cores from one that shared them with others. */
static double compile_batch(tl_ctx *ctx, tl_compile_job *jobs, int n, int threads, int *failed, double *cpu_s)
{
    tl_compile_options nc = {.no_cache = 1};
    double t0 = now_ms();
    clock_t c0 = clock();
    tl_compile_many(ctx, jobs, n, &nc, threads);
    *cpu_s = (double)(clock() - c0) / CLOCKS_PER_SEC;
    double ms = now_ms() - t0;
    *failed = 0;
    for (int i = 0; i < n; i++)
        *failed += jobs[i].status != TL_OK;
    return ms;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 0;
    char where[256];
    tl_ctx *ctx = open_any(where, sizeof where);
    static tl_compile_job serial[64], parallel[64];
    int n = build_batch(ctx, serial, 64);
    build_batch(ctx, parallel, 64);
    printf("# bench_compile_many: %d GEMM kernels for %s on %s, libtilec %s\n", n, tl_ctx_target(ctx), where,
           tl_version());
    printf("csv,op,shape,dtype,impl,ms,rate,unit,ratio_to_baseline,rel_err\n");
    /* NVRTC's one-time start-up (about 300 ms) is paid before either batch */
    tl_kernel *warm;
    tl_program *p = NULL;
    if (tl_op_build(ctx, "vadd", TL_F32, &warm) == TL_OK) {
        tl_compile(warm, &(tl_compile_options){.no_cache = 1}, &p);
        tl_program_destroy(p);
        tl_kernel_destroy(warm);
    }
    int fs, fp;
    double cpu_s, cpu_p;
    double ms_s = compile_batch(ctx, serial, n, 1, &fs, &cpu_s);
    double ms_p = compile_batch(ctx, parallel, n, threads, &fp, &cpu_p);
    int same = 0;
    for (int i = 0; i < n; i++) {
        size_t a = 0, b = 0;
        const void *ca = tl_program_cubin(serial[i].program, &a), *cb = tl_program_cubin(parallel[i].program, &b);
        same += ca && cb && a == b && memcmp(ca, cb, a) == 0;
    }
    char shape[64];
    snprintf(shape, sizeof shape, "%d gemm kernels", n);
    bench_csv_baseline("compile_batch", shape, "bf16", "serial (1 thread)", ms_s, n / (ms_s / 1e3), "kernels/s");
    bench_csv("compile_batch", shape, "bf16", threads ? "tl_compile_many (given threads)" : "tl_compile_many (all cores)",
              ms_p, n / (ms_p / 1e3), "kernels/s", ms_s / ms_p, same == n - fs ? 0 : 1);
    printf("serial:   %8.0f ms wall, %6.1f s CPU (%d failed)\n"
           "parallel: %8.0f ms wall, %6.1f s CPU (%d failed): %.2fx the serial speed\n"
           "cubins equal byte for byte: %d of %d\n",
           ms_s, cpu_s, fs, ms_p, cpu_p, fp, ms_s / ms_p, same, n - fs);
    if (cpu_s > 0 && cpu_s < 0.8 * ms_s / 1e3)
        printf("note: the serial batch had %.0f%% of one CPU: other processes share this machine, so the wall\n"
               "      times say little; the CPU times show the work the batch did\n", 100 * cpu_s / (ms_s / 1e3));
    for (int i = 0; i < n; i++) {
        tl_program_destroy(serial[i].program);
        tl_program_destroy(parallel[i].program);
        tl_kernel_destroy(serial[i].kernel);
        tl_kernel_destroy(parallel[i].kernel);
    }
    tl_ctx_destroy(ctx);
    return same == n - fs && fs == fp ? 0 : 1;
}
