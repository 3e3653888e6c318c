/* make_seeds.c - writes the fuzzer's seed corpus: the kernels of the ops,
 * the tests' zoo and the tutorial, spelled in the fuzzer's byte language
 * (fuzz_ops.h), so that fuzzing starts from kernels that build and run.
 * The seeds are generated at build time (`make fuzz`), not kept in git.
 * Usage: make_seeds DIR */
#include "fuzz_ops.h"

#include <stdbool.h>
#include <stdio.h>

/* Dtype codes: positions in the decoder's table. */
enum { D_F32, D_F16, D_BF16, D_I32, D_I64, D_F64, D_F8E4M3 = 9, D_F8E5M2 = 10 }; /* fuzz_builder.c's dtype table */

static int w_dim(fuzz_writer *w, const char *nm)
{
    fw_byte(w, OP_DIM);
    fw_byte(w, fw_name(nm));
    return w->nexpr++;
}

static int w_scalar(fuzz_writer *w, const char *nm, int dt)
{
    fw_byte(w, OP_SCALAR);
    fw_byte(w, fw_name(nm));
    fw_byte(w, dt);
    return w->nexpr++;
}

static int w_tensor(fuzz_writer *w, const char *nm, int dt, int rank, const int *shape, const int *strides)
{
    fw_byte(w, OP_TENSOR);
    fw_byte(w, fw_name(nm));
    fw_byte(w, dt);
    fw_byte(w, rank);
    for (int d = 0; d < rank; d++)
        fw_e(w, shape[d]);
    fw_byte(w, strides != NULL);
    for (int d = 0; strides && d < rank; d++)
        fw_e(w, strides[d]);
    return w->nbuf++;
}

static void w_grid(fuzz_writer *w, int gx, int gy, int gz, int threads)
{
    fw_byte(w, OP_GRID);
    fw_e(w, gx);
    fw_e(w, gy);
    fw_e(w, gz);
    fw_byte(w, threads / 32);
}

static int w_int(fuzz_writer *w, int v)
{
    fw_byte(w, OP_INT);
    fw_byte(w, v);
    return w->nexpr++;
}

static int w_int64(fuzz_writer *w, int64_t v)
{
    fw_byte(w, OP_INT64);
    for (int i = 0; i < 8; i++)
        fw_byte(w, (int)((uint64_t)v >> (8 * i)) & 0xff);
    return w->nexpr++;
}

static int w_float(fuzz_writer *w, int dt, int quarters)
{
    fw_byte(w, OP_FLOAT);
    fw_byte(w, dt);
    fw_byte(w, quarters);
    return w->nexpr++;
}

static int w_bin(fuzz_writer *w, int which, int a, int b)
{
    fw_byte(w, OP_BINARY);
    fw_byte(w, which);
    fw_e(w, a);
    fw_e(w, b);
    return w->nexpr++;
}

static int w_un(fuzz_writer *w, int which, int a)
{
    fw_byte(w, OP_UNARY);
    fw_byte(w, which);
    fw_e(w, a);
    return w->nexpr++;
}

/* Operands are made before the opcode is written: C evaluates a call's
 * arguments first, so they are taken as values here. */
static int w_cast(fuzz_writer *w, int a, int dt)
{
    fw_byte(w, OP_CAST);
    fw_e(w, a);
    fw_byte(w, dt);
    return w->nexpr++;
}

static int w_select(fuzz_writer *w, int c, int a, int b)
{
    fw_byte(w, OP_SELECT);
    fw_e(w, c);
    fw_e(w, a);
    fw_e(w, b);
    return w->nexpr++;
}

static int w_i32(fuzz_writer *w, int v)
{
    fw_byte(w, OP_I32);
    fw_byte(w, v);
    return w->nexpr++;
}

static int w_block(fuzz_writer *w, int axis)
{
    fw_byte(w, OP_BLOCK_IDX);
    fw_byte(w, axis);
    return w->nexpr++;
}

static int w_load(fuzz_writer *w, int b, int rank, const int *idx)
{
    fw_byte(w, OP_LOAD);
    fw_b(w, b);
    for (int d = 0; d < TL_MAX_RANK; d++)
        fw_e(w, d < rank ? idx[d] : -1);
    return w->nexpr++;
}

static void w_store(fuzz_writer *w, int b, int rank, const int *idx, int value)
{
    fw_byte(w, OP_STORE);
    fw_b(w, b);
    for (int d = 0; d < TL_MAX_RANK; d++)
        fw_e(w, d < rank ? idx[d] : -1);
    fw_e(w, value);
}

