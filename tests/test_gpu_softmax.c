/* test_gpu_softmax.c - the GPU tier of the row-wise ops: tl_op_softmax and
 * tl_op_rmsnorm on the device against float64 references computed on the
 * host from the same inputs, at ragged shapes (a single column, odd
 * columns, widths just past a power of two, rows longer than the one-pass
 * width), strided and misaligned rows, every dtype pair, explicit
 * schedules, rows of -inf and values whose naive exp overflows. Outputs
 * are poisoned before every run; the padding of each row and the elements
 * after the output must stay poisoned. Every test skips, saying why, where
 * there is no GPU; TILEC_TEST_SMALL=1 keeps sizes small. */
#include "fixture.h"

#include "precompile.h"
#include "rows_ref.h"

#define PAD 64 /* poisoned elements after Y */

static uint64_t upload(const void *host, size_t bytes)
{
    uint64_t p = 0;
    assert_status(tl_malloc(ctx, bytes ? bytes : 1, &p), TL_OK);
    if (bytes)
        assert_status(tl_memcpy_htod(ctx, p, host, bytes), TL_OK);
    return p;
}

/* Runs softmax (w NULL) or RMSNorm of case c on the device with x's rows
 * starting `off` elements into their buffer, and checks y; while planning,
 * only builds the kernel it would launch. */
static void run_case(const row_case *c, const void *x, const void *w, int off)
{
    size_t isz = tl_dtype_size(c->in), osz = tl_dtype_size(c->out);
    tl_rmsnorm_desc rd = {.rows = c->rows, .cols = c->cols, .ld_in = c->ld_in, .ld_out = c->ld_out,
                          .in_dtype = c->in, .out_dtype = c->out, .eps = 1e-5, .schedule = c->sched};
    tl_softmax_desc sd = {.rows = c->rows, .cols = c->cols, .ld_in = c->ld_in, .ld_out = c->ld_out,
                          .in_dtype = c->in, .out_dtype = c->out, .schedule = c->sched};
    if (plan.planning) {
        tl_kernel *k = NULL;
        if ((w ? tl_op_rmsnorm_build(ctx, &rd, &k) : tl_op_softmax_build(ctx, &sd, &k)) == TL_OK)
            precompile_add(k, off || (c->ld_in * (int64_t)isz) % 16 || (c->ld_out * (int64_t)osz) % 16);
        return;
    }
    size_t xbytes = isz * (size_t)(c->rows * c->ld_in), ybytes = osz * (size_t)(c->rows * c->ld_out + PAD);
    unsigned char *xbuf = malloc(xbytes + isz * (size_t)off + 1);
    memcpy(xbuf + isz * (size_t)off, x, xbytes);
    uint64_t dx = upload(xbuf, xbytes + isz * (size_t)off), dw = w ? upload(w, isz * (size_t)c->cols) : 0;
    void *y = row_alloc_poisoned(c->rows * c->ld_out + PAD + off, 1, c->out);
    uint64_t dybuf = upload(y, ybytes + osz * (size_t)off), dy = dybuf + osz * (size_t)off;
    double *ref;
    if (w) {
        assert_status(tl_op_rmsnorm(ctx, &rd, dx + isz * (size_t)off, dw, dy, NULL), TL_OK);
        ref = row_rmsnorm_ref(c, x, w, 1e-5);
    } else {
        assert_status(tl_op_softmax(ctx, &sd, dx + isz * (size_t)off, dy, NULL), TL_OK);
        ref = row_softmax_ref(c, x);
    }
    assert_status(tl_synchronize(ctx), TL_OK);
    assert_status(tl_memcpy_dtoh(ctx, y, dy, ybytes), TL_OK);
    row_compare(c, w ? "rmsnorm (GPU)" : "softmax (GPU)", y, ref);
    const unsigned char *after = (const unsigned char *)y + osz * (size_t)(c->rows * c->ld_out);
    for (size_t b = 0; b < osz * PAD; b++)
        if (after[b] != 0xFF)
            fail_msg("%s %lldx%lld wrote past its output", w ? "rmsnorm" : "softmax", (long long)c->rows,
                     (long long)c->cols);
    free(ref), free(y), free(xbuf);
    tl_free(ctx, dx), tl_free(ctx, dw), tl_free(ctx, dybuf);
}

