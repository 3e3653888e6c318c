/* util.h - helpers shared by the tests: contexts, vadd-like kernels. */
#ifndef TILEC_TEST_UTIL_H
#define TILEC_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tilec.h"

#define TEST_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The bits of an f32 and back (memcpy: no aliasing games). */
static inline uint32_t test_f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static inline float test_f32_from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Fails unless text holds every string of has[] and none of lacks[]
 * (either may be NULL with a count of 0); `what` names the text in the
 * message, e.g. "softmax 2048x32768: the source". */
static inline void test_expect_text(const char *text, const char *what, const char *const *has, size_t nhas,
                                    const char *const *lacks, size_t nlacks)
{
    for (size_t i = 0; i < nhas; i++)
        if (!strstr(text, has[i]))
            fail_msg("%s lacks %s", what, has[i]);
    for (size_t i = 0; i < nlacks; i++)
        if (strstr(text, lacks[i]))
            fail_msg("%s has %s", what, lacks[i]);
}

/* An offline context (no GPU) with the disk cache off, for CPU-tier tests. */
static inline tl_ctx *test_offline_ctx(const char *target)
{
    tl_ctx_options o = tl_ctx_default_options();
    o.device = TL_NO_DEVICE;
    o.disk_cache = 0;
    o.target = target;
    tl_ctx *ctx = NULL;
    char msg[256];
    tl_status st = tl_ctx_create(&o, &ctx, msg, sizeof msg);
    if (st != TL_OK)
        fprintf(stderr, "offline context: %s: %s\n", tl_status_name(st), msg);
    assert_int_equal(st, TL_OK);
    return ctx;
}

/* Element i of a host array of f32, f16, bf16 or an 8-bit float, as a
 * double. */
static inline double test_elem(tl_dtype dt, const void *p, int64_t i)
{
    switch (dt) {
    case TL_F32: return ((const float *)p)[i];
    case TL_F16: return tl_f16_to_f32(((const uint16_t *)p)[i]);
    case TL_F8E4M3: return tl_f8e4m3_to_f32(((const uint8_t *)p)[i]);
    case TL_F8E5M2: return tl_f8e5m2_to_f32(((const uint8_t *)p)[i]);
    default: return tl_bf16_to_f32(((const uint16_t *)p)[i]);
    }
}

/* The GEMM epilogues' activations from their definitions, in double. */
static inline double test_act(tl_epilogue epi, double x)
{
    const double pi = 3.14159265358979323846;
    switch (epi) {
    case TL_EPI_RELU: return x > 0 ? x : 0;
    case TL_EPI_GELU_ERF: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case TL_EPI_GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x * x * x)));
    default: return x;
    }
}

/* Checks n elements of type dt at the host pointer got against the
 * float64 want by relative error (tl_check on c, which may be NULL); a
 * failure names what, the error, the non-finite elements and the first
 * bad one. Returns the check's result. */
static inline tl_check_result test_check_f64(tl_ctx *c, const char *what, tl_dtype dt, const void *got,
                                             const double *want, int64_t n, double tol)
{
    tl_span o = {.dtype = dt, .n = n, .host = (void *)got}, r = {.dtype = TL_F64, .n = n, .host = (void *)want};
    tl_check_result res;
    if (tl_check(c, &o, &r, tol, &res) != TL_OK)
        fail_msg("%s: tl_check: %s", what, c ? tl_ctx_error(c) : "failed");
    if (!res.pass)
        fail_msg("%s: rel err %.3e (tol %.0e), %lld non-finite, first bad %lld: got %g want %g", what, res.rel_err, tol,
                 (long long)res.nonfinite, (long long)res.first_bad,
                 res.first_bad >= 0 ? test_elem(dt, got, res.first_bad) : 0.0,
                 res.first_bad >= 0 ? want[res.first_bad] : 0.0);
    return res;
}

/* The whole of a file, NUL-terminated, malloc'ed; NULL when it cannot be
 * opened. */
static inline char *test_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

/* Compares generated source src with the golden file at path (relative to
 * the repo root); TILEC_UPDATE_GOLDEN=1 rewrites the file instead (review
 * the diff before committing it). what names the kernel in messages. */
static inline void test_check_golden(const char *path, const char *src, const char *what)
{
    const char *update = getenv("TILEC_UPDATE_GOLDEN");
    if (update && strcmp(update, "1") == 0) {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        fputs(src, f);
        fclose(f);
    }
    char *golden = test_read_file(path);
    if (!golden)
        fail_msg("%s is missing (run with TILEC_UPDATE_GOLDEN=1 from the repo root)", path);
    if (strcmp(src, golden) != 0) {
        /* the first line that differs, not the whole text */
        int line = 1;
        const char *a = src, *b = golden, *la = src, *lb = golden;
        for (; *a && *a == *b; a++, b++)
            if (*a == '\n')
                line++, la = a + 1, lb = b + 1;
        int na = (int)strcspn(la, "\n"), nb = (int)strcspn(lb, "\n");
        fail_msg("generated %s differs from %s at line %d:\n  now:    %.*s\n  golden: %.*s", what, path, line, na, la,
                 nb, lb);
    }
    free(golden);
}

/* Cuts a library message to its first clause (up to " (" or ". "), for a
 * one-line skip reason. */
static inline char *test_first_clause(char *msg)
{
    for (char *p = msg; *p; p++)
        if ((p[0] == ' ' && p[1] == '(') || (p[0] == '.' && p[1] == ' ')) {
            *p = '\0';
            break;
        }
    return msg;
}

/* Compiles k to PTX for sm_80 and destroys it: the generated source must
 * be accepted by NVRTC; skips (one line) when NVRTC is missing. */
static inline void test_ptx_or_skip(tl_ctx *c, tl_kernel *k)
{
    char *ptx = NULL;
    tl_status st = tl_kernel_ptx(k, "sm_80", &ptx);
    tl_free_host(ptx);
    tl_kernel_destroy(k);
    if (st == TL_ERR_NO_NVRTC) {
        print_message("  skip: NVRTC is missing: the generated source was not compiled\n");
        skip();
    }
    if (st != TL_OK)
        fail_msg("NVRTC rejected the generated source: %s", tl_ctx_error(c));
}

#define assert_status(expr, want)                                                                  \
    do {                                                                                           \
        tl_status st_ = (expr);                                                                    \
        if (st_ != (want))                                                                         \
            fail_msg("%s gave %s, wanted %s", #expr, tl_status_name(st_), tl_status_name(want));   \
    } while (0)

#endif
