/* attn_ref.h - a float64 reference of attention for the CPU and GPU tiers:
 * O = softmax(scale Q K^T [+ causal mask]) V per (batch, head), Q/K/V/O as
 * 16-bit host arrays with [batch, head, seq] strides (the head_dim stride
 * is 1), K/V heads shared by heads / kv_heads query heads, the causal mask
 * aligned bottom-right (query i sees key j <= i + seq_kv - seq_q), rows
 * with no key giving zeros and a log-sum-exp of -inf. */
#ifndef TILEC_TEST_ATTN_REF_H
#define TILEC_TEST_ATTN_REF_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

typedef struct attn_case {
    int64_t b, h, hkv, sq, skv, d;
    int causal;
    double scale;       /* 0: 1 / sqrt(d) */
    int bshd;           /* 1: [B, S, H, D] layout (strides), else [B, H, S, D] */
    tl_dtype dt;
} attn_case;

/* Strides of a tensor of `heads` heads and `seq` rows in the case's layout. */
static inline void attn_strides(const attn_case *c, int64_t heads, int64_t seq, int64_t st[3])
{
    if (c->bshd) {
        st[2] = heads * c->d; /* sequence */
        st[1] = c->d;         /* head */
        st[0] = seq * heads * c->d;
    } else {
        st[2] = c->d;
        st[1] = seq * c->d;
        st[0] = heads * seq * c->d;
    }
}

static inline int64_t attn_elems(const attn_case *c, int64_t heads, int64_t seq) { return c->b * heads * seq * c->d; }

static inline double attn_scale(const attn_case *c) { return c->scale ? c->scale : 1.0 / sqrt((double)c->d); }

/* Fills o (float64, [b, h, sq, d] contiguous) and lse ([b, h, sq]). */
static inline void attn_reference(const attn_case *c, const void *q, const void *k, const void *v, double *o,
                                  double *lse)
{
    int64_t qs[3], ks[3];
    attn_strides(c, c->h, c->sq, qs);
    attn_strides(c, c->hkv, c->skv, ks);
    double scale = attn_scale(c);
    double *p = malloc(sizeof(double) * (size_t)(c->skv ? c->skv : 1));
    for (int64_t b = 0; b < c->b; b++)
        for (int64_t h = 0; h < c->h; h++) {
            int64_t hk = h / (c->h / c->hkv);
            for (int64_t i = 0; i < c->sq; i++) {
                double m = -INFINITY;
                int64_t last = c->causal ? i + c->skv - c->sq : c->skv - 1;
                for (int64_t j = 0; j < c->skv; j++) {
                    p[j] = -INFINITY;
                    if (j > last)
                        continue;
                    double s = 0;
                    for (int64_t e = 0; e < c->d; e++)
                        s += test_elem(c->dt, q, b * qs[0] + h * qs[1] + i * qs[2] + e) *
                             test_elem(c->dt, k, b * ks[0] + hk * ks[1] + j * ks[2] + e);
                    p[j] = s * scale;
                    m = p[j] > m ? p[j] : m;
                }
                double l = 0;
                for (int64_t j = 0; j < c->skv; j++) {
                    p[j] = m == -INFINITY ? 0 : exp(p[j] - m);
                    l += p[j];
                }
                double *out = o + ((b * c->h + h) * c->sq + i) * c->d;
                for (int64_t e = 0; e < c->d; e++) {
                    double acc = 0;
                    for (int64_t j = 0; j < c->skv; j++)
                        if (p[j] != 0)
                            acc += p[j] * test_elem(c->dt, v, b * ks[0] + hk * ks[1] + j * ks[2] + e);
                    out[e] = l > 0 ? acc / l : 0;
                }
                if (lse)
                    lse[(b * c->h + h) * c->sq + i] = l > 0 ? m + log(l) : -INFINITY;
            }
        }
    free(p);
}

/* Norm-wise relative error of n values of out (dtype dt, [b, h, sq, d] in
 * the case's layout) against ref ([b, h, sq, d] contiguous). */
static inline double attn_rel_err(const attn_case *c, const void *out, const double *ref, int64_t *nonfinite)
{
    int64_t os[3];
    attn_strides(c, c->h, c->sq, os);
    double num = 0, den = 0;
    *nonfinite = 0;
    for (int64_t b = 0; b < c->b; b++)
        for (int64_t h = 0; h < c->h; h++)
            for (int64_t i = 0; i < c->sq; i++)
                for (int64_t e = 0; e < c->d; e++) {
                    double x = test_elem(c->dt, out, b * os[0] + h * os[1] + i * os[2] + e);
                    double r = ref[((b * c->h + h) * c->sq + i) * c->d + e];
                    if (!isfinite(x))
                        (*nonfinite)++;
                    num += (x - r) * (x - r);
                    den += r * r;
                }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The descriptor of case c. */
static inline tl_flash_attn_desc attn_desc(const attn_case *c, int lse)
{
    tl_flash_attn_desc d = {.batch = c->b, .heads = c->h, .kv_heads = c->hkv, .seq_q = c->sq, .seq_kv = c->skv,
                            .head_dim = c->d, .dtype = c->dt, .causal = c->causal, .scale = c->scale, .lse = lse};
    if (c->bshd) {
        attn_strides(c, c->h, c->sq, d.q_stride);
        attn_strides(c, c->hkv, c->skv, d.k_stride);
        attn_strides(c, c->hkv, c->skv, d.v_stride);
        attn_strides(c, c->h, c->sq, d.o_stride);
    }
    return d;
}

#endif
