/* test_gpu_attention.c - the GPU tier of tl_op_flash_attn: the device result
 * against a float64 reference on the host (non-causal and causal,
 * grouped-query and multi-query, unequal lengths, rows with no key, a single
 * row, ragged lengths, [B, S, H, D] strides, head_dim 64/128/256, the
 * log-sum-exp, bf16 and f16, the default schedule, a plain one without a
 * producer warpgroup, two stages of 176 or 192 keys and a persistent one;
 * on sm_90a also the mma.sync path through a plain sm_90 context),
 * outputs poisoned before each run; and at a large
 * size against unfused attention on the GPU (cuBLAS Q K^T, our softmax,
 * cuBLAS P V). Skips, saying why, without a GPU; TILEC_TEST_SMALL=1 keeps
 * sizes small (compute-sanitizer). */
#include "fixture.h"

#include "attn_ref.h"
#include "precompile.h"

static uint64_t upload(const void *host, size_t bytes)
{
    uint64_t p = 0;
    assert_status(tl_malloc(ctx, bytes ? bytes : 2, &p), TL_OK);
    if (bytes)
        assert_status(tl_memcpy_htod(ctx, p, host, bytes), TL_OK);
    return p;
}

static void *random_tensor(const attn_case *c, int64_t heads, int64_t seq, uint64_t seed)
{
    int64_t n = attn_elems(c, heads, seq);
    void *p = malloc(2 * (size_t)(n ? n : 1));
    assert_status(tl_random_host(p, c->dt, n, seed, -2.0, 2.0), TL_OK);
    return p;
}

/* Runs case c (the op's schedule when s is NULL) and checks O and the
 * log-sum-exp; while planning, only builds the kernel it would launch. */
static void run_case(const attn_case *c, const tl_flash_attn_schedule *s, uint64_t seed)
{
    if (plan.planning) {
        tl_flash_attn_desc d = attn_desc(c, 1);
        if (s)
            d.schedule = *s;
        tl_kernel *k = NULL;
        if (tl_op_flash_attn_build(ctx, &d, &k) == TL_OK)
            precompile_add(k, 0); /* tl_malloc'd tensors: aligned */
        tl_flash_attn_schedule e = tl_op_flash_attn_schedule(ctx, &d);
        if ((e.split_kv >= 2 || e.split_tail >= 2) && tl_op_flash_attn_combine_build(ctx, &d, &k) == TL_OK)
            precompile_add(k, 0); /* the split's second kernel */
        return;
    }
    int64_t nq = attn_elems(c, c->h, c->sq), nk = attn_elems(c, c->hkv, c->skv), rows = c->b * c->h * c->sq;
    void *q = random_tensor(c, c->h, c->sq, seed), *k = random_tensor(c, c->hkv, c->skv, seed + 1);
    void *v = random_tensor(c, c->hkv, c->skv, seed + 2), *o = malloc(2 * (size_t)(nq + 1));
    float *lse = malloc(sizeof(float) * (size_t)(rows + 1));
    memset(o, 0xFF, 2 * (size_t)nq); /* NaN: an element left unwritten fails */
    memset(lse, 0xFF, sizeof(float) * (size_t)rows);
    uint64_t dq = upload(q, 2 * (size_t)nq), dk = upload(k, 2 * (size_t)nk), dv = upload(v, 2 * (size_t)nk);
    uint64_t dout = upload(o, 2 * (size_t)nq), dl = upload(lse, sizeof(float) * (size_t)rows);
    tl_flash_attn_desc d = attn_desc(c, 1);
    if (s)
        d.schedule = *s;
    if (tl_op_flash_attn(ctx, &d, dq, dk, dv, dout, dl, NULL) != TL_OK)
        fail_msg("tl_op_flash_attn: %s", tl_ctx_error(ctx));
    assert_status(tl_synchronize(ctx), TL_OK);
    assert_status(tl_memcpy_dtoh(ctx, o, dout, 2 * (size_t)nq), TL_OK);
    assert_status(tl_memcpy_dtoh(ctx, lse, dl, sizeof(float) * (size_t)rows), TL_OK);
    double *ref = malloc(sizeof(double) * (size_t)(nq + 1)), *ref_lse = malloc(sizeof(double) * (size_t)(rows + 1));
    attn_reference(c, q, k, v, ref, ref_lse);
    int64_t bad;
    double err = attn_rel_err(c, o, ref, &bad);
    tl_flash_attn_schedule e = tl_op_flash_attn_schedule(ctx, &d);
    if (bad || err > 1e-2)
        fail_msg("b%lld h%lld/%lld sq%lld skv%lld d%lld causal %d bshd %d %s (schedule %dx%d s%d t%d ws%d pp%d ps%d "
                 "split %d): rel err %.3g, %lld non-finite",
                 (long long)c->b, (long long)c->h, (long long)c->hkv, (long long)c->sq, (long long)c->skv,
                 (long long)c->d, c->causal, c->bshd, tl_dtype_name(c->dt), e.block_m, e.block_n, e.stages, e.threads,
                 e.warp_specialize, e.pingpong, e.persistent, e.split_kv, err, (long long)bad);
    for (int64_t r = 0; r < rows; r++) {
        bool ok = isinf(ref_lse[r]) ? isinf(lse[r]) && lse[r] < 0 : fabs(lse[r] - ref_lse[r]) <= 2e-2 * (1 + fabs(ref_lse[r]));
        if (!ok)
            fail_msg("lse[%lld] = %g, want %g", (long long)r, lse[r], ref_lse[r]);
    }
    tl_free(ctx, dq), tl_free(ctx, dk), tl_free(ctx, dv), tl_free(ctx, dout), tl_free(ctx, dl);
    free(q), free(k), free(v), free(o), free(lse), free(ref), free(ref_lse);
}

