/* test_reduce.c - the fragment reductions without a GPU: tl_reduce_max,
 * _sum, _min and _absmax run in the interpreter against a naive reference
 * for every dimension of rank-1, rank-2 and rank-3 tiles at ragged shapes,
 * overwriting and accumulating, from fragments and shared tiles, with
 * f16/bf16 rounding of the result; NaN and infinities; reductions inside
 * serial, pipelined and conditional code, and their broadcast use (and the
 * skip of a scaling by a row factor of 1); every builder error names its
 * call. */
#include "fixture.h"

#include <math.h>

typedef void (*reduce_fn)(tl_kernel *, tl_buf, tl_buf, int, int);
static const reduce_fn reducers[] = {tl_reduce_max, tl_reduce_sum, tl_reduce_min, tl_reduce_absmax};
static const char *const reducer_names[] = {"max", "sum", "min", "absmax"};

/* One reduction case: src [shape] of src_dt reduced along dim into dst of
 * dst_dt, from a fragment or a shared tile, with or without clear. */
typedef struct red_case {
    int rank;
    int64_t shape[3];
    int dim, op, clear, shared_src;
    tl_dtype src_dt, dst_dt;
} red_case;

static int64_t elems(int rank, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < rank; d++)
        n *= shape[d];
    return n;
}

/* dst's shape: src's without dim, [1] for a rank-1 src. Returns its rank. */
static int dst_shape(const red_case *c, int64_t *out)
{
    int r = 0;
    for (int d = 0; d < c->rank; d++)
        if (d != c->dim)
            out[r++] = c->shape[d];
    if (r == 0)
        out[r++] = 1;
    return r;
}

static double round_to(tl_dtype dt, double x)
{
    float f = (float)x;
    return dt == TL_F16 ? tl_f16_to_f32(tl_f32_to_f16(f)) : dt == TL_BF16 ? tl_bf16_to_f32(tl_f32_to_bf16(f)) : f;
}

/* The reference: for dst element e, walk src's multi-index with position
 * dim running, every other position taken from e's multi-index in order. */
static double reference(const red_case *c, const void *src, double init, int64_t e)
{
    int64_t dshape[3], didx[3] = {0};
    int drank = dst_shape(c, dshape);
    for (int d = drank - 1; d >= 0; d--) {
        didx[d] = e % dshape[d];
        e /= dshape[d];
    }
    static const double identity[] = {-INFINITY, 0, INFINITY, 0};
    double acc = c->clear ? identity[c->op] : init;
    for (int64_t i = 0; i < c->shape[c->dim]; i++) {
        int64_t off = 0;
        for (int d = 0, r = 0; d < c->rank; d++)
            off = off * c->shape[d] + (d == c->dim ? i : didx[r++]);
        double x = test_elem(c->src_dt, src, off);
        switch (c->op) {
        case 0: acc = fmax(acc, x); break;
        case 1: acc += x; break;
        case 2: acc = fmin(acc, x); break;
        default: acc = fmax(acc, fabs(x)); break;
        }
    }
    return round_to(c->dst_dt, acc);
}

static tl_region whole_tile(tl_kernel *k, tl_buf t, int rank)
{
    tl_expr zero[TL_MAX_RANK];
    for (int d = 0; d < rank; d++)
        zero[d] = tl_int(k, 0);
    return tl_tile_n(k, t, zero, rank);
}

/* In -> src tile; Init -> dst; reduce; Out[...] = (f32) dst[...] in a
 * tl_parallel over dst's shape (an f32 Out sees whether the fragment holds
 * values rounded to its type). One block. */
