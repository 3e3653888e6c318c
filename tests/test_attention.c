/* test_attention.c - the CPU tier of tl_op_flash_attn: the op's kernel run
 * by the interpreter against a float64 reference (non-causal and causal,
 * grouped-query and multi-query heads, unequal lengths with rows that see
 * no key, a single row, [B, S, H, D] strides, head_dim 64/128/256, the
 * log-sum-exp output, a negative scale), its cubins for sm_80 and sm_90a,
 * and the descriptor's errors. */
#include "fixture.h"
#include "program.h"

#include "attn_ref.h"

/* The strides of Q, K, V and O of case c. */
static void case_strides(const attn_case *c, int64_t st[4][3])
{
    attn_strides(c, c->h, c->sq, st[0]);
    attn_strides(c, c->hkv, c->skv, st[1]);
    attn_strides(c, c->hkv, c->skv, st[2]);
    attn_strides(c, c->h, c->sq, st[3]);
}

/* The leading launch arguments of the op's kernel for case c: B, H, HKV,
 * SQ, SKV, [NFULL, NSPLIT (the split kernel: nsplit >= 2),] the strides of
 * Q, K, V, O. */
static int size_args(const attn_case *c, int64_t nfull, int nsplit, tl_arg *args)
{
    int64_t st[4][3];
    case_strides(c, st);
    int n = 0;
    int64_t dims[] = {c->b, c->h, c->hkv, c->sq, c->skv, nfull, nsplit};
    for (int i = 0; i < (nsplit >= 2 ? 7 : 5); i++)
        args[n++] = tl_arg_int(dims[i]);
    for (int t = 0; t < 4; t++)
        for (int j = 0; j < 3; j++)
            args[n++] = tl_arg_int(st[t][j]);
    return n;
}

/* The launch arguments of the op's program for case c on host buffers. */
static int host_args(const attn_case *c, void *q, void *k, void *v, void *o, float *lse, tl_arg *args)
{
    int n = size_args(c, 0, 1, args);
    args[n++] = tl_arg_hptr(q);
    args[n++] = tl_arg_hptr(k);
    args[n++] = tl_arg_hptr(v);
    args[n++] = tl_arg_hptr(o);
    if (lse)
        args[n++] = tl_arg_hptr(lse);
    args[n++] = tl_arg_float(attn_scale(c) * 1.4426950408889634);
    return n;
}

static void *random_tensor(const attn_case *c, int64_t heads, int64_t seq, uint64_t seed)
{
    int64_t n = attn_elems(c, heads, seq);
    void *p = malloc(tl_dtype_size(c->dt) * (size_t)(n ? n : 1));
    assert_status(tl_random_host(p, c->dt, n, seed, -2.0, 2.0), TL_OK);
    return p;
}

/* O (and the log-sum-exp, when lse) of case c against the float64
 * reference; split: the parts the keys were cut into (0: not split). */
static void check_case(const attn_case *c, const void *q, const void *k, const void *v, const void *o,
                       const float *lse, int split)
{
    int64_t rows = c->b * c->h * c->sq;
    double *ref = malloc(sizeof(double) * (size_t)(attn_elems(c, c->h, c->sq) + 1));
    double *ref_lse = malloc(sizeof(double) * (size_t)(rows + 1));
    attn_reference(c, q, k, v, ref, ref_lse);
    int64_t bad;
    double err = attn_rel_err(c, o, ref, &bad);
    if (bad || err > 1e-2)
        fail_msg("split %d: b%lld h%lld/%lld sq%lld skv%lld d%lld causal %d: rel err %.3g, %lld non-finite", split,
                 (long long)c->b, (long long)c->h, (long long)c->hkv, (long long)c->sq, (long long)c->skv,
                 (long long)c->d, c->causal, err, (long long)bad);
    for (int64_t r = 0; lse && r < rows; r++) {
        double want = ref_lse[r], got = lse[r];
        bool ok = isinf(want) ? isinf(got) && got < 0 : fabs(got - want) <= 1e-2 * (1 + fabs(want));
        if (!ok)
            fail_msg("split %d: lse[%lld] = %g, want %g", split, (long long)r, got, want);
    }
    free(ref), free(ref_lse);
}

static void interpret_case_with(const attn_case *c, int with_lse, const tl_flash_attn_schedule *s)
{
    void *q = random_tensor(c, c->h, c->sq, 1), *k = random_tensor(c, c->hkv, c->skv, 2);
    void *v = random_tensor(c, c->hkv, c->skv, 3), *o = random_tensor(c, c->h, c->sq, 4);
    int64_t rows = c->b * c->h * c->sq;
    float *lse = with_lse ? malloc(sizeof(float) * (size_t)(rows ? rows : 1)) : NULL;
    tl_flash_attn_desc d = attn_desc(c, with_lse);
    if (s)
        d.schedule = *s;
    tl_kernel *kern;
    assert_status(tl_op_flash_attn_build(ctx, &d, &kern), TL_OK);
    tl_arg args[24];
    int n = host_args(c, q, k, v, o, lse, args);
    assert_status(tl_interpret(kern, n, args), TL_OK);
    check_case(c, q, k, v, o, lse, 0);
    tl_kernel_destroy(kern);
    free(q), free(k), free(v), free(o), free(lse);
}

static void interpret_case(const attn_case *c, int with_lse) { interpret_case_with(c, with_lse, NULL); }

/* Fills a [B, heads, seq, D] tensor of case c with NaN. */
static void poison(const attn_case *c, void *t, int64_t heads, int64_t seq)
{
    uint16_t nan16 = c->dt == TL_BF16 ? 0x7fc0 : 0x7e00;
    for (int64_t i = 0; i < attn_elems(c, heads, seq); i++)
        ((uint16_t *)t)[i] = nan16;
}

/* A schedule that splits the keys (split_kv, or split_tail past the last
 * whole wave of the offline context's 132 SMs): the op's two kernels run by
 * the interpreter, O and the parts' host workspace poisoned with NaN first
 * (every element of O must be written, by a whole block or the combine,
 * and every element the combine reads by a part), then compared with the
 * float64 reference as above. */
