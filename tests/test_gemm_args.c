/* test_gemm_args.c - tl_op_gemm_ex without a GPU: its kernels (strided,
 * pointer-array, reading C for beta) run in the interpreter against a
 * float64 loop, with leading dimensions wider than the rows, batch strides
 * with gaps, a matrix shared by every entry, entries side by side in one
 * row, arrays of pointers, alpha and beta; every element outside the
 * entries must keep its bytes. Every argument error with its message; one
 * program per kind of call (strides, batch and alpha are launch
 * arguments); the launch arguments in the documented order; the generated
 * code of each kernel through NVRTC for sm_80 and sm_90a; and
 * tl_param_tensor_array on its own (builder and launch checks, the
 * interpreter, dumps). */
#include "fixture.h"
#include "tune.h"

#include <math.h>

/* ------------------------------------------------------------------------ */
/* A problem on the host                                                     */
/* ------------------------------------------------------------------------ */

#define MAXB 8

/* Operands of one call: buffers of 16-bit inputs and an output whose
 * entries sit where args says; in a pointer-array call, each entry of a
 * buffer of its own (arrays of host pointers, as the interpreter takes). */
typedef struct hgemm {
    tl_gemm_desc d;
    tl_gemm_args g;                       /* host pointers                  */
    int64_t lda, ldb, ldc, sa, sb, sc;    /* effective (0 replaced)         */
    bool arrays;
    uint16_t *a, *b, *bias;               /* strided: one buffer each       */
    unsigned char *c, *c0;                /* C, and its bytes before        */
    size_t a_n, b_n, c_n;                 /* elements                       */
    uint16_t *ea[MAXB], *eb[MAXB];        /* arrays: each entry's matrices  */
    unsigned char *ec[MAXB], *ec0[MAXB];
    uint64_t pa[MAXB], pb[MAXB], pc[MAXB];/* the arrays of pointers         */
} hgemm;

static size_t osz(const hgemm *h) { return tl_dtype_size(h->d.out_dtype); }

/* Span in elements of `batch` matrices of rows x ld (last row `cols`)
 * `stride` apart. */
static size_t span(int64_t batch, int64_t stride, int64_t rows, int64_t ld, int64_t cols)
{
    return (size_t)((batch - 1) * stride + (rows - 1) * ld + cols);
}

static void random16(uint16_t *p, tl_dtype dt, size_t n, uint64_t seed)
{
    assert_status(tl_random_host(p, dt, (int64_t)n, seed, -1, 1), TL_OK);
}

/* Fills C (every byte, entries or not) with random output values. */
static void random_out(unsigned char *p, tl_dtype dt, size_t n, uint64_t seed)
{
    assert_status(tl_random_host(p, dt, (int64_t)n, seed, -1, 1), TL_OK);
}

/* Makes the operands of d and g (g's pointers are ignored, its shape
 * kept). */
static void hgemm_init(hgemm *h, const tl_gemm_desc *d, const tl_gemm_args *g, uint64_t seed)
{
    memset(h, 0, sizeof *h);
    h->d = *d;
    h->g = *g;
    int64_t M = d->m, N = d->n, K = d->k, nb = g->batch;
    int64_t brows = d->trans_b ? N : K, bcols = d->trans_b ? K : N;
    h->lda = g->lda ? g->lda : K;
    h->ldb = g->ldb ? g->ldb : bcols;
    h->ldc = g->ldc ? g->ldc : N;
    h->arrays = g->a_array != 0;
    tl_dtype in = d->in_dtype, out = d->out_dtype;
    h->bias = malloc(2 * (size_t)N);
    random16(h->bias, in, (size_t)N, seed + 3);
    h->g.bias = d->has_bias ? (uint64_t)(uintptr_t)h->bias : 0;
    if (h->arrays) {
        assert_true(nb <= MAXB);
        h->a_n = span(1, 0, M, h->lda, K), h->b_n = span(1, 0, brows, h->ldb, bcols);
        h->c_n = span(1, 0, M, h->ldc, N);
        for (int64_t e = 0; e < nb; e++) {
            h->ea[e] = malloc(2 * h->a_n), h->eb[e] = malloc(2 * h->b_n);
            h->ec[e] = malloc(osz(h) * h->c_n), h->ec0[e] = malloc(osz(h) * h->c_n);
            random16(h->ea[e], in, h->a_n, seed + 10 * (uint64_t)e);
            random16(h->eb[e], in, h->b_n, seed + 10 * (uint64_t)e + 1);
            random_out(h->ec[e], out, h->c_n, seed + 10 * (uint64_t)e + 2);
            memcpy(h->ec0[e], h->ec[e], osz(h) * h->c_n);
            h->pa[e] = (uint64_t)(uintptr_t)h->ea[e];
            h->pb[e] = (uint64_t)(uintptr_t)h->eb[e];
            h->pc[e] = (uint64_t)(uintptr_t)h->ec[e];
        }
        h->g.a_array = (uint64_t)(uintptr_t)h->pa;
        h->g.b_array = (uint64_t)(uintptr_t)h->pb;
        h->g.c_array = (uint64_t)(uintptr_t)h->pc;
        return;
    }
    h->sa = g->stride_a, h->sb = g->stride_b, h->sc = g->stride_c;
    h->a_n = span(nb, h->sa, M, h->lda, K);
    h->b_n = span(nb, h->sb, brows, h->ldb, bcols);
    h->c_n = span(nb, h->sc, M, h->ldc, N);
    h->a = malloc(2 * h->a_n), h->b = malloc(2 * h->b_n);
    h->c = malloc(osz(h) * h->c_n), h->c0 = malloc(osz(h) * h->c_n);
    random16(h->a, in, h->a_n, seed);
    random16(h->b, in, h->b_n, seed + 1);
    random_out(h->c, out, h->c_n, seed + 2);
    memcpy(h->c0, h->c, osz(h) * h->c_n);
    h->g.a = (uint64_t)(uintptr_t)h->a, h->g.b = (uint64_t)(uintptr_t)h->b, h->g.c = (uint64_t)(uintptr_t)h->c;
}

static void hgemm_free(hgemm *h)
{
    free(h->a), free(h->b), free(h->c), free(h->c0), free(h->bias);
    for (int e = 0; e < MAXB; e++)
        free(h->ea[e]), free(h->eb[e]), free(h->ec[e]), free(h->ec0[e]);
}

static double in_at(const hgemm *h, const uint16_t *p, int64_t off) { return test_elem(h->d.in_dtype, p, off); }

static double a_at(const hgemm *h, int64_t e, int64_t i, int64_t k)
{
    return h->arrays ? in_at(h, h->ea[e], i * h->lda + k) : in_at(h, h->a, e * h->sa + i * h->lda + k);
}

static double b_at(const hgemm *h, int64_t e, int64_t k, int64_t j)
{
    int64_t r = h->d.trans_b ? j : k, c = h->d.trans_b ? k : j;
    return h->arrays ? in_at(h, h->eb[e], r * h->ldb + c) : in_at(h, h->b, e * h->sb + r * h->ldb + c);
}

/* Where C's element (e, i, j) is: its buffer and offset. */
static const unsigned char *c_buf(const hgemm *h, int64_t e, bool before, int64_t i, int64_t j, int64_t *off)
{
    if (h->arrays) {
        *off = i * h->ldc + j;
        return before ? h->ec0[e] : h->ec[e];
    }
    *off = e * h->sc + i * h->ldc + j;
    return before ? h->c0 : h->c;
}

/* act(alpha A B + beta C + bias) of element (e, i, j), in double from the
 * operands as stored (alpha and beta rounded to f32, as the kernel takes
 * them). */
static double ref_at(const hgemm *h, int64_t e, int64_t i, int64_t j)
{
    double acc = 0;
    for (int64_t k = 0; k < h->d.k; k++)
        acc += a_at(h, e, i, k) * b_at(h, e, k, j);
    double x = (double)(float)h->g.alpha * acc;
    if (h->g.beta != 0) {
        int64_t off;
        const unsigned char *c0 = c_buf(h, e, true, i, j, &off);
        x += (double)(float)h->g.beta * test_elem(h->d.out_dtype, c0, off);
    }
    if (h->d.has_bias)
        x += in_at(h, h->bias, j);
    return test_act(h->d.epilogue, x);
}

