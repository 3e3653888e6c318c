// tl_device.cuh - libtilec's device runtime, embedded in the library and
// handed to NVRTC as an in-memory header. Generated kernels include it and
// nothing else: no toolkit header is needed at run time, and NVRTC compiles a
// kernel in tens of milliseconds.
//
// What it provides: 16-bit float types and conversions (inline PTX), masked
// scalar loads, 4/8/16-byte vector loads and stores, small math helpers.
#pragma once

typedef long long tl_i64;
typedef unsigned long long tl_u64;

// Storage-only 16-bit floats: arithmetic happens in f32 (the generated code
// converts explicitly), which is what the CPU interpreter mirrors.
struct tl_f16 { unsigned short bits; };
struct tl_bf16 { unsigned short bits; };
// Storage-only 8-bit floats (OCP FP8). The tensor cores read them straight
// from shared memory; the conversions below serve casts and element-wise
// code, in portable integer arithmetic (bit for bit the host's
// tl_f32_to_f8e4m3 and friends) since sm_80 has no instruction for them.
struct tl_f8e4m3 { unsigned char bits; };
struct tl_f8e5m2 { unsigned char bits; };

__device__ __forceinline__ float tl_f32(float x) { return x; }
__device__ __forceinline__ float tl_f32(double x) { return (float)x; }
__device__ __forceinline__ float tl_f32(tl_f16 h)
{
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
    return f;
}
__device__ __forceinline__ float tl_f32(tl_bf16 h) { return __uint_as_float(((unsigned)h.bits) << 16); }

// An 8-bit float of `mant` fraction bits and exponent bias `bias` to f32
// (exact); ieee_top: the top exponent is infinity / NaN (E5M2), else only
// S.1111.111 is NaN (E4M3).
__device__ __forceinline__ float tl_f8_to_f32(unsigned x, int mant, int bias, bool ieee_top)
{
    const unsigned top = (1u << (7 - mant)) - 1u, mask = (1u << mant) - 1u;
    const unsigned e = (x >> mant) & top, m = x & mask, sign = (x & 0x80u) << 24;
    unsigned u;
    if (e == top && (ieee_top || m == mask))
        u = (ieee_top && m == 0) ? 0x7f800000u : 0x7fc00000u;
    else if (e == 0) // subnormal: m 2^(1 - bias - mant), exact in f32
        u = __float_as_uint((float)m * __uint_as_float((unsigned)(127 + 1 - bias - mant) << 23));
    else
        u = ((e + 127u - (unsigned)bias) << 23) | (m << (23 - mant));
    return __uint_as_float(sign | u);
}
// f32 to an 8-bit float, to nearest even, saturating to max_code (the
// largest finite value; infinity too), NaN to 0x7f.
__device__ __forceinline__ unsigned char tl_f32_to_f8(float f, int mant, int bias, unsigned max_code)
{
    const unsigned u = __float_as_uint(f), sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return 0x7fu;
    unsigned code;
    if (a < ((unsigned)(127 + 1 - bias) << 23)) // below the least normal: m = rint(|f| 2^(bias - 1 + mant))
        code = (unsigned)rintf(__uint_as_float(a) * __uint_as_float((unsigned)(127 + bias - 1 + mant) << 23));
    else { // round the fraction to `mant` bits; a carry bumps the exponent
        const int shift = 23 - mant;
        const unsigned r = a + ((1u << (shift - 1)) - 1u) + ((a >> shift) & 1u);
        code = (r >> shift) - ((unsigned)(127 - bias) << mant);
    }
    return (unsigned char)(sign | (code > max_code ? max_code : code));
}
__device__ __forceinline__ float tl_f32(tl_f8e4m3 h) { return tl_f8_to_f32(h.bits, 3, 7, false); }
__device__ __forceinline__ float tl_f32(tl_f8e5m2 h) { return tl_f8_to_f32(h.bits, 2, 15, true); }
__device__ __forceinline__ tl_f8e4m3 tl_to_f8e4m3(float f) { tl_f8e4m3 h; h.bits = tl_f32_to_f8(f, 3, 7, 0x7eu); return h; }
__device__ __forceinline__ tl_f8e5m2 tl_to_f8e5m2(float f) { tl_f8e5m2 h; h.bits = tl_f32_to_f8(f, 2, 15, 0x7bu); return h; }
// f64 or a 64-bit integer as f32 rounded to odd: truncated toward zero,
// its last bit set when that dropped anything. Rounded on to a format two or
// more bits narrower (bf16, the 8-bit floats) this gives that format's
// nearest value; rounding to nearest twice can miss it at ties (2^24 +
// 2^16 + 1 became bf16 2^24, not 2^24 + 2^17).
__device__ __forceinline__ float tl_f32_odd(double d)
{
    float f;
    asm("cvt.rz.f32.f64 %0, %1;" : "=f"(f) : "d"(d));
    return (double)f == d || d != d ? f : __uint_as_float(__float_as_uint(f) | 1u);
}
__device__ __forceinline__ float tl_f32_odd(long long v)
{
    float f;
    asm("cvt.rz.f32.s64 %0, %1;" : "=f"(f) : "l"(v));
    return (long long)f == v ? f : __uint_as_float(__float_as_uint(f) | 1u);
}
__device__ __forceinline__ tl_f8e4m3 tl_to_f8e4m3(double d) { return tl_to_f8e4m3(tl_f32_odd(d)); }
__device__ __forceinline__ tl_f8e5m2 tl_to_f8e5m2(double d) { return tl_to_f8e5m2(tl_f32_odd(d)); }
__device__ __forceinline__ tl_f8e4m3 tl_to_f8e4m3(long long v) { return tl_to_f8e4m3(tl_f32_odd(v)); }
__device__ __forceinline__ tl_f8e5m2 tl_to_f8e5m2(long long v) { return tl_to_f8e5m2(tl_f32_odd(v)); }

