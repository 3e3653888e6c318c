/* test_softmax.c - the row softmax and RMSNorm ops without a GPU: their
 * kernels (tl_op_softmax_build, tl_op_rmsnorm_build) run in the
 * interpreter against float64 references at ragged shapes, strided rows
 * and every dtype, through the one-pass programs and the online path;
 * rows of -inf give zeros, values that would overflow a naive exp do not;
 * the default schedules; descriptor errors name the call. */
#include "fixture.h"

#include "program.h"
#include "rows_ref.h"

/* The blocks-at-once argument a pipelined schedule's program takes last
 * when its block's threads fill the ring (loader 1)
 * (any value is correct: a few, so that blocks take several tiles, the
 * last block fewer). */
static int blocks_arg = 3;

/* Runs the softmax kernel of c in the interpreter on x (c->rows rows of
 * ld_in elements of in_dtype) and compares it with the reference. */
static void check_softmax(const row_case *c, const void *x)
{
    tl_softmax_desc d = {.rows = c->rows, .cols = c->cols, .ld_in = c->ld_in, .ld_out = c->ld_out,
                         .in_dtype = c->in, .out_dtype = c->out, .schedule = c->sched};
    tl_kernel *k;
    assert_status(tl_op_softmax_build(ctx, &d, &k), TL_OK);
    void *y = row_alloc_poisoned(c->rows, c->ld_out, c->out);
    tl_arg args[7] = {tl_arg_int(c->rows), tl_arg_int(c->cols), tl_arg_int(c->ld_in), tl_arg_int(c->ld_out),
                      tl_arg_hptr((void *)x), tl_arg_hptr(y), tl_arg_int(blocks_arg)};
    tl_softmax_schedule s = tl_op_softmax_schedule(ctx, &d);
    int n = s.stages > 1 && s.loader == 1 ? 7 : 6;
    assert_status(tl_interpret(k, n, args), TL_OK);
    double *ref = row_softmax_ref(c, x);
    row_compare(c, "softmax", y, ref);
    free(ref), free(y);
    tl_kernel_destroy(k);
}

static void check_rmsnorm(const row_case *c, const void *x, double eps)
{
    tl_rmsnorm_desc d = {.rows = c->rows, .cols = c->cols, .ld_in = c->ld_in, .ld_out = c->ld_out,
                         .in_dtype = c->in, .out_dtype = c->out, .eps = eps, .schedule = c->sched};
    tl_kernel *k;
    assert_status(tl_op_rmsnorm_build(ctx, &d, &k), TL_OK);
    void *w = row_alloc_random(1, c->cols, c->in, 4242, 0.5, 1.5);
    void *y = row_alloc_poisoned(c->rows, c->ld_out, c->out);
    tl_arg args[9] = {tl_arg_int(c->rows), tl_arg_int(c->cols), tl_arg_int(c->ld_in), tl_arg_int(c->ld_out),
                      tl_arg_hptr((void *)x), tl_arg_hptr(y), tl_arg_hptr(w), tl_arg_float(eps),
                      tl_arg_int(blocks_arg)};
    tl_softmax_schedule s = tl_op_rmsnorm_schedule(ctx, &d);
    int n = s.stages > 1 && s.loader == 1 ? 9 : 8;
    assert_status(tl_interpret(k, n, args), TL_OK);
    double *ref = row_rmsnorm_ref(c, x, w, eps);
    row_compare(c, "rmsnorm", y, ref);
    free(ref), free(y), free(w);
    tl_kernel_destroy(k);
}

/* Random rows in [lo, hi) for case c, checked by the softmax and RMSNorm. */
static void check_both(const row_case *c, uint64_t seed, double lo, double hi)
{
    void *x = row_alloc_random(c->rows, c->ld_in, c->in, seed, lo, hi);
    check_softmax(c, x);
    check_rmsnorm(c, x, 1e-5);
    free(x);
}

/* Default schedules (one pass) at ragged shapes, strided rows, dtypes. */
static void test_one_pass_ragged(void **state)
{
    (void)state;
    const int64_t shapes[][2] = {{1, 1}, {5, 1}, {3, 2}, {7, 5}, {37, 100}, {9, 33}, {4, 1000}, {2, 1024}, {3, 1025}};
    const tl_dtype pairs[][2] = {{TL_F32, TL_F32}, {TL_F16, TL_F16}, {TL_BF16, TL_BF16}, {TL_F16, TL_F32},
                                 {TL_F32, TL_BF16}};
    uint64_t seed = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
            row_case c = row_case_make(shapes[s][0], shapes[s][1], pairs[p][0], pairs[p][1]);
            if (p % 2) /* strided rows: padding that must stay untouched */
                c.ld_in = c.cols + 3, c.ld_out = c.cols + 5;
            check_both(&c, seed++, -6, 6);
        }
}