/* The launch arguments in tl_op_gemm_ex_program's documented order. */
static int documented_args(const hgemm *h, tl_arg *args)
{
    const tl_gemm_desc *d = &h->d;
    const tl_gemm_args *g = &h->g;
    int n = 0;
    bool plain = !h->arrays && g->batch == 1 && h->lda == d->k && h->ldb == (d->trans_b ? d->k : d->n) &&
                 h->ldc == d->n && (float)g->alpha == 1.0f && g->beta == 0;
    args[n++] = tl_arg_int(d->m), args[n++] = tl_arg_int(d->n), args[n++] = tl_arg_int(d->k);
    if (!plain) {
        args[n++] = tl_arg_int(g->batch);
        args[n++] = tl_arg_int(h->lda), args[n++] = tl_arg_int(h->ldb), args[n++] = tl_arg_int(h->ldc);
        if (!h->arrays) {
            args[n++] = tl_arg_int(h->sa), args[n++] = tl_arg_int(h->sb), args[n++] = tl_arg_int(h->sc);
            args[n++] = tl_arg_int(g->batch > 1 && h->sa ? g->batch : 1);
            args[n++] = tl_arg_int(g->batch > 1 && h->sb ? g->batch : 1);
        }
        args[n++] = tl_arg_float(g->alpha);
        if (g->beta != 0)
            args[n++] = tl_arg_float(g->beta);
    }
    args[n++] = tl_arg_hptr((void *)(uintptr_t)(h->arrays ? g->a_array : g->a));
    args[n++] = tl_arg_hptr((void *)(uintptr_t)(h->arrays ? g->b_array : g->b));
    if (d->has_bias)
        args[n++] = tl_arg_hptr(h->bias);
    args[n++] = tl_arg_hptr((void *)(uintptr_t)(h->arrays ? g->c_array : g->c));
    return n;
}

/* Whether element off of the strided C buffer belongs to some entry. */
static bool in_entry(const hgemm *h, int64_t off)
{
    for (int64_t e = 0; e < h->g.batch; e++) {
        int64_t r = off - e * h->sc;
        if (r >= 0 && r / h->ldc < h->d.m && r % h->ldc < h->d.n)
            return true;
    }
    return false;
}

/* Interprets the kernel of h and compares: every entry against ref_at
 * (relative error within tol), every other byte of C unchanged. */
static void check_interp(hgemm *h, double tol, const char *what)
{
    tl_kernel *k;
    assert_status(tl_op_gemm_ex_build(ctx, &h->d, &h->g, &k), TL_OK);
    tl_arg args[24];
    int n = documented_args(h, args);
    tl_status st = tl_interpret(k, n, args);
    if (st != TL_OK)
        fail_msg("%s: tl_interpret: %s: %s", what, tl_status_name(st), tl_ctx_error(ctx));
    tl_kernel_destroy(k);
    int64_t M = h->d.m, N = h->d.n, nb = h->g.batch, total = nb * M * N;
    double *got = malloc(sizeof(double) * (size_t)total), *want = malloc(sizeof(double) * (size_t)total);
    assert_true(got && want);
    for (int64_t e = 0, t = 0; e < nb; e++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++, t++) {
                int64_t off;
                const unsigned char *c = c_buf(h, e, false, i, j, &off);
                got[t] = test_elem(h->d.out_dtype, c, off);
                want[t] = ref_at(h, e, i, j);
            }
    tl_span o = {.dtype = TL_F64, .n = total, .host = got}, r = {.dtype = TL_F64, .n = total, .host = want};
    tl_check_result res;
    assert_status(tl_check(NULL, &o, &r, tol, &res), TL_OK);
    if (!res.pass)
        fail_msg("%s: rel err %.3e (tol %.0e), first bad %lld: got %g want %g", what, res.rel_err, tol,
                 (long long)res.first_bad, res.first_bad >= 0 ? got[res.first_bad] : 0.0,
                 res.first_bad >= 0 ? want[res.first_bad] : 0.0);
    /* the rest of C: not written */
    size_t es = osz(h);
    if (h->arrays) {
        for (int64_t e = 0; e < nb; e++)
            for (size_t x = 0; x < h->c_n; x++)
                if ((int64_t)x % h->ldc >= N && memcmp(h->ec[e] + x * es, h->ec0[e] + x * es, es))
                    fail_msg("%s: entry %lld: element %zu outside the matrix was written", what, (long long)e, x);
    } else {
        for (size_t x = 0; x < h->c_n; x++)
            if (!in_entry(h, (int64_t)x) && memcmp(h->c + x * es, h->c0 + x * es, es))
                fail_msg("%s: element %zu of C outside every entry was written", what, x);
    }
    free(got), free(want);
}

static const tl_gemm_schedule small_schedule = {.block_m = 32, .block_n = 32, .block_k = 16, .stages = 2, .threads = 128};

static double tol_of(tl_dtype out) { return out == TL_F32 ? 1e-5 : 1e-2; }

/* One call of the interpreter for each layout of B, with the small
 * schedule (several blocks) and the op's own choice. */
static void check_both_layouts(tl_gemm_desc d, tl_gemm_args g, uint64_t seed, const char *what)
{
    for (int tb = 0; tb < 2; tb++)
        for (int own = 0; own < 2; own++) {
            d.trans_b = tb;
            d.schedule = own ? (tl_gemm_schedule){0} : small_schedule;
            tl_gemm_args gg = g;
            if (tb && g.ldb) /* B as [N, K]: rows of K */
                gg.ldb = d.k + (g.ldb - d.n);
            hgemm h;
            hgemm_init(&h, &d, &gg, seed + 100 * (uint64_t)tb);
            char w[160];
            snprintf(w, sizeof w, "%s %s, %s schedule", what, tb ? "NT" : "NN", own ? "the op's" : "a small");
            check_interp(&h, tol_of(d.out_dtype), w);
            hgemm_free(&h);
        }
}

/* ------------------------------------------------------------------------ */
/* Numerics                                                                  */
/* ------------------------------------------------------------------------ */

/* Rows wider than the matrices (sub-matrices of larger buffers) and alpha:
 * the strided kernel with one entry; the padding is never written. */
static void test_leading_dims_alpha(void **state)
{
    (void)state;
    tl_gemm_desc d = {.m = 37, .n = 45, .k = 29, .in_dtype = TL_BF16, .out_dtype = TL_F32, .has_bias = 1,
                      .epilogue = TL_EPI_GELU_TANH};
    tl_gemm_args g = tl_gemm_default_args();
    g.lda = 40, g.ldb = 52, g.ldc = 50, g.alpha = -1.5;
    check_both_layouts(d, g, 11000, "ld 40/52/50, alpha -1.5");
    /* alpha alone makes a general call too; so do leading dimensions alone */
    tl_gemm_args h = tl_gemm_default_args();
    h.alpha = 0.25;
    d.out_dtype = TL_BF16;
    d.has_bias = 0, d.epilogue = TL_EPI_NONE;
    check_both_layouts(d, h, 11100, "alpha 0.25");
    h = tl_gemm_default_args();
    h.ldc = 64;
    check_both_layouts(d, h, 11200, "ldc 64");
}

/* B's rows off the L2's 32-byte sectors are a property of ldb, not of N
 * or K: the op's choice for a call of 4096^3 takes clusters of two (TMA
 * multicast of B) with ldb = 4104 (8208-byte rows), batched or not, and not
 * with 4096 or 4112; the strided kernel with clusters compiles; and its
 * numerics in the interpreter with such a schedule at ragged sizes, rows of
 * B padded off the sectors, a batch and alpha. */
