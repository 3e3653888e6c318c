/* test_fp8.c - the 8-bit floats on the host (CPU tier): the names and sizes
 * of TL_F8E4M3 and TL_F8E5M2; the decoding of all 256 codes of each against
 * the value the format's definition gives, worked out here from the bit
 * fields; the encoding (every finite code back to itself, every midpoint
 * between neighbours to the even one and the floats beside it to the
 * nearer, saturation to the largest finite value, NaN, underflow to zero,
 * the step from the largest subnormal to the smallest normal), from f32 and
 * straight from a double; the device's integer conversions (tl_device.cuh)
 * transcribed and compared with the host's over every f32 near a rounding
 * boundary; element access by dtype (half.h) for both types; tl_random_host's
 * 8-bit fills and their ranges; tl_check on 8-bit spans; a kernel of 8-bit
 * tensors and tiles in the interpreter against the definitions and through
 * NVRTC; and what the cuBLASLt FP8 baseline (tl_baseline_gemm) refuses
 * before any GPU call. */
#include "fixture.h"

#include "half.h"
#include "kernels.h"

#include <float.h>


/* One format, as the OCP FP8 definition gives it, and the library's
 * conversions for it. */
typedef struct f8_format {
    tl_dtype dt;
    const char *name;
    int ebits, mbits, bias;
    bool ieee;            /* the top exponent holds infinities and NaNs (E5M2);
                             else only S.1111.111 is NaN (E4M3) */
    double max;           /* the largest finite value */
    uint8_t max_code;
    uint8_t (*enc)(float);
    float (*dec)(uint8_t);
} f8_format;

static const f8_format formats[] = {
    {TL_F8E4M3, "f8e4m3", 4, 3, 7, false, 448.0, 0x7e, tl_f32_to_f8e4m3, tl_f8e4m3_to_f32},
    {TL_F8E5M2, "f8e5m2", 5, 2, 15, true, 57344.0, 0x7b, tl_f32_to_f8e5m2, tl_f8e5m2_to_f32},
};

enum { FINITE, INF, NOT_A_NUMBER };

/* A code's value by the definition: (-1)^S 2^(E - bias) (1 + M / 2^mbits)
 * for E > 0, (-1)^S 2^(1 - bias) M / 2^mbits for E = 0, in double (exact);
 * *kind says whether it is finite, an infinity or a NaN. */
static double reference(const f8_format *f, unsigned code, int *kind)
{
    unsigned top = (1u << f->ebits) - 1, mask = (1u << f->mbits) - 1;
    unsigned s = code >> 7, e = (code >> f->mbits) & top, m = code & mask;
    double sign = s ? -1.0 : 1.0;
    if (e == top && (f->ieee || m == mask)) {
        *kind = f->ieee && m == 0 ? INF : NOT_A_NUMBER;
        return *kind == INF ? sign * INFINITY : NAN;
    }
    *kind = FINITE;
    double frac = (double)m / (double)(mask + 1);
    return e ? sign * pow(2.0, (double)e - f->bias) * (1.0 + frac) : sign * pow(2.0, 1.0 - f->bias) * frac;
}

/* The smallest subnormal, 2^(1 - bias - mbits). */
static float tiniest(const f8_format *f) { return (float)pow(2.0, 1.0 - f->bias - f->mbits); }

/* ------------------------------------------------------------------------ */
/* Names                                                                     */
/* ------------------------------------------------------------------------ */

static void test_names(void **state)
{
    (void)state;
    /* appended after TL_BOOL: the values are ABI (and the random kernel's
     * dtype codes) */
    assert_int_equal(TL_F8E4M3, 8);
    assert_int_equal(TL_F8E5M2, 9);
    for (size_t i = 0; i < TEST_COUNT(formats); i++) {
        const f8_format *f = &formats[i];
        assert_int_equal(tl_dtype_size(f->dt), 1);
        assert_string_equal(tl_dtype_name(f->dt), f->name);
        assert_int_equal(tl_dtype_from_name(f->name), f->dt);
    }
    static const char *const not_names[] = {"f8", "e4m3", "fp8", "F8E4M3", "f8e4m3fn", "f8e5m2 ", "float8"};
    for (size_t i = 0; i < TEST_COUNT(not_names); i++)
        assert_int_equal(tl_dtype_from_name(not_names[i]), TL_DTYPE_INVALID);
}

/* ------------------------------------------------------------------------ */
/* Decoding                                                                  */
/* ------------------------------------------------------------------------ */

static void check_all_codes(const f8_format *f, int want_nans, int want_infs)
{
    int nans = 0, infs = 0;
    double largest = 0, last = -1;
    for (unsigned c = 0; c < 256; c++) {
        int kind;
        double want = reference(f, c, &kind);
        float got = f->dec((uint8_t)c);
        bool neg = (c & 0x80) != 0;
        if (kind == NOT_A_NUMBER) {
            if (!isnan(got))
                fail_msg("%s 0x%02x: %g, want NaN", f->name, c, got);
            nans++;
        } else if (kind == INF) {
            if (!isinf(got))
                fail_msg("%s 0x%02x: %g, want an infinity", f->name, c, got);
            infs++;
        } else if ((double)got != want) {
            fail_msg("%s 0x%02x: %a, want %a", f->name, c, got, want);
        } else if (!neg) { /* the positive codes count up in value */
            assert_true(want > last);
            last = want;
            largest = want > largest ? want : largest;
        }
        assert_int_equal(signbit(got) != 0, neg); /* -0 and the negative NaN too */
    }
    assert_int_equal(nans, want_nans);
    assert_int_equal(infs, want_infs);
    assert_true(largest == f->max);
    assert_true(f->dec(f->max_code) == (float)f->max);
    assert_true(f->dec((uint8_t)(f->max_code | 0x80)) == (float)-f->max);
}

