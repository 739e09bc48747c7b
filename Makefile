# Quickstart: `make demo` (transpile the examples, compare them with eager) and `make test`.
# Both create .venv at the repository root when it is missing. `make bench` runs the benchmarks
# and rewrites benchmarks/RESULTS.md (`make bench BENCH_ARGS=--quick` for a shorter run).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo bench test test-slow setup regen check clean

setup: $(STAMP)

# torch first, pinned to the CPU build on local disk, so that resolving `torch>=2.5` for the
# project installs nothing more (and never pulls a CUDA build).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install --quiet "torch==2.13.0"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m benchmarks.demo

BENCH_ARGS ?=
bench: $(STAMP)
	$(BIN)/python -m benchmarks.bench --write-results $(BENCH_ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

regen: $(STAMP)
	$(BIN)/torchscribe examples

check: $(STAMP)
	$(BIN)/torchscribe --check examples

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
