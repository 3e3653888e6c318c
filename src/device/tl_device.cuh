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

__device__ __forceinline__ float tl_f32(float x) { return x; }
__device__ __forceinline__ float tl_f32(double x) { return (float)x; }
__device__ __forceinline__ float tl_f32(tl_f16 h)
{
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
    return f;
}
__device__ __forceinline__ float tl_f32(tl_bf16 h) { return __uint_as_float(((unsigned)h.bits) << 16); }

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
// f64 -> bf16 goes through f32: a double rounding, off by one unit in rare
// ties; kernels seldom hold f64 values.
__device__ __forceinline__ tl_bf16 tl_to_bf16(double d) { return tl_to_bf16((float)d); }

// Constants of the 16-bit types, from bits the library rounded on the host.
__device__ __forceinline__ tl_f16 tl_f16_bits(unsigned short b) { tl_f16 h; h.bits = b; return h; }
__device__ __forceinline__ tl_bf16 tl_bf16_bits(unsigned short b) { tl_bf16 h; h.bits = b; return h; }

template <typename T> __device__ __forceinline__ T tl_zero() { return T(0); }
template <> __device__ __forceinline__ tl_f16 tl_zero<tl_f16>() { tl_f16 h; h.bits = 0; return h; }
template <> __device__ __forceinline__ tl_bf16 tl_zero<tl_bf16>() { tl_bf16 h; h.bits = 0; return h; }

// A load that reads 0 outside the tensor: the address is not touched then.
template <typename T> __device__ __forceinline__ T tl_ld(const T *p, bool ok)
{
    return ok ? *p : tl_zero<T>();
}

template <typename T> __device__ __forceinline__ T tl_max(T a, T b) { return a > b ? a : b; }
template <typename T> __device__ __forceinline__ T tl_min(T a, T b) { return a < b ? a : b; }
template <typename T> __device__ __forceinline__ T tl_iabs(T a) { return a < 0 ? -a : a; }

// V elements of T that move as one 4-, 8- or 16-byte access.
template <typename T, int V> struct __align__(sizeof(T) * V) tl_vec {
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
    __device__ __forceinline__ static void st(void *p, const unsigned *w)
    {
        tl_w4 v; v.x = w[0]; v.y = w[1]; v.z = w[2]; v.w = w[3];
        *(tl_w4 *)p = v;
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
    if (ok && stride == 1 && tl_in_span(i, V, n) && tl_aligned<sizeof(T) * V>(base)) {
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
    if (ok && stride == 1 && tl_in_span(i, V, n) && tl_aligned<sizeof(T) * V>(base)) {
        tl_st_vec(base, r);
        return;
    }
#pragma unroll
    for (int v = 0; v < V; ++v)
        if (ok && tl_in(i + v, n))
            base[v * stride] = r.e[v];
}
