"""Models: one call, ``load_chat_model(spec)``, returns a LangChain chat model.

Every returned model supports ``invoke``, ``batch``, ``stream`` and
``with_structured_output(Schema)``, so the architectures never care whether
they run on the embedded CPU model, a distilled checkpoint, a vLLM server or
any LangChain chat model (bare or wrapped: see :mod:`.wrappers`).
No code path downloads weights from a model hub.

Example:
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> fake = ScriptedChatModel(responses=["ok"])
    >>> load_chat_model(fake) is fake   # a ready model passes through
    True
    >>> retrying = fake.with_retry(stop_after_attempt=2)
    >>> load_chat_model(retrying) is retrying, model_id_of(retrying)   # so does a wrapped one
    (True, 'scripted')
"""

from __future__ import annotations

import os
from typing import Any, overload

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable

from agentic_loop.models.embedded import EMBEDDED_MODEL_ID, default_cache_dir
from agentic_loop.models.errors import (
    GrammarError,
    ModelCallError,
    ModelDirError,
    ModelError,
    ModelLoadError,
    ModelSpecError,
    ModelTimeoutError,
    StructuredOutputError,
)
from agentic_loop.models.model_dirs import local_model_dir, resolve_model_dir
from agentic_loop.models.retry import DEFAULT_RETRY, RetryPolicy
from agentic_loop.models.spec import SPEC_FORMS, ModelSpec, parse_spec, resolve_spec
from agentic_loop.models.wrappers import (
    ChatModelLike,
    chat_model_of,
    model_id_of,
    with_structured_output,
)

__all__ = [
    "DEFAULT_RETRY",
    "EMBEDDED_MODEL_ID",
    "ChatModelLike",
    "GrammarError",
    "ModelCallError",
    "ModelDirError",
    "ModelError",
    "ModelLoadError",
    "ModelSpec",
    "ModelSpecError",
    "ModelTimeoutError",
    "RetryPolicy",
    "StructuredOutputError",
    "chat_model_of",
    "default_cache_dir",
    "load_chat_model",
    "local_model_dir",
    "model_id_of",
    "parse_spec",
    "resolve_model_dir",
    "resolve_spec",
    "with_structured_output",
]


@overload
def load_chat_model(spec: str | os.PathLike[str] | BaseChatModel, **kw: Any) -> BaseChatModel: ...


@overload
def load_chat_model(spec: ChatModelLike, **kw: Any) -> ChatModelLike: ...


def load_chat_model(spec: str | os.PathLike[str] | ChatModelLike, **kw: Any) -> ChatModelLike:
    """Resolve ``spec`` into a chat model.

    A chat model, or any Runnable wrapping one (``.bind``, ``.with_retry``,
    ``.with_fallbacks``, ``.configurable_fields``), passes through as it is
    (a Runnable that wraps no chat model is a :class:`ModelSpecError`).
    A string is read by :func:`~agentic_loop.models.spec.resolve_spec` (the
    one resolver; a bare model directory works too), a local model's
    directory by :func:`~agentic_loop.models.model_dirs.local_model_dir`.
    Keyword arguments go to the model: ``temperature``, ``top_p``,
    ``max_tokens``, ``stop``, ``seed`` for every provider; ``dtype``,
    ``device``, ``max_batch_size`` and ``cache_dir`` for local models;
    ``model``, ``api_key``, ``check`` (probe the server first, default True)
    for OpenAI-compatible servers. ``"registry:<dir>"`` is the registry's
    current version, always: its server under the stable name when
    ``agentic-loop serve`` serves it, else in-process, reloaded after a promote
    or rollback (:mod:`agentic_loop.distill.release.live_model`). A spec that
    is not ours (``"openai:gpt-4o-mini"``,
    ``"anthropic:claude-3-5-haiku-latest"``) goes to LangChain's
    ``init_chat_model`` with the keyword arguments; that needs the
    ``langchain`` package and the provider's (``langchain-openai`` ...).
    """
    if isinstance(spec, Runnable):
        chat_model_of(spec)  # refuses a runnable with no chat model inside, here and not mid-run
        return spec
    parsed = resolve_spec(spec)
    if parsed.provider == "langchain":
        return _init_langchain(parsed.target or "", kw)
    if parsed.provider == "registry":
        # The one import from models into distill, lazy: the registry reads its own index.
        from agentic_loop.distill.release.live_model import load_registry_model

        return load_registry_model(parsed.target or "", **kw)
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
    _drop_unset(kw)
    return OpenAICompatibleChatModel(base_url=base_url, model=model_name, api_key=api_key, **kw)


def _drop_unset(kw: dict[str, Any]) -> None:
    """Sampling keywords passed as None mean "the provider's default": leave them out."""
    for name in ("max_tokens", "temperature", "top_p", "seed", "stop"):
        if name in kw and kw[name] is None:
            kw.pop(name)


def _init_langchain(spec: str, kw: dict[str, Any]) -> BaseChatModel:
    """A spec that is not ours, through LangChain's ``init_chat_model`` (``provider:model``)."""
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:
        raise ModelLoadError(
            f"model spec {spec!r} is not one of ours, so it goes to LangChain's init_chat_model, "
            "which needs the langchain package: pip install langchain") from exc
    _drop_unset(kw)
    for ours in ("check", "cache_dir", "model_id"):
        kw.pop(ours, None)
    try:
        model = init_chat_model(spec, **kw)
    except ValueError as exc:
        raise ModelSpecError(
            f"init_chat_model (LangChain) refused model spec {spec!r}: {exc}; "
            f"use one of: {SPEC_FORMS}") from exc
    except Exception as exc:  # noqa: BLE001 - a missing provider package or key, named below
        raise ModelLoadError(
            f"init_chat_model (LangChain) could not load {spec!r}: {type(exc).__name__}: {exc}; "
            "install the provider's package (e.g. langchain-openai) and set its API key") from exc
    if not isinstance(model, BaseChatModel):
        raise ModelSpecError(f"init_chat_model (LangChain) gave no chat model for {spec!r}; "
                             "name the model in the spec, e.g. 'openai:gpt-4o-mini'")
    return model