/* Rows longer than the fragment take the online path: small widths here,
 * so that chunks are many and ragged; a row exactly as wide stays in one
 * pass. */
static void test_online_path(void **state)
{
    (void)state;
    const int64_t cols[] = {64, 65, 129, 200, 1000};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
        row_case c = row_case_make(11, cols[i], TL_F32, TL_F32);
        c.sched = (tl_softmax_schedule){.width = 64, .rows = 4, .threads = 64};
        check_both(&c, 50 + i, -10, 10);
        c = row_case_make(11, cols[i], TL_BF16, TL_F16);
        c.sched = (tl_softmax_schedule){.width = 64, .rows = 4, .threads = 64};
        c.ld_in = cols[i] + 1;
        check_both(&c, 60 + i, -10, 10);
    }
}

/* Pipelined schedules (a ring of shared tiles, rows.c): blocks that take
 * several tiles, the last block fewer, a tile past the last row, ragged
 * and strided rows, every dtype pair, and blocks-at-once arguments of 1
 * (one block takes every tile), a few, and more than there are tiles; the
 * online path ignores the stages (no extra argument). */
static void test_ring_schedules(void **state)
{
    (void)state;
    const int64_t shapes[][2] = {{1, 1}, {5, 3}, {11, 50}, {37, 64}, {9, 33}, {23, 17}};
    const tl_dtype pairs[][2] = {{TL_F16, TL_F16}, {TL_BF16, TL_F32}, {TL_F32, TL_F32}, {TL_F32, TL_BF16}};
    const tl_softmax_schedule sched[] = {
        {.width = 64, .rows = 4, .threads = 64, .stages = 2},
        {.width = 64, .rows = 1, .threads = 32, .stages = 3},
        {.width = 128, .rows = 2, .threads = 64, .stages = 4},
    };
    const int blocks[] = {1, 3, 1000};
    uint64_t seed = 400;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
            row_case c = row_case_make(shapes[s][0], shapes[s][1], pairs[p][0], pairs[p][1]);
            c.sched = sched[(s + p) % 3];
            if (p % 2)
                c.ld_in = c.cols + 5, c.ld_out = c.cols + 2;
            blocks_arg = blocks[(s + 2 * p) % 3];
            check_both(&c, seed++, -6, 6);
        }
    row_case c = row_case_make(7, 100, TL_F16, TL_F16); /* online: 4 chunks of 32 */
    c.sched = (tl_softmax_schedule){.width = 32, .rows = 2, .threads = 64, .stages = 3};
    tl_softmax_desc d = {.rows = c.rows, .cols = c.cols, .in_dtype = c.in, .out_dtype = c.out, .schedule = c.sched};
    assert_int_equal(tl_op_softmax_schedule(ctx, &d).stages, 1);
    check_both(&c, 450, -6, 6);
    blocks_arg = 3;
}

/* The ring's code: cp.async into the slots, 16-byte ld.shared out of them
 * (pass_threads), the blocks-at-once parameter last, no barrier at the end
 * of the tile loop (its head has the pipeline's); cubins for sm_80 and
 * sm_90a and the safe variants (misaligned rows: plain copies) compile. */
