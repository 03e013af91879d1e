"""Any LangChain chat model, bare or wrapped: find the model inside, ask it for structured output.

LangChain users hand over chat models dressed in Runnable wrappers:
``llm.bind(temperature=0)``, ``llm.with_config(...)``, ``llm.with_retry()``,
``llm.with_fallbacks([backup])``, ``llm.configurable_fields(...)`` and
``configurable_alternatives(...)``. They take the same input and give the same
message as the model, so plain generation needs nothing from us. Two things
need the chat model inside, which :func:`chat_model_of` finds:

* a name for trajectories and archives (:func:`model_id_of`: the primary
  model of fallbacks, the default of a configurable model);
* structured output. The wrappers do not carry it faithfully: a binding
  forwards ``with_structured_output`` to the bare model and drops its own
  keyword arguments and config, a retry wrapper drops its retries, fallbacks
  and configurable models have none that works. :func:`with_structured_output`
  asks the model inside and rebuilds the same wrapper around the answer.

What :func:`with_structured_output` keeps, wrapper by wrapper:

* ``bind(**kwargs)`` / ``with_config``: the config, and the keyword arguments
  (say ``temperature``) except tool-calling ones (``tools``, ``tool_choice``,
  ``functions``, ``function_call``, ``parallel_tool_calls``), which would fight
  the schema's own request. The kwargs reach the model when the structured
  runnable starts with the model (LangChain's default ``include_raw=False``
  and every model of this package); a structured runnable that starts
  elsewhere ignores them;
* ``with_retry``: the same retry settings around the structured call (so an
  invalid answer is retried as well, when its exception type is retried);
* ``with_fallbacks``: every fallback asked for the same structured output,
  with the same exceptions handled;
* ``configurable_fields`` / ``configurable_alternatives``: the model is
  configured from each call's config, then asked.

Example:
    >>> from pydantic import BaseModel
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> class Verdict(BaseModel):
    ...     ok: bool
    >>> fake = ScriptedChatModel(default_structured={"ok": True}, model_id="fake-1")
    >>> wrapped = fake.bind(temperature=0.0).with_retry()
    >>> model_id_of(wrapped), chat_model_of(wrapped) is fake
    ('fake-1', True)
    >>> with_structured_output(wrapped, Verdict).invoke("Is it ok?")
    Verdict(ok=True)
    >>> fake.calls[-1].kwargs
    {'temperature': 0.0}
"""

from __future__ import annotations

from typing import Any, NoReturn, TypeAlias

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.base import RunnableBindingBase
from langchain_core.runnables.configurable import DynamicRunnable
from langchain_core.runnables.fallbacks import RunnableWithFallbacks

from agentic_loop.models.errors import ModelSpecError

__all__ = [
    "TOOL_KWARGS",
    "ChatModelLike",
    "chat_model_of",
    "inner_chat_model",
    "model_id_of",
    "with_structured_output",
]

#: A chat model, or any Runnable wrapping one (what every ``llm=`` accepts).
ChatModelLike: TypeAlias = Runnable[LanguageModelInput, Any]

#: Bound keyword arguments a structured call drops: the schema makes its own request.
TOOL_KWARGS = frozenset({"tools", "tool_choice", "functions", "function_call",
                         "parallel_tool_calls"})


def _inner(llm: Any) -> Any:
    """The runnable one wrapper level down, or None when ``llm`` wraps nothing we know."""
    if isinstance(llm, RunnableBindingBase):  # bind, with_config, with_retry, with_listeners
        return llm.bound
    if isinstance(llm, RunnableWithFallbacks):
        return llm.runnable
    if isinstance(llm, DynamicRunnable):  # configurable_fields / configurable_alternatives
        return llm.default
    return None


