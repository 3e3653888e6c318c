#!/usr/bin/env python3
"""One SDPA forward on PyTorch's cuDNN backend, a few times, for a profiler
to catch (gpu-run.sh ncu-attn-cudnn): bf16 [B, H, S, D] = 8, 16, 2048, 128 by
default, or B H S D from the command line; "causal" as a fifth argument.
Prints what it ran; exits 0 without PyTorch with CUDA, saying so."""
import sys

try:
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:
    print("cudnn_attention.py: no PyTorch here")
    sys.exit(0)
if not torch.cuda.is_available():
    print("cudnn_attention.py: PyTorch has no CUDA device here")
    sys.exit(0)
b, h, s, d = (int(x) for x in sys.argv[1:5]) if len(sys.argv) >= 5 else (8, 16, 2048, 128)
causal = len(sys.argv) > 5 and sys.argv[5] == "causal"
q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(5):
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
torch.cuda.synchronize()
print(f"cuDNN SDPA b{b} h{h} s{s} d{d} {'causal' if causal else 'none'}: {tuple(o.shape)}")
