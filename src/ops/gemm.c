/*
 * gemm.c - the prebuilt GEMM with its fused epilogue, written with the
 * public builder API: tiles of A and B move global -> shared through a
 * software pipeline, tl_gemm accumulates in an f32 fragment, the bias and
 * activation run on the fragment in registers, one store writes C.
 *
 * tl_op_gemm_ex is the BLAS-shaped entry point (row strides, strided and
 * pointer-array batches, alpha and beta); tl_op_gemm is its plain call.
 * One kernel, three ways of declaring its operands: dense [M, K] tensors
 * (the plain kernel, unchanged for tl_op_gemm), [batch, M, K] tensors with
 * strides that are launch arguments (strided), and per-block tensors from
 * arrays of pointers (tl_param_tensor_array); the batch is the grid's z.
 */
#include "ops.h"

#include "checked.h"
#include "ctx.h"
#include "program.h"
#include "tune.h"

#include <string.h>

#define GEMM_MAX_SPLIT 16 /* slices of K (tl_gemm_schedule.split_k) */

/* A schedule is all zero when the caller leaves the choice to the op. */
static bool schedule_is_zero(const tl_gemm_schedule *z)
{
    return !z->block_m && !z->block_n && !z->block_k && !z->stages && !z->threads && !z->swizzle &&
           !z->warp_policy && !z->pingpong && !z->split_k && !z->swap_ab &&
           !z->persistent && !z->cluster_m && !z->cluster_n && !z->stream_k && !z->gemv;
}

#define GEMV_MAX_M 8 /* rows of A the matrix-vector kernel serves (gemv.c) */

/* A gemv schedule with its zeros filled in: 1 row of B a block, K in
 * chunks of 2048, 64 threads, M rounded up to a power of two. */
static tl_gemm_schedule gemv_schedule(const tl_gemm_desc *d, tl_gemm_schedule s)
{
    if (!s.block_m)
        for (s.block_m = 1; s.block_m < d->m && s.block_m < GEMV_MAX_M;)
            s.block_m *= 2;
    if (!s.block_n)
        s.block_n = 1;
    if (!s.block_k)
        s.block_k = 2048;
    if (!s.threads)
        s.threads = 64;
    return s;
}

/* The schedule of d with the choices filled in. An all-zero schedule is
 * the op's choice (gemm_schedule.c: the tuning database's record for this
 * GPU and shape class, else the heuristic table); in any other, zero
 * fields come from the target's schedule for large shapes and swizzle 0
 * means off. */
static tl_gemm_schedule effective_schedule(tl_ctx *ctx, const tl_gemm_desc *d)
{
    if (schedule_is_zero(&d->schedule)) {
        tl_gemm_schedule p = tli_gemm_pick(ctx, d);
        return p.gemv ? gemv_schedule(d, p) : p;
    }
    if (d->schedule.gemv)
        return gemv_schedule(d, d->schedule);
    const tl_gemm_schedule def = tli_gemm_generic_schedule(tl_ctx_target(ctx), d->in_dtype);
    tl_gemm_schedule s = d->schedule;
    if (!s.block_m)
        s.block_m = def.block_m;
    if (!s.block_n)
        s.block_n = def.block_n;
    if (!s.block_k)
        s.block_k = def.block_k;
    if (!s.stages)
        s.stages = def.stages;
    if (!s.threads)
        s.threads = def.threads;
    return s;
}

/* A gemv schedule (the zeros are filled in later): the matrix-vector
 * kernel's own limits, and nothing of the tensor-core kernels'. */
static tl_status check_gemv(tl_ctx *ctx, const tl_gemm_desc *d, const char *api)
{
    const tl_gemm_schedule z = d->schedule, s = gemv_schedule(d, z);
    const char *no = NULL;
    if (z.gemv != 1)
        no = "schedule.gemv must be 0 or 1";
    else if (!d->trans_b)
        no = "schedule.gemv needs B as [N, K] (trans_b = 1)";
    else if (tli_dtype_is_f8(d->in_dtype))
        no = "schedule.gemv takes 16-bit inputs";
    else if (z.pingpong || z.split_k > 1 || z.swap_ab || z.persistent || z.cluster_m > 1 || z.cluster_n > 1 ||
             z.stream_k)
        no = "schedule.gemv excludes pingpong, split_k, swap_ab, persistent, clusters and stream_k";
    else if (s.block_m < 1 || s.block_m > GEMV_MAX_M || d->m > s.block_m)
        no = "schedule.gemv serves M <= block_m <= 8";
    else if (s.block_n < 1 || s.block_n > 64 || s.block_k < 32 || s.block_k > 8192 || (s.block_k & (s.block_k - 1)))
        no = "schedule.gemv takes block_n 1..64 and block_k a power of two in 32..8192";
    else if (s.threads < 32 || s.threads > 1024 || s.threads % 32 || (int64_t)s.block_n * s.block_k < s.threads ||
             (int64_t)s.block_m * s.block_n * s.block_k / s.threads > 128)
        no = "schedule.gemv takes threads a multiple of 32 in 32..1024, each holding at least one element of the "
             "block's rows and at most 128 sums (block_m x block_n x block_k / threads)";
    if (no)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: %s (M = %lld, block_m = %d, block_n = %d, block_k = %d, "
                        "threads = %d)", api, no, (long long)d->m, s.block_m, s.block_n, s.block_k, s.threads);
    return TL_OK;
}

