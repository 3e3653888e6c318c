#!/bin/sh
# Runs every test program given and shows progress as the tests run: one
# line per test ("ok", "skip" with its reason, or "FAIL" with the test's
# output), a line per program, and one summary line "tests: N passed, N
# failed, N skipped" at the end. A program's whole output is kept in
# <program>.log next to it, and each program's wall time after its tests
# (where the time of a cold tier goes). Exits non-zero when a test failed or a program
# crashed.
passed=0; failed=0; skipped=0
# Line-buffered output from the programs, so lines arrive as tests finish.
linebuf=""
command -v stdbuf >/dev/null 2>&1 && linebuf="stdbuf -oL -eL"

# Turns cmocka's output into the progress lines. A test's own lines are
# held until it ends: printed when it fails; "  skip: why" (fixture.h's
# NEED_GPU and the tests' own skips) gives a skip its reason.
progress='
/^\[==========\] [0-9]+ test\(s\) run\./ { summary = 1 }
summary { next }
/^\[ RUN      \]/ { name = $4; held = ""; why = ""; next }
/^\[       OK \]/ { printf "  ok    %s\n", $4; fflush(); next }
/^\[  SKIPPED \]/ { printf "  skip  %s%s\n", $4, why == "" ? "" : ": " why; fflush(); next }
/^\[  FAILED  \]/ { printf "  FAIL  %s\n%s", $4, held; fflush(); next }
/^  skip: / { why = substr($0, 9) }
/^\[  ERROR   \]|^\[   LINE   \]/ { held = held "        " $0 "\n"; next }
/^\[/ { next }
{ held = held "        " $0 "\n" }
'

count() { sed -n "s/^\[  $1 *\] \([0-9]*\) test.*/\1/p" "$2" | awk '{s+=$1} END {print s+0}'; }

for t in "$@"; do
    log="$t.log"; rcfile="$t.rc"
    echo "=== $(basename "$t")"
    t0=$(date +%s.%N)
    { $linebuf "$t" 2>&1; echo $? > "$rcfile"; } | tee "$log" | awk "$progress"
    rc=$(cat "$rcfile"); rm -f "$rcfile"
    echo "    ($(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s)"
    p=$(count PASSED "$log"); f=$(count FAILED "$log"); s=$(count SKIPPED "$log")
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "!!! $t exited with status $rc; the end of its output ($log):"
        tail -n 20 "$log" | sed 's/^/        /'
        failed=$((failed + 1))
    fi
done
echo
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
