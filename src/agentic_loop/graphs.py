"""The three architectures as graphs a LangGraph server serves (``langgraph.json`` names them).

Why a module of factories: a LangGraph server (``langgraph dev``, or a
deployment) imports the module that ``langgraph.json`` names when it starts
and asks for a graph whenever a run or a schema needs one. Importing this
module loads nothing (no torch, no model), so the server starts in seconds;
the model is loaded on the first request, in a worker thread (the server's
event loop never blocks on it), once per process, and the three graphs share
it. Each factory returns the architecture's own compiled graph
(:meth:`~agentic_loop.architectures.Architecture.build`), so a served run is
the same run as ``arch.run(...)`` in Python: input ``{"task", "thread_id",
"user_id", "consent", "metadata"}``, output ``{"output", "score", "passed",
"features", "stop_reason", "iterations", ...}``, and per-run settings
(``constraints``, ``target_score``, ``max_iterations``) as the run's context
(:mod:`agentic_loop.architectures.schemas`). On a server, the server's
checkpointer and store replace the graph's own, so the archive and the
reflections live in the server's store (``langgraph.json`` gives it a vector
index on the bundled embedder; a deployment's Postgres store is shared by all
its workers).

Settings come from the environment (``langgraph.json`` can set them under
``"env"``):

* ``AGENTIC_LOOP_MODEL``: the model spec (default ``"local"``, the embedded
  model; ``"openai:http://vllm-host:8000/v1"`` for a vLLM server);
* ``AGENTIC_LOOP_MODEL_NAME``: the served model's name on an OpenAI-compatible
  server (default: the first it serves);
* ``AGENTIC_LOOP_MAX_TOKENS``: cap on the tokens of each model answer;
* ``AGENTIC_LOOP_DATA``: where served runs log their trajectories (the
  training loop's input), and where the archive and the reflections live
  when the graphs run outside a server (default ``data``).

Example:
    >>> model_settings({"AGENTIC_LOOP_MODEL": "openai:http://127.0.0.1:8000/v1",
    ...                 "AGENTIC_LOOP_MODEL_NAME": "smollm2", "AGENTIC_LOOP_MAX_TOKENS": "64"})
    ('openai:http://127.0.0.1:8000/v1', {'model': 'smollm2', 'max_tokens': 64})
    >>> model_settings({})
    ('local', {})
    >>> GRAPHS
    ('reflection', 'archive_refine', 'reflexion')
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentic_loop.errors import ConfigError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langgraph.graph.state import CompiledStateGraph

    from agentic_loop.architectures import Architecture

__all__ = ["DATA_ENV", "GRAPHS", "MAX_TOKENS_ENV", "MODEL_ENV", "MODEL_NAME_ENV",
           "archive_refine", "model_settings", "reflection", "reflexion", "served_architecture",
           "served_model"]

MODEL_ENV = "AGENTIC_LOOP_MODEL"
MODEL_NAME_ENV = "AGENTIC_LOOP_MODEL_NAME"
MAX_TOKENS_ENV = "AGENTIC_LOOP_MAX_TOKENS"
DATA_ENV = "AGENTIC_LOOP_DATA"

#: The graphs this module serves, by the names ``langgraph.json`` gives them.
GRAPHS = ("reflection", "archive_refine", "reflexion")


def model_settings(env: Mapping[str, str] | None = None) -> tuple[str, dict[str, Any]]:
    """The model spec and ``load_chat_model`` keywords the environment asks for."""
    env = os.environ if env is None else env
    spec = env.get(MODEL_ENV, "").strip() or "local"
    kwargs: dict[str, Any] = {}
    if env.get(MODEL_NAME_ENV, "").strip():
        kwargs["model"] = env[MODEL_NAME_ENV].strip()
    raw = env.get(MAX_TOKENS_ENV, "").strip()
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise ConfigError(f"{MAX_TOKENS_ENV}={raw!r}: set a whole number of tokens >= 1, "
                              "or unset it for the model's default")
        kwargs["max_tokens"] = int(raw)
    return spec, kwargs


@functools.cache
def served_model() -> BaseChatModel:
    """The one model every served graph of this process runs on (loaded on first use)."""
    from agentic_loop.models import load_chat_model

    spec, kwargs = model_settings()
    return load_chat_model(spec, **kwargs)


@functools.cache
def served_architecture(name: str) -> Architecture:
    """The architecture ``name`` on :func:`served_model`; memory and logs under the data dir."""
    from agentic_loop.architectures import create_architecture

    data = Path(os.environ.get(DATA_ENV, "").strip() or "data")
    return create_architecture(name, served_model(), archive=str(data / "archive"),
                               reflections=str(data / "reflections"),
                               trajectories=str(data / "trajectories"))


async def _graph(name: str) -> CompiledStateGraph:
    # Loading a model blocks for seconds: never on the server's event loop.
    architecture = await asyncio.to_thread(served_architecture, name)
    return architecture.build()


async def reflection() -> CompiledStateGraph:
    """Generate -> critique -> refine (no memory across runs)."""
    return await _graph("reflection")


async def archive_refine() -> CompiledStateGraph:
    """Retrieve similar accepted outputs -> generate -> critique -> refine -> archive."""
    return await _graph("archive_refine")


async def reflexion() -> CompiledStateGraph:
    """Recall lessons -> attempt -> evaluate -> reflect -> retry."""
    return await _graph("reflexion")
