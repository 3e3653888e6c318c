/* test_gpu.c - the GPU tier: numerics of every kernel on random inputs (never
 * zeros) with poisoned outputs, at aligned, ragged and misaligned sizes;
 * device random numbers equal to the host's; launch checks; the cache across
 * contexts. Every test skips, saying why, where there is no GPU.
 * TILEC_TEST_SMALL=1 keeps sizes small (for compute-sanitizer runs). */
#include "fixture.h"

#include "kernels.h"

#include <stdbool.h>
#include <unistd.h>


static uint64_t dalloc(size_t bytes)
{
    uint64_t p = 0;
    assert_status(tl_malloc(ctx, bytes ? bytes : 1, &p), TL_OK);
    return p;
}

static double round_to(tl_dtype dt, float s)
{
    return dt == TL_F16 ? tl_f16_to_f32(tl_f32_to_f16(s)) : dt == TL_BF16 ? tl_bf16_to_f32(tl_f32_to_bf16(s)) : s;
}

/* vadd of n elements at element offsets (oa, ob, oc) into larger buffers:
 * offsets other than 0 make the pointers misaligned for vector accesses. */
static void run_vadd(tl_dtype dt, int64_t n, int oa, int ob, int oc, uint64_t seed)
{
    size_t sz = tl_dtype_size(dt), bytes = (size_t)(n + 8) * sz;
    uint64_t a = dalloc(bytes), b = dalloc(bytes), c = dalloc(bytes);
    assert_status(tl_random_fill(ctx, a, dt, n + 8, seed, -4, 4, NULL), TL_OK);
    assert_status(tl_random_fill(ctx, b, dt, n + 8, seed + 1, -4, 4, NULL), TL_OK);
    assert_status(tl_memset_u8(ctx, c, 0xFF, bytes, NULL), TL_OK); /* poison */
    tl_vadd_desc d = {.dtype = dt, .n = n};
    assert_status(tl_op_vadd(ctx, &d, a + (uint64_t)oa * sz, b + (uint64_t)ob * sz, c + (uint64_t)oc * sz, NULL), TL_OK);
    assert_status(tl_synchronize(ctx), TL_OK);
    void *ha = malloc(bytes), *hb = malloc(bytes), *hc = malloc(bytes);
    tl_random_host(ha, dt, n + 8, seed, -4, 4);
    tl_random_host(hb, dt, n + 8, seed + 1, -4, 4);
    assert_status(tl_memcpy_dtoh(ctx, hc, c, bytes), TL_OK);
    for (int64_t i = 0; i < n; i++) {
        double want = round_to(dt, (float)test_elem(dt, ha, i + oa) + (float)test_elem(dt, hb, i + ob));
        double got = test_elem(dt, hc, i + oc);
        if (got != want)
            fail_msg("vadd %s n=%lld offsets %d/%d/%d: c[%lld] = %g, want %g", tl_dtype_name(dt), (long long)n, oa,
                     ob, oc, (long long)i, got, want);
    }
    /* nothing outside [oc, oc + n) was written: still poison */
    const unsigned char *raw = hc;
    for (size_t i = 0; i < (size_t)oc * sz; i++)
        assert_int_equal(raw[i], 0xFF);
    for (size_t i = (size_t)(oc + n) * sz; i < bytes; i++)
        assert_int_equal(raw[i], 0xFF);
    free(ha), free(hb), free(hc);
    tl_free(ctx, a), tl_free(ctx, b), tl_free(ctx, c);
}

static void test_vadd_sizes_and_dtypes(void **state)
{
    (void)state;
    NEED_GPU();
    const int64_t sizes[] = {1, 2, 3, 7, 31, 1000, 4096, 4097, 8191, 65537, 1 << 20, (1 << 24) + 3};
    const tl_dtype dts[] = {TL_F32, TL_F16, TL_BF16};
    int nsizes = small ? 8 : 12;
    for (int d = 0; d < 3; d++)
        for (int s = 0; s < nsizes; s++)
            run_vadd(dts[d], sizes[s], 0, 0, 0, 1000 + (uint64_t)s);
}