static void test_b_rows_off_sectors(void **state)
{
    (void)state;
    const int64_t ldbs[] = {4096, 4104, 4112};
    for (int i = 0; i < 3; i++)
        for (int batch = 1; batch <= 2; batch++) {
            tl_gemm_desc d = {.m = 4096, .n = 4096, .k = 4096, .in_dtype = TL_BF16, .out_dtype = TL_BF16,
                              .trans_b = 1};
            tl_gemm_args g = tl_gemm_default_args();
            g.ldb = ldbs[i], g.batch = batch;
            g.stride_a = 4096 * 4096, g.stride_b = 4096 * ldbs[i], g.stride_c = 4096 * 4096;
            tl_kernel *k;
            assert_status(tl_op_gemm_ex_build(ctx, &d, &g, &k), TL_OK);
            char *src;
            assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
            bool clustered = strstr(src, "__cluster_dims__") != NULL;
            if (clustered != (ldbs[i] == 4104))
                fail_msg("ldb %lld, batch %d: clusters %d", (long long)ldbs[i], batch, clustered);
            tl_free_host(src);
            if (i == 1 && batch == 2) {
                tl_program *p;
                if (tl_compile(k, NULL, &p) != TL_OK)
                    fail_msg("the strided kernel in clusters: %s", tl_ctx_error(ctx));
                tl_program_destroy(p);
            }
            tl_kernel_destroy(k);
        }
    tl_gemm_desc d = {.m = 130, .n = 140, .k = 72, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = 1,
                      .has_bias = 1, .epilogue = TL_EPI_RELU,
                      .schedule = {.block_m = 64, .block_n = 128, .block_k = 64, .stages = 4, .threads = 128,
                                   .swizzle = 8, .cluster_m = 2}};
    tl_gemm_args g = tl_gemm_default_args();
    g.ldb = 76, g.batch = 2, g.alpha = 0.5; /* rows of 152 bytes: off the sectors */
    g.stride_a = 130 * 72, g.stride_b = 140 * 76 + 8, g.stride_c = 130 * 140;
    hgemm h;
    hgemm_init(&h, &d, &g, 12500);
    check_interp(&h, tol_of(d.out_dtype), "clusters of two, ldb 76, batch 2");
    hgemm_free(&h);
}

/* A strided batch with gaps between the entries, and beta with C read. */
static void test_strided_batch_beta(void **state)
{
    (void)state;
    tl_gemm_desc d = {.m = 33, .n = 40, .k = 24, .in_dtype = TL_F16, .out_dtype = TL_F32, .has_bias = 1,
                      .epilogue = TL_EPI_RELU};
    tl_gemm_args g = tl_gemm_default_args();
    g.batch = 3, g.lda = 30, g.ldb = 44, g.ldc = 41;
    g.stride_a = 33 * 30 + 7, g.stride_b = 40 * 44 + 3, g.stride_c = 33 * 41 + 5;
    g.alpha = 0.5, g.beta = -0.75;
    check_both_layouts(d, g, 12000, "batch 3, beta -0.75");
    /* dense entries back to back, bf16 out, beta 1 (accumulate into C) */
    d = (tl_gemm_desc){.m = 20, .n = 24, .k = 16, .in_dtype = TL_BF16, .out_dtype = TL_BF16};
    g = tl_gemm_default_args();
    g.batch = 4, g.stride_a = 20 * 16, g.stride_b = 16 * 24, g.stride_c = 20 * 24, g.beta = 1;
    check_both_layouts(d, g, 12100, "batch 4 dense, beta 1");
}

/* stride_a or stride_b 0: one matrix for every entry. */
static void test_shared_operand(void **state)
{
    (void)state;
    tl_gemm_desc d = {.m = 24, .n = 36, .k = 20, .in_dtype = TL_BF16, .out_dtype = TL_F32};
    tl_gemm_args g = tl_gemm_default_args();
    g.batch = 3, g.stride_a = 0, g.stride_b = 20 * 36 + 4, g.stride_c = 24 * 36;
    check_both_layouts(d, g, 13000, "A shared");
    g.stride_a = 24 * 20, g.stride_b = 0;
    check_both_layouts(d, g, 13100, "B shared");
}

/* Entries side by side in the rows of one wide C (stride_c = N, ldc =
 * batch N): apart, so allowed. */
static void test_entries_side_by_side(void **state)
{
    (void)state;
    tl_gemm_desc d = {.m = 18, .n = 20, .k = 12, .in_dtype = TL_BF16, .out_dtype = TL_F32, .has_bias = 1};
    tl_gemm_args g = tl_gemm_default_args();
    g.batch = 3, g.stride_a = 18 * 12, g.stride_b = 12 * 20, g.stride_c = 20, g.ldc = 64;
    check_both_layouts(d, g, 14000, "side by side");
}