/* tl_parallel of rank 1 or 2 with extents below 256; the first variable. */
static int w_parallel(fuzz_writer *w, int rank, const int *extents)
{
    fw_byte(w, OP_PARALLEL);
    fw_byte(w, rank);
    for (int d = 0; d < rank; d++)
        fw_byte(w, extents[d]);
    int first = w->nexpr;
    w->nexpr += rank;
    return first;
}

static int w_loop(fuzz_writer *w, int op, int ext, int stages)
{
    fw_byte(w, op);
    fw_e(w, ext);
    if (op == OP_PIPELINED)
        fw_byte(w, stages);
    return w->nexpr++;
}

static void w_op(fuzz_writer *w, int op) { fw_byte(w, op); }

static void w_clear(fuzz_writer *w, int b)
{
    fw_byte(w, OP_CLEAR);
    fw_b(w, b);
}

/* tl_gemm(a, b, c, flags) */
static void w_gemm(fuzz_writer *w, int a, int b, int c, int flags)
{
    fw_byte(w, OP_GEMM);
    fw_b(w, a);
    fw_b(w, b);
    fw_b(w, c);
    fw_byte(w, flags);
}

static void w_if(fuzz_writer *w, int cond)
{
    fw_byte(w, OP_IF);
    fw_e(w, cond);
}

static int w_alloc(fuzz_writer *w, int scope, int dt, int rank, const int *shape)
{
    fw_byte(w, OP_ALLOC);
    fw_byte(w, scope);
    fw_byte(w, dt);
    fw_byte(w, rank);
    for (int d = 0; d < rank; d++)
        fw_byte(w, shape[d]);
    return w->nbuf++;
}

static int w_tile(fuzz_writer *w, int b, int n, const int *idx)
{
    fw_byte(w, OP_TILE);
    fw_b(w, b);
    fw_byte(w, n);
    for (int d = 0; d < n; d++)
        fw_e(w, idx[d]);
    return w->nregion++;
}

static int w_all(fuzz_writer *w, int b)
{
    fw_byte(w, OP_ALL);
    fw_b(w, b);
    return w->nregion++;
}

static void w_copy(fuzz_writer *w, int src, int dst)
{
    fw_byte(w, OP_COPY);
    fw_r(w, src);
    fw_r(w, dst);
}

/* tl_cluster(cx, cy, cz) and tl_use_min_blocks(min_blocks) */
static void w_cluster(fuzz_writer *w, int cx, int cy, int cz, int min_blocks)
{
    fw_byte(w, OP_CLUSTER);
    fw_byte(w, cx);
    fw_byte(w, cy);
    fw_byte(w, cz);
    fw_byte(w, min_blocks);
}

/* tl_reduce_* (which: max, sum, min, absmax) and tl_cluster_reduce_* */
static void w_reduce(fuzz_writer *w, int which, int src, int dst, int dim, int clear)
{
    fw_byte(w, OP_REDUCE);
    fw_byte(w, which);
    fw_b(w, src);
    fw_b(w, dst);
    fw_byte(w, dim);
    fw_byte(w, clear);
}
static void w_cluster_reduce(fuzz_writer *w, int which, int b)
{
    fw_byte(w, OP_CLUSTER_REDUCE);
    fw_byte(w, which);
    fw_b(w, b);
}

/* The end of the program, then argument values. */
static void w_args(fuzz_writer *w, int n, const int *values)
{
    fw_byte(w, OP_COUNT);
    for (int i = 0; i < n; i++)
        fw_byte(w, values[i]);
}

/* ---------------------------------------------------------------- seeds */

/* The vector add of src/ops/vadd.c and the tutorial (a tile of 250). */
static void seed_vadd(fuzz_writer *w)
{
    int n = w_dim(w, "N");
    int a = w_tensor(w, "A", D_F32, 1, &n, NULL), b = w_tensor(w, "B", D_F32, 1, &n, NULL);
    int c = w_tensor(w, "C", D_F32, 1, &n, NULL);
    int tile = w_int(w, 100);
    w_grid(w, w_bin(w, BIN_CEILDIV, n, tile), -1, -1, 128);
    int base = w_bin(w, BIN_MUL, w_block(w, 0), tile);
    int i = w_bin(w, BIN_ADD, base, w_parallel(w, 1, (int[]){100}));
    w_store(w, c, 1, &i, w_bin(w, BIN_ADD, w_load(w, a, 1, &i), w_load(w, b, 1, &i)));
    w_op(w, OP_END);
    w_args(w, 4, (int[]){7, 0, 0, 0});
}

