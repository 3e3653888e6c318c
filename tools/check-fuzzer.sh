#!/bin/sh
# Makes sure $1 can build a libFuzzer target with ASan and UBSan, or says
# what to install.
cc=$1
probe() {
    printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' |
        "$cc" -x c - -fsanitize=fuzzer,address,undefined -o /dev/null 2>/dev/null
}
probe && exit 0
echo "error: make fuzz needs clang with libFuzzer; '$cc' cannot link -fsanitize=fuzzer." >&2
echo "       On Debian: apt-get install clang-14 libclang-rt-14-dev (or point FUZZ_CC at such a clang)." >&2
exit 1