static void interpret_split_case(const attn_case *c, int with_lse, tl_flash_attn_schedule s)
{
    void *q = random_tensor(c, c->h, c->sq, 1), *k = random_tensor(c, c->hkv, c->skv, 2);
    void *v = random_tensor(c, c->hkv, c->skv, 3), *o = random_tensor(c, c->h, c->sq, 4);
    int64_t blocks = (c->sq + s.block_m - 1) / s.block_m * c->h * c->b, rows = c->b * c->h * c->sq;
    int64_t nfull = s.split_kv >= 2 ? 0 : blocks / 132 * 132, nsplit = s.split_kv >= 2 ? s.split_kv : s.split_tail;
    int64_t prow = c->sq < s.block_m ? c->sq : s.block_m, parts = (blocks - nfull) * nsplit * prow;
    assert_true(nsplit >= 2 && blocks > nfull);
    float *lse = with_lse ? malloc(sizeof(float) * (size_t)(rows ? rows : 1)) : NULL;
    float *wo = malloc(sizeof(float) * (size_t)(parts * c->d + 1)), *wl = malloc(sizeof(float) * (size_t)(parts + 1));
    for (int64_t i = 0; i < parts * c->d; i++)
        wo[i] = NAN;
    for (int64_t i = 0; i < parts; i++)
        wl[i] = NAN;
    poison(c, o, c->h, c->sq);
    tl_flash_attn_desc d = attn_desc(c, with_lse);
    d.schedule = s;
    tl_kernel *kern, *comb;
    assert_status(tl_op_flash_attn_build(ctx, &d, &kern), TL_OK);
    assert_status(tl_op_flash_attn_combine_build(ctx, &d, &comb), TL_OK);
    int64_t st[4][3];
    case_strides(c, st);
    tl_arg args[32];
    int n = size_args(c, nfull, (int)nsplit, args);
    args[n++] = tl_arg_hptr(q);
    args[n++] = tl_arg_hptr(k);
    args[n++] = tl_arg_hptr(v);
    args[n++] = tl_arg_hptr(o);
    if (lse)
        args[n++] = tl_arg_hptr(lse);
    args[n++] = tl_arg_hptr(wo);
    args[n++] = tl_arg_hptr(wl);
    args[n++] = tl_arg_float(attn_scale(c) * 1.4426950408889634);
    assert_status(tl_interpret(kern, n, args), TL_OK);
    n = 0;
    int64_t cdims[] = {c->b, c->h, c->sq, nfull, nsplit, st[3][0], st[3][1], st[3][2]};
    for (size_t i = 0; i < 8; i++)
        args[n++] = tl_arg_int(cdims[i]);
    args[n++] = tl_arg_hptr(wo);
    args[n++] = tl_arg_hptr(wl);
    args[n++] = tl_arg_hptr(o);
    if (lse)
        args[n++] = tl_arg_hptr(lse);
    assert_status(tl_interpret(comb, n, args), TL_OK);
    check_case(c, q, k, v, o, lse, (int)nsplit);
    tl_kernel_destroy(kern);
    tl_kernel_destroy(comb);
    free(q), free(k), free(v), free(o), free(lse), free(wo), free(wl);
}

/* The keys split over blocks (split_kv): more parts than some blocks have
 * tiles (empty parts), causal rows whose parts see no key, grouped-query
 * heads, [B, S, H, D] strides, the log-sum-exp, a negative scale, the
 * wgmma schedule with a producer and persistent CTAs, and head_dim 256.
 * Then the last wave's blocks split (split_tail): past 132 blocks, causal
 * (its blocks last first), ragged rows in the last query block, with the
 * log-sum-exp written by whole blocks and the combine alike. */
static void test_split_keys(void **state)
{
    (void)state;
    tl_flash_attn_schedule plain = {.block_m = 64, .block_n = 32, .stages = 2, .threads = 128};
    tl_flash_attn_schedule ws = {.block_m = 128, .block_n = 64, .stages = 3, .threads = 256, .warp_specialize = 1,
                                 .pingpong = 1, .persistent = 1};
    tl_flash_attn_schedule tiny = {.block_m = 16, .block_n = 16, .stages = 2, .threads = 32, .split_kv = 1};
    const struct { attn_case c; int lse, split, tail; const tl_flash_attn_schedule *s; } cases[] = {
        {{1, 4, 2, 3, 200, 64, 0, 0, 0, TL_BF16}, 1, 3, 0, &plain},    /* decoding-like: 7 tiles in 3 runs */
        {{2, 2, 1, 1, 100, 64, 0, 0, 1, TL_F16}, 0, 2, 0, &plain},     /* one query row, MQA, [B, S, H, D] */
        {{1, 2, 2, 37, 70, 64, 1, 0, 0, TL_BF16}, 1, 4, 0, &plain},    /* causal: parts without keys, -inf rows */
        {{1, 1, 1, 70, 37, 64, 1, 0, 0, TL_BF16}, 1, 2, 0, &plain},    /* causal, more queries than keys */
        {{1, 2, 2, 20, 150, 64, 0, -0.3, 0, TL_BF16}, 1, 5, 0, &plain}, /* a negative scale (the row minimum) */
        {{1, 2, 1, 50, 300, 128, 1, 0, 0, TL_BF16}, 0, 3, 0, &ws},     /* producer, ping-pong, persistent */
        {{1, 1, 1, 16, 90, 256, 0, 0, 0, TL_BF16}, 1, 2, 0, &plain},   /* head_dim 256 */
        /* split_tail: 140 blocks of 16 rows (the last ragged), the last 8 in 4 parts of 2, 2, 1 and 0 of
         * their 5 key tiles */
        {{1, 2, 2, 1115, 70, 64, 0, 0, 0, TL_BF16}, 1, 0, 4, &tiny},
        /* causal, GQA, [B, S, H, D]: 150 blocks, the 18 past the wave the shortest (parts without keys,
         * rows with none) */
        {{5, 3, 1, 150, 140, 64, 1, 0, 1, TL_F16}, 1, 0, 3, &tiny},
        /* less than a wave: every block split, the wgmma schedule */
        {{1, 2, 1, 50, 300, 128, 0, 0, 0, TL_BF16}, 0, 0, 4, &ws},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tl_flash_attn_schedule s = *cases[i].s;
        s.split_kv = cases[i].split ? cases[i].split : 1;
        s.split_tail = cases[i].tail ? cases[i].tail : 1;
        interpret_split_case(&cases[i].c, cases[i].lse, s);
    }
}

/* The op's choice of split: none where the query blocks fill the GPU, none
 * where the keys are few, about one wave of blocks for a decoding step;
 * and the schedule's errors. */
