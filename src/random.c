/*
 * random.c - seeded uniform random fills, on the device and bit-identically
 * on the host. Element i is a function of (seed, i) alone: a splitmix64
 * hash, whose top bits become a uniform number in [0, 1), scaled with
 * correctly rounded operations on both sides so the results agree exactly;
 * the 16- and 8-bit floats round that f32 with conversions that agree bit
 * for bit too (tl_f32_to_f8e4m3 here, tl_to_f8e4m3 in tl_device.cuh).
 */
#include "program.h"

#include "half.h"

#include <math.h>
#include <string.h>

static const char random_src[] =
    "#include \"tl_device.cuh\"\n"
    "// splitmix64's finaliser: a good 64-bit mix of a counter.\n"
    "__device__ __forceinline__ tl_u64 tl_mix64(tl_u64 z)\n"
    "{\n"
    "    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;\n"
    "    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;\n"
    "    return z ^ (z >> 31);\n"
    "}\n"
    "extern \"C\" __global__ void tl_random_fill(void *out, long long n, int dtype, tl_u64 seed,\n"
    "                                           double lo, double hi)\n"
    "{\n"
    "    const float lo_f = (float)lo, span_f = (float)(hi - lo);\n"
    "    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;\n"
    "         i += (long long)gridDim.x * blockDim.x) {\n"
    "        tl_u64 h = tl_mix64(seed + (tl_u64)i * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL);\n"
    "        float u = (float)(h >> 40) * 5.9604644775390625e-08f; // 2^-24\n"
    "        float x = __fadd_rn(lo_f, __fmul_rn(span_f, u));\n"
    "        double ud = (double)(h >> 11) * 1.1102230246251565e-16; // 2^-53\n"
    "        switch (dtype) {\n"
    "        case 1: ((float *)out)[i] = x; break;\n"
    "        case 2: ((tl_f16 *)out)[i] = tl_to_f16(x); break;\n"
    "        case 3: ((tl_bf16 *)out)[i] = tl_to_bf16(x); break;\n"
    "        case 4: ((int *)out)[i] = (int)((long long)lo + (long long)floor((hi - lo) * ud)); break;\n"
    "        case 6: ((double *)out)[i] = __dadd_rn(lo, __dmul_rn(hi - lo, ud)); break;\n"
    "        case 8: ((tl_f8e4m3 *)out)[i] = tl_to_f8e4m3(x); break;\n"
    "        case 9: ((tl_f8e5m2 *)out)[i] = tl_to_f8e5m2(x); break;\n"
    "        }\n"
    "    }\n"
    "}\n";

/* The kernel's switch numbers the dtypes by their enum values. */
_Static_assert(TL_F32 == 1 && TL_F16 == 2 && TL_BF16 == 3 && TL_I32 == 4 && TL_F64 == 6 && TL_F8E4M3 == 8 &&
                   TL_F8E5M2 == 9,
               "random_src's dtype codes");

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static bool dtype_supported(tl_dtype dt)
{
    return dt == TL_F32 || dt == TL_F16 || dt == TL_BF16 || dt == TL_I32 || dt == TL_F64 || dt == TL_F8E4M3 ||
           dt == TL_F8E5M2;
}

/* The largest finite value of an 8-bit float; 0 for other types. */
static double f8_max(tl_dtype dt) { return dt == TL_F8E4M3 ? 448.0 : dt == TL_F8E5M2 ? 57344.0 : 0.0; }

/* A range the dtype can hold: finite, lo <= hi, and for i32 within
 * [-2^31, 2^31] (the integers drawn are in [lo, hi)), so that no
 * conversion overflows (hi = 1e30 used to give negative values); for the
 * 8-bit floats within their finite range, since the conversion saturates
 * and would pile the draws beyond it onto the largest value. */
