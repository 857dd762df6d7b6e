# gpumemsim: settings first, then targets.
#   make            build the simulator (no CUDA needed)
#   make test       run the Criterion tests
#   make asan       build with ASan+UBSan and run the same tests
#   make bench      speed and memory benchmark
#   make fuzz       fuzz the trace reader for a fixed budget (clang/libFuzzer)
#   make capture    build the CUPTI capture library (needs the CUDA toolkit)
#   make gpu-test   capture tests that need a GPU (skip cleanly without one)

CC       ?= gcc
OPT      ?= -O2
CFLAGS   ?= $(OPT) -g
SAN      ?=
ALL_CFLAGS = $(CFLAGS) $(SAN) -std=c11 -D_GNU_SOURCE -Wall -Wextra -MMD -MP
LDLIBS   += -lsqlite3 -lz -lm -lpthread
BUILD    ?= build
CUDA_HOME ?= /usr/local/cuda
FUZZ_SECONDS ?= 60

# Sources by folder, bottom layer first (docs/architecture.md); cli/main.c is
# the only one outside the library.
LIB_SRCS  := $(sort $(wildcard base/*.c) $(wildcard traces/*.c) $(wildcard device/*.c) \
	       $(wildcard policies/*.c) $(wildcard sim/*.c) $(wildcard whatif/*.c) \
	       $(wildcard plots/*.c) $(filter-out cli/main.c,$(wildcard cli/*.c)))
LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/%.o)
TEST_SRCS := $(sort $(wildcard tests/test_*.c)) tests/helpers.c
TEST_OBJS := $(TEST_SRCS:%.c=$(BUILD)/%.o)

BIN       := $(BUILD)/gpumemsim
TEST_BIN  := $(BUILD)/test_all
LIBSIM    := $(BUILD)/libgpumemsim.a

.PHONY: all test run-tests asan bench fuzz capture gpu-test demo clean deps import-truth install

all: $(BIN)

# Missing Debian packages (compiler, SQLite, zlib, Criterion, gnuplot).
deps:
	@./scripts/install-deps.sh

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(LIBSIM): $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(BUILD)/cli/main.o $(LIBSIM)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

$(TEST_BIN): $(TEST_OBJS) $(LIBSIM)
	$(CC) $(ALL_CFLAGS) -o $@ $^ -lcriterion $(LDLIBS)

# Tests run from the repository root (they find tests/data, traces/ and,
# when it sits beside the checkout, ../shared). They call the binary too.
test: deps
	$(MAKE) run-tests

run-tests: $(BIN) $(TEST_BIN)
	GPUMEMSIM_BIN=$(abspath $(BIN)) GPUMEMSIM_LIB=$(abspath $(LIBSIM)) GPUMEMSIM_SAN="$(SAN)" \
	  CC="$(CC)" ./$(TEST_BIN) --jobs 2

asan:
	$(MAKE) BUILD=build-asan CFLAGS="-O1 -g" \
	  SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" test

BENCH_BIN := $(BUILD)/gpumemsim-bench
$(BENCH_BIN): $(BUILD)/bench/bench.o $(LIBSIM)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)
bench: $(BIN) $(BENCH_BIN)
	./$(BENCH_BIN)

FUZZ_BIN := build-fuzz/fuzz_trace_reader
$(FUZZ_BIN): tests/fuzz/fuzz_trace_reader.c $(wildcard traces/*.c) traces/trace.h base/vec.c base/vec.h base/u64map.c base/strpool.c
	@mkdir -p build-fuzz
	clang -g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	  -o $@ tests/fuzz/fuzz_trace_reader.c $(wildcard traces/trace_*.c) base/vec.c base/u64map.c base/strpool.c -lz
fuzz: $(FUZZ_BIN)
	@mkdir -p build-fuzz/corpus
	cp tests/fuzz/seeds/* build-fuzz/corpus/ 2>/dev/null || true
	./$(FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -max_len=4096 build-fuzz/corpus

# make install [PREFIX=/usr/local] [DESTDIR=]: the tool in bin/, its manual
# page (scripts/man.sh, from the --help texts) in share/man/man1/, the library
# in lib/ (with the capture library when `make capture` built it: the
# launcher looks in ../lib beside its binary), the headers in
# include/gpumemsim/ with their layout kept (#include "include/gpumemsim.h"
# with -I PREFIX/include/gpumemsim; docs/library.md).
PREFIX ?= /usr/local
INSTALL_HEADERS := include/gpumemsim.h $(wildcard base/*.h traces/*.h device/*.h policies/*.h \
		   capture/convert.h capture/launcher.h sim/*.h whatif/*.h plots/*.h)
install: $(BIN) $(LIBSIM)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/gpumemsim
	install -m 644 $(LIBSIM) $(DESTDIR)$(PREFIX)/lib/libgpumemsim.a
	if [ -f $(BUILD)/libgpumemsim_capture.so ]; then \
	  install -m 755 $(BUILD)/libgpumemsim_capture.so $(DESTDIR)$(PREFIX)/lib/; fi
	for h in $(INSTALL_HEADERS); do \
	  install -D -m 644 $$h $(DESTDIR)$(PREFIX)/include/gpumemsim/$$h || exit 1; done
	install -d $(DESTDIR)$(PREFIX)/share/man/man1
	./scripts/man.sh $(BIN) > $(DESTDIR)$(PREFIX)/share/man/man1/gpumemsim.1

# The main job: every shipped trace under every policy and the settings users
# ask about, into out/demo/results.db, then the comparison table.
demo: deps
	$(MAKE) $(BIN)
	./scripts/demo.sh

# Recipe for the shipped traces/torch-truth/: PyTorch's own allocator
# records (request stream + segment decisions) converted by our importer.
TRUTH_DIR ?= ../shared/data/torch-allocator-truth
import-truth: $(BIN)
	@mkdir -p traces/torch-truth
	for f in $(TRUTH_DIR)/*-default.trace.gz; do \
	  ./$(BIN) import torch-snapshot $$f -o traces/torch-truth/$$(basename $$f) || exit 1; done

-include capture/capture.mk

-include capture/cnn/cnn.mk

# Render the report of REPORT_DB in headless Chromium and save a screenshot
# to look at (apt-get install chromium).
REPORT_DB  ?= results.db
REPORT_DIR ?= $(BUILD)/report
CHROMIUM   ?= chromium
.PHONY: report-screenshot report-check
report-screenshot: $(BIN)
	./$(BIN) report --db $(REPORT_DB) -o $(REPORT_DIR)
	$(CHROMIUM) --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	  --disable-background-networking --disable-component-update --disable-sync \
	  --user-data-dir=$$(mktemp -d) --screenshot=$(abspath $(REPORT_DIR))/screenshot.png \
	  --window-size=1400,2000 file://$(abspath $(REPORT_DIR))/report.html
	@echo "screenshot: $(REPORT_DIR)/screenshot.png"

# Render a report in headless Chromium and fail on an image that did not
# load, a broken link or a JavaScript/console error (scripts/report_check.sh;
# it installs chromium and chromium-driver where root or sudo allows).
# Checks REPORT_CHECK_DIR when given (e.g. out/demo/report after make demo),
# else writes the report of REPORT_DB into REPORT_DIR first.
REPORT_CHECK_DIR ?=
report-check: $(BIN)
	@if [ -z "$(REPORT_CHECK_DIR)" ]; then ./$(BIN) report --db $(REPORT_DB) -o $(REPORT_DIR) || exit 1; fi
	./scripts/report_check.sh $(if $(REPORT_CHECK_DIR),$(REPORT_CHECK_DIR),$(REPORT_DIR))

clean:
	rm -rf build build-asan build-fuzz

-include $(LIB_OBJS:.o=.d) $(TEST_OBJS:.o=.d) $(BUILD)/cli/main.d $(BUILD)/bench/bench.d