static void test_split_choice(void **state)
{
    (void)state;
    tl_flash_attn_desc d = {.batch = 1, .heads = 32, .kv_heads = 8, .seq_q = 1, .seq_kv = 8192, .head_dim = 128,
                            .dtype = TL_BF16};
    /* grouped-query heads stacked as rows: 8 blocks of 4 rows, 47 tiles of 176 keys -> 11 runs (at least
     * four tiles each) where 16 would fill the offline context's 132 SMs (an H200's) */
    tl_flash_attn_schedule s = tl_op_flash_attn_schedule(ctx, &d);
    assert_int_equal(s.split_kv, 47 / 4);
    assert_int_equal(s.block_m, 64); /* one consumer warpgroup for a few rows */
    d.kv_heads = 32; /* no stacking: 32 blocks of one row */
    assert_int_equal(tl_op_flash_attn_schedule(ctx, &d).split_kv, 132 / 32);
    d.seq_kv = 256; /* too few key tiles for two runs of four */
    assert_int_equal(tl_op_flash_attn_schedule(ctx, &d).split_kv, 1);
    d.seq_kv = 8192, d.seq_q = 4096; /* 1024 query blocks */
    assert_int_equal(tl_op_flash_attn_schedule(ctx, &d).split_kv, 1);
    assert_int_equal(tl_op_flash_attn_schedule(ctx, &d).block_m, 128);
    d.seq_q = 1, d.schedule.split_kv = 65;
    tl_kernel *k;
    assert_status(tl_op_flash_attn_build(ctx, &d, &k), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "split_kv = 65"));
    d.schedule.split_kv = 64, d.batch = 40000000; /* 1.28e9 blocks of one row, 64 parts each */
    assert_status(tl_op_flash_attn_build(ctx, &d, &k), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "2^31"));
    d.schedule.split_kv = 1, d.batch = 1;
    assert_status(tl_op_flash_attn_build(ctx, &d, &k), TL_OK);
    tl_kernel_destroy(k);
    d.schedule.split_tail = 17;
    assert_status(tl_op_flash_attn_build(ctx, &d, &k), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "split_tail = 17"));
}

/* Whether d's kernel is the split one (it has the dim NFULL). */
static bool is_split_kernel(const tl_flash_attn_desc *d)
{
    tl_kernel *k;
    char *text;
    assert_status(tl_op_flash_attn_build(ctx, d, &k), TL_OK);
    assert_status(tl_kernel_dump(k, &text), TL_OK);
    bool split = strstr(text, "NFULL") != NULL;
    free(text);
    tl_kernel_destroy(k);
    return split;
}

/* The op's balanced last wave. The grid's D 128 point at 16k keys has 2048
 * blocks of 128 rows (one a CTA), 15 waves of 132 and 68 blocks; its 94
 * key tiles of 176 in thirds run as two rounds of 32 tiles and a part's
 * and the combine's costs, 71 tiles' time against 94 (halves: 97). D 64 at
 * 4k keys: 2816 blocks of 192 rows, 44 past 21 waves, one round of thirds
 * of 32 tiles. None at D 128 4k (persistent CTAs taking turns: measured no
 * gain), where the waves are whole, for causal blocks or for blocks two of
 * which fit an SM; and asked for where no block is past the waves, the
 * plain kernel. */
static void test_tail_choice(void **state)
{
    (void)state;
    tl_flash_attn_desc d = {.batch = 1, .heads = 16, .kv_heads = 16, .seq_q = 16384, .seq_kv = 16384, .head_dim = 128,
                            .dtype = TL_BF16};
    tl_flash_attn_schedule s = tl_op_flash_attn_schedule(ctx, &d);
    assert_int_equal(s.block_m, 128);
    assert_int_equal(s.block_n, 176);
    assert_int_equal(s.persistent, 0);
    assert_int_equal(s.split_kv, 1);
    assert_int_equal(s.split_tail, 3);
    assert_true(is_split_kernel(&d));
    d.batch = 4, d.heads = d.kv_heads = 32, d.head_dim = 64, d.seq_q = d.seq_kv = 4096;
    s = tl_op_flash_attn_schedule(ctx, &d);
    assert_int_equal(s.block_m, 192);
    assert_int_equal(s.split_tail, 3);
    d.heads = d.kv_heads = 16, d.head_dim = 128; /* persistent, taking turns */
    s = tl_op_flash_attn_schedule(ctx, &d);
    assert_true(s.persistent == 1 && s.pingpong == 1);
    assert_int_equal(s.split_tail, 1);
    d.heads = d.kv_heads = 33, d.batch = 1, d.seq_q = d.seq_kv = 16384; /* 4224 blocks: 32 whole waves */
    assert_int_equal(tl_op_flash_attn_schedule(ctx, &d).split_tail, 1);
    d.schedule.split_tail = 3; /* asked for, but no block is past the waves: the plain kernel */
    assert_false(is_split_kernel(&d));
    d.schedule.split_tail = 0, d.heads = d.kv_heads = 16, d.causal = 1;
    assert_int_equal(tl_op_flash_attn_schedule(ctx, &d).split_tail, 1);
    d.causal = 0, d.schedule = (tl_flash_attn_schedule){.block_m = 64, .block_n = 64, .stages = 2, .threads = 128};
    assert_int_equal(tl_op_flash_attn_schedule(ctx, &d).split_tail, 1); /* 48 KB of shared memory */
    d.schedule.split_tail = 2; /* asked for: the split kernel */
    assert_true(is_split_kernel(&d));
}

static void test_interpreter_matches_reference(void **state)
{
    (void)state;
    const attn_case cases[] = {
        {1, 2, 2, 37, 70, 64, 0, 0, 0, TL_BF16},    /* ragged, two K/V tiles */
        {1, 2, 2, 37, 70, 64, 1, 0, 0, TL_BF16},    /* causal, bottom-right aligned */
        {2, 4, 2, 50, 50, 64, 1, 0, 0, TL_F16},     /* grouped-query */
        {1, 3, 1, 20, 130, 64, 0, 0, 1, TL_BF16},   /* multi-query, [B, S, H, D] */
        {1, 1, 1, 1, 1, 128, 0, 0, 0, TL_BF16},     /* one row, one key */
        {1, 2, 1, 40, 40, 256, 1, 0, 0, TL_BF16},   /* head_dim 256 */
        {1, 1, 1, 30, 45, 64, 0, -0.2, 0, TL_F16},  /* a negative scale */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        interpret_case(&cases[i], 0);
    /* causal in persistent CTAs takes its query blocks as the grid's slowest axis (the
     * interpreter runs the blocks as written: the mapping back to query, head and batch) */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!cases[i].causal || cases[i].d > 128)
            continue;
        tl_flash_attn_schedule s = {.block_m = 128, .block_n = 64, .stages = 3, .threads = 256,
                                    .warp_specialize = 1, .pingpong = 1, .persistent = 1};
        interpret_case_with(&cases[i], 0, &s);
    }
}

