/*
 * checked.h - 64-bit integer arithmetic without undefined behaviour: checked
 * forms that report overflow (constant folding, launch-time sizes) and
 * wrapping forms that compute modulo 2^64 (the interpreter's i64, as the
 * device's two's-complement registers do).
 */
#ifndef TILEC_CHECKED_H
#define TILEC_CHECKED_H

#include <stdbool.h>
#include <stdint.h>

/* Each returns true when the exact result does not fit in int64_t; *r is
 * then unspecified. */
static inline bool tli_add_overflows(int64_t a, int64_t b, int64_t *r)
{
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b))
        return true;
    *r = a + b;
    return false;
}

static inline bool tli_sub_overflows(int64_t a, int64_t b, int64_t *r)
{
    if ((b < 0 && a > INT64_MAX + b) || (b > 0 && a < INT64_MIN + b))
        return true;
    *r = a - b;
    return false;
}

static inline bool tli_mul_overflows(int64_t a, int64_t b, int64_t *r)
{
    if (a == 0 || b == 0) {
        *r = 0;
        return false;
    }
    /* |a * b| fits when |a| <= max / |b|; the negative side holds one more. */
    bool neg = (a < 0) != (b < 0);
    uint64_t ua = a < 0 ? 0 - (uint64_t)a : (uint64_t)a, ub = b < 0 ? 0 - (uint64_t)b : (uint64_t)b;
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (ua > limit / ub)
        return true;
    uint64_t m = ua * ub;
    *r = neg ? (int64_t)(0 - m) : (int64_t)m; /* 0 - 2^63 converts to INT64_MIN */
    return false;
}

/* Truncating division and remainder; true for a zero divisor and for
 * INT64_MIN / -1, whose quotient does not fit. */
static inline bool tli_div_overflows(int64_t a, int64_t b, int64_t *q, int64_t *rem)
{
    if (b == 0 || (b == -1 && a == INT64_MIN))
        return true;
    *q = a / b;
    *rem = a % b;
    return false;
}

/* Modulo 2^64. The conversion back to int64_t of a value above INT64_MAX
 * is implementation-defined, and GCC and Clang define it as wrapping. */
static inline int64_t tli_wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t tli_wrap_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static inline int64_t tli_wrap_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

#endif
