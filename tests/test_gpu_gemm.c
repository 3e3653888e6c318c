/* test_gpu_gemm.c - the GPU tier of the prebuilt GEMM: tl_op_gemm for every
 * input type x output type x layout x epilogue x bias at small aligned and
 * ragged sizes against a float64 reference computed on the host from the
 * same random inputs (tl_random_host is bit-identical to tl_random_fill);
 * element-aligned but not 16-byte-aligned operands; argument errors;
 * several schedules; and (not under TILEC_TEST_SMALL=1) 4096^3 against
 * cuBLAS. tl_op_gemm_ex: leading dimensions, alpha, misaligned rows and
 * pointers, strided batches with gaps, beta, shared operands, arrays of
 * pointers in device memory, against float64 and, in the same run,
 * tl_baseline_gemm_ex (cuBLAS); 8 x 1024x1024x512 batches against cuBLAS.
 * 8-bit inputs (sm_90a): both formats, each schedule kind, ragged sizes,
 * bias, GELU and scales against float64 on the decoded codes; the device's
 * 8-bit conversions against the host's bit for bit; the cuBLASLt FP8
 * baseline against float64. On sm_90a also the mma.sync path (sm_80's)
 * through a plain sm_90 context. Outputs are poisoned before every run and the bytes around them
 * must stay poisoned. Every test skips, saying why, where there is no GPU. */
#include "fixture.h"
#include "precompile.h"

#include <math.h>
#include <stdbool.h>
#include <time.h>


#define PAD 32 /* poisoned elements after C (and before it, when offset) */

static uint64_t dalloc(size_t bytes)
{
    uint64_t p = 0;
    assert_status(tl_malloc(ctx, bytes ? bytes : 1, &p), TL_OK);
    return p;
}

static const char *epi_name(tl_epilogue e)
{
    static const char *names[] = {"none", "relu", "gelu_erf", "gelu_tanh"};
    return (unsigned)e < 4 ? names[e] : "?";
}

/* ------------------------------------------------------------------------ */
/* A problem: random operands on the device and as doubles on the host      */
/* ------------------------------------------------------------------------ */

typedef struct problem {
    int64_t m, n, k;
    tl_dtype in;
    int off;                     /* element offset of every operand      */
    uint64_t a_buf, b_buf, bias_buf;
    uint64_t a, b, bias;         /* at the offset                        */
    double *ha, *hb, *hbias;     /* A [m,k]; B's memory (k n); bias [n]   */
    double *prod[2];             /* A B in double, B as [K,N] / as [N,K]  */
} problem;

/* n + off random elements from seed on both sides; the operand starts at
 * element off. */
static uint64_t random_operand(tl_dtype dt, int64_t n, int off, uint64_t seed, uint64_t *buf, double **host)
{
    size_t sz = tl_dtype_size(dt);
    int64_t total = n + off;
    *buf = dalloc((size_t)total * sz);
    assert_status(tl_random_fill(ctx, *buf, dt, total, seed, -1, 1, NULL), TL_OK);
    void *raw = malloc((size_t)total * sz);
    *host = malloc((size_t)(n ? n : 1) * sizeof **host);
    assert_true(raw && *host);
    assert_status(tl_random_host(raw, dt, total, seed, -1, 1), TL_OK);
    for (int64_t i = 0; i < n; i++)
        (*host)[i] = test_elem(dt, raw, i + off);
    free(raw);
    return *buf + (uint64_t)off * sz;
}

static void problem_init(problem *p, int64_t m, int64_t n, int64_t k, tl_dtype in, int off, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->m = m, p->n = n, p->k = k, p->in = in, p->off = off;
    p->a = random_operand(in, m * k, off, seed, &p->a_buf, &p->ha);
    p->b = random_operand(in, k * n, off, seed + 1, &p->b_buf, &p->hb);
    p->bias = random_operand(in, n, off, seed + 2, &p->bias_buf, &p->hbias);
}

static void problem_free(problem *p)
{
    tl_free(ctx, p->a_buf), tl_free(ctx, p->b_buf), tl_free(ctx, p->bias_buf);
    free(p->ha), free(p->hb), free(p->hbias), free(p->prod[0]), free(p->prod[1]);
}

/* A B in double, computed on first use for each layout of B. */
static const double *product(problem *p, int trans_b)
{
    if (p->prod[trans_b])
        return p->prod[trans_b];
    int64_t m = p->m, n = p->n, k = p->k;
    double *c = calloc((size_t)(m * n), sizeof *c);
    assert_non_null(c);
    for (int64_t i = 0; i < m; i++) {
        const double *arow = p->ha + i * k;
        double *crow = c + i * n;
        if (trans_b) { /* B [N, K]: dot products of rows */
            for (int64_t j = 0; j < n; j++) {
                const double *brow = p->hb + j * k;
                double s = 0;
                for (int64_t kk = 0; kk < k; kk++)
                    s += arow[kk] * brow[kk];
                crow[j] = s;
            }
        } else { /* B [K, N]: rows of B scaled and summed */
            for (int64_t kk = 0; kk < k; kk++) {
                const double *brow = p->hb + kk * n;
                double a = arow[kk];
                for (int64_t j = 0; j < n; j++)
                    crow[j] += a * brow[j];
            }
        }
    }
    p->prod[trans_b] = c;
    return c;
}

/* act(A B + bias) in double. */
static double *reference(problem *p, int trans_b, tl_epilogue epi, int has_bias)
{
    const double *prod = product(p, trans_b);
    int64_t mn = p->m * p->n;
    double *ref = malloc((size_t)mn * sizeof *ref);
    assert_non_null(ref);
    for (int64_t i = 0; i < mn; i++)
        ref[i] = test_act(epi, prod[i] + (has_bias ? p->hbias[i % p->n] : 0.0));
    return ref;
}

static double tolerance(tl_dtype in, tl_dtype out) { return in == TL_F16 && out == TL_F32 ? 2e-3 : 1e-2; }

/* Runs tl_op_gemm on p into a poisoned C and checks it against the
 * reference and the poison around it. */
static void check_gemm(problem *p, tl_dtype out, int trans_b, tl_epilogue epi, int has_bias,
                       const tl_gemm_schedule *sched)
{
    tl_gemm_desc d = {.m = p->m, .n = p->n, .k = p->k, .in_dtype = p->in, .out_dtype = out, .trans_b = trans_b,
                      .has_bias = has_bias, .epilogue = epi};
    if (sched)
        d.schedule = *sched;
    size_t sz = tl_dtype_size(out);
    int64_t mn = p->m * p->n, total = mn + p->off + PAD;
    uint64_t c_buf = dalloc((size_t)total * sz), c = c_buf + (uint64_t)p->off * sz;
    assert_status(tl_memset_u8(ctx, c_buf, 0xFF, (size_t)total * sz, NULL), TL_OK);
    char what[256];
    snprintf(what, sizeof what, "gemm %lldx%lldx%lld %s->%s %s %s%s off %d sched %dx%dx%d/%d/%d/%d cluster %dx%d",
             (long long)p->m, (long long)p->n, (long long)p->k, tl_dtype_name(p->in), tl_dtype_name(out),
             trans_b ? "NT" : "NN", epi_name(epi), has_bias ? "+bias" : "", p->off, d.schedule.block_m,
             d.schedule.block_n, d.schedule.block_k, d.schedule.stages, d.schedule.threads, d.schedule.swizzle,
             d.schedule.cluster_m, d.schedule.cluster_n);
    tl_status st = tl_op_gemm(ctx, &d, p->a, p->b, has_bias ? p->bias : 0, c, NULL);
    if (st == TL_OK)
        st = tl_synchronize(ctx);
    if (st != TL_OK)
        fail_msg("%s: %s: %s", what, tl_status_name(st), tl_ctx_error(ctx));
    unsigned char *host = malloc((size_t)total * sz);
    assert_non_null(host);
    assert_status(tl_memcpy_dtoh(ctx, host, c_buf, (size_t)total * sz), TL_OK);
    for (size_t i = 0; i < (size_t)p->off * sz; i++)
        if (host[i] != 0xFF)
            fail_msg("%s: byte %zu before C was written", what, i);
    for (size_t i = (size_t)(p->off + mn) * sz; i < (size_t)total * sz; i++)
        if (host[i] != 0xFF)
            fail_msg("%s: byte %zu after C was written", what, i - (size_t)(p->off + mn) * sz);
    double *ref = reference(p, trans_b, epi, has_bias);
    tl_span o = {.dtype = out, .n = mn, .host = host + (size_t)p->off * sz};
    tl_span r = {.dtype = TL_F64, .n = mn, .host = ref};
    tl_check_result res;
    assert_status(tl_check(ctx, &o, &r, tolerance(p->in, out), &res), TL_OK);
    if (!res.pass)
        fail_msg("%s: rel err %.3e (tol %.0e), max abs %.3e, %lld non-finite, first bad %lld: got %g want %g", what,
                 res.rel_err, tolerance(p->in, out), res.max_abs_err, (long long)res.nonfinite,
                 (long long)res.first_bad, res.first_bad >= 0 ? test_elem(out, o.host, res.first_bad) : 0.0,
                 res.first_bad >= 0 ? ref[res.first_bad] : 0.0);
    free(ref);
    free(host);
    tl_free(ctx, c_buf);
}

/* The two checks every schedule sweep makes in one layout: bf16 C plain,
 * and f32 C with bias + GELU. */
static void check_plain_and_fused(problem *p, int trans_b, const tl_gemm_schedule *sched)
{
    check_gemm(p, TL_BF16, trans_b, TL_EPI_NONE, 0, sched);
    check_gemm(p, TL_F32, trans_b, TL_EPI_GELU_TANH, 1, sched);
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */
/* ------------------------------------------------------------------------ */

static const tl_dtype in_types[] = {TL_BF16, TL_F16};
static const tl_dtype out_types[] = {TL_BF16, TL_F16, TL_F32};
static const tl_epilogue epis[] = {TL_EPI_NONE, TL_EPI_RELU, TL_EPI_GELU_ERF, TL_EPI_GELU_TANH};

/* Every combination at sizes from one element to several ragged blocks
 * (N = 255, 129 and K = 1, 40, 72 leave the rows unaligned: the
 * element-wise copy path). */
static void test_all_combinations(void **state)
{
    (void)state;
    NEED_GPU();
    const int64_t sizes[][3] = {{1, 1, 1}, {8, 8, 8}, {127, 255, 33}, {127, 255, 40}, {64, 64, 64}, {257, 129, 72}};
    uint64_t seed = 7000;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int i = 0; i < 2; i++, seed += 10) {
            problem p;
            problem_init(&p, sizes[s][0], sizes[s][1], sizes[s][2], in_types[i], 0, seed);
            for (int o = 0; o < 3; o++)
                for (int t = 0; t < 2; t++)
                    for (int e = 0; e < 4; e++)
                        for (int b = 0; b < 2; b++)
                            check_gemm(&p, out_types[o], t, epis[e], b, NULL);
            problem_free(&p);
        }
}