static void test_decode_e4m3(void **state)
{
    (void)state;
    const f8_format *f = &formats[0];
    check_all_codes(f, 2, 0); /* NaN: 0x7f and 0xff only */
    assert_true(tl_f8e4m3_to_f32(0x7e) == 448.0f);
    assert_true(tl_f8e4m3_to_f32(0xfe) == -448.0f);
    assert_true(tl_f8e4m3_to_f32(0x01) == 0x1p-9f);   /* the smallest subnormal */
    assert_true(tl_f8e4m3_to_f32(0x07) == 7 * 0x1p-9f); /* the largest */
    assert_true(tl_f8e4m3_to_f32(0x08) == 0x1p-6f);   /* the smallest normal */
    assert_true(tl_f8e4m3_to_f32(0x38) == 1.0f);
    assert_true(tl_f8e4m3_to_f32(0x39) == 1.125f);
    assert_true(tl_f8e4m3_to_f32(0x78) == 256.0f);    /* E = 15 is an ordinary exponent */
    assert_true(tl_f8e4m3_to_f32(0xc0) == -2.0f);
    assert_int_equal(test_f32_bits(tl_f8e4m3_to_f32(0x80)), 0x80000000u);
}

static void test_decode_e5m2(void **state)
{
    (void)state;
    const f8_format *f = &formats[1];
    check_all_codes(f, 6, 2); /* NaN: 0x7d..0x7f, 0xfd..0xff */
    assert_true(tl_f8e5m2_to_f32(0x7b) == 57344.0f);
    assert_true(tl_f8e5m2_to_f32(0x01) == 0x1p-16f);
    assert_true(tl_f8e5m2_to_f32(0x03) == 3 * 0x1p-16f);
    assert_true(tl_f8e5m2_to_f32(0x04) == 0x1p-14f);
    assert_true(tl_f8e5m2_to_f32(0x3c) == 1.0f);
    assert_true(tl_f8e5m2_to_f32(0x3d) == 1.25f);
    assert_true(tl_f8e5m2_to_f32(0x7c) == (float)INFINITY);
    assert_true(tl_f8e5m2_to_f32(0xfc) == -(float)INFINITY);
    assert_int_equal(test_f32_bits(tl_f8e5m2_to_f32(0x80)), 0x80000000u);
}

/* ------------------------------------------------------------------------ */
/* Encoding                                                                  */
/* ------------------------------------------------------------------------ */

/* Every finite code, both signs, comes back from its value: from f32 and
 * straight from the double. */
static void test_round_trip(void **state)
{
    (void)state;
    for (size_t i = 0; i < TEST_COUNT(formats); i++) {
        const f8_format *f = &formats[i];
        for (unsigned c = 0; c < 256; c++) {
            int kind;
            double v = reference(f, c, &kind);
            if (kind != FINITE)
                continue;
            if (f->enc(f->dec((uint8_t)c)) != c)
                fail_msg("%s 0x%02x -> %g -> 0x%02x", f->name, c, f->dec((uint8_t)c), f->enc(f->dec((uint8_t)c)));
            assert_int_equal(tli_f64_to_f8(f->dt, v), c);
        }
    }
}

/* For each pair of neighbouring positive finite codes c, c + 1 (zero and
 * the smallest subnormal, the largest subnormal and the smallest normal,
 * each step of exponent): the midpoint goes to the even code, a float just
 * below it to c, just above it to c + 1, and the negatives likewise. A
 * double a hair off the midpoint, closer than a float can say, goes to the
 * nearer code: the double is rounded once, not through float. */
static void test_midpoints(void **state)
{
    (void)state;
    for (size_t i = 0; i < TEST_COUNT(formats); i++) {
        const f8_format *f = &formats[i];
        for (unsigned c = 0; c < f->max_code; c++) {
            float a = f->dec((uint8_t)c), b = f->dec((uint8_t)(c + 1));
            float mid = (a + b) / 2; /* exact: one bit more than the format */
            uint8_t even = (uint8_t)((c & 1) ? c + 1 : c), up = (uint8_t)(c + 1);
            if (f->enc(mid) != even)
                fail_msg("%s: the midpoint %a of 0x%02x and 0x%02x gives 0x%02x", f->name, mid, c, c + 1,
                         f->enc(mid));
            assert_int_equal(f->enc(-mid), even | 0x80);
            assert_int_equal(f->enc(nextafterf(mid, 0.0f)), c);
            assert_int_equal(f->enc(nextafterf(mid, (float)INFINITY)), up);
            assert_int_equal(f->enc(-nextafterf(mid, (float)INFINITY)), up | 0x80);
            assert_int_equal(tli_f64_to_f8(f->dt, mid), even);
            assert_int_equal(tli_f64_to_f8(f->dt, (double)mid * (1 + 0x1p-40)), up);
            assert_int_equal(tli_f64_to_f8(f->dt, (double)mid * (1 - 0x1p-40)), c);
            assert_int_equal(tli_f64_to_f8(f->dt, -(double)mid * (1 + 0x1p-40)), up | 0x80);
        }
    }
}

