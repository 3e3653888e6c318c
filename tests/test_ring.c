/* test_ring.c - the ring of bulk copies (pass_pipeline.c, schedule_ring)
 * without a GPU: which tl_pipelined loops get it on sm_90a and which keep
 * cp.async (sm_80, tiles of several swizzled rows, a loop inside a loop),
 * which take plain copies (rows not of whole 16 bytes), what a launch
 * then needs of its tensors and the safe variant it falls back to. The
 * GPU tier runs the same kernels against the interpreter (test_gpu.c). */
#include "fixture.h"

#include "kernels.h"
#include "program.h"

enum variant { ALONE, NESTED, WRITES, BATCHED };

/* A kernel of one ring: Y[r, :] = 2 X[r, :] through slots [R, C] of `dt`,
 * a tl_pipelined loop over column tiles; inside a tl_serial loop (NESTED),
 * writing 2 X back into the slot first (WRITES), or with X of three
 * dimensions, [B, M, N], block y taking its first (BATCHED: a tile of
 * X[y], rows past M or a batch past B give a slot of zeros). */
static tl_kernel *ring_kernel(int64_t R, int64_t C, tl_dtype dt, enum variant how)
{
    bool nested = how == NESTED;
    tl_kernel *k = tl_kernel_new(ctx, "scale");
    tl_expr M = tl_dim(k, "M"), N = tl_dim(k, "N");
    tl_buf X = how == BATCHED ? tl_param_tensor(k, "X", dt, 3, (tl_expr[]){tl_dim(k, "B"), M, N}, NULL)
                              : tl_param_tensor(k, "X", dt, 2, (tl_expr[]){M, N}, NULL);
    tl_buf Y = tl_param_tensor(k, "Y", dt, 2, (tl_expr[]){M, N}, NULL);
    tl_grid(k, tl_ceildiv(k, M, tl_int(k, R)), how == BATCHED ? tl_int(k, 2) : TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_expr b = tl_block_idx(k, 0);
    tl_buf S = tl_alloc_shared(k, dt, 2, (int64_t[]){R, C});
    if (nested)
        tl_serial(k, tl_int(k, 2));
    tl_expr c = tl_pipelined(k, tl_ceildiv(k, N, tl_int(k, C)), 3);
    if (how == BATCHED)
        tl_copy(k, tl_tile_n(k, X, (tl_expr[]){tl_block_idx(k, 1), b, c}, 3), tl_all(S));
    else
        tl_copy(k, tl_tile(k, X, b, c), tl_all(S));
    tl_expr v[2];
    if (how == WRITES) {
        tl_parallel(k, 2, (int64_t[]){R, C}, v);
        tl_store(k, S, v, tl_cast(k, tl_mul(k, tl_cast(k, tl_load(k, S, v), TL_F32), tl_f32(k, 2.0f)), dt));
        tl_end(k);
    }
    tl_parallel(k, 2, (int64_t[]){R, C}, v);
    tl_expr at[2] = {tl_add(k, tl_mul(k, b, tl_int(k, R)), v[0]), tl_add(k, tl_mul(k, c, tl_int(k, C)), v[1])};
    tl_expr x = tl_cast(k, tl_load(k, S, v), TL_F32);
    tl_store(k, Y, at, tl_cast(k, how == WRITES ? x : tl_mul(k, x, tl_f32(k, 2.0f)), dt));
    tl_end(k);
    tl_end(k);
    if (nested)
        tl_end(k);
    assert_status(tl_kernel_status(k), TL_OK);
    return k;
}

enum engine { BULK, CP_ASYNC, PLAIN };

/* k's source for target has the copies of engine e and none of the others. */
static void expect_engine(tl_kernel *k, const char *target, enum engine e, const char *what)
{
    static const char *const marks[] = {"tl_bulk_rows<", "tl_cp_async16(", "element by element"};
    char *src;
    assert_status(tl_kernel_source(k, target, &src), TL_OK);
    for (int i = 0; i < 3; i++)
        if ((strstr(src, marks[i]) != NULL) != (i == (int)e))
            fail_msg("%s on %s: %s %s", what, target, marks[i], i == (int)e ? "missing" : "present");
    /* the ring's mbarriers and nothing of cp.async's groups, or the reverse */
    if ((strstr(src, "tl_mbar_wait(&tl_full") != NULL) != (e == BULK))
        fail_msg("%s on %s: the ring's mbarriers %s", what, target, e == BULK ? "missing" : "present");
    tl_free_host(src);
    tl_program *p;
    if (tl_compile(k, &(tl_compile_options){.target = target}, &p) != TL_OK)
        fail_msg("%s on %s: %s", what, target, tl_ctx_error(ctx));
    tl_program_destroy(p);
}

/* sm_90a: bulk copies where each slot row is one run of whole 16 bytes in
 * shared memory: a one-row tile (its swizzle leaves row 0 alone), or rows
 * whose chunk count is no power of two (no swizzle). cp.async for a tile
 * of swizzled rows, for any loop on sm_80, for a ring inside another loop
 * (its mbarriers would be initialised again while threads wait on them)
 * and for consumers that write a slot; plain copies for rows of 24
 * bytes. */
static void test_which_loops(void **state)
{
    (void)state;
    const struct {
        int64_t R, C;
        tl_dtype dt;
        enum variant how;
        enum engine sm90, sm80;
        const char *what;
    } cases[] = {
        {1, 4096, TL_F16, ALONE, BULK, CP_ASYNC, "one row of 8 KiB"},
        {4, 24, TL_F32, ALONE, BULK, CP_ASYNC, "4 rows of 6 chunks"},
        {2, 40, TL_BF16, ALONE, BULK, CP_ASYNC, "2 rows of 5 chunks"},
        {8, 64, TL_F16, ALONE, CP_ASYNC, CP_ASYNC, "8 swizzled rows"},
        {1, 4096, TL_F16, NESTED, CP_ASYNC, CP_ASYNC, "a ring inside a serial loop"},
        {1, 4096, TL_F16, WRITES, CP_ASYNC, CP_ASYNC, "consumers that write the slot"},
        {4, 6, TL_F32, ALONE, PLAIN, PLAIN, "rows of 24 bytes"},
        {2, 40, TL_F16, BATCHED, BULK, CP_ASYNC, "a tile of a 3-D tensor"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tl_kernel *k = ring_kernel(cases[i].R, cases[i].C, cases[i].dt, cases[i].how);
        expect_engine(k, "sm_90a", cases[i].sm90, cases[i].what);
        expect_engine(k, "sm_80", cases[i].sm80, cases[i].what);
        tl_kernel_destroy(k);
    }
    tl_kernel *k = ring_kernel(2, 40, TL_F16, BATCHED);
    char *src;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    const char *batched[] = {"tl_rows = tl_in(tl_o0, tl_X_d0) ? tl_extent(tl_o1, tl_X_d1, 2) : 0;",
                             "tl_cols = tl_extent(tl_o2, tl_X_d2, 40);", "tl_bulk_rows<tl_f16, 2, 40>("};
    test_expect_text(src, "a tile of a 3-D tensor", batched, TEST_COUNT(batched), NULL, 0);
    tl_free_host(src);
    tl_kernel_destroy(k);
    k = zoo_ring(ctx); /* two rings in one kernel: mbarriers of their own */
    expect_engine(k, "sm_90a", BULK, "two rings");
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    const char *has[] = {"tl_bulk_rows<float, 4, 24>(", "tl_full3", "tl_full6", "tl_extent(tl_o0, tl_X_d0, 4)"};
    test_expect_text(src, "two rings", has, TEST_COUNT(has), NULL, 0);
    tl_free_host(src);
    tl_kernel_destroy(k);
}

/* What the schedule is made of: the refill by warp 0 ahead of the full
 * wait, the release right after the slot's last reader, no block barrier
 * for the ring and no 64-bit slot arithmetic in the loop; the launch needs
 * X's rows of whole 16 bytes. */
static void test_ring_shape(void **state)
{
    (void)state;
    tl_kernel *k = ring_kernel(1, 4096, TL_F16, ALONE);
    char *text;
    assert_status(tl_kernel_lower_dump(k, "sm_90a", "launch", &text), TL_OK);
    const char *has[] = {"X needs 16-byte rows", "[bulk on tl_full", "by 32 threads, pipelined]",
                         "mbarrier.init tl_full1, 32 arrivals", "mbarrier.init tl_empty1, 128 arrivals"};
    const char *lacks[] = {"cp.async16", "cp.async.wait", "cp.async.commit"};
    test_expect_text(text, "the dump", has, TEST_COUNT(has), lacks, TEST_COUNT(lacks));
    const char *loop = strstr(text, "// tl_pipelined");
    assert_non_null(loop);
    const char *refill = strstr(loop, "if and(eq(warp, 0i32)");
    const char *full = strstr(loop, "mbarrier.wait tl_full1");
    const char *read = strstr(loop, "f32(tl_smem");
    const char *release = strstr(loop, "mbarrier.arrive tl_empty1");
    assert_true(refill && full && read && release && refill < full && full < read && read < release);
    /* one block barrier, the sync pass's at the loop's end (every iteration writes Y: a hazard between
     * buffers, not elements), none for the ring */
    const char *bar = strstr(loop, ": barrier");
    assert_true(bar && bar > release && !strstr(bar + 1, ": barrier"));
    tl_free_host(text);
    char *src;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    loop = strstr(src, "// tl_pipelined");
    assert_non_null(loop);
    const char *lacks_src[] = {"% 3LL", "tl_cp_async"};
    test_expect_text(loop, "the loop", NULL, 0, lacks_src, TEST_COUNT(lacks_src));
    tl_free_host(src);
    tl_kernel_destroy(k);
}

/* A launch whose X misses what the bulk copies need (rows of whole 16
 * bytes, a 16-byte aligned base) takes the safe variant, which copies
 * element by element; one that has it does not (here it then fails for
 * want of a device). */
static void test_launch_fallback(void **state)
{
    (void)state;
    tl_kernel *k = zoo_ring(ctx);
    tl_program *p;
    assert_status(tl_compile(k, &(tl_compile_options){.target = "sm_90a"}, &p), TL_OK);
    assert_non_null(strstr(tl_program_source(p), "tl_bulk_rows<"));
    const struct {
        int64_t n;
        uint64_t x;
        bool safe;
    } launches[] = {{52, 0x10000, false}, {48, 0x20000, false}, {53, 0x10000, true}, {52, 0x10004, true}};
    for (size_t i = 0; i < sizeof launches / sizeof launches[0]; i++) {
        tl_arg args[] = {tl_arg_int(21), tl_arg_int(launches[i].n), tl_arg_dptr(launches[i].x),
                         tl_arg_dptr(0x40000)};
        assert_status(tl_launch(p, NULL, 4, args), TL_ERR_NO_DEVICE);
        if ((p->safe_variant != NULL) != launches[i].safe)
            fail_msg("launch %zu: N = %lld, X = 0x%llx: the safe variant %s", i, (long long)launches[i].n,
                     (unsigned long long)launches[i].x, launches[i].safe ? "not taken" : "taken");
        if (launches[i].safe) {
            const char *src = tl_program_source(p->safe_variant);
            assert_null(strstr(src, "tl_bulk_rows<"));
            assert_null(strstr(src, "tl_mbar"));
            assert_non_null(strstr(src, "element by element"));
            tl_program_destroy(p);
            assert_status(tl_compile(k, &(tl_compile_options){.target = "sm_90a"}, &p), TL_OK);
        }
    }
    tl_program_destroy(p);
    tl_kernel_destroy(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_which_loops),
        cmocka_unit_test(test_ring_shape),
        cmocka_unit_test(test_launch_fallback),
    };
    return cmocka_run_group_tests(tests, offline_setup, ctx_teardown);
}
