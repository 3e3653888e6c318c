#!/bin/sh
# Runs every test program, shows its output, and ends with one summary line
# "N passed, N failed, N skipped" summed over all of them. Exits non-zero
# when a test failed or a program crashed.
passed=0; failed=0; skipped=0; crashed=0
for t in "$@"; do
    echo "=== $t"
    out=$("$t" 2>&1); rc=$?
    printf '%s\n' "$out"
    p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | awk '{s+=$1} END {print s+0}')
    f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | awk '{s+=$1} END {print s+0}')
    s=$(printf '%s\n' "$out" | sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' | awk '{s+=$1} END {print s+0}')
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "!!! $t exited with status $rc"
        crashed=$((crashed + 1)); failed=$((failed + 1))
    fi
done
echo
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
