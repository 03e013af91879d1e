"""Models: one call, ``load_chat_model(spec)``, returns a LangChain chat model.

Every returned model supports ``invoke``, ``batch``, ``stream`` and
``with_structured_output(Schema)``, so the architectures never care whether
they run on the embedded CPU model, a distilled checkpoint or a vLLM server.
No code path downloads from a model hub.

Example:
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> fake = ScriptedChatModel(responses=["ok"])
    >>> load_chat_model(fake) is fake   # a ready model passes through
    True
"""

from __future__ import annotations

import os
from typing import Any

from langchain_core.language_models import BaseChatModel

from agentic_loop.models.embedded import EMBEDDED_MODEL_ID, default_cache_dir
from agentic_loop.models.errors import (
    GrammarError,
    ModelCallError,
    ModelDirError,
    ModelError,
    ModelLoadError,
    ModelSpecError,
    StructuredOutputError,
)
from agentic_loop.models.model_dirs import local_model_dir, resolve_model_dir
from agentic_loop.models.retry import DEFAULT_RETRY, RetryPolicy
from agentic_loop.models.spec import ModelSpec, parse_spec, resolve_spec

__all__ = [
    "DEFAULT_RETRY",
    "EMBEDDED_MODEL_ID",
    "GrammarError",
    "ModelCallError",
    "ModelDirError",
    "ModelError",
    "ModelLoadError",
    "ModelSpec",
    "ModelSpecError",
    "RetryPolicy",
    "StructuredOutputError",
    "default_cache_dir",
    "load_chat_model",
    "local_model_dir",
    "model_id_of",
    "parse_spec",
    "resolve_model_dir",
    "resolve_spec",
]


def load_chat_model(spec: str | os.PathLike[str] | BaseChatModel, **kw: Any) -> BaseChatModel:
    """Resolve ``spec`` into a chat model.

    ``spec`` is read by :func:`~agentic_loop.models.spec.resolve_spec` (the
    one resolver; a bare model directory works too), a local model's
    directory by :func:`~agentic_loop.models.model_dirs.local_model_dir`.
    Keyword arguments go to the model: ``temperature``, ``top_p``,
    ``max_tokens``, ``stop``, ``seed`` for every provider; ``dtype``,
    ``device``, ``max_batch_size`` and ``cache_dir`` for local models;
    ``model``, ``api_key``, ``check`` (probe the server first, default True)
    for OpenAI-compatible servers.
    """
    if isinstance(spec, BaseChatModel):
        return spec
    parsed = resolve_spec(spec)
    if parsed.provider == "local":
        from agentic_loop.models.local import LocalChatModel

        source = os.fspath(spec) if isinstance(spec, (str, os.PathLike)) else repr(spec)
        path = local_model_dir(parsed, source=source, cache_dir=kw.pop("cache_dir", None) or None)
        default_id = EMBEDDED_MODEL_ID if parsed.target is None else path.name
        model = LocalChatModel(model_path=str(path), model_id=kw.pop("model_id", default_id), **kw)
        _ = model.engine  # load now, so a broken model fails here and not mid-run
        return model
    from agentic_loop.models.openai_compat import OpenAICompatibleChatModel, list_served_models

    base_url = parsed.target or ""
    api_key = kw.pop("api_key", "EMPTY")
    check = kw.pop("check", True)
    model_name = kw.pop("model", None)
    if check:
        served = list_served_models(base_url, api_key)
        if model_name is None:
            if not served:
                raise ModelLoadError(f"the server at {base_url} serves no model; start it with one "
                                     "(`agentic-loop serve`)")
            model_name = served[0]
        elif model_name not in served:
            raise ModelLoadError(f"the server at {base_url} does not serve {model_name!r}; "
                                 f"it serves {served}: pass one of them as model=")
    if model_name is None:
        raise ModelSpecError(
            f"model spec {spec!r} needs model=<served model name> when check=False")
    for name in ("max_tokens", "temperature", "top_p", "seed", "stop"):
        if name in kw and kw[name] is None:
            kw.pop(name)
    return OpenAICompatibleChatModel(base_url=base_url, model=model_name, api_key=api_key, **kw)


def model_id_of(llm: BaseChatModel) -> str:
    """A short, stable name of the model behind ``llm``, for trajectories and archives."""
    for attr in ("model_id", "model_name", "model"):
        value = getattr(llm, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(llm).__name__