/* Operands aligned to their elements but not to 16 bytes. */
static void test_unaligned_operands(void **state)
{
    (void)state;
    NEED_GPU();
    for (int i = 0; i < 2; i++) {
        problem p;
        problem_init(&p, 127, 136, 40, in_types[i], 1, 7500 + 10 * (uint64_t)i);
        for (int t = 0; t < 2; t++) {
            check_gemm(&p, TL_F32, t, TL_EPI_GELU_ERF, 1, NULL);
            check_gemm(&p, in_types[i], t, TL_EPI_NONE, 0, NULL);
        }
        problem_free(&p);
    }
}

static void test_argument_errors(void **state)
{
    (void)state;
    NEED_GPU();
    problem p;
    problem_init(&p, 16, 16, 16, TL_BF16, 0, 7700);
    uint64_t c = dalloc(16 * 16 * 4);
    tl_gemm_desc d = {.m = 16, .n = 16, .k = 16, .in_dtype = TL_BF16, .out_dtype = TL_F32};
    tl_gemm_desc bad = d;
    bad.k = 0;
    assert_status(tl_op_gemm(ctx, &bad, p.a, p.b, 0, c, NULL), TL_ERR_INVALID_ARG);
    bad = d;
    bad.m = 0;
    assert_status(tl_op_gemm(ctx, &bad, p.a, p.b, 0, c, NULL), TL_ERR_INVALID_ARG);
    bad = d;
    bad.in_dtype = TL_F32;
    assert_status(tl_op_gemm(ctx, &bad, p.a, p.b, 0, c, NULL), TL_ERR_DTYPE);
    bad = d;
    bad.out_dtype = TL_I32;
    assert_status(tl_op_gemm(ctx, &bad, p.a, p.b, 0, c, NULL), TL_ERR_DTYPE);
    bad = d;
    bad.epilogue = (tl_epilogue)9;
    assert_status(tl_op_gemm(ctx, &bad, p.a, p.b, 0, c, NULL), TL_ERR_INVALID_ARG);
    assert_status(tl_op_gemm(ctx, NULL, p.a, p.b, 0, c, NULL), TL_ERR_INVALID_ARG);
    /* pointers: null, or not on an element boundary */
    assert_status(tl_op_gemm(ctx, &d, 0, p.b, 0, c, NULL), TL_ERR_INVALID_ARG);
    assert_status(tl_op_gemm(ctx, &d, p.a + 1, p.b, 0, c, NULL), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "a = 0x"));
    assert_status(tl_op_gemm(ctx, &d, p.a, p.b, 0, c + 2, NULL), TL_ERR_INVALID_ARG);
    bad = d;
    bad.has_bias = 1;
    assert_status(tl_op_gemm(ctx, &bad, p.a, p.b, 0, c, NULL), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "bias"));
    /* the baseline's own refusals */
    bad = d;
    bad.epilogue = TL_EPI_GELU_ERF;
    assert_status(tl_baseline_gemm(ctx, &bad, p.a, p.b, 0, c, NULL), TL_ERR_UNSUPPORTED);
    tl_free(ctx, c);
    problem_free(&p);
}

