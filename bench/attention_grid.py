#!/usr/bin/env python3
"""tl_op_flash_attn next to PyTorch's attention, in one process.

  attention_grid.py             the FlashAttention grid of ANCHORS.md (bf16,
                                batch x seqlen = 16k, heads x head_dim = 2048),
                                each point timed in the same run as SDPA's
                                cuDNN backend and its flash backend (FA2)
  attention_grid.py --validate  numerics against torch's math backend: fp64
                                at small shapes, fp32 at large ones

Without PyTorch with CUDA it says so and exits 0.
"""
import math
import statistics
import sys

import torch_bench as tb
from tilec_ctypes import TilecError, flash_attn_desc

# ANCHORS.md, cuDNN (SDPA backend) on the H200, TFLOP/s: (non-causal, causal).
# Used as the baseline only where cuDNN cannot run in this process.
ANCHORS_CUDNN = {
    (64, 512): (387, 260), (64, 2048): (451, 393), (64, 8192): (467, 438), (64, 16384): (467, 441),
    (128, 512): (512, 333), (128, 1024): (567, 425), (128, 2048): (599, 486), (128, 4096): (623, 529),
    (128, 8192): (611, 591), (128, 16384): (612, 566),
}
TOLERANCE = 1e-2      # bf16/f16 output, norm-wise
LSE_TOLERANCE = 1e-3  # f32 log-sum-exp of the same (rounded) inputs
REF_CHUNK_ELEMS = 1 << 29  # scores per reference chunk (2 GiB in fp32)


# --- tensors -----------------------------------------------------------------

def bhsd_tensor(b, h, s, d, dtype, layout, gen=None):
    """A [B, H, S, D] view over memory laid out as [B, H, S, D] ("bhsd") or
    [B, S, H, D] ("bshd"); random normal when gen is given, else empty."""
    torch = tb.torch
    shape = (b, h, s, d) if layout == "bhsd" else (b, s, h, d)
    if gen is None:
        t = torch.empty(shape, dtype=dtype, device=tb.DEVICE)
    else:
        t = torch.randn(shape, dtype=dtype, device=tb.DEVICE, generator=gen)
    return t if layout == "bhsd" else t.transpose(1, 2)


def make_qkv(b, h, hkv, sq, skv, d, dtype, layout, seed):
    gen = tb.torch.Generator(device=tb.DEVICE).manual_seed(seed)
    return (bhsd_tensor(b, h, sq, d, dtype, layout, gen), bhsd_tensor(b, hkv, skv, d, dtype, layout, gen),
            bhsd_tensor(b, hkv, skv, d, dtype, layout, gen))


def attention_flops(b, h, sq, skv, d, causal):
    """4 B H Sq Skv D (two GEMMs), halved when causal, as ANCHORS.md counts."""
    return 4.0 * b * h * sq * skv * d / (2 if causal else 1)


# --- references --------------------------------------------------------------

def causal_mask(sq, skv):
    """True where query i may attend key j: j <= i + skv - sq (bottom-right)."""
    torch = tb.torch
    i = torch.arange(sq, device=tb.DEVICE).unsqueeze(1)
    j = torch.arange(skv, device=tb.DEVICE).unsqueeze(0)
    return j <= i + (skv - sq)


def _reference_chunk(q, k, v, mask, scale, want_lse):
    """Math-backend attention of one chunk of heads, and its log-sum-exp."""
    torch = tb.torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel(SDPBackend.MATH):
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    if not want_lse:
        return o, None
    s = (q @ k.transpose(-1, -2)) * scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return o, torch.logsumexp(s, dim=-1)


