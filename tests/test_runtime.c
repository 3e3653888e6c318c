/*
 * test_runtime.c - the runtime layer: names, half-precision conversions,
 * context creation with and without a driver, the memory helpers, NVRTC,
 * timing. The GPU tier skips, saying why, where there is no GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ctx.h"
#include "half.h"
#include "nvrtc.h"
#include "tilec.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static tl_ctx_options offline_options(void)
{
    tl_ctx_options o = tl_ctx_default_options();
    o.device = TL_NO_DEVICE;
    o.disk_cache = 0; /* tests leave no files behind */
    return o;
}


/* ------------------------------------------------------------------------ */
/* Driver loading (runs first: the driver table is loaded once a process)    */
/* ------------------------------------------------------------------------ */

/* The override is read when the driver table is first loaded, so the check
 * runs in a child process that has never loaded it. */
static void test_no_driver_override(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        setenv("TILEC_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
        tl_ctx_options o = tl_ctx_default_options();
        o.disk_cache = 0;
        tl_ctx *ctx = (tl_ctx *)0x1;
        char msg[1024] = "";
        int st = tl_ctx_create(&o, &ctx, msg, sizeof msg);
        int null_out = ctx == NULL;
        ssize_t w1 = write(fds[1], &st, sizeof st);
        ssize_t w2 = write(fds[1], &null_out, sizeof null_out);
        ssize_t w3 = write(fds[1], msg, sizeof msg);
        _exit(w1 > 0 && w2 > 0 && w3 > 0 ? 0 : 1);
    }
    close(fds[1]);
    int st = -1, null_out = 0;
    char msg[1024] = "";
    assert_int_equal(read(fds[0], &st, sizeof st), (ssize_t)sizeof st);
    assert_int_equal(read(fds[0], &null_out, sizeof null_out), (ssize_t)sizeof null_out);
    size_t got = 0;
    for (ssize_t n; got < sizeof msg && (n = read(fds[0], msg + got, sizeof msg - got)) > 0;)
        got += (size_t)n;
    close(fds[0]);
    int wstatus = 0;
    assert_int_equal(waitpid(pid, &wstatus, 0), pid);
    assert_true(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
    msg[sizeof msg - 1] = '\0';
    assert_int_equal(st, TL_ERR_NO_DRIVER);
    assert_true(null_out);
    assert_non_null(strstr(msg, "libcuda.so.1"));
    assert_non_null(strstr(msg, "/nonexistent"));
}

/* ------------------------------------------------------------------------ */
/* Names                                                                     */
/* ------------------------------------------------------------------------ */

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(tl_version(), TILEC_VERSION_STRING);
    assert_string_equal(tl_status_name(TL_OK), "TL_OK");
    assert_string_equal(tl_status_name(TL_ERR_NO_DEVICE), "TL_ERR_NO_DEVICE");
    assert_string_equal(tl_status_name(TL_ERR_COMPILE), "TL_ERR_COMPILE");
    assert_string_equal(tl_status_name(TL_ERR_INTERNAL), "TL_ERR_INTERNAL");
    assert_non_null(tl_status_name((tl_status)12345));

    static const struct { tl_dtype dt; const char *name; size_t size; } rows[] = {
        {TL_F32, "f32", 4}, {TL_F16, "f16", 2}, {TL_BF16, "bf16", 2},
        {TL_I32, "i32", 4}, {TL_I64, "i64", 8}, {TL_F64, "f64", 8},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        assert_string_equal(tl_dtype_name(rows[i].dt), rows[i].name);
        assert_int_equal(tl_dtype_size(rows[i].dt), rows[i].size);
        assert_int_equal(tl_dtype_from_name(rows[i].name), rows[i].dt);
    }
    assert_int_equal(tl_dtype_size(TL_BOOL), 1);
    assert_int_equal(tl_dtype_size(TL_DTYPE_INVALID), 0);
    assert_string_equal(tl_dtype_name(TL_DTYPE_INVALID), "invalid");
    assert_string_equal(tl_dtype_name((tl_dtype)99), "invalid");
    assert_int_equal(tl_dtype_from_name("f8"), TL_DTYPE_INVALID);
    assert_int_equal(tl_dtype_from_name(""), TL_DTYPE_INVALID);
    assert_int_equal(tl_dtype_from_name(NULL), TL_DTYPE_INVALID);
}

/* ------------------------------------------------------------------------ */
/* Half precision                                                            */
/* ------------------------------------------------------------------------ */

/* The value of f16 bits by the definition of the format (finite only). */
static double f16_reference(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double mag = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return (h & 0x8000) ? -mag : mag;
}

