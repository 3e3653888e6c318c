/* test_cluster_interp.c - thread-block clusters without a GPU: the
 * interpreter runs the blocks of a cluster in lockstep and
 * tl_cluster_reduce_* combines their fragments. A softmax of rows split
 * over clusters of 2 and 4 blocks against a double-precision reference;
 * every op (max, sum, min, absmax) on f32, f16 and bf16 fragments checked
 * bit for bit against a fold in f32 in rank order (NaN, infinities, a sum
 * whose order shows); clusters along y and z and 2 x 2 (x 2) against the
 * rank and grouping rule; control flow that differs between blocks but
 * meets again, or differs only between clusters; a cluster reduction under
 * divergent control flow is an error that names the call; a grid that is
 * not whole clusters; the builder's errors; the work budget. */
#include "fixture.h"

#include "args.h"
#include "interp.h"
#include "kernel.h"

#include <math.h>

typedef void (*cluster_fn)(tl_kernel *, tl_buf);
static const cluster_fn cluster_reducers[] = {tl_cluster_reduce_max, tl_cluster_reduce_sum, tl_cluster_reduce_min,
                                              tl_cluster_reduce_absmax};
static const char *const op_names[] = {"max", "sum", "min", "absmax"};

static float round_to(tl_dtype dt, float x)
{
    return dt == TL_F16 ? tl_f16_to_f32(tl_f32_to_f16(x)) : dt == TL_BF16 ? tl_bf16_to_f32(tl_f32_to_bf16(x)) : x;
}

/* The device's combination: from the identity, in rank order, each step in
 * f32; max / min / absmax skip NaN (fmaxf, fminf). */
static float fold(int op, const float *x, int n)
{
    static const float identity[] = {-INFINITY, 0, INFINITY, 0};
    float acc = identity[op];
    for (int r = 0; r < n; r++) {
        switch (op) {
        case 0: acc = fmaxf(acc, x[r]); break;
        case 1: acc = acc + x[r]; break;
        case 2: acc = fminf(acc, x[r]); break;
        default: acc = fmaxf(acc, fabsf(x[r])); break;
        }
    }
    return acc;
}

static bool same(float a, float b) { return a == b || (isnan(a) && isnan(b)); }

/* ------------------------------------------------------------ softmax */

enum { SM_R = 4 }; /* rows per block */

/* Y = softmax(X) along rows, X and Y [M, N]: a row is split over the
 * `cl` blocks of a cluster along x, W = ceil(N / cl) columns each (the
 * last block's columns past N padded with -inf); block y picks R rows. */
static tl_kernel *build_softmax(int cl, int64_t n)
{
    int64_t w = (n + cl - 1) / cl;
    tl_kernel *k = tl_kernel_new(ctx, "cluster_softmax");
    tl_expr M = tl_dim(k, "M"), N = tl_dim(k, "N");
    tl_buf X = tl_param_tensor(k, "X", TL_F32, 2, (tl_expr[]){M, N}, NULL);
    tl_buf Y = tl_param_tensor(k, "Y", TL_F32, 2, (tl_expr[]){M, N}, NULL);
    tl_grid(k, tl_int(k, cl), tl_ceildiv(k, M, tl_int(k, SM_R)), TL_NONE_EXPR, 128);
    tl_cluster(k, cl, 1, 1);
    tl_expr bx = tl_block_idx(k, 0), by = tl_block_idx(k, 1);
    tl_buf F = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){SM_R, w});
    tl_buf m = tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){SM_R});
    tl_buf s = tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){SM_R});
    tl_copy(k, tl_tile(k, X, by, bx), tl_all(F)); /* columns past N read 0 ... */
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){SM_R, w}, v);
    tl_expr col = tl_add(k, tl_mul(k, bx, tl_int(k, w)), v[1]);
    tl_store(k, F, v, tl_select(k, tl_lt(k, col, N), tl_load(k, F, v), tl_f32(k, -INFINITY))); /* ... -inf */
    tl_end(k);
    tl_reduce_max(k, F, m, 1, 1);
    tl_cluster_reduce_max(k, m);
    tl_parallel(k, 2, (int64_t[]){SM_R, w}, v);
    tl_store(k, F, v, tl_exp(k, tl_sub(k, tl_load(k, F, v), tl_load(k, m, &v[0]))));
    tl_end(k);
    tl_reduce_sum(k, F, s, 1, 1);
    tl_cluster_reduce_sum(k, s);
    tl_parallel(k, 2, (int64_t[]){SM_R, w}, v);
    col = tl_add(k, tl_mul(k, bx, tl_int(k, w)), v[1]);
    tl_expr at[2] = {tl_add(k, tl_mul(k, by, tl_int(k, SM_R)), v[0]), col};
    tl_store(k, Y, at, tl_div(k, tl_load(k, F, v), tl_load(k, s, &v[0])));
    tl_end(k);
    assert_status(tl_kernel_status(k), TL_OK);
    return k;
}

