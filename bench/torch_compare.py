#!/usr/bin/env python3
"""libtilec's ops next to PyTorch's, on the same tensors, in one process.

  torch_compare.py              softmax, GEMM (NN, NT, fused bias + GELU) and
                                attention, checked against fp32/fp64 references
                                and timed against torch.softmax, torch.matmul and
                                scaled_dot_product_attention (flash and cuDNN)
  torch_compare.py --check-abi  the ctypes structs of tilec_ctypes.py against the
                                layouts the C compiler gives (bench/abi_layout.c);
                                needs neither torch nor a GPU

Without PyTorch with CUDA the comparison says so and exits 0.
"""
import ctypes
import os
import subprocess
import sys

import attention_grid
import torch_bench as tb
from tilec_ctypes import CONSTANTS, STRUCTS, TL_EPI_GELU_TANH, TilecError, gemm_desc, softmax_desc

HERE = os.path.dirname(os.path.abspath(__file__))
SOFTMAX_SHAPES = [(16384, 1024), (8192, 4096), (4096, 8192), (32768, 2048), (2048, 32768)]
GEMM_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 1024), (4096, 14336, 4096)]
EPILOGUE_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192)]
ATTENTION_POINTS = [(128, 2048), (128, 8192), (64, 4096)]  # (head_dim, seqlen) of the ANCHORS grid
TOLERANCE = 1e-2  # norm-wise relative error of a 16-bit output


# --- ABI check -------------------------------------------------------------

def python_layout():
    """The lines abi_layout.c prints, as the ctypes classes lay them out."""
    lines = []
    for cname, cls in STRUCTS.items():
        lines.append("struct %s %d %d" % (cname, ctypes.sizeof(cls), ctypes.alignment(cls)))
        for fname, _ in cls._fields_:
            field = getattr(cls, fname)
            lines.append("field %s.%s %d %d" % (cname, fname, field.offset, field.size))
    lines += ["const %s %d" % item for item in CONSTANTS.items()]
    return lines


def c_layout(args):
    """The lines of the C side: from --abi-layout, else by running --abi-prog."""
    if args.abi_layout:
        with open(args.abi_layout) as f:
            return f.read().splitlines()
    if not os.path.exists(args.abi_prog):
        sys.exit("torch_compare.py: %s not found; build it with `make test-build`, or pass --abi-prog"
                 % args.abi_prog)
    return subprocess.run([args.abi_prog], check=True, capture_output=True, text=True).stdout.splitlines()


def check_abi(args):
    """0 when every struct, field and constant agrees with C, else 1."""
    c, py = set(c_layout(args)), set(python_layout())
    for line in sorted(c - py):
        print("ABI mismatch: C has      %s" % line)
    for line in sorted(py - c):
        print("ABI mismatch: ctypes has %s" % line)
    if c != py:
        print("ABI check FAILED: bench/tilec_ctypes.py does not mirror include/tilec.h")
        return 1
    kinds = [line.split()[0] for line in py]
    print("ABI check passed: %d structs, %d fields, %d constants agree with include/tilec.h"
          % (kinds.count("struct"), kinds.count("field"), kinds.count("const")))
    return 0


# --- softmax ---------------------------------------------------------------

def compare_softmax(tl, csv, rows, cols, reps):
    """tl_op_softmax against torch.softmax (and a copy of the same bytes),
    fp16, inputs rotated over more than the L2."""
    torch = tb.torch
    n = tb.rotation_count(2 * rows * cols * 2)
    xs = [torch.randn(rows, cols, dtype=torch.float16, device=tb.DEVICE) for _ in range(n)]
    ys = [torch.full_like(x, float("nan")) for x in xs]
    desc, s = softmax_desc(xs[0], ys[0]), tb.stream()
    impls = ["torch.softmax", "tl_op_softmax " + tl.schedule_text("softmax", desc), "copy (Tensor.copy_)"]
    fns = [lambda i: torch.softmax(xs[i % n], -1),
           lambda i: tl.softmax(desc, xs[i % n], ys[i % n], s),
           lambda i: ys[i % n].copy_(xs[i % n])]
    ref = torch.softmax(xs[0].double(), -1)
    errs = [tb.rel_err(fns[0](0), ref)]
    fns[1](0)
    errs.append(tb.rel_err(ys[0], ref))
    errs.append(tb.rel_err(fns[2](0), xs[0]))
    times = tb.time_interleaved(fns, reps)
    return tb.report(csv, "softmax_torch", "%dx%d" % (rows, cols), "f16", "GB/s", 2.0 * rows * cols * 2, impls,
                     times, errs, TOLERANCE, peers=(2,))


# --- GEMM ------------------------------------------------------------------

def gemm_operands(m, n, k, trans_b, seed):
    """bf16 A [M, K], B [K, N] (or [N, K] with trans_b), bias [N]."""
    torch = tb.torch
    gen = torch.Generator(device=tb.DEVICE).manual_seed(seed)
    a = torch.randn(m, k, dtype=torch.bfloat16, device=tb.DEVICE, generator=gen)
    b = torch.randn((n, k) if trans_b else (k, n), dtype=torch.bfloat16, device=tb.DEVICE, generator=gen)
    bias = torch.randn(n, dtype=torch.bfloat16, device=tb.DEVICE, generator=gen)
    return a, b, bias