static bool range_ok(tl_dtype dtype, double lo, double hi)
{
    if (!(lo <= hi) || !isfinite(lo) || !isfinite(hi) || !isfinite(hi - lo))
        return false;
    if (f8_max(dtype) > 0)
        return lo >= -f8_max(dtype) && hi <= f8_max(dtype);
    return dtype != TL_I32 || (lo >= -2147483648.0 && hi <= 2147483648.0);
}

TL_API tl_status tl_random_host(void *dst, tl_dtype dtype, int64_t n, uint64_t seed, double lo, double hi)
{
    if ((!dst && n > 0) || n < 0 || !dtype_supported(dtype) || !range_ok(dtype, lo, hi))
        return TL_ERR_INVALID_ARG;
    const float lo_f = (float)lo, span_f = (float)(hi - lo);
    for (int64_t i = 0; i < n; i++) {
        uint64_t h = mix64(seed + (uint64_t)i * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL);
        float u = (float)(h >> 40) * 5.9604644775390625e-08f;
        float x = lo_f + span_f * u; /* -std=c11: no contraction into an fma */
        double ud = (double)(h >> 11) * 1.1102230246251565e-16;
        switch (dtype) {
        case TL_F32: ((float *)dst)[i] = x; break;
        case TL_F16: ((uint16_t *)dst)[i] = tl_f32_to_f16(x); break;
        case TL_BF16: ((uint16_t *)dst)[i] = tl_f32_to_bf16(x); break;
        case TL_I32: ((int32_t *)dst)[i] = (int32_t)((int64_t)lo + (int64_t)floor((hi - lo) * ud)); break;
        case TL_F64: ((double *)dst)[i] = lo + (hi - lo) * ud; break;
        case TL_F8E4M3: ((uint8_t *)dst)[i] = tl_f32_to_f8e4m3(x); break;
        case TL_F8E5M2: ((uint8_t *)dst)[i] = tl_f32_to_f8e5m2(x); break;
        default: break;
        }
    }
    return TL_OK;
}

TL_API tl_status tl_random_fill(tl_ctx *ctx, uint64_t dptr, tl_dtype dtype, int64_t n, uint64_t seed,
                                double lo, double hi, void *stream)
{
    if (!ctx)
        return TL_ERR_INVALID_ARG;
    if ((!dptr && n > 0) || n < 0 || !dtype_supported(dtype) || !range_ok(dtype, lo, hi))
        return tli_fail(ctx, TL_ERR_INVALID_ARG,
                        "tl_random_fill: need a pointer, n >= 0, dtype f32/f16/bf16/i32/f64/f8e4m3/f8e5m2 "
                        "and a finite range lo <= hi (for i32 within [-2^31, 2^31], f8e4m3 [-448, 448], "
                        "f8e5m2 [-57344, 57344])");
    if (dptr % tl_dtype_size(dtype))
        return tli_fail(ctx, TL_ERR_INVALID_ARG, "tl_random_fill: dptr = 0x%llx is not aligned to its %zu-byte "
                        "elements", (unsigned long long)dptr, tl_dtype_size(dtype));
    if (!ctx->has_device)
        return tli_fail(ctx, TL_ERR_NO_DEVICE, "tl_random_fill: the context has no device");
    const tl_program *p;
    unsigned since = tli_fail_count();
    tl_status st = tli_op_program_source(ctx, "random_fill", random_src, "tl_random_fill", 256, &p);
    if (st != TL_OK || n == 0)
        return tli_fail_as(ctx, st, "tl_random_fill", since);
    int64_t blocks = (n + 255) / 256, cap = (int64_t)ctx->info.sm_count * 16;
    int64_t grid[3] = {blocks < cap ? blocks : cap, 1, 1};
    long long nn = n;
    int dt = (int)dtype;
    void *params[] = {&dptr, &nn, &dt, &seed, &lo, &hi};
    return tli_fail_as(ctx, tli_launch_raw(p, grid, params, stream), "tl_random_fill", since);
}