/* Both ops on random rows in [lo, hi). */
static void run_both(const row_case *c, uint64_t seed, double lo, double hi, int off)
{
    if (plan.planning) { /* no data needed */
        run_case(c, NULL, NULL, off);
        run_case(c, NULL, "", off);
        return;
    }
    void *x = row_alloc_random(c->rows, c->ld_in, c->in, seed, lo, hi);
    void *w = row_alloc_random(1, c->cols, c->in, seed + 1, 0.5, 1.5);
    run_case(c, x, NULL, off);
    run_case(c, x, w, off);
    free(x), free(w);
}

static void test_shapes_and_dtypes(void **state)
{
    (void)state;
    NEED_GPU();
    const int64_t shapes[][2] = {{1, 1},     {7, 1},     {3, 7},      {37, 100},  {129, 1000}, {64, 1024},
                                 {33, 1025}, {9, 2047},  {7, 4097},   {5, 8192},  {3, 16385}, {3, 32768},
                                 {2, 40000}, {1000, 333}, {4099, 128}};
    const tl_dtype pairs[][2] = {{TL_F16, TL_F16}, {TL_BF16, TL_BF16}, {TL_F32, TL_F32}, {TL_F16, TL_F32},
                                 {TL_F32, TL_BF16}};
    size_t nshapes = small ? 8 : sizeof shapes / sizeof shapes[0];
    uint64_t seed = 10;
    for (size_t s = 0; s < nshapes; s++)
        for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
            row_case c = row_case_make(shapes[s][0], shapes[s][1], pairs[p][0], pairs[p][1]);
            run_both(&c, seed, -6, 6, 0);
            seed += 2;
        }
}

/* Rows that do not start 16-byte aligned: odd strides, odd offsets. */
static void test_strided_and_misaligned(void **state)
{
    (void)state;
    NEED_GPU();
    const int64_t cols[] = {100, 1024, 3000};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
        row_case c = row_case_make(21, cols[i], TL_F16, TL_F16);
        c.ld_in = cols[i] + 3, c.ld_out = cols[i] + 1;
        run_both(&c, 200 + i, -4, 4, 0);
        c.ld_in = c.ld_out = cols[i] + 8; /* aligned rows at a misaligned start */
        run_both(&c, 210 + i, -4, 4, 1);
    }
}

static void test_explicit_schedules(void **state)
{
    (void)state;
    NEED_GPU();
    const tl_softmax_schedule sched[] = {
        {.width = 64, .rows = 4, .threads = 64},    {.width = 256, .rows = 1, .threads = 32},
        {.width = 2048, .rows = 2, .threads = 128}, {.width = 1024, .rows = 4, .threads = 512},
        {.width = 64, .rows = 4, .threads = 64, .stages = 3},
        {.width = 2048, .rows = 2, .threads = 128, .stages = 2},
        {.width = 1024, .rows = 8, .threads = 256, .stages = 4},
    };
    const int64_t cols[] = {50, 64, 300, 2048, 5000};
    for (size_t s = 0; s < sizeof sched / sizeof sched[0]; s++)
        for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
            row_case c = row_case_make(13, cols[i], TL_BF16, TL_F32);
            c.sched = sched[s];
            run_both(&c, 300 + 10 * s + i, -8, 8, 0);
        }
}

typedef struct sched_case {
    int64_t rows, cols;
    tl_softmax_schedule s;
} sched_case;

/* Each case f16 -> f16 with contiguous rows, with strides that make the
 * rows miss 16 bytes (the safe variant), and aligned rows at a misaligned
 * start (safe too); seeds from `seed` on. */
