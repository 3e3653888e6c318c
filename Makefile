# libtilec - build, test, demo, bench, install.
#
#   make            library (lib/), command-line tool (bin/tilec), examples
#   make test       CPU tier everywhere; GPU tier too where there is a GPU
#   make demo       the tutorial walk-through (GPU chapters only with a GPU)
#   make bench      benchmarks (need a GPU)
#   make asan       the tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make tsan       the threaded tests under ThreadSanitizer
#   make fuzz       the builder fuzzer for FUZZ_SECONDS (libFuzzer: clang)
#   make fuzz-compile  the fuzz inputs run again, each kernel compiled by NVRTC (slow)
#   make install PREFIX=/usr/local DESTDIR=   /   make uninstall
#
# cmocka: taken from the system (Debian's libcmocka-dev, installed on demand
# when we are root), or from CMOCKA_DIR=<prefix with include/ and lib/>.

VERSION     := 0.1.0
SOMAJOR     := 0
CC          ?= cc
PREFIX      ?= /usr/local
DESTDIR     ?=
BUILD       ?= build
SANITIZE    ?=

WARN        := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS_BASE := -std=c11 -O2 -g -fPIC $(WARN) -Iinclude -Isrc -I$(BUILD)/gen
CFLAGS_LIB   = $(CFLAGS_BASE) -DTILEC_BUILD -fvisibility=hidden -D_GNU_SOURCE
LDLIBS      := -ldl -lpthread -lm

# CFLAGS_LIB is expanded late (=), so the sanitizer flags reach the library too.
ifneq ($(SANITIZE),)
CFLAGS_BASE += -fsanitize=$(SANITIZE) -fno-sanitize-recover=undefined -fno-omit-frame-pointer
LDFLAGS     += -fsanitize=$(SANITIZE)
endif

CMOCKA_DIR  ?=
ifneq ($(CMOCKA_DIR),)
CMOCKA_CFLAGS := -I$(CMOCKA_DIR)/include
CMOCKA_LIBS   := -L$(CMOCKA_DIR)/lib/x86_64-linux-gnu -L$(CMOCKA_DIR)/lib -Wl,-rpath,$(abspath $(CMOCKA_DIR))/lib/x86_64-linux-gnu -lcmocka
else
CMOCKA_LIBS   := -lcmocka
endif

