# Every target installs what it needs: a fresh Linux machine runs `make demo` and `make test` directly.
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
DEPS_STAMP := $(VENV)/.deps-installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
export CMAKE_BUILD_PARALLEL_LEVEL ?= $(shell nproc)

.PHONY: all build test test-cpp test-python demo bench bench-deps system-deps clean conformance supported-ops optests

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

# runtime/ and opslib/ build and test on their own, without torch.
test-cpp: $(DEPS_STAMP) system-deps
	@for lib in runtime opslib; do \
	  PATH=$(CURDIR)/$(VENV)/bin:$$PATH cmake -S $$lib -B build/$$lib -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null && \
	  PATH=$(CURDIR)/$(VENV)/bin:$$PATH cmake --build build/$$lib && \
	  PATH=$(CURDIR)/$(VENV)/bin:$$PATH ctest --test-dir build/$$lib --output-on-failure || exit 1; \
	done

test-python: build
	cd tests && ../$(VPY) -m pytest -q -p no:cacheprovider .

test: test-cpp test-python

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