static const tl_gemm_schedule scheds[] = {
    {64, 64, 32, 2, 128, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {128, 128, 32, 3, 256, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {128, 256, 64, 4, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {128, 128, 64, 6, 128, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0}, /* ping-pong */
    {64, 256, 64, 5, 128, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0},
    {64, 128, 64, 4, 128, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0}, /* one warpgroup, 64-wide wgmma tiles */
    {128, 64, 64, 4, 128, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {128, 256, 64, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}, /* persistent, warp-specialised */
    {64, 128, 64, 3, 128, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0},
    {128, 128, 64, 5, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}, /* persistent on two consumer warpgroups */
    {256, 128, 64, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0}, /* the same, 128 rows each (B as [K, N] off the sectors) */
    {192, 128, 64, 4, 384, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0}, /* three consumer warpgroups taking turns */
};

/* A few schedules: small and large tiles, 2 to 6 stages, 128 to 384
 * threads, swizzle on and off, the ping-pong kernels (tl_use_pingpong: two
 * blocks of one warpgroup; three warpgroups of a block taking turns). */
static void test_schedules(void **state)
{
    (void)state;
    NEED_GPU();
    /* 200x264x136 is ragged but TMA-aligned for both layouts (the
     * ping-pong schedules need TMA; 257x129x72 takes them only with B as
     * [N, K] and falls back to the default schedule otherwise) */
    const int64_t sizes[][3] = {{257, 129, 72}, {200, 264, 136}, {1024, 1024, 1024}};
    int nsizes = small ? 2 : 3;
    for (int s = 0; s < nsizes; s++) {
        problem p;
        problem_init(&p, sizes[s][0], sizes[s][1], sizes[s][2], TL_BF16, 0, 7800 + 10 * (uint64_t)s);
        for (size_t c = 0; c < sizeof scheds / sizeof scheds[0]; c++)
            for (int t = 0; t < 2; t++)
                check_plain_and_fused(&p, t, &scheds[c]);
        problem_free(&p);
    }
}

/* Persistent CTAs with more than one block each (more blocks than SMs):
 * the producer's ring runs on across blocks, at ragged sizes (edges in
 * every dimension, K not a multiple of the K step), with an epilogue,
 * both layouts, twice (a ring position off by one between producer and
 * consumers shows as a wrong tile, a moving error as a race); dealt in
 * turn and taken from the counter (whose every launch must leave it zero
 * for the next). */
static void test_persistent_blocks(void **state)
{
    (void)state;
    NEED_GPU();
    static const tl_gemm_schedule ps[] = {
        {128, 128, 64, 3, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0},
        {64, 128, 64, 4, 128, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0},
        {128, 128, 64, 3, 256, 8, 0, 0, 0, 0, 2, 0, 0, 0, 0}, /* tiles from the counter, swizzled */
        {64, 128, 64, 4, 128, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0},
        {256, 128, 64, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 0, 0},
    };
    problem p;
    problem_init(&p, 1100, 2100, 264, TL_BF16, 0, 8100);
    for (int rep = 0; rep < 2; rep++)
        for (size_t c = 0; c < sizeof ps / sizeof ps[0]; c++)
            for (int t = 0; t < 2; t++)
                check_gemm(&p, TL_BF16, t, rep ? TL_EPI_GELU_TANH : TL_EPI_NONE, rep, &ps[c]);
    problem_free(&p);
}

/* Decode's matrix-vector kernel (schedule.gemv): the op's own choice for
 * M = 1 with B as [N, K], and explicit schedules (several rows of B a
 * block, K chunks of 512 to 4096, 64 to 256 threads, block_m above M) at
 * M of 1 to 8, ragged N and K (K of 1030: a chunk's last vector part past
 * K; K % 8 != 0: the element-wise safe variant), operands off their
 * 16-byte alignment, bias + GELU, bf16 and f32 C. */
static void test_gemv(void **state)
{
    (void)state;
    NEED_GPU();
    const struct {
        int64_t m, n, k;
        int off;
    } cases[] = {{1, 4096, 4096, 0}, {3, 1000, 1030, 0}, {4, 517, 2051, 1}, {8, 300, 4100, 0}, {2, 33, 64, 0}};
    static const tl_gemm_schedule gs[] = {
        {0, 1, 2048, 0, 128, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
        {8, 4, 512, 0, 256, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
        {0, 2, 1024, 0, 128, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
        {0, 1, 1024, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
    };
    for (int z = 0; z < (small ? 2 : 5); z++) {
        problem p;
        problem_init(&p, cases[z].m, cases[z].n, cases[z].k, TL_BF16, cases[z].off, 8500 + 10 * (uint64_t)z);
        tl_gemm_desc d = {.m = p.m, .n = p.n, .k = p.k, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = 1};
        tl_gemm_schedule own = tl_op_gemm_schedule(ctx, &d);
        if (p.m == 1)
            assert_int_equal(own.gemv, 1);
        if (z == 0) { /* the default at 1x4096x4096: its sums are no longer a register each per column
                         (77 registers, 12 blocks an SM; bench/NOTES.md session 34) */
            const tl_program *prog = NULL;
            tl_program_info info;
            assert_status(tl_op_gemm_program(ctx, &d, &prog), TL_OK);
            assert_status(tl_program_get_info(prog, &info), TL_OK);
            if (info.regs > 64 || (info.blocks_per_sm && info.blocks_per_sm < 16))
                fail_msg("gemv 1x4096x4096: %d registers, %d blocks an SM (expected <= 64, >= 16)", info.regs,
                         info.blocks_per_sm);
        }
        check_gemm(&p, TL_BF16, 1, TL_EPI_NONE, 0, NULL);
        check_gemm(&p, TL_F32, 1, TL_EPI_GELU_TANH, 1, NULL);
        for (size_t c = 0; c < sizeof gs / sizeof gs[0]; c++) {
            check_gemm(&p, TL_BF16, 1, TL_EPI_NONE, 0, &gs[c]);
            check_gemm(&p, TL_F32, 1, TL_EPI_GELU_TANH, 1, &gs[c]);
        }
        problem_free(&p);
    }
}


/* The product of one call into a new host copy (bytes of C). */
static unsigned char *gemm_bytes(problem *p, const tl_gemm_desc *d)
{
    size_t bytes = (size_t)(p->m * p->n) * tl_dtype_size(d->out_dtype);
    uint64_t c = dalloc(bytes);
    assert_status(tl_memset_u8(ctx, c, 0xFF, bytes, NULL), TL_OK);
    assert_status(tl_op_gemm(ctx, d, p->a, p->b, d->has_bias ? p->bias : 0, c, NULL), TL_OK);
    assert_status(tl_synchronize(ctx), TL_OK);
    unsigned char *host = malloc(bytes);
    assert_non_null(host);
    assert_status(tl_memcpy_dtoh(ctx, host, c, bytes), TL_OK);
    tl_free(ctx, c);
    return host;
}

/* The same call twice gives the same bytes (a sum whose order depended on
 * timing would not). */
static void assert_repeatable(problem *p, const tl_gemm_desc *d)
{
    unsigned char *x = gemm_bytes(p, d), *y = gemm_bytes(p, d);
    if (memcmp(x, y, (size_t)(p->m * p->n) * tl_dtype_size(d->out_dtype)) != 0)
        fail_msg("gemm %lldx%lldx%lld: two runs differ", (long long)p->m, (long long)p->n, (long long)p->k);
    free(x);
    free(y);
}

/* Stream-K (schedule.stream_k): the persistent CTAs split the tiles' K
 * steps between them. Sizes where most CTAs have no step at all (4 tiles
 * of 3 steps), where tiles are shared by two or three CTAs (81 tiles of 5
 * steps: 3.07 steps a CTA), and where each tile's 63 steps are split
 * four or five ways (the CTA that finishes a tile adds three or four
 * partial sums); both layouts, an epilogue, 128x256 / 128x128 tiles on
 * two consumer warpgroups and 64x128 on one. Then determinism: the same
 * call twice gives the same bits (the partial sums are added in CTA
 * order, not in the order they arrive). */
static void test_stream_k(void **state)
{
    (void)state;
    NEED_GPU();
    static const tl_gemm_schedule sk[] = {
        {128, 256, 64, 4, 256, 8, 0, 0, 0, 0, 1, 0, 0, 1, 0},
        {128, 128, 64, 5, 256, 8, 0, 0, 0, 0, 1, 0, 0, 1, 0},
        {64, 128, 64, 4, 128, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0},
    };
    const int64_t sizes[][3] = {{200, 264, 136}, {1100, 2100, 264}, {1000, 1000, 4000}};
    for (int z = 0; z < (small ? 2 : 3); z++) {
        problem p;
        problem_init(&p, sizes[z][0], sizes[z][1], sizes[z][2], TL_BF16, 0, 8300 + 10 * (uint64_t)z);
        for (size_t c = 0; c < sizeof sk / sizeof sk[0]; c++)
            for (int t = 0; t < 2; t++)
                check_plain_and_fused(&p, t, &sk[c]);
        tl_gemm_desc d = {.m = p.m, .n = p.n, .k = p.k, .in_dtype = TL_BF16, .out_dtype = TL_F32, .trans_b = 1,
                          .schedule = sk[0]};
        assert_repeatable(&p, &d);
        problem_free(&p);
    }
}

/* Clusters with TMA multicast of the shared tiles (sm_90a): pairs along M
 * sharing B's tiles, along N sharing A's, and 2 x 2 sharing both, at
 * ragged sizes whose tile counts are odd (the last cluster along each axis
 * has a block wholly past the edge), K not a multiple of the K step, an
 * epilogue, both layouts, twice (a slot freed before the whole cluster
 * read it shows as a moving error). */
static void test_cluster_multicast(void **state)
{
    (void)state;
    NEED_GPU();
    if (strcmp(tl_ctx_target(ctx), "sm_90a") != 0)
        skip();
    static const tl_gemm_schedule cs[] = {
        {.block_m = 64, .block_n = 128, .block_k = 64, .stages = 4, .threads = 128, .swizzle = 8, .cluster_m = 2},
        {.block_m = 128, .block_n = 128, .block_k = 64, .stages = 4, .threads = 256, .swizzle = 8, .cluster_n = 2},
        {.block_m = 64, .block_n = 128, .block_k = 64, .stages = 4, .threads = 128, .cluster_m = 2, .cluster_n = 2},
        {.block_m = 128, .block_n = 256, .block_k = 64, .stages = 4, .threads = 256, .swizzle = 8, .cluster_m = 2},
    };
    problem p;
    problem_init(&p, 1090, 1300, 264, TL_BF16, 0, 8200);
    for (int rep = 0; rep < 2; rep++)
        for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
            for (int tb = 0; tb < 2; tb++)
                check_gemm(&p, TL_BF16, tb, rep ? TL_EPI_GELU_TANH : TL_EPI_NONE, rep, &cs[c]);
    problem_free(&p);
}

/* The cases of test_decode_split (and of the precompile plan) */
static const struct decode_case {
    int64_t m, n, k;
    int off, split, swap, bk, bn; /* bk, bn: 0 for 64 and 16 (swapped) or 128 */
} decode_cases[] = {
    {1, 4096, 4096, 0, 0, 0, 0, 0}, {16, 1000, 2056, 0, 0, 0, 0, 0}, {64, 520, 3000, 0, 0, 0, 0, 0},
    {7, 300, 1030, 1, 5, 0, 0, 0},
    {7, 300, 1030, 1, 5, 1, 0, 0}, /* C^T, split, on the safe variant (K % 8) */
    {13, 200, 1100, 0, 0, 1, 0, 0}, /* C^T in one pass */
    {30, 700, 2104, 0, 0, 0, 0, 0}, /* the op's choice for M <= 32: C^T on 64x32 tiles */
    {8, 9000, 1040, 0, 0, 0, 0, 0}, /* the op's choice: 141 tiles unsplit, K steps of 128 */
    {9, 700, 1100, 0, 0, 1, 128, 0}, /* C^T, K steps of 128 (two boxes a row), K ragged */
    {30, 1000, 2104, 0, 2, 1, 128, 32}, /* C^T on 64x32x128 tiles in two slices (a cluster pair) */
};
#define N_DECODE_CASES (int)(sizeof decode_cases / sizeof decode_cases[0])

/* Case c's explicit schedule in *s, or 0 for the op's choice. */
static int decode_schedule(const struct decode_case *c, tl_gemm_schedule *s)
{
    int bk = c->bk ? c->bk : 64, bn = c->bn ? c->bn : c->swap ? 16 : 128;
    *s = (tl_gemm_schedule){64, bn, bk, c->swap && bk == 64 ? 8 : 4, 128, 8, 0, 0, c->split, c->swap, 0, 0, 0, 0, 0};
    return c->split || c->swap;
}

/* Decode shapes, where the op splits K or swaps A and B (M <= 64, K >=
 * 1024): its own choice at aligned and ragged sizes, with bias and GELU,
 * and explicit splits, swapped or not, of a K that TMA cannot read (the
 * safe variants) with operands off alignment; twice each, bit for bit the same (the slices
 * are added in a fixed order). */
static void test_decode_split(void **state)
{
    (void)state;
    NEED_GPU();
    int ncases = small ? 2 : N_DECODE_CASES;
    for (int i = 0; i < ncases; i++) {
        const struct decode_case *c = &decode_cases[i];
        problem p;
        problem_init(&p, c->m, c->n, c->k, TL_BF16, c->off, 7900 + 10 * (uint64_t)i);
        tl_gemm_schedule s;
        const tl_gemm_schedule *sched = decode_schedule(c, &s) ? &s : NULL;
        tl_gemm_desc d = {.m = p.m, .n = p.n, .k = p.k, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = 1};
        if (!sched && !strcmp(tl_ctx_target(ctx), "sm_90a")) { /* the Hopper heuristic's decode rows */
            tl_gemm_schedule own = tl_op_gemm_schedule(ctx, &d);
            assert_true(own.split_k > 1 || own.swap_ab || own.gemv);
        }
        /* a swapped schedule with B as [K, N] reads B^T as a transposed A: wgmma's (sm_90a) only */
        bool wgmma = !strcmp(tl_ctx_target(ctx), "sm_90a");
        for (int t = c->swap && !wgmma ? 1 : 0; t < 2; t++)
            check_plain_and_fused(&p, t, sched);
        /* the same call twice: the same bytes */
        d.schedule = sched ? s : (tl_gemm_schedule){0};
        d.out_dtype = TL_F32;
        assert_repeatable(&p, &d);
        problem_free(&p);
    }
}

/* 4096^3, bf16 in and out, against cuBLAS with an f32 output: as is, and
 * with bias + erf GELU applied to cuBLAS's result on the host. */
static void test_large_against_cublas(void **state)
{
    (void)state;
    NEED_GPU();
    if (small) {
        printf("  skip: TILEC_TEST_SMALL=1\n");
        skip();
    }
    const int64_t m = 4096, n = 4096, k = 4096, mn = m * n;
    problem p;
    memset(&p, 0, sizeof p);
    p.m = m, p.n = n, p.k = k, p.in = TL_BF16;
    p.a = random_operand(TL_BF16, m * k, 0, 7900, &p.a_buf, &p.ha);
    p.b = random_operand(TL_BF16, k * n, 0, 7901, &p.b_buf, &p.hb);
    p.bias = random_operand(TL_BF16, n, 0, 7902, &p.bias_buf, &p.hbias);
    uint64_t ref = dalloc((size_t)mn * 4), c = dalloc((size_t)mn * 2);
    float *href = malloc((size_t)mn * sizeof *href);
    double *want = malloc((size_t)mn * sizeof *want);
    assert_true(href && want);
    bool no_cublas = false;
    for (int t = 0; t < 2 && !no_cublas; t++) {
        tl_gemm_desc base = {.m = m, .n = n, .k = k, .in_dtype = TL_BF16, .out_dtype = TL_F32, .trans_b = t};
        tl_status st = tl_baseline_gemm(ctx, &base, p.a, p.b, 0, ref, NULL);
        if (st == TL_ERR_NO_CUBLAS) {
            printf("  skip: %s\n", tl_ctx_error(ctx));
            no_cublas = true;
            break;
        }
        if (st == TL_OK)
            st = tl_synchronize(ctx);
        if (st != TL_OK)
            fail_msg("cuBLAS: %s: %s", tl_status_name(st), tl_ctx_error(ctx));
        assert_status(tl_memcpy_dtoh(ctx, href, ref, (size_t)mn * 4), TL_OK);
        for (int64_t i = 0; i < mn; i++)
            want[i] = test_act(TL_EPI_GELU_ERF, (double)href[i] + p.hbias[i % n]);
        for (int v = 0; v < 2; v++) {
            tl_gemm_desc d = {.m = m, .n = n, .k = k, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = t,
                              .has_bias = v, .epilogue = v ? TL_EPI_GELU_ERF : TL_EPI_NONE};
            assert_status(tl_memset_u8(ctx, c, 0xFF, (size_t)mn * 2, NULL), TL_OK);
            st = tl_op_gemm(ctx, &d, p.a, p.b, p.bias, c, NULL);
            if (st == TL_OK)
                st = tl_synchronize(ctx);
            if (st != TL_OK)
                fail_msg("4096^3 %s: %s: %s", t ? "NT" : "NN", tl_status_name(st), tl_ctx_error(ctx));
            tl_span o = {.dtype = TL_BF16, .n = mn, .dptr = c};
            tl_span r = v ? (tl_span){.dtype = TL_F64, .n = mn, .host = want}
                          : (tl_span){.dtype = TL_F32, .n = mn, .dptr = ref};
            tl_check_result res;
            assert_status(tl_check(ctx, &o, &r, 1e-2, &res), TL_OK);
            printf("  4096^3 %s %s: rel err %.2e vs cuBLAS\n", t ? "NT" : "NN", v ? "bias+gelu_erf" : "plain",
                   res.rel_err);
            if (!res.pass)
                fail_msg("4096^3 %s %s: rel err %.3e, %lld non-finite, first bad %lld", t ? "NT" : "NN",
                         v ? "bias+gelu_erf" : "plain", res.rel_err, (long long)res.nonfinite,
                         (long long)res.first_bad);
        }
    }
    free(href), free(want);
    tl_free(ctx, ref), tl_free(ctx, c);
    problem_free(&p);
    if (no_cublas)
        skip();
}

/* ------------------------------------------------------------------------ */
/* tl_op_gemm_ex: leading dimensions, batches, alpha and beta                */
/* ------------------------------------------------------------------------ */

#define MAXB 6

/* A tl_op_gemm_ex call on the device with its host mirror: every buffer
 * random (C too: beta reads it, and the elements outside the entries must
 * keep their values), a strided call in one buffer per operand, a
 * pointer-array call in one buffer per entry and operand. */
typedef struct excall {
    tl_gemm_desc d;
    tl_gemm_args g;                    /* device pointers                     */
    int64_t lda, ldb, ldc, sa, sb, sc; /* effective                           */
    int off;                           /* elements before every matrix        */
    bool arrays;
    int nbuf;                          /* buffers: 1, or batch (arrays)       */
    size_t n[3];                       /* elements of an A, B, C buffer       */
    uint64_t dev[3][MAXB];             /* A, B, C buffers                     */
    unsigned char *host[3][MAXB];      /* their contents before the call      */
    uint64_t bias_dev, ptr_dev[3];     /* bias [N]; the arrays of pointers    */
    unsigned char *bias_host;
} excall;

static size_t ex_span(int64_t nb, int64_t stride, int64_t rows, int64_t ld, int64_t cols)
{
    return (size_t)((nb - 1) * stride + (rows - 1) * ld + cols);
}

/* Random contents of `n` elements (plus PAD) at `off` into a new buffer. */
static uint64_t ex_buffer(tl_dtype dt, size_t n, int off, uint64_t seed, unsigned char **host)
{
    size_t sz = tl_dtype_size(dt), total = n + (size_t)off + PAD;
    *host = malloc(total * sz);
    assert_non_null(*host);
    assert_status(tl_random_host(*host, dt, (int64_t)total, seed, -1, 1), TL_OK);
    uint64_t p = dalloc(total * sz);
    assert_status(tl_memcpy_htod(ctx, p, *host, total * sz), TL_OK);
    return p;
}

static void ex_init(excall *x, const tl_gemm_desc *d, const tl_gemm_args *shape, int off, uint64_t seed)
{
    memset(x, 0, sizeof *x);
    x->d = *d, x->g = *shape, x->off = off;
    int64_t M = d->m, N = d->n, K = d->k, nb = shape->batch;
    int64_t brows = d->trans_b ? N : K, bcols = d->trans_b ? K : N;
    x->lda = shape->lda ? shape->lda : K;
    x->ldb = shape->ldb ? shape->ldb : bcols;
    x->ldc = shape->ldc ? shape->ldc : N;
    x->arrays = shape->a_array != 0;
    int64_t per = x->arrays ? 1 : nb; /* entries per buffer */
    if (!x->arrays)
        x->sa = shape->stride_a, x->sb = shape->stride_b, x->sc = shape->stride_c;
    x->n[0] = ex_span(per, x->sa, M, x->lda, K);
    x->n[1] = ex_span(per, x->sb, brows, x->ldb, bcols);
    x->n[2] = ex_span(per, x->sc, M, x->ldc, N);
    x->nbuf = x->arrays ? (int)nb : 1;
    assert_true(x->nbuf <= MAXB);
    const tl_dtype types[3] = {d->in_dtype, d->in_dtype, d->out_dtype};
    uint64_t at[3][MAXB];
    for (int o = 0; o < 3; o++)
        for (int e = 0; e < x->nbuf; e++) {
            x->dev[o][e] = ex_buffer(types[o], x->n[o], off, seed + 10 * (uint64_t)e + (uint64_t)o, &x->host[o][e]);
            at[o][e] = x->dev[o][e] + (uint64_t)off * tl_dtype_size(types[o]);
        }
    x->bias_dev = ex_buffer(d->in_dtype, (size_t)N, 0, seed + 99, &x->bias_host);
    x->g.bias = d->has_bias ? x->bias_dev : 0;
    if (x->arrays) {
        for (int o = 0; o < 3; o++) {
            x->ptr_dev[o] = dalloc((size_t)nb * 8);
            assert_status(tl_memcpy_htod(ctx, x->ptr_dev[o], at[o], (size_t)nb * 8), TL_OK);
        }
        x->g.a_array = x->ptr_dev[0], x->g.b_array = x->ptr_dev[1], x->g.c_array = x->ptr_dev[2];
    } else {
        x->g.a = at[0][0], x->g.b = at[1][0], x->g.c = at[2][0];
    }
}

static void ex_free(excall *x)
{
    for (int o = 0; o < 3; o++)
        for (int e = 0; e < x->nbuf; e++) {
            tl_free(ctx, x->dev[o][e]);
            free(x->host[o][e]);
        }
    for (int o = 0; o < 3; o++)
        tl_free(ctx, x->ptr_dev[o]);
    tl_free(ctx, x->bias_dev);
    free(x->bias_host);
}

/* Element (e, i, j) of operand o (0 A [M,K], 1 B as stored, 2 C) before
 * the call: its buffer and element index there. */
static size_t ex_at(const excall *x, int o, int64_t e, int64_t i, int64_t j, int *buf)
{
    const int64_t ld[3] = {x->lda, x->ldb, x->ldc}, st[3] = {x->sa, x->sb, x->sc};
    *buf = x->arrays ? (int)e : 0;
    return (size_t)(x->off + (x->arrays ? 0 : e * st[o]) + i * ld[o] + j);
}

static double ex_val(const excall *x, int o, int64_t e, int64_t i, int64_t j)
{
    int b;
    size_t at = ex_at(x, o, e, i, j, &b);
    return test_elem(o == 2 ? x->d.out_dtype : x->d.in_dtype, x->host[o][b], (int64_t)at);
}

/* act(alpha A B + beta C + bias) for every element of every entry, in
 * double from the operands as stored. */
static double *ex_reference(const excall *x)
{
    int64_t M = x->d.m, N = x->d.n, K = x->d.k, nb = x->g.batch;
    double *ref = malloc(sizeof(double) * (size_t)(nb * M * N)), *arow = malloc(sizeof(double) * (size_t)K);
    assert_true(ref && arow);
    double alpha = (float)x->g.alpha, beta = (float)x->g.beta;
    for (int64_t e = 0, t = 0; e < nb; e++)
        for (int64_t i = 0; i < M; i++) {
            for (int64_t k = 0; k < K; k++)
                arow[k] = ex_val(x, 0, e, i, k);
            for (int64_t j = 0; j < N; j++, t++) {
                double acc = 0;
                for (int64_t k = 0; k < K; k++)
                    acc += arow[k] * (x->d.trans_b ? ex_val(x, 1, e, j, k) : ex_val(x, 1, e, k, j));
                double v = alpha * acc;
                if (beta != 0)
                    v += beta * ex_val(x, 2, e, i, j);
                if (x->d.has_bias)
                    v += test_elem(x->d.in_dtype, x->bias_host, j);
                ref[t] = test_act(x->d.epilogue, v);
            }
        }
    free(arow);
    return ref;
}

/* Whether element `at` of C buffer `buf` is in an entry. */
static bool ex_in_entry(const excall *x, int buf, size_t at)
{
    int64_t r0 = (int64_t)at - x->off;
    for (int64_t e = 0; e < (x->arrays ? 1 : x->g.batch); e++) {
        int64_t r = r0 - (x->arrays ? 0 : e * x->sc);
        if (r >= 0 && r / x->ldc < x->d.m && r % x->ldc < x->d.n)
            return true;
    }
    (void)buf;
    return false;
}

/* Runs the call (ours, or cuBLAS's when `baseline`) and checks every entry
 * against the reference and every other element of C against its value
 * before. Returns TL_OK, or the baseline's TL_ERR_NO_CUBLAS (skip) or
 * TL_ERR_UNSUPPORTED (cuBLASLt has no algorithm for it: noted). */
static tl_status ex_check(excall *x, const char *what, bool baseline)
{
    tl_status st = baseline ? tl_baseline_gemm_ex(ctx, &x->d, &x->g, NULL) : tl_op_gemm_ex(ctx, &x->d, &x->g, NULL);
    if (baseline && (st == TL_ERR_NO_CUBLAS || st == TL_ERR_UNSUPPORTED)) {
        printf("  %s: %s\n", st == TL_ERR_NO_CUBLAS ? "skip" : "note: cuBLAS refuses it", tl_ctx_error(ctx));
        return st;
    }
    if (st == TL_OK)
        st = tl_synchronize(ctx);
    if (st != TL_OK)
        fail_msg("%s%s: %s: %s", what, baseline ? " (cuBLAS)" : "", tl_status_name(st), tl_ctx_error(ctx));
    int64_t M = x->d.m, N = x->d.n, nb = x->g.batch;
    size_t sz = tl_dtype_size(x->d.out_dtype), total = x->n[2] + (size_t)x->off + PAD;
    double *got = malloc(sizeof(double) * (size_t)(nb * M * N));
    unsigned char *after[MAXB];
    assert_non_null(got);
    for (int b = 0; b < x->nbuf; b++) {
        after[b] = malloc(total * sz);
        assert_non_null(after[b]);
        assert_status(tl_memcpy_dtoh(ctx, after[b], x->dev[2][b], total * sz), TL_OK);
        for (size_t at = 0; at < total; at++)
            if (!ex_in_entry(x, b, at) && memcmp(after[b] + at * sz, x->host[2][b] + at * sz, sz))
                fail_msg("%s: element %zu of C buffer %d, outside every entry, was written", what, at, b);
    }
    for (int64_t e = 0, t = 0; e < nb; e++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++, t++) {
                int b;
                size_t at = ex_at(x, 2, e, i, j, &b);
                got[t] = test_elem(x->d.out_dtype, after[b], (int64_t)at);
            }
    double *ref = ex_reference(x);
    tl_span o = {.dtype = TL_F64, .n = nb * M * N, .host = got}, r = {.dtype = TL_F64, .n = nb * M * N, .host = ref};
    tl_check_result res;
    double tol = tolerance(x->d.in_dtype, x->d.out_dtype);
    assert_status(tl_check(ctx, &o, &r, tol, &res), TL_OK);
    if (!res.pass)
        fail_msg("%s%s: rel err %.3e (tol %.0e), %lld non-finite, first bad %lld (entry %lld): got %g want %g", what,
                 baseline ? " (cuBLAS)" : "", res.rel_err, tol, (long long)res.nonfinite, (long long)res.first_bad,
                 res.first_bad >= 0 ? (long long)(res.first_bad / (M * N)) : -1LL,
                 res.first_bad >= 0 ? got[res.first_bad] : 0.0, res.first_bad >= 0 ? ref[res.first_bad] : 0.0);
    for (int b = 0; b < x->nbuf; b++)
        free(after[b]);
    free(got), free(ref);
    return TL_OK;
}

/* The cases of the tests below (and of the precompile plan). */
typedef struct excase {
    int64_t m, n, k;
    tl_dtype in, out;
    int trans_b, has_bias;
    tl_epilogue epi;
    int off;             /* elements before every matrix (misaligned) */
    tl_gemm_args g;      /* the shape: lds, batch, strides, alpha, beta; a_array 1: pointer arrays */
    int pingpong;        /* the explicit ping-pong schedule instead of the op's */
    const char *what;
} excase;

static const tl_gemm_schedule pingpong_schedule = {128, 128, 64, 4, 128, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0};

/* batch 0 and alpha 0 below stand for 1 (excase_shape) */
#define ARGS(...) ((tl_gemm_args){__VA_ARGS__})

static const excase excases[] = {
    /* leading dimensions wider than the rows, alpha, ragged sizes */
    {257, 129, 72, TL_BF16, TL_BF16, 0, 1, TL_EPI_GELU_TANH, 0, ARGS(.lda = 80, .ldb = 136, .ldc = 144, .alpha = 0.5),
     0, "ld 80/136/144 alpha 0.5 NN"},
    {257, 129, 72, TL_BF16, TL_F32, 1, 0, TL_EPI_NONE, 0, ARGS(.lda = 88, .ldb = 96, .ldc = 136, .alpha = -2),
     0, "ld 88/96/136 alpha -2 NT"},
    {200, 264, 136, TL_F16, TL_F16, 1, 1, TL_EPI_RELU, 0, ARGS(.lda = 136, .ldb = 136, .ldc = 300), 1,
     "ldc 300 NT ping-pong"},
    /* misaligned: leading dimensions and pointers off 16 bytes take the element-wise variant */
    {127, 136, 40, TL_BF16, TL_F32, 0, 1, TL_EPI_GELU_ERF, 0, ARGS(.lda = 41, .ldb = 137, .ldc = 139), 0,
     "odd ld (element-wise copies)"},
    {127, 136, 40, TL_BF16, TL_BF16, 1, 0, TL_EPI_NONE, 1, ARGS(.lda = 48, .ldb = 48, .ldc = 136, .alpha = 1.5), 0,
     "pointers 2 bytes off 16"},
    {200, 264, 136, TL_BF16, TL_BF16, 1, 0, TL_EPI_NONE, 3, ARGS(.batch = 2, .stride_a = 200 * 136,
     .stride_b = 264 * 136, .stride_c = 200 * 264), 1, "batch, pointers off 16, ping-pong"},
    /* strided batches: gaps, beta, shared operands, entries side by side */
    {129, 200, 96, TL_BF16, TL_BF16, 0, 1, TL_EPI_RELU, 0, ARGS(.batch = 3, .lda = 104, .ldb = 208, .ldc = 200,
     .stride_a = 129 * 104 + 8, .stride_b = 96 * 208 + 16, .stride_c = 129 * 200 + 5, .beta = 0.5), 0,
     "batch 3, gaps, beta 0.5"},
    {129, 200, 96, TL_F16, TL_F32, 1, 1, TL_EPI_GELU_TANH, 0, ARGS(.batch = 4, .stride_a = 0,
     .stride_b = 200 * 96, .stride_c = 129 * 200, .alpha = 2, .beta = -1), 0, "batch 4, A shared, beta -1"},
    {256, 256, 128, TL_BF16, TL_BF16, 1, 1, TL_EPI_GELU_TANH, 0, ARGS(.batch = 5, .stride_a = 256 * 128,
     .stride_b = 0, .stride_c = 256 * 256, .beta = 1), 1, "batch 5, B shared, beta 1, ping-pong"},
    {100, 64, 80, TL_BF16, TL_F32, 0, 0, TL_EPI_NONE, 0, ARGS(.batch = 3, .stride_a = 100 * 80, .stride_b = 80 * 64,
     .stride_c = 64, .ldc = 200), 0, "batch 3 side by side in C's rows"},
    /* arrays of pointers */
    {129, 136, 72, TL_BF16, TL_BF16, 1, 1, TL_EPI_GELU_ERF, 0, ARGS(.batch = 3, .a_array = 1, .lda = 80, .ldb = 80,
     .ldc = 136), 0, "pointer arrays NT"},
    {129, 136, 72, TL_F16, TL_F32, 0, 0, TL_EPI_NONE, 1, ARGS(.batch = 4, .a_array = 1, .alpha = 0.5, .beta = 2), 0,
     "pointer arrays NN, beta 2, pointers off 16"},
};
#define N_EXCASES (int)(sizeof excases / sizeof excases[0])

static tl_gemm_desc excase_desc(const excase *c)
{
    tl_gemm_desc d = {.m = c->m, .n = c->n, .k = c->k, .in_dtype = c->in, .out_dtype = c->out, .trans_b = c->trans_b,
                      .has_bias = c->has_bias, .epilogue = c->epi};
    if (c->pingpong)
        d.schedule = pingpong_schedule;
    return d;
}

/* The shape of the call of c (pointer-array markers become any pointer). */
static tl_gemm_args excase_shape(const excase *c)
{
    tl_gemm_args g = c->g;
    g.batch = g.batch ? g.batch : 1;
    g.alpha = g.alpha != 0 ? g.alpha : 1;
    if (g.a_array)
        g.a_array = g.b_array = g.c_array = 8;
    return g;
}

static void run_excases(int first, int last)
{
    for (int i = first; i < last; i++) {
        const excase *c = &excases[i];
        tl_gemm_desc d = excase_desc(c);
        tl_gemm_args g = excase_shape(c);
        excall x;
        ex_init(&x, &d, &g, c->off, 20000 + 100 * (uint64_t)i);
        char what[160];
        snprintf(what, sizeof what, "tl_op_gemm_ex %lldx%lldx%lld %s->%s %s: %s", (long long)c->m, (long long)c->n,
                 (long long)c->k, tl_dtype_name(c->in), tl_dtype_name(c->out), c->trans_b ? "NT" : "NN", c->what);
        ex_check(&x, what, false);
        ex_free(&x);
    }
}

/* Leading dimensions, alpha, misaligned operands: the first six cases. */
static void test_ex_leading_dims(void **state)
{
    (void)state;
    NEED_GPU();
    run_excases(0, 6);
}

/* Strided batches and beta. */
static void test_ex_strided_batches(void **state)
{
    (void)state;
    NEED_GPU();
    run_excases(6, 10);
}

/* Arrays of pointers in device memory. */
static void test_ex_pointer_arrays(void **state)
{
    (void)state;
    NEED_GPU();
    run_excases(10, N_EXCASES);
}

/* The same calls through tl_baseline_gemm_ex (cuBLAS: cublasGemmEx with
 * lds and alpha/beta, the strided and pointer-array batched calls,
 * cuBLASLt for epilogues) against the same float64 reference, where
 * cuBLAS offers them (input type or f32 out; no erf GELU; no epilogue with
 * pointer arrays): the two run on the same operands in one run. */
static void test_ex_baseline_agrees(void **state)
{
    (void)state;
    NEED_GPU();
    int ran = 0;
    for (int i = 0; i < N_EXCASES; i++) {
        const excase *c = &excases[i];
        bool epi = c->has_bias || c->epi != TL_EPI_NONE;
        if ((c->out != c->in && c->out != TL_F32) || c->epi == TL_EPI_GELU_ERF || (c->g.a_array && epi))
            continue;
        /* cublasGemmBatchedEx cannot see the alignment of pointers held in device memory and assumes
         * 16 bytes: with pointers off 16 it wrote outside the entries on the H200 (CUDA 13). Ours
         * takes the element-wise variant there (test_ex_pointer_arrays). */
        if (c->g.a_array && c->off)
            continue;
        tl_gemm_desc d = excase_desc(c);
        tl_gemm_args g = excase_shape(c);
        excall x;
        ex_init(&x, &d, &g, c->off, 30000 + 100 * (uint64_t)i);
        char what[160];
        snprintf(what, sizeof what, "%s (%s)", c->what, epi ? "cuBLASLt" : "cuBLAS");
        tl_status st = ex_check(&x, what, true);
        ex_free(&x);
        if (st == TL_ERR_NO_CUBLAS)
            skip();
        ran += st == TL_OK;
    }
    printf("  %d calls agree with cuBLAS's\n", ran);
}

/* A large strided batch and a large pointer-array batch against cuBLAS on
 * the device (not under TILEC_TEST_SMALL=1): 8 x 1024 x 1024 x 512. */
static void test_ex_large_against_cublas(void **state)
{
    (void)state;
    NEED_GPU();
    if (small) {
        printf("  skip: TILEC_TEST_SMALL=1\n");
        skip();
    }
    const int64_t nb = 8, m = 1024, n = 1024, k = 512;
    uint64_t a = dalloc((size_t)(nb * m * k) * 2), b = dalloc((size_t)(nb * k * n) * 2);
    uint64_t c = dalloc((size_t)(nb * m * n) * 2), ref = dalloc((size_t)(nb * m * n) * 2);
    assert_status(tl_random_fill(ctx, a, TL_BF16, nb * m * k, 40000, -1, 1, NULL), TL_OK);
    assert_status(tl_random_fill(ctx, b, TL_BF16, nb * k * n, 40001, -1, 1, NULL), TL_OK);
    uint64_t ptrs[3][8], parr[3];
    for (int e = 0; e < nb; e++)
        ptrs[0][e] = a + (uint64_t)(e * m * k) * 2, ptrs[1][e] = b + (uint64_t)(e * k * n) * 2;
    for (int o = 0; o < 3; o++)
        parr[o] = dalloc(8 * (size_t)nb);
    assert_status(tl_memcpy_htod(ctx, parr[0], ptrs[0], 8 * (size_t)nb), TL_OK);
    assert_status(tl_memcpy_htod(ctx, parr[1], ptrs[1], 8 * (size_t)nb), TL_OK);
    bool skipped = false;
    for (int t = 0; t < 2 && !skipped; t++)
        for (int arrays = 0; arrays < 2 && !skipped; arrays++) {
            tl_gemm_desc d = {.m = m, .n = n, .k = k, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = t};
            tl_gemm_args g = tl_gemm_default_args();
            g.batch = nb;
            uint64_t outs[2] = {ref, c};
            for (int who = 0; who < 2; who++) {
                if (arrays) {
                    for (int e = 0; e < nb; e++)
                        ptrs[2][e] = outs[who] + (uint64_t)(e * m * n) * 2;
                    assert_status(tl_memcpy_htod(ctx, parr[2], ptrs[2], 8 * (size_t)nb), TL_OK);
                    g.a_array = parr[0], g.b_array = parr[1], g.c_array = parr[2];
                } else {
                    g.a = a, g.b = b, g.c = outs[who];
                    g.stride_a = m * k, g.stride_b = k * n, g.stride_c = m * n;
                }
                assert_status(tl_memset_u8(ctx, outs[who], 0xFF, (size_t)(nb * m * n) * 2, NULL), TL_OK);
                tl_status st = who ? tl_op_gemm_ex(ctx, &d, &g, NULL) : tl_baseline_gemm_ex(ctx, &d, &g, NULL);
                if (st == TL_ERR_NO_CUBLAS) {
                    printf("  skip: %s\n", tl_ctx_error(ctx));
                    skipped = true;
                    break;
                }
                if (st == TL_OK)
                    st = tl_synchronize(ctx);
                if (st != TL_OK)
                    fail_msg("%s %s: %s: %s", who ? "tl_op_gemm_ex" : "cuBLAS", arrays ? "arrays" : "strided",
                             tl_status_name(st), tl_ctx_error(ctx));
            }
            if (skipped)
                break;
            tl_span o = {.dtype = TL_BF16, .n = nb * m * n, .dptr = c}, r = {.dtype = TL_BF16, .n = nb * m * n, .dptr = ref};
            tl_check_result res;
            assert_status(tl_check(ctx, &o, &r, 1e-2, &res), TL_OK);
            printf("  8 x 1024x1024x512 %s %s: rel err %.2e vs cuBLAS\n", t ? "NT" : "NN",
                   arrays ? "pointer arrays" : "strided", res.rel_err);
            if (!res.pass)
                fail_msg("8 x 1024x1024x512 %s %s: rel err %.3e, %lld non-finite, first bad %lld", t ? "NT" : "NN",
                         arrays ? "pointer arrays" : "strided", res.rel_err, (long long)res.nonfinite,
                         (long long)res.first_bad);
        }
    for (int o = 0; o < 3; o++)
        tl_free(ctx, parr[o]);
    tl_free(ctx, a), tl_free(ctx, b), tl_free(ctx, c), tl_free(ctx, ref);
    if (skipped)
        skip();
}

/* ------------------------------------------------------------------------ */
/* The cuBLASLt FP8 baseline                                                 */
/* ------------------------------------------------------------------------ */

/* One tl_baseline_gemm_ex call with 8-bit inputs on p (A [M, K], B [N, K])
 * into a poisoned C, against alpha act(A B + bias) in double from the
 * decoded codes (the products are exact in f32, so what differs is the f32
 * summation and the output's rounding: 1e-2 for a 16-bit output as for
 * bf16 inputs, 2e-3 for f32). bias_host: the out_dtype bias as doubles, or
 * NULL. Returns the call's status without checking when it is not TL_OK. */
static tl_status check_fp8_baseline(problem *p, tl_dtype out, tl_epilogue epi, uint64_t bias,
                                    const double *bias_host, double alpha)
{
    tl_gemm_desc d = {.m = p->m, .n = p->n, .k = p->k, .in_dtype = p->in, .out_dtype = out, .trans_b = 1,
                      .has_bias = bias_host != NULL, .epilogue = epi};
    tl_gemm_args g = tl_gemm_default_args();
    int64_t mn = p->m * p->n;
    size_t bytes = (size_t)mn * tl_dtype_size(out);
    g.a = p->a, g.b = p->b, g.bias = bias, g.c = dalloc(bytes), g.alpha = alpha;
    assert_status(tl_memset_u8(ctx, g.c, 0xFF, bytes, NULL), TL_OK); /* NaN in every output type */
    tl_status st = tl_baseline_gemm_ex(ctx, &d, &g, NULL);
    if (st == TL_OK)
        st = tl_synchronize(ctx);
    char what[160];
    snprintf(what, sizeof what, "cuBLASLt %lldx%lldx%lld %s->%s %s%s alpha %g", (long long)p->m, (long long)p->n,
             (long long)p->k, tl_dtype_name(p->in), tl_dtype_name(out), epi_name(epi), bias_host ? "+bias" : "",
             alpha);
    if (st != TL_OK) {
        printf("  %s: %s: %s\n", what, tl_status_name(st), tl_ctx_error(ctx));
        tl_free(ctx, g.c);
        return st;
    }
    const double *prod = product(p, 1);
    double *ref = malloc((size_t)mn * sizeof *ref);
    assert_non_null(ref);
    for (int64_t i = 0; i < mn; i++)
        ref[i] = test_act(epi, alpha * prod[i] + (bias_host ? bias_host[i % p->n] : 0.0));
    double tol = out == TL_F32 ? 2e-3 : 1e-2;
    tl_span o = {.dtype = out, .n = mn, .dptr = g.c}, r = {.dtype = TL_F64, .n = mn, .host = ref};
    tl_check_result res;
    assert_status(tl_check(ctx, &o, &r, tol, &res), TL_OK);
    if (!res.pass)
        fail_msg("%s: rel err %.3e (tol %.0e), %lld non-finite, first bad %lld", what, res.rel_err, tol,
                 (long long)res.nonfinite, (long long)res.first_bad);
    free(ref);
    tl_free(ctx, g.c);
    return TL_OK;
}

/* tl_baseline_gemm with 8-bit inputs: cuBLASLt's FP8 GEMM (B as [N, K])
 * at aligned sizes, M ragged, every output type, with the bias (of
 * out_dtype) and GELU epilogues, alpha as the product of per-tensor
 * scales, against float64; its documented refusals (B as [K, N], an f32
 * output with a bias) on the device too. E4M3 must run; E5M2 x E5M2, which
 * cuBLASLt documents no kernel for, must run correctly or be refused as
 * unsupported (said in the output). */
static void test_fp8_baseline(void **state)
{
    (void)state;
    NEED_GPU();
    const int64_t sizes[][3] = {{1, 16, 16}, {64, 64, 64}, {200, 264, 144}, {512, 512, 1024}};
    int nsizes = small ? 2 : 4;
    static const tl_dtype fp8[] = {TL_F8E4M3, TL_F8E5M2};
    for (int f = 0; f < 2; f++)
        for (int s = 0; s < nsizes; s++) {
            problem p;
            problem_init(&p, sizes[s][0], sizes[s][1], sizes[s][2], fp8[f], 0, 9000 + 10 * (uint64_t)s);
            tl_status st = check_fp8_baseline(&p, TL_BF16, TL_EPI_NONE, 0, NULL, 1.0);
            if (st == TL_ERR_NO_CUBLAS) {
                problem_free(&p);
                printf("  skip: %s\n", tl_ctx_error(ctx));
                skip();
            }
            if (st == TL_ERR_UNSUPPORTED && fp8[f] == TL_F8E5M2) { /* noted above; nothing more to run */
                assert_non_null(strstr(tl_ctx_error(ctx), "E5M2 x E5M2"));
                problem_free(&p);
                break;
            }
            assert_status(st, TL_OK);
            for (int o = 0; o < 3; o++) {
                tl_dtype out = out_types[o];
                assert_status(check_fp8_baseline(&p, out, TL_EPI_NONE, 0, NULL, 1.0), TL_OK);
                assert_status(check_fp8_baseline(&p, out, TL_EPI_GELU_TANH, 0, NULL, 0.375), TL_OK);
                /* RELU: cuBLASLt may offer no FP8 kernel for it; then it says so */
                st = check_fp8_baseline(&p, out, TL_EPI_RELU, 0, NULL, 1.0);
                assert_true(st == TL_OK || st == TL_ERR_UNSUPPORTED);
                uint64_t bias_buf;
                double *hbias;
                uint64_t bias = random_operand(out, p.n, 0, 9100 + 10 * (uint64_t)s, &bias_buf, &hbias);
                if (out == TL_F32) { /* cuBLASLt reads a bf16 bias with an f32 output */
                    assert_status(check_fp8_baseline(&p, out, TL_EPI_NONE, bias, hbias, 1.0), TL_ERR_UNSUPPORTED);
                } else {
                    assert_status(check_fp8_baseline(&p, out, TL_EPI_NONE, bias, hbias, 1.0), TL_OK);
                    assert_status(check_fp8_baseline(&p, out, TL_EPI_GELU_TANH, bias, hbias, 0.5), TL_OK);
                }
                tl_free(ctx, bias_buf);
                free(hbias);
            }
            /* B as [K, N]: not cuBLASLt's FP8 form */
            tl_gemm_desc nn = {.m = p.m, .n = p.n, .k = p.k, .in_dtype = p.in, .out_dtype = TL_BF16};
            uint64_t c = dalloc((size_t)(p.m * p.n) * 2);
            assert_status(tl_baseline_gemm(ctx, &nn, p.a, p.b, 0, c, NULL), TL_ERR_UNSUPPORTED);
            tl_free(ctx, c);
            problem_free(&p);
        }
}

/* ------------------------------------------------------------------------ */
/* Every program the tests will run, compiled up front in one parallel batch */
/* ------------------------------------------------------------------------ */

#define MAX_PRECOMPILE 512

typedef struct gemm_plan {
    tl_gemm_desc d[MAX_PRECOMPILE];
    int safe[MAX_PRECOMPILE]; /* its safe variant too (unaligned rows)   */
    int n;
} gemm_plan;

/* Adds d with the schedule tl_op_gemm will compile for it, once per
 * distinct kernel (the sizes matter only through that schedule), noting
 * whether a test runs it on rows TMA and cp.async cannot take whole (K
 * or N not a multiple of 8, or operands off by an element): those launch
 * the program's safe variant, which the batch then compiles as well. */
static void plan_add(gemm_plan *pc, tl_gemm_desc d, int off)
{
    int safe = d.n % 8 || d.k % 8 || off;
    d.schedule = tl_op_gemm_schedule(ctx, &d);
    if (d.schedule.block_m == 0)
        return;
    for (int i = 0; i < pc->n; i++) {
        const tl_gemm_desc *e = &pc->d[i];
        if (e->in_dtype == d.in_dtype && e->out_dtype == d.out_dtype && e->trans_b == d.trans_b &&
            e->has_bias == d.has_bias && e->epilogue == d.epilogue && !memcmp(&e->schedule, &d.schedule, sizeof d.schedule)) {
            pc->safe[i] |= safe;
            return;
        }
    }
    if (pc->n < MAX_PRECOMPILE) {
        pc->safe[pc->n] = safe;
        pc->d[pc->n++] = d;
    }
}

/* Every combination of test_all_combinations at one size. */
static void plan_combinations(gemm_plan *pc, const int64_t size[3], int off)
{
    for (int i = 0; i < 2; i++)
        for (int o = 0; o < 3; o++)
            for (int t = 0; t < 2; t++)
                for (int e = 0; e < 4; e++)
                    for (int b = 0; b < 2; b++) {
                        tl_gemm_desc d = {.m = size[0], .n = size[1], .k = size[2], .in_dtype = in_types[i],
                                          .out_dtype = out_types[o], .trans_b = t, .has_bias = b,
                                          .epilogue = epis[e]};
                        plan_add(pc, d, off);
                        /* misaligned operands run the classic kernel instead of a ping-pong one */
                        if (off && tl_op_gemm_schedule(ctx, &d).pingpong) {
                            d.schedule = tl_op_gemm_schedule(
                                ctx, &(tl_gemm_desc){.m = 8192, .n = 8192, .k = 8192, .in_dtype = d.in_dtype,
                                                     .out_dtype = d.out_dtype});
                            plan_add(pc, d, off);
                        }
                    }
}

/* The descriptors of the tests below; a program missed here is compiled
 * on first use as before, only slower. */
static void plan_tests(gemm_plan *pc)
{
    const int64_t sizes[][3] = {{1, 1, 1}, {8, 8, 8}, {127, 255, 33}, {127, 255, 40}, {64, 64, 64}, {257, 129, 72},
                                {4096, 4096, 4096}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        plan_combinations(pc, sizes[s], 0);
    plan_combinations(pc, (const int64_t[]){127, 136, 40}, 1); /* test_unaligned_operands */
    const int64_t sched_sizes[][3] = {{257, 129, 72}, {200, 264, 136}, {1024, 1024, 1024}};
    for (size_t z = 0; z < 3; z++)
        for (size_t c = 0; c < sizeof scheds / sizeof scheds[0]; c++)
            for (int t = 0; t < 2; t++) {
                tl_gemm_desc d = {.m = sched_sizes[z][0], .n = sched_sizes[z][1], .k = sched_sizes[z][2],
                                  .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = t, .schedule = scheds[c]};
                plan_add(pc, d, 0);
                d.out_dtype = TL_F32;
                d.has_bias = 1;
                d.epilogue = TL_EPI_GELU_TANH;
                plan_add(pc, d, 0);
            }
}

/* ------------------------------------------------------------------------ */
/* 8-bit inputs (sm_90a)                                                     */
/* ------------------------------------------------------------------------ */

/* The description and arguments of test_f8_inputs's call of m x n x k
 * (B as [N, K]): bias of the output's type with GELU when epi, per-tensor
 * scales when scaled; the caller adds the pointers. */
static void f8_call(int64_t m, int64_t n, int64_t k, tl_dtype in, tl_dtype out, int epi, int scaled,
                    const tl_gemm_schedule *s, tl_gemm_desc *d, tl_gemm_args *g)
{
    *d = (tl_gemm_desc){.m = m, .n = n, .k = k, .in_dtype = in, .out_dtype = out, .trans_b = 1, .has_bias = epi,
                        .epilogue = epi ? TL_EPI_GELU_TANH : TL_EPI_NONE};
    if (s)
        d->schedule = *s;
    *g = tl_gemm_default_args();
    if (scaled)
        g->scale_a = 0.25, g->scale_b = 3.0;
}

/* Runs the 8-bit GEMM of p (a problem of 8-bit inputs, B as [N, K]) into
 * a poisoned C with poison around it and checks it against float64 of the
 * decoded codes (product(), computed once for every run on p): bias of the output's type with GELU when
 * `epi`, per-tensor scales (the strided kernel) when `scaled`. The
 * tolerance: the products are exact in f32; the tensor cores add them in
 * f32 (keeping fewer bits than an f32 FMA chain, as cuBLASLt's fast
 * accumulation does), then C is rounded. */
static void check_f8(problem *p, tl_dtype out, int epi, int scaled, const tl_gemm_schedule *s, uint64_t seed)
{
    int64_t m = p->m, n = p->n, mn = m * n;
    size_t osz = tl_dtype_size(out);
    unsigned char *hbias = malloc((size_t)n * osz), *hc = malloc((size_t)(mn + 2 * PAD) * osz);
    double *ref = malloc(sizeof(double) * (size_t)mn);
    assert_true(hbias && hc && ref);
    assert_status(tl_random_host(hbias, out, n, seed, -1, 1), TL_OK);
    uint64_t bias = dalloc((size_t)n * osz), cbuf = dalloc((size_t)(mn + 2 * PAD) * osz), c = cbuf + PAD * osz;
    assert_status(tl_memcpy_htod(ctx, bias, hbias, (size_t)n * osz), TL_OK);
    assert_status(tl_memset_u8(ctx, cbuf, 0xFF, (size_t)(mn + 2 * PAD) * osz, NULL), TL_OK);
    tl_gemm_desc d;
    tl_gemm_args g;
    f8_call(m, n, p->k, p->in, out, epi, scaled, s, &d, &g);
    g.a = p->a, g.b = p->b, g.c = c, g.bias = epi ? bias : 0;
    char what[200];
    snprintf(what, sizeof what, "f8 gemm %lldx%lldx%lld %s->%s%s%s sched %dx%dx%d/%d/%d p%d c%dx%d", (long long)m,
             (long long)n, (long long)p->k, tl_dtype_name(p->in), tl_dtype_name(out), epi ? " +bias+gelu" : "",
             scaled ? " scaled" : "", d.schedule.block_m, d.schedule.block_n, d.schedule.block_k, d.schedule.stages,
             d.schedule.threads, d.schedule.persistent, d.schedule.cluster_m, d.schedule.cluster_n);
    tl_status st = tl_op_gemm_ex(ctx, &d, &g, NULL);
    if (st == TL_OK)
        st = tl_synchronize(ctx);
    if (st != TL_OK)
        fail_msg("%s: %s: %s", what, tl_status_name(st), tl_ctx_error(ctx));
    assert_status(tl_memcpy_dtoh(ctx, hc, cbuf, (size_t)(mn + 2 * PAD) * osz), TL_OK);
    for (size_t i = 0; i < PAD * osz; i++)
        if (hc[i] != 0xFF || hc[(size_t)(PAD + mn) * osz + i] != 0xFF)
            fail_msg("%s: a byte around C was written", what);
    double alpha = (double)(float)(g.alpha * g.scale_a * g.scale_b);
    const double *prod = product(p, 1);
    for (int64_t i = 0; i < mn; i++)
        ref[i] = test_act(d.epilogue, alpha * prod[i] + (epi ? test_elem(out, hbias, i % n) : 0.0));
    tl_check_result res = test_check_f64(ctx, what, out, hc + PAD * osz, ref, mn, out == TL_F32 ? 2e-3 : 1e-2);
    printf("  %s: rel err %.2e\n", what, res.rel_err);
    tl_free(ctx, bias), tl_free(ctx, cbuf);
    free(hbias), free(hc), free(ref);
}

static const tl_gemm_schedule f8_schedules[] = {
    {0}, /* the op's choice */
    {.block_m = 128, .block_n = 256, .block_k = 128, .stages = 4, .threads = 256, .swizzle = 8},
    {.block_m = 64, .block_n = 128, .block_k = 128, .stages = 6, .threads = 128, .swizzle = 8, .persistent = 1},
    {.block_m = 128, .block_n = 128, .block_k = 128, .stages = 4, .threads = 256, .swizzle = 8, .cluster_m = 2},
    {.block_m = 128, .block_n = 128, .block_k = 256, .stages = 3, .threads = 256},
    {.block_m = 128, .block_n = 128, .block_k = 128, .stages = 5, .threads = 256, .swizzle = 8, .persistent = 1},
};

#define N_F8_SCHEDULES (sizeof f8_schedules / sizeof f8_schedules[0])
static const int64_t f8_sizes[][3] = {{1090, 1300, 272}, {333, 517, 263}};
static const int64_t f8_own[][3] = {{16, 4096, 4096}, {64, 2048, 2048}};

/* The output type test_f8_inputs gives f8_schedules[i]. */
static tl_dtype f8_out(size_t i)
{
    return i % 3 == 0 ? TL_BF16 : i % 3 == 1 ? TL_F16 : TL_F32;
}

/* Both formats, every schedule kind, ragged sizes (partial tiles and
 * clusters; K through TMA and K off 16 bytes, element by element), every
 * output type, bias + GELU, scales; twice (a race shows as a moving
 * error). */
static void test_f8_inputs(void **state)
{
    (void)state;
    NEED_GPU();
    if (strcmp(tl_ctx_target(ctx), "sm_90a") != 0)
        skip();
    for (size_t z = 0; z < 2; z++)
        for (int f = 0; f < 2; f++) {
            problem p;
            problem_init(&p, f8_sizes[z][0], f8_sizes[z][1], f8_sizes[z][2], f ? TL_F8E5M2 : TL_F8E4M3, 0,
                         9100 + 10 * z + f);
            for (int rep = 0; rep < 2; rep++)
                for (size_t i = 0; i < N_F8_SCHEDULES; i++)
                    check_f8(&p, f8_out(i), (int)((i + z + rep) % 2), (int)((i + z) % 2), &f8_schedules[i], 9200 + i);
            problem_free(&p);
        }
    /* the op's own choice at a decode shape and a few-tile one */
    for (size_t z = 0; z < 2; z++) {
        problem p;
        problem_init(&p, f8_own[z][0], f8_own[z][1], f8_own[z][2], TL_F8E4M3, 0, 9400 + z);
        check_f8(&p, TL_BF16, (int)z, (int)z, NULL, 9500 + z);
        problem_free(&p);
    }
}

/* The device's 8-bit conversions agree with the host's bit for bit: every
 * code decoded, and f32 values (ties, the subnormal range, beyond the
 * largest, infinities, NaN) encoded. */
static void test_f8_conversions(void **state)
{
    (void)state;
    NEED_GPU();
    enum { NV = 4096 };
    float *x = malloc(NV * sizeof *x);
    assert_non_null(x);
    uint64_t seed = 77;
    for (int i = 0; i < NV; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        /* magnitudes 2^-20 .. 2^17 with random fractions, both signs */
        x[i] = ldexpf(1.0f + (float)(seed >> 41) * 0x1p-23f, (int)(seed >> 20) % 38 - 20) * ((seed >> 10) & 1 ? -1 : 1);
    }
    const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 448.0f, 464.0f, 480.0f, 57344.0f, 61440.0f,
                              0x1p-9f, 0x1.8p-10f, 0x1p-10f, 0x1p-16f, 0x1.8p-17f, 0x1p-17f, 1.0625f, 1.1875f};
    memcpy(x, specials, sizeof specials);
    for (int i = 0; i < 256; i++) /* the midpoints between neighbouring e4m3 codes: ties to even */
        if (i % 128 < 126)
            x[32 + i] = (tl_f8e4m3_to_f32((uint8_t)i) + tl_f8e4m3_to_f32((uint8_t)(i + 1))) / 2;
    for (int f = 0; f < 2; f++) {
        tl_dtype dt = f ? TL_F8E5M2 : TL_F8E4M3;
        tl_kernel *k = tl_kernel_new(ctx, "f8_convert");
        tl_buf X = tl_param_tensor(k, "X", TL_F32, 1, (tl_expr[]){tl_int(k, NV)}, NULL);
        tl_buf Y = tl_param_tensor(k, "Y", dt, 1, (tl_expr[]){tl_int(k, NV)}, NULL);
        tl_buf Z = tl_param_tensor(k, "Z", dt, 1, (tl_expr[]){tl_int(k, 256)}, NULL);
        tl_buf W = tl_param_tensor(k, "W", TL_F32, 1, (tl_expr[]){tl_int(k, 256)}, NULL);
        tl_grid(k, tl_int(k, NV / 256), tl_int(k, 1), TL_NONE_EXPR, 256);
        tl_expr i = tl_add(k, tl_mul(k, tl_block_idx(k, 0), tl_int(k, 256)), tl_parallel1(k, 256));
        tl_store(k, Y, &i, tl_cast(k, tl_load(k, X, &i), dt));
        tl_if(k, tl_lt(k, i, tl_int(k, 256)));
        tl_store(k, W, &i, tl_cast(k, tl_load(k, Z, &i), TL_F32));
        tl_end(k);
        tl_end(k);
        tl_program *p = NULL;
        if (tl_compile(k, NULL, &p) != TL_OK)
            fail_msg("%s: %s", tl_dtype_name(dt), tl_ctx_error(ctx));
        uint8_t codes[256], y[NV];
        float w[256];
        for (int c = 0; c < 256; c++)
            codes[c] = (uint8_t)c;
        uint64_t dx = dalloc(NV * 4), dy = dalloc(NV), dz = dalloc(256), dw = dalloc(256 * 4);
        assert_status(tl_memcpy_htod(ctx, dx, x, NV * 4), TL_OK);
        assert_status(tl_memcpy_htod(ctx, dz, codes, 256), TL_OK);
        tl_arg args[4] = {tl_arg_dptr(dx), tl_arg_dptr(dy), tl_arg_dptr(dz), tl_arg_dptr(dw)};
        assert_status(tl_launch(p, NULL, 4, args), TL_OK);
        assert_status(tl_synchronize(ctx), TL_OK);
        assert_status(tl_memcpy_dtoh(ctx, y, dy, NV), TL_OK);
        assert_status(tl_memcpy_dtoh(ctx, w, dw, 256 * 4), TL_OK);
        for (int c = 0; c < 256; c++) {
            float h = f ? tl_f8e5m2_to_f32((uint8_t)c) : tl_f8e4m3_to_f32((uint8_t)c);
            if (!(h == w[c] || (isnan(h) && isnan(w[c]))) || signbit(h) != signbit(w[c]))
                fail_msg("%s: code 0x%02x decodes to %g on the device, %g on the host", tl_dtype_name(dt), c,
                         (double)w[c], (double)h);
        }
        for (int v = 0; v < NV; v++) {
            uint8_t h = f ? tl_f32_to_f8e5m2(x[v]) : tl_f32_to_f8e4m3(x[v]);
            if (h != y[v])
                fail_msg("%s: %a encodes to 0x%02x on the device, 0x%02x on the host", tl_dtype_name(dt), (double)x[v],
                         y[v], h);
        }
        tl_free(ctx, dx), tl_free(ctx, dy), tl_free(ctx, dz), tl_free(ctx, dw);
        tl_program_destroy(p);
        tl_kernel_destroy(k);
    }
    free(x);
}

static const tl_gemm_schedule mma_scheds[] = {
    {32, 32, 16, 2, 128, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {64, 64, 32, 2, 128, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {128, 128, 32, 3, 256, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {128, 128, 64, 3, 256, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
};
#define N_MMA_SCHEDS (sizeof mma_scheds / sizeof mma_scheds[0])
static const int64_t mma_sizes[][4] = {{257, 129, 72, 0}, {200, 264, 136, 0}, {127, 255, 40, 1}}; /* M N K off */

static tl_ctx *plain_ctx; /* test_plain_ctx (fixture.h), made by the setup */

/* The mma.sync path (sm_80's: ldmatrix + mma.sync, cp.async copies) on an
 * sm_90a device, through a context for the plain target (sm_90, no wgmma):
 * tiles whose shared rows are 32 to 128 bytes (each swizzle width the
 * ldmatrix addressing handles), 128 and 256 threads, ragged and unaligned
 * sizes, both layouts of B, with and without the fused epilogue (the
 * kernels precompiled by the setup on a context of the plain target). */
static void test_mma_sync_path(void **state)
{
    (void)state;
    NEED_GPU();
    tl_ctx *main_ctx = ctx, *pctx = plain_ctx;
    if (!pctx) {
        printf("  skip: the context's target %s has no wgmma (the tests above ran mma.sync)\n", tl_ctx_target(ctx));
        skip();
    }
    ctx = pctx; /* the helpers allocate and launch on `ctx` */
    for (int z = 0; z < 3; z++) {
        problem p;
        problem_init(&p, mma_sizes[z][0], mma_sizes[z][1], mma_sizes[z][2], z == 1 ? TL_F16 : TL_BF16,
                     (int)mma_sizes[z][3], 8800 + 10 * (uint64_t)z);
        for (int b = 0; b < 2; b++) {
            check_plain_and_fused(&p, b, NULL);
            for (size_t c = 0; c < N_MMA_SCHEDS && (z < 2 || !small); c++)
                check_plain_and_fused(&p, b, &mma_scheds[c]);
        }
        problem_free(&p);
    }
    ctx = main_ctx;
}

/* test_decode_split's kernels: each case's schedule (or the op's), both
 * layouts where the target runs them, plain, f32 (the repeat check) and
 * fused. */
static void plan_decode(gemm_plan *pc)
{
    bool wgmma = !strcmp(tl_ctx_target(ctx), "sm_90a");
    for (int i = 0; i < N_DECODE_CASES; i++) {
        const struct decode_case *c = &decode_cases[i];
        tl_gemm_schedule s;
        int explicit = decode_schedule(c, &s);
        for (int t = c->swap && !wgmma ? 1 : 0; t < 2; t++) {
            tl_gemm_desc d = {.m = c->m, .n = c->n, .k = c->k, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = t};
            if (explicit)
                d.schedule = s;
            plan_add(pc, d, c->off);
            d.out_dtype = TL_F32;
            plan_add(pc, d, c->off);
            d.has_bias = 1, d.epilogue = TL_EPI_GELU_TANH;
            plan_add(pc, d, c->off);
        }
    }
}

/* test_f8_inputs's kernels (sm_90a): tl_op_gemm_ex's, scaled or not. */
static void plan_f8(void)
{
    tl_kernel *k;
    for (size_t z = 0; z < 2; z++)
        for (int f = 0; f < 2; f++)
            for (int rep = 0; rep < 2; rep++)
                for (size_t i = 0; i < N_F8_SCHEDULES; i++) {
                    tl_gemm_desc d;
                    tl_gemm_args g;
                    f8_call(f8_sizes[z][0], f8_sizes[z][1], f8_sizes[z][2], f ? TL_F8E5M2 : TL_F8E4M3, f8_out(i),
                            (int)((i + z + rep) % 2), (int)((i + z) % 2), &f8_schedules[i], &d, &g);
                    if (tl_op_gemm_ex_build(ctx, &d, &g, &k) == TL_OK)
                        precompile_add(k, d.k % 16 || d.n % 16);
                }
    for (size_t z = 0; z < 2; z++) {
        tl_gemm_desc d;
        tl_gemm_args g;
        f8_call(f8_own[z][0], f8_own[z][1], f8_own[z][2], TL_F8E4M3, TL_BF16, (int)z, (int)z, NULL, &d, &g);
        if (tl_op_gemm_ex_build(ctx, &d, &g, &k) == TL_OK)
            precompile_add(k, 0);
    }
}

/* test_mma_sync_path's kernels, on a context of the plain target (none
 * where ctx's is plain already: the tests above ran mma.sync). */
static void plan_mma_sync(void)
{
    tl_ctx *main_ctx = ctx, *pctx = plain_ctx = test_plain_ctx();
    if (!pctx)
        return;
    ctx = pctx; /* plan_add asks ctx for the schedule */
    static gemm_plan pm;
    pm.n = 0;
    for (int z = 0; z < 3; z++)
        for (int b = 0; b < 2; b++)
            for (int c = -1; c < (int)N_MMA_SCHEDS; c++)
                for (int fused = 0; fused < 2; fused++) {
                    tl_gemm_desc d = {.m = mma_sizes[z][0], .n = mma_sizes[z][1], .k = mma_sizes[z][2],
                                      .in_dtype = z == 1 ? TL_F16 : TL_BF16, .out_dtype = fused ? TL_F32 : TL_BF16,
                                      .trans_b = b, .has_bias = fused,
                                      .epilogue = fused ? TL_EPI_GELU_TANH : TL_EPI_NONE};
                    if (c >= 0)
                        d.schedule = mma_scheds[c];
                    plan_add(&pm, d, (int)mma_sizes[z][3]);
                }
    tl_kernel *k;
    for (int i = 0; i < pm.n; i++)
        if (tl_op_gemm_build(pctx, &pm.d[i], &k) == TL_OK)
            precompile_add(k, pm.safe[i]);
    precompile_run(pctx, "mma.sync GEMM");
    ctx = main_ctx;
}

static int gemm_teardown(void **state)
{
    tl_ctx_destroy(plain_ctx);
    plain_ctx = NULL;
    return ctx_teardown(state);
}

static int gemm_setup(void **state)
{
    gpu_setup(state);
    if (!ctx)
        return 0;
    static gemm_plan pc;
    plan_tests(&pc);
    plan_decode(&pc);
    tl_kernel *k;
    for (int i = 0; i < pc.n; i++)
        if (tl_op_gemm_build(ctx, &pc.d[i], &k) == TL_OK)
            precompile_add(k, pc.safe[i]);
    /* tl_op_gemm_ex's kernels (a plain call's is among those above, the
     * same kernel twice costs a cache hit) */
    for (int i = 0; i < N_EXCASES; i++) {
        tl_gemm_desc d = excase_desc(&excases[i]);
        tl_gemm_args g = excase_shape(&excases[i]);
        if (tl_op_gemm_ex_build(ctx, &d, &g, &k) == TL_OK) {
            const tl_gemm_args *c = &excases[i].g;
            precompile_add(k, excases[i].off || c->lda % 8 || c->ldb % 8 || c->ldc % 8);
        }
    }
    if (!strcmp(tl_ctx_target(ctx), "sm_90a"))
        plan_f8();
    precompile_run(ctx, "GEMM");
    plan_mma_sync();
    test_plan_only_end();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_argument_errors),
        cmocka_unit_test(test_all_combinations),
        cmocka_unit_test(test_unaligned_operands),
        cmocka_unit_test(test_schedules),
        cmocka_unit_test(test_persistent_blocks),
        cmocka_unit_test(test_stream_k),
        cmocka_unit_test(test_gemv),
        cmocka_unit_test(test_cluster_multicast),
        cmocka_unit_test(test_decode_split),
        cmocka_unit_test(test_large_against_cublas),
        cmocka_unit_test(test_ex_leading_dims),
        cmocka_unit_test(test_ex_strided_batches),
        cmocka_unit_test(test_ex_pointer_arrays),
        cmocka_unit_test(test_ex_baseline_agrees),
        cmocka_unit_test(test_ex_large_against_cublas),
        cmocka_unit_test(test_f8_inputs),
        cmocka_unit_test(test_f8_conversions),
        cmocka_unit_test(test_fp8_baseline),
        cmocka_unit_test(test_mma_sync_path),
    };
    test_apply_filter();
    return cmocka_run_group_tests_name("gpu_gemm", tests, gemm_setup, gemm_teardown);
}
