// read_roofline.cu - an experiment tool, not part of the library: how fast
// can any kernel read N bytes that are not in L2, against the device copy
// that issue 11's decode target is measured by (bench_gemm_small: a copy of
// N / 2 bytes, read once and written once, L2 flushed by a memset of twice
// its size before each run, one launch timed by events).
//
// A decode GEMV must read all of B from DRAM; the copy reads half as much
// and its writes can stay in L2 past the timed window. So the best pure
// read of N bytes, timed the same way, bounds what any decode kernel can
// reach against the copy at that size (bench/NOTES.md, session 34).
//
// The row kernels also take the other forms of a 16-byte load (plain, an L2
// evict-first policy, the read-only path), reported beside the best: which
// of them keeps the flush's dirty lines from being written back under the
// read (ncu's dram__bytes_write.sum).
//
// Build and run on the GPU machine:
//   nvcc -O3 -arch=sm_90a -o /tmp/read_roofline tools/experiments/read_roofline.cu
//   /tmp/read_roofline            (sizes 8 MB to 512 MB)
//   /tmp/read_roofline 32         (one size, for ncu)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <vector>

#define CK(x)                                                                                                          \
    do {                                                                                                               \
        cudaError_t e_ = (x);                                                                                          \
        if (e_ != cudaSuccess) {                                                                                       \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));                                \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

// Each thread reads U 16-byte words a round, grid-stride; the xor of all it
// read decides a store that never happens, so nothing is dead code.
template <int U> __global__ void read_kernel(const uint4 *p, size_t n, unsigned *sink)
{
    unsigned x = 0;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (U - 1) * stride < n; i += U * stride) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            v[u] = __ldcs(p + i + u * stride);
#pragma unroll
        for (int u = 0; u < U; u++)
            x ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < n; i += stride)
        x ^= p[i].x;
    if (x == 0x9e3779b9u)
        sink[0] = x;
}

// How a row kernel's 16-byte loads ask the caches: 0 ld.global.cs (streaming,
// evict-first in L2), 1 ld.global (the default), 2 ld.global with an L2
// evict-first cache-hint policy (createpolicy, as tl_use_cache_policy
// emits), 3 ld.global.nc (the read-only path).
template <int MODE> __device__ __forceinline__ uint4 load16(const uint4 *p)
{
    uint4 v;
    if (MODE == 0)
        return __ldcs(p);
    if (MODE == 1)
        asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    if (MODE == 2) {
        unsigned long long pol;
        asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
        asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(pol));
    }
    if (MODE == 3)
        return __ldg(p);
    return v;
}

// One block per row of 'row' bytes, as the library's GEMV deals B (a row of
// B a block, 64 threads).
template <int MODE> __global__ void row_kernel(const uint4 *p, int row_words, unsigned *sink)
{
    const uint4 *r = p + (size_t)blockIdx.x * row_words;
    unsigned x = 0;
    for (int i = threadIdx.x; i < row_words; i += blockDim.x) {
        uint4 v = load16<MODE>(r + i);
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (x == 0x9e3779b9u)
        sink[0] = x;
}

struct timer {
    cudaEvent_t a, b;
    char *flush;
    size_t flush_bytes;
};

template <typename F> static float time_median(timer &t, F launch)
{
    std::vector<float> ms;
    for (int r = 0; r < 55; r++) {
        CK(cudaMemsetAsync(t.flush, r & 0xff, t.flush_bytes));
        CK(cudaEventRecord(t.a));
        launch();
        CK(cudaEventRecord(t.b));
        CK(cudaEventSynchronize(t.b));
        float x;
        CK(cudaEventElapsedTime(&x, t.a, t.b));
        if (r >= 5)
            ms.push_back(x);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

int main(int argc, char **argv)
{
    size_t only = argc > 1 ? (size_t)atoi(argv[1]) : 0;
    int sms, l2;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    timer t;
    t.flush_bytes = 2 * (size_t)l2;
    CK(cudaMalloc(&t.flush, t.flush_bytes));
    CK(cudaEventCreate(&t.a));
    CK(cudaEventCreate(&t.b));
    size_t maxb = (size_t)512 << 20;
    char *src, *dst;
    unsigned *sink;
    CK(cudaMalloc(&src, maxb));
    CK(cudaMalloc(&dst, maxb));
    CK(cudaMalloc(&sink, 4));
    CK(cudaMemset(src, 1, maxb));
    printf("L2 %d MB, %d SMs; GB/s of N bytes moved (copy: N/2 read + N/2 written)\n", l2 >> 20, sms);
    printf("%8s %9s %9s %9s %9s %9s %9s  %s\n", "MB", "copy", "rd u4", "rd u8", "rd u16", "rows64", "rows128",
           "best read / copy");
    for (size_t mb = only ? only : 8; mb <= (only ? only : 512); mb *= 2) {
        size_t n = mb << 20, words = n / 16;
        double gb = n / 1e9;
        float c = time_median(t, [&] { CK(cudaMemcpyAsync(dst, src, n / 2, cudaMemcpyDeviceToDevice)); });
        float best = 1e30f;
        float r[5];
        int blocks = sms * 16;
        r[0] = time_median(t, [&] { read_kernel<4><<<blocks, 256>>>((const uint4 *)src, words, sink); });
        r[1] = time_median(t, [&] { read_kernel<8><<<blocks, 256>>>((const uint4 *)src, words, sink); });
        r[2] = time_median(t, [&] { read_kernel<16><<<sms * 8, 256>>>((const uint4 *)src, words, sink); });
        // rows of 8 KB (4096 bf16, B of 1x4096x4096 as [N, K]), streaming loads
        int row_words = 512, rows = (int)(words / row_words);
        r[3] = time_median(t, [&] { row_kernel<0><<<rows, 64>>>((const uint4 *)src, row_words, sink); });
        r[4] = time_median(t, [&] { row_kernel<0><<<rows, 128>>>((const uint4 *)src, row_words, sink); });
        // rows of 128 threads with the other load forms (reported, not in "best")
        float q[3];
        q[0] = time_median(t, [&] { row_kernel<1><<<rows, 128>>>((const uint4 *)src, row_words, sink); });
        q[1] = time_median(t, [&] { row_kernel<2><<<rows, 128>>>((const uint4 *)src, row_words, sink); });
        q[2] = time_median(t, [&] { row_kernel<3><<<rows, 128>>>((const uint4 *)src, row_words, sink); });
        CK(cudaGetLastError());
        for (float x : r)
            best = std::min(best, x);
        printf("%8zu %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f  %.3f   rows128 ld %.0f, ld+policy %.0f, ld.nc %.0f\n", mb,
               gb / (c * 1e-3), gb / (r[0] * 1e-3), gb / (r[1] * 1e-3), gb / (r[2] * 1e-3), gb / (r[3] * 1e-3),
               gb / (r[4] * 1e-3), c / best, gb / (q[0] * 1e-3), gb / (q[1] * 1e-3), gb / (q[2] * 1e-3));
    }
    // an empty launch, timed the same way: the fixed cost in every figure
    float e = time_median(t, [&] { read_kernel<4><<<1, 32>>>((const uint4 *)src, 0, sink); });
    printf("empty kernel %.2f us\n", e * 1e3);
    return 0;
}
