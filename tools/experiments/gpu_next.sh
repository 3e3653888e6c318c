#!/bin/sh
# gpu_next.sh STAGE - the next GPU session's calls, one stage a call (each under 600 s), written while no
# device was lent (sessions 36-37). Run from the repository root on the GPU machine; logs go to
# $OUT/STAGE.log as each step ends (a call cut short keeps what came before). Carry: .device-deps, and
# scratch/tc2 if it exists (a cubin cache filled here: `TILEC_TEST_PLAN_CACHE=$PWD/scratch/tc2 make
# plan-check`, then fill_tune_cache for the tuner stages); without it the programs compile there.
# The hand edits (edits/*.patch, on the sources main generated in session 37) are applied to what the
# build generates; a stale one is refused by apply_edit.py and skipped. bench/NOTES.md, session 37, has the predictions.
# Stages a and h were measured in session 38; since 7eccc0b (the tile loops' heads printed from statements)
# the attention edits no longer apply (stale: refused, not run).
#   a  D 128 non-causal 2k/4k/8k: A (generated) against the edits F, G, H (the ragged last key tile
#      peeled), X and Y (turns across blocks; Y = branch cross-block's kernel); numerics first. ~250 s
#   t  the GPU tier (make test). ~250 s
#   g  test_gpu_tune; the nine ANCHORS GEMMs (the op's choice against cuBLAS). ~300 s
#   f  `tilec tune flash_attn` at 4x16x4096x128 (both masks) and 8x32x2048x64 causal, then those
#      points with and without the records. ~420 s
#   k  `tilec tune gemm` at issue 11's weakest points (1x4096x4096 and 1024^3, NN and NT), then those
#      shapes with and without the records. ~340 s
#   e  (session 38) the fused bias + GELU against cuBLASLt's at 4096^3 and 8192^3 (not measured since
#      session 31), FP8 8192x8192x2048 twice (0.879 / 0.884 x cuBLASLt in session 38), and 1x4096x4096
#      three times (NN 0.838-0.849 of the copy in session 38, the bar 0.85). ~150 s
#   r  (session 39) the block counter's protocol, now written by the launch pass (7eccc0b): the counter
#      kernels (ring2p row ops, causal attention, the GEMM's persistent 2) under racecheck and memcheck
#      at small sizes (135 s a run at most); then stage t, which also runs test_gpu_gemm's stream-K
#      cases after 755d19b (stream-K's units as lets of p). ~550 s
#   h  FP8 against cuBLASLt; D 64 from 8k keys with P V waited before the next S (w0); the unsplit
#      swapped GEMM (8x14336x4096) with its group waited in the loop (w0). ~350 s
set -u
stage=${1:?usage: gpu_next.sh a|t|g|f|k|e|h|r}
export LD_LIBRARY_PATH=$PWD/.device-deps/usr/lib/x86_64-linux-gnu
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
LOG=$OUT/$stage.log
CACHE=${CACHE:-$PWD/scratch/tc2}; [ -d $CACHE ] || { mkdir -p /tmp/tc0; CACHE=/tmp/tc0; }
E=tools/experiments
say() { echo "$*" | tee -a $LOG; }
# a step with a hard limit (a hung kernel must not take the call with it), its output to the log
t() {
  lim=$1; shift
  timeout -k 5 $lim "$@" > /tmp/t.out 2>&1; rc=$?
  grep -v "^csv\|^#" /tmp/t.out | tee -a $LOG
  [ $rc = 0 ] || say "(exit $rc)"
  return $rc
}
build() { make -j16 CMOCKA_DIR=.device-deps/usr "$@" > $OUT/build_$stage.log 2>&1 || { tail -30 $OUT/build_$stage.log; exit 1; }; }
tools() {
  cc -std=c11 -O2 -Iinclude -Isrc -Ibuild/gen -o /tmp/cubin_override $E/cubin_override.c lib/libtilec.a -ldl -lpthread -lm &&
  cc -std=c11 -O2 -Iinclude -o /tmp/fa_check $E/fa_check.c lib/libtilec.a -ldl -lpthread -lm || exit 1
}
fresh() { rm -rf /tmp/$1; cp -r $CACHE /tmp/$1; }
# edit NAME PATCH WHAT...: a cache /tmp/NAME holding the edit of WHAT's generated source (cubin_override's
# arguments; a new copy of the cache unless /tmp/NAME exists); 1 when the edit is stale or does not compile
edit() {
  name=$1 patch=$2; shift 2
  [ -d /tmp/$name ] || fresh $name
  /tmp/cubin_override /tmp/$name - "$@" > /tmp/$name.base.cu 2>> $LOG &&
  python3 $E/apply_edit.py /tmp/$name.base.cu $E/edits/$patch /tmp/$name.cu >> $LOG 2>&1 &&
  /tmp/cubin_override /tmp/$name /tmp/$name.cu "$@" >> $LOG 2>&1 || { say "edit $name ($patch) skipped"; return 1; }
}

case $stage in
a)
  build lib/libtilec.a build/bench/bench_attention; tools
  fresh A; ok=A
  for v in F G H X Y; do
    rm -rf /tmp/$v
    edit $v fa4k_$v.patch 128@4096 0 || continue
    say "== numerics $v"; t 60 env TILEC_CACHE_DIR=/tmp/$v /tmp/fa_check 128 0 2048 4100 8192 && ok="$ok $v"
  done
  say "== timed: $ok"
  for r in 1 2; do for s in 4096 2048 8192; do for v in $ok; do
    printf "%s %s " $v $s >> $LOG; t 30 env TILEC_CACHE_DIR=/tmp/$v build/bench/bench_attention $s 128 0
  done; done; done ;;
