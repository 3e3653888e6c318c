/* gemm_host.h - a GEMM on host buffers, run by the interpreter and checked
 * against a float64 loop: the CPU tier's check of tl_op_gemm's kernels with
 * B as [N, K] (test_gemv.c, 16-bit inputs; test_gemm_f8.c, 8-bit inputs
 * with per-tensor scales). */
#ifndef TILEC_TEST_GEMM_HOST_H
#define TILEC_TEST_GEMM_HOST_H

#include "util.h"

/* One problem: A [M, K], B [N, K] of in_dtype, the bias [N] (of in_dtype,
 * of the output's type for 8-bit inputs, as tl_op_gemm takes it), C
 * poisoned; g holds alpha and the scales (1 unless a test sets them). */
typedef struct host_gemm {
    tl_gemm_desc d;
    tl_gemm_args g;
    void *a, *b, *bias, *c;
} host_gemm;

static inline tl_dtype host_gemm_bias_dtype(const tl_gemm_desc *d)
{
    return tl_dtype_size(d->in_dtype) == 1 ? d->out_dtype : d->in_dtype;
}

static inline void host_gemm_init(host_gemm *p, int64_t m, int64_t n, int64_t k, tl_dtype in, tl_dtype out,
                                  uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->d = (tl_gemm_desc){.m = m, .n = n, .k = k, .in_dtype = in, .out_dtype = out, .trans_b = 1};
    p->g = tl_gemm_default_args();
    size_t in_size = tl_dtype_size(in), bias_size = tl_dtype_size(host_gemm_bias_dtype(&p->d));
    p->a = malloc((size_t)(m * k) * in_size);
    p->b = malloc((size_t)(n * k) * in_size);
    p->bias = malloc((size_t)n * bias_size);
    p->c = malloc((size_t)(m * n) * tl_dtype_size(out));
    assert_true(p->a && p->b && p->bias && p->c);
    /* uniform in [-1, 1] rounded to the type (8-bit: every code a finite number) */
    assert_status(tl_random_host(p->a, in, m * k, seed, -1, 1), TL_OK);
    assert_status(tl_random_host(p->b, in, n * k, seed + 1, -1, 1), TL_OK);
    assert_status(tl_random_host(p->bias, host_gemm_bias_dtype(&p->d), n, seed + 2, -1, 1), TL_OK);
    memset(p->c, 0xFF, (size_t)(m * n) * tl_dtype_size(out));
}

static inline void host_gemm_free(host_gemm *p) { free(p->a), free(p->b), free(p->bias), free(p->c); }

/* act(alpha scale_a scale_b A B^T + bias) in double (the scales' product
 * rounded to f32, as the kernel takes it). */
static inline double host_gemm_ref(const host_gemm *p, int64_t i, int64_t j)
{
    const tl_gemm_desc *d = &p->d;
    double acc = 0;
    for (int64_t k = 0; k < d->k; k++)
        acc += test_elem(d->in_dtype, p->a, i * d->k + k) * test_elem(d->in_dtype, p->b, j * d->k + k);
    double x = (double)(float)(p->g.alpha * p->g.scale_a * p->g.scale_b) * acc;
    if (d->has_bias)
        x += test_elem(host_gemm_bias_dtype(d), p->bias, j);
    return test_act(d->epilogue, x);
}

/* Interprets the op's kernel for p (the plain one when alpha and the
 * scales are 1, the strided one otherwise, with its documented arguments)
 * and checks C against host_gemm_ref. */
static inline void host_gemm_check(tl_ctx *c, host_gemm *p, const char *what)
{
    tl_kernel *k = NULL;
    p->g.a = (uint64_t)(uintptr_t)p->a, p->g.b = (uint64_t)(uintptr_t)p->b;
    p->g.c = (uint64_t)(uintptr_t)p->c, p->g.bias = p->d.has_bias ? (uint64_t)(uintptr_t)p->bias : 0;
    if (tl_op_gemm_ex_build(c, &p->d, &p->g, &k) != TL_OK)
        fail_msg("%s: tl_op_gemm_ex_build: %s", what, tl_ctx_error(c));
    const tl_gemm_desc *d = &p->d;
    float alpha = (float)(p->g.alpha * p->g.scale_a * p->g.scale_b);
    tl_arg args[20];
    int n = 0;
    args[n++] = tl_arg_int(d->m), args[n++] = tl_arg_int(d->n), args[n++] = tl_arg_int(d->k);
    if (alpha != 1.0f) { /* strided: batch, lda, ldb, ldc, strides, entries of A and B, alpha */
        args[n++] = tl_arg_int(1);
        args[n++] = tl_arg_int(d->k), args[n++] = tl_arg_int(d->k), args[n++] = tl_arg_int(d->n);
        args[n++] = tl_arg_int(d->m * d->k), args[n++] = tl_arg_int(d->n * d->k), args[n++] = tl_arg_int(d->m * d->n);
        args[n++] = tl_arg_int(1), args[n++] = tl_arg_int(1);
        args[n++] = tl_arg_float(alpha);
    }
    args[n++] = tl_arg_hptr(p->a), args[n++] = tl_arg_hptr(p->b);
    if (d->has_bias)
        args[n++] = tl_arg_hptr(p->bias);
    args[n++] = tl_arg_hptr(p->c);
    tl_status st = tl_interpret(k, n, args);
    tl_kernel_destroy(k);
    if (st != TL_OK)
        fail_msg("%s: tl_interpret: %s: %s", what, tl_status_name(st), tl_ctx_error(c));
    int64_t mn = d->m * d->n;
    double *want = malloc(sizeof(double) * (size_t)mn);
    assert_non_null(want);
    for (int64_t i = 0; i < d->m; i++)
        for (int64_t j = 0; j < d->n; j++)
            want[i * d->n + j] = host_gemm_ref(p, i, j);
    test_check_f64(NULL, what, d->out_dtype, p->c, want, mn, d->out_dtype == TL_F32 ? 1e-5 : 1e-2);
    free(want);
}

#endif