/* More queries than keys, causal: the first seq_q - seq_kv rows see no key
 * (zeros, log-sum-exp -inf); the others match. */
static void test_rows_without_keys_and_lse(void **state)
{
    (void)state;
    attn_case c = {1, 2, 2, 70, 37, 64, 1, 0, 0, TL_BF16};
    interpret_case(&c, 1);
    tl_flash_attn_schedule s = {.block_m = 128, .block_n = 64, .stages = 3, .threads = 256, .warp_specialize = 1,
                                .pingpong = 1, .persistent = 1};
    attn_case c3 = {2, 2, 1, 300, 100, 64, 1, 0, 0, TL_BF16}; /* persistent: the first query blocks see no key */
    interpret_case_with(&c3, 1, &s);
    attn_case c2 = {1, 1, 1, 33, 90, 128, 0, 0.5, 0, TL_BF16};
    interpret_case(&c2, 1);
}

/* Every head_dim, causal or not, compiles for both paths: the default
 * schedule and the plain one of the GPU tests (no producer warpgroup: its
 * 256 threads hold the whole output tile), each with the safe variant a
 * launch on misaligned tensors takes. */
static void test_cubins_sm80_sm90a(void **state)
{
    (void)state;
    const char *targets[] = {"sm_80", "sm_90a"};
    const int64_t dims[] = {64, 128, 256};
    for (int t = 0; t < 2; t++) {
        tl_ctx *tctx = test_offline_ctx(targets[t]);
        for (int i = 0; i < 3; i++)
            for (int causal = 0; causal < 2; causal++)
                for (int plain = 0; plain < 2; plain++) {
                    tl_flash_attn_desc d = {.batch = 1, .heads = 1, .kv_heads = 1, .seq_q = 128, .seq_kv = 1,
                                            .head_dim = dims[i], .dtype = TL_BF16, .causal = causal,
                                            .lse = causal};
                    if (plain)
                        d.schedule = (tl_flash_attn_schedule){
                            .block_m = 128, .block_n = dims[i] > 128 ? 32 : 64, .stages = 2, .threads = 256};
                    const tl_program *p, *safe;
                    if (tl_op_flash_attn_program(tctx, &d, &p) != TL_OK)
                        fail_msg("%s d%lld causal %d plain %d: %s", targets[t], (long long)dims[i], causal, plain,
                                 tl_ctx_error(tctx));
                    size_t n;
                    assert_memory_equal(tl_program_cubin(p, &n), "\x7f" "ELF", 4);
                    if (causal && tli_program_safe_variant(p, &safe) != TL_OK)
                        fail_msg("%s d%lld plain %d, safe variant: %s", targets[t], (long long)dims[i], plain,
                                 tl_ctx_error(tctx));
                }
        tl_ctx_destroy(tctx);
    }
}

/* Three consumer warpgroups of 64 rows (block_m 192, 384 consumer
 * threads): FlashAttention-3's shape for head_dim 64, where two groups'
 * softmax can run under the third's gemms. It lowers and compiles, with or
 * without persistent CTAs, causal or not, with or without turns, and the
 * producer's registers go to the three groups. With turns (pingpong 1)
 * the groups go in a ring: each waits on its own order mbarrier (three of
 * them) and hands over to the next, group 0 after group 2. */
static void test_three_consumer_groups(void **state)
{
    (void)state;
    tl_ctx *tctx = test_offline_ctx("sm_90a");
    for (int causal = 0; causal < 2; causal++)
        for (int persistent = 0; persistent <= 2; persistent++)
        for (int pingpong = 0; pingpong < 2; pingpong++) {
            tl_flash_attn_desc d = {.batch = 1, .heads = 1, .kv_heads = 1, .seq_q = 128, .seq_kv = 1,
                                    .head_dim = 64, .dtype = TL_BF16, .causal = causal};
            d.schedule = (tl_flash_attn_schedule){.block_m = 192, .block_n = 128, .stages = 3, .threads = 384,
                                                  .warp_specialize = 1, .pingpong = pingpong,
                                                  .persistent = persistent};
            tl_kernel *k;
            assert_status(tl_op_flash_attn_build(tctx, &d, &k), TL_OK);
            char *src;
            assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
            const char *want[] = {"blocks of 384 threads", "a producer warpgroup and 384 consumer threads",
                                  "tl_setmaxnreg_dec<32>()", "tl_setmaxnreg_inc<160>()"};
            const char *turns[] = {"a turn on the tensor cores"};
            const char *ring[] = {"tl_mbar_wait(&tl_order[tl_wg]",
                                  "tl_mbar_arrive(&tl_order[((tl_wg + 1) % 3)])", "a turn on the tensor cores"};
            test_expect_text(src, "three consumer warpgroups", want, TEST_COUNT(want), pingpong ? NULL : turns,
                             pingpong ? 0 : TEST_COUNT(turns));
            if (pingpong) {
                test_expect_text(src, "three groups taking turns", ring, TEST_COUNT(ring), NULL, 0);
                const char *order = strstr(src, "*const tl_order = ");
                assert_non_null(order);
                const char *eol = strchr(order, '\n');
                assert_non_null(eol);
                if (!strstr(order, "// 3 mbarriers") || strstr(order, "// 3 mbarriers") > eol)
                    fail_msg("the order mbarriers are not three: %.*s", (int)(eol - order), order);
            }
            tl_free_host(src);
            tl_kernel_destroy(k);
            const tl_program *p;
            if (tl_op_flash_attn_program(tctx, &d, &p) != TL_OK)
                fail_msg("causal %d persistent %d pingpong %d: %s", causal, persistent, pingpong, tl_ctx_error(tctx));
            size_t n;
            assert_memory_equal(tl_program_cubin(p, &n), "\x7f" "ELF", 4);
        }
    tl_ctx_destroy(tctx);
}

