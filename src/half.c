/*
 * half.c - IEEE binary16 and bfloat16 on the host, and element access by
 * dtype. All rounding is to nearest, ties to even, as the GPU's cvt.rn does.
 * NaN payloads are kept where they fit (so f16 -> f32 -> f16 is the
 * identity on all 65536 patterns); a NaN whose payload would vanish stays a
 * NaN (quiet bit set) instead of turning into an infinity.
 */
#include "half.h"

#include <math.h>
#include <string.h>

static uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float f32_from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* v >> shift, rounded to nearest even on the bits shifted out (shift >= 1). */
static uint32_t shift_round_even(uint32_t v, unsigned shift)
{
    uint32_t r = v >> shift;
    uint32_t rem = v & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u)))
        r++;
    return r;
}

/* |x| (as f32 bits) below 2^-14 to an f16 subnormal; a rounding carry into
 * the exponent gives the smallest normal, which is what we want. */
static uint16_t f16_subnormal(uint32_t a)
{
    unsigned shift = 126u - (a >> 23); /* f16 subnormal ulp is 2^-24 */
    if (shift > 24u)
        return 0; /* below half the smallest subnormal (or an f32 subnormal) */
    return (uint16_t)shift_round_even((a & 0x7fffffu) | 0x800000u, shift);
}

uint16_t tl_f32_to_f16(float x)
{
    uint32_t u = f32_bits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) { /* NaN: keep the top 10 payload bits */
        uint16_t m = (uint16_t)((a >> 13) & 0x3ffu);
        return (uint16_t)(sign | 0x7c00u | (m ? m : 0x200u));
    }
    if (a >= 0x477ff000u) /* >= 65520, the tie above 65504, rounds to Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) /* normal: rebias the exponent (127 - 15) */
        return (uint16_t)(sign | shift_round_even(a - 0x38000000u, 13));
    return (uint16_t)(sign | f16_subnormal(a));
}

float tl_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu)
        return f32_from_bits(sign | 0x7f800000u | (m << 13));
    if (e != 0)
        return f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
    float mag = (float)m * 0x1p-24f; /* subnormal or zero; exact */
    return sign ? -mag : mag;
}