static void test_ring_code_and_cubins(void **state)
{
    (void)state;
    const tl_softmax_schedule sched[] = {
        {.width = 1024, .rows = 8, .threads = 256, .stages = 3},
        {.width = 4096, .rows = 1, .threads = 256, .stages = 3},
        {.width = 32768, .rows = 1, .threads = 1024, .stages = 3},
    };
    const char *targets[] = {"sm_80", "sm_90a"};
    for (size_t s = 0; s < sizeof sched / sizeof sched[0]; s++)
        for (int op = 0; op < 2; op++) {
            tl_kernel *k;
            if (op == 0) {
                tl_softmax_desc d = {.rows = 1, .cols = sched[s].width, .in_dtype = TL_F16, .out_dtype = TL_F16,
                                     .schedule = sched[s]};
                assert_status(tl_op_softmax_build(ctx, &d, &k), TL_OK);
            } else {
                tl_rmsnorm_desc d = {.rows = 1, .cols = sched[s].width, .in_dtype = TL_BF16, .out_dtype = TL_BF16,
                                     .eps = 1e-6, .schedule = sched[s]};
                assert_status(tl_op_rmsnorm_build(ctx, &d, &k), TL_OK);
            }
            char *src;
            assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
            const char *want[] = {"tl_cp_async16(", "tl_ld_vec(tl_L", "long long blocks)", "_ring3_"};
            char what[64];
            snprintf(what, sizeof what, "%s width %d: the source", op ? "rmsnorm" : "softmax", sched[s].width);
            test_expect_text(src, what, want, TEST_COUNT(want), NULL, 0);
            /* the stores are the loop's last statements: no barrier after them */
            const char *end = strstr(src, "tl_cp_async_wait<0>();"), *last_bar = NULL, *last_st = NULL;
            assert_non_null(end);
            for (const char *b = strstr(src, "__syncthreads();"); b && b < end; b = strstr(b + 1, "__syncthreads();"))
                last_bar = b;
            for (const char *b = strstr(src, "tl_st_chunk("); b && b < end; b = strstr(b + 1, "tl_st_chunk("))
                last_st = b;
            assert_true(last_bar && last_st && last_st > last_bar);
            tl_free_host(src);
            for (int t = 0; t < 2; t++) {
                if (t == 0 && sched[s].width == 32768)
                    continue; /* 3 x 64 KiB is over sm_80's 163 KiB */
                tl_program *p;
                if (tl_compile(k, &(tl_compile_options){.target = targets[t]}, &p) != TL_OK)
                    fail_msg("%s width %d %s: %s", op ? "rmsnorm" : "softmax", sched[s].width, targets[t],
                             tl_ctx_error(ctx));
                const tl_program *safe;
                if (tli_program_safe_variant(p, &safe) != TL_OK)
                    fail_msg("%s width %d %s, safe variant: %s", op ? "rmsnorm" : "softmax", sched[s].width,
                             targets[t], tl_ctx_error(ctx));
                tl_program_destroy(p);
            }
            tl_kernel_destroy(k);
        }
}

/* Rings filled by a producer warpgroup (schedule.loader 2): in the
 * interpreter against the references (ragged, strided, several rows a
 * tile, a tile past the last row); the code (the warp specialisation,
 * blocks from the counter, the slot handed back after its one read, no
 * blocks-at-once parameter); cubins for sm_80 and sm_90a and their safe
 * variants; the default's choice; the schedule's errors. */