tl_status tli_gemm_check_desc(tl_ctx *ctx, const tl_gemm_desc *d, const char *api)
{
    if (!d)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: NULL descriptor", api);
    if (d->m < 1 || d->n < 1 || d->k < 1)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: M, N, K must be >= 1 (got %lld, %lld, %lld)", api,
                        (long long)d->m, (long long)d->n, (long long)d->k);
    bool f8 = tli_dtype_is_f8(d->in_dtype);
    if (d->in_dtype != TL_BF16 && d->in_dtype != TL_F16 && !f8)
        return tli_fail(ctx, TL_ERR_DTYPE, "%s: inputs must be bf16, f16, f8e4m3 or f8e5m2, not %s", api,
                        tl_dtype_name(d->in_dtype));
    if (d->out_dtype != TL_BF16 && d->out_dtype != TL_F16 && d->out_dtype != TL_F32)
        return tli_fail(ctx, TL_ERR_DTYPE, "%s: output must be bf16, f16 or f32, not %s", api,
                        tl_dtype_name(d->out_dtype));
    if ((unsigned)d->epilogue > TL_EPI_GELU_TANH)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: unknown epilogue %d", api, (int)d->epilogue);
    unsigned wp = d->schedule.warp_policy;
    if (wp != TL_GEMM_WARP_SQUARE && wp != TL_GEMM_WARP_ROWS && wp != TL_GEMM_WARP_COLS)
        return tli_fail(ctx, TL_ERR_INVALID_ARG,
                        "%s: unknown schedule.warp_policy 0x%x (TL_GEMM_WARP_SQUARE, _ROWS or _COLS)", api, wp);
    if (d->schedule.split_k < 0 || d->schedule.split_k > GEMM_MAX_SPLIT)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule.split_k = %d is outside 0..%d", api,
                        d->schedule.split_k, GEMM_MAX_SPLIT);
    if (d->schedule.split_k > 1 && d->schedule.pingpong)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule.split_k = %d and pingpong exclude each other", api,
                        d->schedule.split_k);
    if (d->schedule.swap_ab != 0 && d->schedule.swap_ab != 1)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule.swap_ab = %d is not 0 or 1", api, d->schedule.swap_ab);
    if (d->schedule.swap_ab && d->schedule.pingpong)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule.swap_ab and pingpong exclude each other", api);
    if (d->schedule.persistent < 0 || d->schedule.persistent > 2)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule.persistent = %d is not 0, 1 or 2", api,
                        d->schedule.persistent);
    if (d->schedule.persistent && (d->schedule.pingpong || d->schedule.split_k > 1 || d->schedule.swap_ab))
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule.persistent excludes %s", api,
                        d->schedule.pingpong ? "pingpong (persistent already)"
                        : d->schedule.swap_ab ? "swap_ab"
                                              : "split_k (a slice's trip count differs between blocks)");
    if (d->schedule.stream_k != 0 && d->schedule.stream_k != 1)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule.stream_k = %d is not 0 or 1", api, d->schedule.stream_k);
    if (d->schedule.stream_k && d->schedule.persistent != 1)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule.stream_k needs persistent = 1 (CTAs that take shares "
                        "of the tiles)", api);
    if (d->schedule.gemv) {
        tl_status st = check_gemv(ctx, d, api);
        if (st != TL_OK)
            return st;
    }
    int cm = d->schedule.cluster_m, cn = d->schedule.cluster_n;
    if (cm < 0 || cm > 8 || cn < 0 || cn > 8 || (cm ? cm : 1) * (cn ? cn : 1) > 8)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule.cluster_m x cluster_n = %d x %d: each must be 0..8 "
                        "and their product at most 8", api, cm, cn);
    if ((cm > 1 || cn > 1) && (d->schedule.pingpong || d->schedule.persistent || d->schedule.split_k > 1 ||
                               d->schedule.swap_ab))
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule.cluster_m / cluster_n exclude %s", api,
                        d->schedule.pingpong ? "pingpong" : d->schedule.persistent ? "persistent"
                        : d->schedule.swap_ab ? "swap_ab" : "split_k (its slices are a cluster already)");
    tli_target t;
    if (f8 && !d->trans_b)
        return tli_fail(ctx, TL_ERR_UNSUPPORTED, "%s: 8-bit inputs need B as [N, K] (trans_b = 1): the tensor "
                        "cores read 8-bit operands K-major only", api);
    if (f8 && !(tli_target_get(ctx->target, &t) && tli_target_has_mma(&t, MMA_WGMMA_M64NNK16)))
        return tli_fail(ctx, TL_ERR_UNSUPPORTED, "%s: 8-bit inputs need wgmma (sm_90a), not %s", api, ctx->target);
    if (f8 && d->schedule.block_k % 128)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule.block_k = %d: 8-bit inputs take K in whole 128-byte "
                        "rows (a multiple of 128, or 0 for the default)", api, d->schedule.block_k);
    if ((cm > 1 || cn > 1) && !(tli_target_get(ctx->target, &t) && t.clusters))
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule.cluster_m / cluster_n need thread-block clusters "
                        "(sm_90 and later), not %s", api, ctx->target);
    if (d->schedule.swap_ab && !d->trans_b &&
        !(tli_target_get(ctx->target, &t) && tli_target_has_mma(&t, MMA_WGMMA_M64NNK16)))
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: schedule.swap_ab with B as [K, N] needs wgmma (sm_90a): "
                        "the swapped kernel reads B^T as a transposed A", api);
    return TL_OK;
}

TL_API tl_gemm_schedule tl_op_gemm_schedule(tl_ctx *ctx, const tl_gemm_desc *d)
{
    tl_gemm_schedule zero = {0};
    if (!ctx || tli_gemm_check_desc(ctx, d, "tl_op_gemm_schedule") != TL_OK)
        return zero;
    return effective_schedule(ctx, d);
}

/* x -> act(x) on f32 values, as builder expressions, written for the FMA
 * pipe: with h = x/2 both GELUs end in h + h * f(...) (one FFMA), and the
 * tanh form's inner polynomial is x (c0 + c1 x^2) (two multiplies, one
 * FFMA), which is what keeps the fused epilogue within a few percent of
 * the GEMM. */
tl_expr tli_gemm_activation(tl_kernel *k, tl_expr x, tl_epilogue epi)
{
    tl_expr h = tl_mul(k, x, tl_f32(k, 0.5f));
    switch (epi) {
    case TL_EPI_RELU: return tl_max(k, x, tl_f32(k, 0.0f));
    case TL_EPI_GELU_ERF: /* x/2 (1 + erf(x / sqrt 2)) */
        return tl_add(k, h, tl_mul(k, h, tl_erf(k, tl_mul(k, x, tl_f32(k, 0.70710678118654752f)))));
    case TL_EPI_GELU_TANH: { /* x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
        const float c0 = 0.79788456080286536f, c1 = 0.79788456080286536f * 0.044715f;
        tl_expr inner = tl_mul(k, x, tl_add(k, tl_f32(k, c0), tl_mul(k, tl_f32(k, c1), tl_mul(k, x, x))));
        return tl_add(k, h, tl_mul(k, h, tl_tanh(k, inner)));
    }
    default: return x;
    }
}

/* The bias's type: the inputs' for 16-bit inputs; for 8-bit ones (too
 * coarse for a bias) the output's, as cuBLASLt takes it. */
tl_dtype tli_gemm_bias_dtype(const tl_gemm_desc *d)
{
    return tli_dtype_is_f8(d->in_dtype) ? d->out_dtype : d->in_dtype;
}

/* ------------------------------------------------------------------------ */
/* The call: what tl_op_gemm_ex's arguments ask of the kernel                 */
/* ------------------------------------------------------------------------ */

/* The kernels of one descriptor and schedule. The plain one (0) is
 * tl_op_gemm's: dense rows, one entry, alpha 1, beta 0. Any other call
 * runs a general one, whose row strides, batch, batch strides and alpha
 * are launch arguments; what changes the code is compiled in: a pointer-
 * array batch instead of a strided one, and reading C (beta != 0). */
enum { GEMM_STRIDED = 1, GEMM_PTRARRAY = 2, GEMM_BETA = 4, GEMM_SPLIT = 8, GEMM_SWAP = 16, GEMM_CLUSTER = 32,
       GEMM_GEMV = 64, GEMM_STREAM_B = 128 };
#define GEMM_GENERAL (GEMM_STRIDED | GEMM_PTRARRAY | GEMM_BETA) /* the general kernels' bits */

#define GEMM_MAX_BATCH 65535 /* the grid's z dimension */

/* A checked call, normalised: the leading dimensions and strides the
 * kernel gets (0 replaced), and what picks its program and schedule. */
typedef struct gemm_call {
    unsigned variant;
    int64_t batch, lda, ldb, ldc;
    int64_t sa, sb, sc;         /* batch strides (strided variant)              */
    int64_t batch_a, batch_b;   /* entries of A and B: 1 for a shared matrix      */
    float alpha, beta;
    bool tma;                   /* strides TMA could read (the schedule's choice) */
    bool c_tma;                 /* C rows TMA could write (16-bit C; f32 C is stored from registers) */
} gemm_call;

/* What the op's program cache builds a kernel from. */
typedef struct gemm_spec {
    tl_gemm_desc d;
    unsigned variant;
} gemm_spec;

/* Whether two entries of a strided batch of C (m x n, rows ldc apart,
 * entries sc apart) share an element: entries db apart do when some row
 * offset dr (|dr| < m) brings db sc + dr ldc within n - 1 of 0. Only db
 * with db sc below one entry's span can, and those are few. */
static bool outputs_overlap(int64_t m, int64_t n, int64_t ldc, int64_t sc, int64_t batch, int64_t span)
{
    if (sc == 0)
        return true;
    int64_t x = 0;
    for (int64_t db = 1; db < batch; db++) {
        x += sc; /* db sc; below span + sc, which fits */
        if (x >= span)
            return false;
        int64_t q = x / ldc, r = x % ldc; /* dr = -q leaves r, dr = -q - 1 leaves r - ldc */
        if ((q <= m - 1 && r <= n - 1) || (q + 1 <= m - 1 && ldc - r <= n - 1))
            return true;
    }
    return false;
}

static tl_status check_ld(tl_ctx *ctx, const char *api, const char *name, int64_t ld, int64_t row,
                          const char *what, int64_t *out)
{
    if (ld < 0)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: %s = %lld is negative (0 means dense rows)", api, name,
                        (long long)ld);
    if (ld && ld < row)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: %s = %lld is shorter than a row of %s (%lld elements)", api,
                        name, (long long)ld, what, (long long)row);
    *out = ld ? ld : row;
    return TL_OK;
}

/* The pointer-array form: all three arrays, nothing of the strided form,
 * arrays of whole 8-byte pointers. */
static tl_status check_arrays(tl_ctx *ctx, const tl_gemm_args *g, const char *api, bool pointers)
{
    const char *names[3] = {"a_array", "b_array", "c_array"};
    const uint64_t arr[3] = {g->a_array, g->b_array, g->c_array};
    const uint64_t plain[3] = {g->a, g->b, g->c};
    const int64_t strides[3] = {g->stride_a, g->stride_b, g->stride_c};
    for (int i = 0; i < 3; i++) {
        if (!arr[i])
            return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: a pointer-array batch needs a_array, b_array and "
                            "c_array; %s is 0", api, names[i]);
        if (pointers && plain[i])
            return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: %c = 0x%llx is set, but the batch is a pointer array "
                            "(%s): %c must be 0", api, "abc"[i], (unsigned long long)plain[i], names[i], "abc"[i]);
        if (strides[i])
            return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: stride_%c = %lld is set, but the batch is a pointer "
                            "array (%s): the strides must be 0", api, "abc"[i], (long long)strides[i], names[i]);
        if (pointers && arr[i] % 8)
            return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: %s = 0x%llx is not aligned to its 8-byte device "
                            "pointers", api, names[i], (unsigned long long)arr[i]);
    }
    return TL_OK;
}