static const attn_case cases[] = {
    {1, 2, 2, 200, 200, 128, 0, 0, 0, TL_BF16}, {1, 2, 2, 200, 200, 128, 1, 0, 0, TL_BF16},
    {2, 4, 2, 130, 257, 64, 1, 0, 0, TL_F16},   {1, 4, 1, 77, 300, 128, 0, 0, 1, TL_BF16},
    {1, 2, 2, 1, 1, 128, 0, 0, 0, TL_BF16},     {1, 1, 1, 1, 300, 64, 1, 0, 0, TL_BF16},
    {1, 2, 2, 300, 100, 128, 1, 0, 0, TL_BF16}, {1, 2, 1, 129, 129, 256, 1, 0, 0, TL_BF16},
    {1, 2, 2, 256, 512, 64, 0, 0.3, 1, TL_F16}, {1, 1, 1, 64, 64, 64, 0, -0.1, 0, TL_BF16},
};

static void test_against_float64(void **state)
{
    (void)state;
    NEED_GPU();
    size_t n = small ? 4 : sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < n; i++)
        run_case(&cases[i], NULL, 100 + 10 * i);
}

/* The same kernels without a producer warpgroup (cp.async or TMA in the
 * block's own threads), and with one but without the consumers taking
 * turns (the default on sm_90a takes turns); on sm_90a also the turns'
 * rotated loop, two stages of wider tiles, and D 64 in three consumer
 * warpgroups (192 rows a block). */
