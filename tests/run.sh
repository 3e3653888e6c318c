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

# TEST_TIMEOUT=S (default: none) stops a program that runs longer than S
# seconds (timeout(1)): a kernel that never ends would otherwise hold the
# whole tier, and a GPU machine's lease with it. The program counts as
# failed, status 124.
limit=""
if [ -n "${TEST_TIMEOUT:-}" ] && [ "$TEST_TIMEOUT" != 0 ]; then
    command -v timeout >/dev/null 2>&1 || { echo "run.sh: TEST_TIMEOUT needs timeout(1)" >&2; exit 2; }
    limit="timeout $TEST_TIMEOUT"
fi

count() { sed -n "s/^\[  $1 *\] \([0-9]*\) test.*/\1/p" "$2" | awk '{s+=$1} END {print s+0}'; }

# TEST_JOBS=N (default 1) runs up to N programs at once, each to its log,
# and reports them in order as each finishes (its lines then come at its
# end); where the time is compilation, as in a cold GPU tier, programs
# overlap their NVRTC work. Programs must then not share files other than
# the cubin cache (which takes concurrent processes).
jobs=${TEST_JOBS:-1}
if [ "$jobs" -gt 1 ]; then
    for t in "$@"; do rm -f "$t.rc" "$t.time"; done
    # each: the log, then its wall time, then its status (written last: done)
    printf '%s\n' "$@" | xargs -P "$jobs" -I{} sh -c '
        t0=$(date +%s.%N); '"$limit $linebuf"' "$1" > "$1.log" 2>&1; rc=$?
        awk -v a="$t0" -v b="$(date +%s.%N)" "BEGIN { printf \"%.1f\", b - a }" > "$1.time"
        echo $rc > "$1.rc"' _ {} &
fi

for t in "$@"; do
    log="$t.log"; rcfile="$t.rc"
    echo "=== $(basename "$t")"
    if [ "$jobs" -gt 1 ]; then
        while [ ! -s "$rcfile" ]; do sleep 0.2; done
        awk "$progress" "$log"
        took=$(cat "$t.time"); rm -f "$t.time"
    else
        t0=$(date +%s.%N)
        { $limit $linebuf "$t" 2>&1; echo $? > "$rcfile"; } | tee "$log" | awk "$progress"
        took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    fi
    rc=$(cat "$rcfile"); rm -f "$rcfile"
    echo "    ($took s)"
    p=$(count PASSED "$log"); f=$(count FAILED "$log"); s=$(count SKIPPED "$log")
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        why=""; [ -n "$limit" ] && [ "$rc" -eq 124 ] && why=" (stopped after TEST_TIMEOUT = $TEST_TIMEOUT s)"
        echo "!!! $t exited with status $rc$why; the end of its output ($log):"
        tail -n 20 "$log" | sed 's/^/        /'
        failed=$((failed + 1))
    fi
done
wait
echo
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
