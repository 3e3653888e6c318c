#!/bin/sh
# Runs every benchmark; each prints CSV lines (prefix "csv,") and a table.
# Without a GPU they say so and exit 0. Then, where python3 has PyTorch with
# CUDA, the side-by-side comparisons with PyTorch (bench/NOTES.md), whose
# CSV lines also go to $B/bench/*.csv; the library they load is $TILEC_LIB
# (default lib/libtilec.so).
B=${1:-build}
set -e
"$B/bench/bench_compile"
"$B/bench/bench_vadd"
"$B/bench/bench_gemm"
"$B/bench/bench_epilogue"
"$B/bench/bench_softmax"
set +e
if ! python3 -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' > /dev/null 2>&1; then
    echo "torch_compare.py, attention_grid.py: skipped, no python3 with PyTorch and a CUDA device"
    exit 0
fi
status=0
python3 bench/torch_compare.py --csv "$B/bench/torch_compare.csv" || status=1
python3 bench/attention_grid.py --csv "$B/bench/attention_grid.csv" || status=1
exit $status