static void test_vadd_misaligned(void **state)
{
    (void)state;
    NEED_GPU();
    const tl_dtype dts[] = {TL_F32, TL_F16, TL_BF16};
    for (int d = 0; d < 3; d++) {
        run_vadd(dts[d], 10000, 1, 0, 0, 5);
        run_vadd(dts[d], 10001, 0, 3, 5, 6);
        run_vadd(dts[d], 777, 7, 7, 7, 7);
    }
}

/* Every dtype on [-3, 5); the 8-bit floats also over their whole finite
 * range and near zero (their subnormals), where the device's integer
 * conversions (tl_to_f8e4m3, tl_to_f8e5m2) must round as the host's do. */
static void test_random_device_matches_host(void **state)
{
    (void)state;
    NEED_GPU();
    const struct {
        tl_dtype dt;
        double lo, hi;
    } cases[] = {
        {TL_F32, -3, 5},          {TL_F16, -3, 5},          {TL_BF16, -3, 5},        {TL_I32, -3, 5},
        {TL_F64, -3, 5},          {TL_F8E4M3, -3, 5},       {TL_F8E5M2, -3, 5},      {TL_F8E4M3, -448, 448},
        {TL_F8E5M2, -57344, 57344}, {TL_F8E4M3, -0x1p-5, 0x1p-5}, {TL_F8E5M2, -0x1p-13, 0x1p-13},
    };
    int64_t n = 100003;
    for (size_t d = 0; d < sizeof cases / sizeof cases[0]; d++) {
        size_t bytes = (size_t)n * tl_dtype_size(cases[d].dt);
        uint64_t p = dalloc(bytes);
        assert_status(tl_random_fill(ctx, p, cases[d].dt, n, 99, cases[d].lo, cases[d].hi, NULL), TL_OK);
        void *dev = malloc(bytes), *host = malloc(bytes);
        assert_status(tl_memcpy_dtoh(ctx, dev, p, bytes), TL_OK);
        assert_status(tl_random_host(host, cases[d].dt, n, 99, cases[d].lo, cases[d].hi), TL_OK);
        if (memcmp(dev, host, bytes) != 0)
            fail_msg("device and host random %s on [%g, %g) differ", tl_dtype_name(cases[d].dt), cases[d].lo,
                     cases[d].hi);
        free(dev), free(host);
        tl_free(ctx, p);
    }
}

/* A reference through the user-callback path: c = a + b on host copies. */
static tl_status vadd_ref(void *user, int nargs, const tl_arg *args)
{
    (void)user;
    assert_int_equal(nargs, 4);
    int64_t n = args[0].v.i;
    const float *a = args[1].v.hptr, *b = args[2].v.hptr;
    float *c = args[3].v.hptr;
    for (int64_t i = 0; i < n; i++)
        c[i] = a[i] + b[i];
    return TL_OK;
}