/* Beyond the largest finite value, infinities included, the result is the
 * largest finite value with the sign (cvt.rn.satfinite); NaN gives 0x7f
 * whatever its sign. */
static void test_saturation_and_nan(void **state)
{
    (void)state;
    static const float e4m3_over[] = {449.0f, 463.99f, 464.0f, 465.0f, 480.0f, 1e6f, FLT_MAX, (float)INFINITY};
    static const float e5m2_over[] = {57345.0f, 61439.0f, 61440.0f, 61441.0f, 65536.0f, 1e30f, FLT_MAX,
                                      (float)INFINITY};
    for (size_t i = 0; i < TEST_COUNT(e4m3_over); i++) {
        assert_int_equal(tl_f32_to_f8e4m3(e4m3_over[i]), 0x7e);
        assert_int_equal(tl_f32_to_f8e4m3(-e4m3_over[i]), 0xfe);
        assert_int_equal(tli_f64_to_f8(TL_F8E4M3, e4m3_over[i]), 0x7e);
    }
    for (size_t i = 0; i < TEST_COUNT(e5m2_over); i++) {
        assert_int_equal(tl_f32_to_f8e5m2(e5m2_over[i]), 0x7b);
        assert_int_equal(tl_f32_to_f8e5m2(-e5m2_over[i]), 0xfb);
        assert_int_equal(tli_f64_to_f8(TL_F8E5M2, e5m2_over[i]), 0x7b);
    }
    for (size_t i = 0; i < TEST_COUNT(formats); i++) {
        const f8_format *f = &formats[i];
        uint8_t top = f->max_code, below = (uint8_t)(f->max_code - 1);
        assert_int_equal(f->enc((float)f->max), top);
        /* between the two largest values the usual rounding holds */
        float mid = (f->dec(below) + f->dec(top)) / 2;
        assert_int_equal(f->enc(nextafterf(mid, 0.0f)), below);
        assert_int_equal(f->enc(nextafterf(mid, (float)INFINITY)), top);
        assert_int_equal(tli_f64_to_f8(f->dt, DBL_MAX), top);
        assert_int_equal(tli_f64_to_f8(f->dt, -DBL_MAX), top | 0x80);
        assert_int_equal(tli_f64_to_f8(f->dt, -INFINITY), top | 0x80);
        assert_int_equal(f->enc(NAN), 0x7f);
        assert_int_equal(f->enc(-NAN), 0x7f);
        assert_int_equal(f->enc(test_f32_from_bits(0x7f800001u)), 0x7f); /* a signalling NaN */
        assert_int_equal(f->enc(test_f32_from_bits(0xffffffffu)), 0x7f);
        assert_int_equal(tli_f64_to_f8(f->dt, NAN), 0x7f);
        assert_int_equal(tli_f64_to_f8(f->dt, -NAN), 0x7f);
    }
}

/* Below the smallest subnormal s: half of it is a tie between 0 and s and
 * goes to 0 (even); anything above half goes to s; smaller values, f32
 * subnormals among them, go to zero of their sign; ties between
 * subnormals go to the even one. */
static void test_underflow(void **state)
{
    (void)state;
    for (size_t i = 0; i < TEST_COUNT(formats); i++) {
        const f8_format *f = &formats[i];
        float s = tiniest(f);
        assert_int_equal(f->enc(s), 0x01);
        assert_int_equal(f->enc(s / 2), 0x00);
        assert_int_equal(f->enc(-s / 2), 0x80);
        assert_int_equal(f->enc(nextafterf(s / 2, 1.0f)), 0x01);
        assert_int_equal(f->enc(-nextafterf(s / 2, 1.0f)), 0x81);
        assert_int_equal(f->enc(nextafterf(s / 2, 0.0f)), 0x00);
        assert_int_equal(f->enc(s / 4), 0x00);
        assert_int_equal(f->enc(1e-30f), 0x00);
        assert_int_equal(f->enc(-1e-30f), 0x80);
        assert_int_equal(f->enc(test_f32_from_bits(1)), 0x00);           /* the smallest f32 subnormal */
        assert_int_equal(f->enc(test_f32_from_bits(0x80000001u)), 0x80);
        assert_int_equal(f->enc(0.0f), 0x00);
        assert_int_equal(f->enc(-0.0f), 0x80);
        assert_int_equal(f->enc(1.5f * s), 0x02);              /* ties to even */
        assert_int_equal(f->enc(2.5f * s), 0x02);
        assert_int_equal(f->enc(-2.5f * s), 0x82);
        assert_int_equal(tli_f64_to_f8(f->dt, s / 2.0 * (1 + 0x1p-40)), 0x01);
        assert_int_equal(tli_f64_to_f8(f->dt, s / 2.0), 0x00);
        assert_int_equal(tli_f64_to_f8(f->dt, 1e-300), 0x00);
        assert_int_equal(tli_f64_to_f8(f->dt, -1e-300), 0x80);
        assert_int_equal(tli_f64_to_f8(f->dt, -0.0), 0x80);
    }
}