static void test_producer_schedules(void **state)
{
    (void)state;
    const int64_t shapes[][2] = {{1, 1}, {5, 3}, {11, 50}, {37, 64}, {23, 17}};
    const tl_softmax_schedule sched[] = {
        {.width = 64, .rows = 4, .threads = 128, .stages = 2, .loader = 2},
        {.width = 64, .rows = 8, .threads = 256, .stages = 3, .loader = 2},
        {.width = 128, .rows = 1, .threads = 128, .stages = 4, .loader = 2},
    };
    const tl_dtype pairs[][2] = {{TL_F16, TL_F16}, {TL_BF16, TL_F32}, {TL_F32, TL_F32}};
    uint64_t seed = 800;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t k = 0; k < sizeof sched / sizeof sched[0]; k++) {
            row_case c = row_case_make(shapes[s][0], shapes[s][1], pairs[(s + k) % 3][0], pairs[(s + k) % 3][1]);
            c.sched = sched[k];
            if ((s + k) % 2)
                c.ld_in = c.cols + 3, c.ld_out = c.cols + 1;
            check_both(&c, seed++, -6, 6);
        }
    /* the default for the widest rows, f16: 512 threads beside the producer */
    tl_softmax_desc d = {.rows = 2048, .cols = 32768, .in_dtype = TL_F16, .out_dtype = TL_F16};
    tl_softmax_schedule e = tl_op_softmax_schedule(ctx, &d);
    assert_true(e.stages == 2 && e.loader == 2 && e.threads == 512);
    d.schedule = (tl_softmax_schedule){.threads = 1024}; /* no room: the block's own threads fill it */
    e = tl_op_softmax_schedule(ctx, &d);
    assert_true(e.stages == 2 && e.loader == 1 && e.threads == 1024);
    d.schedule = (tl_softmax_schedule){0};
    d.cols = 16384; /* no ring by default, so no producer */
    assert_int_equal(tl_op_softmax_schedule(ctx, &d).loader, 1);
    for (int op = 0; op < 2; op++) {
        tl_kernel *k;
        if (op == 0) {
            tl_softmax_desc s = {.rows = 1, .cols = 32768, .in_dtype = TL_F16, .out_dtype = TL_F16};
            assert_status(tl_op_softmax_build(ctx, &s, &k), TL_OK);
        } else {
            tl_rmsnorm_desc r = {.rows = 1, .cols = 4000, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .eps = 1e-6,
                                 .schedule = {.width = 4096, .rows = 1, .threads = 256, .stages = 3, .loader = 2}};
            assert_status(tl_op_rmsnorm_build(ctx, &r, &k), TL_OK);
        }
        char *src;
        assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
        const char *want[] = {"a producer warpgroup (cp.async)", "atomicAdd(tl_block_counter + 0, (unsigned)(1LL))",
                              "__syncwarp();\n", "handed back to the producer", "tl_cp_async16("};
        const char *unwanted[] = {"long long blocks"};
        test_expect_text(src, op ? "rmsnorm, producer" : "softmax 32768, producer", want, TEST_COUNT(want),
                         unwanted, TEST_COUNT(unwanted));
        tl_free_host(src);
        const char *targets[] = {"sm_80", "sm_90a"};
        for (int t = 0; t < 2; t++) {
            tl_program *p;
            if (tl_compile(k, &(tl_compile_options){.target = targets[t]}, &p) != TL_OK)
                fail_msg("%s, producer, %s: %s", op ? "rmsnorm" : "softmax", targets[t], tl_ctx_error(ctx));
            tl_program_info info;
            assert_status(tl_program_get_info(p, &info), TL_OK);
            assert_int_equal(info.threads, op ? 384 : 640);
            assert_int_equal(info.num_params, op ? 8 : 6);
            const tl_program *safe;
            if (tli_program_safe_variant(p, &safe) != TL_OK)
                fail_msg("%s, producer, %s, safe variant: %s", op ? "rmsnorm" : "softmax", targets[t],
                         tl_ctx_error(ctx));
            tl_program_destroy(p);
        }
        tl_kernel_destroy(k);
    }
    /* errors: loader out of range, and a producer where it cannot be */
    tl_kernel *k;
    const struct { tl_softmax_schedule s; const char *msg; } bad[] = {
        {{.loader = 3}, "schedule.loader = 3 is not in 0..2"},
        {{.loader = -1}, "schedule.loader = -1 is not in 0..2"},
        {{.width = 1024, .stages = 1, .loader = 2}, "schedule.loader = 2 needs stages >= 2 (1)"},
        {{.width = 1024, .threads = 1024, .rows = 32, .stages = 2, .loader = 2}, "up to 896 (1024)"},
        {{.width = 1024, .threads = 96, .rows = 3, .stages = 2, .loader = 2}, "a multiple of 128 up to 896 (96)"},
        {{.width = 1024, .threads = 128, .stages = 2, .cluster = 2, .loader = 2}, "no cluster (2)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tl_softmax_desc b = {.rows = 4, .cols = 1000, .in_dtype = TL_F16, .out_dtype = TL_F16, .schedule = bad[i].s};
        assert_status(tl_op_softmax_build(ctx, &b, &k), TL_ERR_INVALID_ARG);
        if (!strstr(tl_ctx_error(ctx), bad[i].msg))
            fail_msg("bad schedule %zu: '%s' does not say '%s'", i, tl_ctx_error(ctx), bad[i].msg);
    }
}

/* Rows split over a cluster of 2 or 4 blocks (schedule.cluster): in the
 * interpreter against the references (ragged rows whose last blocks hold
 * only padding, several rows a tile, with and without the ring, strided);
 * the code (cluster dims, the exchange, two blocks an SM at 512 threads),
 * the sm_90a cubin, sm_80's refusal, and the schedule errors. */
