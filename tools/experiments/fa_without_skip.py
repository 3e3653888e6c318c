# fa_without_skip.py - an experiment filter (stdin -> stdout): the op's
# FlashAttention source without the stale maximum and without the skip of
# O's rescale (the code before 2146a44), for an A/B with cubin_override.c:
#   cubin_override DIR - 128 0 | python3 fa_without_skip.py > /tmp/b.cu
#   cubin_override DIR_B /tmp/b.cu 128 0
import sys
s = sys.stdin.read()
lines = s.split("\n")
out = [l for l in lines if "> 8.0f) ? m[tl_r] : m_prev[tl_r]" not in l and "// a factor of 1 everywhere" not in l]
assert len(lines) - len(out) == 2, len(lines) - len(out)
sys.stdout.write("\n".join(out))
