# iognn developer entry points. `make demo` and `make test` work on a fresh machine: they create the
# virtual environment .venv, install the Python dependencies from PyPI, build, and run.
PYTHON      ?= python3
VENV        := .venv
PY          := $(VENV)/bin/python
PIP         := $(VENV)/bin/pip
JOBS        ?= $(shell nproc)
CUDA_ARCHS  ?= 9.0
export TORCH_CUDA_ARCH_LIST ?= $(CUDA_ARCHS)
export MAX_JOBS ?= $(JOBS)

.PHONY: venv build cpp-test sanitize-cpp py-test test demo bench-quick clean

# Dependencies are reinstalled only when requirements.txt changes. No pip cache: torch's wheels and
# their CUDA runtime are several GB, and a second copy in the cache can fill a small disk.
$(VENV)/.deps: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --no-cache-dir --upgrade pip
	$(PIP) install -q --no-cache-dir -r requirements.txt
	touch $@

venv: $(VENV)/.deps

# One CMake build folder holds everything: the torch-free core (with its CUDA kernels when nvcc is
# found), iognn._C (written into python/iognn), the GoogleTest suite and the C++ example. The editable
# install then reuses that folder, so nothing is compiled twice.
BUILD_DIR   := build/main
CMAKE_ARGS  := -G Ninja -DCMAKE_BUILD_TYPE=Release -DIOGNN_BUILD_PYTHON=ON -DIOGNN_BUILD_TESTS=ON \
               -DPython_EXECUTABLE=$(abspath $(PY)) -DIOGNN_PYTHON_OUTPUT_DIR=$(abspath python/iognn) \
               -DCMAKE_CUDA_ARCHITECTURES=$(subst .,,$(CUDA_ARCHS))

build: venv
	cmake -S . -B $(BUILD_DIR) $(CMAKE_ARGS)
	cmake --build $(BUILD_DIR) -j $(JOBS)
	IOGNN_BUILD_DIR=$(abspath $(BUILD_DIR)) $(PIP) install -q --no-build-isolation --no-deps -e .

# C++ tests and the example (ctest), from the same build.
cpp-test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

# The torch-free core and its GoogleTest suite under AddressSanitizer + UBSan (no Python, no CUDA;
# a build folder of its own). Any finding aborts the run, failing `make test`. -O1 -g1: about a
# minute of compilation on 2 cores, and stack traces with file and line.
ASAN_DIR    := build/asan
SANITIZER_OPTIONS := ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1 \
                     UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

sanitize-cpp:
	cmake -S . -B $(ASAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" \
	      -DIOGNN_BUILD_TESTS=ON -DIOGNN_WITH_CUDA=OFF -DIOGNN_SANITIZE=ON
	cmake --build $(ASAN_DIR) -j $(JOBS)
	cd $(ASAN_DIR) && $(SANITIZER_OPTIONS) ctest --output-on-failure -j $(JOBS)

py-test: build
	$(PY) -m pytest -q -n $(JOBS) -m "not cuda" tests/python

test: cpp-test sanitize-cpp py-test

demo: build
	$(PY) -m iognn train --compare pyg
	$(PY) -m iognn train --compare pyg --dataset cora
	$(PY) -m iognn train --compare pyg --loader neighbor --dataset synthetic-products:0.05 --model sage --epochs 2

bench-quick: build
	$(PY) -m iognn bench --suite quick

clean:
	rm -rf build python/iognn/*.so