static void test_cluster_schedules(void **state)
{
    (void)state;
    const int64_t shapes[][2] = {{3, 1}, {5, 40}, {4, 100}, {9, 127}, {2, 128}};
    const tl_softmax_schedule sched[] = {
        {.width = 32, .rows = 1, .threads = 32, .stages = 1, .cluster = 4},
        {.width = 64, .rows = 2, .threads = 64, .stages = 1, .cluster = 2},
        {.width = 32, .rows = 2, .threads = 32, .stages = 3, .cluster = 4},
    };
    uint64_t seed = 700;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t k = 0; k < sizeof sched / sizeof sched[0]; k++) {
            row_case c = row_case_make(shapes[s][0], shapes[s][1], k == 1 ? TL_BF16 : TL_F16, TL_F32);
            c.sched = sched[k];
            if ((s + k) % 2)
                c.ld_in = c.cols + 3, c.ld_out = c.cols + 1;
            check_both(&c, seed++, -6, 6);
        }
    tl_softmax_desc d = {.rows = 1, .cols = 32768, .in_dtype = TL_F16, .out_dtype = TL_F16,
                         .schedule = {.width = 16384, .rows = 1, .threads = 512, .stages = 3, .cluster = 2}};
    tl_kernel *k;
    assert_status(tl_op_softmax_build(ctx, &d, &k), TL_OK);
    char *src;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    const char *want[] = {"__launch_bounds__(512, 2) __cluster_dims__(2, 1, 1)", "tl_cluster_reduce_max",
                          "tl_cluster_reduce_sum", "tl_cluster_ld_f32(&tl_slot[", "tl_cluster_turn ^= 1;",
                          "tl_cluster_sync(); // no block leaves"};
    test_expect_text(src, "softmax split over a cluster of 2", want, TEST_COUNT(want), NULL, 0);
    tl_free_host(src);
    tl_program *p;
    if (tl_compile(k, &(tl_compile_options){.target = "sm_90a"}, &p) != TL_OK)
        fail_msg("softmax, cluster of 2, sm_90a: %s", tl_ctx_error(ctx));
    tl_program_destroy(p);
    assert_status(tl_compile(k, &(tl_compile_options){.target = "sm_80"}, &p), TL_ERR_UNSUPPORTED);
    assert_non_null(strstr(tl_ctx_error(ctx), "tl_cluster (2 x 1 x 1): the target has no thread-block clusters"));
    tl_kernel_destroy(k);
    d.schedule.cluster = 9;
    assert_status(tl_op_softmax_build(ctx, &d, &k), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "schedule.cluster = 9 is not in 0..8"));
    d.schedule.cluster = 2, d.cols = 32769;
    assert_status(tl_op_softmax_build(ctx, &d, &k), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "cols = 32769 is more than cluster x width = 2 x 16384"));
}

/* What made the wide rows issue-bound, kept out (bench/NOTES.md, session
 * 6): the column mask is one 32-bit compare of an int coordinate, the
 * exponential is the hardware's ex2, and a row spread over 32 warps (1024
 * threads: the ring loop's) combines its warps' partials one per lane with
 * shuffles, not 32 loads a thread. A narrow row (one warp) has no
 * cross-warp phase at all. */
static void test_issue_cost_of_rows(void **state)
{
    (void)state;
    tl_softmax_desc d = {.rows = 2048, .cols = 32768, .in_dtype = TL_F16, .out_dtype = TL_F16,
                         .schedule = {.threads = 1024}};
    tl_kernel *k;
    assert_status(tl_op_softmax_build(ctx, &d, &k), TL_OK);
    char *src;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    const char *want[] = {"tl_lt_i32(", "const int tl_i", "tl_exp2_approx(", "one per lane, then shuffles",
                          "(tl_lane & 31)];", "tl_shfl_xor(tl_v, 16)",
                          "if (tl_lt_i32((tl_i3_1_run + 7), N)) { // the whole run passes its masks",
                          "tl_pack(tl_S"};
    const char *unwanted[] = {"exp2f(", "for (int tl_w = 0; tl_w < 32; ++tl_w)", " < N) ?", "(true ?"};
    test_expect_text(src, "softmax 2048x32768: the source", want, TEST_COUNT(want), unwanted, TEST_COUNT(unwanted));
    tl_free_host(src);
    tl_kernel_destroy(k);
    d.cols = 512; /* 8 rows a block of 256 threads, a row inside one warp */
    d.schedule = (tl_softmax_schedule){0};
    assert_status(tl_op_softmax_build(ctx, &d, &k), TL_OK);
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    assert_null(strstr(src, "phase 2"));
    assert_non_null(strstr(src, "tl_lt_i32("));
    tl_free_host(src);
    tl_kernel_destroy(k);
}

/* Beyond 32768 columns the default is the online path, in chunks of
 * 16384 columns (softmax) and 32768 (RMSNorm). */