static void test_f16_all_patterns(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tl_f16_to_f32((uint16_t)h);
        int e = (h >> 10) & 0x1f, m = h & 0x3ff;
        if (e == 31 && m) {
            assert_true(isnan(f));
        } else if (e == 31) {
            assert_true(isinf(f));
            assert_int_equal(signbit(f) != 0, (h & 0x8000) != 0);
        } else {
            assert_true((double)f == f16_reference((uint16_t)h));
            assert_int_equal(signbit(f) != 0, (h & 0x8000) != 0); /* -0 too */
        }
        /* Every pattern, NaNs included, survives the round trip. */
        assert_int_equal(tl_f32_to_f16(f), h);
    }
}

static void test_bf16_all_patterns(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tl_bf16_to_f32((uint16_t)h);
        assert_int_equal(test_f32_bits(f), h << 16);
        assert_int_equal(tl_f32_to_bf16(f), h);
    }
}

/* For each pair of neighbours a < b: the midpoint goes to the even one, a
 * float just below it to a, just above it to b. Covers subnormals, the
 * normal boundary and the step to Inf. */
static void check_midpoints(uint16_t (*to16)(float), float (*from16)(uint16_t), uint32_t last,
                            float top_mid)
{
    for (uint32_t h = 0; h <= last; h++) {
        float a = from16((uint16_t)h);
        float b = h == last ? (float)INFINITY : from16((uint16_t)(h + 1));
        /* exact: one bit more than the format; above the largest finite
         * value, the midpoint towards the next power of two */
        float mid = h == last ? top_mid : a + (b - a) / 2; /* a + b could overflow */
        uint16_t up = (uint16_t)(h + 1); /* for h == last: the Inf pattern */
        assert_int_equal(to16(mid), (h & 1) ? up : h);
        assert_int_equal(to16(nextafterf(mid, 0.0f)), h);
        assert_int_equal(to16(nextafterf(mid, (float)INFINITY)), up);
        assert_int_equal(to16(-mid), (uint16_t)(((h & 1) ? up : h) | 0x8000u));
    }
}

