#!/usr/bin/env python3
"""apply_edit.py BASE PATCH OUT - applies a unified diff (edits/*.patch) to
a generated source printed by cubin_override, exactly: every hunk's context
and removed lines must match the base at the hunk's line, else it fails
(the generated source moved on and the edit is stale). No `patch` or `git`
needed on the GPU machine, only python3."""
import re
import sys


def apply(base, patch):
    out, at = [], 0  # at: the next base line (0-based) not yet copied
    lines = iter(patch)
    for line in lines:
        m = re.match(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@", line)
        if not m:
            continue  # the --- / +++ header
        start = int(m.group(1)) - (1 if m.group(2) != "0" else 0)
        count = int(m.group(2) or 1)
        out += base[at:start]
        at = start
        while count > 0:
            h = next(lines)
            tag, text = h[:1], h[1:]
            if tag == "\\":  # "\ No newline at end of file"
                continue
            if tag in " -":
                if at >= len(base) or base[at] != text:
                    sys.exit("apply_edit: the base differs at line %d: the edit is stale" % (at + 1))
                at += 1
                count -= 1
                if tag == " ":
                    out.append(text)
            elif tag == "+":
                out.append(text)
    return out + base[at:]


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: apply_edit.py BASE PATCH OUT")
    base = open(sys.argv[1]).read().splitlines(keepends=True)
    patch = open(sys.argv[2]).read().splitlines(keepends=True)
    open(sys.argv[3], "w").write("".join(apply(base, patch)))
