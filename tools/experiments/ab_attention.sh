#!/bin/sh
# ab_attention.sh OLD NEW [ROUNDS] -- bench_attention's points timed by two
# builds in turn (A/B in one run: both see the same clocks). OLD and NEW
# are bench_attention binaries (say, one built from main and kept in
# scratch/, one from the branch under test); POINTS (env) lists "S D causal"
# triples separated by '|', default the D=128 and D=256 points issue 9 is
# measured at. Prints one line per point and build: the build, the point,
# ms, TFLOP/s and the schedule.
old=$1 new=$2 rounds=${3:-2}
[ -x "$old" ] && [ -x "$new" ] || { echo "usage: ab_attention.sh OLD NEW [ROUNDS]" >&2; exit 2; }
points=${POINTS:-"2048 128 0|4096 128 0|8192 128 0|16384 128 0|8192 128 1|16384 128 1|4096 256 0"}
r=1
while [ "$r" -le "$rounds" ]; do
    echo "$points" | tr '|' '\n' | while read -r p; do
        for b in "$old" "$new"; do
            tag=old; [ "$b" = "$new" ] && tag=new
            # the last line of bench_attention's one-point output, without its CSV line
            printf '%s %-12s %s\n' "$tag" "$p" "$("$b" $p 2>&1 | grep -v '^csv' | tail -n 1 | cut -c29-)"
        done
    done
    r=$((r + 1))
done