/* The strided form: strides >= 0, C's entries apart, and what the kernel
 * gets: for one entry, or a matrix every entry shares (stride 0), one
 * entry of the operand whose stride is its span (any stride serves one
 * entry; a span keeps TMA's descriptor valid). */
static tl_status check_strides(tl_ctx *ctx, const tl_gemm_desc *d, const tl_gemm_args *g, const char *api,
                               gemm_call *c)
{
    const int64_t strides[3] = {g->stride_a, g->stride_b, g->stride_c};
    for (int i = 0; i < 3; i++)
        if (strides[i] < 0)
            return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: stride_%c = %lld is negative", api, "abc"[i],
                            (long long)strides[i]);
    int64_t rows_b = d->trans_b ? d->n : d->k;
    int64_t span_a = 0, span_b = 0, span_c = 0;
    bool big = tli_mul_overflows(d->m, c->lda, &span_a) || tli_mul_overflows(rows_b, c->ldb, &span_b) ||
               tli_mul_overflows(d->m, c->ldc, &span_c);
    if (big)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: a matrix of these sizes and leading dimensions spans more "
                        "than 2^63 elements", api);
    bool many = c->batch > 1;
    c->batch_a = many && g->stride_a ? c->batch : 1;
    c->batch_b = many && g->stride_b ? c->batch : 1;
    c->sa = c->batch_a > 1 ? g->stride_a : span_a;
    c->sb = c->batch_b > 1 ? g->stride_b : span_b;
    c->sc = many ? g->stride_c : span_c;
    /* one entry of C ends (m - 1) ldc + n elements after its start */
    if (many && outputs_overlap(d->m, d->n, c->ldc, g->stride_c, c->batch, span_c - c->ldc + d->n))
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: stride_c = %lld makes the C of batch entries overlap (each "
                        "is %lld x %lld with ldc = %lld)", api, (long long)g->stride_c, (long long)d->m,
                        (long long)d->n, (long long)c->ldc);
    return TL_OK;
}

/* Checks d and g for api and fills *c; with `pointers`, the device
 * pointers too (the program functions read only the shape of g). */
static tl_status check_call(tl_ctx *ctx, const tl_gemm_desc *d, const tl_gemm_args *g, const char *api,
                            bool pointers, gemm_call *c)
{
    memset(c, 0, sizeof *c);
    tl_status st = tli_gemm_check_desc(ctx, d, api);
    if (st != TL_OK)
        return st;
    if (!g)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: NULL args", api);
    if ((st = check_ld(ctx, api, "lda", g->lda, d->k, "A", &c->lda)) != TL_OK ||
        (st = check_ld(ctx, api, "ldb", g->ldb, d->trans_b ? d->k : d->n, "B", &c->ldb)) != TL_OK ||
        (st = check_ld(ctx, api, "ldc", g->ldc, d->n, "C", &c->ldc)) != TL_OK)
        return st;
    if (g->batch < 1 || g->batch > GEMM_MAX_BATCH)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: batch = %lld is outside 1..%d (tl_gemm_default_args() "
                        "gives 1)", api, (long long)g->batch, GEMM_MAX_BATCH);
    c->batch = g->batch;
    bool ptrs = g->a_array || g->b_array || g->c_array;
    st = ptrs ? check_arrays(ctx, g, api, pointers) : check_strides(ctx, d, g, api, c);
    if (st == TL_OK && pointers && !ptrs)
        st = tli_op_check_dptr(ctx, api, "a", g->a, d->in_dtype, true);
    if (st == TL_OK && pointers && !ptrs)
        st = tli_op_check_dptr(ctx, api, "b", g->b, d->in_dtype, true);
    if (st == TL_OK && pointers)
        st = tli_op_check_dptr(ctx, api, "bias", g->bias, tli_gemm_bias_dtype(d), d->has_bias != 0);
    if (st == TL_OK && pointers && !ptrs)
        st = tli_op_check_dptr(ctx, api, "c", g->c, d->out_dtype, true);
    if (st != TL_OK)
        return st;
    /* a zero scale (a struct filled field by field) means 1: a per-tensor
     * dequantisation factor is never 0 (alpha is the scale that may be) */
    c->alpha = (float)(g->alpha * (g->scale_a != 0 ? g->scale_a : 1.0) * (g->scale_b != 0 ? g->scale_b : 1.0));
    c->beta = (float)g->beta;
    bool dense = c->lda == d->k && c->ldb == (d->trans_b ? d->k : d->n) && c->ldc == d->n;
    if (ptrs)
        c->variant = GEMM_PTRARRAY;
    else if (!dense || c->batch > 1 || c->alpha != 1.0f || c->beta != 0.0f)
        c->variant = GEMM_STRIDED;
    if (c->beta != 0.0f)
        c->variant |= GEMM_BETA;
    int64_t per = 16 / (int64_t)tl_dtype_size(d->in_dtype); /* elements in 16 bytes */
    c->tma = !ptrs && c->lda % per == 0 && c->ldb % per == 0 && (c->batch_a == 1 || c->sa % per == 0) &&
             (c->batch_b == 1 || c->sb % per == 0);
    c->c_tma = d->out_dtype == TL_F32 ||
               (!ptrs && c->ldc % 8 == 0 && g->c % 16 == 0 && (c->batch == 1 || c->sc % 8 == 0));
    return TL_OK;
}