def compare_gemm(tl, csv, m, n, k, trans_b, reps, seed=1):
    """tl_op_gemm against torch.matmul, bf16 in and out; B as [N, K] (torch
    gets its transposed view) with trans_b."""
    torch = tb.torch
    a, b, _ = gemm_operands(m, n, k, trans_b, seed)
    bm = b.t() if trans_b else b
    c, ct = (torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=tb.DEVICE) for _ in range(2))
    desc, s = gemm_desc(a, b, c, trans_b), tb.stream()
    impls = ["torch.matmul", "tl_op_gemm " + tl.schedule_text("gemm", desc)]
    fns = [lambda i: torch.matmul(a, bm, out=ct), lambda i: tl.gemm(desc, a, b, None, c, s)]
    for fn in fns:
        fn(0)
    ref = a.float() @ bm.float()
    errs = [tb.rel_err(ct, ref), tb.rel_err(c, ref)]
    times = tb.time_interleaved(fns, reps)
    op = "gemm_nt_torch" if trans_b else "gemm_nn_torch"
    return tb.report(csv, op, "%dx%dx%d" % (m, n, k), "bf16", "TFLOP/s", 2.0 * m * n * k, impls, times, errs,
                     TOLERANCE)


def compare_bias_gelu(tl, csv, m, n, k, reps, seed=1):
    """GEMM + bias + GELU (tanh), B as [N, K]: ours fused into the GEMM's
    epilogue against torch's eager matmul, add, gelu."""
    torch = tb.torch
    gelu = torch.nn.functional.gelu
    a, b, bias = gemm_operands(m, n, k, True, seed)
    c = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device=tb.DEVICE)
    desc, s = gemm_desc(a, b, c, True, bias, TL_EPI_GELU_TANH), tb.stream()
    impls = ["torch matmul + bias + gelu", "tl_op_gemm fused " + tl.schedule_text("gemm", desc)]
    fns = [lambda i: gelu(torch.matmul(a, b.t()) + bias, approximate="tanh"),
           lambda i: tl.gemm(desc, a, b, bias, c, s)]
    ref = gelu(a.float() @ b.float().t() + bias.float(), approximate="tanh")
    errs = [tb.rel_err(fns[0](0), ref)]
    fns[1](0)
    errs.append(tb.rel_err(c, ref))
    times = tb.time_interleaved(fns, reps)
    return tb.report(csv, "gemm_bias_gelu_torch", "%dx%dx%d" % (m, n, k), "bf16", "TFLOP/s", 2.0 * m * n * k, impls,
                     times, errs, TOLERANCE)


# --- the parts -------------------------------------------------------------

def run_softmax(tl, csv, args):
    return all([compare_softmax(tl, csv, r, c, args.reps) for r, c in SOFTMAX_SHAPES])


def run_gemm(tl, csv, args):
    ok = [compare_gemm(tl, csv, m, n, k, t, args.reps, args.seed) for m, n, k in GEMM_SHAPES for t in (False, True)]
    ok += [compare_bias_gelu(tl, csv, m, n, k, args.reps, args.seed) for m, n, k in EPILOGUE_SHAPES]
    return all(ok)


def run_attention(tl, csv, args):
    print("# attention, bf16 [B, H, S, D]: TFLOP/s (FLOPs = 4 B H S^2 D, halved when causal), ratios to cuDNN")
    print(attention_grid.GRID_HEADER)
    return all([attention_grid.bench_point(tl, csv, 16384 // s, 2048 // d, s, d, causal, args.reps, seed=args.seed)
                for d, s in ATTENTION_POINTS for causal in (False, True)])


PARTS = {"softmax": run_softmax, "gemm": run_gemm, "attention": run_attention}


def run_part(name, tl, csv, args):
    """One part; a failing library call fails the part, not the run."""
    print("\n## %s" % name, flush=True)
    try:
        return PARTS[name](tl, csv, args)
    except TilecError as e:
        print("%s: FAILED: %s" % (name, e))
        return False


def parse_args(argv):
    p = tb.common_args(__doc__.splitlines()[0])
    p.add_argument("--only", choices=tuple(PARTS), nargs="+", default=list(PARTS), help="parts to run")
    p.add_argument("--check-abi", action="store_true", help="compare the ctypes structs with C and exit")
    p.add_argument("--abi-prog", default=os.path.join(HERE, os.pardir, "build", "bench", "abi_layout"),
                   help="the program printing the C layouts (default: build/bench/abi_layout)")
    p.add_argument("--abi-layout", metavar="FILE", help="compare with the lines in FILE instead of --abi-prog's")
    return tb.parse(p, argv)


def main(argv=None):
    args = parse_args(argv)
    if args.check_abi:
        return check_abi(args)
    with tb.session("torch_compare.py", args) as (tl, csv):
        tb.warm_up()
        ok = all([run_part(name, tl, csv, args) for name in args.only])
    print("\ntorch_compare.py: %s" % ("every check passed" if ok else "SOME CHECKS FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