static void test_f16_rounding(void **state)
{
    (void)state;
    check_midpoints(tl_f32_to_f16, tl_f16_to_f32, 0x7bff, 65520.0f);
    assert_int_equal(tl_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(tl_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);        /* tie -> even */
    assert_int_equal(tl_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);    /* tie -> even */
    assert_int_equal(tl_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(tl_f32_to_f16(65519.996f), 0x7bff);
    assert_int_equal(tl_f32_to_f16(65520.0f), 0x7c00);
    assert_int_equal(tl_f32_to_f16(1e30f), 0x7c00);
    assert_int_equal(tl_f32_to_f16(-1e30f), 0xfc00);
    assert_int_equal(tl_f32_to_f16((float)INFINITY), 0x7c00);
    assert_int_equal(tl_f32_to_f16(-0.0f), 0x8000);
    assert_int_equal(tl_f32_to_f16(0x1p-24f), 0x0001);
    assert_int_equal(tl_f32_to_f16(0x1p-25f), 0x0000);              /* tie -> even (0) */
    assert_int_equal(tl_f32_to_f16(3 * 0x1p-25f), 0x0002);          /* tie -> even */
    assert_int_equal(tl_f32_to_f16(0x1p-26f), 0x0000);
    assert_int_equal(tl_f32_to_f16(0x1p-14f), 0x0400);              /* smallest normal */
    assert_int_equal(tl_f32_to_f16(test_f32_from_bits(1)), 0x0000);           /* f32 subnormal */
    uint16_t n = tl_f32_to_f16(test_f32_from_bits(0x7fc00000u));
    assert_true((n & 0x7c00) == 0x7c00 && (n & 0x3ff));
    n = tl_f32_to_f16(test_f32_from_bits(0xff800001u)); /* payload only in dropped bits */
    assert_true((n & 0xfc00) == 0xfc00 && (n & 0x3ff));
}

static void test_bf16_rounding(void **state)
{
    (void)state;
    check_midpoints(tl_f32_to_bf16, tl_bf16_to_f32, 0x7f7f, test_f32_from_bits(0x7f7f8000u));
    assert_int_equal(tl_f32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(tl_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);       /* tie -> even */
    assert_int_equal(tl_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);   /* tie -> even */
    assert_int_equal(tl_f32_to_bf16(test_f32_from_bits(0x7f7fffffu)), 0x7f80); /* FLT_MAX -> Inf */
    assert_int_equal(tl_f32_to_bf16(-(float)INFINITY), 0xff80);
    uint16_t n = tl_f32_to_bf16(test_f32_from_bits(0x7f800001u));
    assert_true((n & 0x7f80) == 0x7f80 && (n & 0x7f));
}

static void test_double_conversions(void **state)
{
    (void)state;
    /* Just above a tie: straight from the double it rounds up; through
     * float it would land on the tie and go to even (down). */
    assert_int_equal(tli_f64_to_f16(1.0 + 0x1p-11 + 0x1p-40), 0x3c01);
    assert_int_equal(tli_f64_to_bf16(1.0 + 0x1p-8 + 0x1p-40), 0x3f81);
    assert_int_equal(tli_f64_to_f16(1.0 + 0x1p-11), 0x3c00);
    assert_int_equal(tli_f64_to_f16(65519.999999), 0x7bff);
    assert_int_equal(tli_f64_to_f16(65520.0), 0x7c00);
    assert_int_equal(tli_f64_to_f16(1e300), 0x7c00);
    assert_int_equal(tli_f64_to_f16(-1e-300), 0x8000);
    assert_int_equal(tli_f64_to_f16(0x1p-25 + 0x1p-60), 0x0001);
    assert_int_equal(tli_f64_to_bf16(1e300), 0x7f80);
    assert_int_equal(tli_f64_to_bf16(-INFINITY), 0xff80);
    assert_true((tli_f64_to_f16(NAN) & 0x7fff) > 0x7c00);
    assert_true((tli_f64_to_bf16(NAN) & 0x7fff) > 0x7f80);
    /* Doubles that are floats convert like the float path. */
    for (uint32_t h = 0; h < 0x7c00; h += 7) {
        double v = (f16_reference((uint16_t)h) + f16_reference((uint16_t)(h + 1))) / 2;
        assert_int_equal(tli_f64_to_f16(v), tl_f32_to_f16((float)v));
        assert_int_equal(tli_f64_to_bf16(v), tl_f32_to_bf16((float)v));
    }
}

static void test_load_store(void **state)
{
    (void)state;
    union { float f32[4]; uint16_t u16[4]; int32_t i32[4]; int64_t i64[4]; double f64[4];
            uint8_t b[4]; } buf;
    tli_store_from_double(TL_F32, buf.f32, 2, 0.1);
    assert_true(buf.f32[2] == 0.1f);
    assert_true(tli_load_as_double(TL_F32, buf.f32, 2) == (double)0.1f);
    tli_store_from_double(TL_F16, buf.u16, 1, 1.0 + 0x1p-11 + 0x1p-40);
    assert_int_equal(buf.u16[1], 0x3c01);
    assert_true(tli_load_as_double(TL_F16, buf.u16, 1) == 1.0 + 0x1p-10);
    tli_store_from_double(TL_BF16, buf.u16, 3, -2.0);
    assert_int_equal(buf.u16[3], 0xc000);
    assert_true(tli_load_as_double(TL_BF16, buf.u16, 3) == -2.0);
    static const struct { double v; int32_t want; } i32_cases[] = {
        {3.7, 3}, {-3.7, -3}, {1e20, INT32_MAX}, {-1e20, INT32_MIN}, {NAN, 0},
        {2147483647.9, INT32_MAX}, {-2147483648.9, INT32_MIN},
    };
    for (size_t i = 0; i < sizeof i32_cases / sizeof i32_cases[0]; i++) {
        tli_store_from_double(TL_I32, buf.i32, 0, i32_cases[i].v);
        assert_int_equal(buf.i32[0], i32_cases[i].want);
    }
    tli_store_from_double(TL_I64, buf.i64, 1, 1e30);
    assert_true(buf.i64[1] == INT64_MAX);
    tli_store_from_double(TL_I64, buf.i64, 1, -1e30);
    assert_true(buf.i64[1] == INT64_MIN);
    tli_store_from_double(TL_I64, buf.i64, 1, -12345.9);
    assert_true(buf.i64[1] == -12345);
    assert_true(tli_load_as_double(TL_I64, buf.i64, 1) == -12345.0);
    tli_store_from_double(TL_F64, buf.f64, 0, 0.1);
    assert_true(tli_load_as_double(TL_F64, buf.f64, 0) == 0.1);
    tli_store_from_double(TL_BOOL, buf.b, 2, -0.5);
    assert_int_equal(buf.b[2], 1);
    assert_true(tli_load_as_double(TL_BOOL, buf.b, 2) == 1.0);
    assert_true(tli_load_as_double(TL_DTYPE_INVALID, buf.b, 0) == 0.0);
}

/* ------------------------------------------------------------------------ */
/* Contexts without a GPU                                                    */
/* ------------------------------------------------------------------------ */

static void test_offline_context(void **state)
{
    (void)state;
    tl_ctx_options o = offline_options();
    tl_ctx *ctx = NULL;
    char msg[512];
    assert_int_equal(tl_ctx_create(&o, &ctx, msg, sizeof msg), TL_OK);
    assert_non_null(ctx);
    assert_string_equal(tl_ctx_target(ctx), "sm_90a");
    assert_int_equal(tl_ctx_has_device(ctx), 0);
    assert_string_equal(tl_ctx_error(ctx), "");
    tl_device_info info;
    assert_int_equal(tl_ctx_get_device_info(ctx, &info), TL_ERR_NO_DEVICE);
    assert_true(strlen(tl_ctx_error(ctx)) > 0);
    tl_cache_stats cs;
    assert_int_equal(tl_cache_get_stats(ctx, &cs), TL_OK);
    assert_int_equal(cs.disk_enabled, 0);
    assert_int_equal(tl_cache_clear(ctx), TL_OK);
    tl_ctx_destroy(ctx);

    static const char *const good[] = {"sm_80", "sm_90a", "sm_100a", "sm_120"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        o.target = good[i];
        assert_int_equal(tl_ctx_create(&o, &ctx, msg, sizeof msg), TL_OK);
        assert_string_equal(tl_ctx_target(ctx), good[i]);
        tl_ctx_destroy(ctx);
    }
    static const char *const bad[] = {"sm_x", "sm_", "sm_90ab", "compute_90", "", "sm_9 0",
                                      "sm_123456789012345"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.target = bad[i];
        ctx = (tl_ctx *)0x1;
        assert_int_equal(tl_ctx_create(&o, &ctx, msg, sizeof msg), TL_ERR_INVALID_ARG);
        assert_null(ctx);
        assert_non_null(strstr(msg, "target"));
    }
    o = offline_options();
    o.device = -7;
    assert_int_equal(tl_ctx_create(&o, &ctx, msg, sizeof msg), TL_ERR_INVALID_ARG);
    assert_null(ctx);
}

static tl_status never_called(void *user, void *stream)
{
    (void)stream;
    ++*(int *)user;
    return TL_OK;
}

static void test_offline_memory(void **state)
{
    (void)state;
    tl_ctx_options o = offline_options();
    tl_ctx *ctx = NULL;
    assert_int_equal(tl_ctx_create(&o, &ctx, NULL, 0), TL_OK);
    uint64_t d = 123;
    char host[16] = {0};
    assert_int_equal(tl_malloc(ctx, 64, &d), TL_ERR_NO_DEVICE);
    assert_int_equal(d, 0);
    assert_non_null(strstr(tl_ctx_error(ctx), "tl_malloc"));
    assert_non_null(strstr(tl_ctx_error(ctx), "TL_NO_DEVICE"));
    assert_int_equal(tl_free(ctx, 0x1000), TL_ERR_NO_DEVICE);
    assert_int_equal(tl_free(ctx, 0), TL_OK);
    assert_int_equal(tl_memcpy_htod(ctx, 0x1000, host, sizeof host), TL_ERR_NO_DEVICE);
    assert_int_equal(tl_memcpy_dtoh(ctx, host, 0x1000, sizeof host), TL_ERR_NO_DEVICE);
    assert_int_equal(tl_memcpy_dtod(ctx, 0x1000, 0x2000, 16, NULL), TL_ERR_NO_DEVICE);
    assert_int_equal(tl_memset_u8(ctx, 0x1000, 7, 16, NULL), TL_ERR_NO_DEVICE);
    assert_int_equal(tl_synchronize(ctx), TL_ERR_NO_DEVICE);
    int calls = 0;
    tl_timing t;
    assert_int_equal(tl_time(ctx, NULL, never_called, &calls, NULL, &t), TL_ERR_NO_DEVICE);
    tl_work_fn fns[2] = {never_called, never_called};
    void *users[2] = {&calls, &calls};
    tl_timing two[2];
    assert_int_equal(tl_time_interleaved(ctx, NULL, 2, fns, users, NULL, two), TL_ERR_NO_DEVICE);
    assert_int_equal(calls, 0);
    tl_ctx_destroy(ctx);
}

static void test_null_arguments(void **state)
{
    (void)state;
    char msg[256];
    assert_int_equal(tl_ctx_create(NULL, NULL, msg, sizeof msg), TL_ERR_INVALID_ARG);
    assert_true(strlen(msg) > 0);
    assert_int_equal(tl_ctx_create(NULL, NULL, NULL, 0), TL_ERR_INVALID_ARG);
    tl_ctx_destroy(NULL);
    assert_string_equal(tl_ctx_error(NULL), "");
    assert_string_equal(tl_ctx_target(NULL), "");
    assert_int_equal(tl_ctx_has_device(NULL), 0);
    tl_device_info info;
    tl_cache_stats cs;
    tl_timing t;
    uint64_t d;
    assert_int_equal(tl_ctx_get_device_info(NULL, &info), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_malloc(NULL, 16, &d), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_free(NULL, 0), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_memcpy_htod(NULL, 1, &d, 8), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_memcpy_dtoh(NULL, &d, 1, 8), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_memcpy_dtod(NULL, 1, 2, 8, NULL), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_memset_u8(NULL, 1, 0, 8, NULL), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_synchronize(NULL), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_cache_get_stats(NULL, &cs), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_cache_clear(NULL), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_time(NULL, NULL, never_called, NULL, NULL, &t), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_time_launch(NULL, NULL, 0, NULL, NULL, &t), TL_ERR_INVALID_ARG);

    tl_ctx_options o = offline_options();
    tl_ctx *ctx = NULL;
    assert_int_equal(tl_ctx_create(&o, &ctx, NULL, 0), TL_OK);
    assert_int_equal(tl_ctx_get_device_info(ctx, NULL), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_malloc(ctx, 16, NULL), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_memcpy_htod(ctx, 1, NULL, 8), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_memcpy_dtoh(ctx, NULL, 1, 8), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_memcpy_htod(ctx, 0, &d, 8), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_memset_u8(ctx, 0, 0, 8, NULL), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_cache_get_stats(ctx, NULL), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_time(ctx, NULL, NULL, NULL, NULL, &t), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_time(ctx, NULL, never_called, NULL, NULL, NULL), TL_ERR_INVALID_ARG);
    assert_true(strlen(tl_ctx_error(ctx)) > 0);
    tl_work_fn fns[2] = {never_called, NULL};
    void *users[2] = {NULL, NULL};
    tl_timing two[2];
    assert_int_equal(tl_time_interleaved(NULL, NULL, 1, fns, users, NULL, two), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_time_interleaved(ctx, NULL, 0, fns, users, NULL, two), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "n must be >= 1"));
    assert_int_equal(tl_time_interleaved(ctx, NULL, 1, NULL, users, NULL, two), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_time_interleaved(ctx, NULL, 1, fns, NULL, NULL, two), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_time_interleaved(ctx, NULL, 1, fns, users, NULL, NULL), TL_ERR_INVALID_ARG);
    assert_int_equal(tl_time_interleaved(ctx, NULL, 2, fns, users, NULL, two), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "fn 1 is NULL"));
    tl_timing_options many = {.reps = 60000};
    fns[1] = never_called;
    assert_int_equal(tl_time_interleaved(ctx, NULL, 2, fns, users, &many, two), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "reps x n"));
    void *out = NULL;
    size_t len = 0;
    assert_int_equal(tli_nvrtc_compile(ctx, NULL, "k", "sm_80", 0, NULL, 0, &out, &len, NULL),
                     TL_ERR_INVALID_ARG);
    assert_int_equal(tli_nvrtc_compile(ctx, "", "k", "sm_80", 0, NULL, 0, NULL, &len, NULL),
                     TL_ERR_INVALID_ARG);
    assert_int_equal(tli_nvrtc_compile(ctx, "", "k", NULL, 0, NULL, 0, &out, &len, NULL),
                     TL_ERR_INVALID_ARG);
    assert_int_equal(tli_nvrtc_compile(ctx, "", "k", "sm_80", 0, NULL, 2, &out, &len, NULL),
                     TL_ERR_INVALID_ARG);
    tl_ctx_destroy(ctx);
    assert_int_equal(tl_runtime_versions(NULL, NULL, NULL, NULL, 0) >= 0, 1);
}