/* The zoo's rowsum: a serial loop of block-level stores. */
static void seed_rowsum(fuzz_writer *w)
{
    int m = w_dim(w, "M"), n = w_dim(w, "N");
    int x = w_tensor(w, "X", D_F32, 2, (int[]){m, n}, NULL), s = w_tensor(w, "Y", D_F32, 1, &m, NULL);
    w_grid(w, m, -1, -1, 32);
    int r = w_block(w, 0);
    w_store(w, s, 1, &r, w_float(w, D_F32, 0));
    int j = w_loop(w, OP_SERIAL, n, 0);
    w_store(w, s, 1, &r, w_bin(w, BIN_ADD, w_load(w, s, 1, &r), w_load(w, x, 2, (int[]){r, j})));
    w_op(w, OP_END);
    w_args(w, 2, (int[]){3, 5});
}

/* The running row sum of tests/kernels.h with reducers: a [4, 64] tile a
 * step reduced into reducer rs, l = l a + rs, l finalized after the loop. */
static void seed_reducer(fuzz_writer *w)
{
    int t = w_dim(w, "T");
    int four = w_int(w, 4), sixty4 = w_int(w, 64), zero = w_int(w, 0);
    int x = w_tensor(w, "X", D_F32, 3, (int[]){t, four, sixty4}, NULL), al = w_tensor(w, "A", D_F32, 2, (int[]){t, four}, NULL);
    int out = w_tensor(w, "Y", D_F32, 1, &four, NULL);
    w_grid(w, w_int(w, 1), -1, -1, 128);
    int fr = w_alloc(w, 1, D_F32, 2, (int[]){4, 64}), a = w_alloc(w, 1, D_F32, 1, (int[]){4});
    int red[2];
    for (int i = 0; i < 2; i++) {
        fw_byte(w, OP_REDUCER);
        fw_byte(w, D_F32);
        fw_byte(w, 1);
        fw_byte(w, 4);
        red[i] = w->nbuf++;
    }
    int rs = red[0], l = red[1];
    w_clear(w, l);
    int ti = w_loop(w, OP_SERIAL, t, 0);
    w_copy(w, w_tile(w, x, 3, (int[]){ti, zero, zero}), w_all(w, fr));
    int i = w_parallel(w, 1, (int[]){4});
    w_store(w, a, 1, &i, w_load(w, al, 2, (int[]){ti, i}));
    w_op(w, OP_END);
    w_reduce(w, 1, fr, rs, 1, 1);
    i = w_parallel(w, 1, (int[]){4});
    w_store(w, l, 1, &i, w_bin(w, BIN_ADD, w_bin(w, BIN_MUL, w_load(w, l, 1, &i), w_load(w, a, 1, &i)), w_load(w, rs, 1, &i)));
    w_op(w, OP_END);
    w_op(w, OP_END);
    fw_byte(w, OP_FINALIZE);
    fw_b(w, l);
    i = w_parallel(w, 1, (int[]){4});
    w_store(w, out, 1, &i, w_load(w, l, 1, &i));
    w_op(w, OP_END);
    w_args(w, 1, (int[]){3});
}

/* The zoo's mixed kernel: if/else, select, casts, integer division. */
static void seed_mixed(fuzz_writer *w)
{
    int n = w_dim(w, "N");
    int h = w_tensor(w, "X", D_F16, 1, &n, NULL), f = w_tensor(w, "Y", D_F32, 1, &n, NULL);
    int q = w_tensor(w, "C", D_I32, 1, &n, NULL);
    w_grid(w, w_bin(w, BIN_CEILDIV, n, w_int(w, 64)), -1, -1, 64);
    int i = w_bin(w, BIN_ADD, w_bin(w, BIN_MUL, w_block(w, 0), w_int(w, 64)), w_parallel(w, 1, (int[]){64}));
    int x = w_cast(w, w_load(w, h, 1, &i), D_F32);
    w_if(w, w_bin(w, BIN_EQ, w_bin(w, BIN_MOD, i, w_int(w, 3)), w_int(w, 0)));
    w_store(w, f, 1, &i, w_un(w, UN_ERF, x));
    w_op(w, OP_ELSE);
    int neg = w_un(w, UN_NEG, w_un(w, UN_RSQRT, w_bin(w, BIN_ADD, w_float(w, D_F32, 4), w_un(w, UN_ABS, x))));
    int positive = w_bin(w, BIN_GT, x, w_float(w, D_F32, 0));
    w_store(w, f, 1, &i, w_select(w, positive, w_un(w, UN_SQRT, x), neg));
    w_op(w, OP_END);
    int xi = w_cast(w, w_bin(w, BIN_MUL, x, w_float(w, D_F32, 100)), D_I32);
    w_store(w, q, 1, &i, w_bin(w, BIN_DIV, xi, w_i32(w, 7)));
    w_op(w, OP_END);
    w_args(w, 1, (int[]){70});
}