static void test_default_online_beyond_32768(void **state)
{
    (void)state;
    row_case c = row_case_make(2, 40000, TL_F16, TL_F16);
    tl_softmax_desc d = {.rows = c.rows, .cols = c.cols, .in_dtype = c.in, .out_dtype = c.out};
    tl_softmax_schedule s = tl_op_softmax_schedule(ctx, &d);
    assert_int_equal(s.width, 16384);
    assert_int_equal(s.threads, 512);
    tl_rmsnorm_desc r = {.rows = c.rows, .cols = c.cols, .in_dtype = c.in, .out_dtype = c.out};
    s = tl_op_rmsnorm_schedule(ctx, &r);
    assert_int_equal(s.width, 32768);
    assert_int_equal(s.threads, 1024);
    check_both(&c, 77, -4, 4);
}

/* Rows of -inf give zeros (no NaN), also when a whole chunk of the online
 * path is -inf before the row's first finite value; -inf elements give 0;
 * values around +-1e4, whose naive exp overflows, are exact. */
static void test_special_values(void **state)
{
    (void)state;
    const double ninf = -INFINITY;
    for (int online = 0; online < 2; online++)
        for (int dt = 0; dt < 2; dt++) {
            row_case c = row_case_make(6, 150, dt ? TL_F16 : TL_F32, TL_F32);
            if (online)
                c.sched = (tl_softmax_schedule){.width = 32, .rows = 2, .threads = 64};
            void *x = row_alloc_random(c.rows, c.ld_in, c.in, 99, -3, 3);
            for (int64_t j = 0; j < c.cols; j++) {
                row_put(&c, x, 0, j, ninf);                            /* all -inf */
                row_put(&c, x, 1, j, j < 100 ? ninf : (double)j / 10); /* -inf chunks first */
                row_put(&c, x, 2, j, 1e4 - (double)(j % 7));           /* exp(1e4) overflows */
                row_put(&c, x, 3, j, -1e4 + (double)(j % 5));          /* exp(-1e4) underflows */
                if (j % 3 == 0)
                    row_put(&c, x, 4, j, ninf);                        /* some -inf */
            }
            check_softmax(&c, x);
            free(x);
        }
}

static void test_default_schedules(void **state)
{
    (void)state;
    const struct { int64_t cols; int width, rows, threads; } want[] = {
        {1, 1, 4096, 256},      {3, 4, 1024, 256},    {100, 128, 32, 256},     {512, 512, 8, 256},
        {1000, 1024, 4, 128},   {4096, 4096, 1, 128}, {8193, 16384, 1, 512},   {32768, 32768, 1, 512},
        {32769, 16384, 1, 512}, {1 << 20, 16384, 1, 512},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        tl_softmax_desc d = {.rows = 10, .cols = want[i].cols, .in_dtype = TL_F16, .out_dtype = TL_F16};
        tl_softmax_schedule s = tl_op_softmax_schedule(ctx, &d);
        if (s.width != want[i].width || s.rows != want[i].rows || s.threads != want[i].threads)
            fail_msg("cols %lld: schedule %d/%d/%d, want %d/%d/%d", (long long)want[i].cols, s.width, s.rows,
                     s.threads, want[i].width, want[i].rows, want[i].threads);
        tl_rmsnorm_desc r = {.rows = 10, .cols = want[i].cols, .in_dtype = TL_BF16, .out_dtype = TL_BF16};
        tl_softmax_schedule rs = tl_op_rmsnorm_schedule(ctx, &r);
        assert_int_equal(rs.width, want[i].cols > 32768 ? 32768 : s.width); /* its own online chunk */
    }
    /* a partial schedule takes the rest from the default of its width */
    tl_softmax_desc d = {.rows = 10, .cols = 5000, .in_dtype = TL_F32, .out_dtype = TL_F32,
                         .schedule = {.width = 256}};
    tl_softmax_schedule s = tl_op_softmax_schedule(ctx, &d);
    assert_true(s.width == 256 && s.rows == 16 && s.threads == 256);
    d.schedule = (tl_softmax_schedule){.threads = 128};
    s = tl_op_softmax_schedule(ctx, &d);
    assert_true(s.width == 8192 && s.rows == 1 && s.threads == 128);
    /* a default ring fits the target's shared memory, f32 rows included */
    const char *targets[] = {"sm_80", "sm_90a"};
    const int64_t limit[] = {166912, 232448};
    for (int t = 0; t < 2; t++) {
        tl_ctx *c = test_offline_ctx(targets[t]);
        for (int64_t cols = 1; cols <= 32768; cols *= 2)
            for (int dt = 0; dt < 2; dt++) {
                tl_softmax_desc f = {.rows = 10, .cols = cols, .in_dtype = dt ? TL_F32 : TL_F16, .out_dtype = TL_F16};
                tl_softmax_schedule e = tl_op_softmax_schedule(c, &f);
                int64_t bytes = (int64_t)e.stages * e.rows * e.width * (dt ? 4 : 2);
                assert_true(e.stages >= 1 && e.stages <= 8);
                if (e.stages > 1 && bytes > limit[t])
                    fail_msg("%s cols %lld: a default ring of %lld bytes", targets[t], (long long)cols, (long long)bytes);
                tl_rmsnorm_desc g = {.rows = 10, .cols = cols, .in_dtype = f.in_dtype, .out_dtype = TL_F16};
                tl_softmax_schedule q = tl_op_rmsnorm_schedule(c, &g);
                if (q.stages > 1 && (int64_t)q.stages * q.rows * q.width * (dt ? 4 : 2) > limit[t])
                    fail_msg("%s cols %lld: a default RMSNorm ring of %d stages", targets[t], (long long)cols, q.stages);
                /* rows past 16384 columns: both ops on a ring of 2 (rows.c, session 30); narrower, none */
                if (!dt && (e.stages != (cols > 16384 ? 2 : 1) || q.stages != e.stages))
                    fail_msg("%s f16 cols %lld: stages %d (softmax) / %d (RMSNorm)", targets[t], (long long)cols,
                             e.stages, q.stages);
            }
        tl_ctx_destroy(c);
    }
    /* invalid: zeros */
    d.schedule.threads = 100;
    s = tl_op_softmax_schedule(ctx, &d);
    assert_true(s.width == 0 && s.rows == 0 && s.threads == 0);
    s = tl_op_softmax_schedule(NULL, &d);
    assert_int_equal(s.width, 0);
}