__device__ __forceinline__ tl_f16 tl_to_f16(float f)
{
    tl_f16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
    return h;
}
__device__ __forceinline__ tl_f16 tl_to_f16(double d)
{
    tl_f16 h;
    asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h.bits) : "d"(d));
    return h;
}
__device__ __forceinline__ tl_bf16 tl_to_bf16(float f)
{
    tl_bf16 h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
    return h;
}
__device__ __forceinline__ tl_bf16 tl_to_bf16(double d) { return tl_to_bf16(tl_f32_odd(d)); }
__device__ __forceinline__ tl_bf16 tl_to_bf16(long long v) { return tl_to_bf16(tl_f32_odd(v)); }
// An integer reaches f16's largest value (65504) long before f32 stops
// holding it exactly: one rounding.
__device__ __forceinline__ tl_f16 tl_to_f16(long long v) { return tl_to_f16((double)v); }

// The approximate f32 math of tl_use_fast_math: one special-function-unit
// instruction each (plus a multiply), where the precise library functions
// take tens of instructions and branches.
__device__ __forceinline__ float tl_tanh_approx(float x)
{
    float y;
    asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float tl_exp2_approx(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float tl_exp_approx(float x) { return tl_exp2_approx(x * 1.44269504088896341f); }
__device__ __forceinline__ float tl_log_approx(float x)
{
    float y;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y * 0.693147180559945309f;
}
// erf after Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7 in
// exact arithmetic, 5.3e-7 measured in f32, under 1e-6 with the approximate
// rcp and ex2): 1 - t (a1 + t (a2 + ... a5 t)) exp(-x^2), t = 1 / (1 + p|x|),
// odd in x; two special-function instructions and eight FMA-pipe ones,
// where erff takes a long polynomial per range.
__device__ __forceinline__ float tl_erf_approx(float x)
{
    const float ax = fabsf(x);
    float t;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(t) : "f"(fmaf(0.3275911f, ax, 1.0f)));
    float p = fmaf(1.061405429f, t, -1.453152027f);
    p = fmaf(p, t, 1.421413741f);
    p = fmaf(p, t, -0.284496736f);
    p = fmaf(p, t, 0.254829592f);
    p *= t;
    const float e = tl_exp2_approx(ax * ax * -1.44269504088896341f);
    return copysignf(fmaf(-p, e, 1.0f), x);
}
// The intrinsic rather than inline asm: the compiler knows it has no side
// effects, so a division repeated in an unrolled loop (softmax's 1 / sum for
// each of 32 elements) is computed once; as asm it was 32 live copies and
// spills at 64 registers.
__device__ __forceinline__ float tl_div_approx(float a, float b) { return __fdividef(a, b); }

// Constants of the 16-bit types, from bits the library rounded on the host.
__device__ __forceinline__ tl_f16 tl_f16_bits(unsigned short b) { tl_f16 h; h.bits = b; return h; }
__device__ __forceinline__ tl_bf16 tl_bf16_bits(unsigned short b) { tl_bf16 h; h.bits = b; return h; }
__device__ __forceinline__ tl_f8e4m3 tl_f8e4m3_bits(unsigned char b) { tl_f8e4m3 h; h.bits = b; return h; }
__device__ __forceinline__ tl_f8e5m2 tl_f8e5m2_bits(unsigned char b) { tl_f8e5m2 h; h.bits = b; return h; }

template <typename T> __device__ __forceinline__ T tl_zero() { return T(0); }
template <> __device__ __forceinline__ tl_f16 tl_zero<tl_f16>() { tl_f16 h; h.bits = 0; return h; }
template <> __device__ __forceinline__ tl_bf16 tl_zero<tl_bf16>() { tl_bf16 h; h.bits = 0; return h; }
template <> __device__ __forceinline__ tl_f8e4m3 tl_zero<tl_f8e4m3>() { tl_f8e4m3 h; h.bits = 0; return h; }
template <> __device__ __forceinline__ tl_f8e5m2 tl_zero<tl_f8e5m2>() { tl_f8e5m2 h; h.bits = 0; return h; }

// A load that reads 0 outside the tensor: the address is not touched then.
template <typename T> __device__ __forceinline__ T tl_ld(const T *p, bool ok)
{
    return ok ? *p : tl_zero<T>();
}

template <typename T> __device__ __forceinline__ T tl_max(T a, T b) { return a > b ? a : b; }
template <typename T> __device__ __forceinline__ T tl_min(T a, T b) { return a < b ? a : b; }
template <typename T> __device__ __forceinline__ T tl_iabs(T a) { return a < 0 ? -a : a; }

// V elements of T that move as one 2-, 4-, 8- or 16-byte access (or two
// 16-byte ones).
template <typename T, int V> struct __align__(sizeof(T) * V > 16 ? 16 : sizeof(T) * V) tl_vec {
    union {
        T e[V];
        unsigned w[(sizeof(T) * V + 3) / 4];
    };
};

// Plain C++ accesses of aligned structs (not inline asm), so the compiler
// knows them as memory operations: it schedules them and keeps them in order
// with other stores. The alignment makes them LDG/STG.64 and .128.
struct __align__(16) tl_w4 { unsigned x, y, z, w; };
struct __align__(8) tl_w2 { unsigned x, y; };

template <int BYTES> struct tl_vec_io;
template <> struct tl_vec_io<16> {
    __device__ __forceinline__ static void ld(unsigned *w, const void *p)
    {
        tl_w4 v = *(const tl_w4 *)p;
        w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
    }
    // The store is explicit PTX: as a struct store the compiler sometimes
    // split it into scalar stores (seen in 2-D loops).
    __device__ __forceinline__ static void st(void *p, const unsigned *w)
    {
        asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n"
                     :: "l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3]) : "memory");
    }
};
template <> struct tl_vec_io<8> {
    __device__ __forceinline__ static void ld(unsigned *w, const void *p)
    {
        tl_w2 v = *(const tl_w2 *)p;
        w[0] = v.x; w[1] = v.y;
    }
    __device__ __forceinline__ static void st(void *p, const unsigned *w)
    {
        tl_w2 v; v.x = w[0]; v.y = w[1];
        *(tl_w2 *)p = v;
    }
};
template <> struct tl_vec_io<4> {
    __device__ __forceinline__ static void ld(unsigned *w, const void *p) { w[0] = *(const unsigned *)p; }
    __device__ __forceinline__ static void st(void *p, const unsigned *w) { *(unsigned *)p = w[0]; }
};

// A lone 8-bit element (a run of one of f8): one 1-byte access.
template <> struct tl_vec_io<1> {
    __device__ __forceinline__ static void ld(unsigned *w, const void *p) { w[0] = *(const unsigned char *)p; }
    __device__ __forceinline__ static void st(void *p, const unsigned *w) { *(unsigned char *)p = (unsigned char)w[0]; }
};
// A lone 16-bit element (a run of one): one 2-byte access.
template <> struct tl_vec_io<2> {
    __device__ __forceinline__ static void ld(unsigned *w, const void *p) { w[0] = *(const unsigned short *)p; }
    __device__ __forceinline__ static void st(void *p, const unsigned *w) { *(unsigned short *)p = (unsigned short)w[0]; }
};
// 32 bytes (8 f32 values, when a run is 16 bytes of a narrower tensor):
// two 16-byte accesses, each needing only 16-byte alignment.
template <> struct tl_vec_io<32> {
    __device__ __forceinline__ static void ld(unsigned *w, const void *p)
    {
        tl_vec_io<16>::ld(w, p);
        tl_vec_io<16>::ld(w + 4, (const char *)p + 16);
    }
    __device__ __forceinline__ static void st(void *p, const unsigned *w)
    {
        tl_vec_io<16>::st(p, w);
        tl_vec_io<16>::st((char *)p + 16, w + 4);
    }
};
// The alignment a vector access of BYTES needs (no access is wider than 16).
template <int BYTES> struct tl_vec_align { static const int value = BYTES > 16 ? 16 : BYTES; };

// f32 values rounded to nearest into a vector of 16-bit floats, a pair per
// cvt (element 2i in the low half of word i).
__device__ __forceinline__ unsigned tl_pack2(tl_f16 *, float lo, float hi)
{
    unsigned w;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
    return w;
}
__device__ __forceinline__ unsigned tl_pack2(tl_bf16 *, float lo, float hi)
{
    unsigned w;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
    return w;
}
template <typename T, int V> __device__ __forceinline__ void tl_pack(tl_vec<T, V> &r, const float *f)
{
#pragma unroll
    for (int i = 0; i < V / 2; ++i)
        r.w[i] = tl_pack2((T *)0, f[2 * i], f[2 * i + 1]);
}

// The 4x4 transpose of 32-bit words across a quad of lanes (q = lane % 4):
// lane q's word i goes to lane i's word q, in two exchanges of half the
// words (xor 1, then xor 2). An accumulator row's four lanes each hold one
// pair of every 8 columns; after it each holds 8 consecutive columns of
// one of four column blocks: one 16-byte store instead of four 4-byte ones.
__device__ __forceinline__ void tl_quad_transpose4(unsigned *x, int q)
{
    const bool b = (q & 1) != 0, c = (q & 2) != 0;
    unsigned s = b ? x[0] : x[1], t = b ? x[2] : x[3];
    s = __shfl_xor_sync(0xffffffffu, s, 1);
    t = __shfl_xor_sync(0xffffffffu, t, 1);
    if (b)
        x[0] = s, x[2] = t;
    else
        x[1] = s, x[3] = t;
    s = c ? x[0] : x[2];
    t = c ? x[1] : x[3];
    s = __shfl_xor_sync(0xffffffffu, s, 2);
    t = __shfl_xor_sync(0xffffffffu, t, 2);
    if (c)
        x[0] = s, x[1] = t;
    else
        x[2] = s, x[3] = t;
}

template <typename T, int V> __device__ __forceinline__ void tl_ld_vec(tl_vec<T, V> &r, const T *p)
{
    tl_vec_io<sizeof(T) * V>::ld(r.w, p);
}
template <typename T, int V> __device__ __forceinline__ void tl_st_vec(T *p, const tl_vec<T, V> &r)
{
    tl_vec_io<sizeof(T) * V>::st(p, r.w);
}

// true when p is aligned for an access of BYTES bytes.
template <int BYTES> __device__ __forceinline__ bool tl_aligned(const void *p)
{
    return ((tl_u64)p & (BYTES - 1)) == 0;
}

// Index in [0, n) with one unsigned comparison.
__device__ __forceinline__ bool tl_in(tl_i64 i, tl_i64 n) { return (tl_u64)i < (tl_u64)n; }
// a < b for an int a (an in-tile coordinate) and a 64-bit b, exactly: the
// clamp of b depends on b alone, so in an unrolled loop it is computed once
// and each element costs one 32-bit compare instead of a 64-bit add and two.
__device__ __forceinline__ bool tl_lt_i32(int a, tl_i64 b)
{
    return b > 0x7fffffffLL || a < (int)(b < -0x7fffffffLL - 1 ? -0x7fffffffLL - 1 : b);
}
// [i, i + v) inside [0, n).
__device__ __forceinline__ bool tl_in_span(tl_i64 i, tl_i64 v, tl_i64 n)
{
    return (tl_u64)i < (tl_u64)n && (tl_u64)(i + v) <= (tl_u64)n;
}

// A chunk of V consecutive elements along a tensor's last axis: elements
// base[v * stride] for lanes v whose index i + v lies in [0, n), when `ok`
// (the chunk is live and its other indices are in range). One vector access
// when the whole chunk is inside, contiguous and aligned; lane by lane at
// the edges (lanes outside read 0 and are not written).
template <typename T, int V>
__device__ __forceinline__ void tl_ld_chunk(tl_vec<T, V> &r, const T *base, tl_i64 stride, tl_i64 i,
                                            tl_i64 n, bool ok)
{
    if (ok && stride == 1 && tl_in_span(i, V, n) && tl_aligned<tl_vec_align<sizeof(T) * V>::value>(base)) {
        tl_ld_vec(r, base);
        return;
    }
#pragma unroll
    for (int v = 0; v < V; ++v)
        r.e[v] = tl_ld(base + v * stride, ok && tl_in(i + v, n));
}

template <typename T, int V>
__device__ __forceinline__ void tl_st_chunk(T *base, tl_i64 stride, tl_i64 i, tl_i64 n, bool ok,
                                            const tl_vec<T, V> &r)
{
    if (ok && stride == 1 && tl_in_span(i, V, n) && tl_aligned<tl_vec_align<sizeof(T) * V>::value>(base)) {
        tl_st_vec(base, r);
        return;
    }
#pragma unroll
    for (int v = 0; v < V; ++v)
        if (ok && tl_in(i + v, n))
            base[v * stride] = r.e[v];
}

// The L2 evict-first policy (tl_use_cache_policy's TL_CACHE_EVICT_FIRST):
// a tensor read or written once, whose lines should be the first the L2
// replaces. Not volatile, so that the compiler makes it once.
__device__ __forceinline__ unsigned long long tl_policy_evict_first()
{
    unsigned long long p;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
    return p;
}

// tl_ld_chunk / tl_st_chunk with the evict-first policy on the 16-byte
// vector access (the lane-by-lane edge keeps the default).
template <typename T, int V>
__device__ __forceinline__ void tl_ld_chunk_ef(tl_vec<T, V> &r, const T *base, tl_i64 stride, tl_i64 i, tl_i64 n,
                                               bool ok)
{
    if (sizeof(T) * V == 16 && ok && stride == 1 && tl_in_span(i, V, n) && tl_aligned<16>(base)) {
        asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;\n"
                     : "=r"(r.w[0]), "=r"(r.w[1]), "=r"(r.w[2]), "=r"(r.w[3])
                     : "l"(base), "l"(tl_policy_evict_first()));
        return;
    }
    tl_ld_chunk(r, base, stride, i, n, ok);
}
template <typename T, int V>
__device__ __forceinline__ void tl_st_chunk_ef(T *base, tl_i64 stride, tl_i64 i, tl_i64 n, bool ok,
                                               const tl_vec<T, V> &r)
{
    if (sizeof(T) * V == 16 && ok && stride == 1 && tl_in_span(i, V, n) && tl_aligned<16>(base)) {
        asm volatile("st.global.L1::no_allocate.L2::cache_hint.v4.b32 [%0], {%1, %2, %3, %4}, %5;\n"
                     :: "l"(base), "r"(r.w[0]), "r"(r.w[1]), "r"(r.w[2]), "r"(r.w[3]),
                        "l"(tl_policy_evict_first()) : "memory");
        return;
    }
    tl_st_chunk(base, stride, i, n, ok, r);
}

