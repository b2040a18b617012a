# Every target installs what it needs: a fresh Linux machine runs `make demo` and `make test` directly.
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
DEPS_STAMP := $(VENV)/.deps-installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export CMAKE_BUILD_PARALLEL_LEVEL ?= $(shell nproc)

.PHONY: all build test test-cpp test-cpp-asan test-python demo bench bench-deps system-deps clean conformance supported-ops optests upstream-tests ecosystem \
	sanitize sanitize-tsan sanitize-adapter fuzz

all: build

$(VPY):
	$(PYTHON) -m venv $(VENV)

# torch first (the CPU wheel), then the rest: nothing may pull in another torch.
$(DEPS_STAMP): requirements-dev.txt | $(VPY)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q torch==2.13.0
	$(VPY) -m pip install -q -r requirements-dev.txt
	touch $@

# GoogleTest and ccache come from Debian packages.
system-deps:
	@if ! dpkg -s libgtest-dev >/dev/null 2>&1 || ! command -v ccache >/dev/null 2>&1; then \
	  $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q libgtest-dev ccache; fi

build: $(DEPS_STAMP) system-deps
	$(VPY) -m pip install -q --no-build-isolation --no-deps .
	$(VPY) -m pip install -q --no-build-isolation --no-deps ./apex

# runtime/ and opslib/ build and test on their own, without torch.
test-cpp: $(DEPS_STAMP) system-deps
	@for lib in runtime opslib; do \
	  PATH=$(CURDIR)/$(VENV)/bin:$$PATH cmake -S $$lib -B build/$$lib -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null && \
	  PATH=$(CURDIR)/$(VENV)/bin:$$PATH cmake --build build/$$lib && \
	  PATH=$(CURDIR)/$(VENV)/bin:$$PATH ctest --test-dir build/$$lib --output-on-failure || exit 1; \
	done

test-python: build
	cd tests && ../$(VPY) -m pytest -q -p no:cacheprovider .

# The runtime and opslib suites again under AddressSanitizer + UndefinedBehaviorSanitizer (and, for
# `make sanitize`, ThreadSanitizer), in build dirs of their own: the normal build is untouched.
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -g
TSAN_FLAGS := -fsanitize=thread -g
SAN_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:die_after_fork=0
# $(1): asan | tsan, $(2): compiler and linker flags
define san_cpp
	@for lib in runtime opslib; do \
	  PATH=$(CURDIR)/$(VENV)/bin:$$PATH cmake -S $$lib -B build/$(1)/$$lib -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DCMAKE_CXX_FLAGS="$(2)" -DCMAKE_EXE_LINKER_FLAGS="$(2)" -DCMAKE_SHARED_LINKER_FLAGS="$(2)" >/dev/null && \
	  PATH=$(CURDIR)/$(VENV)/bin:$$PATH cmake --build build/$(1)/$$lib && \
	  $(SAN_ENV) PATH=$(CURDIR)/$(VENV)/bin:$$PATH ctest --test-dir build/$(1)/$$lib --output-on-failure -j 2 || exit 1; \
	done
endef

test-cpp-asan: $(DEPS_STAMP) system-deps
	$(call san_cpp,asan,$(ASAN_FLAGS))

sanitize-tsan: $(DEPS_STAMP) system-deps
	$(call san_cpp,tsan,$(TSAN_FLAGS))

# The whole package (runtime, opslib, adapter, extension) built with ASan + UBSan into build/asan/site,
# then a representative slice of the Python suite run on it with libasan preloaded into the venv's
# Python (leak checking off: the interpreter itself keeps memory until exit).
# libstdc++ is preloaded too: Python does not link it, and ASan's exception interceptor must find
# __cxa_throw when it starts (otherwise the first C++ exception aborts with "CHECK failed").
ASAN_PRELOAD = $$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libstdc++.so)
SANITIZE_TESTS ?= test_tensor_ops.py test_streams_events.py test_memory.py test_engine_errors.py \
	test_device.py test_sanitizer.py test_fuzz.py
