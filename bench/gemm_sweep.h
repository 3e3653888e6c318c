/*
 * gemm_sweep.h - a schedule sweep of the prebuilt GEMM against cuBLAS
 * measured in the same run, and rotated operands, shared by bench_gemm and
 * bench_epilogue. Public API of libtilec only.
 */
#ifndef TILEC_GEMM_SWEEP_H
#define TILEC_GEMM_SWEEP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tilec.h"

/* What one configuration of a sweep gave. */
typedef struct gemm_sweep_entry {
    tl_gemm_schedule schedule;
    int ok;            /* compiled, passed its check, timed                 */
    int ran;           /* the same (kept for callers)                       */
    double ms;         /* median                                            */
    double tflops;     /* 2 m n k / time                                    */
    double rel_err;    /* against cuBLAS with an f32 output                 */
    double ratio;      /* tflops / cuBLAS's tflops                          */
    char note[600];    /* why it was skipped or failed; "" when ok          */
} gemm_sweep_entry;

typedef struct gemm_sweep_result {
    double cublas_ms, cublas_tflops;
    int best;                  /* index of the fastest passing config; -1 */
    gemm_sweep_entry *entries; /* the caller's array of nconfigs          */
} gemm_sweep_result;

/* Sweeps `configs` for C = A B (row-major; B [N, K] when trans_b), inputs
 * of `in` (bf16 or f16), output of the same type, with tl_autotune (no
 * database record), and prints one CSV line per measurement (bench.h's
 * format; cuBLAS as "baseline:cuBLAS") and a readable table to `out`, in
 * the order of configs; progress goes to stderr. Fills res (entries in the
 * order of configs). Returns the index of the fastest configuration that
 * passed its check, -1 when none did, -2 when the sweep could not run at
 * all (no device, out of memory: the message is on stderr). */
int gemm_sweep_ex(tl_ctx *ctx, int64_t m, int64_t n, int64_t k, tl_dtype in, int trans_b,
                  const tl_gemm_schedule *configs, int nconfigs, FILE *out, gemm_sweep_result *res);

/* The tuner's GEMM space, unfiltered (tl_gemm_candidates; static storage,
 * *n gets its length). */
const tl_gemm_schedule *gemm_default_sweep(int *n);

/* "bm=128 bn=128 bk=32 st=3 th=256 sw=8 wp=0 pp=0" (tl_tune_config_text). */
void gemm_schedule_text(const tl_gemm_schedule *s, char *buf, size_t len);
/* Parses "MxNxK" (positive sizes); 0 on success, -1 otherwise. */
int gemm_parse_shape(const char *text, int64_t *m, int64_t *n, int64_t *k);

/* ------------------------------------------------------------------------ */
/* Operands rotated among copies                                             */
/* ------------------------------------------------------------------------ */

#define GEMM_MAX_COPIES 64

/* Random A, B and bias (in [-1, 1)) and an output C, in as many copies as
 * it takes for one pass over all of them to move more than twice the L2, so
 * that a timed run never finds its operands in L2. Copy 0 comes from seeds
 * 1 (A), 2 (B) and 3 (bias), as a host reference would draw them with
 * tl_random_host. */
typedef struct gemm_operands {
    tl_ctx *ctx;
    int64_t m, n, k;
    tl_dtype in, out;
    int copies;
    int next;                       /* the copy gemm_operands_next gives */
    uint64_t a[GEMM_MAX_COPIES], b[GEMM_MAX_COPIES], c[GEMM_MAX_COPIES];
    uint64_t bias;                  /* [n] of in; one copy (small)        */
} gemm_operands;

/* Allocates and fills; TL_OK or the failing call's status (message on the
 * context). On failure nothing stays allocated. */
tl_status gemm_operands_init(gemm_operands *ops, tl_ctx *ctx, int64_t m, int64_t n, int64_t k, tl_dtype in,
                             tl_dtype out);
void gemm_operands_free(gemm_operands *ops);
/* The copy to use for the next run, then advances. */
int gemm_operands_next(gemm_operands *ops);
/* Bytes of C. */
size_t gemm_operands_c_bytes(const gemm_operands *ops);

#endif