/* On sm_80 (mma.sync) the default is four warps of 32 rows up to head_dim
 * 128 (128 keys a tile at 64, 64 at 128) and eight of 16 at 256; the gemms' ldmatrix take a shared address
 * plus one of four per-thread swizzled offsets (tl_swz4), and each K/V
 * copy one global pointer a thread stepped by whole rows. */
static void test_sm80_default(void **state)
{
    (void)state;
    tl_ctx *c80 = test_offline_ctx("sm_80");
    const int64_t dims[] = {64, 128, 256, 64};
    for (int i = 0; i < 4; i++) {
        tl_flash_attn_desc d = {.batch = 1, .heads = 8, .kv_heads = 2, .seq_q = 1000, .seq_kv = 3000,
                                .head_dim = dims[i], .dtype = TL_BF16, .causal = i % 2};
        tl_flash_attn_schedule s = tl_op_flash_attn_schedule(c80, &d);
        assert_int_equal(s.threads, dims[i] > 128 ? 256 : 128);
        assert_int_equal(s.block_m, 128);
        assert_int_equal(s.block_n, dims[i] > 128 ? 32 : dims[i] > 64 ? 64 : 128);
        assert_int_equal(s.warp_specialize, 0);
        const tl_program *p;
        if (tl_op_flash_attn_program(c80, &d, &p) != TL_OK)
            fail_msg("d%lld: %s", (long long)dims[i], tl_ctx_error(c80));
        const char *src = tl_program_source(p);
        const char *want[] = {"tl_swz4<", "tl_ldsm_x4(tl_af[tl_i], tl_A + 2 * tl_sa.at(tl_i * 16, tl_k));",
                              "tl_ldsm_x4_trans(tl_r4, tl_B + 2 * tl_sb.at(tl_k, tl_j * 8));",
                              "tl_cp_async16(Ks + (", "tl_g + tl_c * tl_gstep"};
        test_expect_text(src, "sm_80 FlashAttention", want, TEST_COUNT(want), NULL, 0);
        assert_null(strstr(src, "tl_ldmatrix_x4"));
    }
    tl_ctx_destroy(c80);
}

/* tl_op_build("flash_attn") (what `tilec source flash_attn` prints) is the
 * long sequences' default: on sm_90a FlashAttention-3's 176-key tile on two
 * rings in persistent CTAs, the one kernel unsplit; on sm_80 the mma.sync
 * kernel. */
static void test_op_build_is_long_default(void **state)
{
    (void)state;
    const char *targets[] = {"sm_90a", "sm_80"};
    for (int t = 0; t < 2; t++) {
        tl_ctx *c = test_offline_ctx(targets[t]);
        tl_kernel *k;
        char *src;
        assert_status(tl_op_build(c, "flash_attn", TL_F16, &k), TL_OK);
        assert_status(tl_kernel_source(k, targets[t], &src), TL_OK);
        assert_non_null(strstr(src, "kernel 'flash_attn_f16_d128'"));
        if (t == 0) {
            const char *want[] = {"m64n176k16", "Ks = ", "Vs = ", "persistent CTAs"};
            test_expect_text(src, "tl_op_build flash_attn sm_90a", want, TEST_COUNT(want), NULL, 0);
        } else
            assert_non_null(strstr(src, "tl_cp_async16(Ks + ("));
        tl_free_host(src);
        tl_kernel_destroy(k);
        assert_status(tl_op_build(c, "flash_attn", TL_F32, &k), TL_ERR_DTYPE);
        tl_ctx_destroy(c);
    }
}

/* sm_86 and sm_89 (99 KB of shared memory a block): every head_dim's
 * default compiles; at 256 the block is 64 rows on four warps (128 rows'
 * Q tile and K/V ring, 128 KB, would not fit). A schedule query after a
 * failed call leaves the failure's message (the ops read the SM count
 * from the context, not through a device query that fails offline). */
static void test_small_shared_memory_targets(void **state)
{
    (void)state;
    const char *targets[] = {"sm_86", "sm_89"};
    for (int t = 0; t < 2; t++) {
        tl_ctx *c = test_offline_ctx(targets[t]);
        for (int64_t dim = 64; dim <= 256; dim *= 2) {
            tl_flash_attn_desc d = {.batch = 2, .heads = 8, .kv_heads = 8, .seq_q = 1000, .seq_kv = 1000,
                                    .head_dim = dim, .dtype = TL_F16, .causal = dim == 128};
            tl_flash_attn_schedule s = tl_op_flash_attn_schedule(c, &d);
            assert_int_equal(s.block_m, dim > 128 ? 64 : 128);
            assert_int_equal(s.threads, 128);
            const tl_program *p;
            if (tl_op_flash_attn_program(c, &d, &p) != TL_OK)
                fail_msg("%s d%lld: %s", targets[t], (long long)dim, tl_ctx_error(c));
        }
        tl_flash_attn_desc d = {.batch = 1, .heads = 1, .kv_heads = 1, .seq_q = 8, .seq_kv = 8, .head_dim = 64,
                                .dtype = TL_F16};
        assert_status(tl_op_flash_attn(c, &d, 0, 0, 0, 0, 0, NULL), TL_ERR_INVALID_ARG);
        assert_non_null(strstr(tl_ctx_error(c), "q is a null device pointer"));
        assert_int_equal(tl_op_flash_attn_schedule(c, &d).threads, 128);
        tl_gemm_desc g = {.m = 64, .n = 64, .k = 64, .in_dtype = TL_F16, .out_dtype = TL_F16};
        assert_true(tl_op_gemm_schedule(c, &g).block_m > 0);
        assert_non_null(strstr(tl_ctx_error(c), "q is a null device pointer"));
        tl_ctx_destroy(c);
    }
}

/* Two stages without a producer on sm_90a: the loop is plain (the P V
 * group of one iteration runs into the next, leaving no stage to fill
 * ahead), its K and V copies are 16-byte cp.async chunks, not element by
 * element, and V is overwritten only after every warpgroup's P V group is
 * done: each waits for its own, then the block barrier, then the copy. */
