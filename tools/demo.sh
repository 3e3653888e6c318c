#!/bin/sh
# make demo: the tutorial walk-through (examples/tutorial.c), the
# environment report of the tilec tool, the GEMM benchmarks, the
# tutorial's softmax chapter, and last autotuning (examples/autotune.c: a
# custom kernel and the GEMM, the configuration chosen for this GPU) and
# the tuning database. The GPU chapters say what they skip without a GPU.
B=${1:-build}
set -e
"$B/examples/tutorial"
echo
echo "==== tilec info ===="
bin/tilec info
echo
echo "==== 7. The GEMM schedule sweep (tilec bench gemm, 4096^3 bf16, B as [N, K]) ===="
bin/tilec bench gemm --shape 4096x4096x4096 --trans-b
echo
echo "==== 8. The fused epilogue against separate kernels (bench_epilogue) ===="
"$B/bench/bench_epilogue" 4096x4096x4096
"$B/examples/tutorial" softmax
"$B/examples/autotune"    # chapter 10, autotuning: it prints its own heading
echo
echo "==== tilec tune --list: the tuning database ===="
bin/tilec tune --list