static tl_kernel *build_case(const red_case *c)
{
    int64_t dshape[3];
    int drank = dst_shape(c, dshape);
    tl_kernel *k = tl_kernel_new(ctx, "reduce_case");
    tl_expr sdims[3], ddims[3];
    for (int d = 0; d < c->rank; d++)
        sdims[d] = tl_int(k, c->shape[d]);
    for (int d = 0; d < drank; d++)
        ddims[d] = tl_int(k, dshape[d]);
    tl_buf In = tl_param_tensor(k, "In", c->src_dt, c->rank, sdims, NULL);
    tl_buf Init = tl_param_tensor(k, "Init", c->dst_dt, drank, ddims, NULL);
    tl_buf Out = tl_param_tensor(k, "Out", TL_F32, drank, ddims, NULL);
    tl_grid(k, tl_int(k, 1), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_buf S = c->shared_src ? tl_alloc_shared(k, c->src_dt, c->rank, c->shape)
                             : tl_alloc_fragment(k, c->src_dt, c->rank, c->shape);
    tl_buf D = tl_alloc_fragment(k, c->dst_dt, drank, dshape);
    tl_copy(k, whole_tile(k, In, c->rank), tl_all(S));
    tl_copy(k, whole_tile(k, Init, drank), tl_all(D));
    reducers[c->op](k, S, D, c->dim, c->clear);
    tl_expr v[3];
    tl_parallel(k, drank, dshape, v);
    tl_store(k, Out, v, tl_cast(k, tl_load(k, D, v), TL_F32));
    tl_end(k);
    assert_status(tl_kernel_status(k), TL_OK);
    return k;
}

/* Runs the case in the interpreter; its values come from seed, with NaN at
 * src's element nan_at (-1: none). */
static void run_case(const red_case *c, uint64_t seed, int64_t nan_at)
{
    int64_t dshape[3];
    int64_t n = elems(c->rank, c->shape), dn = elems(dst_shape(c, dshape), dshape);
    size_t ss = tl_dtype_size(c->src_dt), ds = tl_dtype_size(c->dst_dt);
    void *src = malloc(ss * (size_t)n), *init = malloc(ds * (size_t)dn);
    float *out = malloc(4 * (size_t)dn);
    tl_random_host(src, c->src_dt, n, seed, -8, 8);
    tl_random_host(init, c->dst_dt, dn, seed + 1, -8, 8);
    if (nan_at >= 0)
        memset((char *)src + ss * (size_t)nan_at, 0xFF, ss); /* all ones: a NaN in every type */
    memset(out, 0xA5, 4 * (size_t)dn);
    tl_kernel *k = build_case(c);
    tl_arg args[] = {tl_arg_hptr(src), tl_arg_hptr(init), tl_arg_hptr(out)};
    assert_status(tl_interpret(k, 3, args), TL_OK);
    for (int64_t e = 0; e < dn; e++) {
        double want = reference(c, src, test_elem(c->dst_dt, init, e), e), got = out[e];
        if (!(got == want || (isnan(got) && isnan(want))))
            fail_msg("reduce_%s of %s [%lld, %lld, %lld] (rank %d) dim %d clear %d %s -> %s: element %lld = %.9g, "
                     "want %.9g", reducer_names[c->op], c->shared_src ? "shared" : "fragment", (long long)c->shape[0],
                     (long long)c->shape[1], (long long)c->shape[2], c->rank, c->dim, c->clear,
                     tl_dtype_name(c->src_dt), tl_dtype_name(c->dst_dt), (long long)e, got, want);
    }
    tl_kernel_destroy(k);
    free(src), free(init), free(out);
}

static void test_every_op_dim_and_mode(void **state)
{
    (void)state;
    const int64_t shapes[][3] = {{37, 1, 1}, {5, 7, 1}, {1, 13, 1}, {3, 5, 6}, {4, 1, 9}};
    const int ranks[] = {1, 2, 2, 3, 3};
    uint64_t seed = 100;
    for (int s = 0; s < 5; s++)
        for (int dim = 0; dim < ranks[s]; dim++)
            for (int op = 0; op < 4; op++)
                for (int clear = 0; clear < 2; clear++) {
                    red_case c = {.rank = ranks[s], .dim = dim, .op = op, .clear = clear, .shared_src = (s + op) % 2,
                                  .src_dt = TL_F32, .dst_dt = TL_F32};
                    memcpy(c.shape, shapes[s], sizeof c.shape);
                    run_case(&c, seed++, -1);
                }
}

/* The arithmetic is f32 and the result is rounded to dst's type: every mix
 * of f32, f16 and bf16 on both sides, checked bit for bit. */
static void test_dtype_mixes_round_like_the_device(void **state)
{
    (void)state;
    const tl_dtype dts[] = {TL_F32, TL_F16, TL_BF16};
    uint64_t seed = 500;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int op = 0; op < 4; op++) {
                red_case c = {.rank = 2, .shape = {6, 29}, .dim = 1, .op = op, .clear = op % 2, .src_dt = dts[a],
                              .dst_dt = dts[b]};
                run_case(&c, seed++, -1);
                c.dim = 0;
                c.shared_src = 1;
                run_case(&c, seed++, -1);
            }
}