/* The largest subnormal L = (2^mbits - 1) s and the smallest normal
 * N = 2^mbits s: their midpoint rounds up to N (its code 2^mbits is even),
 * as does anything between it and N; just below the midpoint gives L. */
static void test_smallest_normal(void **state)
{
    (void)state;
    for (size_t i = 0; i < TEST_COUNT(formats); i++) {
        const f8_format *f = &formats[i];
        float s = tiniest(f), l = (float)((1 << f->mbits) - 1) * s, n = (float)(1 << f->mbits) * s;
        uint8_t l_code = (uint8_t)((1 << f->mbits) - 1), n_code = (uint8_t)(1 << f->mbits);
        assert_true(f->dec(l_code) == l);
        assert_true(f->dec(n_code) == n);
        float mid = (l + n) / 2;
        assert_int_equal(f->enc(mid), n_code);
        assert_int_equal(f->enc(nextafterf(mid, 1.0f)), n_code);
        assert_int_equal(f->enc(nextafterf(n, 0.0f)), n_code);
        assert_int_equal(f->enc(n), n_code);
        assert_int_equal(f->enc(nextafterf(mid, 0.0f)), l_code);
        assert_int_equal(f->enc(-mid), n_code | 0x80);
        assert_int_equal(tli_f64_to_f8(f->dt, mid), n_code);
        assert_int_equal(tli_f64_to_f8(f->dt, (double)mid * (1 - 0x1p-40)), l_code);
    }
    assert_int_equal(tl_f32_to_f8e4m3(0x1p-6f), 0x08);
    assert_int_equal(tl_f32_to_f8e4m3(7.5f * 0x1p-9f), 0x08);
    assert_int_equal(tl_f32_to_f8e5m2(0x1p-14f), 0x04);
    assert_int_equal(tl_f32_to_f8e5m2(3.5f * 0x1p-16f), 0x04);
}

/* ------------------------------------------------------------------------ */
/* The device's conversions, transcribed                                     */
/* ------------------------------------------------------------------------ */

/* tl_device.cuh's tl_f8_to_f32 and tl_f32_to_f8, integer for integer in C
 * (keep them in step with the header). The GPU tier compares the device
 * itself with the host through tl_random_fill; this covers every f32 near
 * a rounding boundary of either format, which no random fill reaches. */
static float device_decode(unsigned x, int mant, int bias, bool ieee_top)
{
    const unsigned top = (1u << (7 - mant)) - 1u, mask = (1u << mant) - 1u;
    const unsigned e = (x >> mant) & top, m = x & mask, sign = (x & 0x80u) << 24;
    unsigned u;
    if (e == top && (ieee_top || m == mask))
        u = (ieee_top && m == 0) ? 0x7f800000u : 0x7fc00000u;
    else if (e == 0)
        u = test_f32_bits((float)m * test_f32_from_bits((unsigned)(127 + 1 - bias - mant) << 23));
    else
        u = ((e + 127u - (unsigned)bias) << 23) | (m << (23 - mant));
    return test_f32_from_bits(sign | u);
}

static uint8_t device_encode(float f, int mant, int bias, unsigned max_code)
{
    const unsigned u = test_f32_bits(f), sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return 0x7fu;
    unsigned code;
    if (a < ((unsigned)(127 + 1 - bias) << 23))
        code = (unsigned)rintf(test_f32_from_bits(a) * test_f32_from_bits((unsigned)(127 + bias - 1 + mant) << 23));
    else {
        const int shift = 23 - mant;
        const unsigned r = a + ((1u << (shift - 1)) - 1u) + ((a >> shift) & 1u);
        code = (r >> shift) - ((unsigned)(127 - bias) << mant);
    }
    return (uint8_t)(sign | (code > max_code ? max_code : code));
}

/* Every code decodes to the same bits on both sides (NaNs and -0
 * included); every f32 whose low 13 bits are zero (all exponents, both
 * signs, the top 10 fraction bits: each value of either format, each
 * midpoint between neighbours, the infinities and NaNs) and the floats
 * one ulp either side encode to the same code. */
static void test_device_matches_host(void **state)
{
    (void)state;
    for (size_t i = 0; i < TEST_COUNT(formats); i++) {
        const f8_format *f = &formats[i];
        for (unsigned c = 0; c < 256; c++) {
            uint32_t dev = test_f32_bits(device_decode(c, f->mbits, f->bias, f->ieee)), host = test_f32_bits(f->dec((uint8_t)c));
            if (dev != host)
                fail_msg("%s 0x%02x: device 0x%08x, host 0x%08x", f->name, c, dev, host);
        }
        for (uint32_t hi = 0; hi < (1u << 19); hi++)
            for (int d = -1; d <= 1; d++) {
                uint32_t u = (hi << 13) + (uint32_t)d; /* wraps at 0: 0xffffffff, a NaN */
                float x = test_f32_from_bits(u);
                uint8_t dev = device_encode(x, f->mbits, f->bias, f->max_code), host = f->enc(x);
                if (dev != host)
                    fail_msg("%s of %a (0x%08x): device 0x%02x, host 0x%02x", f->name, x, u, dev, host);
            }
    }
}