/* Arrays of pointers (host pointers in the interpreter). */
static void test_pointer_arrays(void **state)
{
    (void)state;
    tl_gemm_desc d = {.m = 35, .n = 33, .k = 26, .in_dtype = TL_BF16, .out_dtype = TL_F32, .has_bias = 1,
                      .epilogue = TL_EPI_GELU_ERF};
    tl_gemm_args g = tl_gemm_default_args();
    g.batch = 3, g.a_array = g.b_array = g.c_array = 8, g.lda = 27, g.ldb = 40, g.ldc = 36;
    check_both_layouts(d, g, 15000, "pointer arrays");
    g.beta = 0.5, g.alpha = 2;
    d.out_dtype = TL_F16;
    check_both_layouts(d, g, 15100, "pointer arrays, beta 0.5");
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

static void expect_error(const tl_gemm_desc *d, const tl_gemm_args *g, tl_status want, const char *fragment)
{
    tl_status st = tl_op_gemm_ex(ctx, d, g, NULL);
    if (st != want)
        fail_msg("tl_op_gemm_ex gave %s (%s), wanted %s with \"%s\"", tl_status_name(st), tl_ctx_error(ctx),
                 tl_status_name(want), fragment);
    const char *msg = tl_ctx_error(ctx);
    if (strncmp(msg, "tl_op_gemm_ex: ", 15) != 0 || !strstr(msg, fragment))
        fail_msg("message \"%s\" does not start with tl_op_gemm_ex or lacks \"%s\"", msg, fragment);
    /* the program functions check the same shape of call */
    const tl_program *p = NULL;
    bool pointer_error = strstr(fragment, "aligned") || strstr(fragment, "null") || strstr(fragment, "is set, but");
    if (!pointer_error) {
        assert_status(tl_op_gemm_ex_program(ctx, d, g, &p), want);
        assert_non_null(strstr(tl_ctx_error(ctx), "tl_op_gemm_ex_program: "));
        tl_kernel *k = NULL;
        assert_status(tl_op_gemm_ex_build(ctx, d, g, &k), want);
        assert_null(k);
    }
}

static void test_errors(void **state)
{
    (void)state;
    const uint64_t A = 0x100000, B = 0x200000, C = 0x300000, BIAS = 0x400000;
    tl_gemm_desc d = {.m = 64, .n = 48, .k = 32, .in_dtype = TL_BF16, .out_dtype = TL_BF16};
    tl_gemm_args ok = tl_gemm_default_args(), g;
    ok.a = A, ok.b = B, ok.c = C;

    assert_status(tl_op_gemm_ex(NULL, &d, &ok, NULL), TL_ERR_INVALID_ARG);
    expect_error(&d, NULL, TL_ERR_INVALID_ARG, "NULL args");
    expect_error(NULL, &ok, TL_ERR_INVALID_ARG, "NULL descriptor");
    /* leading dimensions */
    g = ok, g.lda = 31;
    expect_error(&d, &g, TL_ERR_INVALID_ARG, "lda = 31 is shorter than a row of A (32 elements)");
    g = ok, g.ldb = 47;
    expect_error(&d, &g, TL_ERR_INVALID_ARG, "ldb = 47 is shorter than a row of B (48 elements)");
    tl_gemm_desc nt = d;
    nt.trans_b = 1;
    g = ok, g.ldb = 40; /* B [N, K]: rows of K = 32 */
    assert_status(tl_op_gemm_ex_program(ctx, &nt, &g, &(const tl_program *){NULL}), TL_OK);
    g.ldb = 31;
    expect_error(&nt, &g, TL_ERR_INVALID_ARG, "ldb = 31 is shorter than a row of B (32 elements)");
    g = ok, g.ldc = 47;
    expect_error(&d, &g, TL_ERR_INVALID_ARG, "ldc = 47 is shorter than a row of C (48 elements)");
    g = ok, g.lda = -1;
    expect_error(&d, &g, TL_ERR_INVALID_ARG, "lda = -1 is negative (0 means dense rows)");
    /* the batch and its strides */
    g = ok, g.batch = 0;
    expect_error(&d, &g, TL_ERR_INVALID_ARG, "batch = 0 is outside 1..65535");
    g = ok, g.batch = 65536;
    expect_error(&d, &g, TL_ERR_INVALID_ARG, "batch = 65536 is outside 1..65535");
    g = ok, g.batch = 2, g.stride_b = -5;
    expect_error(&d, &g, TL_ERR_INVALID_ARG, "stride_b = -5 is negative");
    g = ok, g.batch = 2, g.stride_a = 64 * 32, g.stride_b = 32 * 48;
    expect_error(&d, &g, TL_ERR_INVALID_ARG, "stride_c = 0 makes the C of batch entries overlap (each is 64 x 48 "
                                             "with ldc = 48)");
    g.stride_c = 64 * 48 - 1; /* the last element of entry 0 is the first of entry 1 */
    expect_error(&d, &g, TL_ERR_INVALID_ARG, "stride_c = 3071 makes the C of batch entries overlap");
    g.stride_c = 10, g.ldc = 58; /* side by side, but too close */
    expect_error(&d, &g, TL_ERR_INVALID_ARG, "stride_c = 10 makes the C");
    g.stride_c = 48 + 58; /* one row down and 48 along: inside entry 0 when M > 1 */
    expect_error(&d, &g, TL_ERR_INVALID_ARG, "stride_c = 106 makes the C");
    g.batch = 3, g.stride_c = 63 * 58 + 48; /* entries 1 and 2 touch at the last row */
    tl_gemm_args apart = g;
    assert_status(tl_op_gemm_ex_program(ctx, &d, &apart, &(const tl_program *){NULL}), TL_OK);
    g.stride_c = 63 * 58 + 47;
    expect_error(&d, &g, TL_ERR_INVALID_ARG, "stride_c = 3701 makes the C");
    /* a stride for one entry is ignored; a stride of A or B may be 0 */
    g = ok, g.stride_c = 1;
    assert_status(tl_op_gemm_ex_program(ctx, &d, &g, &(const tl_program *){NULL}), TL_OK);
    /* pointer arrays */
    tl_gemm_args pa = tl_gemm_default_args();
    pa.batch = 2, pa.a_array = 0x1000, pa.b_array = 0x2000, pa.c_array = 0x3000;
    g = pa, g.c_array = 0;
    expect_error(&d, &g, TL_ERR_INVALID_ARG, "a pointer-array batch needs a_array, b_array and c_array; c_array is 0");
    g = pa, g.a_array = 0;
    expect_error(&d, &g, TL_ERR_INVALID_ARG, "a_array is 0");
    g = pa, g.b = B;
    expect_error(&d, &g, TL_ERR_INVALID_ARG, "b = 0x200000 is set, but the batch is a pointer array (b_array): b must "
                                             "be 0");
    g = pa, g.stride_c = 100;
    expect_error(&d, &g, TL_ERR_INVALID_ARG, "stride_c = 100 is set, but the batch is a pointer array (c_array)");
    g = pa, g.b_array = 0x2004;
    expect_error(&d, &g, TL_ERR_INVALID_ARG, "b_array = 0x2004 is not aligned to its 8-byte device pointers");
    /* device pointers */
    g = ok, g.a = 0;
    expect_error(&d, &g, TL_ERR_INVALID_ARG, "a is a null device pointer");
    g = ok, g.c = C + 1;
    expect_error(&d, &g, TL_ERR_INVALID_ARG, "c = 0x300001 is not aligned to its 2-byte elements");
    tl_gemm_desc biased = d;
    biased.has_bias = 1;
    expect_error(&biased, &ok, TL_ERR_INVALID_ARG, "bias is a null device pointer");
    g = ok, g.bias = BIAS + 1;
    expect_error(&biased, &g, TL_ERR_INVALID_ARG, "bias = 0x400001 is not aligned");
    /* the descriptor's own checks, named by the call */
    tl_gemm_desc bad = d;
    bad.k = 0;
    expect_error(&bad, &ok, TL_ERR_INVALID_ARG, "M, N, K must be >= 1");
    bad = d, bad.in_dtype = TL_F32;
    expect_error(&bad, &ok, TL_ERR_DTYPE, "inputs must be bf16, f16, f8e4m3 or f8e5m2");
    /* misaligned (not 16-byte) pointers and strides are no error: a valid
     * call compiles and then finds no device on this context */
    g = ok, g.a = A + 2, g.lda = 33, g.batch = 2, g.stride_a = 64 * 33 + 1, g.stride_b = 32 * 48,
    g.stride_c = 64 * 48;
    assert_status(tl_op_gemm_ex(ctx, &d, &g, NULL), TL_ERR_NO_DEVICE);
    assert_non_null(strstr(tl_ctx_error(ctx), "tl_op_gemm_ex: "));
    /* tl_op_gemm names itself */
    assert_status(tl_op_gemm(ctx, &d, A, B, 0, C + 1, NULL), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "tl_op_gemm: c = 0x300001"));
    /* the baseline's checks come before it needs a device */
    g = ok, g.lda = 31;
    assert_status(tl_baseline_gemm_ex(ctx, &d, &g, NULL), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "tl_baseline_gemm_ex: lda = 31 is not 0 or in 32.."));
    assert_status(tl_baseline_gemm_ex(ctx, &d, NULL, NULL), TL_ERR_INVALID_ARG);
    g = pa, g.a_array = 0;
    assert_status(tl_baseline_gemm_ex(ctx, &d, &g, NULL), TL_ERR_INVALID_ARG);
    assert_status(tl_baseline_gemm_ex(ctx, &d, &ok, NULL), TL_ERR_NO_DEVICE);
}

/* ------------------------------------------------------------------------ */
/* Programs                                                                  */
/* ------------------------------------------------------------------------ */

/* One program per kind of call: the plain call is tl_op_gemm's program;
 * strides, batches and alpha share one general program; beta and pointer
 * arrays each compile their own. The launch arguments are as documented. */
