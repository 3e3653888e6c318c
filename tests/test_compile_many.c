/* test_compile_many.c - tl_compile_many on the CPU (NVRTC needs no GPU):
 * the cubins of a parallel batch equal those of tl_compile one by one,
 * byte for byte; a failing kernel gets its own status and message and the
 * others still compile; kernels with one source compile once; the batch
 * fills the cache that a later context reads; argument errors. */
#include "fixture.h"

#include "program.h" /* white box: a program's safe variant */

#include <ftw.h>
#include <unistd.h>

static const tl_gemm_schedule batch_schedules[] = {
    {128, 128, 64, 4, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {64, 128, 32, 4, 128, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {128, 128, 64, 4, 128, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0}, /* ping-pong */
};
#define N_SCHED (int)(sizeof batch_schedules / sizeof batch_schedules[0])

static tl_kernel *gemm_kernel(tl_ctx *c, const tl_gemm_schedule *s, int trans_b)
{
    tl_gemm_desc d = {.m = 1, .n = 1, .k = 1, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = trans_b,
                      .has_bias = 1, .epilogue = TL_EPI_GELU_TANH, .schedule = *s};
    tl_kernel *k = NULL;
    assert_status(tl_op_gemm_build(c, &d, &k), TL_OK);
    return k;
}

/* The batch's kernels: the GEMM schedules and two vector adds. */
static int make_kernels(tl_ctx *c, tl_kernel **k)
{
    int n = 0;
    for (int i = 0; i < N_SCHED; i++)
        k[n++] = gemm_kernel(c, &batch_schedules[i], i % 2);
    assert_status(tl_op_build(c, "vadd", TL_F32, &k[n++]), TL_OK);
    assert_status(tl_op_build(c, "vadd", TL_F16, &k[n++]), TL_OK);
    return n;
}

static void test_parallel_equals_serial(void **state)
{
    (void)state;
    tl_kernel *k[8];
    int n = make_kernels(ctx, k);
    tl_compile_options nc = {.no_cache = 1};
    tl_compile_job jobs[8];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < n; i++)
        jobs[i].kernel = k[i];
    assert_status(tl_compile_many(ctx, jobs, n, &nc, 2), TL_OK);
    for (int i = 0; i < n; i++) {
        tl_program *p;
        assert_status(tl_compile(k[i], &nc, &p), TL_OK);
        assert_int_equal(jobs[i].status, TL_OK);
        assert_string_equal(jobs[i].message, "");
        assert_non_null(jobs[i].program);
        size_t a, b;
        const void *ca = tl_program_cubin(jobs[i].program, &a), *cb = tl_program_cubin(p, &b);
        assert_int_equal(a, b);
        assert_memory_equal(ca, cb, a);
        assert_string_equal(tl_program_source(jobs[i].program), tl_program_source(p));
        tl_program_info info;
        assert_status(tl_program_get_info(jobs[i].program, &info), TL_OK);
        assert_int_equal(info.from_cache, 0);
        assert_true(info.compile_ms > 0);
        tl_program_destroy(p);
        tl_program_destroy(jobs[i].program);
        tl_kernel_destroy(k[i]);
    }
}

/* Bad jobs among good ones: each bad one says why, the good ones compile,
 * and the call returns the first failure with a count. */
static void test_failures_are_per_job(void **state)
{
    (void)state;
    tl_ctx *other = test_offline_ctx("sm_90a");
    tl_kernel *good = gemm_kernel(ctx, &batch_schedules[0], 1);
    tl_gemm_schedule huge = {256, 256, 64, 6, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0}; /* 384 KiB of shared memory */
    tl_kernel *too_big = gemm_kernel(ctx, &huge, 0);
    tl_kernel *latched = tl_kernel_new(ctx, "latched");
    tl_grid(latched, TL_NONE_EXPR, TL_NONE_EXPR, TL_NONE_EXPR, 100); /* not a multiple of 32 */
    tl_kernel *foreign = NULL;
    assert_status(tl_op_build(other, "vadd", TL_F32, &foreign), TL_OK);
    tl_kernel *vadd = NULL;
    assert_status(tl_op_build(ctx, "vadd", TL_BF16, &vadd), TL_OK);
    tl_compile_job jobs[6];
    memset(jobs, 0, sizeof jobs);
    tl_kernel *ks[6] = {NULL, good, too_big, latched, foreign, vadd};
    for (int i = 0; i < 6; i++)
        jobs[i].kernel = ks[i];
    assert_status(tl_compile_many(ctx, jobs, 6, &(tl_compile_options){.no_cache = 1}, 0), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "4 of 6 kernels failed; job 0"));
    assert_int_equal(jobs[0].status, TL_ERR_INVALID_ARG);
    assert_non_null(strstr(jobs[0].message, "NULL"));
    assert_int_equal(jobs[1].status, TL_OK);
    assert_int_equal(jobs[2].status, TL_ERR_SHAPE);
    assert_non_null(strstr(jobs[2].message, "shared memory"));
    assert_int_equal(jobs[3].status, TL_ERR_INVALID_ARG);
    assert_non_null(strstr(jobs[3].message, "tl_grid"));
    assert_int_equal(jobs[4].status, TL_ERR_INVALID_ARG);
    assert_non_null(strstr(jobs[4].message, "another context"));
    assert_int_equal(jobs[5].status, TL_OK);
    for (int i = 0; i < 6; i++) {
        assert_true((jobs[i].program != NULL) == (jobs[i].status == TL_OK));
        tl_program_destroy(jobs[i].program);
        tl_kernel_destroy(ks[i]);
    }
    tl_ctx_destroy(other);
}

