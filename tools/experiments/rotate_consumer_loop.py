#!/usr/bin/env python3
"""rotate_consumer_loop.py IN OUT -- a hand experiment (bench/NOTES.md,
session 18: -13 %): FlashAttention's persistent consumer loop rotated, as
FlashAttention-3 overlaps inside a warpgroup. A prologue issues S_0 and
runs its softmax; each later turn issues S_j and P_(j-1) V_(j-1) together,
waits for S_j alone (wgmma.wait_group 1), runs its softmax under the P V,
then waits for that (0) before O's rescale and P's conversion; an epilogue
issues the last P V. Every wait count is straight-line code, as ptxas
needs. Works on the generated source of the sm_90a kernels whose K and V
have rings of their own (D 128, non-causal, persistent = 1; print it with
cubin_override.c, store the output under the op's key the same way)."""
import re, sys
src = open(sys.argv[1]).read()
lines = src.split('\n')
def find(pat, start=0, exact=False):
    for i in range(start, len(lines)):
        if (lines[i] == pat) if exact else (pat in lines[i]):
            return i
    raise SystemExit('not found: ' + pat)
a = find('// tl_pipelined, consumer side')
loop = find('for (long long tl_i5 = 0; tl_i5 < tl_n33; ++tl_i5) {', a)
end = find('            tl_wgmma_wait<0>();', loop, True)   # after the loop
body = lines[loop + 1:end - 1]  # without the for line and its closing brace
text = '\n'.join(body)
# pieces
s_gemm = re.search(r'( *\{ // tl_gemm S = .*?\n                    tl_wgmma_commit\(\);\n                \})', text, re.S).group(1)
pv_gemm = re.search(r'( *\{ // tl_gemm acc \+= P \* Vs.*?\n                    tl_wgmma_commit\(\);\n                \})', text, re.S).group(1)
soft_start = text.index('                if (((tl_i5 * ')  if 'if (((tl_i5 * ' in text else None
# the softmax: from the mask (or the m_prev copy) up to the acc rescale
i0 = text.index('                // the slots of the tiles read so far released')
i0 = text.index('\n', text.index('tl_mbar_arrive(&tl_pre_empty[0]);', i0))
i0 = text.index('}', i0) + 2
i1 = text.index("                if (alpha[0] != 1.0f || alpha[1] != 1.0f)")
stats = text[i0:i1]
i2 = text.index("                // a turn on the tensor cores starts here") if "// a turn on the tensor cores starts here" in text else None
conv_end = text.index('tl_conv2(&P[tl_r], S[tl_r], S[tl_r + 1]);')
conv_end = text.index('\n', conv_end)
rescale = text[i1:conv_end]
import re as _re
st = int(_re.search(r'tl_st36 = \(tl_seq35 % (\d+)\)', text).group(1))
pv_gemm = _re.sub(r'Vs \+ \(tl_st36\) \* (\d+)', r'Vs + (tl_pst) * \1', pv_gemm)
def mbar(cond, code):
    return code if cond else ''
k_wait = f"                tl_mbar_wait(&tl_full[tl_st36], (unsigned)(((tl_seq35 / {st}) % 2)));"
v_wait = f"                tl_mbar_wait(&tl_full[(tl_pst + {st})], (unsigned)((((tl_seq35 - 1) / {st}) % 2)));"
def turn(idx):
    return f'''                {{
                    const int tl_turn = (int)((tl_p * (tl_n33 + 1LL))) + (int)({idx}) + tl_wg;
                    if (tl_turn > 0)
                        tl_mbar_wait(&tl_order[tl_wg], (unsigned)((tl_turn - 1) % 2));
                }}'''
arrive = '''                if (tl_lane == 0) {
                    tl_mbar_arrive(&tl_order[(1 - tl_wg)]);
                }'''
rel_k = '''                if (tl_lane == 0) {
                    tl_mbar_arrive(&tl_empty[tl_st36]);
                }
                if ((tl_i5 == (tl_n33 - 1LL)) && (tl_lane == 0)) {
                    tl_mbar_arrive(&tl_pre_empty[0]);
                }'''
rel_v = f'''                if (tl_lane == 0) {{
                    tl_mbar_arrive(&tl_empty[(tl_pst + {st})]);
                }}'''
new = f'''            if (tl_n33 > 0LL) {{ // rotated: prologue S_0 and its softmax
                const long long tl_i5 = 0;
                const int tl_seq35 = (int)(((tl_p * tl_n33) + tl_i5));
                const int tl_st36 = (tl_seq35 % {st});
{k_wait}
{turn('tl_i5')}
{s_gemm}
{arrive}
                tl_wgmma_wait<0>();
{rel_k}
{stats}
{rescale}
            }}
            for (long long tl_i5 = 1; tl_i5 < tl_n33; ++tl_i5) {{ // turn i = [S_i, P_(i-1) V_(i-1)]
                const int tl_seq35 = (int)(((tl_p * tl_n33) + tl_i5));
                const int tl_st36 = (tl_seq35 % {st});
                const int tl_pst = ((tl_seq35 - 1) % {st});
{k_wait}
{v_wait}
{turn('tl_i5')}
{s_gemm}
{pv_gemm}
{arrive}
                tl_wgmma_wait<1>();
{rel_k}
{stats}
                tl_wgmma_wait<0>();
{rel_v}
{rescale}
            }}
            if (tl_n33 > 0LL) {{ // epilogue: P_(n-1) V_(n-1)
                const long long tl_i5 = tl_n33;
                const int tl_seq35 = (int)(((tl_p * tl_n33) + tl_i5));
                const int tl_pst = ((tl_seq35 - 1) % {st});
{v_wait}
{turn('tl_i5')}
{pv_gemm}
{arrive}
                tl_wgmma_wait<0>();
{rel_v}
            }} else {{
{turn('0')}
{arrive}
            }}'''
# the old post-loop: wait<0> and the last V release are done in the loop now
post = lines[end:end + 10]
post_text = '\n'.join(post)
post_text = re.sub(r'            tl_wgmma_wait<0>\(\);\n', '', post_text, count=1)
post_text = re.sub(r'            if \(\(tl_n33 > 0LL\) && \(tl_lane == 0\)\) \{\n.*?\n            \}\n', '', post_text, count=1, flags=re.S)
out = lines[:loop] + new.split('\n') + post_text.split('\n') + lines[end + 10:]
open(sys.argv[2], 'w').write('\n'.join(out))