def inner_chat_model(llm: Any) -> BaseChatModel | None:
    """The chat model inside ``llm`` (``llm`` itself when bare), or None when there is none.

    >>> from langchain_core.runnables import RunnableLambda
    >>> inner_chat_model(RunnableLambda(lambda x: x)) is None
    True
    """
    for _ in range(64):  # wrappers nest a few levels; a cycle would be a bug elsewhere
        if isinstance(llm, BaseChatModel):
            return llm
        llm = _inner(llm)
        if llm is None:
            return None
    return None


def chat_model_of(llm: Any) -> BaseChatModel:
    """:func:`inner_chat_model`, or a :class:`ModelSpecError` naming what was passed."""
    model = inner_chat_model(llm)
    if model is None:
        _not_a_chat_model(llm)
    return model


def _not_a_chat_model(llm: Any) -> NoReturn:
    raise ModelSpecError(
        f"{repr(llm)[:120]} is not a chat model and wraps none; pass a LangChain chat model "
        "(optionally wrapped by .bind, .with_retry, .with_fallbacks or .configurable_fields) "
        "or a model spec string such as 'local'")


def model_id_of(llm: Any, config: Any = None) -> str:
    """A short, stable name of the chat model in ``llm``, for trajectories and archives.

    With a run's ``config``, a model that routes runs (a canary
    :class:`~agentic_loop.distill.release.router.Router` has ``model_id_for``)
    names the model that run goes to: known before any call, so a run that
    fails before its first answer is still counted against that model.

    >>> from agentic_loop.testing import ScriptedChatModel
    >>> model_id_of(ScriptedChatModel(model_id="m1").with_fallbacks([ScriptedChatModel()]))
    'm1'
    """
    model = chat_model_of(llm)
    routed = getattr(model, "model_id_for", None) if config is not None else None
    if callable(routed):
        found = routed(config)
        if isinstance(found, str) and found:
            return found
    for attr in ("model_id", "model_name", "model"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def with_structured_output(llm: ChatModelLike, schema: Any, *,
                      include_raw: bool = False) -> Runnable[LanguageModelInput, Any]:
    """``llm.with_structured_output(schema)``, for a bare chat model or any wrapper of one.

    See the module docstring for what each wrapper keeps. Raises
    :class:`ModelSpecError` when ``llm`` (or one of its fallbacks) wraps no
    chat model, and lets ``NotImplementedError`` through from a model that
    has no structured output.
    """
    if isinstance(llm, BaseChatModel):
        return llm.with_structured_output(schema, include_raw=include_raw)
    if isinstance(llm, RunnableBindingBase):
        inner = with_structured_output(llm.bound, schema, include_raw=include_raw)
        kwargs = {k: v for k, v in llm.kwargs.items() if k not in TOOL_KWARGS}
        return llm.model_copy(update={"bound": inner, "kwargs": kwargs,
                                      "custom_input_type": None, "custom_output_type": None})
    if isinstance(llm, RunnableWithFallbacks):
        return llm.model_copy(update={
            "runnable": with_structured_output(llm.runnable, schema, include_raw=include_raw),
            "fallbacks": [with_structured_output(f, schema, include_raw=include_raw)
                          for f in llm.fallbacks]})
    if isinstance(llm, DynamicRunnable):
        return _configured(llm, schema, include_raw)
    _not_a_chat_model(llm)


def _configured(llm: DynamicRunnable[Any, Any], schema: Any,
                include_raw: bool) -> Runnable[LanguageModelInput, Any]:
    """Structured output of a configurable model: configure it per call, then ask it."""

    def call(value: LanguageModelInput, config: RunnableConfig, **kwargs: Any) -> Any:
        model, prepared = llm.prepare(config)
        return with_structured_output(model, schema, include_raw=include_raw).invoke(
            value, prepared, **kwargs)

    async def acall(value: LanguageModelInput, config: RunnableConfig, **kwargs: Any) -> Any:
        model, prepared = llm.prepare(config)
        return await with_structured_output(model, schema, include_raw=include_raw).ainvoke(
            value, prepared, **kwargs)

    name = getattr(schema, "__name__", None) or "schema"
    return RunnableLambda(call, afunc=acall, name=f"configured-structured[{name}]")