static void run_sched_cases(const sched_case *cases, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        row_case c = row_case_make(cases[i].rows, cases[i].cols, TL_F16, TL_F16);
        c.sched = cases[i].s;
        run_both(&c, seed + i, -6, 6, 0);
        c.ld_in = c.cols + 3, c.ld_out = c.cols + 1;
        run_both(&c, seed + 10 + i, -6, 6, 0);
        c.ld_in = c.ld_out = c.cols + 8;
        run_both(&c, seed + 20 + i, -6, 6, 1);
    }
}

/* Rings of shared tiles (rows.c): blocks that take many tiles (rows well
 * past one wave), the widest rows, a row past the ring's last full tile;
 * rows that are not whole 16-byte chunks, or strides or starts that are
 * not aligned, run the safe variant (plain copies into the slots). */
static void test_ring_schedules(void **state)
{
    (void)state;
    NEED_GPU();
    const sched_case cases[] = {
        {small ? 300 : 5000, 1024, {.width = 1024, .rows = 8, .threads = 256, .stages = 3}},
        {small ? 200 : 3001, 2000, {.width = 2048, .rows = 4, .threads = 256, .stages = 2}},
        {small ? 40 : 700, 4096, {.width = 4096, .rows = 1, .threads = 512, .stages = 4}},
        {small ? 9 : 300, 32768, {.width = 32768, .rows = 1, .threads = 1024, .stages = 3}},
        {small ? 9 : 300, 30000, {.width = 32768, .rows = 1, .threads = 1024, .stages = 2}},
    };
    run_sched_cases(cases, sizeof cases / sizeof cases[0], 500);
    row_case c = row_case_make(small ? 50 : 999, 777, TL_BF16, TL_F32); /* rows of 1554 bytes: safe */
    c.sched = (tl_softmax_schedule){.width = 1024, .rows = 4, .threads = 128, .stages = 3};
    run_both(&c, 530, -6, 6, 0);
}

/* Rings filled by a producer warpgroup (schedule.loader 2) in persistent
 * CTAs that take their tiles from a counter: many tiles a CTA, several
 * rows a tile, the widest rows (the default there), fewer tiles than
 * CTAs, a row past the ring's last full tile; the safe variant as above.
 * Launches one after another reuse the counter (each leaves it zero). */
static void test_producer_schedules(void **state)
{
    (void)state;
    NEED_GPU();
    const sched_case cases[] = {
        {small ? 300 : 5000, 1024, {.width = 1024, .rows = 8, .threads = 256, .stages = 3, .loader = 2}},
        {small ? 200 : 3001, 2000, {.width = 2048, .rows = 4, .threads = 256, .stages = 2, .loader = 2}},
        {small ? 40 : 700, 4096, {.width = 4096, .rows = 1, .threads = 512, .stages = 4, .loader = 2}},
        {small ? 9 : 2048, 32768, {0}},
        {small ? 9 : 300, 30000, {.stages = 3, .loader = 2}},
        {3, 32768, {0}},
    };
    run_sched_cases(cases, sizeof cases / sizeof cases[0], 540);
    row_case c = row_case_make(small ? 50 : 999, 777, TL_BF16, TL_F32); /* rows of 1554 bytes: safe */
    c.sched = (tl_softmax_schedule){.width = 1024, .rows = 4, .threads = 128, .stages = 2, .loader = 2};
    run_both(&c, 570, -6, 6, 0);
}

/* Rows split over a cluster of 2 or 4 blocks (sm_90 and later): the
 * partial maxima and sums combined through distributed shared memory,
 * with and without the ring, one and several rows a tile, a row that ends
 * inside the first block's part (the second block's part all padding),
 * ragged and strided rows. */
