"""Shared fixtures. The suite is offline: nothing may reach a model hub."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LANGSMITH_TRACING", "false")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def local_llm():
    """The real embedded model (SmolLM2-135M), loaded once for the whole session."""
    from agentic_loop.models import load_chat_model

    return load_chat_model("local", temperature=0.7, max_tokens=64)


@pytest.fixture(scope="session")
def real_embedder():
    """The bundled all-MiniLM-L6-v2 embedder, loaded once for the whole session."""
    from agentic_loop.memory import Embedder

    embedder = Embedder()
    embedder.embed(["warm up"])  # load the weights now, not inside the first timed test
    return embedder