/* The zoo's staged kernel: a tile copied into shared memory, read by
 * neighbours. */
static void seed_staged(fuzz_writer *w)
{
    int n = w_dim(w, "N");
    int x = w_tensor(w, "X", D_F32, 1, &n, NULL), y = w_tensor(w, "Y", D_F32, 1, &n, NULL);
    int sixty4 = w_int(w, 64);
    w_grid(w, w_bin(w, BIN_CEILDIV, n, sixty4), -1, -1, 64);
    int b = w_block(w, 0);
    int s = w_alloc(w, 0, D_F32, 1, (int[]){64});
    w_copy(w, w_tile(w, x, 1, &b), w_all(w, s));
    int i = w_parallel(w, 1, (int[]){64});
    int g = w_bin(w, BIN_ADD, w_bin(w, BIN_MUL, b, sixty4), i);
    int nb = w_bin(w, BIN_MOD, w_bin(w, BIN_ADD, i, w_int(w, 1)), sixty4);
    w_store(w, y, 1, &g, w_bin(w, BIN_ADD, w_load(w, y, 1, &g), w_load(w, s, 1, &nb)));
    w_op(w, OP_END);
    w_args(w, 1, (int[]){100});
}

/* The staged kernel's block index through block values (tl_block_value):
 * (b / G) G + b % G, each part a let of the block. */
static void seed_block_value(fuzz_writer *w)
{
    int n = w_dim(w, "N"), g = w_dim(w, "G");
    int x = w_tensor(w, "X", D_F32, 1, &n, NULL), y = w_tensor(w, "Y", D_F32, 1, &n, NULL);
    int sixty4 = w_int(w, 64);
    w_grid(w, w_bin(w, BIN_CEILDIV, n, sixty4), -1, -1, 64);
    int b = w_block(w, 0);
    fw_byte(w, OP_BLOCK_VALUE);
    fw_e(w, w_bin(w, BIN_DIV, b, g));
    int q = w->nexpr++;
    fw_byte(w, OP_BLOCK_VALUE);
    fw_e(w, w_bin(w, BIN_MOD, b, g));
    int r = w->nexpr++;
    int i = w_parallel(w, 1, (int[]){64});
    int at = w_bin(w, BIN_ADD, w_bin(w, BIN_MUL, w_bin(w, BIN_ADD, w_bin(w, BIN_MUL, q, g), r), sixty4), i);
    w_store(w, y, 1, &at, w_bin(w, BIN_ADD, w_load(w, x, 1, &at), w_load(w, y, 1, &at)));
    w_op(w, OP_END);
    w_args(w, 2, (int[]){100, 3});
}

/* A GEMM as src/ops/gemm.c builds it, at 64 x 64 x 32 with 128 threads:
 * shared tiles fed by a pipelined loop, tl_gemm, the fragment stored; with
 * stream_b, B marked evict-first (tl_use_cache_policy) as a decode GEMM's. */
static void gemm_seed(fuzz_writer *w, bool stream_b)
{
    int m = w_dim(w, "M"), n = w_dim(w, "N"), k = w_dim(w, "K");
    int a = w_tensor(w, "A", D_BF16, 2, (int[]){m, k}, NULL), b = w_tensor(w, "B", D_BF16, 2, (int[]){k, n}, NULL);
    int c = w_tensor(w, "C", D_F32, 2, (int[]){m, n}, NULL);
    if (stream_b) {
        fw_byte(w, OP_CACHE_POLICY);
        fw_b(w, b);
        fw_byte(w, 1); /* TL_CACHE_EVICT_FIRST */
    }
    int sixty4 = w_int(w, 64), thirty2 = w_int(w, 32);
    w_grid(w, w_bin(w, BIN_CEILDIV, n, sixty4), w_bin(w, BIN_CEILDIV, m, sixty4), -1, 128);
    int bx = w_block(w, 0), by = w_block(w, 1);
    int as = w_alloc(w, 0, D_BF16, 2, (int[]){64, 32}), bs = w_alloc(w, 0, D_BF16, 2, (int[]){32, 64});
    int cf = w_alloc(w, 1, D_F32, 2, (int[]){64, 64});
    w_clear(w, cf);
    int ko = w_loop(w, OP_PIPELINED, w_bin(w, BIN_CEILDIV, k, thirty2), 2);
    w_copy(w, w_tile(w, a, 2, (int[]){by, ko}), w_all(w, as));
    w_copy(w, w_tile(w, b, 2, (int[]){ko, bx}), w_all(w, bs));
    w_gemm(w, as, bs, cf, 0);
    w_op(w, OP_END);
    w_copy(w, w_all(w, cf), w_tile(w, c, 2, (int[]){by, bx}));
    w_args(w, 3, (int[]){8, 8, 8});
}

