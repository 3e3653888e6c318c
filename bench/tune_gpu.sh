#!/bin/sh
# The autotuner's figures on the GPU machine (issue 10), logs in OUTDIR:
#
#   sh bench/tune_gpu.sh OUTDIR [steps...]
#
# steps (tools/gpu-run.sh runs them; default: all but bench, in this order):
#   build            make all test-build
#   test-cold        make test from an empty cubin cache: the GPU tier's wall
#                    time, compiles included (target: under 90 s)
#   tune-cold        the 23 GEMM candidates at 4096^3 NT compiled, checked and
#                    timed from an empty cache (target: at most 30 s)
#   tune-anchors-nt  tuning at every GEMM shape of ANCHORS.md (B as [N, K]),
#   tune-anchors-nn  then tl_op_gemm against the best schedule of that sweep,
#                    the heuristic's and cuBLAS, timed together; the same
#                    with B as [K, N] (each step under 10 minutes)
#   bench            make bench: bench/results/<gpu>-<date>.{csv,md,log}
# cmocka comes from CMOCKA_DIR, as for tools/gpu-run.sh.
OUT=${1:?usage: sh bench/tune_gpu.sh OUTDIR [steps...]}
shift
OUT=$OUT exec sh tools/gpu-run.sh ${*:-build test-cold tune-cold tune-anchors-nt tune-anchors-nn}