static void test_plain_loop_two_stages(void **state)
{
    (void)state;
    tl_flash_attn_desc d = {.batch = 1, .heads = 2, .kv_heads = 2, .seq_q = 300, .seq_kv = 500, .head_dim = 128,
                            .dtype = TL_BF16, .causal = 1,
                            .schedule = {.block_m = 128, .block_n = 128, .stages = 2, .threads = 256}};
    tl_kernel *k;
    assert_status(tl_op_flash_attn_build(ctx, &d, &k), TL_OK);
    char *src;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    const char *want[] = {"tl_pipelined: plain loop", "tl_copy K tile (128x128) -> Ks: 16-byte cp.async chunks",
                          "tl_copy V tile (128x128) -> Vs: 16-byte cp.async chunks"};
    test_expect_text(src, "the plain loop", want, TEST_COUNT(want), NULL, 0);
    const char *v = strstr(src, "tl_copy V tile");
    assert_non_null(v);
    const char *wait = strstr(src, "tl_wgmma_wait<0>();\n        __syncthreads();\n        { // tl_copy V tile");
    if (!wait)
        fail_msg("no wgmma wait and barrier, in that order, before the V copy");
    tl_free_host(src);
    tl_kernel_destroy(k);
}

/* On sm_90a the default is warp-specialised: a TMA producer and two
 * consumer warpgroups taking turns at each tl_gemm (an mbarrier wait
 * before it, an arrival for the other group after it), P taken from
 * registers by the second wgmma; O stored 16 bytes a thread where its
 * rows allow. */
static void test_sm90a_lowering(void **state)
{
    (void)state;
    tl_flash_attn_desc d = {.batch = 1, .heads = 1, .kv_heads = 1, .seq_q = 128, .seq_kv = 1, .head_dim = 128,
                            .dtype = TL_BF16, .causal = 1};
    tl_kernel *k;
    assert_status(tl_op_flash_attn_build(ctx, &d, &k), TL_OK);
    char *src;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    /* the maximum moves by more than 8 (exp2's units) or not at all, and O's
     * rescale is skipped where its factors are all 1 (64 registers a thread) */
    const char *want[] = {"tl_tma_load_4d(", "_rs(acc", "tl_setmaxnreg_inc<", "tl_shfl_xor(", "tl_exp2_approx(",
                          "tl_mbar_wait(&tl_order[tl_wg]", "tl_mbar_arrive(&tl_order[(1 - tl_wg)]", "> 8.0f) ? m[",
                          "if (alpha[0] != 1.0f || alpha[1] != 1.0f) // a factor of 1 everywhere would leave acc",
                          /* O's rows 16 bytes a store where they are aligned: the quad's pairs transposed */
                          "tl_O_s2 % 8 == 0 && tl_org1 % 8 == 0", "tl_quad_transpose4(tl_v.w, tl_q);"};
    test_expect_text(src, "FlashAttention source", want, TEST_COUNT(want), NULL, 0);
    assert_null(strstr(src, "__syncthreads();\n        // tl_pipelined")); /* no CTA barrier in the consumers' loop */
    /* two turns an iteration, one per tl_gemm */
    const char *turn = "a turn on the tensor cores";
    const char *first = strstr(src, turn), *second = first ? strstr(first + 1, turn) : NULL;
    assert_non_null(second);
    assert_null(strstr(second + 1, turn));
    tl_free_host(src);
    tl_kernel_destroy(k);
}

/* The ring's layout follows the schedule: D = 64 non-causal takes three
 * groups of 64 rows (192 a block) on 128 keys (192 keys at two stages
 * from 8192 keys, causal too); causal below that, two groups on 192
 * keys a tile where the last tile's padding costs less than the wider tile
 * gains (2048 keys, at four stages; 128 below, at three); from 2048 keys (4096 causal) D =
 * 128 takes two stages of 176 keys, and K and V get rings of their own
 * (twice the mbarriers; K's slot released in its own iteration right after
 * the wait for S = Q K^T, V's in the next); three stages keep one ring; D
 * 256 (two stages, no turns) splits too. Q is the producer's load, ahead
 * of the ring's; persistent CTAs (non-causal, D 64 up to 4096 keys, D 128
 * up to 8192, blocks dealt in turn; causal, and D 256 up to 4096 keys,
 * blocks from a counter) hand its slot back after each block's loop. */