/* On a machine without a GPU, device 0 fails cleanly; with one, it works. */
static void test_device0(void **state)
{
    (void)state;
    tl_ctx_options o = tl_ctx_default_options();
    o.disk_cache = 0;
    tl_ctx *ctx = NULL;
    char msg[1024] = "";
    tl_status st = tl_ctx_create(&o, &ctx, msg, sizeof msg);
    if (st == TL_OK) {
        assert_int_equal(tl_ctx_has_device(ctx), 1);
        tl_ctx_destroy(ctx);
        return;
    }
    print_message("device 0: %s: %s\n", tl_status_name(st), msg);
    assert_true(st == TL_ERR_NO_DRIVER || st == TL_ERR_NO_DEVICE);
    assert_null(ctx);
    assert_true(strlen(msg) > 20);
    if (st == TL_ERR_NO_DRIVER)
        assert_non_null(strstr(msg, "libcuda.so.1"));
    o.device = 5;
    assert_int_equal(tl_ctx_create(&o, &ctx, msg, sizeof msg), st);
}

static void test_runtime_versions(void **state)
{
    (void)state;
    int drv = -1, ma = -1, mi = -1;
    char msg[2048];
    tl_status st = tl_runtime_versions(&drv, &ma, &mi, msg, sizeof msg);
    print_message("driver %d, NVRTC %d.%d (%s) %s\n", drv, ma, mi, tl_status_name(st), msg);
    assert_true(st == TL_OK || st == TL_ERR_NO_DRIVER || st == TL_ERR_NO_NVRTC);
    assert_true(drv >= 0 && ma >= 0 && mi >= 0);
    if (st == TL_ERR_NO_DRIVER) {
        assert_int_equal(drv, 0);
        assert_non_null(strstr(msg, "libcuda.so.1"));
    }
    if (ma)
        assert_true(ma >= 12);
}