static void check_softmax(int cl, int64_t m, int64_t n, uint64_t seed)
{
    tl_kernel *k = build_softmax(cl, n);
    float *x = malloc(4 * (size_t)(m * n)), *y = malloc(4 * (size_t)(m * n + 1));
    tl_random_host(x, TL_F32, m * n, seed, -6, 6);
    memset(y, 0xFF, 4 * (size_t)(m * n + 1)); /* NaN, and a guard past the end */
    tl_arg args[] = {tl_arg_int(m), tl_arg_int(n), tl_arg_hptr(x), tl_arg_hptr(y)};
    assert_status(tl_interpret(k, 4, args), TL_OK);
    double worst = 0;
    for (int64_t i = 0; i < m; i++) {
        double mx = -INFINITY, s = 0;
        for (int64_t j = 0; j < n; j++)
            mx = fmax(mx, x[i * n + j]);
        for (int64_t j = 0; j < n; j++)
            s += exp(x[i * n + j] - mx);
        for (int64_t j = 0; j < n; j++) {
            double want = exp(x[i * n + j] - mx) / s, rel = fabs(y[i * n + j] - want) / want;
            if (!(rel <= 4e-6))
                fail_msg("cluster %d, [%lld x %lld]: Y[%lld, %lld] = %.9g, want %.9g (relative error %.3g)", cl,
                         (long long)m, (long long)n, (long long)i, (long long)j, y[i * n + j], want, rel);
            worst = fmax(worst, rel);
        }
    }
    uint32_t guard;
    memcpy(&guard, &y[m * n], 4);
    assert_int_equal(guard, 0xFFFFFFFFu);
    printf("  note: softmax, cluster %d, [%lld x %lld]: largest relative error %.2g\n", cl, (long long)m,
           (long long)n, worst);
    free(x), free(y);
    tl_kernel_destroy(k);
}

static void test_softmax_row_split_over_a_cluster(void **state)
{
    (void)state;
    const int64_t ns[] = {37, 100, 1000, 5};
    uint64_t seed = 1;
    for (int c = 2; c <= 4; c += 2)
        for (size_t i = 0; i < TEST_COUNT(ns); i++)
            check_softmax(c, 7, ns[i], seed++); /* 7 rows: the second block row is ragged */
}

/* -------------------------------------------------- each op, exactly */

/* Out[b, :] = the cluster reduction `op` of F [4] of dtype dt, F loaded
 * from In[b, :], b the block's linear index bx + gx (by + gy bz). The grid
 * is g, the cluster c. */