/* What the call's rows allow the schedule (tli_gemm_pick_for). */
static unsigned call_rows(const tl_gemm_desc *d, const gemm_call *c)
{
    return (c->tma ? TLI_GEMM_TMA : 0) | (tli_gemm_b_rows_off_sectors(c->ldb, d->in_dtype) ? TLI_GEMM_B_OFF : 0);
}

/* The schedule of a call: d's own when it sets one, else the op's choice
 * for the batch's rows (batch x M), with TMA only where the strides let it
 * read. A plain call chooses as tl_op_gemm_schedule does. */
static tl_gemm_desc choice_desc(const tl_gemm_desc *d, const gemm_call *c)
{
    tl_gemm_desc rows = *d;
    if (d->m <= INT64_MAX / c->batch)
        rows.m = d->m * c->batch;
    return rows;
}

static tl_gemm_schedule call_schedule(tl_ctx *ctx, const tl_gemm_desc *d, const gemm_call *c)
{
    if (!schedule_is_zero(&d->schedule))
        return effective_schedule(ctx, d);
    tl_gemm_desc rows = choice_desc(d, c);
    return tli_gemm_pick_for(ctx, &rows, call_rows(d, c));
}

/* ------------------------------------------------------------------------ */
/* The kernel                                                                */
/* ------------------------------------------------------------------------ */

/* The epilogue on the accumulator, in registers:
 *   Cf[i, j] = act(alpha Cf[i, j] + beta C[i, j] + bias_s[j])
 * (alpha and beta in general kernels, beta when it reads C), with the
 * block's bias slab in shared memory (bias_s, loaded before the main
 * loop): loading it from global memory here let the compiler hoist the 64
 * loads per thread into the main loop, where the registers they hold
 * pushed the kernel into spills. C's old values are read here, once per
 * element, masked at the edges. */
typedef struct epilogue_in {
    tl_expr alpha, beta;     /* null: 1 and 0 */
    tl_buf C;                /* read when beta is given */
    tl_expr cz;              /* C's batch index (null: C is [M, N]) */
    tl_expr row0, col0;      /* the block's first row and column */
    tl_buf bias_s;
    bool bias_rows;          /* the bias runs along the fragment's rows (a swapped kernel) */
} epilogue_in;

static void epilogue(tl_kernel *k, const tl_gemm_desc *d, const tl_gemm_schedule *s, tl_buf Cf,
                     const epilogue_in *in)
{
    tl_expr v[2];
    tl_parallel(k, 2, (int64_t[]){s->block_m, s->block_n}, v);
    tl_expr x = tl_load(k, Cf, v);
    if (in->alpha.id)
        x = tl_mul(k, in->alpha, x);
    if (in->beta.id) {
        tl_expr r = tl_add(k, in->row0, v[0]), col = tl_add(k, in->col0, v[1]);
        tl_expr old = tl_load(k, in->C, in->cz.id ? (tl_expr[]){in->cz, r, col} : (tl_expr[]){r, col});
        x = tl_add(k, x, tl_mul(k, in->beta, tl_cast(k, old, TL_F32)));
    }
    if (d->has_bias)
        x = tl_add(k, x, tl_cast(k, tl_load(k, in->bias_s, &v[in->bias_rows ? 0 : 1]), TL_F32));
    tl_store(k, Cf, v, tli_gemm_activation(k, x, d->epilogue));
    tl_end(k);
}

/* The kernel's parameters (launch order: tl_op_gemm_ex_program in tilec.h). */
typedef struct gemm_params {
    tl_expr M, N, K;
    tl_expr batch;              /* general kernels: the entries (grid z)          */
    tl_expr batch_a, batch_b;   /* strided: entries of A and B (1: one matrix)    */
    tl_expr alpha, beta;        /* general kernels; beta when C is read           */
    tl_buf A, B, bias, C;
    bool strided;               /* A, B, C carry the batch as dimension 0         */
} gemm_params;

static void declare_params(tl_kernel *k, const tl_gemm_desc *d, unsigned variant, gemm_params *p)
{
    memset(p, 0, sizeof *p);
    tl_expr M = p->M = tl_dim(k, "M"), N = p->N = tl_dim(k, "N"), K = p->K = tl_dim(k, "K");
    tl_expr bshape[2] = {d->trans_b ? N : K, d->trans_b ? K : N};
    if (!(variant & GEMM_GENERAL)) {
        /* the plain kernel; the slices' one writes W [slices, M, N] of f32
         * instead of C, without the bias; a swapped one writes C (or W)
         * through its transpose: [N, M] with strides (1, N) */
        bool swap = variant & GEMM_SWAP;
        tl_expr unit = tl_int(k, 1);
        p->A = tl_param_tensor(k, "A", d->in_dtype, 2, (tl_expr[]){M, K}, NULL);
        p->B = tl_param_tensor(k, "B", d->in_dtype, 2, bshape, NULL);
        if ((variant & GEMM_SPLIT) && !(variant & GEMM_CLUSTER)) {
            tl_expr slices = tl_int(k, d->schedule.split_k);
            p->C = swap ? tl_param_tensor(k, "W", TL_F32, 3, (tl_expr[]){slices, N, M},
                                          (tl_expr[]){tl_mul(k, M, N), unit, N})
                        : tl_param_tensor(k, "W", TL_F32, 3, (tl_expr[]){slices, M, N}, NULL);
            return;
        }
        p->bias = d->has_bias ? tl_param_tensor(k, "bias", tli_gemm_bias_dtype(d), 1, &N, NULL) : TL_NONE_BUF;
        p->C = swap ? tl_param_tensor(k, "C", d->out_dtype, 2, (tl_expr[]){N, M}, (tl_expr[]){unit, N})
                    : tl_param_tensor(k, "C", d->out_dtype, 2, (tl_expr[]){M, N}, NULL);
        return;
    }
    p->strided = (variant & GEMM_STRIDED) != 0;
    p->batch = tl_dim(k, "batch");
    tl_expr lda = tl_dim(k, "lda"), ldb = tl_dim(k, "ldb"), ldc = tl_dim(k, "ldc"), one = tl_int(k, 1);
    tl_expr sa = TL_NONE_EXPR, sb = TL_NONE_EXPR, sc = TL_NONE_EXPR;
    if (p->strided) {
        sa = tl_dim(k, "stride_a"), sb = tl_dim(k, "stride_b"), sc = tl_dim(k, "stride_c");
        p->batch_a = tl_dim(k, "batch_a"), p->batch_b = tl_dim(k, "batch_b");
    }
    p->alpha = tl_param_scalar(k, "alpha", TL_F32);
    if (variant & GEMM_BETA)
        p->beta = tl_param_scalar(k, "beta", TL_F32);
    if (p->strided) {
        p->A = tl_param_tensor(k, "A", d->in_dtype, 3, (tl_expr[]){p->batch_a, M, K}, (tl_expr[]){sa, lda, one});
        p->B = tl_param_tensor(k, "B", d->in_dtype, 3, (tl_expr[]){p->batch_b, bshape[0], bshape[1]},
                               (tl_expr[]){sb, ldb, one});
    } else { /* each block's matrices: entry blockIdx.z of the arrays */
        p->A = tl_param_tensor_array(k, "A", d->in_dtype, 2, (tl_expr[]){M, K}, (tl_expr[]){lda, one}, p->batch, 2);
        p->B = tl_param_tensor_array(k, "B", d->in_dtype, 2, bshape, (tl_expr[]){ldb, one}, p->batch, 2);
    }
    p->bias = d->has_bias ? tl_param_tensor(k, "bias", tli_gemm_bias_dtype(d), 1, &N, NULL) : TL_NONE_BUF;
    if (p->strided)
        p->C = tl_param_tensor(k, "C", d->out_dtype, 3, (tl_expr[]){p->batch, M, N}, (tl_expr[]){sc, ldc, one});
    else
        p->C = tl_param_tensor_array(k, "C", d->out_dtype, 2, (tl_expr[]){M, N}, (tl_expr[]){ldc, one}, p->batch, 2);
}