static void test_program_check_vadd(void **state)
{
    (void)state;
    NEED_GPU();
    tl_kernel *k;
    assert_status(tl_op_build(ctx, "vadd", TL_F32, &k), TL_OK);
    tl_program *p;
    assert_status(tl_compile(k, NULL, &p), TL_OK);
    tl_kernel_destroy(k); /* the program outlives its kernel */
    int64_t n = 123457;
    uint64_t a = dalloc(4 * (size_t)n), b = dalloc(4 * (size_t)n), c = dalloc(4 * (size_t)n);
    tl_random_fill(ctx, a, TL_F32, n, 1, -1, 1, NULL);
    tl_random_fill(ctx, b, TL_F32, n, 2, -1, 1, NULL);
    tl_memset_u8(ctx, c, 0xFF, 4 * (size_t)n, NULL);
    tl_arg args[] = {tl_arg_int(n), tl_arg_dptr(a), tl_arg_dptr(b), tl_arg_dptr(c)};
    tl_check_result r;
    assert_status(tl_program_check(p, NULL, 4, args, NULL, NULL, 1e-6, &r), TL_OK);
    assert_true(r.pass);
    assert_true(r.rel_err == 0.0);
    assert_status(tl_program_check(p, NULL, 4, args, vadd_ref, NULL, 1e-6, &r), TL_OK);
    assert_true(r.pass);
    /* wrong argument count and kinds are errors, not crashes */
    assert_status(tl_launch(p, NULL, 3, args), TL_ERR_LAUNCH_ARGS);
    tl_arg bad[] = {tl_arg_float(1.0), tl_arg_dptr(a), tl_arg_dptr(b), tl_arg_dptr(c)};
    assert_status(tl_launch(p, NULL, 4, bad), TL_ERR_LAUNCH_ARGS);
    /* n = 0 launches nothing */
    tl_arg none[] = {tl_arg_int(0), tl_arg_dptr(a), tl_arg_dptr(b), tl_arg_dptr(c)};
    assert_status(tl_launch(p, NULL, 4, none), TL_OK);
    tl_timing t;
    tl_timing_options topt = {.warmup = 2, .reps = 5};
    assert_status(tl_time_launch(p, NULL, 4, args, &topt, &t), TL_OK);
    assert_true(t.median_ms > 0 && t.min_ms <= t.median_ms && t.median_ms <= t.max_ms);
    tl_program_destroy(p);
    tl_free(ctx, a), tl_free(ctx, b), tl_free(ctx, c);
}

/* Compiles k, fills its tensor arguments with random data (outputs with
 * poison) and checks the device against the interpreter. */
static void check_on_device(tl_kernel *k, int nargs, tl_arg *args, const size_t *bytes, const tl_dtype *dts,
                            double tol)
{
    assert_status(tl_kernel_status(k), TL_OK);
    tl_program *p;
    tl_status st = tl_compile(k, NULL, &p);
    if (st != TL_OK)
        fail_msg("%s: %s", tl_status_name(st), tl_ctx_error(ctx));
    for (int i = 0; i < nargs; i++) {
        if (!bytes[i])
            continue;
        args[i] = tl_arg_dptr(dalloc(bytes[i]));
        if (dts[i] == TL_DTYPE_INVALID)
            tl_memset_u8(ctx, args[i].v.dptr, 0xFF, bytes[i], NULL);
        else
            tl_random_fill(ctx, args[i].v.dptr, dts[i], (int64_t)(bytes[i] / tl_dtype_size(dts[i])), 17 + (uint64_t)i,
                           -2, 2, NULL);
    }
    tl_check_result r;
    st = tl_program_check(p, NULL, nargs, args, NULL, NULL, tol, &r);
    if (st != TL_OK)
        fail_msg("%s: %s", tl_status_name(st), tl_ctx_error(ctx));
    if (!r.pass)
        fail_msg("rel %g max abs %g first bad %lld nonfinite %lld", r.rel_err, r.max_abs_err, (long long)r.first_bad,
                 (long long)r.nonfinite);
    for (int i = 0; i < nargs; i++)
        if (bytes[i])
            tl_free(ctx, args[i].v.dptr);
    tl_program_destroy(p);
}