/* ------------------------------------------------------------------------ */
/* Element access by dtype                                                   */
/* ------------------------------------------------------------------------ */

/* tli_store_from_double writes one byte (its neighbours keep theirs),
 * rounded straight from the double and saturating; tli_load_as_double
 * reads the value back, infinities and NaNs as such. */
static void test_load_store(void **state)
{
    (void)state;
    uint8_t buf[6];
    memset(buf, 0xa5, sizeof buf);
    /* 1.0625 is the tie between 1 (0x38) and 1.125 (0x39) */
    tli_store_from_double(TL_F8E4M3, buf, 2, 1.0625);
    assert_int_equal(buf[2], 0x38);
    tli_store_from_double(TL_F8E4M3, buf, 2, 1.0625 + 0x1p-40);
    assert_int_equal(buf[2], 0x39);
    assert_true(tli_load_as_double(TL_F8E4M3, buf, 2) == 1.125);
    assert_int_equal(buf[1], 0xa5);
    assert_int_equal(buf[3], 0xa5);
    tli_store_from_double(TL_F8E4M3, buf, 0, 1e300);
    assert_int_equal(buf[0], 0x7e);
    assert_true(tli_load_as_double(TL_F8E4M3, buf, 0) == 448.0);
    tli_store_from_double(TL_F8E4M3, buf, 0, -INFINITY);
    assert_int_equal(buf[0], 0xfe);
    tli_store_from_double(TL_F8E4M3, buf, 0, NAN);
    assert_int_equal(buf[0], 0x7f);
    assert_true(isnan(tli_load_as_double(TL_F8E4M3, buf, 0)));
    tli_store_from_double(TL_F8E4M3, buf, 5, -0x1p-9);
    assert_int_equal(buf[5], 0x81);
    assert_true(tli_load_as_double(TL_F8E4M3, buf, 5) == -0x1p-9);

    /* 1.125 is the tie between 1 (0x3c) and 1.25 (0x3d) */
    tli_store_from_double(TL_F8E5M2, buf, 4, 1.125);
    assert_int_equal(buf[4], 0x3c);
    tli_store_from_double(TL_F8E5M2, buf, 4, 1.125 + 0x1p-40);
    assert_int_equal(buf[4], 0x3d);
    assert_true(tli_load_as_double(TL_F8E5M2, buf, 4) == 1.25);
    assert_int_equal(buf[3], 0xa5);
    assert_int_equal(buf[5], 0x81);
    tli_store_from_double(TL_F8E5M2, buf, 1, INFINITY); /* saturates: no infinity is stored */
    assert_int_equal(buf[1], 0x7b);
    assert_true(tli_load_as_double(TL_F8E5M2, buf, 1) == 57344.0);
    tli_store_from_double(TL_F8E5M2, buf, 1, -0.0);
    assert_int_equal(buf[1], 0x80);
    assert_true(signbit(tli_load_as_double(TL_F8E5M2, buf, 1)));
    buf[1] = 0x7c;
    assert_true(tli_load_as_double(TL_F8E5M2, buf, 1) == INFINITY);
    buf[1] = 0xfc;
    assert_true(tli_load_as_double(TL_F8E5M2, buf, 1) == -INFINITY);
    buf[1] = 0x7e;
    assert_true(isnan(tli_load_as_double(TL_F8E5M2, buf, 1)));
    buf[1] = 0x01;
    assert_true(tli_load_as_double(TL_F8E5M2, buf, 1) == 0x1p-16);
    /* the same byte means different values in the two formats */
    buf[0] = 0x7e;
    assert_true(tli_load_as_double(TL_F8E4M3, buf, 0) == 448.0);
    assert_true(isnan(tli_load_as_double(TL_F8E5M2, buf, 0)));
}

/* ------------------------------------------------------------------------ */
/* Random fills and checks                                                   */
/* ------------------------------------------------------------------------ */

/* tl_random_host's 8-bit fills are its f32 draws (the same seed and range)
 * rounded by tl_f32_to_f8e4m3 / tl_f32_to_f8e5m2, which is what the device
 * does with its twins of those conversions: every byte is a finite code
 * between lo and hi each rounded to the format (rounding is monotonic;
 * hi's rounding itself may come out, or a code above hi when the range is
 * narrower than the format's spacing), the same for the same seed, other
 * for another, and spread over the range. */