static const char *variant_suffix(unsigned variant)
{
    static const char *const names[8] = {"", "_strided", "_ptrarray", "?", "_beta", "_strided_beta",
                                         "_ptrarray_beta", "?"};
    if (variant & GEMM_CLUSTER)
        return (variant & GEMM_SWAP) ? "_swapped_cluster_split" : "_cluster_split";
    if (variant & (GEMM_SPLIT | GEMM_SWAP))
        return (variant & GEMM_SPLIT) ? ((variant & GEMM_SWAP) ? "_swapped_slices" : "_slices") : "_swapped";
    return names[variant & 7];
}

/* The kernel that runs schedule s for call c: the slices' kernel when s
 * splits K in a plain call (rows the second kernel's grid can hold), else
 * the call's own, s then without its split (the general kernels do not
 * split). A split that tli_gemm_cluster_split allows (at most 8 slices,
 * slices x tile elements at most 4096, a target with clusters) runs as
 * one kernel (GEMM_CLUSTER): the slices of a tile are a cluster, which
 * adds its partial products through distributed shared memory, no
 * workspace and no second launch. Larger tiles keep the workspace: block
 * 0 reads every slice of the tile (tl_cluster_reduce_sum_to), and at
 * 64x128 in 2 slices that cost more than the workspace's round trip
 * (64x8192x8192: 0.78-0.79 x cuBLAS against 0.84-0.87; as an all-reduce,
 * every block reading every slice, 64x128 in 4 slices at 1x4096x4096 NN
 * measured 0.38 against 0.89). */
#define SPLIT_MAX_ROWS 65535 /* slices_sum's grid y */
static unsigned kernel_variant(tl_ctx *ctx, const tl_gemm_desc *d, const gemm_call *c, tl_gemm_schedule *s)
{
    unsigned v = c->variant;
    if (s->gemv) { /* the plain call's matrix-vector kernel; the general kernels take their default */
        if (!v) {
            *s = gemv_schedule(d, *s);
            return GEMM_GEMV;
        }
        *s = tli_gemm_generic_schedule(tl_ctx_target(ctx), d->in_dtype);
    }
    if (!v && s->swap_ab)
        v |= GEMM_SWAP;
    if (!(v & GEMM_GENERAL) && s->split_k > 1 && d->m <= SPLIT_MAX_ROWS)
        v |= GEMM_SPLIT;
    if ((v & GEMM_SPLIT) && tli_gemm_cluster_split(ctx->target, s))
        v |= GEMM_CLUSTER;
    if (!(v & GEMM_SPLIT))
        s->split_k = 0;
    if (!(v & GEMM_SWAP))
        s->swap_ab = 0;
    /* B read by at most two tiles of C's rows (decode and skinny shapes,
     * where the two readers of a B tile run at about the same time) is
     * streamed through the L2 once: its lines are marked evict-first, so
     * that the stream neither writes back the dirty lines nor displaces
     * the data the L2 holds for A and the kernels around this one.
     * Measured, bench_gemm_small: 8x14336x4096 to 128x8192x8192 +4-13 %.
     * (The GEMV marks its B itself: gemv.c.) */
    int64_t rows = (v & GEMM_SWAP) ? s->block_n : s->block_m;
    if (rows > 0 && d->m <= 2 * rows)
        v |= GEMM_STREAM_B;
    return v;
}

/* The GEMM of d, variant and schedule s, written with the builder:
 *
 *   grid (ceil(N / BN), ceil(M / BM), batch), tl_use_swizzle(swizzle)
 *   [bias_s = bias tile bx]
 *   Cf = 0
 *   for ko in tl_pipelined(ceil(K / BK), stages):
 *       As = tile (by, ko) of A's entry;  Bs = tile (ko, bx) (or (bx, ko)) of B's entry
 *       tl_gemm(As, Bs, Cf)
 *   Cf = act(alpha Cf + beta C + bias_s)  (what the kernel has of it)
 *   tile (by, bx) of C's entry = Cf
 *
 * A's entry of block z is A[min(z, batch_a - 1)] in a strided kernel (a
 * matrix shared by every entry is an A of one entry), array entry z in a
 * pointer-array one; B's and C's likewise (C's is always z).
 *
 * The slices' kernel of a split-K schedule (GEMM_SPLIT) has S = split_k
 * blocks along z; block z takes the K steps z, z + S, z + 2 S, ... below
 * steps = ceil(K / BK) (interleaved: the S blocks of a tile read
 * neighbouring pieces of each row of A and of B as [N, K] at once, where
 * runs of consecutive steps put them K / S apart), and writes its f32
 * partial product, unscaled, to W[z] (slices_sum then adds them up). With
 * GEMM_CLUSTER the S blocks are a cluster (1, 1, S): after the loop
 *   tl_cluster_reduce_sum_to(Cf, 0)             block 0: the whole sum
 *   if z == 0: Cf = act(Cf + bias_s); tile (by, bx) of C = Cf
 *
 * A swapped kernel (GEMM_SWAP) computes C^T = B^T A^T: its block (bx, by)
 * takes rows by BM.. of B^T (As holds them: a [BM, BK] tile of B as
 * [N, K], or a [BK, BM] tile of B as [K, N] read as a transposed A, which
 * only wgmma does) and rows bx BN.. of A (Bs, [BN, BK], TL_GEMM_TRANS_B),
 * the bias runs along the fragment's rows, and the fragment goes to C^T, a
 * view of C with strides (1, N). */