def reference_attention(q, k, v, causal, ref_dtype, scale=None, want_lse=False):
    """Attention of q [B, H, Sq, D], k, v [B, Hkv, Skv, D] by torch's math
    backend on inputs upcast to ref_dtype, in chunks of heads so the scores
    stay within REF_CHUNK_ELEMS; rows with no key to attend give zeros (and
    a log-sum-exp of -inf). Returns (o, lse or None)."""
    torch = tb.torch
    b, h, sq, d = q.shape
    skv, group = k.shape[2], h // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scale = scale or 1.0 / math.sqrt(d)
    mask = causal_mask(sq, skv) if causal else None
    o = torch.empty((b, h, sq, d), dtype=ref_dtype, device=tb.DEVICE)
    lse = torch.empty((b, h, sq), dtype=torch.float32, device=tb.DEVICE) if want_lse else None
    per = max(1, REF_CHUNK_ELEMS // (sq * skv))
    for bi in range(b):
        for h0 in range(0, h, per):
            hs = slice(h0, min(h, h0 + per))
            oc, lc = _reference_chunk(q[bi, hs].to(ref_dtype), k[bi, hs].to(ref_dtype), v[bi, hs].to(ref_dtype),
                                      mask, scale, want_lse)
            o[bi, hs] = oc
            if want_lse:
                lse[bi, hs] = lc
    empty_rows = max(0, sq - skv) if causal else 0
    o[:, :, :empty_rows] = 0
    if want_lse:
        lse[:, :, :empty_rows] = float("-inf")
    return o, lse


def lse_error(lse, ref):
    """Relative error of the finite log-sum-exps; inf where the -inf rows differ."""
    torch = tb.torch
    ref_inf = torch.isneginf(ref)
    if not torch.equal(torch.isneginf(lse), ref_inf):
        return float("inf")
    keep = ~ref_inf
    if not keep.any():
        return 0.0
    return tb.rel_err(lse[keep], ref[keep])


# --- the implementations -----------------------------------------------------

def ours_fn(tl, q, k, v, o, causal, lse=None, scale=0.0):
    """A callable running tl_op_flash_attn into o (and lse); it returns o."""
    desc = flash_attn_desc(q, k, v, o, causal, lse is not None, scale)

    def run(i=0):
        tl.flash_attn(desc, q, k, v, o, lse, tb.stream())
        return o
    return run


def sdpa_fn(backend, q, k, v, causal):
    """A callable running SDPA with only `backend` enabled (no fallback)."""
    torch = tb.torch
    from torch.nn.attention import sdpa_kernel
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def run(i=0):
        with sdpa_kernel(backend):
            return sdpa(q, k, v, is_causal=causal)
    return run


def _try_output(fn):
    """(output, None), or (None, the reason fn cannot run)."""
    try:
        return fn(), None
    except (RuntimeError, TilecError) as e:
        return None, str(e).strip().splitlines()[0][:100]


# --- the grid ----------------------------------------------------------------

def grid_points(dims, seqs, causals):
    for d in dims:
        for s in seqs:
            for causal in causals:
                yield 16384 // s, 2048 // d, s, d, causal


def _measure_point(tl, b, h, s, d, causal, reps, layout, check, seed):
    """Runs ours, SDPA cuDNN and SDPA flash once (outputs and, with check,
    errors against fp32 math), then times those that ran, interleaved.
    Returns (names, reasons a run failed or None, ms, rel errs), the last
    two by index of what ran."""
    torch = tb.torch
    from torch.nn.attention import SDPBackend
    q, k, v = make_qkv(b, h, h, s, s, d, torch.bfloat16, layout, seed)
    o = bhsd_tensor(b, h, s, d, torch.bfloat16, layout).fill_(float("nan"))
    fns = [ours_fn(tl, q, k, v, o, causal), sdpa_fn(SDPBackend.CUDNN_ATTENTION, q, k, v, causal),
           sdpa_fn(SDPBackend.FLASH_ATTENTION, q, k, v, causal)]
    names = ["tl_op_flash_attn " + tl.schedule_text("flash_attn", flash_attn_desc(q, k, v, o, causal)),
             "sdpa cudnn", "sdpa flash (FA2)"]
    results = [_try_output(fn) for fn in fns]
    ran = [i for i, (_, why) in enumerate(results) if why is None]
    ref = reference_attention(q, k, v, causal, torch.float32)[0] if check else None
    errs = {i: tb.rel_err(results[i][0], ref) if check else float("nan") for i in ran}
    times = dict(zip(ran, tb.time_interleaved([fns[i] for i in ran], reps)))
    return names, [why for _, why in results], times, errs


def bench_point(tl, csv, b, h, s, d, causal, reps, layout="bhsd", check=True, seed=1, ratios=None):
    """One point of the grid: ours, cuDNN and FA2 in the same run; prints a
    table row and the CSV lines, and appends ours / baseline to ratios (a
    list) when given. Returns False when ours failed or missed the
    tolerance (True when this build has no tl_op_flash_attn at all)."""
    names, whys, times, errs = _measure_point(tl, b, h, s, d, causal, reps, layout, check, seed)
    flops = attention_flops(b, h, s, s, d, causal)
    tflops = {i: flops / ms / 1e9 for i, ms in times.items()}
    base, base_name = _baseline(tflops, d, s, causal)
    op, shape = "flash_attn_causal_torch" if causal else "flash_attn_torch", "B%dxH%dxS%dxD%d" % (b, h, s, d)
    roles = ["", "baseline:", "peer:"]  # ours, cuDNN, FA2 (bench.h)
    for i in times:
        csv.line(op, shape, "bf16", roles[i] + names[i].strip(), times[i], tflops[i], "TFLOP/s", tflops[i] / base,
                 errs[i])
    _print_row(d, s, b, h, causal, tflops, base, base_name, errs, whys)
    if ratios is not None and 0 in tflops:
        ratios.append(tflops[0] / base)
    if not tl.has("tl_op_flash_attn"):
        return True  # said once at the start; the PyTorch side still ran
    return 0 in times and (not check or errs[0] <= TOLERANCE)


def _baseline(tflops, d, s, causal):
    """The rate ratios are taken to: cuDNN in this run, else ANCHORS.md's."""
    if 1 in tflops:
        return tflops[1], "cuDNN"
    anchor = ANCHORS_CUDNN.get((d, s))
    return (anchor[int(causal)], "cuDNN (ANCHORS)") if anchor else (float("nan"), "none")


GRID_HEADER = "%4s %6s %3s %3s %-6s %9s %9s %9s %9s %9s %9s  %s" % (
    "D", "S", "B", "H", "mask", "ours", "cuDNN", "FA2", "ours/base", "FA2/base", "rel err", "baseline / notes")


def _print_row(d, s, b, h, causal, tflops, base, base_name, errs, whys):
    def rate(i):
        return "%9.1f" % tflops[i] if i in tflops else "%9s" % "-"

    def ratio(i):
        return "%9.3f" % (tflops[i] / base) if i in tflops else "%9s" % "-"
    notes = [base_name] + ["%s: %s" % (n, why) for n, why in zip(("ours", "cuDNN", "FA2"), whys) if why]
    err = "%9.1e" % errs[0] if 0 in errs else "%9s" % "-"
    print("%4d %6d %3d %3d %-6s %s %s %s %s %s %s  %s" % (d, s, b, h, "causal" if causal else "none", rate(0),
                                                          rate(1), rate(2), ratio(0), ratio(2), err,
                                                          "; ".join(notes)), flush=True)


def run_grid(tl, csv, args):
    """The grid, args.rounds times over (each point's runs interleaved
    within a round); with more than one round, a summary of each point's
    ratio to the baseline across the rounds (the card's clocks drift
    between rounds by a few %, so one round's ratio is one sample)."""
    print("# TFLOP/s, FLOPs = 4 B H S^2 D (halved when causal); bf16, layout %s; rel err of ours vs fp32 math"
          % args.layout)
    ok = True
    causals = [m == "causal" for m in args.masks]
    points = list(grid_points(args.dims, args.seqs, causals))
    ratios = {p: [] for p in points}
    for r in range(args.rounds):
        if args.rounds > 1:
            print("# round %d of %d" % (r + 1, args.rounds))
        print(GRID_HEADER)
        for p in points:
            b, h, s, d, causal = p
            ok &= bench_point(tl, csv, b, h, s, d, causal, args.reps, args.layout,
                              not args.no_check and r == 0, args.seed, ratios[p])
    if args.rounds > 1:
        print("# ours / baseline over %d rounds" % args.rounds)
        print("%4s %6s %-6s %9s %9s %9s" % ("D", "S", "mask", "median", "min", "max"))
        for (b, h, s, d, causal), rs in ratios.items():
            if rs:
                print("%4d %6d %-6s %9.3f %9.3f %9.3f" % (d, s, "causal" if causal else "none",
                                                          statistics.median(rs), min(rs), max(rs)))
    return ok


# --- validation --------------------------------------------------------------

def _case(b, h, hkv, sq, skv, d, causal, layout="bhsd", dtype="bf16", lse=False, scale=0.0, ref="f64"):
    return dict(b=b, h=h, hkv=hkv, sq=sq, skv=skv, d=d, causal=causal, layout=layout, dtype=dtype, lse=lse,
                scale=scale, ref=ref)


# Small shapes against fp64, then large ones against fp32: ragged lengths,
# length 1, unequal lengths both ways, causal, GQA and MQA, both layouts,
# D 64/128/256, f16 and bf16, the log-sum-exp, a scale of our own.
VALIDATION_CASES = [
    _case(2, 4, 4, 200, 200, 64, False),
    _case(2, 4, 4, 200, 200, 64, True, lse=True),
    _case(1, 4, 4, 333, 333, 128, True, layout="bshd", lse=True),
    _case(1, 2, 2, 130, 257, 256, False, lse=True),
    _case(1, 2, 2, 129, 129, 256, True, layout="bshd"),
    _case(3, 2, 2, 1, 1, 64, False, lse=True),
    _case(1, 4, 4, 1, 300, 128, True, lse=True),
    _case(1, 4, 4, 300, 100, 64, True, lse=True),
    _case(1, 4, 4, 100, 300, 128, True, layout="bshd", lse=True),
    _case(2, 8, 2, 257, 257, 64, True, lse=True),
    _case(1, 8, 1, 200, 190, 128, False, layout="bshd"),
    _case(1, 4, 2, 129, 200, 256, True, layout="bshd", lse=True),
    _case(2, 4, 4, 190, 190, 64, True, dtype="f16", lse=True),
    _case(1, 4, 4, 250, 250, 128, False, dtype="f16", scale=0.3),
    _case(2, 16, 16, 4096, 4096, 128, False, ref="f32"),
    _case(2, 16, 16, 4096, 4096, 128, True, ref="f32", lse=True),
    _case(1, 32, 8, 8192, 8192, 64, True, layout="bshd", ref="f32"),
    _case(1, 16, 4, 1000, 5000, 128, True, ref="f32", lse=True),
    _case(1, 8, 8, 3000, 1000, 256, True, layout="bshd", ref="f32", lse=True),
]


def validate_case(tl, c, seed):
    """Runs one case; returns (rel err of O, rel err of LSE or None)."""
    torch = tb.torch
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[c["dtype"]]
    q, k, v = make_qkv(c["b"], c["h"], c["hkv"], c["sq"], c["skv"], c["d"], dtype, c["layout"], seed)
    o = bhsd_tensor(c["b"], c["h"], c["sq"], c["d"], dtype, c["layout"]).fill_(float("nan"))
    lse = torch.full((c["b"], c["h"], c["sq"]), float("nan"), device=tb.DEVICE) if c["lse"] else None
    ours_fn(tl, q, k, v, o, c["causal"], lse, c["scale"])()
    ref_dtype = torch.float64 if c["ref"] == "f64" else torch.float32
    ref_o, ref_lse = reference_attention(q, k, v, c["causal"], ref_dtype, c["scale"] or None, c["lse"])
    return tb.rel_err(o, ref_o), (lse_error(lse, ref_lse) if c["lse"] else None)


def run_validation(tl, seed):
    print("%-52s %-4s %10s %10s  %s" % ("case", "ref", "rel err O", "rel err LSE", "verdict"))
    failures = 0
    for c in VALIDATION_CASES:
        name = "B%d H%d/%d Sq%d Skv%d D%d %s %s %s%s%s" % (
            c["b"], c["h"], c["hkv"], c["sq"], c["skv"], c["d"], "causal" if c["causal"] else "full",
            c["layout"], c["dtype"], " lse" if c["lse"] else "", " scale=%g" % c["scale"] if c["scale"] else "")
        try:
            err, lerr = validate_case(tl, c, seed)
        except TilecError as e:
            print("%-52s %-4s %10s %10s  FAIL: %s" % (name, c["ref"], "-", "-", e), flush=True)
            failures += 1
            continue
        ok = err <= TOLERANCE and (lerr is None or lerr <= LSE_TOLERANCE)
        failures += not ok
        print("%-52s %-4s %10.2e %10s  %s" % (name, c["ref"], err, "-" if lerr is None else "%.2e" % lerr,
                                              "ok" if ok else "FAIL"), flush=True)
    print("%d of %d cases passed (O: rel err <= %g; LSE: <= %g, -inf rows exact)"
          % (len(VALIDATION_CASES) - failures, len(VALIDATION_CASES), TOLERANCE, LSE_TOLERANCE))
    return failures == 0


# --- main --------------------------------------------------------------------

def parse_args(argv):
    p = tb.common_args(__doc__.splitlines()[0])
    p.add_argument("--validate", action="store_true", help="check numerics instead of timing the grid")
    p.add_argument("--dims", type=int, nargs="+", default=[64, 128], help="head dims of the grid")
    p.add_argument("--seqs", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192, 16384])
    p.add_argument("--masks", choices=("full", "causal"), nargs="+", default=["full", "causal"],
                   help="which masks to time (default: both)")
    p.add_argument("--layout", choices=("bhsd", "bshd"), default="bhsd", help="memory layout of Q, K, V, O")
    p.add_argument("--no-check", action="store_true", help="skip the fp32 reference at each grid point")
    p.add_argument("--rounds", type=int, default=1,
                   help="time the grid this many times and summarise each point's ratio (checks: first round)")
    return tb.parse(p, argv)


def main(argv=None):
    args = parse_args(argv)
    with tb.session("attention_grid.py", args) as (tl, csv):
        if not tl.has("tl_op_flash_attn"):
            print("attention_grid.py: this libtilec has no tl_op_flash_attn; timing the PyTorch side only")
        if args.validate:
            ok = run_validation(tl, args.seed)
        else:
            tb.warm_up()
            ok = run_grid(tl, csv, args)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