static void test_zoo_against_interpreter(void **state)
{
    (void)state;
    NEED_GPU();
    const int64_t shapes[][3] = {{13, 100, 131}, {64, 256, 256}, {1, 3, 3}};
    for (int s = 0; s < 3; s++) {
        int64_t M = shapes[s][0], N = shapes[s][1], ld = shapes[s][2];
        tl_arg args[] = {tl_arg_int(M), tl_arg_int(N), tl_arg_int(ld), tl_arg_float(0.75), {0}, {0}};
        size_t bytes[] = {0, 0, 0, 0, 4 * (size_t)(M * ld), 2 * (size_t)(M * N)};
        tl_dtype dts[] = {0, 0, 0, 0, TL_F32, TL_DTYPE_INVALID};
        tl_kernel *k = zoo_axpby_2d(ctx);
        check_on_device(k, 6, args, bytes, dts, 1e-2);
        tl_kernel_destroy(k);
    }
    {
        int64_t M = 37, N = 1001;
        tl_arg args[] = {tl_arg_int(M), tl_arg_int(N), {0}, {0}};
        size_t bytes[] = {0, 0, 4 * (size_t)(M * N), 4 * (size_t)M};
        tl_dtype dts[] = {0, 0, TL_F32, TL_DTYPE_INVALID};
        tl_kernel *k = zoo_rowsum(ctx);
        check_on_device(k, 4, args, bytes, dts, 1e-5);
        tl_kernel_destroy(k);
    }
    {
        int64_t n = 5003;
        tl_arg args[] = {tl_arg_int(n), {0}, {0}, {0}, {0}};
        size_t bytes[] = {0, 2 * (size_t)n, 4 * (size_t)n, 2 * (size_t)n, 4 * (size_t)n};
        tl_dtype dts[] = {0, TL_F16, TL_DTYPE_INVALID, TL_DTYPE_INVALID, TL_DTYPE_INVALID};
        tl_kernel *k = zoo_mixed(ctx);
        check_on_device(k, 5, args, bytes, dts, 2e-3);
        tl_kernel_destroy(k);
    }
    {
        int64_t R = 6, B = 40;
        tl_arg args[] = {tl_arg_int(R), tl_arg_int(B), {0}, {0}};
        size_t bytes[] = {0, 0, 4 * 256 * (size_t)B, 4 * 256 * (size_t)B};
        tl_dtype dts[] = {0, 0, TL_F32, TL_DTYPE_INVALID};
        tl_kernel *k = zoo_smooth(ctx);
        check_on_device(k, 4, args, bytes, dts, 1e-5);
        tl_kernel_destroy(k);
    }
    {
        /* the approximate math against the exact interpreter */
        int64_t n = 3001;
        tl_arg args[] = {tl_arg_int(n), {0}, {0}};
        size_t bytes[] = {0, 4 * (size_t)n, 4 * (size_t)n};
        tl_dtype dts[] = {0, TL_F32, TL_DTYPE_INVALID};
        tl_kernel *k = zoo_fastmath(ctx);
        check_on_device(k, 3, args, bytes, dts, 1e-3);
        tl_kernel_destroy(k);
    }
    { /* integers and f64 to bf16 / f8 at ties, exactly as the interpreter rounds them (once) */
        int64_t n = 1000;
        tl_arg args[] = {tl_arg_int(n), {0}, {0}, {0}};
        size_t bytes[] = {0, 2 * (size_t)n, 2 * (size_t)n, (size_t)n};
        tl_dtype dts[] = {0, TL_DTYPE_INVALID, TL_DTYPE_INVALID, TL_DTYPE_INVALID};
        tl_kernel *k = zoo_round_once(ctx);
        check_on_device(k, 4, args, bytes, dts, 0);
        tl_kernel_destroy(k);
    }
    const int64_t staged[] = {1000, 1001, 1}; /* cp.async and element-wise paths */
    for (int s = 0; s < 3; s++) {
        tl_arg args[] = {tl_arg_int(staged[s]), {0}, {0}};
        size_t bytes[] = {0, 4 * (size_t)staged[s], 4 * (size_t)staged[s]};
        tl_dtype dts[] = {0, TL_F32, TL_DTYPE_INVALID};
        tl_kernel *k = zoo_staged(ctx);
        check_on_device(k, 3, args, bytes, dts, 0);
        tl_kernel_destroy(k);
    }
    const tl_dtype sdt[] = {TL_F32, TL_BF16};
    for (int d = 0; d < 2; d++) {
        int64_t n = 4099;
        size_t sz = tl_dtype_size(sdt[d]);
        tl_arg args[] = {tl_arg_int(n), {0}, {0}};
        size_t bytes[] = {0, sz * (size_t)n, sz * (size_t)n};
        tl_dtype dts[] = {0, sdt[d], TL_DTYPE_INVALID};
        tl_kernel *k = zoo_shift(ctx, sdt[d]);
        check_on_device(k, 3, args, bytes, dts, 1e-6);
        tl_kernel_destroy(k);
    }
    const int64_t sums[][3] = {{4, 256, 128}, {2, 4096, 256}}; /* reducers: holders in a warp, across warps */
    for (int s = 0; s < 2; s++)
        for (int red = 0; red < 2; red++) {
            int64_t T = 3, R = sums[s][0], C = sums[s][1];
            tl_arg args[] = {tl_arg_int(T), {0}, {0}, {0}};
            size_t bytes[] = {0, 4 * (size_t)(T * R * C), 4 * (size_t)(T * R), 4 * (size_t)R};
            tl_dtype dts[] = {0, TL_F32, TL_F32, TL_DTYPE_INVALID};
            tl_kernel *k = zoo_running_sum(ctx, red, R, C, (int)sums[s][2]);
            check_on_device(k, 4, args, bytes, dts, 1e-4);
            tl_kernel_destroy(k);
        }
    for (int64_t n = 64; n <= 192; n += 128) { /* operand tiles written by plain stores, read by the tensor cores */
        tl_arg args[] = {tl_arg_int(n), {0}, {0}};
        size_t bytes[] = {0, 2 * 64 * (size_t)n, 4 * 64 * (size_t)n};
        tl_dtype dts[] = {0, TL_BF16, TL_DTYPE_INVALID};
        tl_kernel *k = zoo_written_operand(ctx);
        check_on_device(k, 3, args, bytes, dts, 1e-5);
        tl_kernel_destroy(k);
    }
}

