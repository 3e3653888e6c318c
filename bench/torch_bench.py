"""What the PyTorch comparisons share: finding torch with CUDA, opening
libtilec on torch's device, timing with CUDA events, the relative error and
the CSV lines of bench/bench.h."""
import argparse
import contextlib
import os
import statistics
import sys
import time

from tilec_ctypes import Tilec, TilecError, default_library_path

# torch is imported on first need (torch_cuda_or_exit): --check-abi and
# --help run without it, and importing it takes seconds on some machines.
torch, _TORCH_ERROR = None, None


def _import_torch():
    global torch, _TORCH_ERROR
    if torch is None and _TORCH_ERROR is None:
        try:
            import torch as _torch
            torch = _torch
        except Exception as e:  # not installed, or its CUDA libraries fail to load
            _TORCH_ERROR = e
    return torch

CSV_HEADER = "csv,op,shape,dtype,impl,ms,rate,unit,ratio_to_baseline,rel_err"
L2_ROTATION_BYTES = 256 << 20  # > 4x the H200's 60 MiB L2
DEVICE = "cuda"  # where every tensor of the comparisons lives


def common_args(description):
    """An argparse parser with the options every comparison takes."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--lib", default=default_library_path(),
                   help="libtilec shared library (default: $TILEC_SHARED_LIB or lib/libtilec.so)")
    p.add_argument("--csv", metavar="FILE", help="also write the CSV lines to FILE")
    p.add_argument("--reps", type=int, default=30, help="timed repetitions; the median is reported (>= 20)")
    p.add_argument("--seed", type=int, default=1)
    return p


def parse(parser, argv):
    """parser.parse_args(argv), with the common options checked."""
    args = parser.parse_args(argv)
    if args.reps < 20:
        parser.error("--reps must be at least 20")
    return args


@contextlib.contextmanager
def session(program, args):
    """(libtilec, CSV output) for one run of `program`: exits 0 first where
    torch with CUDA is missing; fp32 matmuls of the references stay fp32
    (no TF32); at the end the GPU is drained and both are closed."""
    torch_cuda_or_exit(program)
    tl = open_tilec(program, args.lib)
    torch.set_float32_matmul_precision("highest")
    csv = CsvOut(args.csv)
    try:
        yield tl, csv
    finally:
        torch.cuda.synchronize()
        csv.close()
        tl.close()


def torch_cuda_or_exit(program):
    """Returns torch, or says why there is nothing to compare and exits 0."""
    if _import_torch() is None:
        print("%s: skipped, PyTorch is not available (%s)" % (program, _TORCH_ERROR))
        sys.exit(0)
    if not torch.cuda.is_available():
        print("%s: skipped, PyTorch %s sees no CUDA device (CUDA build: %s)"
              % (program, torch.__version__, torch.version.cuda))
        sys.exit(0)
    return torch


def open_tilec(program, path):
    """libtilec with a context on torch's current device (the same primary
    context, so torch's pointers and streams are valid in the library)."""
    if not os.path.exists(path):
        sys.exit("%s: %s not found; build it with `make`, or pass --lib" % (program, path))
    torch.cuda.init()
    try:
        tl = Tilec(path, torch.cuda.current_device())
    except TilecError as e:
        sys.exit("%s: %s" % (program, e))
    info = tl.device_info()
    print("# %s: libtilec %s (%s) on %s (sm_%d%d, %d SMs), torch %s, CUDA %s, cuDNN %s"
          % (program, tl.version(), path, info.name.decode(), info.cc_major, info.cc_minor, info.sm_count,
             torch.__version__, torch.version.cuda, torch.backends.cudnn.version()))
    return tl


def stream():
    """torch's current CUDA stream as the `void *stream` of the library."""
    return torch.cuda.current_stream().cuda_stream


def warm_up(seconds=0.5):
    """Keeps the GPU busy so its clocks have ramped up before the first
    measurement (the first kernel of a cold process runs slow)."""
    a = torch.randn(4096, 4096, device=DEVICE, dtype=torch.bfloat16)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(20):
            a @ a
        torch.cuda.synchronize()


def rotation_count(bytes_per_copy):
    """How many copies of a working set make one pass larger than the L2 many times over."""
    return max(1, -(-L2_ROTATION_BYTES // bytes_per_copy))


def _calls_per_sample(fn, warmup, target_ms):
    """Runs fn warmup times, then picks how many calls one timed sample holds
    so that a sample lasts about target_ms (one launch of a short kernel is
    below the resolution of CUDA events)."""
    for i in range(warmup):
        fn(i)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(warmup):
        fn(i)
    end.record()
    end.synchronize()
    per_call = max(start.elapsed_time(end) / warmup, 1e-4)
    return max(1, min(200, round(target_ms / per_call)))


def time_interleaved(fns, reps, warmup=5, target_ms=1.0):
    """Median milliseconds of one call of each fn(i) (i counts calls, for
    rotating inputs). Every repetition times each fn in turn between two
    CUDA events on the current stream, so all see the same clocks."""
    inner = [_calls_per_sample(fn, warmup, target_ms) for fn in fns]
    samples = []
    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(20_000_000)  # lets the CPU queue work ahead of the GPU
    for r in range(reps):
        for j, fn in enumerate(fns):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for i in range(inner[j]):
                fn(r * inner[j] + i)
            end.record()
            samples.append((j, start, end))
    torch.cuda.synchronize()
    per_fn = [[] for _ in fns]
    for j, start, end in samples:
        per_fn[j].append(start.elapsed_time(end) / inner[j])
    return [statistics.median(s) for s in per_fn]


def rel_err(out, ref):
    """||out - ref|| / ||ref|| in float64 (Frobenius norms); NaN in out gives NaN."""
    ref64 = ref.double()
    return ((out.double() - ref64).norm() / ref64.norm()).item()


def report(csv, op, shape, dtype, unit, work, impls, times, errs, tolerance, peers=()):
    """The CSV line and a table row of each implementation of one
    measurement: rate = work / time (bytes or FLOPs), ratios to impls[0],
    the baseline; the indices in peers are other libraries' (bench.h's
    "peer:"), the rest ours. Returns False when an error is above
    tolerance (NaN included)."""
    scale = {"GB/s": 1e6, "TFLOP/s": 1e9}[unit]
    rates = [work / ms / scale for ms in times]
    ok = True
    for i, (name, ms, rate, err) in enumerate(zip(impls, times, rates, errs)):
        good = err <= tolerance
        ok &= good
        role = "baseline:" if i == 0 else "peer:" if i in peers else ""
        csv.line(op, shape, dtype, role + name, ms, rate, unit, rate / rates[0], err)
        print("%-20s %-16s %-5s %-48s %9.4f ms %8.1f %-7s %6.3fx  rel err %.1e%s"
              % (op, shape, dtype, name, ms, rate, unit, rate / rates[0], err, "" if good else "  CHECK FAILED"))
    return ok


class CsvOut:
    """CSV lines in bench/bench.h's format, on stdout and, with a path, in a file."""

    def __init__(self, path):
        self.file = open(path, "w") if path else None
        self._emit(CSV_HEADER)

    def _emit(self, text):
        print(text)
        if self.file:
            print(text, file=self.file, flush=True)

    def line(self, op, shape, dtype, impl, ms, rate, unit, ratio, rel):
        self._emit("csv,%s,%s,%s,%s,%.4f,%.1f,%s,%.3f,%.2e" % (op, shape, dtype, impl, ms, rate, unit, ratio, rel))

    def close(self):
        if self.file:
            self.file.close()
