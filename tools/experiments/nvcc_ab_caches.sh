#!/bin/sh
# nvcc_ab_caches.sh - an experiment, not part of the library: is the
# library's NVRTC code slower than nvcc's for the same generated source?
# (bench/NOTES.md, sessions 24-25: NVRTC computes shared addresses in 64
# bits, nvcc in 32.) Builds two cubin caches with the same keys, OUT/cache
# (the library's NVRTC cubins) and OUT/cache_nvcc (nvcc -cubin of each
# program's printed source), for bench_attention's points below and
# bench_gemm_small's default programs; on the GPU machine run both with
# TILEC_CACHE_DIR=OUT/cache and =OUT/cache_nvcc, interleaved.
# Needs lib/libtilec.a (make) and nvcc here. Usage: nvcc_ab_caches.sh OUT
set -e
OUT=${1:?usage: nvcc_ab_caches.sh OUT}
cd "$(dirname "$0")/../.."
mkdir -p "$OUT/cache" "$OUT/src"
cc -std=c11 -O2 -Iinclude -o "$OUT/fill_cache" tools/experiments/fill_cache.c lib/libtilec.a -ldl -lpthread -lm
cc -std=c11 -O2 -Iinclude -Isrc -Ibuild/gen -o "$OUT/cubin_override" tools/experiments/cubin_override.c \
    lib/libtilec.a -ldl -lpthread -lm
NVCC="nvcc -arch=sm_90a -cubin -std=c++17 --use_fast_math -diag-suppress=177,550 -Isrc/device"
ATTN="2048:64:1 4096:64:1 4096:64:0 4096:128:0 4096:128:1" # S:D:causal
GEMM="4096x4096x4096 1024x1024x1024 8192x8192x1024"
# NVRTC's cubins, compiled once; the nvcc cache starts as a copy and has each program swapped in
for p in $ATTN; do "$OUT/fill_cache" "$OUT/cache" attn "$(echo "$p" | tr : ' ')" >/dev/null; done
"$OUT/fill_cache" "$OUT/cache" gemm $GEMM >/dev/null
rm -rf "$OUT/cache_nvcc" && cp -r "$OUT/cache" "$OUT/cache_nvcc"
# swap_in NAME ARGS...: cubin_override's program ARGS, its source printed, compiled by nvcc, stored
swap_in() {
    f=$OUT/src/$1; shift
    "$OUT/cubin_override" "$OUT/cache" - "$@" > "$f.cu"
    $NVCC -o "$f.cubin" "$f.cu"
    "$OUT/cubin_override" "$OUT/cache_nvcc" "$f.cubin" "$@"
}
for p in $ATTN; do
    s=${p%%:*}; rest=${p#*:}; d=${rest%%:*}; c=${rest#*:}
    swap_in "fa_${d}_${c}_$s" "$d@$s" "$c"
done
for g in $GEMM; do
    for l in nt nn; do swap_in "gemm_${g}_$l" gemm "$g:$l"; done
done
