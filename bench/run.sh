#!/bin/sh
# make bench: runs every benchmark (build/bench/bench_*). Each prints CSV
# lines ("csv," and bench.h's fields) and a readable table. With a GPU the
# lines are gathered into bench/results/<gpu>-<date>.csv, the whole output
# into <gpu>-<date>.log, and bench/report.py renders <gpu>-<date>.md with
# its plots. Without a GPU the benchmarks say so and nothing is written.
# Where python3 has PyTorch with CUDA, bench/torch_compare.py and
# bench/attention_grid.py run after the C benchmarks (their library:
# $TILEC_SHARED_LIB, else lib/libtilec.so) and their lines join the same files.
#
# A lent GPU gives at most 10 minutes a command, less than the whole run
# takes (bench_tune alone tunes 18 shapes), so it can be run in parts:
#   BENCHES="vadd gemm epilogue"   only these (bench_<name>, attention_decode for
#                                  bench_attention --decode, or the python
#                                  scripts by name: torch_compare attention_grid)
#   BENCH_APPEND=1                 add to today's log instead of starting it
#                                  again; the CSV and the report are made
#                                  from the whole log each time
#   TUNE_BUDGET=30                 seconds per tuning run of bench_tune
B=${1:-build}
RESULTS=${RESULTS:-bench/results}
if ! gpu=$(sh tools/gpu-name.sh bin/tilec); then
    for b in "$B"/bench/bench_*; do "$b" || exit 1; done
    echo "torch_compare.py, attention_grid.py: skipped, no GPU"
    echo "make bench: no GPU, so no results were written"
    exit 0
fi
slug=$(printf '%s' "$gpu" | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-')
stem="$RESULTS/$slug-$(date +%Y-%m-%d)"
mkdir -p "$RESULTS"
[ "${BENCH_APPEND:-0}" = 1 ] || : > "$stem.log"
status=0
# wanted NAME: whether BENCHES (when set) names it
wanted() { [ -z "${BENCHES:-}" ] && return 0; case " $BENCHES " in *" $1 "*) return 0 ;; esac; return 1; }
for b in "$B/bench/bench_compile" "$B/bench/bench_compile_many" "$B/bench/bench_vadd" "$B/bench/bench_gemm" \
         "$B/bench/bench_epilogue" "$B/bench/bench_tune" "$B"/bench/bench_*; do
    # the list names the usual order first; each benchmark runs once
    case " $done " in *" $b "*) continue ;; esac
    done="$done $b"
    name=$(basename "$b"); name=${name#bench_}
    wanted "$name" || continue
    args=""
    [ "$name" = tune ] && args="--budget ${TUNE_BUDGET:-30}"
    echo "==== $b $args" | tee -a "$stem.log"
    # tee's status is the pipeline's: a failure is marked in the log
    { "$b" $args 2>&1 || echo "!!! $b: exit status $?"; } | tee -a "$stem.log"
done
# FlashAttention's decoding shapes (bench_attention --decode), beside its grid
if wanted attention_decode; then
    echo "==== $B/bench/bench_attention --decode" | tee -a "$stem.log"
    { "$B/bench/bench_attention" --decode 2>&1 || echo "!!! bench_attention --decode: exit status $?"; } | tee -a "$stem.log"
fi
grep -q '^!!! ' "$stem.log" && status=1
if python3 -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' > /dev/null 2>&1; then
    for py in bench/torch_compare.py bench/attention_grid.py; do
        name=$(basename "$py" .py)
        wanted "$name" || continue
        echo "==== $py" | tee -a "$stem.log"
        # tee's status is the pipeline's: a failure is marked in the log
        { python3 "$py" 2>&1 || echo "!!! $py: exit status $?"; } | tee -a "$stem.log"
    done
    grep -q '^!!! ' "$stem.log" && status=1
else
    echo "torch_compare.py, attention_grid.py: skipped, no python3 with PyTorch and CUDA" | tee -a "$stem.log"
fi
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
