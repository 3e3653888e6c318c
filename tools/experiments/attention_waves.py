# attention_waves.py - an experiment, not part of the library (bench/NOTES.md, session 25): D 128
# non-causal at head counts that give 15.0, 15.5 and 16.0 waves of 128-row blocks on 132 SMs, ours and
# cuDNN (SDPA) in one run, two rounds: is the gap to cuDNN the last wave? Run from the repository root.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import attention_grid as ag
import torch_bench as tb
args = ag.parse_args(["--rounds", "2"])
pts = [(4, 16, 4096), (2, 33, 4096), (2, 31, 4096), (2, 16, 8192), (1, 33, 8192), (1, 31, 8192)]
with tb.session("attention_waves.py", args) as (tl, csv):
    tb.warm_up()
    for r in range(2):
        for b, h, s in pts:
            print("blocks %d = %.2f waves" % (b * h * s // 128, b * h * s / 128 / 132), end="  ")
            ag.bench_point(tl, csv, b, h, s, 128, False, args.reps, check=(r == 0))
