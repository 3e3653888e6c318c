#!/usr/bin/env python3
"""exp2_poly.py IN.cu OUT.cu K -- an experiment, not part of the library:
edits a generated FlashAttention source so that K of every 8 registers of
the softmax's exp2 (S = exp2(S scale - m scale)) are computed on the FMA
and integer pipes instead of MUFU: x rounded to the nearest integer n by
the 1.5 * 2^23 trick, 2^(x - n) by a degree-3 polynomial (relative error
1.0e-4 on [-0.5, 0.5], fitted for this; bf16 P keeps 3.9e-3), n added to
the exponent bits. Why: MUFU.EX2 runs 16 a clock an SM, so a consumer
group's 64 x 176 exps take about 700 cycles of its softmax phase while the
FMA pipe idles (FlashAttention-4 does this on Blackwell). Put the result
under the op's cache key with cubin_override and time it against the
unedited kernel (bench/NOTES.md, session 17)."""
import re
import sys

POLY = r"""
// exp2 on the FMA and integer pipes (tools/experiments/exp2_poly.py)
__device__ __forceinline__ float tl_exp2_poly(float x)
{
    x = fmaxf(x, -127.0f); // -inf (masked) and below: exactly +0 (n = -127, f = 0, p = 1)
    const float t = __fadd_rn(x, 12582912.0f); // 1.5 * 2^23: x rounded to an integer in the low bits
    const float f = __fsub_rn(x, __fsub_rn(t, 12582912.0f)); // in [-0.5, 0.5]
    const float p = fmaf(fmaf(fmaf(0.0550089306f, f, 0.242210998f), f, 0.693282931f), f, 1.0f);
    return __int_as_float(__float_as_int(p) + ((__float_as_int(t) - 0x4B400000) << 23));
}
"""


def main():
    src, out, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
    text = open(src).read()
    text = text.replace('#include "tl_device.cuh"\n', '#include "tl_device.cuh"\n' + POLY, 1)
    pat = re.compile(r"S\[tl_r\] = tl_exp2_approx\((.*)\);$", re.M)
    n = len(pat.findall(text))
    if n != 1:
        sys.exit("exp2_poly.py: %d softmax exp2 lines, want 1" % n)
    text = pat.sub(lambda m: "S[tl_r] = (tl_r %% 8) < %d ? tl_exp2_poly(%s) : tl_exp2_approx(%s);"
                   % (k, m.group(1), m.group(1)), text)
    open(out, "w").write(text)


if __name__ == "__main__":
    main()
