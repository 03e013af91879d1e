"""Models: one call, ``load_chat_model(spec)``, returns a LangChain chat model.

Every returned model supports ``invoke``, ``batch``, ``stream`` and
``with_structured_output(Schema)``, so the architectures never care whether
they run on the embedded CPU model, a distilled checkpoint, a vLLM server or
any LangChain chat model (bare or wrapped: see :mod:`.wrappers`).
No code path downloads weights from a model hub.

A spec string is read through one table of providers (:mod:`.providers`):
``local`` and ``openai`` (:mod:`.loaders`, over :mod:`.local` and
:mod:`.openai_compat`), LangChain's ``provider:model`` for everything else, and
rows contributed from above, such as the model registry's ``registry:<dir>``
(registered by ``distill/release``, or found through its entry point), so this
package imports nothing of the packages above it.

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
from agentic_loop.models.loaders import BUILT_IN_PROVIDERS  # registers local, openai, langchain
from agentic_loop.models.model_dirs import local_model_dir, resolve_model_dir
from agentic_loop.models.providers import (
    ModelProvider,
    get_provider,
    known_providers,
    provider_of,
    register_provider,
)
from agentic_loop.models.retry import DEFAULT_RETRY, RetryPolicy
from agentic_loop.models.spec import ModelSpec, parse_spec, resolve_spec
from agentic_loop.models.wrappers import (
    ChatModelLike,
    chat_model_of,
    model_id_of,
    with_structured_output,
)

__all__ = [
    "BUILT_IN_PROVIDERS",
    "DEFAULT_RETRY",
    "EMBEDDED_MODEL_ID",
    "ChatModelLike",
    "GrammarError",
    "ModelCallError",
    "ModelDirError",
    "ModelError",
    "ModelLoadError",
    "ModelProvider",
    "ModelSpec",
    "ModelSpecError",
    "ModelTimeoutError",
    "RetryPolicy",
    "StructuredOutputError",
    "chat_model_of",
    "default_cache_dir",
    "get_provider",
    "known_providers",
    "load_chat_model",
    "local_model_dir",
    "model_id_of",
    "parse_spec",
    "register_provider",
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
    or rollback (a provider that ``distill/release`` contributes to the table of
    :mod:`.providers`; ``models`` never imports it). A spec that
    is not ours (``"openai:gpt-4o-mini"``,
    ``"anthropic:claude-3-5-haiku-latest"``) goes to LangChain's
    ``init_chat_model`` with the keyword arguments; that needs the
    ``langchain`` package and the provider's (``langchain-openai`` ...).
    """
    if isinstance(spec, Runnable):
        chat_model_of(spec)  # refuses a runnable with no chat model inside, here and not mid-run
        return spec
    parsed = resolve_spec(spec)
    source = os.fspath(spec) if isinstance(spec, (str, os.PathLike)) else repr(spec)
    return provider_of(parsed.provider, spec=source).load(parsed.target, source, kw)
