/*
 * bench_compile.c - how fast a program is ready:
 *   cold: lowering + NVRTC, cache bypassed, after NVRTC's first compile in
 *         the process: the vector add (median of 5) and the default GEMM
 *         of the context's target, plain and with bias + GELU (median of
 *         3);
 *   cached: a new process, from after context creation to the vector add
 *         ready (loaded, on a GPU) from a warm disk cache (median of 5
 *         processes).
 * NVRTC needs no GPU: without one this runs on an offline sm_90a context
 * and says so (a program is then compiled and cached, not loaded).
 * Usage: bench_compile            (the child mode is internal)
 */
#define _POSIX_C_SOURCE 200809L
#include "bench.h"

#include <stdbool.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The GPU's context, else an offline one (sm_90a): compiling needs only
 * NVRTC. Exits 0 with a note when NVRTC is missing too. */
static tl_ctx *open_any(bool quiet)
{
    char msg[400];
    tl_ctx *ctx = NULL;
    tl_status st = tl_ctx_create(NULL, &ctx, msg, sizeof msg);
    if (st != TL_OK) {
        tl_ctx_options o = tl_ctx_default_options();
        o.device = TL_NO_DEVICE;
        if (tl_ctx_create(&o, &ctx, msg, sizeof msg) != TL_OK)
            return NULL;
        if (!quiet)
            printf("# bench_compile: no GPU (%s), offline context for %s: cold compiles are measured, "
                   "programs are not loaded\n", tl_status_name(st), tl_ctx_target(ctx));
    }
    if (tl_runtime_versions(NULL, NULL, NULL, NULL, 0) == TL_ERR_NO_NVRTC) {
        printf("bench_compile: skipped, NVRTC is missing\n");
        exit(0);
    }
    bench_ctx = ctx;
    return ctx;
}

/* Child: prints the milliseconds from context to the vadd program, ready
 * (loaded when there is a GPU). */
static int child(void)
{
    tl_ctx *ctx = open_any(true);
    if (!ctx)
        return 1;
    double t0 = now_ms();
    const tl_program *p;
    tl_vadd_desc d = {.dtype = TL_F32, .n = 1};
    tl_status st = tl_op_vadd_program(ctx, &d, &p);
    double t1 = now_ms();
    tl_program_info info;
    tl_program_get_info(p, &info);
    printf("%.3f %d %d\n", t1 - t0, st == TL_OK && (info.loaded || !tl_ctx_has_device(ctx)), info.from_cache);
    tl_ctx_destroy(ctx);
    return 0;
}

static double cached_ready_ms(const char *self)
{
    int fd[2];
    if (pipe(fd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        execl(self, self, "--child", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char buf[128] = {0};
    ssize_t n = read(fd[0], buf, sizeof buf - 1);
    close(fd[0]);
    waitpid(pid, NULL, 0);
    double ms;
    int ok, from;
    if (n <= 0 || sscanf(buf, "%lf %d %d", &ms, &ok, &from) != 3 || !ok || from != 2)
        return -1;
    return ms;
}

/* Median of n cold compiles (build, lower, NVRTC, load) of what build
 * makes. */
typedef tl_status (*build_fn)(tl_ctx *ctx, const void *what, tl_kernel **k);

static double cold_ms(tl_ctx *ctx, build_fn build, const void *what, int n)
{
    tl_compile_options cold = {.no_cache = 1};
    double t[5];
    for (int i = 0; i < n; i++) {
        tl_kernel *k;
        tl_program *p;
        double t0 = now_ms();
        BENCH_CHECK(build(ctx, what, &k));
        BENCH_CHECK(tl_compile(k, &cold, &p));
        t[i] = now_ms() - t0;
        tl_program_destroy(p);
        tl_kernel_destroy(k);
    }
    qsort(t, (size_t)n, sizeof t[0], cmp);
    return t[n / 2];
}

static tl_status build_vadd(tl_ctx *ctx, const void *what, tl_kernel **k)
{
    return tl_op_build(ctx, "vadd", *(const tl_dtype *)what, k);
}

static tl_status build_gemm(tl_ctx *ctx, const void *what, tl_kernel **k)
{
    return tl_op_gemm_build(ctx, what, k);
}

static void cold_compiles(tl_ctx *ctx)
{
    tl_kernel *k;
    tl_program *p;
    tl_compile_options cold = {.no_cache = 1};
    double first = now_ms();
    BENCH_CHECK(tl_op_build(ctx, "vadd", TL_F16, &k)); /* NVRTC's first compile */
    BENCH_CHECK(tl_compile(k, &cold, &p));
    first = now_ms() - first;
    tl_program_destroy(p);
    tl_kernel_destroy(k);
    const tl_dtype dts[] = {TL_F32, TL_F16, TL_BF16};
    for (int d = 0; d < 3; d++) {
        double ms = cold_ms(ctx, build_vadd, &dts[d], 5);
        printf("cold compile vadd %-4s (build + lower + NVRTC + load): median %.1f ms (first compile in process %.1f ms)\n",
               tl_dtype_name(dts[d]), ms, first);
        bench_csv("compile_cold", "vadd", tl_dtype_name(dts[d]), "nvrtc", ms, 0, "-", ms / 100.0, 0);
    }
    /* The default schedules: the plain GEMM, and with a fused epilogue
     * (the ping-pong kernel on sm_90a). */
    tl_gemm_desc g = {.m = 4096, .n = 4096, .k = 4096, .in_dtype = TL_BF16, .out_dtype = TL_BF16};
    for (int fused = 0; fused < 2; fused++) {
        g.has_bias = fused;
        g.epilogue = fused ? TL_EPI_GELU_TANH : TL_EPI_NONE;
        tl_gemm_schedule s = tl_op_gemm_schedule(ctx, &g);
        double ms = cold_ms(ctx, build_gemm, &g, 3);
        char label[96];
        snprintf(label, sizeof label, "gemm%s %dx%dx%d%s %s", fused ? "+bias+gelu" : "", s.block_m, s.block_n,
                 s.block_k, s.pingpong ? " pingpong" : "", tl_ctx_target(ctx));
        printf("cold compile %s (default schedule; build + lower + NVRTC + load): median %.1f ms\n", label, ms);
        bench_csv("compile_cold", label, "bf16", "nvrtc", ms, 0, "-", ms / 1000.0, 0);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--child") == 0)
        return child();
    char dir[] = "/tmp/tilec-bench-cache-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    setenv("TILEC_CACHE_DIR", dir, 1);
    tl_ctx *ctx = open_any(false);
    if (!ctx)
        return 1;
    if (tl_ctx_has_device(ctx))
        bench_warm_up(ctx);
    cold_compiles(ctx);
    const tl_program *cp;
    tl_vadd_desc d = {.dtype = TL_F32, .n = 1};
    BENCH_CHECK(tl_op_vadd_program(ctx, &d, &cp)); /* fills the disk cache */
    double r[5];
    for (int i = 0; i < 5; i++)
        r[i] = cached_ready_ms("/proc/self/exe");
    qsort(r, 5, sizeof r[0], cmp);
    printf("cached vadd f32 ready in a new process (after context creation%s): median %.2f ms, min %.2f, max %.2f\n",
           tl_ctx_has_device(ctx) ? "" : "; offline: not loaded", r[2], r[0], r[4]);
    bench_csv("ready_cached", "vadd", "f32", "disk cache", r[2], 0, "-", r[2] / 5.0, 0);
    tl_cache_clear(ctx);
    tl_ctx_destroy(ctx);
    rmdir(dir);
    return r[0] < 0;
}