static tl_kernel *build_exact(int op, tl_dtype dt, const int g[3], const int c[3])
{
    tl_kernel *k = tl_kernel_new(ctx, "cluster_exact");
    tl_expr B = tl_int(k, (int64_t)g[0] * g[1] * g[2]);
    tl_buf In = tl_param_tensor(k, "In", TL_F32, 2, (tl_expr[]){B, tl_int(k, 4)}, NULL);
    tl_buf Out = tl_param_tensor(k, "Out", TL_F32, 2, (tl_expr[]){B, tl_int(k, 4)}, NULL);
    tl_grid(k, tl_int(k, g[0]), tl_int(k, g[1]), tl_int(k, g[2]), 128);
    tl_cluster(k, c[0], c[1], c[2]);
    tl_expr lin = tl_add(k, tl_block_idx(k, 0),
                         tl_mul(k, tl_int(k, g[0]),
                                tl_add(k, tl_block_idx(k, 1), tl_mul(k, tl_int(k, g[1]), tl_block_idx(k, 2)))));
    tl_buf F = tl_alloc_fragment(k, dt, 1, (int64_t[]){4});
    tl_copy(k, tl_tile(k, In, lin, tl_int(k, 0)), tl_all(F)); /* a [4] tile of the [B, 4] tensor */
    cluster_reducers[op](k, F);
    tl_expr i = tl_parallel1(k, 4);
    tl_store(k, Out, (tl_expr[]){lin, i}, tl_cast(k, tl_load(k, F, &i), TL_F32));
    tl_end(k);
    assert_status(tl_kernel_status(k), TL_OK);
    return k;
}

/* Runs build_exact on `in` ([blocks, 4]) and checks every block's row
 * against the fold over its cluster's blocks in rank order. */
static void check_exact(int op, tl_dtype dt, const int g[3], const int c[3], const float *in)
{
    int blocks = g[0] * g[1] * g[2], size = c[0] * c[1] * c[2];
    float *out = malloc(4 * (size_t)blocks * 4);
    memset(out, 0xA5, 4 * (size_t)blocks * 4);
    tl_kernel *k = build_exact(op, dt, g, c);
    tl_arg args[] = {tl_arg_hptr((void *)in), tl_arg_hptr(out)};
    assert_status(tl_interpret(k, 2, args), TL_OK);
    for (int bz = 0; bz < g[2]; bz++)
        for (int by = 0; by < g[1]; by++)
            for (int bx = 0; bx < g[0]; bx++) {
                int lin = bx + g[0] * (by + g[1] * bz);
                for (int i = 0; i < 4; i++) {
                    float parts[8];
                    for (int r = 0; r < size; r++) { /* rank r's block in this block's cluster */
                        int x = bx / c[0] * c[0] + r % c[0], y = by / c[1] * c[1] + r / c[0] % c[1],
                            z = bz / c[2] * c[2] + r / (c[0] * c[1]);
                        parts[r] = round_to(dt, in[(x + g[0] * (y + g[1] * z)) * 4 + i]);
                    }
                    float want = round_to(dt, fold(op, parts, size)), got = out[lin * 4 + i];
                    if (!same(got, want))
                        fail_msg("cluster_reduce_%s %s, grid (%d, %d, %d), cluster (%d, %d, %d): block (%d, %d, %d) "
                                 "element %d = %.9g, want %.9g", op_names[op], tl_dtype_name(dt), g[0], g[1], g[2],
                                 c[0], c[1], c[2], bx, by, bz, i, got, want);
                }
            }
    tl_kernel_destroy(k);
    free(out);
}

/* Chosen per block: column 0 shows the f32 order of a sum (1e8 + 1 - 1e8 +
 * 1 is 1 in f32 in rank order, 2 exactly), column 1 has a NaN in rank 1
 * (skipped by max, min and absmax, kept by the sum), column 2 infinities,
 * column 3 small integers and a negative with the largest magnitude. */