static void test_one_program_per_kind(void **state)
{
    (void)state;
    tl_gemm_desc d = {.m = 200, .n = 136, .k = 72, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = 1,
                      .schedule = {128, 128, 64, 3, 256, 8, 0, 0, 0, 0}};
    const tl_program *plain, *p, *q;
    tl_gemm_args g = tl_gemm_default_args();
    assert_status(tl_op_gemm_program(ctx, &d, &plain), TL_OK);
    assert_status(tl_op_gemm_ex_program(ctx, &d, &g, &p), TL_OK);
    assert_ptr_equal(plain, p);
    g.alpha = 3;
    assert_status(tl_op_gemm_ex_program(ctx, &d, &g, &p), TL_OK);
    assert_ptr_not_equal(plain, p);
    tl_gemm_args h = tl_gemm_default_args();
    h.batch = 7, h.lda = 100, h.ldb = 80, h.ldc = 200, h.stride_a = 99999, h.stride_b = 0, h.stride_c = 200 * 200;
    assert_status(tl_op_gemm_ex_program(ctx, &d, &h, &q), TL_OK);
    assert_ptr_equal(p, q);
    static const char *const strided[] = {"M", "N", "K", "batch", "lda", "ldb", "ldc", "stride_a", "stride_b",
                                          "stride_c", "batch_a", "batch_b", "alpha", "A", "B", "C", NULL};
    static const char *const arrays[] = {"M", "N", "K", "batch", "lda", "ldb", "ldc", "alpha", "beta", "A", "B",
                                         "bias", "C", NULL};
    tl_param_info info;
    for (int i = 0; strided[i]; i++) {
        assert_status(tl_program_param(q, i, &info), TL_OK);
        assert_string_equal(info.name, strided[i]);
        assert_int_equal(info.pointer_array, 0);
    }
    assert_status(tl_program_param(q, 16, &info), TL_ERR_INVALID_ARG);
    h.beta = 0.5;
    assert_status(tl_op_gemm_ex_program(ctx, &d, &h, &q), TL_OK);
    assert_ptr_not_equal(p, q);
    assert_status(tl_program_param(q, 13, &info), TL_OK);
    assert_string_equal(info.name, "beta");
    tl_gemm_args pa = tl_gemm_default_args();
    pa.batch = 2, pa.a_array = pa.b_array = pa.c_array = 8, pa.beta = 2;
    d.has_bias = 1;
    assert_status(tl_op_gemm_ex_program(ctx, &d, &pa, &q), TL_OK);
    for (int i = 0; arrays[i]; i++) {
        assert_status(tl_program_param(q, i, &info), TL_OK);
        assert_string_equal(info.name, arrays[i]);
        bool arr = !strcmp(arrays[i], "A") || !strcmp(arrays[i], "B") || !strcmp(arrays[i], "C");
        assert_int_equal(info.pointer_array, arr);
    }
    /* the kernels' names */
    tl_kernel *k;
    assert_status(tl_op_gemm_ex_build(ctx, &d, &pa, &k), TL_OK);
    char *dump;
    assert_status(tl_kernel_dump(k, &dump), TL_OK);
    assert_non_null(strstr(dump, "gemm_ntbf16_bf16_ptrarray_beta"));
    assert_non_null(strstr(dump, "one per block.z of an array of batch"));
    tl_free_host(dump);
    tl_kernel_destroy(k);
    /* tl_program_check cannot follow device pointers in device memory */
    tl_check_result res;
    assert_status(tl_program_check(q, NULL, 0, NULL, NULL, NULL, 1e-2, &res), TL_ERR_UNSUPPORTED);
    assert_non_null(strstr(tl_ctx_error(ctx), "'A' is an array of pointers"));
}

/* The generated code of each kernel: a strided batch reads its operands
 * through 3-D TMA maps at min(z, batch_a - 1) on sm_90a (the ping-pong
 * kernel walks the batch as tiles), a pointer array takes each block's
 * matrices from its arrays and copies them element by element; an
 * accumulator stored to a 3-D C keeps its unmasked path only for even
 * batch strides; NVRTC accepts each for sm_80 and sm_90a. */
static void test_generated_code(void **state)
{
    (void)state;
    tl_gemm_desc d = {.m = 256, .n = 256, .k = 256, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .has_bias = 1,
                      .epilogue = TL_EPI_RELU,
                      .schedule = {.block_m = 64, .block_n = 128, .block_k = 64, .stages = 4, .threads = 128,
                                   .swizzle = 8}}; /* one CTA a tile: C stored from registers */
    tl_gemm_args st = tl_gemm_default_args(), pa = tl_gemm_default_args();
    st.batch = 4, st.stride_a = st.stride_b = st.stride_c = 256 * 256, st.beta = 0.5;
    pa.batch = 4, pa.a_array = pa.b_array = pa.c_array = 8;
    struct {
        const tl_gemm_args *g;
        const char *has[3];
        const char *lacks;
    } cases[] = {
        {&st, {"tl_tma_load_3d(", "tl_min(tl_bz, (batch_a - 1LL))", "tl_in(tl_bz, tl_C_d0) && tl_C_s0 % 2 == 0"},
         NULL},
        {&pa, {"const tl_bf16 *const A = tl_arr_A[tl_bz];", "tl_bf16 *const *tl_arr_C", "tl_ld(A + "}, "tl_tma_load"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tl_kernel *k;
        assert_status(tl_op_gemm_ex_build(ctx, &d, cases[i].g, &k), TL_OK);
        char *src;
        assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
        for (int j = 0; j < 3; j++)
            if (!strstr(src, cases[i].has[j]))
                fail_msg("case %zu: the source lacks \"%s\"", i, cases[i].has[j]);
        if (cases[i].lacks && strstr(src, cases[i].lacks))
            fail_msg("case %zu: the source has \"%s\"", i, cases[i].lacks);
        tl_free_host(src);
        char *ptx = NULL;
        tl_status s = tl_kernel_ptx(k, "sm_90a", &ptx);
        tl_free_host(ptx);
        if (s == TL_ERR_NO_NVRTC) {
            tl_kernel_destroy(k);
            print_message("  skip: NVRTC is missing\n");
            skip();
        }
        if (s != TL_OK)
            fail_msg("case %zu: sm_90a: %s", i, tl_ctx_error(ctx));
        test_ptx_or_skip(ctx, k); /* sm_80; destroys k */
    }
}

/* ------------------------------------------------------------------------ */
/* Split-K                                                                   */
/* ------------------------------------------------------------------------ */

/* A split-K schedule's two kernels in the interpreter: the slices into an
 * f32 workspace (poisoned first), then their sum with bias and GELU, at a
 * ragged K whose last slice is short, and with more slices than K steps
 * (empty slices add zeros). Both kernels' code through NVRTC. */
static void test_split_k(void **state)
{
    (void)state;
    const struct {
        int64_t m, n, k;
        int split, trans_b, swap;
        tl_dtype out;
    } cases[] = {
        {5, 70, 200, 3, 0, 0, TL_BF16}, /* 13 K steps of 16: slices of 5, 4 and 4 (steps 0 3 6 9 12, ...) */
        {3, 33, 200, 3, 1, 0, TL_F32},
        {2, 40, 40, 16, 1, 0, TL_F16},  /* 3 K steps, 16 slices: 13 of them empty */
        {5, 70, 200, 3, 1, 1, TL_BF16}, /* C^T = B A^T, into the workspace through its transpose */
        {3, 75, 100, 0, 1, 1, TL_F32},  /* C^T without a split: C through its transpose */
        {5, 70, 200, 3, 0, 1, TL_BF16}, /* B as [K, N]: B^T read as a transposed A (sm_90a only) */
        {3, 75, 100, 0, 0, 1, TL_F32},
        {2, 40, 400, 16, 0, 1, TL_F16},
    };
    /* on sm_90a a split of up to 8 slices is one kernel whose clusters add
     * the slices through distributed shared memory; on sm_80 (and past 8
     * slices) the slices go to a workspace that a second kernel adds up */
    tl_ctx *c80 = test_offline_ctx("sm_80");
    assert_non_null(c80);
    /* B^T as a transposed A needs wgmma's tiles: 64 rows a warpgroup */
    const tl_gemm_schedule wg_schedule = {.block_m = 64, .block_n = 16, .block_k = 64, .stages = 2, .threads = 128};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int t = 0; t < 2; t++) {
            tl_ctx *cx = t ? c80 : ctx;
            bool nn_swap = cases[i].swap && !cases[i].trans_b;
            tl_gemm_desc d = {.m = cases[i].m, .n = cases[i].n, .k = cases[i].k, .in_dtype = TL_BF16,
                              .out_dtype = cases[i].out, .trans_b = cases[i].trans_b, .has_bias = 1,
                              .epilogue = TL_EPI_GELU_TANH, .schedule = nn_swap ? wg_schedule : small_schedule};
            d.schedule.split_k = cases[i].split;
            d.schedule.swap_ab = cases[i].swap;
            tl_gemm_args g = tl_gemm_default_args();
            hgemm h;
            hgemm_init(&h, &d, &g, 9100 + 10 * i);
            int64_t S = cases[i].split ? cases[i].split : 1, M = d.m, N = d.n;
            bool cluster = t == 0 && S > 1 && S * d.schedule.block_m * d.schedule.block_n <= 4096,
                 workspace = S > 1 && !cluster;
            float *w = malloc(sizeof(float) * (size_t)(S * M * N));
            assert_non_null(w);
            for (int64_t x = 0; x < S * M * N; x++)
                w[x] = NAN; /* every element must be written */
            tl_kernel *slices, *sum = NULL;
            if (t == 1 && cases[i].swap && !cases[i].trans_b) { /* mma.sync has no transposed A */
                assert_status(tl_op_gemm_build(cx, &d, &slices), TL_ERR_INVALID_ARG);
                test_expect_text(tl_ctx_error(cx), "the error", (const char *[]){"swap_ab with B as [K, N] needs wgmma"},
                                 1, NULL, 0);
                free(w);
                hgemm_free(&h);
                continue;
            }
            assert_status(tl_op_gemm_build(cx, &d, &slices), TL_OK);
            char *src;
            assert_status(tl_kernel_source(slices, t ? "sm_80" : "sm_90a", &src), TL_OK);
            const char *kind = cluster ? "_cluster_split" : workspace ? "_slices" : "_swapped";
            test_expect_text(src, "the split kernel", &kind, 1, NULL, 0);
            /* one or two tiles of C's rows: B is streamed (tl_use_cache_policy) */
            test_expect_text(src, "the split kernel", (const char *[]){"_ef("}, 1, NULL, 0);
            tl_free_host(src);
            if (workspace) {
                tl_arg a1[6] = {tl_arg_int(M), tl_arg_int(N), tl_arg_int(d.k), tl_arg_hptr(h.a), tl_arg_hptr(h.b),
                                tl_arg_hptr(w)};
                assert_status(tl_interpret(slices, 6, a1), TL_OK);
                assert_status(tli_gemm_slices_sum_build(cx, &d, (int)S, &sum), TL_OK);
                tl_arg a2[5] = {tl_arg_int(M), tl_arg_int(N), tl_arg_hptr(w), tl_arg_hptr(h.bias), tl_arg_hptr(h.c)};
                assert_status(tl_interpret(sum, 5, a2), TL_OK);
            } else { /* one kernel: the plain call's arguments */
                tl_arg a1[7] = {tl_arg_int(M), tl_arg_int(N), tl_arg_int(d.k), tl_arg_hptr(h.a), tl_arg_hptr(h.b),
                                tl_arg_hptr(h.bias), tl_arg_hptr(h.c)};
                assert_status(tl_interpret(slices, 7, a1), TL_OK);
            }
            double err = 0, norm = 0;
            for (int64_t r = 0; r < M; r++)
                for (int64_t c = 0; c < N; c++) {
                    int64_t off;
                    const unsigned char *cb = c_buf(&h, 0, false, r, c, &off);
                    double got = test_elem(d.out_dtype, cb, off);
                    double want = ref_at(&h, 0, r, c);
                    err += (got - want) * (got - want), norm += want * want;
                }
            if (!(sqrt(err / norm) <= tol_of(d.out_dtype)))
                fail_msg("case %zu (%s): split %lld, swap %d: rel err %.3e", i, t ? "sm_80" : "sm_90a", (long long)S,
                         cases[i].swap, sqrt(err / norm));
            for (int j = 0; j < 2; j++) {
                tl_kernel *k = j ? sum : slices;
                if (!k)
                    continue;
                if (t == 0) { /* sm_90a's ptx */
                    char *ptx = NULL;
                    tl_status st = tl_kernel_ptx(k, "sm_90a", &ptx);
                    tl_free_host(ptx);
                    if (st != TL_OK && st != TL_ERR_NO_NVRTC)
                        fail_msg("case %zu: kernel %d: sm_90a: %s", i, j, tl_ctx_error(ctx));
                    tl_kernel_destroy(k);
                } else {
                    test_ptx_or_skip(cx, k); /* sm_80; destroys k */
                }
            }
            free(w);
            hgemm_free(&h);
        }
    tl_ctx_destroy(c80);
}

