#!/bin/sh
# One call on the GPU machine: build, test (GPU tier), compute-sanitizer,
# SASS and ptxas report of the vector add, benchmarks, demo. Logs go to
# $OUT (or ./gpu-out). cmocka comes from CMOCKA_DIR (see
# ../shared/tools/device-deps.sh), as that machine has no package registry.
#   sh tools/gpu-run.sh [steps...]
#   steps: build test sanitize gemm-sanitize ops-sanitize sass ops-sass ncu-softmax bench
#          bench-part1 bench-part2 bench-part3 bench-part4 (make bench in parts, one per call) bench-gemm
#          bench-epilogue bench-attn attn-ab attn-persistent attn-d64-groups ncu-attn-cudnn ncu-decode bench-softmax softmax-variants bench-small small-sweep bench-fp8 bench-dual dual-variants dual-sanitize demo test-cold test-cold-parallel tune-cold ncu-attn ncu-attn-source attn-sweep
#          tune-anchors-nt tune-anchors-nn (bench/tune_gpu.sh)
#          torch-compare attention-grid attention-validate (python3 with torch)
# Each step runs under `timeout` (STEP_LIMIT seconds, default 600), so one
# stuck step cannot take the whole lease.
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export CMOCKA_DIR=${CMOCKA_DIR:-.device-deps/usr}
export TILEC_CACHE_DIR=${TILEC_CACHE_DIR:-/tmp/tilec-cache}
steps=${*:-build test sanitize sass bench demo}
status=0
run() { # name command...
    name=$1; shift
    echo "---- $name: $*"
    start=$(date +%s)
    if timeout "${STEP_LIMIT:-600}" "$@" > "$OUT/$name.log" 2>&1; then r=0; else r=$?; status=1; fi
    echo "---- $name: exit $r in $(( $(date +%s) - start )) s"
    tail -n "${TAIL:-25}" "$OUT/$name.log"
}
for s in $steps; do
    case $s in
    build) run build make -j16 all test-build ;;
    test) # a program of the tier past 300 s is a kernel that never ends (the cold tier takes ~250 s)
        run test env TEST_TIMEOUT="${TEST_TIMEOUT:-300}" make test ;;
    sanitize)
        run memcheck env TILEC_TEST_SMALL=1 compute-sanitizer --tool memcheck --error-exitcode 9 build/tests/test_gpu
        run racecheck env TILEC_TEST_SMALL=1 compute-sanitizer --tool racecheck --error-exitcode 9 build/tests/test_gpu ;;
    gemm-sanitize)
        run memcheck-gemm env TILEC_TEST_SMALL=1 compute-sanitizer --tool memcheck --error-exitcode 9 build/tests/test_gpu_gemm
        run racecheck-gemm env TILEC_TEST_SMALL=1 compute-sanitizer --tool racecheck --error-exitcode 9 build/tests/test_gpu_gemm ;;
    ops-sanitize) # the kernels of the ops written with the builder, small sizes
        for t in test_gpu_attention test_gpu_dual_gemm test_gpu_softmax; do
            run "memcheck-$t" env TILEC_TEST_SMALL=1 compute-sanitizer --tool memcheck --error-exitcode 9 "build/tests/$t"
            run "racecheck-$t" env TILEC_TEST_SMALL=1 compute-sanitizer --tool racecheck --error-exitcode 9 "build/tests/$t"
        done ;;
    ops-sass) # ptxas's resource report (nvcc on the source) and the SASS of the tensor-core ops,
        # disassembled from the library's own cubin: nvcc's code for the same source can differ
        # from NVRTC's (bench/NOTES.md, session 24)
        for op in gemm flash_attn softmax; do
            for arch in sm_90a sm_80; do
                dt=; [ $op = softmax ] && dt="--dtype f16"
                bin/tilec source $op --arch $arch $dt > "$OUT/$op-$arch.cu"
                run "ptxas-$op-$arch" nvcc -arch=$arch -cubin -Xptxas -v -I src/device -o "$OUT/$op-$arch-nvcc.cubin" \
                    "$OUT/$op-$arch.cu"
                rm -f "$OUT/$op-$arch-nvcc.cubin"
                bin/tilec compile $op --arch $arch $dt --cubin "$OUT/$op-$arch.cubin" > /dev/null
                cuobjdump --dump-sass "$OUT/$op-$arch.cubin" > "$OUT/$op-$arch.sass" 2>&1
                rm -f "$OUT/$op-$arch.cubin"
            done
        done ;;
    ncu-attn-source) # stall samples and executed counts per SASS instruction, one FlashAttention point
        # (NCU_POINT, default D 64 causal 2k), summarised by tools/experiments/ncu_source_summary.py
        run ncu-attn-source ncu --clock-control none -k regex:flash_attn -s 2 -c 1 --section SourceCounters \
            --section WarpStateStats --import-source no -f -o "$OUT/attn-source" \
            build/bench/bench_attention ${NCU_POINT:-2048 64 1}
        ncu -i "$OUT/attn-source.ncu-rep" --page source --csv --print-source sass > "$OUT/attn-source.csv"
        TAIL=70 run ncu-attn-source-summary python3 tools/experiments/ncu_source_summary.py "$OUT/attn-source.csv" ;;
    ncu-softmax) # where the row softmax's time goes, one shape (NCU_SHAPE, default 8192x4096)
        TAIL=60 run ncu-softmax ncu --clock-control none -k regex:softmax -c 2 --section SpeedOfLight \
            --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section InstructionStats \
            build/bench/bench_softmax "${NCU_SHAPE:-8192x4096}" ;;
    ncu-attn) # where FlashAttention's time goes: D=128, S=8k, non-causal, one launch
        # (NCU_POINT: another point, bench_attention's arguments)
        TAIL=80 run ncu-attn ncu --clock-control none -k regex:flash_attn -s 2 -c 1 --section SpeedOfLight \
            --section ComputeWorkloadAnalysis --section WarpStateStats --section MemoryWorkloadAnalysis \
            --section InstructionStats build/bench/bench_attention ${NCU_POINT:-8192 128 0} ;;
    ncu-attn-cudnn) # cuDNN's attention kernel and ours under the same sections, D=128 2k non-causal
        # (bench/NOTES.md session 18: same instructions, cuDNN's O through TMA)
        sec="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats
             --section ComputeWorkloadAnalysis --section InstructionStats --section MemoryWorkloadAnalysis"
        # shellcheck disable=SC2086
        TAIL=40 run ncu-attn-cudnn ncu --clock-control none -k regex:"sdpa|fmha|fprop" -s 1 -c 1 $sec \
            python3 tools/experiments/cudnn_attention.py
        # shellcheck disable=SC2086
        TAIL=40 run ncu-attn-ours ncu --clock-control none -k regex:flash_attn -s 2 -c 1 $sec \
            build/bench/bench_attention 2048 128 0 ;;
    ncu-decode) # where the decode GEMM's time goes: the op's choice at one shape (DECODE_SHAPE, default
        # 64x8192x8192, B as [N, K]), then cuBLAS's kernel on the same call
        TAIL=60 run ncu-decode ncu --clock-control none -k regex:"gemm|gemv|sm90|cutlass|nvjet" -c 6 --section SpeedOfLight \
            --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy \
            build/bench/bench_gemm_small "${DECODE_SHAPE:-64x8192x8192}" ;;
    attn-sweep) # FlashAttention schedules side by side (bench_attention S D causal bm bn stages threads ws pp)
        for p in "4096 128 0" "8192 128 0" "8192 128 1" "16384 128 0" "8192 64 0" "8192 64 1"; do
            d=${p#* }; d=${d% *}; bn=128; [ "$d" = 64 ] && bn=192
            for sch in "128 $bn 3 256 1 1" "128 $bn 3 256 1 2" "128 176 2 256 1 2" "128 128 2 256 1 2"; do
                echo "== $p / $sch"; build/bench/bench_attention $p $sch 2>&1 | tail -n 1
            done
        done > "$OUT/attn-sweep.log" 2>&1; cat "$OUT/attn-sweep.log" ;;
    attn-d64-groups) # D 64 in three consumer warpgroups (192 rows: FlashAttention-3's shape): the default's
        # 192 x 128 against 192 keys a tile (2 and 3 stages, 160 registers a consumer leave room), the
        # rotated overlap (pingpong 2, one block a CTA) and the two groups taking turns that were the
        # default before, two rounds (bench_attention S D causal bm bn stages threads ws pp ps; ps: the
        # default's persistent mode)
        for r in 1 2; do
            for p in "512 64 0 1" "1024 64 0 1" "2048 64 0 1" "4096 64 0 1" "8192 64 0 0" "16384 64 0 0" \
                     "2048 64 1 2" "8192 64 1 2"; do
                set -- $p
                bn=192; [ "$1" -le 1024 ] && bn=128
                for sch in "192 128 3 384 1 0 $4" "192 192 2 384 1 0 $4" "192 192 3 384 1 0 $4" \
                           "192 128 3 384 1 2 0" "128 $bn 3 256 1 1 $4"; do
                    printf '%-14s %-22s %s\n' "$1 $2 $3" "$sch" \
                        "$(build/bench/bench_attention $1 $2 $3 $sch 2>&1 | grep -v '^csv' | tail -n 1 | cut -c29-)"
                done
            done
        done > "$OUT/attn-d64-groups.log" 2>&1; cat "$OUT/attn-d64-groups.log" ;;
    attn-persistent) # every point of the grid, causal and not, with the op's schedule in each persistent
        # mode (0: one block a CTA, 1: dealt in turn, 2: from the counter), interleaved
        TAIL=60 run attn-persistent build/bench/bench_attention --persistent ;;
    attn-ab) # this build's FlashAttention against another's bench_attention (AB_OLD, default
        # scratch/bench_attention_main, carried), interleaved (tools/experiments/ab_attention.sh)
        TAIL=40 run attn-ab sh tools/experiments/ab_attention.sh "${AB_OLD:-scratch/bench_attention_main}" \
            build/bench/bench_attention ;;
    bench-gemm) TAIL=40 run bench-gemm build/bench/bench_gemm ;;
    bench-attn) TAIL=40 run bench-attn build/bench/bench_attention ;;
    bench-softmax) TAIL=40 run bench-softmax build/bench/bench_softmax ;;
    bench-small) TAIL=24 run bench-small build/bench/bench_gemm_small ;;
    small-sweep) # decode shapes: the op's choice against its neighbours, cuBLAS and the copy in one
        # interleaved set each (bench_gemm_small --sweep; SWEEP_SHAPES overrides the list)
        for sh in ${SWEEP_SHAPES:-64x8192x8192 32x8192x8192 16x4096x14336 8x14336x4096}; do
            build/bench/bench_gemm_small "$sh" --sweep 2>&1 | grep -v '^csv'
        done > "$OUT/small-sweep.log" 2>&1; cat "$OUT/small-sweep.log" ;;
    bench-fp8) TAIL=24 run bench-fp8 build/bench/bench_gemm_fp8 ;;
    softmax-variants) # every schedule of both row ops at one shape (VARIANT_SHAPE, default 2048x32768)
        TAIL=40 run softmax-variants build/bench/bench_softmax --variants "${VARIANT_SHAPE:-2048x32768}" ;;
    bench-dual) TAIL=20 run bench-dual build/bench/bench_dual_gemm ;;
    dual-variants) TAIL=20 run dual-variants build/bench/bench_dual_gemm --variants ;;
    dual-sanitize) # the dual GEMM's schedules (default and variants) under compute-sanitizer, small sizes
        run memcheck-dual env TILEC_TEST_SMALL=1 compute-sanitizer --tool memcheck --error-exitcode 9 build/tests/test_gpu_dual_gemm
        run racecheck-dual env TILEC_TEST_SMALL=1 compute-sanitizer --tool racecheck --error-exitcode 9 build/tests/test_gpu_dual_gemm ;;
    bench-epilogue) TAIL=40 run bench-epilogue build/bench/bench_epilogue ;;
    sass)
        bin/tilec source vadd --arch sm_90a > "$OUT/vadd_f32.cu"
        run ptxas nvcc -arch=sm_90a -cubin -Xptxas -v -I src/device -o "$OUT/vadd_f32.cubin" "$OUT/vadd_f32.cu"
        cuobjdump --dump-sass "$OUT/vadd_f32.cubin" > "$OUT/vadd_f32.sass" 2>&1
        grep -cE "LDG.E.128|STG.E.128" "$OUT/vadd_f32.sass" | sed 's/^/128-bit global accesses in SASS: /'
        rm -f "$OUT/vadd_f32.cubin" ;;
    bench) TAIL=60 run bench make bench ;;
    # make bench in four parts that each fit a 10-minute call; parts 2-4
    # add to part 1's log (same day), and each part rewrites the CSV and
    # the report from the whole log (bench/results/)
    bench-part1) TAIL=30 BENCHES="compile compile_many vadd gemm epilogue" run bench-part1 make bench ;;
    bench-part2) TAIL=30 BENCH_APPEND=1 BENCHES="softmax attention dual_gemm gemm_batched gemm_small gemm_fp8" run bench-part2 make bench ;;
    bench-part3) TAIL=30 BENCH_APPEND=1 BENCHES="tune" TUNE_BUDGET=${TUNE_BUDGET:-15} run bench-part3 make bench ;;
    bench-part4) TAIL=30 BENCH_APPEND=1 BENCHES="torch_compare attention_grid" run bench-part4 make bench ;;
    torch-compare) TAIL=80 run torch-compare python3 bench/torch_compare.py --csv "$OUT/torch_compare.csv" ;;
    attention-grid) TAIL=40 run attention-grid python3 bench/attention_grid.py --csv "$OUT/attention_grid.csv" ;;
    attention-validate) TAIL=30 run attention-validate python3 bench/attention_grid.py --validate ;;
    test-cold) # the GPU tier from an empty cubin cache, compiles included, one program at a time
        cold=$(mktemp -d /tmp/tilec-cold-XXXXXX)
        TAIL=8 run test-cold env TILEC_CACHE_DIR="$cold" TEST_JOBS=1 make test
        rm -rf "$cold" ;;
    test-cold-parallel) # the same with 8 test programs at once (tests/run.sh TEST_JOBS)
        cold=$(mktemp -d /tmp/tilec-cold-XXXXXX)
        TAIL=8 run test-cold-parallel env TILEC_CACHE_DIR="$cold" TEST_JOBS=8 make test
        rm -rf "$cold" ;;
    tune-cold) TAIL=40 run tune-cold build/bench/bench_tune cold ;;
    tune-anchors-nt) TAIL=24 run tune-anchors-nt build/bench/bench_tune anchors nt --budget 60 ;;
    tune-anchors-nn) TAIL=24 run tune-anchors-nn build/bench/bench_tune anchors nn --budget 60 ;;
    tune-softmax) TAIL=12 run tune-softmax build/bench/bench_tune softmax --budget 60 ;;
    demo) TAIL=40 run demo make demo ;;
    esac
done
exit $status