/* max, min and absmax skip a NaN (fmaxf/fminf); sum propagates it. */
static void test_nan_elements(void **state)
{
    (void)state;
    for (int op = 0; op < 4; op++) {
        red_case c = {.rank = 2, .shape = {4, 9}, .dim = 1, .op = op, .clear = 1, .src_dt = TL_F32, .dst_dt = TL_F32};
        run_case(&c, 900 + (uint64_t)op, 9 + 4); /* row 1, column 4 */
        c.clear = 0;
        run_case(&c, 910 + (uint64_t)op, 0);
    }
}

/* A row of NaN gives the identity; a row of -inf gives -inf for max and
 * sum and +inf for absmax; checked on literal values. */
static void test_special_rows(void **state)
{
    (void)state;
    const float nan = NAN, inf = INFINITY;
    float src[3][4] = {{nan, nan, nan, nan}, {-inf, -inf, -inf, -inf}, {1, -inf, 3, inf}};
    const float want[4][3] = {{-inf, -inf, inf}, {nan, -inf, nan}, {inf, -inf, -inf}, {0, inf, inf}};
    for (int op = 0; op < 4; op++) {
        red_case c = {.rank = 2, .shape = {3, 4}, .dim = 1, .op = op, .clear = 1, .src_dt = TL_F32, .dst_dt = TL_F32};
        tl_kernel *k = build_case(&c);
        float init[3] = {0}, out[3];
        tl_arg args[] = {tl_arg_hptr(src), tl_arg_hptr(init), tl_arg_hptr(out)};
        assert_status(tl_interpret(k, 3, args), TL_OK);
        for (int r = 0; r < 3; r++)
            if (!(out[r] == want[op][r] || (isnan(out[r]) && isnan(want[op][r]))))
                fail_msg("reduce_%s of row %d = %g, want %g", reducer_names[op], r, out[r], want[op][r]);
        tl_kernel_destroy(k);
    }
}

/* A running maximum and sum over column chunks (clear = 0 across the
 * iterations of a serial and of a pipelined loop, and under tl_if), then
 * the broadcast use: Y[i, j] = X[i, j] - max_i + sum_i in a tl_parallel
 * over the full chunk. */