/* Which calls split K: the decode shapes (M <= 64, K >= 1024, rows TMA
 * reads) on sm_90a with fewer than 64 tiles of 64x128, with about one CTA
 * an SM of 132 (swapped tiles: two where one would leave K whole); the
 * checks of an explicit split_k; the tuner leaves split-K out. */
static void test_split_k_choice(void **state)
{
    (void)state;
    tl_ctx *c = test_offline_ctx("sm_90a");
    assert_non_null(c);
    const struct {
        int64_t m, n, k;
        int split, swap;
    } want[] = {
        {2, 4096, 4096, 2, 1},    /* C^T on 64 tiles of 64x16: 2 slices of 32 steps (at least 32); M = 1 takes
                                     the matrix-vector kernel (test_gemv.c) */
        {8, 14336, 4096, 0, 1},   /* 224 tiles: no split */
        {16, 4096, 14336, 2, 1},  /* one CTA an SM: 224 steps in slices of 112 */
        {32, 4096, 4096, 2, 1},   /* C^T on 64 tiles of 64x32: 2 slices of 32 steps */
        {64, 4096, 8192, 4, 0},   /* 32 tiles: 128 steps in slices of 32 */
        {64, 8192, 8192, 0, 0},   /* 64 tiles: no split, the persistent kernel (8 stages, C by TMA) */
        {64, 32768, 4096, 0, 0},  /* 256 tiles fill the GPU alone */
        {65, 4096, 4096, 0, 0},   /* not a decode shape */
        {16, 4096, 512, 0, 0},    /* K too short to split */
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        tl_gemm_desc d = {.m = want[i].m, .n = want[i].n, .k = want[i].k, .in_dtype = TL_BF16,
                          .out_dtype = TL_BF16, .trans_b = 1};
        tl_gemm_schedule s = tl_op_gemm_schedule(c, &d);
        if (s.split_k != want[i].split || s.swap_ab != want[i].swap)
            fail_msg("%lldx%lldx%lld: split_k %d swap_ab %d, want %d %d", (long long)d.m, (long long)d.n,
                     (long long)d.k, s.split_k, s.swap_ab, want[i].split, want[i].swap);
        /* swapped tiles unsplit with a CTA an SM, or with fewer CTAs than SMs: K steps of 128 */
        int64_t ctas = ((d.n + 63) / 64) * ((d.m + s.block_n - 1) / s.block_n) * (s.split_k > 1 ? s.split_k : 1);
        if (want[i].split || want[i].swap)
            assert_true(s.block_m == 64 && s.block_n == (want[i].swap ? (d.m <= 16 ? 16 : 32) : 128) &&
                        s.block_k == (want[i].swap && (!want[i].split || ctas < 132) ? 128 : 64) &&
                        s.threads == 128 && !s.pingpong);
        if (d.m > 32 && d.m <= 64 && !want[i].split) /* wide decode: the producer warpgroup, no split */
            assert_true(s.block_m == 64 && s.block_n == 128 && s.stages == 8 && s.persistent == 1);
    }
    tl_gemm_desc d = {.m = 1, .n = 4096, .k = 4100, .in_dtype = TL_BF16, .out_dtype = TL_BF16, .trans_b = 1};
    assert_int_equal(tl_op_gemm_schedule(c, &d).split_k, 0); /* K % 8: TMA cannot read the rows */
    d.k = 4096, d.trans_b = 0;
    tl_gemm_schedule nn = tl_op_gemm_schedule(c, &d); /* B as [K, N]: swapped too, B^T a transposed A */
    assert_true(nn.swap_ab == 1 && nn.split_k == 2 && nn.block_m == 64 && nn.block_n == 16);
    d.schedule = (tl_gemm_schedule){.block_m = 64, .block_n = 16, .block_k = 64, .stages = 4, .threads = 128,
                                    .swap_ab = 1};
    tl_kernel *kt;
    assert_status(tl_op_gemm_build(c, &d, &kt), TL_OK);
    char *tsrc;
    assert_status(tl_kernel_source(kt, "sm_90a", &tsrc), TL_OK);
    test_expect_text(tsrc, "the swapped NN kernel", (const char *[]){"_ta(", "tl_wgmma_desc_mn_sw128(tl_A"}, 2, NULL, 0);
    tl_free_host(tsrc);
    tl_kernel_destroy(kt);
    tl_ctx *c80 = test_offline_ctx("sm_80"); /* mma.sync reads no transposed A */
    const tl_program *p0;
    assert_status(tl_op_gemm_program(c80, &d, &p0), TL_ERR_INVALID_ARG);
    test_expect_text(tl_ctx_error(c80), "the error", (const char *[]){"swap_ab with B as [K, N] needs wgmma"}, 1, NULL,
                     0);
    tl_ctx_destroy(c80);
    d.trans_b = 1;
    d.k = 4096;
    d.schedule = (tl_gemm_schedule){.block_m = 64, .split_k = 17};
    const tl_program *p;
    assert_status(tl_op_gemm_program(c, &d, &p), TL_ERR_INVALID_ARG);
    test_expect_text(tl_ctx_error(c), "the error", (const char *[]){"tl_op_gemm_program: ", "split_k = 17"}, 2,
                     NULL, 0);
    d.schedule = (tl_gemm_schedule){.block_m = 128, .block_n = 128, .block_k = 64, .stages = 4, .threads = 128,
                                    .pingpong = 1, .split_k = 2};
    assert_status(tl_op_gemm_program(c, &d, &p), TL_ERR_INVALID_ARG);
    test_expect_text(tl_ctx_error(c), "the error", (const char *[]){"pingpong exclude"}, 1, NULL, 0);
    /* persistent: 0, 1 or 2, and not with the schedules whose blocks differ in trip count or already persist */
    const struct {
        tl_gemm_schedule s;
        const char *why;
    } bad_persistent[] = {
        {{.block_m = 128, .block_n = 256, .block_k = 64, .stages = 4, .threads = 256, .persistent = 3},
         "schedule.persistent = 3 is not 0, 1 or 2"},
        {{.block_m = 128, .block_n = 256, .block_k = 64, .stages = 4, .threads = 256, .persistent = 2, .stream_k = 1},
         "schedule.stream_k needs persistent = 1"},
        {{.block_m = 128, .block_n = 128, .block_k = 64, .stages = 4, .threads = 128, .pingpong = 1,
          .persistent = 1}, "persistent excludes pingpong"},
        {{.block_m = 64, .block_n = 128, .block_k = 64, .stages = 4, .threads = 128, .split_k = 2, .persistent = 1},
         "persistent excludes split_k"},
        {{.block_m = 64, .block_n = 16, .block_k = 64, .stages = 4, .threads = 128, .swap_ab = 1, .persistent = 1},
         "persistent excludes swap_ab"},
    };
    for (size_t i = 0; i < sizeof bad_persistent / sizeof bad_persistent[0]; i++) {
        d.schedule = bad_persistent[i].s;
        assert_status(tl_op_gemm_program(c, &d, &p), TL_ERR_INVALID_ARG);
        test_expect_text(tl_ctx_error(c), "the error", (const char *[]){bad_persistent[i].why}, 1, NULL, 0);
    }
    /* clusters: extents 0..8 with a product of at most 8, not with the schedules that own their
     * blocks' grouping, and only where the target has clusters */
    const struct {
        tl_gemm_schedule s;
        const char *why;
    } bad_cluster[] = {
        {{.block_m = 64, .block_n = 128, .block_k = 64, .stages = 4, .threads = 128, .cluster_m = 9},
         "cluster_m x cluster_n = 9 x 0"},
        {{.block_m = 64, .block_n = 128, .block_k = 64, .stages = 4, .threads = 128, .cluster_m = -1},
         "each must be 0..8"},
        {{.block_m = 64, .block_n = 128, .block_k = 64, .stages = 4, .threads = 128, .cluster_m = 4,
          .cluster_n = 4}, "their product at most 8"},
        {{.block_m = 128, .block_n = 128, .block_k = 64, .stages = 4, .threads = 128, .pingpong = 1,
          .cluster_m = 2}, "cluster_n exclude pingpong"},
        {{.block_m = 128, .block_n = 256, .block_k = 64, .stages = 4, .threads = 256, .persistent = 1,
          .cluster_n = 2}, "cluster_n exclude persistent"},
        {{.block_m = 64, .block_n = 128, .block_k = 64, .stages = 4, .threads = 128, .split_k = 2, .cluster_m = 2},
         "exclude split_k"},
    };
    for (size_t i = 0; i < sizeof bad_cluster / sizeof bad_cluster[0]; i++) {
        d.schedule = bad_cluster[i].s;
        assert_status(tl_op_gemm_program(c, &d, &p), TL_ERR_INVALID_ARG);
        test_expect_text(tl_ctx_error(c), "the error", (const char *[]){bad_cluster[i].why}, 1, NULL, 0);
    }
    {
        tl_ctx *c80c = test_offline_ctx("sm_80");
        d.schedule = (tl_gemm_schedule){.block_m = 64, .block_n = 128, .block_k = 64, .stages = 4, .threads = 128,
                                        .cluster_m = 2};
        const tl_program *p80;
        assert_status(tl_op_gemm_program(c80c, &d, &p80), TL_ERR_INVALID_ARG);
        test_expect_text(tl_ctx_error(c80c), "the error", (const char *[]){"need thread-block clusters", "not sm_80"}, 2,
                         NULL, 0);
        tl_ctx_destroy(c80c);
        /* on sm_90a the grid is whole clusters: 1000 rows are 16 tiles of 64, 1001 are 17 -> 18 */
        tl_kernel *ck;
        char *csrc;
        assert_status(tl_op_gemm_build(c, &d, &ck), TL_OK);
        assert_status(tl_kernel_source(ck, "sm_90a", &csrc), TL_OK);
        test_expect_text(csrc, "the cluster kernel",
                         (const char *[]){"__cluster_dims__(1, 2, 1)", "+ 2LL - 1) / 2LL) * 2LL)", "tl_tma_load_2d_mc("}, 3,
                         NULL, 0);
        tl_free_host(csrc);
        tl_kernel_destroy(ck);
    }
    /* a persistent schedule builds: the producer and the consumers loop over the CTA's blocks */
    d.schedule = (tl_gemm_schedule){.block_m = 128, .block_n = 256, .block_k = 64, .stages = 4, .threads = 256,
                                    .swizzle = 8, .persistent = 1};
    {
        tl_kernel *pk;
        char *psrc;
        assert_status(tl_op_gemm_build(c, &d, &pk), TL_OK);
        assert_status(tl_kernel_source(pk, "sm_90a", &psrc), TL_OK);
        /* C through a staging tile and TMA, in two rounds of 128 columns */
        test_expect_text(psrc, "the persistent kernel",
                         (const char *[]){"persistent CTAs of 384 threads",
                                          "((tl_p * (long long)gridDim.x) + (long long)blockIdx.x)",
                                          "tl_setmaxnreg_dec", "tl_tma_store_2d(&tl_map2, tl_stage_C + 8192, (int)((tl_bx) * 256LL + 192)",
                                          "tl_bulk_wait_read<0>();", "tl_bulk_wait<0>();"},
                         6, (const char *[]){"/ 1 *", "tl_st_vec(tl_cb"}, 2);
        tl_free_host(psrc);
        tl_kernel_destroy(pk);
        /* persistent = 2: the same kernel taking its tiles from the counter, swizzle and TMA store kept */
        d.schedule.persistent = 2;
        assert_status(tl_op_gemm_build(c, &d, &pk), TL_OK);
        assert_status(tl_kernel_source(pk, "sm_90a", &psrc), TL_OK);
        test_expect_text(psrc, "the persistent kernel from the counter",
                         (const char *[]){"taking blocks from a counter",
                                          "atomicAdd(tl_block_counter + 0, (unsigned)(1LL))",
                                          "const long long tl_t = tl_block_slot[(tl_p % 2LL)];", "tl_bulk_wait<0>();"},
                         4, (const char *[]){"((tl_p * (long long)gridDim.x) + (long long)blockIdx.x)"}, 1);
        tl_free_host(psrc);
        tl_kernel_destroy(pk);
    }
    /* the general kernels ignore the split: a batch of two compiles as one pass */
    d.schedule = (tl_gemm_schedule){.block_m = 64, .block_n = 128, .block_k = 64, .stages = 4, .threads = 128,
                                    .split_k = 4};
    tl_gemm_args g = tl_gemm_default_args();
    g.batch = 2, g.stride_c = d.m * d.n;
    tl_kernel *k;
    assert_status(tl_op_gemm_ex_build(c, &d, &g, &k), TL_OK);
    char *src;
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    test_expect_text(src, "the batched kernel", (const char *[]){"_strided"}, 1, (const char *[]){"_slices"}, 1);
    tl_free_host(src);
    tl_kernel_destroy(k);
    assert_status(tl_op_gemm_build(c, &d, &k), TL_OK); /* the plain call's: the slices (64x128 x 4: a workspace) */
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    test_expect_text(src, "the plain call's kernel", (const char *[]){"_slices", "float *W"}, 2, NULL, 0);
    tl_free_host(src);
    tl_kernel_destroy(k);
    /* a small tile in few slices: one kernel, a cluster a tile */
    d.schedule = (tl_gemm_schedule){.block_m = 64, .block_n = 16, .block_k = 64, .stages = 4, .threads = 128,
                                    .split_k = 4, .swap_ab = 1};
    assert_status(tl_op_gemm_build(c, &d, &k), TL_OK);
    assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
    test_expect_text(src, "the cluster kernel",
                     (const char *[]){"_swapped_cluster_split", "__cluster_dims__(1, 1, 4)", "tl_cluster_reduce_sum"},
                     3, (const char *[]){"float *W"}, 1);
    tl_free_host(src);
    tl_kernel_destroy(k);
    tl_ctx_destroy(c);
}