static void seed_gemm(fuzz_writer *w) { gemm_seed(w, false); }
static void seed_streamed_gemm(fuzz_writer *w) { gemm_seed(w, true); }

/* How the warp-specialised seeds begin: M, N, K; A [M, K] of dtype ta, B
 * [N, K] of tb, C [M, N] f32; a grid of 128 x 64 tiles of C, 256 threads;
 * the OP_FLAGS byte `flags`; the block's indices. */
typedef struct ws_start {
    int k, a, b, c, bx, by, sixty4, one28;
} ws_start;

static ws_start ws_prelude(fuzz_writer *w, int ta, int tb, int flags)
{
    ws_start z;
    int m = w_dim(w, "M"), n = w_dim(w, "N");
    z.k = w_dim(w, "K");
    z.a = w_tensor(w, "A", ta, 2, (int[]){m, z.k}, NULL), z.b = w_tensor(w, "B", tb, 2, (int[]){n, z.k}, NULL);
    z.c = w_tensor(w, "C", D_F32, 2, (int[]){m, n}, NULL);
    z.sixty4 = w_int(w, 64), z.one28 = w_int(w, 128);
    w_grid(w, w_bin(w, BIN_CEILDIV, n, z.sixty4), w_bin(w, BIN_CEILDIV, m, z.one28), -1, 256);
    fw_byte(w, OP_FLAGS);
    fw_byte(w, flags);
    z.bx = w_block(w, 0), z.by = w_block(w, 1);
    return z;
}

/* seed_gemm's kernel with a producer warpgroup (the OP_FLAGS byte
 * `flags` says which schedule), and an element-wise loop on the
 * accumulator after the tl_gemm in the pipelined body for a rotation to
 * split off. */
static void ws_gemm_in(fuzz_writer *w, int flags, int cy, int elementwise)
{
    if (cy > 1)
        w_cluster(w, 1, cy, 1, 1);
    ws_start z = ws_prelude(w, D_BF16, D_BF16, flags);
    int k = z.k, a = z.a, b = z.b, c = z.c, bx = z.bx, by = z.by, sixty4 = z.sixty4;
    int as = w_alloc(w, 0, D_BF16, 2, (int[]){128, 64}), bs = w_alloc(w, 0, D_BF16, 2, (int[]){64, 64});
    int cf = w_alloc(w, 1, D_F32, 2, (int[]){128, 64});
    w_clear(w, cf);
    int ko = w_loop(w, OP_PIPELINED, w_bin(w, BIN_CEILDIV, k, sixty4), 3);
    w_copy(w, w_tile(w, a, 2, (int[]){by, ko}), w_all(w, as));
    w_copy(w, w_tile(w, b, 2, (int[]){bx, ko}), w_all(w, bs));
    w_gemm(w, as, bs, cf, 2); /* B transposed */
    if (elementwise) {
        int i = w_parallel(w, 2, (int[]){128, 64});
        int at[2] = {i, i + 1};
        w_store(w, cf, 2, at, w_bin(w, BIN_MUL, w_load(w, cf, 2, at), w_float(w, D_F32, 2)));
        w_op(w, OP_END);
    }
    w_op(w, OP_END);
    w_copy(w, w_all(w, cf), w_tile(w, c, 2, (int[]){by, bx}));
    w_args(w, 3, (int[]){8, 8, 8});
}

static void ws_gemm(fuzz_writer *w, int flags) { ws_gemm_in(w, flags, 1, 1); }

/* FlashAttention's schedule: two consumer groups taking turns, the loop
 * rotated (tl_use_pingpong mode 2). */
static void seed_pingpong(fuzz_writer *w) { ws_gemm(w, 4 | 8); /* warp specialised, ping-pong mode 2 */ }