static void test_running_reductions_in_loops(void **state)
{
    (void)state;
    enum { R = 8, C = 16 };
    tl_kernel *k = tl_kernel_new(ctx, "running");
    tl_expr M = tl_dim(k, "M"), N = tl_dim(k, "N");
    tl_buf X = tl_param_tensor(k, "X", TL_F32, 2, (tl_expr[]){M, N}, NULL);
    tl_buf Y = tl_param_tensor(k, "Y", TL_F32, 2, (tl_expr[]){M, N}, NULL);
    tl_grid(k, tl_ceildiv(k, M, tl_int(k, R)), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    tl_expr bx = tl_block_idx(k, 0), chunks = tl_ceildiv(k, N, tl_int(k, C));
    tl_buf F = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){R, C});
    tl_buf S = tl_alloc_shared(k, TL_F32, 2, (int64_t[]){R, C});
    tl_buf mx = tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){R});
    tl_buf sum = tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){R});
    tl_fill(k, mx, tl_f32(k, -INFINITY));
    tl_clear(k, sum);
    tl_expr c = tl_serial(k, chunks);
    tl_copy(k, tl_tile(k, X, bx, c), tl_all(F)); /* columns past N read 0 */
    tl_reduce_max(k, F, mx, 1, 0);
    tl_end(k);
    c = tl_pipelined(k, chunks, 2);
    tl_copy(k, tl_tile(k, X, bx, c), tl_all(S));
    tl_if(k, tl_ge(k, N, tl_int(k, 1)));
    tl_reduce_sum(k, S, sum, 1, 0);
    tl_end(k);
    tl_end(k);
    c = tl_serial(k, chunks);
    tl_copy(k, tl_tile(k, X, bx, c), tl_all(F));
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){R, C}, v);
    tl_expr x = tl_load(k, F, v);
    tl_expr y = tl_add(k, tl_sub(k, x, tl_load(k, mx, &v[0])), tl_load(k, sum, &v[0]));
    tl_expr at[2] = {tl_add(k, tl_mul(k, bx, tl_int(k, R)), v[0]), tl_add(k, tl_mul(k, c, tl_int(k, C)), v[1])};
    tl_store(k, Y, at, y);
    tl_end(k);
    tl_end(k);
    assert_status(tl_kernel_status(k), TL_OK);
    int64_t m = 21, n = 53;
    float *xs = malloc(4 * (size_t)(m * n)), *ys = malloc(4 * (size_t)(m * n));
    tl_random_host(xs, TL_F32, m * n, 77, -3, 1);
    memset(ys, 0xFF, 4 * (size_t)(m * n));
    tl_arg args[] = {tl_arg_int(m), tl_arg_int(n), tl_arg_hptr(xs), tl_arg_hptr(ys)};
    assert_status(tl_interpret(k, 4, args), TL_OK);
    for (int64_t i = 0; i < m; i++) {
        /* padding columns read 0, and take part in the max and the sum */
        double mxv = n % C ? 0 : -INFINITY, s = 0;
        for (int64_t j = 0; j < n; j++)
            mxv = fmax(mxv, xs[i * n + j]), s += xs[i * n + j];
        float sf = (float)s;
        for (int64_t j = 0; j < n; j++) {
            float want = (xs[i * n + j] - (float)mxv) + sf;
            if (fabsf(ys[i * n + j] - want) > 1e-5f * (fabsf(sf) + 4))
                fail_msg("Y[%lld, %lld] = %g, want %g", (long long)i, (long long)j, ys[i * n + j], want);
        }
    }
    free(xs), free(ys);
    tl_kernel_destroy(k);
}

/* A fresh kernel with a grid, a global tensor, and the tiles the error
 * cases reduce: f [4, 8, 16] and s [4, 8] fragments, sh [4, 8] shared, l
 * [4, 8] local. */
typedef struct err_kernel {
    tl_kernel *k;
    tl_buf g, f, s, sh, l;
} err_kernel;

static err_kernel err_setup(void)
{
    err_kernel e = {.k = tl_kernel_new(ctx, "reduce_errors")};
    tl_expr n = tl_dim(e.k, "N");
    e.g = tl_param_tensor(e.k, "G", TL_F32, 2, (tl_expr[]){n, n}, NULL);
    tl_grid(e.k, tl_int(e.k, 1), TL_NONE_EXPR, TL_NONE_EXPR, 128);
    e.f = tl_alloc_fragment(e.k, TL_F32, 3, (int64_t[]){4, 8, 16});
    e.s = tl_alloc_fragment(e.k, TL_F16, 2, (int64_t[]){4, 8});
    e.sh = tl_alloc_shared(e.k, TL_F32, 2, (int64_t[]){4, 8});
    e.l = tl_alloc_local(e.k, TL_F32, 2, (int64_t[]){4, 8});
    assert_status(tl_kernel_status(e.k), TL_OK);
    return e;
}

/* The first error of e's kernel is `want`, its message starts with api and
 * holds fragment; tl_compile returns it; the kernel is destroyed. */
