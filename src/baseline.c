/*
 * baseline.c - the GEMM baseline through cuBLAS and cuBLASLt, for
 * benchmarks and as the reference of the GPU tests. The library's own
 * kernels never call it.
 *
 * cuBLAS is column-major; our matrices are row-major. A row-major [R, C]
 * matrix is, read as column-major, its transpose [C, R] with the same
 * leading dimension, so C = A B becomes C^T = B^T A^T: the operands swap
 * and nothing is copied. A plain GEMM goes to cublasGemmEx; a bias or an
 * activation goes to cublasLtMatmul with the matching epilogue, where the
 * swapped form also puts the bias where cuBLASLt wants it: along the rows
 * of the column-major D^T, which are our N columns. (cuBLASLt's row-major
 * layouts are no way round: it rejects them for bf16 in, f32 out with
 * GELU_BIAS on sm_90.)
 *
 * 8-bit float inputs (f8e4m3, f8e5m2) always go to cublasLtMatmul, cuBLAS's
 * FP8 entry point. Its FP8 kernels want A transposed and B not (the "TN"
 * form, column-major), which the swapped form gives exactly when our B is
 * [N, K]: both operands K-major, as our own FP8 kernels read them; B as
 * [K, N] is refused. The rows and pointers must be 16-byte aligned (for
 * FP8 cuBLASLt makes Tensor Core alignment a requirement). f32 compute and
 * scale, fast accumulation on (CUBLASLT_MATMUL_DESC_FAST_ACCUM 1): the
 * tensor cores' accumulator takes every k32 step's products, none of the
 * partial sums promoted to CUDA-core f32, which is how our kernels add
 * them, so the two compare like for like in speed and in error (its
 * default, 0, promotes them every few steps: slower, a little more
 * accurate). The
 * bias is of out_dtype, as tl_op_gemm's is for 8-bit inputs; cuBLASLt takes
 * that for bf16 and f16 outputs, and for an f32 output only a bf16 bias,
 * so an f32 output with a bias is refused. No operand scales: per-tensor
 * scales are alpha (scale_a scale_b), applied the same way.
 *
 * The handles, a 32 MiB cuBLASLt workspace and the last few cuBLASLt plans
 * (descriptors, layouts and the algorithm the heuristic chose) stay in the
 * context, so a timed loop pays for the heuristic once.
 */
#include "baseline.h"

#include "ctx.h"
#include "ir.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define LT_WORKSPACE_BYTES ((size_t)32 << 20)
#define MAX_PLANS 16

/* Values of cublasLt.h that cuda_api.h does not name. */
enum { LT_EPILOGUE_RELU_BIAS = CUBLASLT_EPILOGUE_RELU | CUBLASLT_EPILOGUE_BIAS };
enum { /* CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES */
    LT_PREF_MIN_ALIGNMENT_A = 5,
    LT_PREF_MIN_ALIGNMENT_B = 6,
    LT_PREF_MIN_ALIGNMENT_C = 7,
    LT_PREF_MIN_ALIGNMENT_D = 8
};

/* What a cuBLASLt plan depends on. Zeroed before it is filled, so that
 * memcmp sees no stray padding. */
typedef struct lt_key {
    int64_t m, n, k;
    int64_t lda, ldb, ldc, batch, stride_a, stride_b, stride_c;
    int32_t in_type, out_type;
    int32_t trans_b, has_bias;
    uint32_t epilogue;
    uint32_t align_a, align_b, align_c, align_bias;
} lt_key;

typedef struct lt_plan {
    bool used;
    lt_key key;
    uint64_t last_use;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc; /* cuBLASLt's A (our B), B (our A), C = D */
    cublasLtMatmulAlgo_t algo;
} lt_plan;

struct tli_baseline {
    const tli_cublas_api *api;
    cublasHandle_t blas;    /* NULL until the first plain GEMM   */
    cublasLtHandle_t lt;    /* NULL until the first epilogue     */
    uint64_t ws;            /* the cuBLASLt workspace            */
    size_t ws_bytes;
    lt_plan plans[MAX_PLANS];
    uint64_t clock;         /* plan use counter, for eviction    */
};

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