static void test_random_host(void **state)
{
    (void)state;
    enum { N = 20000 };
    static const double ranges[][2] = {{-3, 5}, {-1, 1}, {0, 0.001}, {-448, 448}, {-57344, 57344}, {2, 2}};
    float *f32 = malloc(N * sizeof *f32);
    uint8_t *a = malloc(N), *b = malloc(N);
    assert_true(f32 && a && b);
    for (size_t i = 0; i < TEST_COUNT(formats); i++) {
        const f8_format *f = &formats[i];
        for (size_t r = 0; r < TEST_COUNT(ranges); r++) {
            double lo = ranges[r][0], hi = ranges[r][1];
            if (hi > f->max) /* beyond e4m3's range: refused (below) */
                continue;
            uint64_t seed = 40 + r;
            assert_status(tl_random_host(a, f->dt, N, seed, lo, hi), TL_OK);
            assert_status(tl_random_host(f32, TL_F32, N, seed, lo, hi), TL_OK);
            double lo8 = f->dec(f->enc((float)lo)), hi8 = f->dec(f->enc((float)hi));
            bool seen[256] = {false};
            int distinct = 0;
            for (int j = 0; j < N; j++) {
                double v = f->dec(a[j]);
                if (a[j] != f->enc(f32[j]))
                    fail_msg("%s [%g, %g) element %d: 0x%02x, not the f32 draw %a rounded (0x%02x)", f->name, lo,
                             hi, j, a[j], f32[j], f->enc(f32[j]));
                if (!isfinite(v) || v < lo8 || v > hi8)
                    fail_msg("%s [%g, %g) element %d: 0x%02x = %g", f->name, lo, hi, j, a[j], v);
                distinct += !seen[a[j]];
                seen[a[j]] = true;
            }
            /* the finite codes in the range, or at least 40 of them */
            int in_range = 0;
            for (unsigned c = 0; c < 256; c++) {
                float v = f->dec((uint8_t)c);
                in_range += isfinite(v) && v >= lo && v < hi && !(v == 0 && (c & 0x80));
            }
            assert_true(distinct >= (in_range < 40 ? in_range : 40));
            assert_status(tl_random_host(b, f->dt, N, seed, lo, hi), TL_OK);
            assert_memory_equal(a, b, N);
            if (lo < hi) {
                assert_status(tl_random_host(b, f->dt, N, seed + 1000, lo, hi), TL_OK);
                assert_memory_not_equal(a, b, N);
            }
        }
    }
    free(f32), free(a), free(b);
}

/* The range must lie within the format's finite values (nothing saturates);
 * tl_random_fill checks the same before it needs a device. */
static void test_random_ranges(void **state)
{
    (void)state;
    uint8_t v[4];
    assert_status(tl_random_host(v, TL_F8E4M3, 4, 1, -448, 448), TL_OK);
    assert_status(tl_random_host(v, TL_F8E4M3, 4, 1, -449, 0), TL_ERR_INVALID_ARG);
    assert_status(tl_random_host(v, TL_F8E4M3, 4, 1, 0, 448.5), TL_ERR_INVALID_ARG);
    assert_status(tl_random_host(v, TL_F8E4M3, 4, 1, 0, 1000), TL_ERR_INVALID_ARG);
    assert_status(tl_random_host(v, TL_F8E5M2, 4, 1, -57344, 57344), TL_OK);
    assert_status(tl_random_host(v, TL_F8E5M2, 4, 1, -57345, 0), TL_ERR_INVALID_ARG);
    assert_status(tl_random_host(v, TL_F8E5M2, 4, 1, 0, INFINITY), TL_ERR_INVALID_ARG);
    assert_status(tl_random_host(v, TL_F8E5M2, 4, 1, 1, 0), TL_ERR_INVALID_ARG);
    assert_status(tl_random_host(NULL, TL_F8E5M2, 4, 1, 0, 1), TL_ERR_INVALID_ARG);
    assert_status(tl_random_host(NULL, TL_F8E5M2, 0, 1, 0, 1), TL_OK);
    /* the device call checks its arguments first, then wants a device */
    assert_status(tl_random_fill(ctx, 0x1001, TL_F8E4M3, 4, 1, -1, 1, NULL), TL_ERR_NO_DEVICE);
    assert_status(tl_random_fill(ctx, 0x1001, TL_F8E4M3, 4, 1, -500, 1, NULL), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "f8e4m3 [-448, 448]"));
    assert_status(tl_random_fill(ctx, 0x1001, TL_F8E5M2, 4, 1, 0, 60000, NULL), TL_ERR_INVALID_ARG);
    assert_non_null(strstr(tl_ctx_error(ctx), "f8e5m2 [-57344, 57344]"));
}

/* tl_check reads 8-bit spans as their values: codes equal to the rounded
 * reference pass at the format's precision and fail at a tighter one; a
 * NaN code is non-finite. */
static void test_check_spans(void **state)
{
    (void)state;
    enum { N = 512 };
    double ref[N];
    uint8_t out[N];
    for (int i = 0; i < N; i++)
        ref[i] = sin(i * 0.1) * 3;
    for (size_t i = 0; i < TEST_COUNT(formats); i++) {
        const f8_format *f = &formats[i];
        for (int j = 0; j < N; j++)
            out[j] = tli_f64_to_f8(f->dt, ref[j]);
        tl_span o = {.dtype = f->dt, .n = N, .host = out}, r = {.dtype = TL_F64, .n = N, .host = ref};
        tl_check_result res;
        double ulp = pow(2.0, -f->mbits); /* relative spacing at 1 */
        assert_status(tl_check(ctx, &o, &r, ulp, &res), TL_OK);
        assert_true(res.pass);
        assert_true(res.rel_err > ulp / 64 && res.rel_err < ulp / 2);
        assert_status(tl_check(ctx, &o, &r, ulp / 64, &res), TL_OK);
        assert_false(res.pass);
        out[7] = 0x7f; /* NaN in both formats */
        assert_status(tl_check(ctx, &o, &r, 1.0, &res), TL_OK);
        assert_false(res.pass);
        assert_int_equal(res.nonfinite, 1);
        assert_int_equal(res.first_bad, 7);
    }
}