static void expect_error(err_kernel *e, tl_status want, const char *api, const char *fragment)
{
    assert_status(tl_kernel_status(e->k), want);
    const char *msg = tl_kernel_error(e->k);
    if (strncmp(msg, api, strlen(api)) != 0 || !strstr(msg, fragment))
        fail_msg("message '%s' does not name %s or lacks '%s'", msg, api, fragment);
    tl_program *p = NULL;
    assert_status(tl_compile(e->k, NULL, &p), want);
    tl_kernel_destroy(e->k);
}

/* The tiles of err_kernel by name, for the table below. */
enum { BUF_G, BUF_F, BUF_S, BUF_SH, BUF_L, BUF_NULL };

static tl_buf pick(const err_kernel *e, int which)
{
    const tl_buf all[] = {e->g, e->f, e->s, e->sh, e->l, TL_NONE_BUF};
    return all[which];
}

/* x[i, j] *= f[i] over a fragment of 64 registers a thread, f a reduced
 * fragment: the lowering lets a thread whose registers of f are all 1 skip
 * the loop; not for 32 registers (not worth the branch), not for a loop
 * that does anything else (x * f + 1), and the interpreter's result is the
 * loop's either way (the scale by 1 changes nothing). */
static void test_unit_scale_skip(void **state)
{
    (void)state;
    const struct { int64_t cols; int plus_one; bool skip; } cases[] = {{64, 0, true}, {32, 0, false}, {64, 1, false}};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        int64_t R = 128, C = cases[t].cols;
        tl_kernel *k = tl_kernel_new(ctx, "unit_scale");
        tl_expr M = tl_dim(k, "M");
        tl_buf X = tl_param_tensor(k, "X", TL_F32, 2, (tl_expr[]){M, tl_int(k, C)}, NULL);
        tl_buf Y = tl_param_tensor(k, "Y", TL_F32, 2, (tl_expr[]){M, tl_int(k, C)}, NULL);
        tl_grid(k, tl_ceildiv(k, M, tl_int(k, R)), TL_NONE_EXPR, TL_NONE_EXPR, 128);
        tl_expr bx = tl_block_idx(k, 0), zero = tl_int(k, 0);
        tl_buf F = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){R, C});
        tl_buf mx = tl_alloc_fragment(k, TL_F32, 1, &R);
        tl_copy(k, tl_tile(k, X, bx, zero), tl_all(F));
        tl_reduce_max(k, F, mx, 1, 1);
        tl_expr i = tl_parallel1(k, R); /* f = 1 where the row's maximum is at least 0 */
        tl_store(k, mx, &i, tl_select(k, tl_ge(k, tl_load(k, mx, &i), tl_f32(k, 0)), tl_f32(k, 1), tl_f32(k, 0.5f)));
        tl_end(k);
        tl_expr v[2];
        tl_parallel(k, 2, (int64_t[]){R, C}, v);
        tl_expr y = tl_mul(k, tl_load(k, F, v), tl_load(k, mx, &v[0]));
        tl_store(k, F, v, cases[t].plus_one ? tl_add(k, y, tl_f32(k, 1)) : y);
        tl_end(k);
        tl_copy(k, tl_all(F), tl_tile(k, Y, bx, zero));
        char *src = NULL;
        assert_status(tl_kernel_source(k, "sm_90a", &src), TL_OK);
        bool skip = strstr(src, "a factor of 1 everywhere") != NULL;
        if (skip != cases[t].skip)
            fail_msg("case %zu: skip %d, want %d", t, skip, cases[t].skip);
        tl_free_host(src);
        int64_t m = 200;
        float *xs = malloc(4 * (size_t)(m * C)), *ys = malloc(4 * (size_t)(m * C));
        tl_random_host(xs, TL_F32, m * C, 5 + t, -1, 1);
        memset(ys, 0xFF, 4 * (size_t)(m * C));
        tl_arg args[] = {tl_arg_int(m), tl_arg_hptr(xs), tl_arg_hptr(ys)};
        assert_status(tl_interpret(k, 3, args), TL_OK);
        for (int64_t r = 0; r < m; r++) {
            float rmax = -INFINITY;
            for (int64_t j = 0; j < C; j++)
                rmax = fmaxf(rmax, xs[r * C + j]);
            for (int64_t j = 0; j < C; j++) {
                float want = xs[r * C + j] * (rmax >= 0 ? 1.0f : 0.5f) + (cases[t].plus_one ? 1.0f : 0.0f);
                if (ys[r * C + j] != want)
                    fail_msg("case %zu: y[%lld, %lld] = %g, want %g", t, (long long)r, (long long)j, ys[r * C + j], want);
            }
        }
        free(xs), free(ys);
        tl_kernel_destroy(k);
    }
}