static void test_ring_layout(void **state)
{
    (void)state;
    tl_ctx *tctx = test_offline_ctx("sm_90a");
    static const struct {
        int64_t dim, seq;
        int causal;
        const char *bn;
        bool split;
        int persistent, stages;
    } rows[] = {{128, 8192, 0, "128x176", true, 1, 2},  {128, 2048, 0, "128x176", true, 1, 2},
                {128, 8192, 1, "128x176", true, 2, 2},  {128, 4096, 1, "128x176", true, 2, 2},
                {128, 1024, 0, "128x128", false, 1, 3}, {64, 8192, 0, "192x192", true, 0, 2},
                {64, 4096, 0, "192x128", false, 1, 3},  {128, 16384, 0, "128x176", true, 0, 2},
                {256, 4096, 0, "128x64", true, 2, 2},   {64, 1024, 0, "192x128", false, 1, 3},
                {64, 512, 1, "128x128", false, 2, 3},   {64, 2048, 1, "128x192", false, 2, 4},
                {64, 4096, 1, "128x192", false, 2, 4},  {64, 8192, 1, "192x192", true, 2, 2}};
    for (size_t i = 0; i < TEST_COUNT(rows); i++) {
        tl_flash_attn_desc d = {.batch = 1, .heads = 1, .kv_heads = 1, .seq_q = rows[i].seq, .seq_kv = rows[i].seq,
                                .head_dim = rows[i].dim, .dtype = TL_BF16, .causal = rows[i].causal};
        tl_kernel *k;
        assert_status(tl_op_flash_attn_build(tctx, &d, &k), TL_OK);
        char *src;
        assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
        char bn[32];
        tl_flash_attn_schedule s = tl_op_flash_attn_schedule(tctx, &d);
        snprintf(bn, sizeof bn, "%dx%d", s.block_m, s.block_n);
        if (strcmp(bn, rows[i].bn) != 0 || s.stages != rows[i].stages)
            fail_msg("d%lld seq %lld causal %d: schedule %s at %d stages, want %s at %d", (long long)rows[i].dim,
                     (long long)rows[i].seq, rows[i].causal, bn, s.stages, rows[i].bn, rows[i].stages);
        const char *note = strstr(src, "the slots of the tiles read so far released (2 rings");
        if ((note != NULL) != rows[i].split)
            fail_msg("d%lld seq %lld causal %d: rings of their own %d, want %d", (long long)rows[i].dim,
                     (long long)rows[i].seq, rows[i].causal, note != NULL, rows[i].split);
        char bars[64];
        snprintf(bars, sizeof bars, "// %d mbarriers", s.stages * (rows[i].split ? 2 : 1));
        const char *full = strstr(src, "*const tl_full");
        assert_non_null(full);
        assert_non_null(strstr(full, bars));
        if (rows[i].split) {
            /* in the loop: the wait for S (depth 0), K's slot of this iteration, V's of the last */
            char k_rel[64], v_rel[64];
            snprintf(v_rel, sizeof v_rel, "%% %d) + %d)]);", s.stages, s.stages);
            snprintf(k_rel, sizeof k_rel, "tl_mbar_arrive(&tl_empty[tl_st");
            const char *w0 = strstr(note, "tl_wgmma_wait<0>();"), *kr = strstr(note, k_rel), *vr = strstr(note, v_rel);
            assert_true(w0 && kr && vr && w0 < kr && kr < vr);
            assert_true(strstr(src, "tl_gemm acc += P * Vs") > vr);
            /* no turn of each gemm's own: with the slots released early two stages need none */
            assert_null(strstr(src, "a turn on the tensor cores of its own"));
        }
        /* Q is the producer's TMA load on a one-slot ring of its own, which a persistent CTA's
         * consumers hand back for the next block's in their loop's last iteration, once its
         * S = Q K^T is done (before that tile's softmax) */
        char expect[64];
        snprintf(expect, sizeof expect, "tl_mbar_expect(&tl_pre_full[0], %lld);", (long long)(s.block_m * rows[i].dim * 2));
        const char *qe = strstr(src, expect), *ql = strstr(src, "tl_tma_load_4d(Qs + 0, ");
        const char *kl = strstr(src, "tl_tma_load_4d(Ks + ");
        assert_true(qe && ql && kl && qe < ql && ql < kl); /* Q before the ring's first tiles */
        assert_null(strstr(src, "tl_cp_async16(Qs"));
        const char *qw = strstr(src, "tl_mbar_wait(&tl_pre_full[0], ");
        assert_true(qw && qw < strstr(src, "// tl_pipelined, consumer side"));
        bool back = strstr(src, "tl_mbar_arrive(&tl_pre_empty[0]);") && strstr(src, "tl_mbar_wait(&tl_pre_empty[0], ");
        assert_int_equal(s.persistent, rows[i].persistent);
        if (back) {
            const char *loop = strstr(src, "// tl_pipelined, consumer side");
            const char *rel = strstr(src, "tl_mbar_arrive(&tl_pre_empty[0]);");
            const char *done = loop ? strstr(loop, "tl_wgmma_wait<0>();") : NULL;
            const char *soft = loop ? strstr(loop, "tl_reduce_max S") : NULL;
            assert_true(loop && done && soft && loop < done && done < rel && rel < soft);
            const char *last = strstr(done, "- 1LL)) && (tl_lane == 0)) {");
            assert_true(last && last < rel); /* the last iteration's */
            /* after the loop only where it ran no iteration */
            const char *empty = strstr(rel + 1, "tl_mbar_arrive(&tl_pre_empty[0]);");
            const char *guard = strstr(soft, " == 0LL) && (tl_lane == 0)) {");
            assert_true(empty && guard && guard < empty);
        }
        if (back != (s.persistent != 0))
            fail_msg("d%lld seq %lld causal %d: Q's slot handed back %d, persistent %d", (long long)rows[i].dim,
                     (long long)rows[i].seq, rows[i].causal, back, s.persistent);
        tl_free_host(src);
        tl_kernel_destroy(k);
        const tl_program *p;
        if (tl_op_flash_attn_program(tctx, &d, &p) != TL_OK)
            fail_msg("d%lld seq %lld causal %d: %s", (long long)rows[i].dim, (long long)rows[i].seq, rows[i].causal,
                     tl_ctx_error(tctx));
    }
    tl_ctx_destroy(tctx);
}

/* tl_use_pingpong(k, 2): each consumer group issues S = Q K^T of tile j
 * and O += P V of tile j - 1 in one turn and runs tile j's softmax while
 * P V is on the tensor cores: the loop is rotated (a prologue with tile
 * 0's S and softmax, an epilogue with the last P V), and the softmax
 * waits for S alone (wgmma wait 1) before its first read. Compiled for
 * every head_dim, causal or not; other modes are refused. */
static void test_overlap_lowering(void **state)
{
    (void)state;
    tl_ctx *tctx = test_offline_ctx("sm_90a");
    for (int64_t dim = 64; dim <= 128; dim *= 2)
        for (int causal = 0; causal < 2; causal++) {
            tl_flash_attn_desc d = {.batch = 1, .heads = 1, .kv_heads = 1, .seq_q = 128, .seq_kv = 1, .head_dim = dim,
                                    .dtype = TL_BF16, .causal = causal};
            d.schedule = tl_op_flash_attn_schedule(tctx, &d);
            d.schedule.pingpong = 2;
            d.schedule.persistent = 0; /* (persistent CTAs do not rotate the loop: 2 acts as 1) */
            tl_kernel *k;
            assert_status(tl_op_flash_attn_build(tctx, &d, &k), TL_OK);
            char *src;
            assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
            const char *loop = strstr(src, "consumer side, rotated");
            assert_non_null(loop);
            const char *s_gemm = strstr(loop, "tl_gemm S = Qs * Ks^T"), *o_gemm = strstr(loop, "tl_gemm acc += P * Vs");
            const char *wait1 = strstr(loop, "tl_wgmma_wait<1>();"), *rescale = strstr(loop, "acc[tl_r] = (acc[tl_r] *");
            assert_true(s_gemm && o_gemm && wait1 && rescale);
            assert_true(s_gemm < o_gemm && o_gemm < wait1 && wait1 < rescale);
            /* the epilogue's P V, after the loop */
            assert_non_null(strstr(rescale, "tl_gemm acc += P * Vs"));
            tl_free_host(src);
            tl_kernel_destroy(k);
            const tl_program *p;
            if (tl_op_flash_attn_program(tctx, &d, &p) != TL_OK)
                fail_msg("d%lld causal %d overlap: %s", (long long)dim, causal, tl_ctx_error(tctx));
        }
    tl_kernel *k = tl_kernel_new(tctx, "bad_mode");
    tl_use_pingpong(k, 3);
    assert_status(tl_kernel_status(k), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_kernel_error(k), "tl_use_pingpong"));
    tl_kernel_destroy(k);
    tl_ctx_destroy(tctx);
}