/* A source NVRTC rejects fails its own job only, with NVRTC's log in the
 * message. The builder cannot make such a source, so the test compiles
 * one for a target NVRTC does not know. */
static void test_nvrtc_failure(void **state)
{
    (void)state;
    tl_kernel *k[2];
    assert_status(tl_op_build(ctx, "vadd", TL_F32, &k[0]), TL_OK);
    assert_status(tl_op_build(ctx, "vadd", TL_F32, &k[1]), TL_OK);
    tl_compile_job jobs[2] = {{.kernel = k[0]}, {.kernel = k[1]}};
    tl_compile_options bad = {.target = "sm_9", .no_cache = 1};
    tl_status st = tl_compile_many(ctx, jobs, 2, &bad, 2);
    assert_int_not_equal(st, TL_OK);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(jobs[i].status, st);
        assert_null(jobs[i].program);
        assert_true(jobs[i].message[0] != '\0');
    }
    tl_kernel_destroy(k[0]);
    tl_kernel_destroy(k[1]);
}

/* Two kernels with one source: both get a program, with equal cubins. */
static void test_same_source_twice(void **state)
{
    (void)state;
    tl_kernel *k[3];
    assert_status(tl_op_build(ctx, "vadd", TL_F32, &k[0]), TL_OK);
    assert_status(tl_op_build(ctx, "vadd", TL_F32, &k[1]), TL_OK);
    assert_status(tl_op_build(ctx, "vadd", TL_F16, &k[2]), TL_OK);
    tl_compile_job jobs[3] = {{.kernel = k[0]}, {.kernel = k[1]}, {.kernel = k[2]}};
    assert_status(tl_compile_many(ctx, jobs, 3, &(tl_compile_options){.no_cache = 1}, 3), TL_OK);
    size_t a, b;
    const void *ca = tl_program_cubin(jobs[0].program, &a), *cb = tl_program_cubin(jobs[1].program, &b);
    assert_int_equal(a, b);
    assert_memory_equal(ca, cb, a);
    for (int i = 0; i < 3; i++) {
        tl_program_destroy(jobs[i].program);
        tl_kernel_destroy(k[i]);
    }
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static tl_ctx *disk_ctx(const char *dir)
{
    tl_ctx_options o = tl_ctx_default_options();
    o.device = TL_NO_DEVICE;
    o.target = "sm_90a";
    o.cache_dir = dir;
    tl_ctx *c = NULL;
    assert_status(tl_ctx_create(&o, &c, NULL, 0), TL_OK);
    return c;
}

/* The batch stores what it compiled: a new context (as a new process
 * would) finds every cubin on disk. */
static void test_fills_the_cache(void **state)
{
    (void)state;
    char dir[] = "/tmp/tilec-many-XXXXXX";
    assert_non_null(mkdtemp(dir));
    for (int round = 0; round < 2; round++) {
        tl_ctx *c = disk_ctx(dir);
        tl_kernel *k[3];
        tl_compile_job jobs[3];
        memset(jobs, 0, sizeof jobs);
        const tl_dtype dts[] = {TL_F32, TL_F16, TL_BF16};
        for (int i = 0; i < 3; i++) {
            assert_status(tl_op_build(c, "vadd", dts[i], &k[i]), TL_OK);
            jobs[i].kernel = k[i];
        }
        assert_status(tl_compile_many(c, jobs, 3, NULL, 0), TL_OK);
        for (int i = 0; i < 3; i++) {
            tl_program_info info;
            assert_status(tl_program_get_info(jobs[i].program, &info), TL_OK);
            assert_int_equal(info.from_cache, round == 0 ? 0 : 2);
            tl_program_destroy(jobs[i].program);
            tl_kernel_destroy(k[i]);
        }
        tl_cache_stats s;
        assert_status(tl_cache_get_stats(c, &s), TL_OK);
        assert_int_equal(s.disk_entries, 3);
        tl_ctx_destroy(c);
    }
    nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

/* A job may ask for its program's safe variant (for tensors that miss the
 * alignment the program assumes): it comes compiled with the program, as
 * the one tl_launch would otherwise compile at the first such launch. */
static void test_safe_variant(void **state)
{
    (void)state;
    tl_kernel *k[2];
    k[0] = gemm_kernel(ctx, &batch_schedules[0], 0);
    k[1] = gemm_kernel(ctx, &batch_schedules[0], 0);
    tl_compile_job jobs[2] = {{.kernel = k[0], .safe_variant = 1}, {.kernel = k[1]}};
    assert_status(tl_compile_many(ctx, jobs, 2, &(tl_compile_options){.no_cache = 1}, 2), TL_OK);
    const tl_program *safe = jobs[0].program->safe_variant;
    assert_non_null(safe);
    assert_null(jobs[1].program->safe_variant);
    assert_true(safe->safe && !jobs[0].program->safe);
    assert_string_not_equal(tl_program_source(safe), tl_program_source(jobs[0].program));
    size_t n;
    assert_non_null(tl_program_cubin(safe, &n));
    assert_true(n > 0);
    for (int i = 0; i < 2; i++) {
        tl_program_destroy(jobs[i].program);
        tl_kernel_destroy(k[i]);
    }
}

static void test_argument_errors(void **state)
{
    (void)state;
    tl_compile_job job = {0};
    assert_status(tl_compile_many(NULL, &job, 1, NULL, 0), TL_ERR_INVALID_ARG);
    assert_status(tl_compile_many(ctx, NULL, 1, NULL, 0), TL_ERR_INVALID_ARG);
    assert_status(tl_compile_many(ctx, &job, -1, NULL, 0), TL_ERR_INVALID_ARG);
    assert_status(tl_compile_many(ctx, &job, 1, NULL, -2), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "threads"));
    assert_status(tl_compile_many(ctx, NULL, 0, NULL, 0), TL_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parallel_equals_serial),
        cmocka_unit_test(test_failures_are_per_job),
        cmocka_unit_test(test_nvrtc_failure),
        cmocka_unit_test(test_same_source_twice),
        cmocka_unit_test(test_fills_the_cache),
        cmocka_unit_test(test_safe_variant),
        cmocka_unit_test(test_argument_errors),
    };
    return cmocka_run_group_tests_name("compile_many", tests, offline_setup, ctx_teardown);
}