/* Two gemms reading tiles of their own with an element-wise loop on the
 * first's accumulator between them. q_ahead: A's tile loaded ahead of the
 * loop (FlashAttention's Q) and a trip count that depends on the block
 * (causal); else A's tile is copied in the loop. */
static void two_gemm_kernel(fuzz_writer *w, int flags, int q_ahead)
{
    ws_start z = ws_prelude(w, D_BF16, D_BF16, flags);
    int k = z.k, a = z.a, b = z.b, c = z.c, bx = z.bx, by = z.by, sixty4 = z.sixty4;
    int as = w_alloc(w, 0, D_BF16, 2, (int[]){128, 64}), b1 = w_alloc(w, 0, D_BF16, 2, (int[]){64, 64});
    int b2 = w_alloc(w, 0, D_BF16, 2, (int[]){64, 64});
    int s1 = w_alloc(w, 1, D_F32, 2, (int[]){128, 64}), cf = w_alloc(w, 1, D_F32, 2, (int[]){128, 64});
    if (q_ahead)
        w_copy(w, w_tile(w, a, 2, (int[]){by, w_int(w, 0)}), w_all(w, as));
    w_clear(w, cf);
    int steps = w_bin(w, BIN_CEILDIV, k, sixty4);
    if (q_ahead) /* causal: min(steps, by + 1) */
        steps = w_bin(w, BIN_MIN, steps, w_bin(w, BIN_ADD, by, w_int(w, 1)));
    int ko = w_loop(w, OP_PIPELINED, steps, 2);
    if (!q_ahead)
        w_copy(w, w_tile(w, a, 2, (int[]){by, ko}), w_all(w, as));
    w_copy(w, w_tile(w, b, 2, (int[]){bx, ko}), w_all(w, b1));
    w_copy(w, w_tile(w, b, 2, (int[]){bx, ko}), w_all(w, b2));
    w_clear(w, s1);
    w_gemm(w, as, b1, s1, 2); /* B transposed */
    int i = w_parallel(w, 2, (int[]){128, 64});
    int at[2] = {i, i + 1};
    w_store(w, cf, 2, at, w_bin(w, BIN_ADD, w_load(w, cf, 2, at), w_load(w, s1, 2, at)));
    w_op(w, OP_END);
    w_gemm(w, as, b2, cf, 2);
    w_op(w, OP_END);
    w_copy(w, w_all(w, cf), w_tile(w, c, 2, (int[]){by, bx}));
    w_args(w, 3, (int[]){8, 8, 8});
}

/* FlashAttention's ring in miniature: two gemms in a pipelined loop of 2
 * stages, each reading a tile of its own (and both A), an element-wise
 * loop on the first's accumulator between them; warp specialised with
 * turns (tl_use_pingpong 1). The tiles get rings of their own: B1's slot
 * released in its own iteration, A's and B2's in the next. */
static void seed_rings(fuzz_writer *w) { two_gemm_kernel(w, 4 | 2, 0); /* warp specialised, ping-pong's turns */ }

/* A tile loaded ahead of the pipelined loop and read by every iteration
 * (FlashAttention's Q: A's first K tile here), in persistent CTAs with
 * ping-pong's turns: the copy becomes the producer's, on a one-slot ring
 * that the consumers hand back after each block's loop. */
static void seed_pre(fuzz_writer *w)
{
    ws_start z = ws_prelude(w, D_BF16, D_BF16, 4 | 2 | 16); /* warp specialised, turns, persistent */
    int k = z.k, a = z.a, b = z.b, c = z.c, bx = z.bx, by = z.by, sixty4 = z.sixty4;
    int as = w_alloc(w, 0, D_BF16, 2, (int[]){128, 64}), bs = w_alloc(w, 0, D_BF16, 2, (int[]){64, 64});
    int cf = w_alloc(w, 1, D_F32, 2, (int[]){128, 64});
    w_copy(w, w_tile(w, a, 2, (int[]){by, w_int(w, 0)}), w_all(w, as));
    w_clear(w, cf);
    int ko = w_loop(w, OP_PIPELINED, w_bin(w, BIN_CEILDIV, k, sixty4), 2);
    w_copy(w, w_tile(w, b, 2, (int[]){bx, ko}), w_all(w, bs));
    w_gemm(w, as, bs, cf, 2); /* B transposed */
    w_op(w, OP_END);
    w_copy(w, w_all(w, cf), w_tile(w, c, 2, (int[]){by, bx}));
    w_args(w, 3, (int[]){8, 8, 8});
}