// ---------------------------------------------------------------- tiles
// Shared tiles are row-major with their 16-byte chunks XOR-swizzled within
// each 128-byte line group, so that the 8 rows an ldmatrix reads at one
// chunk column land in 8 different bank groups. ROW_CHUNKS: 16-byte chunks
// per row (a power of two; 0 means no swizzle).
template <int ROW_CHUNKS> __device__ __forceinline__ int tl_swz_chunk(int row, int chunk)
{
    if (ROW_CHUNKS <= 1)
        return chunk;
    const int span = ROW_CHUNKS < 8 ? ROW_CHUNKS : 8;       // chunks that rotate
    const int rows_per_line = ROW_CHUNKS < 8 ? 8 / ROW_CHUNKS : 1;
    return chunk ^ ((row / rows_per_line) % span);
}

// Element offset of (row, col) in a swizzled tile of ROW_ELEMS elements of
// ESIZE bytes per row.
template <int ROW_ELEMS, int ESIZE> __device__ __forceinline__ int tl_swz_off(int row, int col)
{
    constexpr int per_chunk = 16 / ESIZE;
    constexpr int chunks = (ROW_ELEMS * ESIZE) % 16 == 0 ? ROW_ELEMS * ESIZE / 16 : 0;
    constexpr bool pow2 = chunks > 0 && (chunks & (chunks - 1)) == 0;
    if (!pow2)
        return row * ROW_ELEMS + col;
    return row * ROW_ELEMS + tl_swz_chunk<chunks>(row, col / per_chunk) * per_chunk + col % per_chunk;
}