/* ------------------------------------------------------------------------ */
/* tl_param_tensor_array on its own                                         */
/* ------------------------------------------------------------------------ */

/* Y[block z][i] = X[block z][i] * 2 over per-block vectors of n elements:
 * X and Y arrays of `count` pointers, the grid (1, 1, z). */
static tl_kernel *scale_kernel(void)
{
    tl_kernel *k = tl_kernel_new(ctx, "scale_each");
    tl_expr n = tl_dim(k, "n"), count = tl_dim(k, "count"), z = tl_dim(k, "z");
    tl_buf X = tl_param_tensor_array(k, "X", TL_F32, 1, &n, NULL, count, 2);
    tl_buf Y = tl_param_tensor_array(k, "Y", TL_F32, 1, &n, NULL, count, 2);
    tl_grid(k, TL_NONE_EXPR, TL_NONE_EXPR, z, 64);
    tl_expr i = tl_parallel1(k, 64);
    tl_store(k, Y, &i, tl_mul(k, tl_load(k, X, &i), tl_f32(k, 2.0f)));
    tl_end(k);
    return k;
}

static void test_tensor_array(void **state)
{
    (void)state;
    tl_kernel *k = scale_kernel();
    assert_status(tl_kernel_status(k), TL_OK);
    float x[3][40], y[3][40];
    uint64_t px[3], py[3];
    for (int e = 0; e < 3; e++) {
        for (int i = 0; i < 40; i++)
            x[e][i] = (float)(e * 100 + i), y[e][i] = -1;
        px[e] = (uint64_t)(uintptr_t)x[e], py[e] = (uint64_t)(uintptr_t)y[e];
    }
    /* n = 40 of the 64 iterations; 3 blocks along z, 3 pointers */
    tl_arg args[] = {tl_arg_int(40), tl_arg_int(3), tl_arg_int(3), tl_arg_hptr(px), tl_arg_hptr(py)};
    assert_status(tl_interpret(k, 5, args), TL_OK);
    for (int e = 0; e < 3; e++)
        for (int i = 0; i < 40; i++)
            assert_true(y[e][i] == 2 * x[e][i]);
    /* more blocks than pointers; a null array; a misaligned one */
    args[2] = tl_arg_int(4);
    assert_status(tl_interpret(k, 5, args), TL_ERR_LAUNCH_ARGS);
    assert_non_null(strstr(tl_ctx_error(ctx), "grid dimension z = 4 is more than the 3 pointers of 'X'"));
    args[2] = tl_arg_int(3), args[3] = tl_arg_hptr(NULL);
    assert_status(tl_interpret(k, 5, args), TL_ERR_LAUNCH_ARGS);
    assert_non_null(strstr(tl_ctx_error(ctx), "'X' is a null array of pointers"));
    args[3] = tl_arg_hptr((char *)px + 4);
    assert_status(tl_interpret(k, 5, args), TL_ERR_LAUNCH_ARGS);
    assert_non_null(strstr(tl_ctx_error(ctx), "is not aligned to its 8-byte pointers"));
    /* no blocks: nothing is read, a null array is fine */
    args[2] = tl_arg_int(0), args[3] = tl_arg_hptr(NULL);
    assert_status(tl_interpret(k, 5, args), TL_OK);
    /* the lowered kernel binds each block's tensor after its indices */
    char *text;
    assert_status(tl_kernel_lower_dump(k, "sm_80", "launch", &text), TL_OK);
    assert_non_null(strstr(text, "X = pointer block.z of its array"));
    tl_free_host(text);
    assert_status(tl_kernel_source(k, "sm_80", &text), TL_OK);
    assert_non_null(strstr(text, "const float *const *tl_arr_X, float *const *tl_arr_Y"));
    assert_non_null(strstr(text, "float *const Y = tl_arr_Y[tl_bz];"));
    tl_free_host(text);
    test_ptx_or_skip(ctx, k);
    /* block z of a grid without a z dimension, in a rasterised grid: 0
     * (tl_bz was left undefined there) */
    k = tl_kernel_new(ctx, "no_z");
    tl_expr n = tl_dim(k, "n");
    tl_buf X = tl_param_tensor_array(k, "X", TL_F32, 1, &n, NULL, n, 2);
    tl_grid(k, n, n, TL_NONE_EXPR, 64);
    tl_use_swizzle(k, 4);
    tl_expr i = tl_parallel1(k, 64);
    tl_store(k, X, &i, tl_f32(k, 1.0f));
    tl_end(k);
    test_ptx_or_skip(ctx, k);
}