/* ------------------------------------------------------------------------ */
/* Kernels of 8-bit floats                                                   */
/* ------------------------------------------------------------------------ */


/* What the kernel computes, by the formats' definitions: each operation
 * on the f32 values of its operands, rounded to e4m3 (to e5m2 at the
 * end). */
static uint8_t fp8_kernel_ref(uint8_t x)
{
    float xv = tl_f8e4m3_to_f32(x);
    float p = tl_f8e4m3_to_f32(tl_f32_to_f8e4m3(xv * 1.5f));
    float y = tl_f8e4m3_to_f32(tl_f32_to_f8e4m3(p - 0x1p-9f));
    return tl_f32_to_f8e5m2(y);
}

static void test_kernel(void **state)
{
    (void)state;
    enum { ROWS = 50 }; /* two blocks, the second ragged */
    uint8_t x[ROWS * 64], y[ROWS * 64];
    for (int i = 0; i < ROWS * 64; i++) /* every code but the NaNs, twelve times over */
        x[i] = (uint8_t)((i * 7) % 256 == 0x7f || (i * 7) % 256 == 0xff ? 0 : (i * 7) % 256);
    memset(y, 0xa5, sizeof y);
    tl_kernel *k = zoo_fp8(ctx);
    assert_status(tl_kernel_status(k), TL_OK);
    tl_arg args[] = {tl_arg_int(ROWS), tl_arg_hptr(x), tl_arg_hptr(y)};
    assert_status(tl_interpret(k, 3, args), TL_OK);
    for (int i = 0; i < ROWS * 64; i++)
        if (y[i] != fp8_kernel_ref(x[i]))
            fail_msg("element %d: x 0x%02x (%g) gives 0x%02x (%g), want 0x%02x", i, x[i], tl_f8e4m3_to_f32(x[i]),
                     y[i], tl_f8e5m2_to_f32(y[i]), fp8_kernel_ref(x[i]));
    static const char *const targets[] = {"sm_80", "sm_90a"};
    for (size_t t = 0; t < TEST_COUNT(targets); t++) {
        char *ptx = NULL;
        tl_status st = tl_kernel_ptx(k, targets[t], &ptx);
        tl_free_host(ptx);
        if (st == TL_ERR_NO_NVRTC) {
            tl_kernel_destroy(k);
            print_message("  skip: NVRTC is missing: the generated source was not compiled\n");
            skip();
        }
        if (st != TL_OK)
            fail_msg("NVRTC rejected the source for %s: %s", targets[t], tl_ctx_error(ctx));
    }
    tl_kernel_destroy(k);
}

/* ------------------------------------------------------------------------ */
/* The cuBLASLt baseline's refusals, before any GPU call                     */
/* ------------------------------------------------------------------------ */

/* tl_baseline_gemm on an offline context: an 8-bit GEMM cuBLASLt can run
 * gets as far as wanting a device; one it cannot (B as [K, N], rows or
 * pointers off 16 bytes, an f32 output with a bias, pointer arrays) is
 * TL_ERR_UNSUPPORTED saying why, and an 8-bit output TL_ERR_DTYPE. */
static void expect_baseline(const tl_gemm_desc *d, const tl_gemm_args *g, tl_status want, const char *says)
{
    tl_status st = tl_baseline_gemm_ex(ctx, d, g, NULL);
    if (st != want)
        fail_msg("%s %lldx%lldx%lld -> %s, trans_b %d, bias %d: %s (%s), want %s", tl_dtype_name(d->in_dtype),
                 (long long)d->m, (long long)d->n, (long long)d->k, tl_dtype_name(d->out_dtype), d->trans_b,
                 d->has_bias, tl_status_name(st), tl_ctx_error(ctx), tl_status_name(want));
    if (says && !strstr(tl_ctx_error(ctx), says))
        fail_msg("the message \"%s\" lacks \"%s\"", tl_ctx_error(ctx), says);
}

