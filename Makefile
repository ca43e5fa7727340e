# Two commands do all the set-up: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test chat lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Stamps re-install only when pyproject.toml changes.
# llama.cpp (the embedded model) is compiled here. A native build picks AVX-512/AMX
# kernels that crashed (SIGSEGV on the first answer) on Xeons with AMX, so build the
# portable set (AVX2, FMA, F16C) and drop any cached wheel an earlier native build left.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF

$(VENV)/.installed-local: pyproject.toml | $(BIN)/python
	-$(BIN)/pip cache remove 'llama_cpp_python*' >/dev/null 2>&1
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install -q -e '.[local]'
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

run: $(VENV)/.installed-local
	$(BIN)/chatterd run

chat: $(VENV)/.installed-local
	$(BIN)/chatterd chat

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check bot channels core memory tests bench
	$(BIN)/mypy bot channels core memory

bench: $(VENV)/.installed-dev
	$(BIN)/python bench/turn_bench.py
	$(BIN)/python bench/context_bench.py
	$(BIN)/python bench/intake_bench.py
	$(BIN)/python bench/stream_bench.py
	$(BIN)/python bench/console_bench.py
	$(BIN)/python bench/reminder_bench.py
	$(BIN)/python bench/burst_bench.py
	$(BIN)/python bench/draw_bench.py

clean:
	rm -rf $(VENV) build *.egg-info
