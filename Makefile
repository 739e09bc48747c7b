# Quickstart: `make demo` (transpile the examples, compare them with eager) and `make test`.
# Both create .venv at the repository root when it is missing. `make bench` runs the benchmarks
# and rewrites benchmarks/RESULTS.md (`make bench BENCH_ARGS=--quick` for a shorter run).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo bench test test-slow setup regen check clean corpus corpus-bench

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

# Two workers, each test file in one of them (its module fixtures built once): most tests wait
# on the C++ compiler or on small torch calls, which one core does not keep busy.
test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" -n 2 --dist loadfile

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

# The real-model corpus (torchvision's classification zoo, nn.TransformerEncoderLayer, Hugging Face
# transformers models, timm's models) in its own virtualenv: torch 2.14.1, torchvision 0.29.1,
# transformers 5.18.0 and timm 1.0.31 (several GB with the CUDA packages torch's wheel names; torch,
# torchvision, transformers and timm install from the local index here, their own dependencies
# from PyPI). torch and torchvision are named on the same pip command line as
# transformers and timm so that resolving those never replaces them.
# Tests, then the benchmarks, which write their tables into benchmarks/RESULTS.md and
# benchmarks/HF_RESULTS.md. timm's models are tested strict and permissive at batch 1 and strict
# at batch 8; `TORCHSCRIBE_CORPUS_FULL=1 make corpus` adds permissive at batch 8 (the full
# product, over two hours on two cores: tests/corpus/test_timm.py). The stamp depends on this
# Makefile too, so a changed pin reinstalls (pip leaves satisfied pins alone).
CORPUS_VENV := .venv-corpus
CORPUS_STAMP := $(CORPUS_VENV)/.installed
CORPUS_PINS := "torch==2.14.1" "torchvision==0.29.1" "transformers==5.18.0" "timm==1.0.31"
$(CORPUS_STAMP): pyproject.toml Makefile
	test -x $(CORPUS_VENV)/bin/python || $(PYTHON) -m venv $(CORPUS_VENV)
	$(CORPUS_VENV)/bin/python -m pip install --quiet $(CORPUS_PINS)
	$(CORPUS_VENV)/bin/python -m pip install --quiet -e ".[dev]"
	touch $(CORPUS_STAMP)

corpus: $(CORPUS_STAMP)
	TORCHSCRIBE_CORPUS=1 $(CORPUS_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/corpus
	$(CORPUS_VENV)/bin/python -m benchmarks.zoo --write-results
	$(CORPUS_VENV)/bin/python -m benchmarks.zoo --corpus timm --write-results
	$(CORPUS_VENV)/bin/python -m benchmarks.zoo --train --write-results
	$(CORPUS_VENV)/bin/python -m benchmarks.hf_bench --write-results

corpus-bench: $(CORPUS_STAMP)
	$(CORPUS_VENV)/bin/python -m benchmarks.zoo --write-results $(ZOO_ARGS)

regen: $(STAMP)
	$(BIN)/torchscribe examples

check: $(STAMP)
	$(BIN)/torchscribe --check examples

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