static void test_cublas_loader(void **state)
{
    (void)state;
    const tli_cublas_api *blas = NULL;
    char msg[1024] = "";
    tl_status st = tli_load_cublas(&blas, msg, sizeof msg);
    if (st != TL_OK) {
        assert_int_equal(st, TL_ERR_NO_CUBLAS);
        assert_null(blas);
        assert_non_null(strstr(msg, "libcublas"));
        print_message("cuBLAS not found: %s\n", msg);
        return;
    }
    assert_non_null(blas->cublasGemmEx);
    assert_non_null(blas->cublasLtMatmul);
    assert_non_null(blas->cublasLtMatmulAlgoGetHeuristic);
}

/* ------------------------------------------------------------------------ */
/* NVRTC                                                                     */
/* ------------------------------------------------------------------------ */

static const char tiny_kernel[] =
    "extern \"C\" __global__ void k(float *p) { p[threadIdx.x] = 1.0f; }\n";

static int nvrtc_missing(void)
{
    int ma = 0, mi = 0;
    if (tli_nvrtc_version(&ma, &mi) == TL_OK)
        return 0;
    print_message("NVRTC not found: skipping\n");
    return 1;
}

static void test_nvrtc_cubin_and_ptx(void **state)
{
    (void)state;
    if (nvrtc_missing())
        skip();
    static const char *const targets[] = {"sm_80", "sm_90a"};
    for (size_t i = 0; i < 2; i++) {
        void *out = NULL;
        size_t len = 0;
        char *log = NULL;
        tl_status st = tli_nvrtc_compile(NULL, tiny_kernel, "tiny.cu", targets[i], 0, NULL, 0,
                                         &out, &len, &log);
        assert_int_equal(st, TL_OK);
        assert_true(len > 4);
        assert_memory_equal(out, "\x7f" "ELF", 4);
        free(out);
        free(log);
    }
    static const char *const extra[] = {"-lineinfo", "--use_fast_math"};
    void *out = NULL;
    size_t len = 0;
    assert_int_equal(tli_nvrtc_compile(NULL, tiny_kernel, NULL, "sm_90a", 1, extra, 2, &out,
                                       &len, NULL), TL_OK);
    assert_int_equal(len, strlen(out));
    assert_non_null(strstr(out, ".visible .entry k"));
    assert_non_null(strstr(out, ".target sm_90a"));
    free(out);
}

