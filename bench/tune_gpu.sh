#!/bin/sh
# The autotuner's figures on the GPU machine (issue 10). Logs go to OUTDIR.
#
#   sh bench/tune_gpu.sh OUTDIR [steps...]
#
# steps (default: build test-cold cold anchors-nt anchors-nn):
#   build       make -j all test-build
#   test-cold   make test from an empty cubin cache: the GPU tier's wall
#               time, compiles included (target: under 90 s)
#   cold        20+ GEMM candidates compiled, checked and timed from an
#               empty cache, 4096^3 NT (target: at most 30 s)
#   anchors-nt  tuning at every GEMM shape of ANCHORS.md, B as [N, K], then
#   anchors-nn  tl_op_gemm against the best schedule of that sweep, and the
#               same with B as [K, N] (each step stays under 10 minutes)
#   bench       make bench: bench/results/<gpu>-<date>.{csv,md,log} + plots
# cmocka comes from CMOCKA_DIR (as in tools/gpu-run.sh).
OUT=${1:?usage: sh bench/tune_gpu.sh OUTDIR [steps...]}
shift
mkdir -p "$OUT"
export CMOCKA_DIR=${CMOCKA_DIR:-.device-deps/usr}
steps=${*:-build test-cold cold anchors-nt anchors-nn}
status=0
run() { # name command...
    name=$1; shift
    echo "---- $name: $*"
    start=$(date +%s)
    if "$@" > "$OUT/$name.log" 2>&1; then r=0; else r=$?; status=1; fi
    echo "---- $name: exit $r in $(( $(date +%s) - start )) s" | tee -a "$OUT/$name.log"
}
for s in $steps; do
    case $s in
    build) run build make -j"$(nproc)" all test-build ;;
    test-cold)
        cache=$(mktemp -d /tmp/tilec-cold-XXXXXX)
        run test-cold env TILEC_CACHE_DIR="$cache" make test
        grep -E "^tests:|precompiled" "$OUT/test-cold.log"
        rm -rf "$cache" ;;
    cold)
        run cold build/bench/bench_tune cold
        grep -A1 "^cold tuning" "$OUT/cold.log" ;;
    anchors-nt)
        run anchors-nt build/bench/bench_tune anchors nt --budget 60
        sed -n '/^After tuning/,$p' "$OUT/anchors-nt.log" ;;
    anchors-nn)
        run anchors-nn build/bench/bench_tune anchors nn --budget 60
        sed -n '/^After tuning/,$p' "$OUT/anchors-nn.log" ;;
    bench) run bench make bench ;;
    *) echo "unknown step $s"; status=2 ;;
    esac
done
exit $status