static const char *blas_status_name(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case 16: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

/* TL_ERR_CUDA naming the call and cuBLAS's status (and its description
 * when the library can give one); TL_OK for success. */
static tl_status blas_check(tl_ctx *ctx, const tli_cublas_api *api, cublasStatus_t s, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return TL_OK;
    const char *text = api->cublasGetStatusString ? api->cublasGetStatusString(s) : NULL;
    return tli_fail(ctx, TL_ERR_CUDA, "tl_baseline_gemm: %s failed: %s (%d)%s%s", what,
                    blas_status_name(s), s, text ? ": " : "", text ? text : "");
}

/* ------------------------------------------------------------------------ */
/* Arguments                                                                 */
/* ------------------------------------------------------------------------ */

static int cuda_type(tl_dtype dt)
{
    switch (dt) {
    case TL_F32: return CUDA_R_32F;
    case TL_F16: return CUDA_R_16F;
    case TL_BF16: return CUDA_R_16BF;
    case TL_F8E4M3: return CUDA_R_8F_E4M3;
    case TL_F8E5M2: return CUDA_R_8F_E5M2;
    default: return -1;
    }
}

/* cuda_type's inverse, for messages. */
static const char *cuda_type_name(int t)
{
    static const tl_dtype all[] = {TL_F32, TL_F16, TL_BF16, TL_F8E4M3, TL_F8E5M2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (cuda_type(all[i]) == t)
            return tl_dtype_name(all[i]);
    return "?";
}

static bool is_f8_type(int cuda) { return cuda == CUDA_R_8F_E4M3 || cuda == CUDA_R_8F_E5M2; }

/* The cuBLASLt epilogue for d, or 0 when there is none for it. */
static uint32_t lt_epilogue(const tl_gemm_desc *d)
{
    switch (d->epilogue) {
    case TL_EPI_NONE: return d->has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    case TL_EPI_RELU: return d->has_bias ? LT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case TL_EPI_GELU_TANH: return d->has_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    default: return 0;
    }
}

/* A call's operands with the defaults filled in (lds of 0: dense). */
typedef struct call {
    int64_t lda, ldb, ldc, batch;
    bool arrays;
} call;

/* What cuBLASLt's FP8 GEMM asks beyond the others (cublasLtMatmul's FP8
 * requirements): the "TN" form, which is B as [N, K] here; every row,
 * batch stride and pointer 16-byte aligned; no pointer-array batch (a
 * cuBLASLt call); and for an f32 output a bf16 bias, where ours is of
 * out_dtype. Checked before any GPU call, so the refusals are the same
 * without one. */
static tl_status check_f8(tl_ctx *ctx, const tl_gemm_desc *d, const tl_gemm_args *g, const call *c)
{
    const char *in = tl_dtype_name(d->in_dtype);
    if (!d->trans_b)
        return tli_fail(ctx, TL_ERR_UNSUPPORTED, "tl_baseline_gemm: cuBLASLt's %s GEMM reads B as [N, K] only "
                        "(trans_b = 1: its \"TN\" form), not as [K, N]", in);
    if (c->arrays)
        return tli_fail(ctx, TL_ERR_UNSUPPORTED, "tl_baseline_gemm: an %s GEMM goes to cuBLASLt, which has no "
                        "pointer-array batch", in);
    if (d->has_bias && d->out_dtype == TL_F32)
        return tli_fail(ctx, TL_ERR_UNSUPPORTED, "tl_baseline_gemm: cuBLASLt's %s GEMM with an f32 output reads "
                        "a bf16 bias, not the f32 one (of out_dtype) an 8-bit GEMM takes", in);
    if (d->m == 0 || d->n == 0)
        return TL_OK; /* nothing is read or written */
    int64_t osz = (int64_t)tl_dtype_size(d->out_dtype);
    bool batch = c->batch > 1, reads = d->k > 0; /* K = 0 reads neither A nor B */
    const struct { const char *what; int64_t n, size; } rows[] = {
        {"K", d->k, 1}, {"lda", reads ? c->lda : 0, 1}, {"ldb", reads ? c->ldb : 0, 1}, {"N", d->n, osz},
        {"ldc", c->ldc, osz}, {"stride_a", batch && reads ? g->stride_a : 0, 1},
        {"stride_b", batch && reads ? g->stride_b : 0, 1}, {"stride_c", batch ? g->stride_c : 0, osz},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].n * rows[i].size % 16)
            return tli_fail(ctx, TL_ERR_UNSUPPORTED, "tl_baseline_gemm: cuBLASLt's %s GEMM needs rows and batch "
                            "strides of a multiple of 16 bytes: %s = %lld (elements of %lld bytes) is not", in,
                            rows[i].what, (long long)rows[i].n, (long long)rows[i].size);
    const struct { const char *what; uint64_t p; } ptrs[] = {{"a", g->a}, {"b", g->b}, {"c", g->c}};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        if (ptrs[i].p % 16)
            return tli_fail(ctx, TL_ERR_UNSUPPORTED, "tl_baseline_gemm: cuBLASLt's %s GEMM needs 16-byte aligned "
                            "pointers: %s = 0x%llx is not", in, ptrs[i].what, (unsigned long long)ptrs[i].p);
    return TL_OK;
}

static tl_status check_call(tl_ctx *ctx, const tl_gemm_desc *d, const tl_gemm_args *g, call *c)
{
    if (d->m < 0 || d->n < 0 || d->k < 0 || d->m > INT_MAX || d->n > INT_MAX || d->k > INT_MAX)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_baseline_gemm: m = %lld, n = %lld, k = %lld must "
                        "be in 0..%d", (long long)d->m, (long long)d->n, (long long)d->k, INT_MAX);
    if (d->in_dtype != TL_BF16 && d->in_dtype != TL_F16 && !tli_dtype_is_f8(d->in_dtype))
        return tli_fail(ctx, TL_ERR_DTYPE, "tl_baseline_gemm: in_dtype %s is not bf16, f16, f8e4m3 or f8e5m2",
                        tl_dtype_name(d->in_dtype));
    if (d->out_dtype != TL_BF16 && d->out_dtype != TL_F16 && d->out_dtype != TL_F32)
        return tli_fail(ctx, TL_ERR_DTYPE, "tl_baseline_gemm: out_dtype %s is not bf16, f16 or f32",
                        tl_dtype_name(d->out_dtype));
    if (!tli_dtype_is_f8(d->in_dtype) && d->out_dtype != d->in_dtype && d->out_dtype != TL_F32)
        return tli_fail(ctx, TL_ERR_UNSUPPORTED, "tl_baseline_gemm: cuBLAS has no %s x %s -> %s GEMM "
                        "(the output is the input type or f32)", tl_dtype_name(d->in_dtype),
                        tl_dtype_name(d->in_dtype), tl_dtype_name(d->out_dtype));
    if (d->epilogue == TL_EPI_GELU_ERF)
        return tli_fail(ctx, TL_ERR_UNSUPPORTED, "tl_baseline_gemm: cuBLASLt has no erf GELU epilogue "
                        "(its GELU is the tanh form: use TL_EPI_GELU_TANH)");
    if (lt_epilogue(d) == 0)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_baseline_gemm: unknown epilogue %d", (int)d->epilogue);
    if (d->has_bias && !g->bias)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_baseline_gemm: has_bias is set but bias is 0");
    /* cuBLAS wants ld >= 1 even for an empty row */
    const int64_t rows[3] = {d->k, d->trans_b ? d->k : d->n, d->n}, lds[3] = {g->lda, g->ldb, g->ldc};
    int64_t *out[3] = {&c->lda, &c->ldb, &c->ldc};
    for (int i = 0; i < 3; i++) {
        int64_t row = rows[i] > 1 ? rows[i] : 1;
        if (lds[i] < 0 || (lds[i] && lds[i] < row) || lds[i] > INT_MAX)
            return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_baseline_gemm: ld%c = %lld is not 0 or in %lld..%d",
                            "abc"[i], (long long)lds[i], (long long)row, INT_MAX);
        *out[i] = lds[i] ? lds[i] : row;
    }
    if (g->batch < 1 || g->batch > INT_MAX)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_baseline_gemm: batch = %lld is outside 1..%d",
                        (long long)g->batch, INT_MAX);
    c->batch = g->batch;
    c->arrays = g->a_array || g->b_array || g->c_array;
    if (c->arrays && (!g->a_array || !g->b_array || !g->c_array || g->a || g->b || g->c))
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_baseline_gemm: a pointer-array batch takes a_array, "
                        "b_array and c_array, and a, b, c of 0");
    if (g->stride_a < 0 || g->stride_b < 0 || g->stride_c < 0)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_baseline_gemm: a negative batch stride");
    bool empty = d->m == 0 || d->n == 0;
    if (!empty && !c->arrays && (!g->c || (d->k > 0 && (!g->a || !g->b))))
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_baseline_gemm: a null device pointer (%s)",
                        !g->c ? "c" : !g->a ? "a" : "b");
    return tli_dtype_is_f8(d->in_dtype) ? check_f8(ctx, d, g, c) : TL_OK;
}