/* Causal attention's shape in miniature: persistent CTAs with turns, a
 * tile loaded ahead of the loop (Q), two gemms reading tiles of their own
 * with an element-wise loop on the first's accumulator between them, and a
 * trip count that depends on the block (min(steps, by + 1)): the ring's
 * positions and the turns' numbers are running sums over the CTA's earlier
 * blocks, and the pre-loaded tile's slot goes back in the last iteration. */
static void seed_run(fuzz_writer *w) { two_gemm_kernel(w, 4 | 2 | 16, 1); /* warp specialised, turns, persistent */ }

/* The same with blocks taken from a counter (tl_use_persistent(k, 2): the
 * flags byte's bit 6): the producer's thread takes each block's number and
 * the consumers read it from shared memory. */
static void seed_counter(fuzz_writer *w) { two_gemm_kernel(w, 4 | 2 | 64, 1); }

/* The same kernel in persistent CTAs (tl_use_persistent): its blocks share
 * the producer's ring. */
static void seed_persistent(fuzz_writer *w) { ws_gemm(w, 4 | 16); /* warp specialised, persistent */ }

/* The same kernel in clusters of two blocks along y: B's tile is the same
 * for both, so its TMA copy is multicast (a slice each), the ring's slots
 * freed cluster-wide. */
static void seed_multicast(fuzz_writer *w) { ws_gemm_in(w, 4, 2, 1); /* warp specialised, cluster 1 x 2 */ }

/* The persistent kernel without the element-wise loop, in stream-K units
 * (tl_use_stream_k): the tile loops walk shares of the K steps, the
 * consumers end each unit with the partial sums' fixup. */
static void seed_stream_k(fuzz_writer *w) { ws_gemm_in(w, 4 | 16 | 32, 1, 0); }

/* An 8-bit GEMM (A e4m3, B e5m2, both K-major): 128-column blocks, TMA
 * boxes of one 128-byte row, K steps of 32, warp specialised. */
static void seed_f8_gemm(fuzz_writer *w)
{
    ws_start z = ws_prelude(w, D_F8E4M3, D_F8E5M2, 4); /* warp specialised */
    int k = z.k, a = z.a, b = z.b, c = z.c, bx = z.bx, by = z.by, one28 = z.one28;
    int as = w_alloc(w, 0, D_F8E4M3, 2, (int[]){128, 128}), bs = w_alloc(w, 0, D_F8E5M2, 2, (int[]){64, 128});
    int cf = w_alloc(w, 1, D_F32, 2, (int[]){128, 64});
    w_clear(w, cf);
    int ko = w_loop(w, OP_PIPELINED, w_bin(w, BIN_CEILDIV, k, one28), 3);
    w_copy(w, w_tile(w, a, 2, (int[]){by, ko}), w_all(w, as));
    w_copy(w, w_tile(w, b, 2, (int[]){bx, ko}), w_all(w, bs));
    w_gemm(w, as, bs, cf, 2); /* B transposed */
    w_op(w, OP_END);
    w_copy(w, w_all(w, cf), w_tile(w, c, 2, (int[]){by, bx}));
    w_args(w, 3, (int[]){8, 8, 16});
}

/* The zoo's 2-D kernel with a row stride given as {ldx, 1}. */
static void seed_strided(fuzz_writer *w)
{
    int m = w_dim(w, "M"), n = w_dim(w, "N"), ld = w_dim(w, "K");
    int alpha = w_scalar(w, "alpha", D_F32);
    int one = w_int64(w, 1);
    int x = w_tensor(w, "X", D_F32, 2, (int[]){m, n}, (int[]){ld, one});
    int y = w_tensor(w, "Y", D_BF16, 2, (int[]){m, n}, NULL);
    w_grid(w, w_bin(w, BIN_CEILDIV, n, w_int(w, 64)), w_bin(w, BIN_CEILDIV, m, w_int(w, 4)), -1, 128);
    int v = w_parallel(w, 2, (int[]){4, 64});
    int i = w_bin(w, BIN_ADD, w_bin(w, BIN_MUL, w_block(w, 1), w_int(w, 4)), v);
    int j = w_bin(w, BIN_ADD, w_bin(w, BIN_MUL, w_block(w, 0), w_int(w, 64)), v + 1);
    int xv = w_load(w, x, 2, (int[]){i, j});
    int r = w_bin(w, BIN_SUB, w_bin(w, BIN_ADD, w_bin(w, BIN_MUL, alpha, xv), w_un(w, UN_EXP, xv)), w_un(w, UN_TANH, xv));
    w_store(w, y, 2, (int[]){i, j}, w_cast(w, r, D_BF16));
    w_op(w, OP_END);
    w_args(w, 4, (int[]){5, 70, 80, 6});
}