static void test_each_op_exactly(void **state)
{
    (void)state;
    const float nan = NAN, inf = INFINITY;
    const float in[2][4][4] = {
        {{1e8f, 3.5f, -inf, 2}, {1, nan, 7, -9}, {-1e8f, -2.25f, 1, 3}, {1, 0.5f, inf, 4}},
        {{0.1f, -1, 5, -0.0f}, {0.2f, -2, 6, 0.0f}, {0.3f, -3, -7, -8.5f}, {0.4f, -4, 8, 1}},
    };
    const float want_f32[4][2][4] = {
        /* max */ {{1e8f, 3.5f, inf, 4}, {0.4f, -1, 8, 1}},
        /* sum */ {{1, nan, nan, 0}, {((0.1f + 0.2f) + 0.3f) + 0.4f, -10, 12, -7.5f}},
        /* min */ {{-1e8f, -2.25f, -inf, -9}, {0.1f, -4, -7, -8.5f}},
        /* absmax */ {{1e8f, 3.5f, inf, 9}, {0.4f, 4, 8, 8.5f}},
    };
    const int g[3] = {8, 1, 1}, c[3] = {4, 1, 1};
    for (int op = 0; op < 4; op++) {
        /* literal expectations, f32 */
        float out[8][4];
        tl_kernel *k = build_exact(op, TL_F32, g, c);
        tl_arg args[] = {tl_arg_hptr((void *)in), tl_arg_hptr(out)};
        assert_status(tl_interpret(k, 2, args), TL_OK);
        for (int b = 0; b < 8; b++)
            for (int i = 0; i < 4; i++)
                if (!same(out[b][i], want_f32[op][b / 4][i]))
                    fail_msg("cluster_reduce_%s: block %d element %d = %.9g, want %.9g", op_names[op], b, i,
                             out[b][i], want_f32[op][b / 4][i]);
        tl_kernel_destroy(k);
        /* and every fragment type against the fold */
        const tl_dtype dts[] = {TL_F32, TL_F16, TL_BF16};
        for (int d = 0; d < 3; d++)
            check_exact(op, dts[d], g, c, &in[0][0][0]);
    }
    /* random values of mixed magnitudes: the bits depend on the order */
    float rnd[64 * 4];
    tl_random_host(rnd, TL_F32, 64 * 4, 42, -1, 1);
    for (int i = 0; i < 64 * 4; i++)
        rnd[i] *= ldexpf(1, (i * 7) % 23 - 11);
    for (int op = 0; op < 4; op++)
        check_exact(op, TL_F32, (int[]){64, 1, 1}, (int[]){8, 1, 1}, rnd);
}

/* ------------------------------------------------- grouping and rank */

static void test_cluster_shapes_group_and_rank(void **state)
{
    (void)state;
    static const struct {
        int g[3], c[3];
    } cases[] = {
        {{2, 4, 1}, {1, 2, 1}}, {{3, 6, 1}, {1, 2, 1}}, {{4, 4, 1}, {2, 2, 1}}, {{2, 2, 4}, {2, 1, 2}},
        {{4, 2, 4}, {2, 2, 2}}, {{2, 3, 8}, {1, 1, 8}}, {{6, 2, 1}, {2, 1, 1}},
    };
    float in[64 * 4];
    tl_random_host(in, TL_F32, 64 * 4, 7, -1, 1);
    for (int i = 0; i < 64 * 4; i++)
        in[i] *= ldexpf(1, (i * 5) % 19 - 9); /* sums whose bits show the order */
    for (size_t t = 0; t < TEST_COUNT(cases); t++)
        for (int op = 0; op < 4; op++)
            check_exact(op, TL_F32, cases[t].g, cases[t].c, in);
}

/* -------------------------------------------------- control flow */

/* Control flow that differs between the blocks of a cluster but meets
 * again before the reduction: a serial loop of bx + 1 iterations and a
 * tl_if / tl_else on the block's parity, each adding to a running sum; a
 * condition that differs only between clusters (bx / 2 == 1), with a
 * cluster reduction inside; then the reduction of the sums. */
