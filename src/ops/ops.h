/* ops.h - the prebuilt operations: each builds its kernel through the public
 * builder API (the ops are users of the API, which proves the API). */
#ifndef TILEC_OPS_H
#define TILEC_OPS_H

#include "tilec.h"

#include <stdbool.h>

/* Schedule of the vector add: elements per block and threads per block. */
typedef struct tli_vadd_schedule {
    int64_t tile;
    int threads;
} tli_vadd_schedule;

/* The default schedule for dtype on any target. */
tli_vadd_schedule tli_vadd_default_schedule(tl_dtype dtype);
/* Builds C[i] = A[i] + B[i]; its parameters, in launch order: N, A, B, C. */
tl_status tli_vadd_build(tl_ctx *ctx, tl_dtype dtype, const tli_vadd_schedule *s, tl_kernel **out);

/* Whether a split-K schedule s runs over thread-block clusters on target
 * (one kernel, the slices added through distributed shared memory) rather
 * than through a workspace and a second kernel (gemm.c). */
bool tli_gemm_cluster_split(const char *target, const tl_gemm_schedule *s);
/* act(x) of the GEMM's epilogue, in f32 (gemm.c). */
tl_expr tli_gemm_activation(tl_kernel *k, tl_expr x, tl_epilogue epi);
/* The matrix-vector kernel of a gemv schedule (gemv.c): d checked, B as
 * [N, K], s->block_m rows of A at most, the plain GEMM's parameters. */
tl_status tli_gemv_build(tl_ctx *ctx, const tl_gemm_desc *d, const tl_gemm_schedule *s, tl_kernel **out);


/* ------------------------------------------------ row-wise ops (rows.c) */

/* What softmax and RMSNorm share: X and Y [rows, cols] with row strides
 * (0: cols), their element types, a schedule (zeros: the default). */
typedef struct tli_rows_desc {
    int64_t rows, cols, ld_in, ld_out;
    tl_dtype in_dtype, out_dtype;
    tl_softmax_schedule schedule;
    int online_width; /* the default chunk of rows past 32768 columns, 1024..32768
                         (0: rows.c's 8192) */
} tli_rows_desc;

/* Checks sizes, strides, dtypes and the schedule's fields; the message on
 * ctx starts with api. */
tl_status tli_rows_check(tl_ctx *ctx, const tli_rows_desc *d, const char *api);
/* d->schedule with the defaults filled in (d already checked): stages
 * fitted to the shared memory of ctx's target when defaulted, 1 on the
 * online path. */
tl_softmax_schedule tli_rows_schedule(tl_ctx *ctx, const tli_rows_desc *d);

/* Whether a producer warpgroup (schedule.loader 2) can fill the ring of
 * schedule s: stages >= 2, a block of whole warpgroups with room for one
 * more (threads a multiple of 128 up to 896), one block a row (no
 * cluster: tl_use_persistent excludes it). The target's mbarriers are
 * checked apart (rows.c). */
bool tli_rows_producer_fits(const tl_softmax_schedule *s);

/* A device pointer argument of a row-wise op, for tli_rows_check_pointers. */
typedef struct tli_rows_ptr {
    const char *name;
    uint64_t p;
    tl_dtype dtype;
} tli_rows_ptr;
/* Each pointer is not 0 (when d has rows) and aligned to its element. */
tl_status tli_rows_check_pointers(tl_ctx *ctx, const tli_rows_desc *d, const char *api, int n,
                                  const tli_rows_ptr *ptrs);

/* A row-wise kernel under construction: dims M, N, ld_in, ld_out, tensors
 * X [M, N] (in_dtype) and Y [M, N] (out_dtype) with those row strides;
 * after tli_rows_open, the grid and the first row of the tile the block
 * works on (inside the loop over its tiles when stages != 1). */
typedef struct tli_rows_kernel {
    tl_kernel *k;
    tl_expr M, N, bx, row0;
    tl_expr tile;   /* the tile of rows the block (its cluster) is at */
    tl_expr part;   /* the block's rank in its cluster: one pass covers its
                       columns [part W, part W + W); 0 without clusters */
    tl_buf X, Y;
    int64_t R, W;   /* rows per tile, columns per pass (the fragment) */
    int C;          /* blocks per cluster splitting a row (1: none) */
    bool online;    /* cols > C W: passes over chunks of W columns */
    int stages;     /* the effective schedule's (rows.c) */
    int threads;
    tl_dtype in;
    tl_expr P, t;   /* stages != 1: tiles per block, the tile loop's variable */
    tl_buf ring;    /* stages >= 2: the shared tile the ring of slots is made of */
    bool producer;  /* schedule.loader 2: one tile a block, warp-specialised
                       persistent CTAs fill the ring (rows.c) */
} tli_rows_kernel;

