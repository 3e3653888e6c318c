/* rows_ref.h - the row-wise ops' test helpers, shared by the CPU tier
 * (test_softmax.c, through the interpreter) and the GPU tier
 * (test_gpu_softmax.c): strided host rows, float64 references of the
 * softmax and RMSNorm, and a comparison that also checks that nothing but
 * the first cols elements of each output row was written. */
#ifndef TILEC_TEST_ROWS_REF_H
#define TILEC_TEST_ROWS_REF_H

#include "util.h"

#include <math.h>

typedef struct row_case {
    int64_t rows, cols, ld_in, ld_out;
    tl_dtype in, out;
    tl_softmax_schedule sched; /* zeros: the default */
    double tol;                /* of tl_check, from the output type */
} row_case;

static inline row_case row_case_make(int64_t rows, int64_t cols, tl_dtype in, tl_dtype out)
{
    row_case c = {.rows = rows, .cols = cols, .ld_in = cols, .ld_out = cols, .in = in, .out = out};
    c.tol = out == TL_F32 ? 1e-5 : out == TL_F16 ? 1e-3 : 8e-3; /* a few roundings of the output */
    return c;
}

static inline void *row_alloc_random(int64_t rows, int64_t ld, tl_dtype dt, uint64_t seed, double lo, double hi)
{
    void *p = malloc(tl_dtype_size(dt) * (size_t)(rows * ld));
    assert_non_null(p);
    tl_random_host(p, dt, rows * ld, seed, lo, hi);
    return p;
}

/* All bytes 0xFF: NaN in f32, f16 and bf16. */
static inline void *row_alloc_poisoned(int64_t rows, int64_t ld, tl_dtype dt)
{
    size_t bytes = tl_dtype_size(dt) * (size_t)(rows * ld);
    void *p = malloc(bytes ? bytes : 1);
    assert_non_null(p);
    memset(p, 0xFF, bytes);
    return p;
}

/* x[i, j] = v, rounded to the input type. */
static inline void row_put(const row_case *c, void *x, int64_t i, int64_t j, double v)
{
    int64_t at = i * c->ld_in + j;
    if (c->in == TL_F32)
        ((float *)x)[at] = (float)v;
    else
        ((uint16_t *)x)[at] = c->in == TL_F16 ? tl_f32_to_f16((float)v) : tl_f32_to_bf16((float)v);
}

/* softmax of each row in double, [rows, cols] packed: a row of -inf
 * gives zeros, as the op documents. */
static inline double *row_softmax_ref(const row_case *c, const void *x)
{
    double *ref = malloc(8 * (size_t)(c->rows * c->cols));
    for (int64_t i = 0; i < c->rows; i++) {
        const int64_t at = i * c->ld_in;
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < c->cols; j++)
            m = fmax(m, test_elem(c->in, x, at + j));
        for (int64_t j = 0; j < c->cols; j++)
            s += m == -INFINITY ? 0 : exp(test_elem(c->in, x, at + j) - m);
        for (int64_t j = 0; j < c->cols; j++)
            ref[i * c->cols + j] = m == -INFINITY ? 0 : exp(test_elem(c->in, x, at + j) - m) / s;
    }
    return ref;
}

static inline double *row_rmsnorm_ref(const row_case *c, const void *x, const void *w, double eps)
{
    double *ref = malloc(8 * (size_t)(c->rows * c->cols));
    for (int64_t i = 0; i < c->rows; i++) {
        double ss = 0;
        for (int64_t j = 0; j < c->cols; j++)
            ss += test_elem(c->in, x, i * c->ld_in + j) * test_elem(c->in, x, i * c->ld_in + j);
        double r = 1 / sqrt(ss / (double)c->cols + eps);
        for (int64_t j = 0; j < c->cols; j++)
            ref[i * c->cols + j] = test_elem(c->in, x, i * c->ld_in + j) * r * test_elem(c->in, w, j);
    }
    return ref;
}

/* y (rows of ld_out elements of the output type) against ref: no NaN or
 * infinity, exact zeros where ref is 0, tl_check within c->tol, and the
 * padding of each row (columns cols..ld_out-1) still poisoned. */
static inline void row_compare(const row_case *c, const char *what, const void *y, const double *ref)
{
    int64_t n = c->rows * c->cols;
    double *got = malloc(8 * (size_t)(n ? n : 1));
    size_t sz = tl_dtype_size(c->out);
    for (int64_t i = 0; i < c->rows; i++) {
        for (int64_t j = 0; j < c->cols; j++) {
            double g = got[i * c->cols + j] = test_elem(c->out, y, i * c->ld_out + j);
            if (ref[i * c->cols + j] == 0 && g != 0)
                fail_msg("%s %lldx%lld %s->%s: y[%lld, %lld] = %g, want 0", what, (long long)c->rows,
                         (long long)c->cols, tl_dtype_name(c->in), tl_dtype_name(c->out), (long long)i, (long long)j, g);
        }
        const unsigned char *pad = (const unsigned char *)y + sz * (size_t)(i * c->ld_out + c->cols);
        for (size_t b = 0; b < sz * (size_t)(c->ld_out - c->cols); b++)
            if (pad[b] != 0xFF)
                fail_msg("%s: row %lld written past its %lld columns", what, (long long)i, (long long)c->cols);
    }
    tl_span out = {.dtype = TL_F64, .n = n, .host = got}, r = {.dtype = TL_F64, .n = n, .host = ref};
    tl_check_result res;
    assert_status(tl_check(NULL, &out, &r, c->tol, &res), TL_OK);
    if (!res.pass)
        fail_msg("%s %lldx%lld (ld %lld/%lld) %s->%s width %d: rel err %.3g, %lld non-finite, first bad %lld "
                 "(y = %g, want %g)", what, (long long)c->rows, (long long)c->cols, (long long)c->ld_in,
                 (long long)c->ld_out, tl_dtype_name(c->in), tl_dtype_name(c->out), c->sched.width, res.rel_err,
                 (long long)res.nonfinite, (long long)res.first_bad, res.first_bad >= 0 ? got[res.first_bad] : 0.0,
                 res.first_bad >= 0 ? ref[res.first_bad] : 0.0);
    free(got);
}

#endif