static void expect_desc_error(const tl_softmax_desc *d, tl_status want, const char *fragment)
{
    tl_kernel *k = (tl_kernel *)0x1;
    assert_status(tl_op_softmax_build(ctx, d, &k), want);
    assert_null(k);
    const char *msg = tl_ctx_error(ctx);
    if (!strstr(msg, "tl_op_softmax_build: ") || !strstr(msg, fragment))
        fail_msg("message '%s' does not name tl_op_softmax_build or lacks '%s'", msg, fragment);
    const tl_program *p;
    assert_status(tl_op_softmax_program(ctx, d, &p), want);
    assert_non_null(strstr(tl_ctx_error(ctx), "tl_op_softmax_program: "));
}

static void test_descriptor_errors(void **state)
{
    (void)state;
    const tl_softmax_desc ok = {.rows = 4, .cols = 100, .in_dtype = TL_F16, .out_dtype = TL_F32};
    tl_softmax_desc d = ok;
    d.cols = 0;
    expect_desc_error(&d, TL_ERR_INVALID_ARG, "cols = 0");
    d = ok, d.rows = -1;
    expect_desc_error(&d, TL_ERR_INVALID_ARG, "rows = -1");
    d = ok, d.ld_out = 99;
    expect_desc_error(&d, TL_ERR_INVALID_ARG, "ld_out = 99");
    d = ok, d.in_dtype = TL_I32;
    expect_desc_error(&d, TL_ERR_DTYPE, "in_dtype i32");
    d = ok, d.out_dtype = TL_F64;
    expect_desc_error(&d, TL_ERR_DTYPE, "out_dtype f64");
    d = ok, d.schedule.width = 96;
    expect_desc_error(&d, TL_ERR_INVALID_ARG, "schedule.width = 96");
    d = ok, d.schedule.threads = 48;
    expect_desc_error(&d, TL_ERR_INVALID_ARG, "schedule.threads = 48");
    d = ok, d.schedule.rows = -2;
    expect_desc_error(&d, TL_ERR_INVALID_ARG, "schedule.rows = -2");
    d = ok, d.schedule = (tl_softmax_schedule){.width = 1 << 20, .rows = 32};
    expect_desc_error(&d, TL_ERR_INVALID_ARG, "more than 2^24");
    expect_desc_error(NULL, TL_ERR_INVALID_ARG, "NULL descriptor");
    tl_rmsnorm_desc r = {.rows = 4, .cols = 100, .in_dtype = TL_F16, .out_dtype = TL_F32, .eps = -1};
    tl_kernel *k;
    assert_status(tl_op_rmsnorm_build(ctx, &r, &k), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "tl_op_rmsnorm_build: eps = -1"));
    r.eps = NAN;
    assert_status(tl_op_rmsnorm_build(ctx, &r, &k), TL_ERR_INVALID_ARG);
    r.eps = 1e-6, r.ld_in = 7;
    assert_status(tl_op_rmsnorm_build(ctx, &r, &k), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "tl_op_rmsnorm_build: ld_in = 7"));
    assert_status(tl_op_softmax_build(NULL, &ok, &k), TL_ERR_INVALID_ARG);
    assert_status(tl_op_softmax_build(ctx, &ok, NULL), TL_ERR_INVALID_ARG);
    assert_status(tl_op_rmsnorm(NULL, &r, 0, 0, 0, NULL), TL_ERR_INVALID_ARG);
    /* pointers are checked before anything is compiled */
    r.ld_in = 0;
    assert_status(tl_op_softmax(ctx, &ok, 0, 0x1000, NULL), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "tl_op_softmax: x is a null device pointer"));
    assert_status(tl_op_softmax(ctx, &ok, 0x1001, 0x1000, NULL), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "x = 0x1001 is not aligned to its 2-byte elements"));
    assert_status(tl_op_rmsnorm(ctx, &r, 0x1000, 0x1002, 0x1002, NULL), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "tl_op_rmsnorm: y = 0x1002 is not aligned to its 4-byte elements"));
    r.eps = -1;
    assert_status(tl_op_rmsnorm(ctx, &r, 0x1000, 0x1000, 0x1000, NULL), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "tl_op_rmsnorm: eps"));
}