static void test_nvrtc_errors(void **state)
{
    (void)state;
    if (nvrtc_missing())
        skip();
    tl_ctx_options o = offline_options();
    tl_ctx *ctx = NULL;
    assert_int_equal(tl_ctx_create(&o, &ctx, NULL, 0), TL_OK);
    void *out = (void *)0x1;
    size_t len = 99;
    char *log = NULL;
    tl_status st = tli_nvrtc_compile(ctx, "extern \"C\" __global__ void k( { }", "bad.cu",
                                     "sm_80", 0, NULL, 0, &out, &len, &log);
    assert_int_equal(st, TL_ERR_COMPILE);
    assert_null(out);
    assert_int_equal(len, 0);
    assert_non_null(log);
    assert_non_null(strstr(log, "error"));
    assert_non_null(strstr(tl_ctx_error(ctx), "error"));
    assert_non_null(strstr(tl_ctx_error(ctx), "bad.cu"));
    free(log);
    st = tli_nvrtc_compile(ctx, tiny_kernel, NULL, "sm_x", 0, NULL, 0, &out, &len, NULL);
    assert_int_equal(st, TL_ERR_INVALID_ARG);
    static const char *const bogus[] = {"--no-such-option"};
    st = tli_nvrtc_compile(ctx, tiny_kernel, NULL, "sm_80", 0, bogus, 1, &out, &len, NULL);
    assert_int_equal(st, TL_ERR_COMPILE);
    tl_ctx_destroy(ctx);
}

/* ------------------------------------------------------------------------ */
/* The GPU tier                                                              */
/* ------------------------------------------------------------------------ */

