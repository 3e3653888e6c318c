#!/bin/sh
# make bench: runs every benchmark (build/bench/bench_*). Each prints CSV
# lines ("csv," and bench.h's fields) and a readable table. With a GPU the
# lines are gathered into bench/results/<gpu>-<date>.csv, the whole output
# into <gpu>-<date>.log, and bench/report.py renders <gpu>-<date>.md with
# its plots. Without a GPU the benchmarks say so and nothing is written.
B=${1:-build}
RESULTS=${RESULTS:-bench/results}
gpu=$(bin/tilec info 2>/dev/null | sed -n 's/^device [0-9]*: *//p' | head -n 1)
case "$gpu" in
"" | none*)
    for b in "$B"/bench/bench_*; do "$b" || exit 1; done
    echo "make bench: no GPU, so no results were written"
    exit 0 ;;
esac
slug=$(printf '%s' "$gpu" | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-')
stem="$RESULTS/$slug-$(date +%Y-%m-%d)"
mkdir -p "$RESULTS"
: > "$stem.log"
status=0
for b in "$B/bench/bench_compile" "$B/bench/bench_compile_many" "$B/bench/bench_vadd" "$B/bench/bench_gemm" \
         "$B/bench/bench_epilogue" "$B/bench/bench_tune" "$B"/bench/bench_*; do
    # the list names the usual order first; each benchmark runs once
    case " $done " in *" $b "*) continue ;; esac
    done="$done $b"
    echo "==== $b" | tee -a "$stem.log"
    "$b" 2>&1 | tee -a "$stem.log" || status=1
done
{
    echo "op,shape,dtype,impl,ms,rate,unit,ratio_to_baseline,rel_err"
    grep '^csv,' "$stem.log" | grep -v '^csv,op,' | sed 's/^csv,//'
} > "$stem.csv"
echo "results: $stem.csv, $stem.log"
if command -v python3 > /dev/null; then
    python3 bench/report.py "$stem.csv" "$stem.md" || status=1
else
    echo "python3 is missing: render the report elsewhere with python3 bench/report.py $stem.csv"
fi
exit $status