LIB_SRC     := $(wildcard src/*.c src/ops/*.c)
LIB_OBJ     := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(LIB_SRC)) $(BUILD)/obj/gen/device_header.o
DEVICE_HDR  := src/device/tl_device.cuh
LIBDIR      ?= lib
BINDIR      ?= bin
STATIC_LIB  := $(LIBDIR)/libtilec.a
SHARED_LIB  := $(LIBDIR)/libtilec.so.$(VERSION)
TOOL        := $(BINDIR)/tilec
TEST_SRC    := $(wildcard tests/test_*.c)
TEST_BIN    := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
EXAMPLE_SRC := $(wildcard examples/*.c)
EXAMPLE_BIN := $(patsubst examples/%.c,$(BUILD)/examples/%,$(EXAMPLE_SRC))
BENCH_SRC   := $(wildcard bench/bench_*.c)
BENCH_BIN   := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))
# The GEMM sweep (no main): linked into the benchmarks only; the tool
# takes what it needs from the library.
GEMM_SWEEP  := $(BUILD)/bench-obj/gemm_sweep.o
# Prints the C layouts of the structs bench/tilec_ctypes.py mirrors; the
# test test_py_abi compares them (bench/torch_compare.py --check-abi).
ABI_LAYOUT  := $(BUILD)/bench/abi_layout

.PHONY: all lib test test-build demo bench asan tsan fuzz fuzz-build fuzz-compile install uninstall clean check-cmocka plan-check

all: lib $(TOOL) $(EXAMPLE_BIN) $(BENCH_BIN)

lib: $(STATIC_LIB) $(SHARED_LIB)

$(BUILD)/embed: tools/embed.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(WARN) -O2 -o $@ $<

$(BUILD)/gen/device_header.c: $(DEVICE_HDR) $(BUILD)/embed
	@mkdir -p $(dir $@)
	$(BUILD)/embed tli_device_header $< > $@.tmp && mv $@.tmp $@

$(BUILD)/obj/gen/device_header.o: $(BUILD)/gen/device_header.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_LIB) -c -o $@ $<

$(BUILD)/obj/%.o: src/%.c include/tilec.h $(wildcard src/*.h src/ops/*.h)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS_LIB) -c -o $@ $<

$(STATIC_LIB): $(LIB_OBJ)
	@mkdir -p $(LIBDIR)
	rm -f $@ && ar rcs $@ $^

$(SHARED_LIB): $(LIB_OBJ)
	@mkdir -p $(LIBDIR)
	$(CC) -shared -Wl,-soname,libtilec.so.$(SOMAJOR) $(LDFLAGS) -o $@ $^ $(LDLIBS)
	ln -sf libtilec.so.$(VERSION) $(LIBDIR)/libtilec.so.$(SOMAJOR)
	ln -sf libtilec.so.$(SOMAJOR) $(LIBDIR)/libtilec.so

$(GEMM_SWEEP): bench/gemm_sweep.c bench/gemm_sweep.h include/tilec.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -c -o $@ $<

$(TOOL): tools/tilec.c $(STATIC_LIB)
	@mkdir -p $(BINDIR)
	$(CC) $(CFLAGS_BASE) $(LDFLAGS) -o $@ $< $(STATIC_LIB) $(LDLIBS)

$(BUILD)/examples/%: examples/%.c $(STATIC_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(LDFLAGS) -o $@ $< $(STATIC_LIB) $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(GEMM_SWEEP) $(STATIC_LIB) $(wildcard bench/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(LDFLAGS) -o $@ $< $(GEMM_SWEEP) $(STATIC_LIB) $(LDLIBS)

$(ABI_LAYOUT): bench/abi_layout.c include/tilec.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(LDFLAGS) -o $@ $<

# Tests see the internal headers too (white-box tests of the stages).
$(BUILD)/tests/%: tests/%.c $(STATIC_LIB) $(wildcard tests/*.h) | check-cmocka
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS_BASE) -D_GNU_SOURCE $(CMOCKA_CFLAGS) $(TEST_DEFS) $(LDFLAGS) $(TEST_LDFLAGS) -o $@ $< $(STATIC_LIB) $(CMOCKA_LIBS) $(LDLIBS)

# The reproducer test compiles C programs against this build's library,
# with this build's compiler and sanitizer flags.
$(BUILD)/tests/test_repro: TEST_DEFS = -DTILEC_TEST_CC='"$(CC)"' -DTILEC_TEST_LIB='"$(STATIC_LIB)"' \
                                       -DTILEC_TEST_LDFLAGS='"$(strip $(LDFLAGS))"'

# test_alloc_fail counts and fails the allocations of the library linked
# into it (the library itself is not changed for the test).
$(BUILD)/tests/test_alloc_fail: TEST_LDFLAGS := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free

check-cmocka:
	@CMOCKA_DIR="$(CMOCKA_DIR)" CC="$(CC)" sh tools/check-cmocka.sh

test-build: all $(TEST_BIN) $(ABI_LAYOUT)

# With a GPU, up to 8 test programs run at once unless TEST_JOBS says
# otherwise: a cold GPU tier is mostly kernel compilation, which then
# overlaps (the whole of make test in 53-67 s on the H200 against ~224 s
# one at a time); without one, one at a time.
test: test-build
	@jobs=$${TEST_JOBS:-}; \
	if [ -z "$$jobs" ]; then \
	    jobs=1; \
	    if sh tools/gpu-name.sh $(TOOL) > /dev/null; then jobs=$$(nproc 2>/dev/null || echo 1); [ "$$jobs" -gt 8 ] && jobs=8; fi; \
	fi; \
	TEST_JOBS=$$jobs TILEC_BIN=$(TOOL) TILEC_LIB=$(STATIC_LIB) TILEC_SANITIZE=$(SANITIZE) TILEC_ABI_LAYOUT=$(ABI_LAYOUT) \
		sh tests/run.sh $(TEST_BIN)

# The kernels the GPU tests launch, built and compiled for PLAN_TARGET on an
# offline context (no GPU needed): a schedule a GPU test asks for that the
# lowering refuses fails here instead of on the GPU machine (session 26).
# TILEC_TEST_PLAN_CACHE=dir keeps the cubins in dir's disk cache as well:
# the GPU machine's tier then finds them (TILEC_CACHE_DIR=dir, same NVRTC).
PLAN_TARGET ?= sm_90a
PLAN_TESTS  := test_gpu_attention test_gpu_gemm test_gpu_softmax
plan-check: test-build
	@for t in $(PLAN_TESTS); do \
	    echo "=== $$t ($(PLAN_TARGET), offline)"; \
	    TILEC_TEST_PLAN_ONLY=$(PLAN_TARGET) $(BUILD)/tests/$$t > $(BUILD)/tests/$$t.plan.log 2>&1 || \
	        { grep -h "precompiled" $(BUILD)/tests/$$t.plan.log; echo "FAIL $$t"; exit 1; }; \
	    grep -h "precompiled" $(BUILD)/tests/$$t.plan.log; \
	done

# Sanitized build in its own tree, so lib/ and bin/ stay the plain build.
# The driver maps memory where ASan's shadow gap is: protect_shadow_gap=0.
# tests/run.sh line-buffers the programs through stdbuf, whose LD_PRELOAD
# library comes before ASan's runtime: verify_asan_link_order=0. At exit
# LeakSanitizer scans the dynamic TLS it saw handed out through
# __tls_get_addr, and the block it recorded for the dlopen'd NVRTC is
# bogus ("DTLS 7 at 0xe96-0x2000001f98"): its tracer faults and the
# program fails after every test passed (test_dual_gemm, every run on
# this CI machine, also at commits that passed before):
# intercept_tls_get_addr=0. Our allocations are never held only in TLS.
asan:
	ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=1:verify_asan_link_order=0:intercept_tls_get_addr=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	$(MAKE) BUILD=build-asan LIBDIR=build-asan/lib BINDIR=build-asan/bin SANITIZE=address,undefined test

# The tests that run threads, under ThreadSanitizer (its own tree too).
TSAN_TESTS := test_threads
tsan:
	$(MAKE) BUILD=build-tsan LIBDIR=build-tsan/lib BINDIR=build-tsan/bin SANITIZE=thread \
	    $(patsubst %,build-tsan/tests/%,$(TSAN_TESTS))
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 sh tests/run.sh $(patsubst %,build-tsan/tests/%,$(TSAN_TESTS))

# The builder fuzzer (tests/fuzz): libFuzzer with ASan + UBSan, the library
# built by clang in its own tree, seeds written by make_seeds, run for
# FUZZ_SECONDS; new inputs collect in build-fuzz/corpus, a crash in
# build-fuzz/crash-*; tests/fuzz/regress keeps the inputs of past findings. Needs clang with libFuzzer (Debian: clang-14 and
# libclang-rt-14-dev); FUZZ_CC picks the compiler.
FUZZ_CC      ?= $(shell command -v clang-14 || command -v clang || echo clang)
FUZZ_SECONDS ?= 60
FUZZ_DIR     := build-fuzz
FUZZ_ENV     := ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
fuzz-build:
	@sh tools/check-fuzzer.sh "$(FUZZ_CC)"
	$(MAKE) BUILD=$(FUZZ_DIR) LIBDIR=$(FUZZ_DIR)/lib BINDIR=$(FUZZ_DIR)/bin CC=$(FUZZ_CC) \
	    SANITIZE=fuzzer-no-link,address,undefined $(FUZZ_DIR)/lib/libtilec.a
	$(FUZZ_CC) -std=c11 -O1 -g $(WARN) -Iinclude -Isrc -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
	    -fno-sanitize-recover=undefined -o $(FUZZ_DIR)/fuzz_builder tests/fuzz/fuzz_builder.c $(FUZZ_DIR)/lib/libtilec.a $(LDLIBS)
	$(CC) -std=c11 -O1 $(WARN) -Iinclude -o $(FUZZ_DIR)/make_seeds tests/fuzz/make_seeds.c
	@mkdir -p $(FUZZ_DIR)/seeds $(FUZZ_DIR)/corpus && $(FUZZ_DIR)/make_seeds $(FUZZ_DIR)/seeds

fuzz: fuzz-build
	$(FUZZ_ENV) $(FUZZ_DIR)/fuzz_builder -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	    -max_len=4096 -len_control=0 -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/ $(FUZZ_DIR)/corpus $(FUZZ_DIR)/seeds tests/fuzz/regress

# Every input of the seeds, tests/fuzz/regress and the corpus (a `make fuzz`
# run's, or FUZZ_CORPUS) run once more, each kernel that builds compiled by
# NVRTC for sm_90a and sm_80: a source NVRTC rejects is a printer bug (the
# oracle of TILEC_FUZZ_COMPILE, fuzz_builder.c). About 20 inputs a second:
# .ci/run takes its own fuzz run's corpus. Leaks off: NVRTC keeps its own.
FUZZ_CORPUS ?= $(FUZZ_DIR)/corpus
fuzz-compile: fuzz-build
	TILEC_FUZZ_COMPILE=1 ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	    $(FUZZ_DIR)/fuzz_builder -runs=0 -timeout=120 -rss_limit_mb=4096 -max_len=4096 -artifact_prefix=$(FUZZ_DIR)/compile- \
	    $(FUZZ_DIR)/seeds tests/fuzz/regress $(FUZZ_CORPUS)

demo: all
	@sh tools/demo.sh $(BUILD)

bench: all
	@TILEC_SHARED_LIB=$(LIBDIR)/libtilec.so sh bench/run.sh $(BUILD)

install: lib $(TOOL)
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/tilec.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(STATIC_LIB) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(SHARED_LIB) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libtilec.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libtilec.so.$(SOMAJOR)
	ln -sf libtilec.so.$(SOMAJOR) $(DESTDIR)$(PREFIX)/lib/libtilec.so
	install -m 755 $(TOOL) $(DESTDIR)$(PREFIX)/bin/
	for pc in tilec tilec-shared; do \
	    sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' tools/$$pc.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/$$pc.pc; \
	done

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/include/tilec.h $(DESTDIR)$(PREFIX)/lib/libtilec.a \
	      $(DESTDIR)$(PREFIX)/lib/libtilec.so* $(DESTDIR)$(PREFIX)/bin/tilec \
	      $(DESTDIR)$(PREFIX)/lib/pkgconfig/tilec.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/tilec-shared.pc

clean:
	rm -rf build build-asan build-tsan build-fuzz lib bin
