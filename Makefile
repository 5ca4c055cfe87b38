# iognn developer entry points. `make demo` and `make test` work on a fresh machine: they create the
# virtual environment .venv, install the Python dependencies from PyPI, build, and run.
PYTHON      ?= python3
VENV        := .venv
PY          := $(VENV)/bin/python
PIP         := $(VENV)/bin/pip
JOBS        ?= $(shell nproc)
CUDA_ARCHS  ?= 9.0
CPP_BUILD   := build/cpp
export TORCH_CUDA_ARCH_LIST ?= $(CUDA_ARCHS)
export MAX_JOBS ?= $(JOBS)

.PHONY: venv build cpp cpp-test py-test test demo bench-quick clean

# Dependencies are reinstalled only when requirements.txt changes.
$(VENV)/.deps: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -r requirements.txt
	touch $@

venv: $(VENV)/.deps

# The operator library iognn._C, built in place (python/iognn) by an editable install.
build: venv
	$(PIP) install -q --no-build-isolation --no-deps -e .

# Torch-free core, C++ tests and the C++ example (ctest).
cpp:
	cmake -S . -B $(CPP_BUILD) -G Ninja -DIOGNN_BUILD_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=$(subst .,,$(CUDA_ARCHS))
	cmake --build $(CPP_BUILD) -j $(JOBS)

cpp-test: cpp
	cd $(CPP_BUILD) && ctest --output-on-failure -j $(JOBS)

py-test: build
	$(PY) -m pytest -q -n $(JOBS) -m "not cuda" tests/python

test: cpp-test py-test

demo: build
	$(PY) -m iognn train --compare pyg
	$(PY) -m iognn train --compare pyg --dataset cora

bench-quick: build
	$(PY) -m iognn bench --suite quick

clean:
	rm -rf build python/iognn/*.so