/* Starts the kernel `<op>_<in>_<out>_w<W>[_online][_ring<S>[p]][_c<C>]` of
 * d's effective schedule: its dims and tensors. Returns TL_OK or
 * TL_ERR_OUT_OF_MEMORY. */
tl_status tli_rows_begin(tl_ctx *ctx, const char *op, const tli_rows_desc *d, tli_rows_kernel *rk);
/* After the op's own parameters: [the `tiles` dim,] the grid, and, when
 * stages != 1, the loop over the block's tiles (with the copy of the ring's
 * tile at its head), which tli_rows_close ends. */
void tli_rows_open(tli_rows_kernel *rk);
void tli_rows_close(tli_rows_kernel *rk);
/* With C > 1: combines the per-block partial s [R] across the cluster
 * (tl_cluster_reduce_max or _sum); nothing without clusters. */
void tli_rows_cluster_max(const tli_rows_kernel *rk, tl_buf s);
void tli_rows_cluster_sum(const tli_rows_kernel *rk, tl_buf s);
/* The W-column tile of X the block holds in chunk c (c: 0 in one pass):
 * c C + part (c without clusters); X's column of element j of its
 * fragment there: that tile times W, plus j. */
tl_expr tli_rows_chunk(const tli_rows_kernel *rk, tl_expr c);
tl_expr tli_rows_column(const tli_rows_kernel *rk, tl_expr c, tl_expr j);
/* Inside the tile loop (stages >= 2): x [R, W] (an f32 fragment) = the
 * ring slot's rows in f32, pad past column N. */
void tli_rows_load(const tli_rows_kernel *rk, tl_buf x, float pad);
/* The same element by element, inside the caller's tl_parallel over
 * [R, W] (variables v): the slot's X[row, v[1]] in f32, pad past N. */
tl_expr tli_rows_ring_at(const tli_rows_kernel *rk, const tl_expr *v, float pad);
/* Hands the kernel over (*out), or destroys it and reports its error on
 * ctx, prefixed by api. */
tl_status tli_rows_end(tl_ctx *ctx, tli_rows_kernel *rk, const char *api, tl_kernel **out);
/* The program of op for d, kept in the context under its dtypes and
 * effective schedule; build(ctx, user, &k) makes its kernel. */
tl_status tli_rows_program(tl_ctx *ctx, const char *op, const tli_rows_desc *d,
                           tl_status (*build)(tl_ctx *, const void *, tl_kernel **), const void *user,
                           const tl_program **out);
/* The first launch arguments of every row-wise program: M, N, ld_in,
 * ld_out, X, Y. Returns how many it wrote (6). */
int tli_rows_args(const tli_rows_desc *d, uint64_t x, uint64_t y, tl_arg *args);
/* The last launch argument of program p of d, when its schedule has one
 * (stages != 1 with loader 1): the blocks ctx's GPU runs at once, tli_rows_wave.
 * Returns how many it wrote (0 or 1). */
int tli_rows_tail_args(tl_ctx *ctx, const tl_program *p, const tli_rows_desc *d, tl_arg *args);
/* SMs x the blocks of p one SM holds (1 when unknown). */
int64_t tli_rows_wave(tl_ctx *ctx, const tl_program *p);

/* TL_OK when device pointer p of element type dtype may be used: not null
 * and aligned to the element size, or not needed (no element is touched);
 * else TL_ERR_INVALID_ARG with "api: name ..." on ctx. */
tl_status tli_op_check_dptr(tl_ctx *ctx, const char *api, const char *name, uint64_t p, tl_dtype dtype,
                            bool needed);

/* The end of an op's builder: *out = k when the builder recorded no error
 * on k; else k is destroyed and its status returned, with "api: the
 * builder's message" on ctx when api is not NULL. */
tl_status tli_op_kernel_done(tl_ctx *ctx, const char *api, tl_kernel *k, tl_kernel **out);

#endif