static void test_divergence_that_meets_again(void **state)
{
    (void)state;
    tl_kernel *k = tl_kernel_new(ctx, "meets_again");
    tl_buf Out = tl_param_tensor(k, "Out", TL_F32, 2, (tl_expr[]){tl_int(k, 4), tl_int(k, 3)}, NULL);
    tl_grid(k, tl_int(k, 4), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_cluster(k, 2, 1, 1);
    tl_expr bx = tl_block_idx(k, 0), zero = tl_int(k, 0), one = tl_int(k, 1), two = tl_int(k, 2);
    tl_buf a = tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){1});
    tl_buf b = tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){1});
    /* a = sum over v < bx + 1 of (v + 1): 1, 3, 6, 10; fragments start zeroed */
    tl_expr v = tl_serial(k, tl_add(k, bx, one));
    tl_store(k, a, &zero, tl_add(k, tl_load(k, a, &zero), tl_cast(k, tl_add(k, v, one), TL_F32)));
    tl_end(k);
    tl_if(k, tl_eq(k, tl_mod(k, bx, two), zero));
    tl_store(k, a, &zero, tl_mul(k, tl_load(k, a, &zero), tl_f32(k, 10)));
    tl_else(k);
    tl_store(k, a, &zero, tl_neg(k, tl_load(k, a, &zero)));
    tl_end(k);
    /* a: 10, -3, 60, -10 */
    tl_store(k, Out, (tl_expr[]){bx, zero}, tl_load(k, a, &zero));
    tl_cluster_reduce_sum(k, a); /* 7, 7, 50, 50 */
    tl_store(k, Out, (tl_expr[]){bx, one}, tl_load(k, a, &zero));
    tl_store(k, b, &zero, tl_cast(k, tl_mul(k, bx, bx), TL_F32)); /* 0, 1, 4, 9 */
    tl_if(k, tl_eq(k, tl_div(k, bx, two), one)); /* the second cluster, all of it */
    tl_cluster_reduce_max(k, b);                 /* 9, 9 */
    tl_end(k);
    tl_store(k, Out, (tl_expr[]){bx, two}, tl_load(k, b, &zero));
    assert_status(tl_kernel_status(k), TL_OK);
    float out[4][3];
    memset(out, 0, sizeof out);
    tl_arg args[] = {tl_arg_hptr(out)};
    assert_status(tl_interpret(k, 1, args), TL_OK);
    const float want[4][3] = {{10, 7, 0}, {-3, 7, 1}, {60, 50, 9}, {-10, 50, 9}};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            if (out[i][j] != want[i][j])
                fail_msg("Out[%d, %d] = %g, want %g", i, j, out[i][j], want[i][j]);
    tl_kernel_destroy(k);
}

/* Interprets a kernel whose only parameter is an f32 tensor Out [8] and
 * expects status want with a message holding each of has[]. */
static void expect_run_error(tl_kernel *k, tl_status want, const char *const *has, size_t nhas)
{
    assert_status(tl_kernel_status(k), TL_OK);
    float out[8] = {0};
    tl_arg args[] = {tl_arg_hptr(out)};
    assert_status(tl_interpret(k, 1, args), want);
    const char *msg = tl_ctx_error(ctx);
    for (size_t i = 0; i < nhas; i++)
        if (!strstr(msg, has[i]))
            fail_msg("message '%s' lacks '%s'", msg, has[i]);
}

/* A kernel with Out [8], a grid of gx blocks in clusters of cx, and an f32
 * fragment [2]; bx is block x. */
static tl_kernel *small_kernel(int gx, int cx, tl_buf *frag, tl_expr *bx)
{
    tl_kernel *k = tl_kernel_new(ctx, "divergent");
    tl_param_tensor(k, "Out", TL_F32, 1, (tl_expr[]){tl_int(k, 8)}, NULL);
    tl_grid(k, tl_int(k, gx), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_cluster(k, cx, 1, 1);
    *frag = tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){2});
    *bx = tl_block_idx(k, 0);
    return k;
}