__device__ __forceinline__ unsigned tl_smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

// The swizzled offsets of one thread's ldmatrix rows, four registers in all.
// In an mma.sync k loop a thread's rows differ by multiples of 8 (the
// swizzle's period in rows) and its columns by even numbers of 16-byte
// chunks, so the offset of (row + dr, col + dc) is one of four per-thread
// values (the chunk XOR of dc's low chunk bits) plus a constant. Written
// as at(dr, dc) with dr and dc known at compile time once unrolled, every
// ldmatrix takes [register + immediate]; as tl_swz_off(row + dr, col + dc)
// the compiler held one register and spent two instructions per load
// (FlashAttention's sm_80 kernel, bench/NOTES.md session 15).
template <int ROW_ELEMS, int ESIZE> struct tl_swz4 {
    static constexpr int per_chunk = 16 / ESIZE;
    int off[4];
    __device__ __forceinline__ tl_swz4(int row, int col)
    {
#pragma unroll
        for (int c = 0; c < 4; ++c)
            off[c] = tl_swz_off<ROW_ELEMS, ESIZE>(row, col + 2 * c * per_chunk);
    }
    // dr % 8 == 0 and dc % (2 * per_chunk) == 0: whole 8-row groups, whole
    // chunk pairs; beyond four pairs the chunk's upper bits add plainly
    __device__ __forceinline__ int at(int dr, int dc) const
    {
        return off[dc / (2 * per_chunk) % 4] + dr * ROW_ELEMS + dc / (8 * per_chunk) * (8 * per_chunk);
    }
};

