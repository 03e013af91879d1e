"""Shared fixtures. The suite is offline: nothing may reach a model hub."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LANGSMITH_TRACING", "false")
# Writers record where they put user text in the data folder's places.jsonl (text_places.py): the
# suite's exports and shadow logs are recorded in a data folder of its own, not the checkout's.
if "AGENTIC_LOOP_DATA" not in os.environ:
    os.environ["AGENTIC_LOOP_DATA"] = tempfile.mkdtemp(prefix="agentic-loop-test-data-")
    atexit.register(shutil.rmtree, os.environ["AGENTIC_LOOP_DATA"], ignore_errors=True)

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