static void test_plain_schedule(void **state)
{
    (void)state;
    NEED_GPU();
    size_t n = small ? 3 : sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < n; i++) {
        tl_flash_attn_schedule s = {.block_m = 128, .block_n = cases[i].d > 128 ? 32 : 64, .stages = 2,
                                    .threads = 256};
        run_case(&cases[i], &s, 500 + 10 * i);
        /* a producer warpgroup, the consumers not taking turns */
        s.warp_specialize = 1;
        run_case(&cases[i], &s, 700 + 10 * i);
    }
    if (strcmp(tl_ctx_target(ctx), "sm_90a") != 0)
        return;
    for (size_t i = 0; i < n; i++) { /* tl_use_pingpong's overlap: each group's softmax under its own P V */
        tl_flash_attn_desc d = attn_desc(&cases[i], 0);
        tl_flash_attn_schedule s = tl_op_flash_attn_schedule(ctx, &d);
        if (!s.pingpong && s.threads != 384) /* (D 64 non-causal: three groups, here taking turns) */
            continue;
        s.pingpong = 2;
        run_case(&cases[i], &s, 900 + 10 * i);
        /* two stages of wider tiles (the default at D 128 from 2048 keys; 176 is not a power of
         * two): K and V on rings of their own, K's slot released after S = Q K^T, V's after O += P V */
        s.pingpong = 1;
        s.stages = 2;
        s.block_n = cases[i].d > 64 ? 176 : 192;
        run_case(&cases[i], &s, 1000 + 10 * i);
    }
    for (size_t i = 0; i < n; i++) { /* D 64 in three consumer warpgroups of 64 rows, without and with turns
                                      * (a ring of three), 2 and 3 stages, persistent CTAs or not */
        if (cases[i].d != 64)
            continue;
        tl_flash_attn_schedule s = {.block_m = 192, .block_n = 128, .stages = 2, .threads = 384,
                                    .warp_specialize = 1};
        run_case(&cases[i], &s, 1050 + 10 * i);
        s.persistent = 2;
        run_case(&cases[i], &s, 1070 + 10 * i);
        s.block_n = 192; /* the D 64 default from 8192 keys (causal from 4096) */
        run_case(&cases[i], &s, 1075 + 10 * i);
        s.block_n = 128;
        s.pingpong = 1;
        run_case(&cases[i], &s, 1080 + 10 * i);
        s.stages = 3;
        s.persistent = 1;
        run_case(&cases[i], &s, 1090 + 10 * i);
        s.persistent = 0;
        run_case(&cases[i], &s, 1095 + 10 * i);
        /* two groups taking turns on 192 keys a tile (the non-causal default until session 20) */
        s = (tl_flash_attn_schedule){.block_m = 128, .block_n = 192, .stages = 3, .threads = 256,
                                     .warp_specialize = 1, .pingpong = 1, .persistent = 1};
        run_case(&cases[i], &s, 1097 + 10 * i);
    }
}

/* Persistent CTAs (schedule.persistent, sm_90a): the cases above, and
 * four with more blocks than the GPU has SMs, so that CTAs run several
 * blocks and the two consumer groups' turns run on across them (ragged
 * lengths, grouped-query heads, [B, S, H, D] strides, D 64 and 128; D 64
 * also without turns, its O through a TMA staging tile). Causal blocks run
 * different trip counts, so the ring's positions and the turns are running
 * sums; with more queries than keys some blocks' loops run no iteration.
 * Then the same with blocks taken from a counter (persistent = 2), twice
 * in a row: a launch that left the counter above zero would skip blocks of
 * the next, whose output then stays NaN. */