static void test_builder_errors_name_the_call(void **state)
{
    (void)state;
    static const struct {
        int op, src, dst, dim;
        tl_status st;
        const char *fragment;
    } cases[] = {
        {0, BUF_F, BUF_S, 3, TL_ERR_INVALID_ARG, "dim = 3 is not a dimension of 'tl_frag2' (rank 3)"},
        {1, BUF_F, BUF_S, -1, TL_ERR_INVALID_ARG, "dim = -1"},
        {2, BUF_F, BUF_S, 1, TL_ERR_SHAPE,
         "dst 'tl_frag3' is [4, 8], but 'tl_frag2' [4, 8, 16] reduced along dimension 1 is [4, 16]"},
        {3, BUF_SH, BUF_S, 1, TL_ERR_SHAPE, "is [4]"},
        {0, BUF_G, BUF_S, 1, TL_ERR_INVALID_ARG, "src 'G' is a global tensor"},
        {0, BUF_L, BUF_S, 1, TL_ERR_INVALID_ARG, "is a local buffer"},
        {1, BUF_F, BUF_SH, 2, TL_ERR_INVALID_ARG, "dst 'tl_smem4' is a shared tile: a reduction writes a fragment"},
        {1, BUF_S, BUF_S, 1, TL_ERR_INVALID_ARG, "the same fragment"},
        {2, BUF_F, BUF_NULL, 0, TL_ERR_INVALID_ARG, "null buffer"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err_kernel e = err_setup();
        char api[32];
        snprintf(api, sizeof api, "tl_reduce_%s", reducer_names[cases[i].op]);
        reducers[cases[i].op](e.k, pick(&e, cases[i].src), pick(&e, cases[i].dst), cases[i].dim, (int)i % 2);
        expect_error(&e, cases[i].st, api, cases[i].fragment);
    }
    err_kernel e = err_setup();
    tl_kernel *other = tl_kernel_new(ctx, "other");
    tl_buf foreign = tl_alloc_fragment(other, TL_F32, 2, (int64_t[]){4, 8});
    tl_reduce_min(e.k, e.f, foreign, 2, 1);
    expect_error(&e, TL_ERR_INVALID_ARG, "tl_reduce_min", "another kernel");
    tl_kernel_destroy(other);
    e = err_setup();
    tl_expr v[2];
    tl_parallel(e.k, 2, (int64_t[]){4, 8}, v);
    tl_reduce_max(e.k, e.f, e.s, 2, 1);
    expect_error(&e, TL_ERR_SCOPE, "tl_reduce_max", "cannot be inside tl_parallel");
    /* before tl_grid: a statement needs the grid */
    tl_kernel *k = tl_kernel_new(ctx, "nogrid");
    tl_buf a = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){4, 8}), b = tl_alloc_fragment(k, TL_F32, 1, (int64_t[]){4});
    tl_reduce_sum(k, a, b, 1, 1);
    assert_status(tl_kernel_status(k), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_kernel_error(k), "tl_reduce_sum: call tl_grid"));
    tl_kernel_destroy(k);
    /* NULL kernels are ignored */
    tl_reduce_max(NULL, a, b, 1, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_op_dim_and_mode),
        cmocka_unit_test(test_dtype_mixes_round_like_the_device),
        cmocka_unit_test(test_nan_elements),
        cmocka_unit_test(test_special_rows),
        cmocka_unit_test(test_unit_scale_skip),
        cmocka_unit_test(test_running_reductions_in_loops),
        cmocka_unit_test(test_builder_errors_name_the_call),
    };
    return cmocka_run_group_tests_name("reduce", tests, offline_setup, ctx_teardown);
}
