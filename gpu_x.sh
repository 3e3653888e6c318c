#!/bin/sh
export CMOCKA_DIR=.device-deps/usr TILEC_CACHE_DIR=/tmp/tc
mkdir -p $OUT/logs
make -j16 all > $OUT/logs/build.log 2>&1 || { tail -30 $OUT/logs/build.log; exit 1; }
build/examples/tutorial > $OUT/logs/tutorial.log 2>&1; echo "tutorial rc=$?"; tail -12 $OUT/logs/tutorial.log
sh -c 'build/bench/bench_gemm_fp8 4096x4096x4096' > $OUT/logs/fp8.log 2>&1; echo "fp8 rc=$?"; tail -4 $OUT/logs/fp8.log
