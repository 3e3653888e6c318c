#!/usr/bin/env python3
"""fa_kv_skip.py - an experiment tool, not part of the library: edits a
FlashAttention source printed by cubin_override (sm_90a, wgmma) so that the
P V gemm skips its k16 steps past the last key any row of the warpgroup may
see: the keys past seq_kv in the ragged last tile and, causal, the keys past
the diagonal of the warpgroup's last row. P is exactly zero there (the mask
set those scores to -inf), so the result is unchanged; what it saves is
tensor-core time on the last tile of every block (bench/NOTES.md, session 26).

The tile's full path keeps its straight run of wgmmas (a branch around each
one makes ptxas put a warpgroup.arrive before it, C7519); the ladder runs only
where the bound is short of the tile.

    fa_kv_skip.py IN.cu OUT.cu [--s-skip]

--s-skip also skips a warpgroup's S = Q K^T gemm where it sees no key of the
tile (causal only: its scores are all masked to -inf, so what the gemm
would leave in S does not matter).
Then: cubin_override DIR OUT.cu D CAUSAL ... stores it under the op's key.
"""
import re
import sys


def block_at(s, start):
    """The text of the brace block that opens on the line at start."""
    i = s.index("{", start)
    depth = 0
    for j in range(i, len(s)):
        if s[j] == "{":
            depth += 1
        elif s[j] == "}":
            depth -= 1
            if depth == 0:
                return s[start:j + 1]
    raise SystemExit("unbalanced braces")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    s_skip = "--s-skip" in sys.argv
    if len(args) != 2:
        raise SystemExit(__doc__)
    s = open(args[0]).read()
    pv = re.search(r"\n( *)\{ // tl_gemm acc \+= P \* Vs: .* m64n(\d+)k16 wgmma, A from registers\n", s)
    sg = re.search(r"\n( *)\{ // tl_gemm S = Qs \* Ks\^T: .* m64n(\d+)k16 wgmma", s)
    if not pv or not sg:
        raise SystemExit("no wgmma P V / S gemm in the source")
    bn = int(sg.group(2))
    loops = re.findall(r"for \(long long (tl_i\d+) = 0; \1 < tl_n\d+; \+\+\1\) \{", s[:pv.start()])
    kv = loops[-1]  # the consumer's loop over the K/V tiles
    bound = "(SKV - %s * %dLL)" % (kv, bn)
    causal = re.search(r"tl_min\(\(SKV - tl_t\d+\), \(tl_i\d+_0 \+ \(\((.*) - tl_t\d+\) \+ 1LL\)\)\)\)", s)
    if causal:  # row0 + seq_kv - seq_q: the block's first row's diagonal
        diag = causal.group(1)
        bound = "tl_min(%s, (%s + tl_wgi * 64LL + 64LL) - %s * %dLL)" % (bound, diag, kv, bn)
    ind = pv.group(1)
    blk = block_at(s, pv.start() + 1)
    call = re.search(r"tl_wgmma_m64n\d+k16_\w+_tb_rs\(", blk)
    ladder = blk[:call.start()] + "if (tl_k < tl_kvn) " + blk[call.start():]
    new = ("%sconst int tl_kvn = (int)tl_max(%s, 0LL); // keys of this tile a row of the warpgroup may see\n"
           "%sif (tl_kvn >= %d)\n%s%s\n%selse\n%s%s" % (ind, bound, ind, bn, ind, blk.lstrip(" "), ind, ind,
                                                         ladder.lstrip(" ")))
    s = s[:pv.start() + 1] + new + s[pv.start() + 1 + len(blk):]
    if s_skip and causal:
        sg = re.search(r"\n( *)\{ // tl_gemm S = Qs \* Ks\^T", s)
        sblk = block_at(s, sg.start() + 1)
        ind = sg.group(1)
        s = (s[:sg.start() + 1] + "%sif (%s > 0LL)\n%s" % (ind, bound, ind) + sblk.lstrip(" ") +
             s[sg.start() + 1 + len(sblk):])
    open(args[1], "w").write(s)


main()
