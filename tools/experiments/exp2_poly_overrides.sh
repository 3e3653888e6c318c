#!/bin/sh
# exp2_poly_overrides.sh K... -- for each K, a cubin cache directory
# scratch/ovrP<K> holding the FlashAttention kernels of the schedules below
# with K of every 8 softmax exps on the FMA pipe (exp2_poly.py), under the
# op's own cache keys, and a wrapper scratch/benchP<K>.sh that runs
# bench_attention on it; scratch/benchA.sh runs it on a cache of its own
# (the unedited kernels). Then, on the GPU machine:
#   POINTS="8192 128 0|2048 128 1|..." sh tools/experiments/ab_attention.sh scratch/benchA.sh scratch/benchP4.sh 2
# Needs the library built (lib/libtilec.a) and NVRTC; the overrides hold
# only while the op's generated source stays what it is now.
set -e
cc -std=c11 -O2 -Iinclude -Isrc -Ibuild/gen -o /tmp/cubin_override tools/experiments/cubin_override.c lib/libtilec.a \
    -ldl -lpthread -lm
mkdir -p scratch
printf '#!/bin/sh\nTILEC_CACHE_DIR=/tmp/tcA exec build/bench/bench_attention "$@"\n' > scratch/benchA.sh
chmod +x scratch/benchA.sh
for k in "$@"; do
    d=scratch/ovrP$k
    rm -rf "$d" && mkdir -p "$d"
    # D causal block_n stages persistent: each default of D 64 / 128, causal and not
    for spec in "128 0 176 2 1" "128 0 176 2 0" "128 0 128 3 1" "128 1 176 2 2" "128 1 128 3 2" "64 0 192 3 1" \
                "64 0 192 3 0" "64 1 192 3 2"; do
        # shellcheck disable=SC2086
        /tmp/cubin_override "$d" - $spec > /tmp/exp2_poly_in.cu
        python3 tools/experiments/exp2_poly.py /tmp/exp2_poly_in.cu /tmp/exp2_poly_out.cu "$k"
        # shellcheck disable=SC2086
        /tmp/cubin_override "$d" /tmp/exp2_poly_out.cu $spec
    done
    printf '#!/bin/sh\nTILEC_CACHE_DIR=$PWD/%s exec build/bench/bench_attention "$@"\n' "$d" > "scratch/benchP$k.sh"
    chmod +x "scratch/benchP$k.sh"
done