static tl_status build_gemm(tl_ctx *ctx, const tl_gemm_desc *d, unsigned variant, const tl_gemm_schedule *sp,
                            tl_kernel **out)
{
    if (variant & GEMM_GEMV)
        return tli_gemv_build(ctx, d, sp, out);
    tl_gemm_schedule s = *sp;
    char name[64];
    tli_fmt(name, sizeof name, "gemm_%s%s_%s%s", d->trans_b ? "nt" : "nn", tl_dtype_name(d->in_dtype),
            tl_dtype_name(d->out_dtype), variant_suffix(variant));
    tl_kernel *k = tl_kernel_new(ctx, name);
    if (!k)
        return TL_ERR_OUT_OF_MEMORY;
    gemm_params p;
    declare_params(k, d, variant, &p);
    if (variant & GEMM_STREAM_B)
        tl_use_cache_policy(k, p.B, TL_CACHE_EVICT_FIRST);
    tl_expr M = p.M, N = p.N, K = p.K;
    bool split = variant & GEMM_SPLIT, swap = variant & GEMM_SWAP, general = variant & GEMM_GENERAL;
    bool cluster = variant & GEMM_CLUSTER, workspace = split && !cluster;
    tl_expr rows = swap ? N : M, cols = swap ? M : N; /* of the fragment's tiles */
    /* clusters of cn x cm tiles: the grid in whole clusters (the blocks past
     * the edge load zeros and store nothing) */
    int cn = s.cluster_n > 1 ? s.cluster_n : 1, cm = s.cluster_m > 1 ? s.cluster_m : 1;
    tl_expr gx = tl_ceildiv(k, cols, tl_int(k, s.block_n)), gy = tl_ceildiv(k, rows, tl_int(k, s.block_m));
    if (cn > 1)
        gx = tl_mul(k, tl_ceildiv(k, gx, tl_int(k, cn)), tl_int(k, cn));
    if (cm > 1)
        gy = tl_mul(k, tl_ceildiv(k, gy, tl_int(k, cm)), tl_int(k, cm));
    tl_grid(k, gx, gy, split ? tl_int(k, s.split_k) : p.batch, s.threads);
    if (cluster) {
        tl_cluster(k, 1, 1, s.split_k);
    } else {
        if (cn * cm > 1) /* blocks of a cluster share tiles of A (along N) and B (along M): TMA multicast */
            tl_cluster(k, cn, cm, 1);
        tl_use_swizzle(k, s.swizzle);
    }
    /* the activations in f32 with the hardware tanh: its 2^-11 is far below
     * what the bf16/f16 operands carry (see tl_op_gemm in tilec.h) */
    tl_use_fast_math(k, 1);
    if (s.pingpong)
        tl_use_pingpong(k, 1);
    if (s.persistent) { /* the producer runs ahead into the next tile while this one's epilogue runs */
        tl_use_warp_specialize(k, 1);
        tl_use_persistent(k, s.persistent); /* 2: tiles taken from a counter */
        if (s.stream_k) /* shares of all tiles' K steps instead of whole tiles */
            tl_use_stream_k(k, 1);
    }
    tl_expr bx = tl_block_idx(k, 0), by = tl_block_idx(k, 1);
    /* (the plain kernel makes no more nodes than it always did: its source
     * and dumps stay as they were) */
    tl_expr bz = general || split ? tl_block_idx(k, 2) : TL_NONE_EXPR, az = TL_NONE_EXPR, bzb = TL_NONE_EXPR;
    if (p.strided) {
        az = tl_min(k, bz, tl_sub(k, p.batch_a, tl_int(k, 1)));
        bzb = tl_min(k, bz, tl_sub(k, p.batch_b, tl_int(k, 1)));
    }
    bool a_t = swap && !d->trans_b, b_t = swap || d->trans_b; /* As is [BK, BM]; Bs is [BN, BK] */
    tl_buf As = tl_alloc_shared(k, d->in_dtype, 2,
                                a_t ? (int64_t[]){s.block_k, s.block_m} : (int64_t[]){s.block_m, s.block_k});
    tl_buf Bs = tl_alloc_shared(k, d->in_dtype, 2,
                                b_t ? (int64_t[]){s.block_n, s.block_k} : (int64_t[]){s.block_k, s.block_n});
    tl_buf rows_src = swap ? p.B : p.A, cols_src = swap ? p.A : p.B; /* As's tensor, Bs's */
    tl_buf Cf = tl_alloc_fragment(k, TL_F32, 2, (int64_t[]){s.block_m, s.block_n});
    tl_buf bias_s = TL_NONE_BUF;
    if (d->has_bias && !workspace) {
        bias_s = tl_alloc_shared(k, tli_gemm_bias_dtype(d), 1, (int64_t[]){swap ? s.block_m : s.block_n});
        tl_copy(k, tl_tile(k, p.bias, swap ? by : bx), tl_all(bias_s));
    }
    tl_clear(k, Cf);
    tl_expr steps = tl_ceildiv(k, K, tl_int(k, s.block_k));
    if (split) /* this block's slice of the K steps: z, z + S, z + 2 S, ... */
        steps = tl_ceildiv(k, tl_max(k, tl_sub(k, steps, bz), tl_int(k, 0)), tl_int(k, s.split_k));
    tl_expr ko = tl_pipelined(k, steps, s.stages);
    if (split)
        ko = tl_add(k, bz, tl_mul(k, ko, tl_int(k, s.split_k)));
    tl_expr bt[2] = {b_t ? bx : ko, b_t ? ko : bx};
    tl_copy(k, p.strided ? tl_tile(k, p.A, az, by, ko) : a_t ? tl_tile(k, rows_src, ko, by) : tl_tile(k, rows_src, by, ko),
            tl_all(As));
    tl_copy(k, p.strided ? tl_tile(k, p.B, bzb, bt[0], bt[1]) : tl_tile(k, cols_src, bt[0], bt[1]), tl_all(Bs));
    tl_gemm(k, As, Bs, Cf, (a_t ? TL_GEMM_TRANS_A : 0) | (b_t ? TL_GEMM_TRANS_B : 0) | s.warp_policy);
    tl_end(k);
    if (cluster) { /* the slices' sum in block 0 of the cluster, which finishes the tile */
        tl_cluster_reduce_sum_to(k, Cf, 0);
        tl_if(k, tl_eq(k, bz, tl_int(k, 0)));
    }
    if (!workspace && (general || d->has_bias || d->epilogue != TL_EPI_NONE)) {
        epilogue_in in = {.alpha = p.alpha, .beta = p.beta, .C = p.C, .cz = p.strided ? bz : TL_NONE_EXPR,
                          .bias_s = bias_s, .bias_rows = swap};
        if (p.beta.id) {
            in.row0 = tl_mul(k, by, tl_int(k, s.block_m));
            in.col0 = tl_mul(k, bx, tl_int(k, s.block_n));
        }
        epilogue(k, d, &s, Cf, &in);
    }
    tl_copy(k, tl_all(Cf), p.strided || workspace ? tl_tile(k, p.C, bz, by, bx) : tl_tile(k, p.C, by, bx));
    if (cluster)
        tl_end(k);
    return tli_op_kernel_done(ctx, NULL, k, out);
}

/* The second kernel of a split-K schedule: the S slices' partial products
 * added in slice order (the same sum whatever ran first), then bias,
 * activation and C, element-wise:
 *   grid (ceil(N / 1024), M)
 *   for j in tl_parallel(1024):  x = W[0, row, col] + ... + W[S - 1, row, col]
 *                                C[row, col] = act(x + bias[col])      col = bx 1024 + j */