/* The largest power of two (up to 256) that divides p: what cuBLASLt's
 * heuristic must assume about the pointer's alignment. */
static uint32_t ptr_alignment(uint64_t p)
{
    uint32_t al = 256;
    while (al > 1 && p % al)
        al /= 2;
    return al;
}

/* ------------------------------------------------------------------------ */
/* State                                                                     */
/* ------------------------------------------------------------------------ */

/* Loads the libraries and makes the state, with the context current. */
static tl_status begin(tl_ctx *ctx, struct tli_baseline **out)
{
    if (!ctx->has_device)
        return tli_fail(ctx, TL_ERR_NO_DEVICE, "tl_baseline_gemm: the context has no device (it was "
                        "created with TL_NO_DEVICE)");
    const tli_cublas_api *api = NULL;
    char msg[1024];
    tl_status st = tli_load_cublas(&api, msg, sizeof msg);
    if (st != TL_OK)
        return tli_fail(ctx, st, "tl_baseline_gemm: %s", msg);
    if ((st = tli_ctx_bind(ctx)) != TL_OK)
        return st;
    if (!ctx->baseline) {
        ctx->baseline = calloc(1, sizeof *ctx->baseline);
        if (!ctx->baseline)
            return tli_fail(ctx, TL_ERR_OUT_OF_MEMORY, "tl_baseline_gemm: out of host memory");
        ctx->baseline->api = api;
    }
    *out = ctx->baseline;
    return TL_OK;
}