static void test_tensor_array_builder_errors(void **state)
{
    (void)state;
    struct {
        int which;
        tl_status want;
        const char *fragment;
    } cases[] = {
        {0, TL_ERR_INVALID_ARG, "tl_param_tensor_array: 'X': axis 3 is not a block axis (0, 1 or 2)"},
        {1, TL_ERR_DTYPE, "count must be an integer expression, not f32"},
        {2, TL_ERR_SHAPE, "count is the constant -2"},
        {3, TL_ERR_INVALID_ARG, "count must be computable from the parameters"},
        {4, TL_ERR_DTYPE, "unsupported element type"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tl_kernel *k = tl_kernel_new(ctx, "bad_array");
        tl_expr n = tl_dim(k, "n");
        tl_expr count = cases[i].which == 1 ? tl_f32(k, 3.0f)
                        : cases[i].which == 2 ? tl_int(k, -2)
                        : cases[i].which == 3 ? tl_block_idx(k, 0)
                                              : n;
        tl_buf x = tl_param_tensor_array(k, "X", cases[i].which == 4 ? TL_BOOL : TL_F32, 1, &n, NULL, count,
                                         cases[i].which == 0 ? 3 : 2);
        assert_int_equal(x.id, 0);
        assert_status(tl_kernel_status(k), cases[i].want);
        if (!strstr(tl_kernel_error(k), cases[i].fragment))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, tl_kernel_error(k), cases[i].fragment);
        tl_kernel_destroy(k);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_leading_dims_alpha),
        cmocka_unit_test(test_strided_batch_beta),
        cmocka_unit_test(test_b_rows_off_sectors),
        cmocka_unit_test(test_shared_operand),
        cmocka_unit_test(test_entries_side_by_side),
        cmocka_unit_test(test_pointer_arrays),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_one_program_per_kind),
        cmocka_unit_test(test_generated_code),
        cmocka_unit_test(test_split_k),
        cmocka_unit_test(test_split_k_choice),
        cmocka_unit_test(test_tensor_array),
        cmocka_unit_test(test_tensor_array_builder_errors),
    };
    return cmocka_run_group_tests_name("gemm_args", tests, offline_setup, ctx_teardown);
}