/* Both ops by name, with the parameters the programs document. */
static void test_registry_and_parameters(void **state)
{
    (void)state;
    int found = 0;
    for (const char *const *n = tl_op_names(); *n; n++)
        found += strcmp(*n, "softmax") == 0 || strcmp(*n, "rmsnorm") == 0;
    assert_int_equal(found, 2);
    tl_kernel *k;
    assert_status(tl_op_build(ctx, "softmax", TL_BF16, &k), TL_OK);
    tl_arg few[3] = {tl_arg_int(1), tl_arg_int(1), tl_arg_int(1)};
    assert_status(tl_interpret(k, 3, few), TL_ERR_LAUNCH_ARGS); /* M, N, ld_in, ld_out, X, Y */
    tl_kernel_destroy(k);
    assert_status(tl_op_build(ctx, "rmsnorm", TL_F32, &k), TL_OK);
    float x[3] = {3, 4, 0}, w[3] = {1, 2, 3}, y[3];
    tl_arg args[9] = {tl_arg_int(1),  tl_arg_int(3),  tl_arg_int(3),  tl_arg_int(3),   tl_arg_hptr(x),
                      tl_arg_hptr(y), tl_arg_hptr(w), tl_arg_float(0), tl_arg_int(1)};
    /* the registry's kernel is the default schedule of 1024 columns: with a
     * ring, the blocks-at-once argument comes last */
    tl_rmsnorm_desc rd = {.rows = 1, .cols = 1024, .in_dtype = TL_F32, .out_dtype = TL_F32, .eps = 1e-6};
    assert_status(tl_interpret(k, tl_op_rmsnorm_schedule(ctx, &rd).stages > 1 ? 9 : 8, args), TL_OK);
    /* mean of squares 25 / 3 */
    double r = 1 / sqrt(25.0 / 3);
    assert_true(fabs(y[0] - 3 * r) < 1e-6 && fabs(y[1] - 8 * r) < 1e-6 && y[2] == 0);
    tl_kernel_destroy(k);
    assert_status(tl_op_build(ctx, "softmax", TL_I32, &k), TL_ERR_DTYPE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_pass_ragged),
        cmocka_unit_test(test_online_path),
        cmocka_unit_test(test_ring_schedules),
        cmocka_unit_test(test_ring_code_and_cubins),
        cmocka_unit_test(test_producer_schedules),
        cmocka_unit_test(test_cluster_schedules),
        cmocka_unit_test(test_issue_cost_of_rows),
        cmocka_unit_test(test_default_online_beyond_32768),
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_default_schedules),
        cmocka_unit_test(test_descriptor_errors),
        cmocka_unit_test(test_registry_and_parameters),
    };
    return cmocka_run_group_tests_name("softmax+rmsnorm", tests, offline_setup, ctx_teardown);
}