#define SUM_COLS 1024
static tl_status build_slices_sum(tl_ctx *ctx, const tl_gemm_desc *d, int slices, tl_kernel **out)
{
    char name[64];
    tli_fmt(name, sizeof name, "gemm_slices_sum_%s", tl_dtype_name(d->out_dtype));
    tl_kernel *k = tl_kernel_new(ctx, name);
    if (!k)
        return TL_ERR_OUT_OF_MEMORY;
    tl_expr M = tl_dim(k, "M"), N = tl_dim(k, "N");
    tl_buf W = tl_param_tensor(k, "W", TL_F32, 3, (tl_expr[]){tl_int(k, slices), M, N}, NULL);
    tl_buf bias = d->has_bias ? tl_param_tensor(k, "bias", tli_gemm_bias_dtype(d), 1, &N, NULL) : TL_NONE_BUF;
    tl_buf C = tl_param_tensor(k, "C", d->out_dtype, 2, (tl_expr[]){M, N}, NULL);
    tl_grid(k, tl_ceildiv(k, N, tl_int(k, SUM_COLS)), M, TL_NONE_EXPR, 256);
    tl_use_fast_math(k, 1); /* as the one-pass kernel's epilogue */
    tl_expr row = tl_block_idx(k, 1);
    tl_expr col = tl_add(k, tl_mul(k, tl_block_idx(k, 0), tl_int(k, SUM_COLS)), tl_parallel1(k, SUM_COLS));
    tl_expr x = tl_load(k, W, (tl_expr[]){tl_int(k, 0), row, col});
    for (int z = 1; z < slices; z++)
        x = tl_add(k, x, tl_load(k, W, (tl_expr[]){tl_int(k, z), row, col}));
    if (d->has_bias)
        x = tl_add(k, x, tl_cast(k, tl_load(k, bias, &col), TL_F32));
    tl_store(k, C, (tl_expr[]){row, col}, tl_cast(k, tli_gemm_activation(k, x, d->epilogue), d->out_dtype));
    tl_end(k);
    return tli_op_kernel_done(ctx, NULL, k, out);
}

tl_status tli_gemm_slices_sum_build(tl_ctx *ctx, const tl_gemm_desc *d, int slices, tl_kernel **out)
{
    return build_slices_sum(ctx, d, slices, out);
}

static tl_status build_sum_for_op(tl_ctx *ctx, const void *user, tl_kernel **out)
{
    const tl_gemm_desc *d = user;
    return build_slices_sum(ctx, d, d->schedule.split_k, out);
}

static tl_status slices_sum_program(tl_ctx *ctx, const tl_gemm_desc *d, int slices, const tl_program **out)
{
    tl_gemm_desc spec = *d;
    memset(&spec.schedule, 0, sizeof spec.schedule);
    spec.schedule.split_k = slices;
    char key[96];
    tli_fmt(key, sizeof key, "gemm_slices_sum:%s:%s:%d:%d:%d", tl_dtype_name(d->in_dtype),
            tl_dtype_name(d->out_dtype), d->has_bias, (int)d->epilogue, slices);
    return tli_op_program(ctx, key, build_sum_for_op, &spec, out);
}

TL_API tl_status tl_op_gemm_build(tl_ctx *ctx, const tl_gemm_desc *d, tl_kernel **out)
{
    if (!ctx || !out)
        return ctx ? tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_op_gemm_build: NULL argument") : TL_ERR_INVALID_ARG;
    *out = NULL;
    tl_status st = tli_gemm_check_desc(ctx, d, "tl_op_gemm_build");
    if (st != TL_OK)
        return st;
    tl_gemm_schedule s = effective_schedule(ctx, d);
    gemm_call plain = {0};
    unsigned v = kernel_variant(ctx, d, &plain, &s);
    return build_gemm(ctx, d, v, &s, out);
}

static tl_status build_for_op(tl_ctx *ctx, const void *user, tl_kernel **out)
{
    const gemm_spec *spec = user;
    return build_gemm(ctx, &spec->d, spec->variant, &spec->d.schedule, out);
}

/* The op's program of d, variant and schedule s: one program serves every
 * size (and, for the general kernels, every stride, batch and alpha), so
 * the key holds only what the code depends on. */
static tl_status program_for(tl_ctx *ctx, const tl_gemm_desc *d, unsigned variant, const tl_gemm_schedule *s,
                             const tl_program **out)
{
    gemm_spec spec = {.d = *d, .variant = variant};
    spec.d.schedule = *s;
    char key[128], v[24] = "";
    if (variant)
        tli_fmt(v, sizeof v, ":v%u:k%d", variant, s->split_k);
    tli_fmt(key, sizeof key, "gemm:%s:%s:%d:%d:%d:%d.%d.%d.%d.%d.%d.%u.%d%s%s", tl_dtype_name(d->in_dtype),
            tl_dtype_name(d->out_dtype), d->trans_b, d->has_bias, (int)d->epilogue, s->block_m, s->block_n,
            s->block_k, s->stages, s->threads, s->swizzle, s->warp_policy, s->pingpong != 0,
            s->persistent ? s->stream_k ? ".psk" : s->persistent == 2 ? ".p2" : ".p" : "", v);
    if (s->cluster_m > 1 || s->cluster_n > 1)
        tli_fmt(key + strlen(key), sizeof key - strlen(key), ":c%dx%d", s->cluster_m, s->cluster_n);
    return tli_op_program(ctx, key, build_for_op, &spec, out);
}

/* The program of a checked call, for api. A tuning record whose schedule
 * no longer compiles (another NVRTC, an edited file) must not break the
 * op: the heuristic's schedule runs, with a warning. */
static tl_status call_program(tl_ctx *ctx, const tl_gemm_desc *d, const gemm_call *c, const char *api,
                              const tl_program **out, tl_gemm_schedule *used, unsigned *variant)
{
    unsigned since = tli_fail_count();
    tl_gemm_schedule s = call_schedule(ctx, d, c);
    /* persistent CTAs store C through TMA, whose rows must be 16-byte
     * aligned: otherwise the same tile one CTA a tile (its register stores
     * take any C), not the safe variant's element-wise copies of A and B */
    if (s.persistent && !c->c_tma)
        s.persistent = s.stream_k = 0;
    *variant = kernel_variant(ctx, d, c, &s);
    *used = s;
    tl_status st = tli_fail_as(ctx, program_for(ctx, d, *variant, &s, out), api, since);
    if (st == TL_OK || !schedule_is_zero(&d->schedule))
        return st;
    tl_gemm_desc rows = choice_desc(d, c);
    tl_gemm_schedule h = tli_gemm_heuristic_for(ctx, &rows, call_rows(d, c));
    *variant = kernel_variant(ctx, d, c, &h);
    if (memcmp(&h, &s, sizeof h) == 0)
        return st;
    tli_log(ctx, TL_LOG_WARN, "%s: the tuned schedule failed (%s: %s); using the heuristic's", api,
            tl_status_name(st), tl_ctx_error(ctx));
    *used = h;
    return tli_fail_as(ctx, program_for(ctx, d, *variant, &h, out), api, since);
}

/* tl_op_gemm's call as tl_op_gemm_ex's arguments. */
static tl_gemm_args plain_args(uint64_t a, uint64_t b, uint64_t bias, uint64_t c)
{
    tl_gemm_args g = tl_gemm_default_args();
    g.a = a, g.b = b, g.bias = bias, g.c = c;
    return g;
}

TL_API tl_status tl_op_gemm_program(tl_ctx *ctx, const tl_gemm_desc *d, const tl_program **out)
{
    if (!ctx || !out)
        return ctx ? tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_op_gemm_program: NULL argument") : TL_ERR_INVALID_ARG;
    gemm_call c;
    tl_gemm_args g = plain_args(0, 0, 0, 0);
    tl_gemm_schedule s;
    unsigned v;
    tl_status st = check_call(ctx, d, &g, "tl_op_gemm_program", false, &c);
    return st != TL_OK ? st : call_program(ctx, d, &c, "tl_op_gemm_program", out, &s, &v);
}

