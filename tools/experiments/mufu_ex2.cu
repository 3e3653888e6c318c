// mufu_ex2.cu - an experiment, not part of the library: how many exps a cycle an SM does with
// ex2.approx f32, f16x2 and bf16x2, and what SASS they become (bench/NOTES.md, session 25).
// On the GPU machine: nvcc -arch=sm_90a -o mufu mufu_ex2.cu && ./mufu; cuobjdump --dump-sass mufu | grep MUFU
#include <cstdio>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
template <int MODE> __global__ void k(unsigned *out, int iters, long long *cyc)
{
    unsigned r[8];
    for (int i = 0; i < 8; i++) r[i] = 0x3c003c00u ^ (threadIdx.x + i);
    long long t0 = clock64();
    for (int it = 0; it < iters; it++) {
#pragma unroll
        for (int i = 0; i < 8; i++) {
            if (MODE == 0) { float f = __uint_as_float(r[i] & 0xbf7fffffu); asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(f)); r[i] = __float_as_uint(f); }
            if (MODE == 1) asm volatile("ex2.approx.f16x2 %0, %0;" : "+r"(r[i]));
            if (MODE == 2) asm volatile("ex2.approx.ftz.bf16x2 %0, %0;" : "+r"(r[i]));
        }
    }
    long long t1 = clock64();
    unsigned s = 0;
    for (int i = 0; i < 8; i++) s ^= r[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
    if (threadIdx.x == 0 && blockIdx.x == 0) *cyc = t1 - t0;
}
int main()
{
    unsigned *o; long long *c; cudaMalloc(&o, 132 * 1024 * 4 * 8); cudaMalloc(&c, 8);
    const int iters = 4096, blocks = 132 * 2, threads = 1024;
    const char *name[] = {"f32", "f16x2", "bf16x2"};
    for (int m = 0; m < 3; m++) for (int rep = 0; rep < 2; rep++) {
        cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
        cudaEventRecord(a);
        if (m == 0) k<0><<<blocks, threads>>>(o, iters, c);
        if (m == 1) k<1><<<blocks, threads>>>(o, iters, c);
        if (m == 2) k<2><<<blocks, threads>>>(o, iters, c);
        cudaEventRecord(b); cudaEventSynchronize(b);
        float ms; cudaEventElapsedTime(&ms, a, b); long long cy; cudaMemcpy(&cy, c, 8, cudaMemcpyDeviceToHost);
        double insts = (double)blocks * threads / 32 * iters * 8; // warp instructions
        int elems = m == 0 ? 1 : 2;
        printf("%-7s %.3f ms  %.2f Gwarp-inst/s  %.1f Texp/s  (block0 %lld cycles)\n", name[m], ms, insts / ms / 1e6,
               insts * 32 * elems / ms / 1e9, cy);
    }
    printf("err %s\n", cudaGetErrorString(cudaGetLastError()));
}