static void test_persistent_schedule(void **state)
{
    (void)state;
    NEED_GPU();
    if (strcmp(tl_ctx_target(ctx), "sm_90a") != 0)
        skip();
    static const attn_case many[] = {
        {2, 34, 17, 300, 170, 128, 0, 0, 0, TL_BF16}, /* 204 blocks */
        {1, 140, 70, 65, 200, 64, 0, 0, 1, TL_F16},   /* 140 blocks (65 rows: the two-group default) */
        {2, 34, 17, 300, 300, 128, 1, 0, 0, TL_BF16}, /* 204 causal blocks of 1 to 3 (or 2) K/V tiles */
        {1, 140, 70, 200, 64, 64, 1, 0, 1, TL_F16},   /* 280 causal blocks, half of them with no key */
    };
    size_t n = small ? 2 : sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < n; i++) {
        tl_flash_attn_desc d = attn_desc(&cases[i], 0);
        tl_flash_attn_schedule s = tl_op_flash_attn_schedule(ctx, &d);
        s.persistent = 1;
        run_case(&cases[i], &s, 1100 + 10 * i);
    }
    for (size_t i = 0; i < sizeof many / sizeof many[0]; i++) {
        tl_flash_attn_desc d = attn_desc(&many[i], 0);
        tl_flash_attn_schedule s = tl_op_flash_attn_schedule(ctx, &d);
        s.persistent = 1;
        run_case(&many[i], &s, 1300 + 10 * i);
        s.stages = 2; /* (D 64) K and V on rings of their own, the turns running on across blocks */
        run_case(&many[i], &s, 1300 + 10 * i);
        if (many[i].d == 128) { /* the default from 2048 keys: 176 keys a tile, Q's slot handed on */
            s.block_n = 176;
            run_case(&many[i], &s, 1400 + 10 * i);
            s.block_n = 0;
        }
        s.stages = 0;
        if (many[i].d == 64) { /* without turns: O through a TMA staging tile, the rounds' barriers */
            s.pingpong = 0;
            run_case(&many[i], &s, 1450 + 10 * i);
            s.pingpong = 1;
            /* three groups in a ring, the turns running on across blocks (running sums when causal) */
            tl_flash_attn_schedule g3 = {.block_m = 192, .block_n = 128, .stages = 3, .threads = 384,
                                         .warp_specialize = 1, .pingpong = 1, .persistent = 1};
            run_case(&many[i], &g3, 1460 + 10 * i);
            g3.persistent = 2;
            run_case(&many[i], &g3, 1470 + 10 * i);
            /* the D 64 default from 8192 keys (causal from 4096): no turns, 192 keys at two stages */
            g3 = (tl_flash_attn_schedule){.block_m = 192, .block_n = 192, .stages = 2, .threads = 384,
                                          .warp_specialize = 1, .persistent = 2};
            run_case(&many[i], &g3, 1480 + 10 * i);
        }
        /* blocks taken from a counter: each launch must leave it at zero for the next, which the
         * following cases' launches (the same program) rely on */
        s.persistent = 2;
        run_case(&many[i], &s, 1500 + 10 * i);
        run_case(&many[i], &s, 1600 + 10 * i);
        if (many[i].d == 128) {
            s.block_n = 176, s.stages = 2;
            run_case(&many[i], &s, 1700 + 10 * i);
            s.block_n = 0, s.stages = 0;
        }
        s.persistent = 0; /* the same case in ordinary CTAs */
        run_case(&many[i], &s, 1300 + 10 * i);
    }
}

/* A large case against unfused attention on the GPU: S = Q K^T by cuBLAS
 * (f32), P = softmax(scale S) by tl_op_softmax, O = P V by cuBLAS. */
static void test_against_unfused(void **state)
{
    (void)state;
    NEED_GPU();
    int64_t S = small ? 256 : 2048, D = 128;
    attn_case c = {1, 1, 1, S, S, D, 0, 0, 0, TL_BF16};
    int64_t n = S * D;
    uint64_t q, k, v, o, sc, p, ref;
    assert_status(tl_malloc(ctx, (size_t)n * 2, &q), TL_OK);
    assert_status(tl_malloc(ctx, (size_t)n * 2, &k), TL_OK);
    assert_status(tl_malloc(ctx, (size_t)n * 2, &v), TL_OK);
    assert_status(tl_malloc(ctx, (size_t)n * 2, &o), TL_OK);
    assert_status(tl_malloc(ctx, (size_t)(S * S) * 4, &sc), TL_OK);
    assert_status(tl_malloc(ctx, (size_t)(S * S) * 2, &p), TL_OK);
    assert_status(tl_malloc(ctx, (size_t)n * 4, &ref), TL_OK);
    /* Q pre-scaled in the unfused path would round differently: scale S instead */
    assert_status(tl_random_fill(ctx, q, TL_BF16, n, 1, -2, 2, NULL), TL_OK);
    assert_status(tl_random_fill(ctx, k, TL_BF16, n, 2, -2, 2, NULL), TL_OK);
    assert_status(tl_random_fill(ctx, v, TL_BF16, n, 3, -2, 2, NULL), TL_OK);
    tl_flash_attn_desc d = attn_desc(&c, 0);
    d.scale = 1.0; /* the unfused softmax has no scale */
    assert_status(tl_op_flash_attn(ctx, &d, q, k, v, o, 0, NULL), TL_OK);
    tl_gemm_desc qk = {.m = S, .n = S, .k = D, .in_dtype = TL_BF16, .out_dtype = TL_F32, .trans_b = 1};
    assert_status(tl_baseline_gemm(ctx, &qk, q, k, 0, sc, NULL), TL_OK);
    tl_softmax_desc sd = {.rows = S, .cols = S, .in_dtype = TL_F32, .out_dtype = TL_BF16};
    assert_status(tl_op_softmax(ctx, &sd, sc, p, NULL), TL_OK);
    tl_gemm_desc pv = {.m = S, .n = D, .k = S, .in_dtype = TL_BF16, .out_dtype = TL_F32};
    assert_status(tl_baseline_gemm(ctx, &pv, p, v, 0, ref, NULL), TL_OK);
    tl_span out = {TL_BF16, n, NULL, o}, want = {TL_F32, n, NULL, ref};
    tl_check_result r;
    assert_status(tl_check(ctx, &out, &want, 2e-2, &r), TL_OK);
    if (r.rel_err > 1e-2 || r.nonfinite)
        fail_msg("S=%lld: rel err %.3g against unfused attention, %lld non-finite", (long long)S, r.rel_err,
                 (long long)r.nonfinite);
    uint64_t all[] = {q, k, v, o, sc, p, ref};
    for (int i = 0; i < 7; i++)
        tl_free(ctx, all[i]);
}

