#!/bin/sh
# make demo: the tutorial walk-through (examples/tutorial.c), the
# environment report of the tilec tool, the GEMM benchmarks (16-bit and
# 8-bit inputs), the
# tutorial's softmax chapter, autotuning (examples/autotune.c: a custom
# kernel and the GEMM, the configuration chosen for this GPU) and the
# tuning database, and last FlashAttention (bench_attention on a GPU, the
# generated kernel's first lines without one; ptxas's report on it either
# way). The GPU chapters say what they skip without a GPU.
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
echo
echo "==== 8b. 8-bit inputs against cuBLASLt's FP8 GEMM (bench_gemm_fp8, E4M3, 4096^3) ===="
"$B/bench/bench_gemm_fp8" 4096x4096x4096
"$B/examples/tutorial" softmax
"$B/examples/autotune"    # chapter 10, autotuning: it prints its own heading
echo
echo "==== tilec tune --list: the tuning database ===="
bin/tilec tune --list
echo
echo "==== 11. FlashAttention forward (tl_op_flash_attn, bf16, head_dim 128) ===="
# No example program calls the op, so the chapter runs its benchmark:
# arguments S D causal, batch x S = 16k and heads x D = 2048 as in the
# FlashAttention-3 paper's grid.
if ! sh tools/gpu-name.sh bin/tilec > /dev/null; then
    echo "The kernel for sm_90a, generated and printed without a GPU (its first 40 lines):"
    echo
    bin/tilec source flash_attn --arch sm_90a | head -40
    echo "    ..."
    echo
    echo "(Stopped there: timing tl_op_flash_attn needs a GPU, and there is none here."
    echo " The rest of the kernel, the producer warpgroup's TMA loop and the consumers'"
    echo " online softmax, is in 'bin/tilec source flash_attn --arch sm_90a'.)"
else
    echo "S = 4096, not causal, then causal (TFLOP/s counts the causal half only):"
    "$B/bench/bench_attention" 4096 128 0
    "$B/bench/bench_attention" 4096 128 1
    echo "(cuDNN and FlashAttention-2 in the same run: python3 bench/attention_grid.py;"
    echo " the figures of the H200: bench/NOTES.md)"
fi
echo
echo "ptxas's report on that kernel (tilec ptxas: registers, spills, advisories such as"
echo "a serialized wgmma; no GPU needed):"
bin/tilec ptxas flash_attn --arch sm_90a | grep -E "Used|spill|C75" || echo "(no report: NVRTC is missing)"
