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
mkdir -p "$OUT/cache" "$OUT/cache_nvcc" "$OUT/src"
cc -std=c11 -O2 -Iinclude -o "$OUT/fill_cache" tools/experiments/fill_cache.c lib/libtilec.a -ldl -lpthread -lm
cc -std=c11 -O2 -Iinclude -Isrc -Ibuild/gen -o "$OUT/cubin_override" tools/experiments/cubin_override.c \
    lib/libtilec.a -ldl -lpthread -lm
NVCC="nvcc -arch=sm_90a -cubin -std=c++17 --use_fast_math -diag-suppress=177,550 -Isrc/device"
for p in 2048:64:1 4096:64:1 4096:64:0 4096:128:0 4096:128:1; do   # S:D:causal
    s=${p%%:*}; rest=${p#*:}; d=${rest%%:*}; c=${rest#*:}
    for dir in cache cache_nvcc; do "$OUT/fill_cache" "$OUT/$dir" attn "$s $d $c" >/dev/null; done
    f=$OUT/src/fa_${d}_${c}_$s
    "$OUT/cubin_override" "$OUT/cache" - "$d@$s" "$c" > "$f.cu"
    $NVCC -o "$f.cubin" "$f.cu"
    "$OUT/cubin_override" "$OUT/cache_nvcc" "$f.cubin" "$d@$s" "$c"
done
for g in 4096x4096x4096 1024x1024x1024 8192x8192x1024; do
    for dir in cache cache_nvcc; do "$OUT/fill_cache" "$OUT/$dir" gemm "$g" >/dev/null; done
    for l in nt nn; do
        f=$OUT/src/gemm_${g}_$l
        "$OUT/cubin_override" "$OUT/cache" - gemm "$g:$l" > "$f.cu"
        $NVCC -o "$f.cubin" "$f.cu"
        "$OUT/cubin_override" "$OUT/cache_nvcc" "$f.cubin" gemm "$g:$l"
    done
done
