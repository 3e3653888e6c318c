/* bench.h - shared by the benchmarks: a context, CSV + table output. */
#ifndef TILEC_BENCH_H
#define TILEC_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tilec.h"

#define BENCH_CHECK(expr)                                                                          \
    do {                                                                                           \
        tl_status st_ = (expr);                                                                    \
        if (st_ != TL_OK) {                                                                        \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, tl_status_name(st_),           \
                    bench_ctx ? tl_ctx_error(bench_ctx) : "");                                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static tl_ctx *bench_ctx;

/* Keeps the GPU busy for half a second so that its clocks have ramped up
 * before the first measurement (seen: the first kernel timed in a process
 * ran 38% slow). */
static inline void bench_warm_up(tl_ctx *ctx)
{
    uint64_t buf = 0;
    size_t bytes = (size_t)1 << 30;
    if (tl_malloc(ctx, bytes, &buf) != TL_OK)
        return;
    struct timespec t0, t;
    timespec_get(&t0, TIME_UTC);
    do {
        for (int i = 0; i < 20; i++)
            tl_memset_u8(ctx, buf, (uint8_t)i, bytes, NULL);
        tl_synchronize(ctx);
        timespec_get(&t, TIME_UTC);
    } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9 < 0.5);
    tl_free(ctx, buf);
}

/* Creates the context, or exits 0 with a note when there is no GPU (the
 * benchmarks have nothing to measure then). */
static inline tl_ctx *bench_open(const char *what)
{
    char msg[400];
    /* whole lines: a tuner's progress on stderr must not split a CSV line
     * when both go to one log */
    setvbuf(stdout, NULL, _IOLBF, 0);
    tl_status st = tl_ctx_create(NULL, &bench_ctx, msg, sizeof msg);
    if (st != TL_OK) {
        printf("%s: skipped, no GPU (%s: %s)\n", what, tl_status_name(st), msg);
        exit(0);
    }
    bench_warm_up(bench_ctx);
    tl_device_info info;
    tl_ctx_get_device_info(bench_ctx, &info);
    printf("# %s on %s (sm_%d%d, %d SMs, L2 %d MiB), driver %d, NVRTC %d.%d, libtilec %s\n", what, info.name,
           info.cc_major, info.cc_minor, info.sm_count, info.l2_bytes >> 20, info.driver_version, info.nvrtc_major,
           info.nvrtc_minor, tl_version());
    return bench_ctx;
}

/* One CSV line: op, shape, dtype, impl, ms, rate, unit, ratio, rel_err.
 * Every benchmark writes this format and `make bench` (bench/run.sh,
 * bench/report.py) gathers it: the line of the baseline an op is measured
 * against has an impl starting with "baseline:" (bench_csv_baseline) and
 * ratio 1; the others carry their ratio to it (an impl starting with
 * "peer:" is another library timed in the same run for context, not
 * ours; one starting with "context:" is ours but not this op, e.g. the
 * GEMM without the epilogue whose overhead is measured). unit: "TFLOP/s" for
 * compute-bound ops (plotted against size), "GB/s" for memory-bound ones
 * (plotted against the copy ceiling; a line of op "copy" with the same
 * shape and dtype also serves as the ceiling of a group without a
 * baseline line). Adding a benchmark to the report is a matter of printing
 * these lines. */
static inline void bench_csv(const char *op, const char *shape, const char *dtype, const char *impl, double ms,
                             double rate, const char *unit, double ratio, double rel)
{
    printf("csv,%s,%s,%s,%s,%.4f,%.1f,%s,%.3f,%.2e\n", op, shape, dtype, impl, ms, rate, unit, ratio, rel);
}

/* The baseline's line of a measurement group (op, shape, dtype). */
static inline void bench_csv_baseline(const char *op, const char *shape, const char *dtype, const char *impl,
                                      double ms, double rate, const char *unit)
{
    char name[128];
    snprintf(name, sizeof name, "baseline:%s", impl);
    bench_csv(op, shape, dtype, name, ms, rate, unit, 1.0, 0);
}

#endif