static tl_ctx *gpu_ctx_or_skip(void)
{
    tl_ctx_options o = tl_ctx_default_options();
    o.disk_cache = 0;
    tl_ctx *ctx = NULL;
    char msg[1024];
    tl_status st = tl_ctx_create(&o, &ctx, msg, sizeof msg);
    if (st == TL_ERR_NO_DRIVER || st == TL_ERR_NO_DEVICE) {
        msg[strcspn(msg, "(")] = '\0'; /* the first clause: a one-line skip reason */
        print_message("  skip: no GPU (%s: %s)\n", tl_status_name(st), msg);
        return NULL;
    }
    if (st != TL_OK)
        fail_msg("tl_ctx_create: %s: %s", tl_status_name(st), msg);
    return ctx;
}

static void check_device_info(tl_ctx *ctx)
{
    tl_device_info info;
    assert_int_equal(tl_ctx_get_device_info(ctx, &info), TL_OK);
    print_message("%s: cc %d.%d, %d SMs, %.1f GiB, L2 %d KiB, smem optin %d, clock %d kHz, "
                  "driver %d, NVRTC %d.%d, target %s\n", info.name, info.cc_major, info.cc_minor,
                  info.sm_count, info.global_mem_bytes / 1073741824.0, info.l2_bytes / 1024,
                  info.smem_per_block_optin, info.clock_khz, info.driver_version,
                  info.nvrtc_major, info.nvrtc_minor, info.target);
    assert_true(strlen(info.name) > 0);
    assert_int_equal(info.ordinal, 0);
    assert_true(info.sm_count > 0 && info.cc_major >= 7);
    assert_true(info.global_mem_bytes > (1u << 30));
    assert_true(info.smem_per_block >= 48 * 1024);
    assert_true(info.smem_per_block_optin >= info.smem_per_block);
    assert_true(info.l2_bytes > 0 && info.max_threads_per_block >= 1024);
    assert_true(info.driver_version >= 12000);
    assert_string_equal(info.target, tl_ctx_target(ctx));
    if (info.cc_major == 9 && info.cc_minor == 0)
        assert_string_equal(info.target, "sm_90a");
}

static void check_memory(tl_ctx *ctx)
{
    enum { N = 1 << 20 };
    uint8_t *host = malloc(N), *back = malloc(N);
    assert_non_null(host);
    assert_non_null(back);
    for (int i = 0; i < N; i++)
        host[i] = (uint8_t)(i * 131 + 7);
    uint64_t a = 0, b = 0;
    assert_int_equal(tl_malloc(ctx, N, &a), TL_OK);
    assert_int_equal(tl_malloc(ctx, N, &b), TL_OK);
    assert_true(a != 0 && b != 0);
    assert_int_equal(tl_memcpy_htod(ctx, a, host, N), TL_OK);
    assert_int_equal(tl_memcpy_dtod(ctx, b, a, N, NULL), TL_OK);
    assert_int_equal(tl_memset_u8(ctx, b + 100, 0xab, 50, NULL), TL_OK);
    assert_int_equal(tl_synchronize(ctx), TL_OK);
    assert_int_equal(tl_memcpy_dtoh(ctx, back, b, N), TL_OK);
    memset(host + 100, 0xab, 50);
    assert_memory_equal(back, host, N);
    assert_int_equal(tl_free(ctx, a), TL_OK);
    assert_int_equal(tl_free(ctx, b), TL_OK);
    uint64_t huge = 0;
    assert_int_equal(tl_malloc(ctx, (size_t)1 << 50, &huge), TL_ERR_OUT_OF_MEMORY);
    free(host);
    free(back);
}

typedef struct memset_work { tl_ctx *ctx; uint64_t buf; size_t bytes; int calls; } memset_work;

static tl_status do_memset(void *user, void *stream)
{
    memset_work *w = user;
    w->calls++;
    return tl_memset_u8(w->ctx, w->buf, (uint8_t)w->calls, w->bytes, stream);
}

static tl_status failing_work(void *user, void *stream)
{
    (void)user;
    (void)stream;
    return TL_ERR_LAUNCH_ARGS;
}