// 16-byte asynchronous copy global -> shared; with valid false the 16 bytes
// are zero-filled and global memory is not read.
__device__ __forceinline__ void tl_cp_async16(void *smem, const void *gmem, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(tl_smem_addr(smem)), "l"(gmem), "r"(valid ? 16 : 0) : "memory");
}
// The same with the evict-first policy; a chunk outside the tensor (zero
// fill, no read) takes the plain form: with the policy operand a cp.async
// of source size 0 stopped an sm_90a kernel with an illegal instruction
// (test_gpu_gemm's ragged 200x264x136, session 28).
__device__ __forceinline__ void tl_cp_async16_ef(void *smem, const void *gmem, bool valid)
{
    if (valid)
        asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n"
                     :: "r"(tl_smem_addr(smem)), "l"(gmem), "l"(tl_policy_evict_first()) : "memory");
    else
        tl_cp_async16(smem, gmem, false);
}
__device__ __forceinline__ void tl_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void tl_cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}

// ldmatrix: four 8x8 matrices of 16-bit elements; lane l gives the address
// of row l % 8 of matrix l / 8.
__device__ __forceinline__ void tl_ldmatrix_x4(unsigned *r, const void *smem)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(tl_smem_addr(smem)));
}
__device__ __forceinline__ void tl_ldmatrix_x4_trans(unsigned *r, const void *smem)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(tl_smem_addr(smem)));
}
// The same at a shared-space address.
__device__ __forceinline__ void tl_ldsm_x4(unsigned *r, unsigned addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void tl_ldsm_x4_trans(unsigned *r, unsigned addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// D = A B + D for one 16x8x16 tile; a: 4 registers, b: 2, d: 4 floats.
template <typename T> __device__ __forceinline__ void tl_mma_16816(float *d, const unsigned *a, const unsigned *b);
template <> __device__ __forceinline__ void tl_mma_16816<tl_bf16>(float *d, const unsigned *a, const unsigned *b)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <> __device__ __forceinline__ void tl_mma_16816<tl_f16>(float *d, const unsigned *a, const unsigned *b)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Converts a value to the element type T of a store.
// Two f32 values rounded to 16 bits by one instruction (cvt.rn.*x2.f32
// puts its first source in the high half), into two adjacent elements: a
// copy from an f32 fragment into a 16-bit one converts pairs this way, and
// tl_pack2 of the pair then reads the converted register unchanged.
__device__ __forceinline__ void tl_conv2(tl_bf16 *d, float lo, float hi)
{
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    d[0].bits = (unsigned short)r;
    d[1].bits = (unsigned short)(r >> 16);
}
__device__ __forceinline__ void tl_conv2(tl_f16 *d, float lo, float hi)
{
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    d[0].bits = (unsigned short)r;
    d[1].bits = (unsigned short)(r >> 16);
}
template <typename T> __device__ __forceinline__ T tl_conv(float x) { return (T)x; }
template <> __device__ __forceinline__ tl_f16 tl_conv<tl_f16>(float x) { return tl_to_f16(x); }
template <> __device__ __forceinline__ tl_bf16 tl_conv<tl_bf16>(float x) { return tl_to_bf16(x); }
template <> __device__ __forceinline__ tl_f8e4m3 tl_conv<tl_f8e4m3>(float x) { return tl_to_f8e4m3(x); }
template <> __device__ __forceinline__ tl_f8e5m2 tl_conv<tl_f8e5m2>(float x) { return tl_to_f8e5m2(x); }

// ------------------------------------------------------- sm_90a: wgmma
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// Shared memory written by threads (cp.async included) must be fenced into
// the async proxy before wgmma reads it.
__device__ __forceinline__ void tl_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void tl_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void tl_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void tl_wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}
// Descriptor of a K-major operand tile with 128-byte rows in the 128-byte
// swizzle (8-row, 1024-byte atoms): start address, LBO unused (1), SBO =
// 1024 bytes between atoms, layout type 1.
__device__ __forceinline__ unsigned long long tl_wgmma_desc_sw128(const void *smem)
{
    unsigned long long addr = tl_smem_addr(smem);
    return ((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
// Descriptor of an MN-major operand: 64-element (128-byte) rows along MN in
// the 128-byte swizzle, 8-row atoms along K 1024 bytes apart (SBO), blocks
// of 64 MN-columns `lbo` bytes apart (LBO).
__device__ __forceinline__ unsigned long long tl_wgmma_desc_mn_sw128(const void *smem, unsigned lbo)
{
    unsigned long long addr = tl_smem_addr(smem);
    return ((addr & 0x3FFFF) >> 4) | ((unsigned long long)((lbo >> 4) & 0x3FFF) << 16) | (64ull << 32) |
           (1ull << 62);
}
// The descriptor d with its start address moved `bytes` on (a multiple of
// 16). Only the low word changes: the start address is its low field, and
// a tile inside shared memory (below 2^18 bytes) cannot carry out of it.
// A gemm's K steps take one 32-bit add each from the tile's descriptor,
// where a descriptor built from each step's address cost five instructions
// (H200 SASS, bench/NOTES.md session 21).
__device__ __forceinline__ unsigned long long tl_wgmma_desc_at(unsigned long long d, unsigned bytes)
{
    return (d & 0xFFFFFFFF00000000ull) | (unsigned)((unsigned)d + (bytes >> 4));
}
#endif

// ------------------------------------------ thread-block clusters (sm_90)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// Every thread of every block of the cluster arrives, then waits for all:
// shared-memory writes before it (release) are visible to the cluster's
// reads after it (acquire). .aligned: the whole warp executes it together.
__device__ __forceinline__ void tl_cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// This block's rank in its cluster.
__device__ __forceinline__ unsigned tl_cluster_ctarank()
{
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
// The f32 at the same shared-memory address as p in block `rank` of the
// cluster (distributed shared memory: mapa, then ld.shared::cluster).
__device__ __forceinline__ float tl_cluster_ld_f32(const float *p, unsigned rank)
{
    unsigned remote;
    float v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(tl_smem_addr(p)), "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(remote) : "memory");
    return v;
}
#endif

// ------------------------------------------------ mbarriers (sm_80 and up)
// A CUtensorMap (the TMA descriptor) as a by-value kernel parameter.
struct __align__(64) tl_tmap { unsigned long long v[16]; };

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
__device__ __forceinline__ void tl_mbar_init(unsigned long long *bar, unsigned count)
{
    asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" :: "r"(tl_smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void tl_mbar_arrive(unsigned long long *bar)
{
    asm volatile("mbarrier.arrive.shared.b64 _, [%0];\n" :: "r"(tl_smem_addr(bar)) : "memory");
}
// An arrival triggered when every cp.async this thread issued before it has
// landed (the barrier's count includes it: .noinc).
__device__ __forceinline__ void tl_cp_async_mbar_arrive(unsigned long long *bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" :: "r"(tl_smem_addr(bar)) : "memory");
}
// Waits until the barrier's phase `parity` has completed.
__device__ __forceinline__ void tl_mbar_wait(unsigned long long *bar, unsigned parity)
{
    unsigned done;
    do {
#if __CUDA_ARCH__ >= 900
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(tl_smem_addr(bar)), "r"(parity) : "memory");
#else
        asm volatile("{\n.reg .pred p;\nmbarrier.test_wait.parity.shared.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(tl_smem_addr(bar)), "r"(parity) : "memory");
#endif
    } while (!done);
}
// v as lane 0 of the warp has it. For a value the lowering knows to be the
// same in every lane (a warp or warpgroup number): the broadcast tells the
// compiler so, and it keeps the value, and the wgmma descriptors computed
// from it, in uniform registers. Every lane of the warp must call it.
__device__ __forceinline__ int tl_warp_uniform(int v) { return __shfl_sync(0xffffffffu, v, 0); }
// A barrier over `count` threads (named barrier `id`; 0 is __syncthreads's):
// the consumer warpgroups of a warp-specialised kernel synchronise among
// themselves while the producer runs on.
__device__ __forceinline__ void tl_bar_sync(int id, int count)
{
    asm volatile("bar.sync %0, %1;\n" :: "r"(id), "r"(count) : "memory");
}

// Stream-K (tl_use_stream_k): the partial accumulator of a unit goes from
// the CTA that ran it to the one that finishes its block, through a slot
// of global memory laid out [register][thread] (each store instruction
// writes consecutive words) and read back through L2 (.cg: the reader's
// L1 may hold no stale copy), and a flag per CTA: raised with release
// semantics once the slot is written, awaited with acquire semantics and
// lowered again by its reader, so a launch leaves every flag at 0.
template <int R>
__device__ __forceinline__ void tl_sk_put(float *slot, const float (&acc)[R], int tid, int threads)
{
    #pragma unroll
    for (int r = 0; r < R; ++r)
        __stcg(slot + (long long)r * threads + tid, acc[r]);
}
template <int R>
__device__ __forceinline__ void tl_sk_add(float (&acc)[R], const float *slot, int tid, int threads)
{
    #pragma unroll
    for (int r = 0; r < R; ++r)
        acc[r] += __ldcg(slot + (long long)r * threads + tid);
}
__device__ __forceinline__ void tl_sk_raise(unsigned *flag)
{
    asm volatile("st.release.gpu.global.u32 [%0], 1;" :: "l"(flag) : "memory");
}
__device__ __forceinline__ void tl_sk_await(unsigned *flag)
{
    unsigned v;
    do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
    } while (v == 0);
    asm volatile("st.relaxed.gpu.global.u32 [%0], 0;" :: "l"(flag) : "memory");
}
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// Makes the initialised barriers visible to the async proxy (TMA).
__device__ __forceinline__ void tl_mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
// The register budget moved from the producer warpgroup to the consumers
// (setmaxnreg; every warp of the warpgroup executes it).
template <int N> __device__ __forceinline__ void tl_setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(N)); }
template <int N> __device__ __forceinline__ void tl_setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(N)); }
// One arrival that also announces `bytes` of transactions (TMA) to come.
__device__ __forceinline__ void tl_mbar_expect(unsigned long long *bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
                 :: "r"(tl_smem_addr(bar)), "r"(bytes) : "memory");
}
// A box of a global tensor into shared memory, completing on bar;
// coordinates innermost first.
/* TMA stores from shared memory (a bulk group each commit); the wait with
 * .read returns once the group's reads of shared memory are done (the
 * staging tile may be rewritten), the plain wait once its writes are. */
