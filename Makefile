# tgrad build. `make` builds build/libtgrad.a and build/libtgrad.so (float);
# `make test` builds the double-precision library and runs the test suite;
# `make test SANITIZE=1` does the same under AddressSanitizer and UBSan.
#   DOUBLE=1   tg_real is double          OMP=0      no OpenMP
#   SANITIZE=1 ASan + UBSan                CC=clang   another compiler
CC ?= cc
OMP ?= 1
DOUBLE ?= 0
SANITIZE ?= 0
PREFIX ?= /usr/local

# Each configuration builds into its own directory so they never mix.
ifeq ($(DOUBLE),1)
  BUILD ?= build/double$(if $(filter 1,$(SANITIZE)),-asan)$(if $(filter 0,$(OMP)),-noomp)
else
  BUILD ?= build$(if $(filter 1,$(SANITIZE)),/float-asan)$(if $(filter 0,$(OMP)),/float-noomp)
endif

CFLAGS ?= -O3 -g
# `override` keeps these when CFLAGS is given on the command line (make CFLAGS=-O3).
override CFLAGS += -std=c11 -Wall -Wextra -Wpedantic -fPIC -D_POSIX_C_SOURCE=200809L -Isrc
ifeq ($(OMP),1)
  override CFLAGS += -fopenmp
  override LDLIBS += -fopenmp
else
  override CFLAGS += -fopenmp-simd -Wno-unknown-pragmas
endif
ifeq ($(DOUBLE),1)
  override CFLAGS += -DTG_DOUBLE
endif
ifeq ($(SANITIZE),1)
  override CFLAGS += -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
  override LDFLAGS += -fsanitize=address,undefined
endif
override LDLIBS += -lm

LIB_SRC := $(wildcard src/tensor/*.c src/autograd/*.c src/nn/*.c src/viz/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
HEADERS := src/tgrad.h $(wildcard src/tensor/*.h src/autograd/*.h src/nn/*.h src/viz/*.h)
TEST_SRC := $(wildcard tests/test_*.c tests/cases_*.c)

.PHONY: all lib test test-build deps clean install programs demo
all: lib programs
lib: $(BUILD)/libtgrad.a $(BUILD)/libtgrad.so

# Programs: the examples (examples/*.c) and the tools (tools/*.c), one
# source file each, linked against the static library.
EXAMPLES := $(patsubst examples/%.c,$(BUILD)/bin/%,$(wildcard examples/*.c))
TOOLS := $(patsubst tools/%.c,$(BUILD)/bin/%,$(wildcard tools/*.c))
programs: $(EXAMPLES) $(TOOLS)
$(BUILD)/bin/%: examples/%.c examples/cli.h $(BUILD)/libtgrad.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libtgrad.a $(LDFLAGS) $(LDLIBS)
$(BUILD)/bin/%: tools/%.c examples/cli.h $(BUILD)/libtgrad.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libtgrad.a $(LDFLAGS) $(LDLIBS)

# Installs Debian packages the build needs when they are missing.
deps:
	@sh tools/install-deps.sh

$(BUILD)/obj/%.o: %.c $(HEADERS) | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libtgrad.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libtgrad.so: $(LIB_OBJ)
	$(CC) -shared $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The test suite always runs in double precision, where a gradient check
# can use tight tolerances.
ifeq ($(DOUBLE),1)
$(BUILD)/tests/run: $(TEST_SRC) $(wildcard tests/*.h) $(BUILD)/libtgrad.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DTG_SRC_DIR='"$(CURDIR)"' -DTG_BUILD_DIR='"$(BUILD)"' -DTG_LDFLAGS='"$(LDFLAGS)"' -o $@ $(TEST_SRC) $(BUILD)/libtgrad.a $(LDFLAGS) -lcriterion $(LDLIBS)
# The examples and tools are built too: tests/test_examples.c runs each briefly.
test-build: $(BUILD)/tests/run programs
test: test-build
	$(if $(filter 1,$(SANITIZE)),LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp) $(BUILD)/tests/run $(TEST_ARGS)
else
# ...after the float kernel tests: the GEMM packers and kernels, the
# dropout-mask stores, the vector exp and the attention row kernels of the
# float build exist only there.
FLOAT_TEST_SRC := tests/test_gemm.c tests/test_dropout_mask.c tests/test_exp_kernel.c tests/test_row_kernels.c
test: $(BUILD)/tests/float_kernels
	$(BUILD)/tests/float_kernels $(TEST_ARGS)
	@$(MAKE) --no-print-directory DOUBLE=1 test
$(BUILD)/tests/float_kernels: $(FLOAT_TEST_SRC) $(BUILD)/libtgrad.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(FLOAT_TEST_SRC) $(BUILD)/libtgrad.a $(LDFLAGS) -lcriterion $(LDLIBS)
endif

# The main job: train the reversal model three ways and draw what it learned.
demo: programs
	@mkdir -p out
	$(BUILD)/bin/positional_encoding --out out > out/positional_encoding.txt
	$(BUILD)/bin/attention_basics --out out > out/attention_basics.txt
	$(BUILD)/bin/reverse --out out
	@echo; echo "Worked examples: out/attention_basics.txt, out/positional_encoding.txt"
	@echo "Pictures (open them in any image viewer):"; ls -1 out/*.png | sed 's/^/  /'

install: lib
	mkdir -p $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/tgrad
	cp $(BUILD)/libtgrad.a $(BUILD)/libtgrad.so $(DESTDIR)$(PREFIX)/lib/
	cd src && for h in $(HEADERS:src/%=%); do mkdir -p $(DESTDIR)$(PREFIX)/include/tgrad/$$(dirname $$h); cp $$h $(DESTDIR)$(PREFIX)/include/tgrad/$$h; done
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@CFLAGS@|$(if $(filter 1,$(DOUBLE)),-DTG_DOUBLE)|' \
	    -e 's|@LIBS@|$(if $(filter 1,$(OMP)),-fopenmp)|' tools/tgrad.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/tgrad.pc

clean:
	rm -rf build out

# `make bench`: every workload of tools/bench.c at 1 and 2 threads against
# PyTorch (installed first when missing; without it, tgrad's numbers alone),
# written to BENCHMARKS.md. Takes several minutes.
.PHONY: bench
bench: $(BUILD)/bin/bench
	sh tools/install-bench-deps.sh || echo "bench: could not install PyTorch; the table will have tgrad alone"
	$(BUILD)/bin/bench --markdown BENCHMARKS.md
