/*
 * bench_compile.c - how fast a program is ready:
 *   cold: lowering + NVRTC of the vector add, cache bypassed, after NVRTC's
 *         first compile in the process (median of 5);
 *   cached: a new process, from after context creation to the vector add
 *         loaded and ready to launch, with a warm disk cache (median of 5
 *         processes).
 * Usage: bench_compile            (the child mode is internal)
 */
#define _POSIX_C_SOURCE 200809L
#include "bench.h"

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

/* Child: prints the milliseconds from context to a loaded vadd program. */
static int child(void)
{
    tl_ctx *ctx;
    if (tl_ctx_create(NULL, &ctx, NULL, 0) != TL_OK)
        return 1;
    double t0 = now_ms();
    const tl_program *p;
    tl_vadd_desc d = {.dtype = TL_F32, .n = 1};
    tl_status st = tl_op_vadd_program(ctx, &d, &p);
    double t1 = now_ms();
    tl_program_info info;
    tl_program_get_info(p, &info);
    printf("%.3f %d %d\n", t1 - t0, st == TL_OK && info.loaded, info.from_cache);
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

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--child") == 0)
        return child();
    char dir[] = "/tmp/tilec-bench-cache-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    setenv("TILEC_CACHE_DIR", dir, 1);
    tl_ctx *ctx = bench_open("bench_compile");
    tl_compile_options cold = {.no_cache = 1};
    tl_kernel *k;
    tl_program *p;
    double first = now_ms();
    BENCH_CHECK(tl_op_build(ctx, "vadd", TL_F16, &k)); /* NVRTC's first compile */
    BENCH_CHECK(tl_compile(k, &cold, &p));
    first = now_ms() - first;
    tl_program_destroy(p);
    tl_kernel_destroy(k);
    const tl_dtype dts[] = {TL_F32, TL_F16, TL_BF16};
    for (int d = 0; d < 3; d++) {
        double t[5];
        for (int i = 0; i < 5; i++) {
            double t0 = now_ms();
            BENCH_CHECK(tl_op_build(ctx, "vadd", dts[d], &k));
            BENCH_CHECK(tl_compile(k, &cold, &p));
            t[i] = now_ms() - t0;
            tl_program_destroy(p);
            tl_kernel_destroy(k);
        }
        qsort(t, 5, sizeof t[0], cmp);
        printf("cold compile vadd %-4s (build + lower + NVRTC + load): median %.1f ms (first compile in process %.1f ms)\n",
               tl_dtype_name(dts[d]), t[2], first);
        bench_csv("compile_cold", "vadd", tl_dtype_name(dts[d]), "nvrtc", t[2], 0, "-", t[2] / 100.0, 0);
    }
    const tl_program *cp;
    tl_vadd_desc d = {.dtype = TL_F32, .n = 1};
    BENCH_CHECK(tl_op_vadd_program(ctx, &d, &cp)); /* fills the disk cache */
    double r[5];
    for (int i = 0; i < 5; i++)
        r[i] = cached_ready_ms("/proc/self/exe");
    qsort(r, 5, sizeof r[0], cmp);
    printf("cached vadd f32 ready in a new process (after context creation): median %.2f ms, min %.2f, max %.2f\n", r[2],
           r[0], r[4]);
    bench_csv("ready_cached", "vadd", "f32", "disk cache", r[2], 0, "-", r[2] / 5.0, 0);
    tl_cache_clear(ctx);
    tl_ctx_destroy(ctx);
    rmdir(dir);
    return r[0] < 0;
}