TL_API tl_gemm_args tl_gemm_default_args(void)
{
    tl_gemm_args g;
    memset(&g, 0, sizeof g);
    g.batch = 1;
    g.alpha = 1.0;
    g.scale_a = g.scale_b = 1.0;
    return g;
}

TL_API tl_status tl_op_gemm_ex_program(tl_ctx *ctx, const tl_gemm_desc *d, const tl_gemm_args *args,
                                       const tl_program **out)
{
    static const char api[] = "tl_op_gemm_ex_program";
    if (!ctx || !out)
        return ctx ? tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: NULL argument", api) : TL_ERR_INVALID_ARG;
    *out = NULL;
    gemm_call c;
    tl_gemm_schedule s;
    unsigned v;
    tl_status st = check_call(ctx, d, args, api, false, &c);
    return st != TL_OK ? st : call_program(ctx, d, &c, api, out, &s, &v);
}

TL_API tl_status tl_op_gemm_ex_build(tl_ctx *ctx, const tl_gemm_desc *d, const tl_gemm_args *args, tl_kernel **out)
{
    static const char api[] = "tl_op_gemm_ex_build";
    if (!ctx || !out)
        return ctx ? tli_fail(ctx, TL_ERR_INVALID_ARG, "%s: NULL argument", api) : TL_ERR_INVALID_ARG;
    *out = NULL;
    gemm_call c;
    tl_status st = check_call(ctx, d, args, api, false, &c);
    if (st != TL_OK)
        return st;
    unsigned since = tli_fail_count();
    tl_gemm_schedule s = call_schedule(ctx, d, &c);
    unsigned v = kernel_variant(ctx, d, &c, &s);
    return tli_fail_as(ctx, build_gemm(ctx, d, v, &s, out), api, since);
}

/* The launch arguments of call c (tl_op_gemm_ex_program's order). */
static int call_args(const tl_gemm_desc *d, const gemm_call *c, const tl_gemm_args *g, tl_arg *args)
{
    int n = 0;
    bool ptrs = c->variant & GEMM_PTRARRAY;
    args[n++] = tl_arg_int(d->m);
    args[n++] = tl_arg_int(d->n);
    args[n++] = tl_arg_int(d->k);
    if (c->variant) {
        args[n++] = tl_arg_int(c->batch);
        args[n++] = tl_arg_int(c->lda);
        args[n++] = tl_arg_int(c->ldb);
        args[n++] = tl_arg_int(c->ldc);
        if (!ptrs) {
            args[n++] = tl_arg_int(c->sa);
            args[n++] = tl_arg_int(c->sb);
            args[n++] = tl_arg_int(c->sc);
            args[n++] = tl_arg_int(c->batch_a);
            args[n++] = tl_arg_int(c->batch_b);
        }
        args[n++] = tl_arg_float(c->alpha);
        if (c->variant & GEMM_BETA)
            args[n++] = tl_arg_float(c->beta);
    }
    args[n++] = tl_arg_dptr(ptrs ? g->a_array : g->a);
    args[n++] = tl_arg_dptr(ptrs ? g->b_array : g->b);
    if (d->has_bias)
        args[n++] = tl_arg_dptr(g->bias);
    args[n++] = tl_arg_dptr(ptrs ? g->c_array : g->c);
    return n;
}

/* Tensors TMA or 16-byte copies cannot take (misaligned pointers, rows or
 * batch strides not of whole 16 bytes) run the program's safe variant:
 * tl_launch picks it. */
/* A split-K schedule s: the slices' kernel p into a workspace that lives
 * on the stream, then the sum. A driver without the stream-ordered
 * allocator runs the one-pass kernel instead. */
static tl_status run_split(tl_ctx *ctx, const tl_gemm_desc *d, tl_gemm_schedule s, unsigned swap,
                           const tl_gemm_args *g, const tl_program *p, void *stream, const char *api)
{
    const tl_program *sum;
    uint64_t w = 0;
    tl_status st = slices_sum_program(ctx, d, s.split_k, &sum);
    if (st == TL_OK) {
        size_t bytes = (size_t)s.split_k * (size_t)d->m * (size_t)d->n * sizeof(float);
        st = tli_malloc_async(ctx, bytes, stream, &w, api);
    }
    if (st == TL_ERR_UNSUPPORTED) {
        tli_log(ctx, TL_LOG_WARN, "%s: %s; K is not split", api, tl_ctx_error(ctx));
        s.split_k = 0;
        st = program_for(ctx, d, swap, &s, &p);
        if (st != TL_OK)
            return st;
        tl_arg args[7];
        gemm_call plain = {0};
        return tl_launch(p, stream, call_args(d, &plain, g, args), args);
    }
    if (st != TL_OK)
        return st;
    tl_arg args[6] = {tl_arg_int(d->m), tl_arg_int(d->n), tl_arg_int(d->k), tl_arg_dptr(g->a), tl_arg_dptr(g->b),
                      tl_arg_dptr(w)};
    st = tl_launch(p, stream, 6, args);
    if (st == TL_OK) {
        int n = 0;
        tl_arg sargs[5];
        sargs[n++] = tl_arg_int(d->m);
        sargs[n++] = tl_arg_int(d->n);
        sargs[n++] = tl_arg_dptr(w);
        if (d->has_bias)
            sargs[n++] = tl_arg_dptr(g->bias);
        sargs[n++] = tl_arg_dptr(g->c);
        st = tl_launch(sum, stream, n, sargs);
    }
    tl_status fr = tli_free_async(ctx, w, stream);
    return st != TL_OK ? st : fr;
}

static tl_status run_gemm(tl_ctx *ctx, const tl_gemm_desc *d, const tl_gemm_args *g, void *stream, const char *api)
{
    unsigned since = tli_fail_count();
    gemm_call c;
    const tl_program *p;
    tl_gemm_schedule s;
    unsigned v;
    tl_status st = check_call(ctx, d, g, api, true, &c);
    if (st == TL_OK)
        st = call_program(ctx, d, &c, api, &p, &s, &v);
    if (st != TL_OK)
        return st;
    if ((v & GEMM_SPLIT) && !(v & GEMM_CLUSTER))
        return tli_fail_as(ctx, run_split(ctx, d, s, v & GEMM_SWAP, g, p, stream, api), api, since);
    tl_arg args[20];
    int n = call_args(d, &c, g, args);
    return tli_fail_as(ctx, tl_launch(p, stream, n, args), api, since);
}

TL_API tl_status tl_op_gemm_ex(tl_ctx *ctx, const tl_gemm_desc *d, const tl_gemm_args *args, void *stream)
{
    return ctx ? run_gemm(ctx, d, args, stream, "tl_op_gemm_ex") : TL_ERR_INVALID_ARG;
}

TL_API tl_status tl_op_gemm(tl_ctx *ctx, const tl_gemm_desc *d, uint64_t a, uint64_t b, uint64_t bias, uint64_t c,
                            void *stream)
{
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    tl_gemm_args g = plain_args(a, b, bias, c);
    return run_gemm(ctx, d, &g, stream, "tl_op_gemm");
}