static void test_baseline_offline(void **state)
{
    (void)state;
    tl_gemm_args g = tl_gemm_default_args();
    g.a = 0x10000, g.b = 0x20000, g.c = 0x30000, g.bias = 0x40000;
    for (size_t i = 0; i < TEST_COUNT(formats); i++) {
        tl_gemm_desc d = {.m = 200, .n = 264, .k = 144, .in_dtype = formats[i].dt, .out_dtype = TL_BF16,
                          .trans_b = 1};
        expect_baseline(&d, &g, TL_ERR_NO_DEVICE, "no device");
        assert_status(tl_baseline_gemm(ctx, &d, g.a, g.b, 0, g.c, NULL), TL_ERR_NO_DEVICE);
        static const tl_dtype outs[] = {TL_F16, TL_F32};
        for (size_t o = 0; o < TEST_COUNT(outs); o++) {
            d.out_dtype = outs[o];
            expect_baseline(&d, &g, TL_ERR_NO_DEVICE, NULL);
        }
        d.out_dtype = formats[i].dt;
        expect_baseline(&d, &g, TL_ERR_DTYPE, "out_dtype");
        d.out_dtype = TL_BF16;
        /* the bias is of out_dtype: bf16 and f16 outputs, not f32 */
        d.has_bias = 1, d.epilogue = TL_EPI_GELU_TANH;
        expect_baseline(&d, &g, TL_ERR_NO_DEVICE, NULL);
        d.out_dtype = TL_F32;
        expect_baseline(&d, &g, TL_ERR_UNSUPPORTED, "bf16 bias");
        d.has_bias = 0;
        expect_baseline(&d, &g, TL_ERR_NO_DEVICE, NULL); /* the activation alone is fine */
        d.epilogue = TL_EPI_GELU_ERF;
        expect_baseline(&d, &g, TL_ERR_UNSUPPORTED, "tanh");
        d.epilogue = TL_EPI_NONE, d.out_dtype = TL_BF16;
        /* only the "TN" form: B as [N, K] */
        d.trans_b = 0;
        expect_baseline(&d, &g, TL_ERR_UNSUPPORTED, "[N, K] only");
        d.trans_b = 1;
        /* 16-byte rows: K, lda, ldb in bytes; N, ldc in out_dtype's */
        d.k = 136;
        expect_baseline(&d, &g, TL_ERR_UNSUPPORTED, "K = 136");
        d.k = 144, d.n = 260;
        expect_baseline(&d, &g, TL_ERR_UNSUPPORTED, "N = 260");
        d.out_dtype = TL_F32; /* 260 f32 are 1040 bytes */
        expect_baseline(&d, &g, TL_ERR_NO_DEVICE, NULL);
        d.out_dtype = TL_BF16, d.n = 264;
        tl_gemm_args h = g;
        h.lda = 152;
        expect_baseline(&d, &h, TL_ERR_UNSUPPORTED, "lda = 152");
        h.lda = 160, h.ldb = 168;
        expect_baseline(&d, &h, TL_ERR_UNSUPPORTED, "ldb = 168");
        h.ldb = 176, h.ldc = 268;
        expect_baseline(&d, &h, TL_ERR_UNSUPPORTED, "ldc = 268");
        h.ldc = 272;
        expect_baseline(&d, &h, TL_ERR_NO_DEVICE, NULL);
        h.batch = 3, h.stride_a = 200 * 160 + 8, h.stride_b = 264 * 176, h.stride_c = 200 * 272;
        expect_baseline(&d, &h, TL_ERR_UNSUPPORTED, "stride_a");
        h.stride_a = 200 * 160, h.stride_c = 200 * 272 + 4;
        expect_baseline(&d, &h, TL_ERR_UNSUPPORTED, "stride_c");
        h.stride_c = 200 * 272;
        h.alpha = 0.375; /* scale_a scale_b */
        expect_baseline(&d, &h, TL_ERR_NO_DEVICE, NULL);
        /* pointers: 16-byte aligned */
        h = g;
        h.b = g.b + 8;
        expect_baseline(&d, &h, TL_ERR_UNSUPPORTED, "b = 0x20008");
        h.b = g.b, h.c = g.c + 2;
        expect_baseline(&d, &h, TL_ERR_UNSUPPORTED, "c = 0x30002");
        /* pointer arrays: cuBLASLt has none */
        h = g;
        h.a = h.b = h.c = 0;
        h.a_array = 0x1000, h.b_array = 0x2000, h.c_array = 0x3000, h.batch = 2;
        expect_baseline(&d, &h, TL_ERR_UNSUPPORTED, "pointer-array");
        /* K = 0 reads neither operand: no row of them to align */
        d.k = 0;
        h = g;
        h.a = h.b = 0;
        expect_baseline(&d, &h, TL_ERR_NO_DEVICE, NULL);
    }
    /* the 16-bit inputs keep their rules: any alignment, the output the input type or f32 */
    tl_gemm_desc d = {.m = 7, .n = 9, .k = 5, .in_dtype = TL_BF16, .out_dtype = TL_F16};
    expect_baseline(&d, &g, TL_ERR_UNSUPPORTED, "cuBLAS has no");
    d.out_dtype = TL_BF16;
    tl_gemm_args h = g;
    h.a = g.a + 2;
    expect_baseline(&d, &h, TL_ERR_NO_DEVICE, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_decode_e4m3),
        cmocka_unit_test(test_decode_e5m2),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_midpoints),
        cmocka_unit_test(test_saturation_and_nan),
        cmocka_unit_test(test_underflow),
        cmocka_unit_test(test_smallest_normal),
        cmocka_unit_test(test_device_matches_host),
        cmocka_unit_test(test_load_store),
        cmocka_unit_test(test_random_host),
        cmocka_unit_test(test_random_ranges),
        cmocka_unit_test(test_check_spans),
        cmocka_unit_test(test_kernel),
        cmocka_unit_test(test_baseline_offline),
    };
    return cmocka_run_group_tests_name("fp8", tests, offline_setup, ctx_teardown);
}
