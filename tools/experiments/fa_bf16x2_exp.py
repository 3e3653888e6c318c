# fa_bf16x2_exp.py IN OUT - an experiment (bench/NOTES.md, session 25, -4 to -10 %): a hand edit of
# FlashAttention's printed source computing P = exp2 two scores at a time in bf16x2 (ex2.approx.ftz.bf16x2),
# S keeping the rounded P in f32 for the row sum; store it with cubin_override.
import re, sys
src = open(sys.argv[1]).read()
pat = re.compile(r"(\s*)for \(int tl_r = 0; tl_r < (\d+); \+\+tl_r\) \{\n(\s*const long long tl_i\w+ = [^\n]*\n)+\s*S\[tl_r\] = tl_exp2_approx\(\(\(S\[tl_r\] \* scale_log2\) - \((fmaxf\(m\[[^\n]*?\], -3.40282347e\+38f\)) \* scale_log2\)\)\);\n(\s*)\}")
m = pat.search(src)
assert m, "exp loop not found"
ind, n, mexpr = m.group(1), m.group(2), m.group(4)
new = (f"{ind}for (int tl_r = 0; tl_r < {n}; tl_r += 2) {{\n"
       f"{ind}    const float tl_ms = {mexpr} * scale_log2;\n"
       f"{ind}    const float tl_x0 = S[tl_r] * scale_log2 - tl_ms, tl_x1 = S[tl_r + 1] * scale_log2 - tl_ms;\n"
       f"{ind}    unsigned tl_a, tl_p;\n"
       f"{ind}    asm(\"cvt.rn.bf16x2.f32 %0, %2, %1;\" : \"=r\"(tl_a) : \"f\"(tl_x0), \"f\"(tl_x1));\n"
       f"{ind}    asm(\"ex2.approx.ftz.bf16x2 %0, %1;\" : \"=r\"(tl_p) : \"r\"(tl_a));\n"
       f"{ind}    P[tl_r].bits = (unsigned short)tl_p; P[tl_r + 1].bits = (unsigned short)(tl_p >> 16);\n"
       f"{ind}    S[tl_r] = __uint_as_float(tl_p << 16);\n"
       f"{ind}    S[tl_r + 1] = __uint_as_float(tl_p & 0xffff0000u);\n"
       f"{ind}}}")
src = src[:m.start()] + new + src[m.end():]
conv = re.compile(r"\s*#pragma unroll // tl_copy S -> P, register by register, two conversions at once\n\s*for \(int tl_r = 0; tl_r < \d+; tl_r \+= 2\) tl_conv2\(&P\[tl_r\], S\[tl_r\], S\[tl_r \+ 1\]\);")
src, k = conv.subn("", src)
assert k == 1, "conversion loop not found (%d)" % k
open(sys.argv[2], "w").write(src)
