#!/bin/sh
# Runs every benchmark; each prints CSV lines (prefix "csv,") and a table.
# Without a GPU they say so and exit 0.
B=${1:-build}
set -e
"$B/bench/bench_compile"
"$B/bench/bench_vadd"
"$B/bench/bench_gemm"
"$B/bench/bench_epilogue"
"$B/bench/bench_softmax"
"$B/bench/bench_dual_gemm"
"$B/bench/bench_attention"