static void test_divergent_reduction_is_an_error(void **state)
{
    (void)state;
    tl_buf f;
    tl_expr bx;
    /* under tl_if on the block index */
    tl_kernel *k = small_kernel(2, 2, &f, &bx);
    tl_if(k, tl_eq(k, bx, tl_int(k, 0)));
    tl_cluster_reduce_max(k, f);
    tl_end(k);
    expect_run_error(k, TL_ERR_LAUNCH_ARGS,
                     (const char *[]){"tl_interpret: ", "tl_cluster_reduce_max reached by 1 of the 2 blocks of cluster "
                                      "(0, 0, 0)", "same path"},
                     3);
    tl_kernel_destroy(k);
    /* in the second cluster only, 3 of 4 blocks */
    k = small_kernel(8, 4, &f, &bx);
    tl_if(k, tl_ne(k, bx, tl_int(k, 6)));
    tl_cluster_reduce_sum(k, f);
    tl_end(k);
    expect_run_error(k, TL_ERR_LAUNCH_ARGS,
                     (const char *[]){"tl_cluster_reduce_sum reached by 3 of the 4 blocks of cluster (1, 0, 0)"}, 1);
    tl_kernel_destroy(k);
    /* in both branches: the blocks reach different calls */
    k = small_kernel(2, 2, &f, &bx);
    tl_if(k, tl_eq(k, bx, tl_int(k, 1)));
    tl_cluster_reduce_min(k, f);
    tl_else(k);
    tl_cluster_reduce_min(k, f);
    tl_end(k);
    expect_run_error(k, TL_ERR_LAUNCH_ARGS, (const char *[]){"tl_cluster_reduce_min reached by 1 of the 2 blocks"}, 1);
    tl_kernel_destroy(k);
    /* in a loop of bx + 1 iterations: block 1 reaches it alone the second time */
    k = small_kernel(2, 2, &f, &bx);
    tl_serial(k, tl_add(k, bx, tl_int(k, 1)));
    tl_cluster_reduce_absmax(k, f);
    tl_end(k);
    expect_run_error(k, TL_ERR_LAUNCH_ARGS, (const char *[]){"tl_cluster_reduce_absmax reached by 1 of the 2"}, 1);
    tl_kernel_destroy(k);
    /* a grid that is not whole clusters */
    k = small_kernel(3, 2, &f, &bx);
    tl_cluster_reduce_max(k, f);
    expect_run_error(k, TL_ERR_LAUNCH_ARGS,
                     (const char *[]){"grid (3, 1, 1) is not a multiple of the cluster (2, 1, 1)"}, 1);
    tl_kernel_destroy(k);
}

/* -------------------------------------------------- builder errors */

/* k's first error is want; its message starts with api and holds has. */
static void expect_build_error(tl_kernel *k, tl_status want, const char *api, const char *has)
{
    assert_status(tl_kernel_status(k), want);
    const char *msg = tl_kernel_error(k);
    if (strncmp(msg, api, strlen(api)) != 0 || !strstr(msg, has))
        fail_msg("message '%s' does not start with %s or lacks '%s'", msg, api, has);
    tl_kernel_destroy(k);
}