sanitize-adapter: $(DEPS_STAMP) system-deps
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH cmake -S . -B build/asan/adapter -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DPython_EXECUTABLE=$(CURDIR)/$(VPY) -DCMAKE_CXX_FLAGS="$(ASAN_FLAGS)" -DCMAKE_C_FLAGS="$(ASAN_FLAGS)" \
	  -DCMAKE_EXE_LINKER_FLAGS="$(ASAN_FLAGS)" -DCMAKE_SHARED_LINKER_FLAGS="$(ASAN_FLAGS)" \
	  -DCMAKE_MODULE_LINKER_FLAGS="$(ASAN_FLAGS)" >/dev/null
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH cmake --build build/asan/adapter
	rm -rf build/asan/site && mkdir -p build/asan/site && cp -r torch_npu torchair build/asan/site/
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH cmake --install build/asan/adapter --prefix build/asan/site >/dev/null
	cd tests && PYTHONPATH=$(CURDIR)/build/asan/site LD_PRELOAD="$(ASAN_PRELOAD)" \
	  ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	  ../$(VPY) -m pytest -q -p no:cacheprovider -x $(SANITIZE_TESTS)

sanitize: test-cpp-asan sanitize-tsan sanitize-adapter

# Property-based fuzzing of the runtime C API, torch.npu.* and the npu ops with many cases, each
# target in a child process (a crash or hang is reported with the case that caused it).
FUZZ_EXAMPLES ?= 3000
fuzz: build
	cd tests && ../$(VPY) -m fuzz.runner --examples $(FUZZ_EXAMPLES)

test: test-cpp test-cpp-asan test-python

# PyTorch's OpInfo tests on npu, every op (test-python runs a representative slice); prints the counts.
conformance: build
	cd tests && NPU_CONFORMANCE=all PYTORCH_PRINT_REPRO_ON_FAILURE=0 ../$(VPY) -m pytest -q -p no:cacheprovider conformance/

# torch_npu's own op tests, unchanged, from an op-plugin checkout: one process per file, 2 at a time;
# prints pass/fail per file and failures by cause, and writes the summary into docs/conformance.md.
# OPTESTS_ARGS="--files test_add.py ..." or "--sample 40" runs part of them (the docs stay as they are).
optests: build
	@test -n "$(OPPLUGIN)" || { echo "usage: make optests OPPLUGIN=/path/to/op-plugin-checkout"; exit 2; }
	$(VPY) -m pip install -q -r requirements-optests.txt
	$(VPY) tools/optests/run.py $(OPPLUGIN) --jobs 2 --doc docs/conformance.md $(OPTESTS_ARGS)

# Ascend/pytorch's own unit tests, unchanged, from its checkout: pytest per file, 2 at a time; prints a
# table per test folder and failures by cause, and writes them into docs/conformance.md.
# UPSTREAM_TESTS_ARGS="--dirs npu" or "--files npu/test_npu.py ..." runs part of them.
upstream-tests: build
	@test -n "$(PYTORCH_NPU)" || { echo "usage: make upstream-tests PYTORCH_NPU=/path/to/Ascend-pytorch-checkout"; exit 2; }
	$(VPY) -m pip install -q -r requirements-upstream-tests.txt
	$(VPY) tools/upstream_tests/run.py $(PYTORCH_NPU) --jobs 2 --doc docs/conformance.md $(UPSTREAM_TESTS_ARGS)

# transformers, accelerate, peft and DeepSpeed on npu, unchanged (a side venv, .venv-eco): their own
# tests (accelerate's, peft's LoRA subset; transformers' from TRANSFORMERS=<checkout> if given) and our
# scripts against CPU; writes the tables into docs/ecosystem.md. Not part of `make test`.
ecosystem: build
	$(VPY) tools/ecosystem/run.py --doc docs/ecosystem.md $(if $(TRANSFORMERS),--transformers $(TRANSFORMERS)) $(ECOSYSTEM_ARGS)

# docs/supported_ops.md from the dispatcher registry of the installed build.
supported-ops: build
	cd tests && ../$(VPY) ../codegen/supported_ops.py --out ../docs/supported_ops.md

demo: build
	$(VPY) examples/train_demo.py

# npu vs CPU eager in one process; writes docs/benchmarks.md and docs/benchmarks.png (a few minutes).
# valgrind counts the launch path's instructions for the report's per-stage breakdown.
bench-deps:
	@command -v valgrind >/dev/null 2>&1 || ($(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q valgrind)

bench: build bench-deps
	$(VPY) bench/run.py

clean:
	rm -rf build dist *.egg-info