static void test_cache_across_contexts(void **state)
{
    (void)state;
    NEED_GPU();
    char dir[] = "/tmp/tilec-gpu-cache-XXXXXX";
    assert_non_null(mkdtemp(dir));
    tl_ctx_options o = tl_ctx_default_options();
    o.cache_dir = dir;
    int from[2];
    for (int round = 0; round < 2; round++) {
        tl_ctx *c2;
        assert_status(tl_ctx_create(&o, &c2, NULL, 0), TL_OK);
        const tl_program *p;
        tl_vadd_desc d = {.dtype = TL_BF16, .n = 10};
        assert_status(tl_op_vadd_program(c2, &d, &p), TL_OK);
        tl_program_info info;
        tl_program_get_info(p, &info);
        assert_int_equal(info.loaded, 1);
        assert_true(info.regs > 0);
        from[round] = info.from_cache;
        tl_cache_stats cs;
        assert_status(tl_cache_get_stats(c2, &cs), TL_OK);
        assert_true(cs.disk_entries >= 1);
        if (round == 1)
            assert_status(tl_cache_clear(c2), TL_OK);
        tl_ctx_destroy(c2);
    }
    assert_int_equal(from[0], 0); /* compiled */
    assert_int_equal(from[1], 2); /* from disk in the second context */
    rmdir(dir);
}

static void test_device_info(void **state)
{
    (void)state;
    NEED_GPU();
    tl_device_info info;
    assert_status(tl_ctx_get_device_info(ctx, &info), TL_OK);
    assert_true(info.sm_count > 0 && info.l2_bytes > 0 && info.smem_per_block_optin >= info.smem_per_block);
    assert_true(strlen(info.name) > 0 && info.nvrtc_major >= 12);
    printf("  device: %s, sm_%d%d, %d SMs, target %s\n", info.name, info.cc_major, info.cc_minor, info.sm_count,
           info.target);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_info),
        cmocka_unit_test(test_vadd_sizes_and_dtypes),
        cmocka_unit_test(test_vadd_misaligned),
        cmocka_unit_test(test_random_device_matches_host),
        cmocka_unit_test(test_program_check_vadd),
        cmocka_unit_test(test_zoo_against_interpreter),
        cmocka_unit_test(test_cache_across_contexts),
    };
    return cmocka_run_group_tests_name("gpu", tests, gpu_setup, ctx_teardown);
}