/* A kernel with a grid (and tl_cluster(cx, 1, 1) unless cx is 0). */
static tl_kernel *grid_kernel(int cx)
{
    tl_kernel *k = tl_kernel_new(ctx, "cluster_errors");
    tl_grid(k, tl_int(k, 2), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    if (cx)
        tl_cluster(k, cx, 1, 1);
    return k;
}

/* tl_cluster_reduce_sum_to: only block `root` of each cluster of 4 gets
 * the sum (rank order, f32); the others keep their own values. Root out
 * of range is a builder error naming the call. */
static void test_sum_to_one_rank(void **state)
{
    (void)state;
    for (int root = 0; root < 4; root += 3) {
        tl_kernel *k = tl_kernel_new(ctx, "cluster_sum_to");
        tl_buf In = tl_param_tensor(k, "In", TL_F32, 2, (tl_expr[]){tl_int(k, 8), tl_int(k, 4)}, NULL);
        tl_buf Out = tl_param_tensor(k, "Out", TL_F32, 2, (tl_expr[]){tl_int(k, 8), tl_int(k, 4)}, NULL);
        tl_grid(k, tl_int(k, 8), TL_NONE_EXPR, TL_NONE_EXPR, 128);
        tl_cluster(k, 4, 1, 1);
        tl_expr bx = tl_block_idx(k, 0);
        tl_buf F = tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){4});
        tl_copy(k, tl_tile(k, In, bx, tl_int(k, 0)), tl_all(F));
        tl_cluster_reduce_sum_to(k, F, root);
        tl_copy(k, tl_all(F), tl_tile(k, Out, bx, tl_int(k, 0)));
        assert_status(tl_kernel_status(k), TL_OK);
        float in[8][4], out[8][4];
        for (int b = 0; b < 8; b++)
            for (int i = 0; i < 4; i++)
                in[b][i] = (float)(b * 10 + i) * (b % 2 ? -0.5f : 1.25f);
        memset(out, 0xA5, sizeof out);
        tl_arg args[] = {tl_arg_hptr(in), tl_arg_hptr(out)};
        assert_status(tl_interpret(k, 2, args), TL_OK);
        for (int b = 0; b < 8; b++)
            for (int i = 0; i < 4; i++) {
                float want = in[b][i];
                if (b % 4 == root) {
                    want = 0;
                    for (int r = 0; r < 4; r++)
                        want += in[b / 4 * 4 + r][i];
                }
                if (out[b][i] != want)
                    fail_msg("root %d: block %d element %d = %g, want %g", root, b, i, out[b][i], want);
            }
        char *src;
        assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
        char want_if[64];
        snprintf(want_if, sizeof want_if, "if (tl_cluster_ctarank() == %d) {", root);
        if (!strstr(src, want_if))
            fail_msg("the source lacks '%s'", want_if);
        tl_free_host(src);
        tl_kernel_destroy(k);
    }
    tl_kernel *k = grid_kernel(2);
    tl_buf f = tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){4});
    tl_cluster_reduce_sum_to(k, f, 2);
    expect_build_error(k, TL_ERR_INVALID_ARG, "tl_cluster_reduce_sum_to", "root = 2 is not a rank of a cluster of 2");
    k = grid_kernel(2);
    f = tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){4});
    tl_cluster_reduce_sum_to(k, f, -1);
    expect_build_error(k, TL_ERR_INVALID_ARG, "tl_cluster_reduce_sum_to", "root = -1 is negative");
}

static void test_builder_errors_name_the_call(void **state)
{
    (void)state;
    tl_kernel *k = grid_kernel(0);
    tl_cluster_reduce_max(k, tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){4}));
    expect_build_error(k, TL_ERR_INVALID_ARG, "tl_cluster_reduce_max", "call tl_cluster first");
    k = grid_kernel(2);
    tl_cluster_reduce_sum(k, tl_alloc_shared(k, TL_F32, 1, (int64_t[]){4}));
    expect_build_error(k, TL_ERR_INVALID_ARG, "tl_cluster_reduce_sum", "is not a fragment of f32, f16 or bf16");
    k = grid_kernel(2);
    tl_cluster_reduce_min(k, tl_alloc_local(k, TL_F32, 1, (int64_t[]){4}));
    expect_build_error(k, TL_ERR_INVALID_ARG, "tl_cluster_reduce_min", "is not a fragment of f32, f16 or bf16");
    k = grid_kernel(2);
    tl_buf f = tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){4});
    tl_parallel1(k, 4);
    tl_cluster_reduce_absmax(k, f);
    expect_build_error(k, TL_ERR_SCOPE, "tl_cluster_reduce_absmax", "cannot be inside tl_parallel");
    k = grid_kernel(2);
    tl_cluster_reduce_max(k, TL_NONE_BUF);
    expect_build_error(k, TL_ERR_INVALID_ARG, "tl_cluster_reduce_max", "");
    k = grid_kernel(0);
    tl_cluster(k, 3, 3, 1);
    expect_build_error(k, TL_ERR_INVALID_ARG, "tl_cluster", "cluster 3 x 3 x 1");
    k = grid_kernel(0);
    tl_cluster(k, 0, 1, 1);
    expect_build_error(k, TL_ERR_INVALID_ARG, "tl_cluster", "each extent must be 1..8");
    k = grid_kernel(0);
    tl_cluster(k, 1, 1, 9);
    expect_build_error(k, TL_ERR_INVALID_ARG, "tl_cluster", "at most 8");
    k = grid_kernel(0);
    tl_fill(k, tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){4}), tl_f32(k, 0));
    tl_cluster(k, 2, 1, 1);
    expect_build_error(k, TL_ERR_SCOPE, "tl_cluster", "before the first statement");
    /* NULL kernels are ignored */
    tl_cluster(NULL, 2, 1, 1);
    tl_cluster_reduce_max(NULL, f);
}

