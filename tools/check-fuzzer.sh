#!/bin/sh
# Makes sure $1 can build a libFuzzer target with ASan and UBSan, or says
# what to install.
cc=$1
probe() {
    printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' |
        "$cc" -x c - -fsanitize=fuzzer,address,undefined -o /dev/null 2>/dev/null
}
probe && exit 0
# Debian's clang and its runtime, when we may install them (root, apt-get).
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "libFuzzer is missing: installing Debian's clang-14 and libclang-rt-14-dev ..."
    (apt-get install -y -q clang-14 libclang-rt-14-dev >/dev/null 2>&1 ||
     { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q clang-14 libclang-rt-14-dev >/dev/null 2>&1; }) || true
    [ "$cc" = clang ] && command -v clang-14 >/dev/null 2>&1 && ! command -v clang >/dev/null 2>&1 && cc=clang-14
    probe && exit 0
fi
echo "error: make fuzz needs clang with libFuzzer; '$cc' cannot link -fsanitize=fuzzer." >&2
echo "       On Debian: apt-get install clang-14 libclang-rt-14-dev (or point FUZZ_CC at such a clang)." >&2
exit 1