static void test_cluster_schedules(void **state)
{
    (void)state;
    NEED_GPU();
    tl_device_info dev;
    assert_int_equal(tl_ctx_get_device_info(ctx, &dev), TL_OK);
    if (dev.cc_major < 9) {
        printf("  (no thread-block clusters on sm_%d%d: skipped)\n", dev.cc_major, dev.cc_minor);
        return;
    }
    const sched_case cases[] = {
        {small ? 9 : 300, 32768, {.width = 16384, .rows = 1, .threads = 512, .stages = 3, .cluster = 2}},
        {small ? 9 : 300, 20000, {.width = 16384, .rows = 1, .threads = 512, .stages = 1, .cluster = 2}},
        {small ? 33 : 1000, 5000, {.width = 2048, .rows = 2, .threads = 128, .stages = 3, .cluster = 4}},
        {small ? 17 : 555, 3000, {.width = 2048, .rows = 1, .threads = 64, .stages = 1, .cluster = 4}},
        {small ? 21 : 401, 1500, {.width = 2048, .rows = 1, .threads = 64, .stages = 2, .cluster = 2}},
    };
    run_sched_cases(cases, sizeof cases / sizeof cases[0], 600);
    row_case c = row_case_make(small ? 50 : 999, 7777, TL_BF16, TL_F32);
    c.sched = (tl_softmax_schedule){.width = 4096, .rows = 1, .threads = 128, .cluster = 2};
    run_both(&c, 630, -6, 6, 0);
}

/* -inf rows give zeros, also after whole -inf chunks of the online path;
 * +-1e4 (exp overflows / underflows) is exact, in both paths. */
static void test_special_values(void **state)
{
    (void)state;
    NEED_GPU();
    for (int online = 0; online < 2; online++)
        for (int dt = 0; dt < 2; dt++) {
            row_case c = row_case_make(6, 3000, dt ? TL_F16 : TL_F32, TL_F32);
            if (online)
                c.sched = (tl_softmax_schedule){.width = 1024};
            if (plan.planning) {
                run_case(&c, NULL, NULL, 0);
                continue;
            }
            void *x = row_alloc_random(c.rows, c.ld_in, c.in, 400 + (uint64_t)dt, -3, 3);
            for (int64_t j = 0; j < c.cols; j++) {
                row_put(&c, x, 0, j, -INFINITY);
                row_put(&c, x, 1, j, j < 2100 ? -INFINITY : (double)(j % 13));
                row_put(&c, x, 2, j, 1e4 - (double)(j % 7));
                row_put(&c, x, 3, j, -1e4 + (double)(j % 5));
                if (j % 3 == 0)
                    row_put(&c, x, 4, j, -INFINITY);
            }
            run_case(&c, x, NULL, 0);
            free(x);
        }
}

static void test_pointer_errors(void **state)
{
    (void)state;
    NEED_GPU();
    tl_softmax_desc d = {.rows = 4, .cols = 100, .in_dtype = TL_F16, .out_dtype = TL_F16};
    uint64_t buf = upload(NULL, 0);
    assert_status(tl_op_softmax(ctx, &d, 0, buf, NULL), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "x is a null device pointer"));
    assert_status(tl_op_softmax(ctx, &d, buf, buf + 1, NULL), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "y = 0x"));
    d.rows = 0; /* nothing to do: launches nothing */
    assert_status(tl_op_softmax(ctx, &d, 0, 0, NULL), TL_OK);
    tl_free(ctx, buf);
}

/* Every kernel the tests launch, compiled at once (precompile.h). */
static int softmax_setup(void **state)
{
    gpu_setup(state);
    if (!ctx)
        return 0;
    plan.planning = true;
    void (*const walk[])(void **) = {test_shapes_and_dtypes, test_strided_and_misaligned, test_explicit_schedules,
                                     test_ring_schedules, test_special_values};
    for (size_t i = 0; i < sizeof walk / sizeof walk[0]; i++)
        walk[i](state);
    plan.planning = false;
    precompile_run(ctx, "row op");
    test_plan_only_end();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes_and_dtypes),
        cmocka_unit_test(test_strided_and_misaligned),
        cmocka_unit_test(test_explicit_schedules),
        cmocka_unit_test(test_ring_schedules),
        cmocka_unit_test(test_producer_schedules),
        cmocka_unit_test(test_cluster_schedules),
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_pointer_errors),
    };
    return cmocka_run_group_tests_name("gpu_softmax", tests, softmax_setup, ctx_teardown);
}