/* The mma.sync path (the one sm_80 takes) on an sm_90a device: a second
 * context for the plain target (sm_90), which has no wgmma, so the op
 * lowers its gemms to ldmatrix + mma.sync and its copies to cp.async.
 * Each case with the op's schedule and with both warp shapes: eight warps
 * of 16 rows, four of 32 (the latter at head_dim <= 128, where its output
 * accumulator fits in registers). NULL where the context is plain already. */
static tl_ctx *plain_ctx; /* test_plain_ctx (fixture.h) */

static void test_mma_sync_path(void **state)
{
    (void)state;
    NEED_GPU();
    if (!plain_ctx) {
        printf("  skip: the context's target %s has no wgmma (the tests above ran mma.sync)\n", tl_ctx_target(ctx));
        skip();
    }
    tl_ctx *main_ctx = ctx;
    ctx = plain_ctx; /* run_case launches on `ctx` */
    size_t n = small ? 3 : sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < n; i++) {
        tl_flash_attn_desc d = attn_desc(&cases[i], 0);
        tl_flash_attn_schedule def = tl_op_flash_attn_schedule(ctx, &d);
        if (def.warp_specialize || def.pingpong)
            fail_msg("%s: the op chose a warp-specialised schedule without wgmma", tl_ctx_target(ctx));
        run_case(&cases[i], NULL, 1100 + 10 * i);
        int bn = cases[i].d > 128 ? 32 : 64;
        tl_flash_attn_schedule eight = {.block_m = 128, .block_n = bn, .stages = 2, .threads = 256};
        tl_flash_attn_schedule four = {.block_m = 128, .block_n = bn, .stages = 2, .threads = 128};
        run_case(&cases[i], &eight, 1200 + 10 * i);
        if (cases[i].d <= 128)
            run_case(&cases[i], &four, 1300 + 10 * i);
    }
    ctx = main_ctx;
}

/* O's three store paths give the same bits: rows 16-byte aligned (each
 * quad's pairs transposed, 16-byte stores), 4-byte aligned (pair stores),
 * 2-byte aligned (masked element pairs); on the default schedule of the
 * context's target and, where there is one, of mma.sync. */