static tl_status need_blas(tl_ctx *ctx, struct tli_baseline *s)
{
    if (s->blas)
        return TL_OK;
    return blas_check(ctx, s->api, s->api->cublasCreate(&s->blas), "cublasCreate");
}

static tl_status need_lt(tl_ctx *ctx, struct tli_baseline *s)
{
    tl_status st = TL_OK;
    if (!s->lt)
        st = blas_check(ctx, s->api, s->api->cublasLtCreate(&s->lt), "cublasLtCreate");
    if (st == TL_OK && !s->ws) {
        st = tl_malloc(ctx, LT_WORKSPACE_BYTES, &s->ws);
        s->ws_bytes = st == TL_OK ? LT_WORKSPACE_BYTES : 0;
    }
    return st;
}

static void plan_destroy(const tli_cublas_api *api, lt_plan *p)
{
    if (p->op)
        api->cublasLtMatmulDescDestroy(p->op);
    if (p->la)
        api->cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb)
        api->cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc)
        api->cublasLtMatrixLayoutDestroy(p->lc);
    memset(p, 0, sizeof *p);
}

void tli_baseline_release(tl_ctx *ctx)
{
    struct tli_baseline *s = ctx ? ctx->baseline : NULL;
    if (!s)
        return;
    /* The handles and the workspace belong to the device context: destroy
     * them while it is current. */
    if (tli_ctx_bind(ctx) == TL_OK) {
        for (int i = 0; i < MAX_PLANS; i++)
            plan_destroy(s->api, &s->plans[i]);
        if (s->lt)
            s->api->cublasLtDestroy(s->lt);
        if (s->blas)
            s->api->cublasDestroy(s->blas);
        if (s->ws)
            ctx->cu->cuMemFree(s->ws);
    }
    free(s);
    ctx->baseline = NULL;
}