/* schedule.persistent (sm_90a): the consumers and the producer walk the
 * CTA's blocks in a tile loop; the ring's positions and the turns run on
 * across blocks (block p's first turn waits for the other group's last one
 * of block p - 1), as running sums where the blocks' trip counts differ
 * (causal); O goes out from registers while the groups take turns, and
 * without turns through a TMA staging tile at D = 64 (D = 128 has no room
 * for one beside its ring). Compiled for both, causal and not. */
static void test_persistent_lowering(void **state)
{
    (void)state;
    tl_ctx *tctx = test_offline_ctx("sm_90a");
    for (int64_t dim = 64; dim <= 128; dim *= 2) {
        tl_flash_attn_desc d = {.batch = 1, .heads = 1, .kv_heads = 1, .seq_q = 128, .seq_kv = 1, .head_dim = dim,
                                .dtype = TL_BF16};
        d.schedule = tl_op_flash_attn_schedule(tctx, &d);
        d.schedule.persistent = 1;
        if (dim == 64) /* (its non-causal default is three groups without turns: two taking turns here) */
            d.schedule.block_m = 128, d.schedule.threads = 256, d.schedule.pingpong = 1;
        tl_kernel *k;
        assert_status(tl_op_flash_attn_build(tctx, &d, &k), TL_OK);
        char *src;
        assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
        const char *want[] = {"persistent CTAs", "this CTA's blocks", "(tl_p * tl_n", "(tl_p * (tl_n"};
        test_expect_text(src, "persistent FlashAttention", want, TEST_COUNT(want), NULL, 0);
        /* the groups take turns: O goes out from registers, 16 bytes a lane, not through a TMA
         * staging tile whose barriers would realign them at every block's end */
        assert_null(strstr(src, "tl_stage_O"));
        assert_non_null(strstr(src, "tl_quad_transpose4("));
        tl_free_host(src);
        tl_kernel_destroy(k);
        /* without turns, D 64 stages O for TMA; D 128's ring leaves no room for the tile */
        d.schedule.pingpong = 0;
        assert_status(tl_op_flash_attn_build(tctx, &d, &k), TL_OK);
        assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
        if (dim == 64)
            assert_non_null(strstr(src, "tl_stage_O"));
        else
            assert_null(strstr(src, "tl_stage_O"));
        tl_free_host(src);
        tl_kernel_destroy(k);
        d.schedule.pingpong = 1;
        const tl_program *p;
        if (tl_op_flash_attn_program(tctx, &d, &p) != TL_OK)
            fail_msg("d%lld persistent: %s", (long long)dim, tl_ctx_error(tctx));
        /* 2 stages: each gemm a turn of its own (turn numbers p n G + i G + j) */
        d.schedule.stages = 2;
        if (tl_op_flash_attn_program(tctx, &d, &p) != TL_OK)
            fail_msg("d%lld persistent, 2 stages: %s", (long long)dim, tl_ctx_error(tctx));
        /* causal: the blocks' loops run different trip counts, so the ring's positions and the
         * turns' numbers are running sums over the CTA's earlier blocks (a turn spans the loop's
         * end: n + 1 turns a block whose loop runs, none for one whose loop runs no iteration) */
        d.causal = 1;
        d.schedule.stages = 3;
        assert_status(tl_op_flash_attn_build(tctx, &d, &k), TL_OK);
        assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
        const char *run[] = {"tl_run_sum += tl_run_n; tl_run_nonempty += tl_run_n > 0;", "(tl_run + tl_run_blocks)",
                             "(int)((tl_run + tl_i"};
        const char *uniform[] = {"(tl_p * tl_n", "(tl_p * (tl_n"};
        test_expect_text(src, "causal persistent FlashAttention", run, TEST_COUNT(run), uniform, TEST_COUNT(uniform));
        tl_free_host(src);
        tl_kernel_destroy(k);
        if (tl_op_flash_attn_program(tctx, &d, &p) != TL_OK)
            fail_msg("d%lld causal persistent: %s", (long long)dim, tl_ctx_error(tctx));
    }
    tl_ctx_destroy(tctx);
}

static void test_descriptor_errors(void **state)
{
    (void)state;
    tl_flash_attn_desc ok = {.batch = 1, .heads = 4, .kv_heads = 2, .seq_q = 8, .seq_kv = 8, .head_dim = 64,
                             .dtype = TL_BF16};
    struct { tl_flash_attn_desc d; tl_status st; const char *why; } bad[] = {
        {ok, TL_ERR_INVALID_ARG, "not a multiple of kv_heads"},
        {ok, TL_ERR_UNSUPPORTED, "head_dim = 96"},
        {ok, TL_ERR_DTYPE, "bf16 or f16"},
        {ok, TL_ERR_INVALID_ARG, "sequence stride"},
    };
    bad[0].d.kv_heads = 3;
    bad[1].d.head_dim = 96;
    bad[2].d.dtype = TL_F32;
    bad[3].d.q_stride[0] = 1, bad[3].d.q_stride[2] = 8;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tl_kernel *k;
        assert_status(tl_op_flash_attn_build(ctx, &bad[i].d, &k), bad[i].st);
        if (!strstr(tl_ctx_error(ctx), bad[i].why) || strncmp(tl_ctx_error(ctx), "tl_op_flash_attn_build:", 23))
            fail_msg("case %zu: '%s'", i, tl_ctx_error(ctx));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interpreter_matches_reference),
        cmocka_unit_test(test_rows_without_keys_and_lse),
        cmocka_unit_test(test_cubins_sm80_sm90a),
        cmocka_unit_test(test_three_consumer_groups),
        cmocka_unit_test(test_sm80_default),
        cmocka_unit_test(test_op_build_is_long_default),
        cmocka_unit_test(test_small_shared_memory_targets),
        cmocka_unit_test(test_plain_loop_two_stages),
        cmocka_unit_test(test_sm90a_lowering),
        cmocka_unit_test(test_overlap_lowering),
        cmocka_unit_test(test_ring_layout),
        cmocka_unit_test(test_persistent_lowering),
        cmocka_unit_test(test_descriptor_errors),
        cmocka_unit_test(test_split_keys),
        cmocka_unit_test(test_split_choice),
        cmocka_unit_test(test_tail_choice),
    };
    test_apply_filter();
    return cmocka_run_group_tests(tests, offline_setup, ctx_teardown);
}