r)
  build test-build
  for x in test_gpu_softmax test_gpu_attention; do for tool in racecheck memcheck; do
    say "== $tool $x"
    t 135 env TILEC_CACHE_DIR=$CACHE TILEC_TEST_SMALL=1 compute-sanitizer --tool $tool --error-exitcode 9 build/tests/$x
  done; done ;;
t)
  CMOCKA_DIR=.device-deps/usr TILEC_CACHE_DIR=$CACHE TEST_JOBS=8 timeout -k 5 560 make test > $OUT/tier.log 2>&1
  say "make test exit $?"
  grep -E "^tests:|FAILED|failed" $OUT/tier.log | tail -20 | tee -a $LOG ;;
g)
  build lib/libtilec.a bin/tilec build/tests/test_gpu_tune build/bench/bench_gemm_small
  fresh G
  say "== test_gpu_tune"; t 200 env TILEC_CACHE_DIR=/tmp/G build/tests/test_gpu_tune
  say "== ANCHORS (the op's choice x cuBLAS)"
  for s in 1024x1024x1024 2048x2048x2048 4096x4096x4096 8192x8192x8192 16384x16384x16384 8192x8192x1024 \
           4096x14336x4096 16384x4096x4096 4096x4096x16384; do
    t 60 env TILEC_CACHE_DIR=$CACHE build/bench/bench_gemm_small $s
  done ;;
f)
  build lib/libtilec.a bin/tilec build/bench/bench_attention
  fresh F; fresh N
  for a in "4x16x4096x128" "4x16x4096x128 --causal" "8x32x2048x64 --causal"; do
    say "== tune flash_attn $a"; t 120 bin/tilec tune flash_attn --shape $a --budget 90 --cache-dir /tmp/F
  done
  t 10 bin/tilec tune --list --cache-dir /tmp/F
  for r in 1 2; do for p in "4096 128 0" "4096 128 1" "2048 64 1"; do for c in N F; do
    printf "%s %s " $c "$p" >> $LOG; t 30 env TILEC_CACHE_DIR=/tmp/$c build/bench/bench_attention $p
  done; done; done ;;
k)
  build lib/libtilec.a bin/tilec build/bench/bench_gemm_small
  fresh K
  for s in 1x4096x4096 1024x1024x1024; do for l in "" --trans-b; do
    say "== tune gemm $s $l"; t 80 bin/tilec tune gemm --shape $s $l --budget 50 --cache-dir /tmp/K
  done; done
  t 10 bin/tilec tune --list --cache-dir /tmp/K
  for r in 1 2; do for s in 1x4096x4096 1024x1024x1024; do for c in $CACHE /tmp/K; do
    say "== $c $s"; t 60 env TILEC_CACHE_DIR=$c build/bench/bench_gemm_small $s
  done; done; done ;;
e)
  build lib/libtilec.a build/bench/bench_epilogue build/bench/bench_gemm_fp8 build/bench/bench_gemm_small
  say "== fused bias + GELU (the op's choice x cuBLASLt)"
  for s in 4096x4096x4096 8192x8192x8192; do for l in nt nn; do
    t 60 env TILEC_CACHE_DIR=$CACHE build/bench/bench_epilogue $s $l
  done; done
  say "== FP8 8192x8192x2048, twice"
  for r in 1 2; do t 40 env TILEC_CACHE_DIR=$CACHE build/bench/bench_gemm_fp8 8192x8192x2048; done
  say "== 1x4096x4096, three times"
  for r in 1 2 3; do t 40 env TILEC_CACHE_DIR=$CACHE build/bench/bench_gemm_small 1x4096x4096; done ;;
h)
  build lib/libtilec.a build/bench/bench_gemm_fp8 build/bench/bench_attention; tools
  say "== FP8 (the op's choice x cuBLASLt)"
  t 120 env TILEC_CACHE_DIR=$CACHE build/bench/bench_gemm_fp8
  for s in 256x8192x8192 8192x8192x2048 64x8192x8192; do t 40 env TILEC_CACHE_DIR=$CACHE build/bench/bench_gemm_fp8 $s; done
  fresh A
  for c in 0 1; do
    n=none; [ $c = 1 ] && n=causal
    rm -rf /tmp/W$c; edit W$c d64_${n}_w0.patch 64@8192 $c || continue
    say "== numerics d64 $n w0"; t 60 env TILEC_CACHE_DIR=/tmp/W$c /tmp/fa_check 64 $c 8192 16384
  done
  for r in 1 2; do for s in 8192 16384; do for c in 0 1; do for v in A W$c; do
    [ -d /tmp/$v ] || continue
    printf "%s %s causal %s " $v $s $c >> $LOG; t 30 env TILEC_CACHE_DIR=/tmp/$v build/bench/bench_attention $s 64 $c
  done; done; done; done
  build build/bench/bench_gemm_small
  rm -rf /tmp/G; for l in nn nt; do edit G g8_${l}_w0.patch gemm 8x14336x4096:$l; done  # one cache, both
  for r in 1 2; do for s in 8x14336x4096 1x14336x4096; do for v in A G; do
    [ -d /tmp/$v ] || continue
    say "== $v $s"; t 60 env TILEC_CACHE_DIR=/tmp/$v build/bench/bench_gemm_small $s
  done; done; done ;;
*) echo "unknown stage $stage"; exit 2 ;;
esac