/* ------------------------------------------------------------------------ */
/* cublasGemmEx: no bias, no activation                                      */
/* ------------------------------------------------------------------------ */

/* Row-major C[M,N] = A[M,K] B as column-major C^T[N,M] = op(B) A^T, where
 * A^T is A's memory read column-major ([K,M], ld lda) and op(B) is B's
 * memory [N,K] with ld ldb (B given [K,N]) or its transpose (B given
 * [N,K]). A batch goes to cublasGemmStridedBatchedEx or, with arrays of
 * pointers, to cublasGemmBatchedEx, with the same swap. */
static tl_status gemm_plain(tl_ctx *ctx, struct tli_baseline *s, const tl_gemm_desc *d, const tl_gemm_args *g,
                            const call *c, void *stream)
{
    const tli_cublas_api *api = s->api;
    tl_status st = need_blas(ctx, s);
    if (st == TL_OK)
        st = blas_check(ctx, api, api->cublasSetStream(s->blas, (CUstream)stream), "cublasSetStream");
    if (st != TL_OK)
        return st;
    int m = (int)d->m, n = (int)d->n, k = (int)d->k, batch = (int)c->batch;
    int lda = (int)c->lda, ldb = (int)c->ldb, ldc = (int)c->ldc;
    int in = cuda_type(d->in_dtype), out = cuda_type(d->out_dtype), tb = d->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const float alpha = (float)g->alpha, beta = (float)g->beta;
    if (c->arrays) {
        if (!api->cublasGemmBatchedEx)
            return tli_fail(ctx, TL_ERR_UNSUPPORTED, "tl_baseline_gemm: this cuBLAS has no cublasGemmBatchedEx");
        return blas_check(ctx, api,
                          api->cublasGemmBatchedEx(s->blas, tb, CUBLAS_OP_N, n, m, k, &alpha,
                                                   (const void *const *)(uintptr_t)g->b_array, in, ldb,
                                                   (const void *const *)(uintptr_t)g->a_array, in, lda, &beta,
                                                   (void *const *)(uintptr_t)g->c_array, out, ldc, batch,
                                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                          "cublasGemmBatchedEx");
    }
    if (batch > 1) {
        if (!api->cublasGemmStridedBatchedEx)
            return tli_fail(ctx, TL_ERR_UNSUPPORTED, "tl_baseline_gemm: this cuBLAS has no "
                            "cublasGemmStridedBatchedEx");
        return blas_check(ctx, api,
                          api->cublasGemmStridedBatchedEx(s->blas, tb, CUBLAS_OP_N, n, m, k, &alpha,
                                                          (const void *)(uintptr_t)g->b, in, ldb, g->stride_b,
                                                          (const void *)(uintptr_t)g->a, in, lda, g->stride_a,
                                                          &beta, (void *)(uintptr_t)g->c, out, ldc, g->stride_c,
                                                          batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                          "cublasGemmStridedBatchedEx");
    }
    return blas_check(ctx, api,
                      api->cublasGemmEx(s->blas, tb, CUBLAS_OP_N, n, m, k, &alpha, (const void *)(uintptr_t)g->b, in,
                                        ldb, (const void *)(uintptr_t)g->a, in, lda, &beta, (void *)(uintptr_t)g->c,
                                        out, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                      "cublasGemmEx");
}

/* ------------------------------------------------------------------------ */
/* cublasLtMatmul: the epilogues                                             */
/* ------------------------------------------------------------------------ */

static lt_key make_key(const tl_gemm_desc *d, const tl_gemm_args *g, const call *c)
{
    lt_key key;
    memset(&key, 0, sizeof key);
    key.m = d->m;
    key.n = d->n;
    key.k = d->k;
    key.lda = c->lda;
    key.ldb = c->ldb;
    key.ldc = c->ldc;
    key.batch = c->batch;
    if (c->batch > 1) {
        key.stride_a = g->stride_a;
        key.stride_b = g->stride_b;
        key.stride_c = g->stride_c;
    }
    key.in_type = cuda_type(d->in_dtype);
    key.out_type = cuda_type(d->out_dtype);
    key.trans_b = d->trans_b != 0;
    key.has_bias = d->has_bias != 0;
    key.epilogue = lt_epilogue(d);
    key.align_a = ptr_alignment(g->a);
    key.align_b = ptr_alignment(g->b);
    key.align_c = ptr_alignment(g->c);
    key.align_bias = d->has_bias ? ptr_alignment(g->bias) : 0;
    return key;
}

static tl_status set_op_attr(tl_ctx *ctx, const tli_cublas_api *api, lt_plan *p, int attr, const void *v,
                             size_t size)
{
    return blas_check(ctx, api, api->cublasLtMatmulDescSetAttribute(p->op, attr, v, size),
                      "cublasLtMatmulDescSetAttribute");
}

/* The matmul descriptor: f32 compute and scale, the transposes of the
 * swapped form, the epilogue and its bias; for 8-bit inputs fast
 * accumulation (as our kernels add). */
static tl_status plan_desc(tl_ctx *ctx, const tli_cublas_api *api, lt_plan *p, uint64_t bias)
{
    const lt_key *key = &p->key;
    bool f8 = is_f8_type(key->in_type);
    tl_status st = blas_check(ctx, api, api->cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                              "cublasLtMatmulDescCreate");
    int32_t ta = key->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    uint32_t epi = key->epilogue;
    if (st == TL_OK)
        st = set_op_attr(ctx, api, p, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    if (st == TL_OK)
        st = set_op_attr(ctx, api, p, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (st == TL_OK)
        st = set_op_attr(ctx, api, p, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (st == TL_OK && f8) { /* as our kernels accumulate (see the top of the file) */
        int8_t fast = 1;
        st = set_op_attr(ctx, api, p, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast);
    }
    if (st == TL_OK && key->has_bias) {
        /* The heuristic reads the pointer for its alignment. */
        const void *ptr = (const void *)(uintptr_t)bias;
        st = set_op_attr(ctx, api, p, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ptr, sizeof ptr);
        /* cuBLASLt's bias defaults to the output type; ours is the input's,
         * or the output's for 8-bit inputs (said, since FP8's default is
         * not always the output type). */
        int32_t bias_type = f8 ? key->out_type : key->in_type;
        if (st == TL_OK && (f8 || key->out_type != key->in_type))
            st = set_op_attr(ctx, api, p, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type);
    }
    return st;
}

/* A column-major layout of rows x cols with leading dimension ld, and
 * for a batch its count and the elements between its matrices. */
static tl_status make_layout(tl_ctx *ctx, const tli_cublas_api *api, cublasLtMatrixLayout_t *l, int type,
                             int64_t rows, int64_t cols, int64_t ld, const lt_key *key, int64_t stride)
{
    tl_status st = blas_check(ctx, api, api->cublasLtMatrixLayoutCreate(l, type, (uint64_t)rows, (uint64_t)cols, ld),
                              "cublasLtMatrixLayoutCreate");
    int32_t batch = (int32_t)key->batch;
    if (st == TL_OK && batch > 1)
        st = blas_check(ctx, api, api->cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                                                        sizeof batch),
                        "cublasLtMatrixLayoutSetAttribute");
    if (st == TL_OK && batch > 1)
        st = blas_check(ctx, api,
                        api->cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                              sizeof stride),
                        "cublasLtMatrixLayoutSetAttribute");
    return st;
}

/* Column-major layouts of the swapped form: D^T[N,M] = op(B^T) A^T. */
static tl_status plan_layouts(tl_ctx *ctx, const tli_cublas_api *api, lt_plan *p)
{
    const lt_key *key = &p->key;
    int bt = key->in_type;
    tl_status st = key->trans_b ? make_layout(ctx, api, &p->la, bt, key->k, key->n, key->ldb, key, key->stride_b)
                                : make_layout(ctx, api, &p->la, bt, key->n, key->k, key->ldb, key, key->stride_b);
    if (st == TL_OK)
        st = make_layout(ctx, api, &p->lb, key->in_type, key->k, key->m, key->lda, key, key->stride_a);
    if (st == TL_OK)
        st = make_layout(ctx, api, &p->lc, key->out_type, key->n, key->m, key->ldc, key, key->stride_c);
    return st;
}

static tl_status set_pref(tl_ctx *ctx, const tli_cublas_api *api, cublasLtMatmulPreference_t pref, int attr,
                          const void *v, size_t size)
{
    return blas_check(ctx, api, api->cublasLtMatmulPreferenceSetAttribute(pref, attr, v, size),
                      "cublasLtMatmulPreferenceSetAttribute");
}

/* The heuristic's first choice within our workspace, for pointers aligned
 * as these are. */
static tl_status plan_algo(tl_ctx *ctx, struct tli_baseline *s, lt_plan *p)
{
    const tli_cublas_api *api = s->api;
    const lt_key *key = &p->key;
    cublasLtMatmulPreference_t pref = NULL;
    tl_status st = blas_check(ctx, api, api->cublasLtMatmulPreferenceCreate(&pref),
                              "cublasLtMatmulPreferenceCreate");
    uint64_t ws = s->ws_bytes;
    /* cuBLASLt's A is our B, its B our A; C and D are both our C. */
    const uint32_t al[4] = {key->align_b, key->align_a, key->align_c, key->align_c};
    const int al_attr[4] = {LT_PREF_MIN_ALIGNMENT_A, LT_PREF_MIN_ALIGNMENT_B, LT_PREF_MIN_ALIGNMENT_C,
                            LT_PREF_MIN_ALIGNMENT_D};
    if (st == TL_OK)
        st = set_pref(ctx, api, pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    for (int i = 0; i < 4 && st == TL_OK; i++)
        st = set_pref(ctx, api, pref, al_attr[i], &al[i], sizeof al[i]);
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    int returned = 0;
    cublasStatus_t bs = CUBLAS_STATUS_SUCCESS;
    if (st == TL_OK)
        bs = api->cublasLtMatmulAlgoGetHeuristic(s->lt, p->op, p->la, p->lb, p->lc, p->lc, pref, 1, &res,
                                                 &returned);
    if (pref)
        api->cublasLtMatmulPreferenceDestroy(pref);
    if (st != TL_OK)
        return st;
    /* a batch that shares A or B (stride 0): cuBLASLt's heuristic answers INVALID_VALUE on the H200
     * (CUDA 13), i.e. it has no algorithm for it; so may an FP8 combination of types and epilogue
     * it does not offer (E5M2 x E5M2 is documented as none) */
    bool shared = key->batch > 1 && (key->stride_a == 0 || key->stride_b == 0);
    bool f8 = is_f8_type(key->in_type);
    if (bs == CUBLAS_STATUS_NOT_SUPPORTED || (bs == CUBLAS_STATUS_INVALID_VALUE && (shared || f8)) ||
        (bs == CUBLAS_STATUS_SUCCESS && returned < 1))
        return tli_fail(ctx, TL_ERR_UNSUPPORTED, "tl_baseline_gemm: cuBLASLt has no algorithm for %lld x %lld "
                        "x %lld, %s in, %s out, %s, epilogue %u%s (cublasLtMatmulAlgoGetHeuristic: %s)%s",
                        (long long)key->m, (long long)key->n, (long long)key->k, cuda_type_name(key->in_type),
                        cuda_type_name(key->out_type), key->trans_b ? "B as [N,K]" : "B as [K,N]", key->epilogue,
                        key->has_bias ? " with bias" : "", blas_status_name(bs),
                        key->in_type == CUDA_R_8F_E5M2 ? "; cuBLASLt documents no E5M2 x E5M2 GEMM" : "");
    if ((st = blas_check(ctx, api, bs, "cublasLtMatmulAlgoGetHeuristic")) != TL_OK)
        return st;
    p->algo = res.algo;
    return TL_OK;
}

/* The cached plan for key, made (evicting the least recently used) when
 * there is none. */
static tl_status get_plan(tl_ctx *ctx, struct tli_baseline *s, const lt_key *key, uint64_t bias, lt_plan **out)
{
    lt_plan *victim = NULL; /* a free slot, else the least recently used */
    s->clock++;
    for (int i = 0; i < MAX_PLANS; i++) {
        lt_plan *p = &s->plans[i];
        if (p->used && memcmp(&p->key, key, sizeof *key) == 0) {
            p->last_use = s->clock;
            *out = p;
            return TL_OK;
        }
        if (!victim || (victim->used && (!p->used || p->last_use < victim->last_use)))
            victim = p;
    }
    plan_destroy(s->api, victim);
    victim->key = *key;
    tl_status st = plan_desc(ctx, s->api, victim, bias);
    if (st == TL_OK)
        st = plan_layouts(ctx, s->api, victim);
    if (st == TL_OK)
        st = plan_algo(ctx, s, victim);
    if (st != TL_OK) {
        plan_destroy(s->api, victim);
        return st;
    }
    victim->used = true;
    victim->last_use = s->clock;
    *out = victim;
    return TL_OK;
}

static tl_status gemm_lt(tl_ctx *ctx, struct tli_baseline *s, const tl_gemm_desc *d, const tl_gemm_args *g,
                         const call *cl, void *stream)
{
    const tli_cublas_api *api = s->api;
    if (cl->arrays)
        return tli_fail(ctx, TL_ERR_UNSUPPORTED, "tl_baseline_gemm: cuBLASLt has no pointer-array batch (a bias "
                        "or an activation with a_array)");
    tl_status st = need_lt(ctx, s);
    if (st != TL_OK)
        return st;
    uint64_t a = g->a, b = g->b, c = g->c, bias = d->has_bias ? g->bias : 0;
    lt_key key = make_key(d, g, cl);
    lt_plan *p = NULL;
    if ((st = get_plan(ctx, s, &key, bias, &p)) != TL_OK)
        return st;
    if (d->has_bias) {
        const void *ptr = (const void *)(uintptr_t)bias;
        if ((st = set_op_attr(ctx, api, p, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ptr, sizeof ptr)) != TL_OK)
            return st;
    }
    const float alpha = (float)g->alpha, beta = (float)g->beta;
    return blas_check(ctx, api,
                      api->cublasLtMatmul(s->lt, p->op, &alpha, (const void *)(uintptr_t)b, p->la,
                                          (const void *)(uintptr_t)a, p->lb, &beta, (const void *)(uintptr_t)c,
                                          p->lc, (void *)(uintptr_t)c, p->lc, &p->algo, (void *)(uintptr_t)s->ws,
                                          s->ws_bytes, (CUstream)stream),
                      "cublasLtMatmul");
}

/* ------------------------------------------------------------------------ */
/* Entry point                                                               */
/* ------------------------------------------------------------------------ */

/* Both entry points; the messages name tl_baseline_gemm. */
static tl_status run_baseline(tl_ctx *ctx, const tl_gemm_desc *d, const tl_gemm_args *args, void *stream)
{
    if (!d || !args)
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_baseline_gemm: %s is NULL", !d ? "d" : "args");
    call c;
    tl_status st = check_call(ctx, d, args, &c);
    struct tli_baseline *s = NULL;
    if (st == TL_OK)
        st = begin(ctx, &s);
    if (st != TL_OK || d->m == 0 || d->n == 0)
        return st;
    if (!d->has_bias && d->epilogue == TL_EPI_NONE && !tli_dtype_is_f8(d->in_dtype))
        return gemm_plain(ctx, s, d, args, &c, stream);
    return gemm_lt(ctx, s, d, args, &c, stream);
}

TL_API tl_status tl_baseline_gemm_ex(tl_ctx *ctx, const tl_gemm_desc *d, const tl_gemm_args *args, void *stream)
{
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    unsigned since = tli_fail_count();
    return tli_fail_as(ctx, run_baseline(ctx, d, args, stream), "tl_baseline_gemm_ex", since);
}

TL_API tl_status tl_baseline_gemm(tl_ctx *ctx, const tl_gemm_desc *d, uint64_t a, uint64_t b, uint64_t bias,
                                  uint64_t c, void *stream)
{
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    tl_gemm_args g = tl_gemm_default_args();
    g.a = a, g.b = b, g.bias = bias, g.c = c;
    return run_baseline(ctx, d, &g, stream);
}