uint16_t tl_f32_to_bf16(float x)
{
    uint32_t u = f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        uint16_t h = (uint16_t)(u >> 16);
        return (h & 0x7fu) ? h : (uint16_t)(h | 0x40u);
    }
    /* Adding 0x7fff plus the lowest kept bit rounds to nearest even; a
     * carry out of the mantissa bumps the exponent, up to Inf. */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float tl_bf16_to_f32(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

/* a (finite, >= 0) rounded to `mant_bits` fraction bits with exponents
 * clamped below at emin (gradual underflow); no upper bound here. */
static double round_to_format(double a, int mant_bits, int emin)
{
    if (a == 0.0)
        return 0.0;
    int e;
    frexp(a, &e); /* a = f * 2^e with f in [0.5, 1) */
    int exp = e - 1 < emin ? emin : e - 1;
    int q = exp - mant_bits; /* the weight of the last kept bit */
    return ldexp(nearbyint(ldexp(a, -q)), q);
}

uint16_t tli_f64_to_f16(double v)
{
    if (isnan(v))
        return tl_f32_to_f16((float)v);
    uint16_t sign = signbit(v) ? 0x8000u : 0;
    double r = isinf(v) ? INFINITY : round_to_format(fabs(v), 10, -14);
    if (r >= 65536.0)
        return (uint16_t)(sign | 0x7c00u);
    return (uint16_t)(sign | tl_f32_to_f16((float)r)); /* exact: r is an f16 value */
}

uint16_t tli_f64_to_bf16(double v)
{
    if (isnan(v))
        return tl_f32_to_bf16((float)v);
    uint16_t sign = signbit(v) ? 0x8000u : 0;
    double r = isinf(v) ? INFINITY : round_to_format(fabs(v), 7, -126);
    if (r >= 0x1p128)
        return (uint16_t)(sign | 0x7f80u);
    return (uint16_t)(sign | tl_f32_to_bf16((float)r)); /* exact: r is a bf16 value */
}

/* The 8-bit float formats: fraction bits, exponent bias, largest finite
 * value and its code, whether the top exponent means infinity and NaN
 * (E5M2, as IEEE) or only S.1111.111 is NaN (E4M3). */
typedef struct f8_format {
    int mant, bias;
    double max;
    uint8_t max_code;
    bool ieee_top;
} f8_format;
static const f8_format F8E4M3 = {3, 7, 448.0, 0x7e, false}, F8E5M2 = {2, 15, 57344.0, 0x7b, true};

static uint8_t f64_to_f8(double v, const f8_format *f)
{
    if (isnan(v))
        return 0x7f;
    uint8_t sign = signbit(v) ? 0x80 : 0;
    int emin = 1 - f->bias;
    double r = isinf(v) ? f->max : round_to_format(fabs(v), f->mant, emin);
    if (r >= f->max)
        return (uint8_t)(sign | f->max_code);
    if (r == 0.0)
        return sign;
    int e;
    frexp(r, &e); /* r = 1.m 2^(e - 1) */
    if (e - 1 < emin) /* subnormal: r = m 2^(emin - mant) */
        return (uint8_t)(sign | (int)ldexp(r, f->mant - emin));
    int m = (int)ldexp(r, f->mant - (e - 1)) - (1 << f->mant);
    return (uint8_t)(sign | ((e - 1 + f->bias) << f->mant) | m);
}

/* A NaN keeps the code's sign (0xff gives 0xffc00000), as the device's
 * tl_f8_to_f32 does: the two agree bit for bit on all 256 codes. */
static float f8_to_f32(uint8_t x, const f8_format *f)
{
    int top = (1 << (7 - f->mant)) - 1, mask = (1 << f->mant) - 1;
    int e = (x >> f->mant) & top, m = x & mask;
    double s = (x & 0x80) ? -1.0 : 1.0;
    if (e == top && (f->ieee_top ? m != 0 : m == mask))
        return copysignf(NAN, (float)s);
    if (e == top && f->ieee_top)
        return (float)(s * INFINITY);
    if (e == 0)
        return (float)(s * ldexp(m, 1 - f->bias - f->mant));
    return (float)(s * ldexp((1 << f->mant) | m, e - f->bias - f->mant));
}

uint8_t tl_f32_to_f8e4m3(float x) { return f64_to_f8(x, &F8E4M3); }
float tl_f8e4m3_to_f32(uint8_t v) { return f8_to_f32(v, &F8E4M3); }
uint8_t tl_f32_to_f8e5m2(float x) { return f64_to_f8(x, &F8E5M2); }
float tl_f8e5m2_to_f32(uint8_t v) { return f8_to_f32(v, &F8E5M2); }

uint8_t tli_f64_to_f8(tl_dtype dt, double v) { return f64_to_f8(v, dt == TL_F8E5M2 ? &F8E5M2 : &F8E4M3); }

double tli_load_as_double(tl_dtype dt, const void *base, int64_t i)
{
    switch (dt) {
    case TL_F32: return ((const float *)base)[i];
    case TL_F16: return tl_f16_to_f32(((const uint16_t *)base)[i]);
    case TL_BF16: return tl_bf16_to_f32(((const uint16_t *)base)[i]);
    case TL_I32: return ((const int32_t *)base)[i];
    case TL_I64: return (double)((const int64_t *)base)[i];
    case TL_F64: return ((const double *)base)[i];
    case TL_BOOL: return ((const uint8_t *)base)[i] != 0;
    case TL_F8E4M3: return tl_f8e4m3_to_f32(((const uint8_t *)base)[i]);
    case TL_F8E5M2: return tl_f8e5m2_to_f32(((const uint8_t *)base)[i]);
    default: return 0.0;
    }
}

/* Truncates toward zero and saturates to a signed integer of `bits` bits
 * (32 or 64); NaN gives 0. This is what cvt.rzi.s32/s64.f64 does. */
static int64_t trunc_saturate(double v, int bits)
{
    if (isnan(v))
        return 0;
    double limit = ldexp(1.0, bits - 1); /* 2^31 or 2^63, exact */
    int64_t max = bits == 64 ? INT64_MAX : ((int64_t)1 << (bits - 1)) - 1;
    double t = trunc(v);
    if (t >= limit)
        return max;
    if (t < -limit)
        return -max - 1;
    return (int64_t)t;
}

void tli_store_from_double(tl_dtype dt, void *base, int64_t i, double v)
{
    switch (dt) {
    case TL_F32: ((float *)base)[i] = (float)v; break; /* IEEE: RN, overflow to Inf */
    case TL_F16: ((uint16_t *)base)[i] = tli_f64_to_f16(v); break;
    case TL_BF16: ((uint16_t *)base)[i] = tli_f64_to_bf16(v); break;
    case TL_I32: ((int32_t *)base)[i] = (int32_t)trunc_saturate(v, 32); break;
    case TL_I64: ((int64_t *)base)[i] = trunc_saturate(v, 64); break;
    case TL_F64: ((double *)base)[i] = v; break;
    case TL_BOOL: ((uint8_t *)base)[i] = v != 0.0; break;
    case TL_F8E4M3:
    case TL_F8E5M2: ((uint8_t *)base)[i] = tli_f64_to_f8(dt, v); break;
    default: break;
    }
}