static void check_timing(tl_ctx *ctx)
{
    memset_work w = {ctx, 0, 64u << 20, 0};
    assert_int_equal(tl_malloc(ctx, w.bytes, &w.buf), TL_OK);
    for (int flush = 0; flush < 2; flush++) {
        tl_timing_options opt = {0, 0, flush};
        tl_timing t;
        w.calls = 0;
        assert_int_equal(tl_time(ctx, NULL, do_memset, &w, &opt, &t), TL_OK);
        print_message("memset 64 MiB%s: median %.4f ms (min %.4f, mean %.4f, max %.4f), %.0f GB/s\n",
                      flush ? " (L2 flushed)" : "", t.median_ms, t.min_ms, t.mean_ms, t.max_ms,
                      w.bytes / t.median_ms / 1e6);
        assert_int_equal(t.reps, 20);
        assert_int_equal(w.calls, 25);
        assert_true(t.min_ms > 0 && t.min_ms <= t.median_ms && t.median_ms <= t.max_ms);
        assert_true(t.min_ms <= t.mean_ms && t.mean_ms <= t.max_ms);
    }
    tl_timing_options three = {1, 3, 0};
    tl_timing t;
    w.calls = 0;
    assert_int_equal(tl_time(ctx, NULL, do_memset, &w, &three, &t), TL_OK);
    assert_int_equal(t.reps, 3);
    assert_int_equal(w.calls, 4);
    assert_int_equal(tl_time(ctx, NULL, failing_work, NULL, NULL, &t), TL_ERR_LAUNCH_ARGS);
    assert_true(strlen(tl_ctx_error(ctx)) > 0);

    /* interleaved: a memset of 64 MiB and one of 8 MiB take turns */
    memset_work small = {ctx, w.buf, 8u << 20, 0};
    tl_work_fn fns[3] = {do_memset, do_memset, failing_work};
    void *users[3] = {&w, &small, NULL};
    tl_timing two[2];
    tl_timing_options opt = {2, 30, 0};
    w.calls = 0;
    assert_int_equal(tl_time_interleaved(ctx, NULL, 2, fns, users, &opt, two), TL_OK);
    print_message("interleaved memsets: 64 MiB %.4f ms, 8 MiB %.4f ms\n", two[0].median_ms, two[1].median_ms);
    assert_int_equal(w.calls, 32);
    assert_int_equal(small.calls, 32);
    for (int j = 0; j < 2; j++) {
        assert_int_equal(two[j].reps, 30);
        assert_true(two[j].min_ms > 0 && two[j].min_ms <= two[j].median_ms && two[j].median_ms <= two[j].max_ms);
    }
    assert_true(two[0].median_ms > 2 * two[1].median_ms);
    tl_timing three_out[3];
    assert_int_equal(tl_time_interleaved(ctx, NULL, 3, fns, users, &opt, three_out), TL_ERR_LAUNCH_ARGS);
    assert_non_null(strstr(tl_ctx_error(ctx), "timed work 2 failed"));
    assert_int_equal(tl_free(ctx, w.buf), TL_OK);
}

static void check_driver_messages(tl_ctx *ctx)
{
    assert_int_equal(tli_cu_check(ctx, CUDA_SUCCESS, "cuLaunchKernel"), TL_OK);
    assert_int_equal(tli_cu_check(ctx, CUDA_ERROR_INVALID_VALUE, "cuLaunchKernel"), TL_ERR_CUDA);
    assert_string_equal(tl_ctx_error(ctx),
                        "cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE (invalid argument)");
}

/* A second context on the caller's CUcontext (here: the first one's). */
static void check_adopted_context(tl_ctx *ctx)
{
    tl_ctx_options o = tl_ctx_default_options();
    o.disk_cache = 0;
    o.cu_context = ctx->cuctx;
    tl_ctx *other = NULL;
    assert_int_equal(tl_ctx_create(&o, &other, NULL, 0), TL_OK);
    assert_int_equal(tl_ctx_has_device(other), 1);
    assert_string_equal(tl_ctx_target(other), tl_ctx_target(ctx));
    uint64_t d = 0;
    assert_int_equal(tl_malloc(other, 256, &d), TL_OK);
    assert_int_equal(tl_free(other, d), TL_OK);
    tl_ctx_destroy(other);
    assert_int_equal(tl_malloc(ctx, 256, &d), TL_OK); /* the first still works */
    assert_int_equal(tl_free(ctx, d), TL_OK);
}

static void test_gpu_tier(void **state)
{
    (void)state;
    tl_ctx *ctx = gpu_ctx_or_skip();
    if (!ctx)
        skip();
    check_device_info(ctx);
    check_memory(ctx);
    check_timing(ctx);
    check_driver_messages(ctx);
    check_adopted_context(ctx);
    tl_ctx_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_driver_override), /* first: see its comment */
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_f16_all_patterns),
        cmocka_unit_test(test_bf16_all_patterns),
        cmocka_unit_test(test_f16_rounding),
        cmocka_unit_test(test_bf16_rounding),
        cmocka_unit_test(test_double_conversions),
        cmocka_unit_test(test_load_store),
        cmocka_unit_test(test_offline_context),
        cmocka_unit_test(test_offline_memory),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_device0),
        cmocka_unit_test(test_runtime_versions),
        cmocka_unit_test(test_cublas_loader),
        cmocka_unit_test(test_nvrtc_cubin_and_ptx),
        cmocka_unit_test(test_nvrtc_errors),
        cmocka_unit_test(test_gpu_tier),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