static void test_o_alignment(void **state)
{
    (void)state;
    NEED_GPU();
    const attn_case c = {1, 2, 2, 256, 300, 128, 0, 0, 0, TL_BF16};
    tl_ctx *ctxs[2] = {ctx, plain_ctx}, *main_ctx = ctx;
    for (int t = 0; t < 2 && ctxs[t]; t++) {
        ctx = ctxs[t];
        int64_t nq = attn_elems(&c, c.h, c.sq), nk = attn_elems(&c, c.hkv, c.skv);
        void *q = random_tensor(&c, c.h, c.sq, 1900), *k = random_tensor(&c, c.hkv, c.skv, 1901);
        void *v = random_tensor(&c, c.hkv, c.skv, 1902);
        uint16_t *o = malloc(2 * (size_t)(nq + 8)), *first = malloc(2 * (size_t)nq);
        uint64_t dq = upload(q, 2 * (size_t)nq), dk = upload(k, 2 * (size_t)nk), dv = upload(v, 2 * (size_t)nk);
        uint64_t dout;
        assert_status(tl_malloc(ctx, 2 * (size_t)(nq + 8), &dout), TL_OK);
        tl_flash_attn_desc d = attn_desc(&c, 0);
        const int shift[3] = {0, 2, 1}; /* elements: 16-, 4- and 2-byte aligned rows */
        for (int i = 0; i < 3; i++) {
            assert_status(tl_memset_u8(ctx, dout, 0xFF, 2 * (size_t)(nq + 8), NULL), TL_OK);
            if (tl_op_flash_attn(ctx, &d, dq, dk, dv, dout + 2 * (uint64_t)shift[i], 0, NULL) != TL_OK)
                fail_msg("tl_op_flash_attn (O %d elements in): %s", shift[i], tl_ctx_error(ctx));
            assert_status(tl_synchronize(ctx), TL_OK);
            assert_status(tl_memcpy_dtoh(ctx, o, dout, 2 * (size_t)(nq + 8)), TL_OK);
            if (i == 0) {
                double *ref = malloc(sizeof(double) * (size_t)nq);
                attn_reference(&c, q, k, v, ref, NULL);
                int64_t bad;
                double err = attn_rel_err(&c, o, ref, &bad);
                if (bad || err > 1e-2)
                    fail_msg("%s: aligned O: rel err %.3g, %lld non-finite", tl_ctx_target(ctx), err, (long long)bad);
                memcpy(first, o, 2 * (size_t)nq);
                free(ref);
            } else if (memcmp(first, o + shift[i], 2 * (size_t)nq) != 0) {
                fail_msg("%s: O %d elements in differs from the aligned O", tl_ctx_target(ctx), shift[i]);
            }
        }
        tl_free(ctx, dq), tl_free(ctx, dk), tl_free(ctx, dv), tl_free(ctx, dout);
        free(q), free(k), free(v), free(o), free(first);
    }
    ctx = main_ctx;
}

static void test_split_keys(void **state);
static void test_split_tail(void **state);

/* Every kernel the float64 and split tests launch (the splits' second
 * kernels included), compiled at once (precompile.h). */
static int attention_setup(void **state)
{
    gpu_setup(state);
    if (!ctx)
        return 0;
    plan.planning = true;
    test_against_float64(state);
    test_plain_schedule(state);
    if (ctx && strcmp(tl_ctx_target(ctx), "sm_90a") == 0)
        test_persistent_schedule(state);
    test_split_keys(state);
    test_split_tail(state);
    plan.planning = false;
    precompile_run(ctx, "attention");
    plain_ctx = test_plain_ctx();
    if (plain_ctx) {
        plan.planning = true;
        test_mma_sync_path(state);
        plan.planning = false;
        precompile_run(plain_ctx, "mma.sync attention");
    }
    test_plan_only_end();
    return 0;
}

static int attention_teardown(void **state)
{
    tl_ctx_destroy(plain_ctx);
    plain_ctx = NULL;
    return ctx_teardown(state);
}

/* The keys split over blocks and merged by the second kernel: the op's
 * choice for decoding shapes (a few query rows, many keys, grouped-query
 * heads, stacked as the rows of one head where they can be; causal rows
 * at the bottom-right), and given splits on the
 * target's default block schedule, including more parts than a causal
 * block has tiles (parts with no key); outputs poisoned as above, the
 * workspace taken from the stream-ordered allocator each call. */