__device__ __forceinline__ void tl_tma_store_2d(const tl_tmap *map, const void *src, int c0, int c1)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n"
                 :: "l"(map), "r"(tl_smem_addr(src)), "r"(c0), "r"(c1) : "memory");
}
__device__ __forceinline__ void tl_tma_store_3d(const tl_tmap *map, const void *src, int c0, int c1, int c2)
{
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n"
                 :: "l"(map), "r"(tl_smem_addr(src)), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
__device__ __forceinline__ void tl_tma_store_4d(const tl_tmap *map, const void *src, int c0, int c1, int c2, int c3)
{
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n"
                 :: "l"(map), "r"(tl_smem_addr(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");
}
__device__ __forceinline__ void tl_bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void tl_bulk_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read %0;\n" :: "n"(N) : "memory");
}
template <int N> __device__ __forceinline__ void tl_bulk_wait()
{
    asm volatile("cp.async.bulk.wait_group %0;\n" :: "n"(N) : "memory");
}

__device__ __forceinline__ void tl_tma_load_2d(void *dst, const tl_tmap *map, int c0, int c1, unsigned long long *bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 :: "r"(tl_smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(tl_smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void tl_tma_load_3d(void *dst, const tl_tmap *map, int c0, int c1, int c2, unsigned long long *bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
                 :: "r"(tl_smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(tl_smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void tl_tma_load_4d(void *dst, const tl_tmap *map, int c0, int c1, int c2, int c3,
                                               unsigned long long *bar)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n"
                 :: "r"(tl_smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(tl_smem_addr(bar)) : "memory");
}
// The same with the evict-first policy.
__device__ __forceinline__ void tl_tma_load_2d_ef(void *dst, const tl_tmap *map, int c0, int c1, unsigned long long *bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1, {%2, %3}], [%4], %5;\n"
                 :: "r"(tl_smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(tl_smem_addr(bar)),
                    "l"(tl_policy_evict_first()) : "memory");
}
__device__ __forceinline__ void tl_tma_load_3d_ef(void *dst, const tl_tmap *map, int c0, int c1, int c2,
                                                  unsigned long long *bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1, {%2, %3, %4}], [%5], %6;\n"
                 :: "r"(tl_smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(tl_smem_addr(bar)),
                    "l"(tl_policy_evict_first()) : "memory");
}
__device__ __forceinline__ void tl_tma_load_4d_ef(void *dst, const tl_tmap *map, int c0, int c1, int c2, int c3,
                                                  unsigned long long *bar)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6], %7;\n"
                 :: "r"(tl_smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(tl_smem_addr(bar)),
                    "l"(tl_policy_evict_first()) : "memory");
}
// TMA multicast: the box lands at dst's offset in the shared memory of
// every block of the cluster whose rank's bit is set in mask, completing on
// the mbarrier at bar's offset in each of them.
__device__ __forceinline__ void tl_tma_load_2d_mc(void *dst, const tl_tmap *map, int c0, int c1, unsigned long long *bar,
                                                  unsigned short mask)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;\n"
                 :: "r"(tl_smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(tl_smem_addr(bar)), "h"(mask) : "memory");
}
__device__ __forceinline__ void tl_tma_load_3d_mc(void *dst, const tl_tmap *map, int c0, int c1, int c2,
                                                  unsigned long long *bar, unsigned short mask)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3, %4}], [%5], %6;\n"
                 :: "r"(tl_smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(tl_smem_addr(bar)), "h"(mask)
                 : "memory");
}
__device__ __forceinline__ void tl_tma_load_4d_mc(void *dst, const tl_tmap *map, int c0, int c1, int c2, int c3,
                                                  unsigned long long *bar, unsigned short mask)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6], %7;\n"
                 :: "r"(tl_smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(tl_smem_addr(bar)),
                    "h"(mask) : "memory");
}
// This block's multicast group in a CX x CY x CZ cluster: the blocks that
// differ from it only along the axes set in AXES. slice: its index in the
// group (which slice of a shared tile it loads); mask: the group's ranks.
template <int CX, int CY, int CZ, int AXES>
__device__ __forceinline__ void tl_mcast_group(unsigned &slice, unsigned short &mask)
{
    const unsigned r = tl_cluster_ctarank(), at[3] = {r % CX, r / CX % CY, r / (CX * CY)};
    const unsigned ext[3] = {CX, CY, CZ};
    slice = 0;
    for (int a = 2; a >= 0; --a)
        if (AXES >> a & 1)
            slice = slice * ext[a] + at[a];
    mask = 0;
    for (unsigned t = 0; t < CX * CY * CZ; ++t) {
        const unsigned tt[3] = {t % CX, t / CX % CY, t / (CX * CY)};
        bool same = true;
        for (int a = 0; a < 3; ++a)
            same = same && ((AXES >> a & 1) || tt[a] == at[a]);
        if (same)
            mask |= (unsigned short)(1u << t);
    }
}
// An arrival on the mbarrier at bar's offset in block `rank` of the
// cluster. Default semantics (release at CTA scope), as a local arrival:
// what it orders, the slot's last reads, are complete (wgmma waited,
// registers loaded) before the arrival, and the refill that waits for it
// is a TMA write.
__device__ __forceinline__ void tl_mbar_arrive_remote(unsigned long long *bar, unsigned rank)
{
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(tl_smem_addr(bar)), "r"(rank));
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" :: "r"(remote) : "memory");
}
#endif

// ------------------------------------------------------------- reductions
// One step of a butterfly: the value of the lane whose index differs in `mask`.
__device__ __forceinline__ float tl_shfl_xor(float x, int mask) { return __shfl_xor_sync(0xffffffffu, x, mask); }
__device__ __forceinline__ float tl_fabsmax(float a, float b) { return fmaxf(fabsf(a), fabsf(b)); }
// Two 16-bit values in one 32-bit register (low half first): the A operand
// of an MMA taken from registers.
__device__ __forceinline__ unsigned tl_pack2(tl_bf16 lo, tl_bf16 hi) { return (unsigned)lo.bits | ((unsigned)hi.bits << 16); }
__device__ __forceinline__ unsigned tl_pack2(tl_f16 lo, tl_f16 hi) { return (unsigned)lo.bits | ((unsigned)hi.bits << 16); }