/* A regression seed: x = x + x 500 times, stored by every iteration of a
 * serial loop inside a parallel one (60,000 statements). The interpreter's
 * work budget counted statements only, so this ran 30 million node
 * evaluations, seconds per input: a libFuzzer timeout. */
static void seed_wide_dag(fuzz_writer *w)
{
    int n = w_dim(w, "N");
    int x = w_tensor(w, "X", D_F32, 1, &n, NULL);
    w_grid(w, -1, -1, -1, 32);
    int i = w_parallel(w, 1, (int[]){240});
    w_loop(w, OP_SERIAL, n, 0);
    int v = w_load(w, x, 1, &i);
    for (int d = 0; d < 500; d++) {
        v = w_bin(w, BIN_ADD, v, v);
        if (d % 100 == 99) /* i + 0 is i again, at a position a byte can name */
            i = w_bin(w, BIN_ADD, i, w_int(w, 0));
    }
    w_store(w, x, 1, &i, v);
    w_op(w, OP_END);
    w_op(w, OP_END);
    w_args(w, 1, (int[]){250});
}

/* A row maximum split over a cluster of two blocks, as the row ops split
 * a row (src/ops/rows.c): each block reduces its 32 columns (padding past
 * N), then the cluster combines the two partial maxima. */
static void seed_cluster(fuzz_writer *w)
{
    int m = w_dim(w, "M"), n = w_dim(w, "N");
    int x = w_tensor(w, "X", D_F32, 2, (int[]){m, n}, NULL), y = w_tensor(w, "Y", D_F32, 1, &m, NULL);
    w_cluster(w, 2, 1, 1, 2);
    int two = w_int(w, 2), w32 = w_int(w, 32);
    w_grid(w, w_bin(w, BIN_MUL, m, two), -1, -1, 32);
    int bx = w_block(w, 0);
    int row = w_bin(w, BIN_DIV, bx, two), part = w_bin(w, BIN_MOD, bx, two);
    int frag = w_alloc(w, 1, D_F32, 2, (int[]){1, 32}), mx = w_alloc(w, 1, D_F32, 1, (int[]){1});
    int i = w_parallel(w, 2, (int[]){1, 32}), j = i + 1;
    int col = w_bin(w, BIN_ADD, w_bin(w, BIN_MUL, part, w32), j);
    int inside = w_bin(w, BIN_LT, col, n);
    w_store(w, frag, 2, (int[]){i, j}, w_select(w, inside, w_load(w, x, 2, (int[]){row, col}), w_float(w, D_F32, -128)));
    w_op(w, OP_END);
    w_reduce(w, 0, frag, mx, 1, 1);
    w_cluster_reduce(w, 0, mx);
    int k = w_parallel(w, 1, (int[]){1});
    w_store(w, y, 1, &row, w_load(w, mx, 1, &k));
    w_op(w, OP_END);
    w_args(w, 2, (int[]){3, 50});
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds DIR\n");
        return 2;
    }
    static void (*const seeds[])(fuzz_writer *) = {seed_vadd,  seed_rowsum,  seed_mixed,    seed_staged, seed_gemm,
                                                   seed_strided, seed_wide_dag, seed_pingpong, seed_cluster,
                                                   seed_persistent, seed_multicast, seed_f8_gemm,
                                                   seed_stream_k, seed_rings, seed_pre, seed_run, seed_counter,
                                                   seed_block_value, seed_streamed_gemm, seed_reducer};
    static const char *const names[] = {"vadd",    "rowsum",   "mixed",    "staged", "gemm",
                                        "strided", "wide_dag", "pingpong", "cluster",
                                        "persistent", "multicast", "f8_gemm", "stream_k", "rings", "pre", "run", "counter",
                                        "block_value", "streamed_gemm", "reducer"};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        fuzz_writer w = {.len = 0};
        seeds[i](&w);
        char path[1024];
        snprintf(path, sizeof path, "%s/seed-%s", argv[1], names[i]);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(w.buf, 1, (size_t)w.len, f) != (size_t)w.len) {
            fprintf(stderr, "make_seeds: cannot write %s\n", path);
            return 1;
        }
        fclose(f);
    }
    return 0;
}