static void test_split_keys(void **state)
{
    (void)state;
    NEED_GPU();
    const attn_case dec[] = { /* the first, fifth and sixth stack their grouped-query heads as rows */
        {1, 8, 2, 1, 4096, 128, 0, 0, 0, TL_BF16},  {2, 4, 1, 3, 2500, 64, 1, 0, 0, TL_BF16},
        {1, 4, 4, 16, 3000, 128, 1, 0, 1, TL_F16},  {1, 2, 2, 1, 1700, 256, 0, 0, 0, TL_BF16},
        {1, 8, 2, 1, 3500, 128, 1, 0, 1, TL_BF16},  {2, 6, 2, 5, 2000, 64, 0, 0, 0, TL_F16},
    };
    size_t n = small ? 2 : sizeof dec / sizeof dec[0];
    for (size_t i = 0; i < n; i++) {
        tl_flash_attn_desc d = attn_desc(&dec[i], 0);
        tl_flash_attn_schedule e = tl_op_flash_attn_schedule(ctx, &d);
        if (e.split_kv < 2)
            fail_msg("case %zu: the op's choice does not split the keys (split_kv %d)", i, e.split_kv);
        run_case(&dec[i], NULL, 1300 + 10 * i);
        e.split_kv = 7; /* more parts than the causal blocks near the top have tiles */
        run_case(&dec[i], &e, 1400 + 10 * i);
    }
    for (size_t i = 0; i < (small ? 2 : sizeof cases / sizeof cases[0]); i++) {
        tl_flash_attn_desc d = attn_desc(&cases[i], 0);
        tl_flash_attn_schedule e = tl_op_flash_attn_schedule(ctx, &d);
        e.split_kv = 3;
        run_case(&cases[i], &e, 1500 + 10 * i);
    }
}

/* The last wave's blocks split (split_tail) on the target's default
 * schedule: heads enough for one block past a whole wave of the GPU's SMs
 * up to a head's worth, the op's choice, and given parts (2, 3, 5):
 * ragged query rows, multi-query heads, [B, S, H, D], causal (the blocks
 * longest first, so the split ones are the shortest, rows with no key),
 * outputs poisoned as above. */
static void test_split_tail(void **state)
{
    (void)state;
    NEED_GPU();
    tl_device_info info;
    int64_t sms = tl_ctx_get_device_info(ctx, &info) == TL_OK && info.sm_count > 0 ? info.sm_count : 132;
    const attn_case base[] = {
        {2, 1, 1, 1870, 300, 64, 0, 0, 0, TL_BF16},  {1, 1, 1, 1000, 400, 128, 0, 0, 1, TL_F16},
        {1, 1, 1, 2048, 300, 128, 1, 0, 0, TL_BF16},
    };
    static const int parts[] = {0, 2, 3, 5};
    for (size_t i = 0; i < (small ? 1 : sizeof base / sizeof base[0]); i++) {
        attn_case c = base[i];
        tl_flash_attn_desc d = attn_desc(&c, 0);
        tl_flash_attn_schedule e = tl_op_flash_attn_schedule(ctx, &d);
        int64_t per_head = (c.sq + e.block_m - 1) / e.block_m * c.b;
        c.h = sms / per_head + 1; /* past the wave by 1 to per_head blocks */
        c.hkv = i == 1 ? 1 : c.h;
        assert_true((c.h * per_head) % sms != 0);
        for (size_t j = 0; j < (small ? 2 : sizeof parts / sizeof parts[0]); j++) {
            d = attn_desc(&c, 0);
            e = tl_op_flash_attn_schedule(ctx, &d);
            e.split_tail = parts[j] ? parts[j] : e.split_tail;
            run_case(&c, parts[j] ? &e : NULL, 1600 + 10 * i + j);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_float64),
        cmocka_unit_test(test_plain_schedule),
        cmocka_unit_test(test_persistent_schedule),
        cmocka_unit_test(test_against_unfused),
        cmocka_unit_test(test_mma_sync_path),
        cmocka_unit_test(test_o_alignment),
        cmocka_unit_test(test_split_keys),
        cmocka_unit_test(test_split_tail),
    };
    test_apply_filter();
    return cmocka_run_group_tests(tests, attention_setup, attention_teardown);
}