/* -------------------------------------------------- the work budget */

/* tli_interp_run_budget (the fuzzer's entry point) stops a clustered kernel
 * with a loop of 2^40 iterations, and lets a small one finish. */
static void test_budget_stops_a_clustered_kernel(void **state)
{
    (void)state;
    tl_kernel *k = tl_kernel_new(ctx, "budget");
    tl_expr n = tl_dim(k, "N");
    tl_buf Out = tl_param_tensor(k, "Out", TL_F32, 1, (tl_expr[]){tl_int(k, 8)}, NULL);
    tl_grid(k, tl_int(k, 4), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_cluster(k, 2, 1, 1);
    tl_expr bx = tl_block_idx(k, 0), zero = tl_int(k, 0);
    tl_buf f = tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){1});
    tl_serial(k, n);
    tl_store(k, f, &zero, tl_add(k, tl_load(k, f, &zero), tl_f32(k, 1)));
    tl_cluster_reduce_max(k, f);
    tl_end(k);
    tl_store(k, Out, &bx, tl_load(k, f, &zero));
    assert_status(tl_kernel_status(k), TL_OK);
    const tli_ir *ir = &k->ir;
    float out[8] = {0};
    const int64_t trips[] = {(int64_t)1 << 40, 5};
    for (int t = 0; t < 2; t++) {
        tl_arg args[] = {tl_arg_int(trips[t]), tl_arg_hptr(out)};
        tli_bound b;
        char err[256] = "";
        assert_status(tli_bind_args(ir, 2, args, TL_ARG_HOST_PTR, &b, err, sizeof err), TL_OK);
        tl_status st = tli_interp_run_budget(ir, &b, 100000, err, sizeof err);
        tli_bound_free(&b);
        if (t == 0) {
            assert_status(st, TL_ERR_UNSUPPORTED);
            assert_non_null(strstr(err, "the work budget of 100000 steps ran out"));
        } else {
            assert_status(st, TL_OK);
            for (int i = 0; i < 4; i++)
                assert_true(out[i] == 5.0f);
        }
    }
    tl_kernel_destroy(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax_row_split_over_a_cluster),
        cmocka_unit_test(test_each_op_exactly),
        cmocka_unit_test(test_cluster_shapes_group_and_rank),
        cmocka_unit_test(test_divergence_that_meets_again),
        cmocka_unit_test(test_divergent_reduction_is_an_error),
        cmocka_unit_test(test_sum_to_one_rank),
        cmocka_unit_test(test_builder_errors_name_the_call),
        cmocka_unit_test(test_budget_stops_a_clustered_kernel),
    };
    return cmocka_run_group_tests_name("cluster_interp", tests, offline_setup, ctx_teardown);
}
