"""``load_chat_model("registry:<dir>")``: always the registry's current version.

A client that names the registry instead of a version never has to change
after a promote or rollback:

* when ``agentic-loop serve`` serves the registry (a ``serving.json`` whose
  server answers with its token, and follows ``current``), the spec is that
  server under its stable name, an OpenAI-compatible model: the server itself
  follows ``current``. A stale record (a dead server, its pid reused) is
  removed with a warning, never used; a server that does not answer its
  identity check is an error, not a guess;
* otherwise it is a :class:`RegistryChatModel`, in-process: before each call
  it ``stat``\\ s ``index.json`` and ``audit.jsonl`` (cheap) and, only when
  they changed, reads ``current`` and loads the new version's weights (a LoRA
  adapter merged onto its base, see :mod:`agentic_loop.models.weights`). A
  call already running finishes on the version it started with; then the old
  version's weights are freed. Every answer says which version wrote it
  (``response_metadata["model_name"]``: ``<registry folder>@<version>``), so
  a run's rounds carry it and ``agentic-loop monitor`` attributes the run.

This module lives in ``distill/release`` (where the registry is), so that
the registry stays the one reader of its index (rebuilt from the audit log,
corruption reported) and of ``serving.json``. ``models/`` never imports it:
:data:`REGISTRY_PROVIDER` is a row of the provider table
(:mod:`agentic_loop.models.providers`), registered when
``agentic_loop.distill.release`` is imported and named as an entry point
(group ``agentic_loop.model_providers`` in ``pyproject.toml``), which the
table loads the first time a spec says ``registry:``.

Example (a fake model stands in for the weights; the registry is real):
    >>> import tempfile, pathlib
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> reg = Registry(tmp / "registry")
    >>> for n in ("a", "b"):
    ...     (tmp / n).mkdir(); _ = (tmp / n / "config.json").write_text(f'{{"name": "{n}"}}')
    ...     _ = reg.register(tmp / n)
    >>> _ = reg.promote("v1")
    >>> def fake(path: str) -> ScriptedChatModel:
    ...     return ScriptedChatModel(default=f"answer of {pathlib.Path(path).name}")
    >>> llm = RegistryChatModel(registry=str(reg.root), loader=fake)
    >>> llm.invoke("hi").content, llm.model_id
    ('answer of a', 'registry@v1')
    >>> _ = reg.promote("v2")
    >>> answer = llm.invoke("hi")
    >>> answer.content, llm.model_id, answer.response_metadata["model_name"]
    ('answer of b', 'registry@v2', 'registry@v2')
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from pydantic import ConfigDict, Field, PrivateAttr

from agentic_loop.distill.release.live import Signature, index_signature, live_server
from agentic_loop.distill.release.registry import ModelVersion, Registry
from agentic_loop.distill.release.serve import ServeError
from agentic_loop.models.errors import ModelLoadError
from agentic_loop.models.providers import ModelProvider, register_provider

__all__ = ["REGISTRY_PROVIDER", "RegistryChatModel", "load_registry_model", "registry_model_dir"]

Loader = Callable[[str], BaseChatModel]


def registry_model_dir(root: str | os.PathLike[str]) -> Path:
    """The directory of the registry's current version (for ``resolve_model_dir``)."""
    return Path(Registry(Path(root).expanduser()).get("current").path)


def load_registry_model(root: str | os.PathLike[str], **kw: Any) -> BaseChatModel:
    """The model behind ``"registry:<root>"`` (see the module doc); ``kw`` go to the model."""
    from agentic_loop.models import load_chat_model

    path = Path(root).expanduser()
    if not path.is_dir():
        raise ModelLoadError(f"there is no model registry at {path} (from 'registry:{root}'); "
                             "pass the folder `agentic-loop register --registry` wrote")
    Registry(path).get("current")  # a clear error now when nothing is promoted
    try:
        state = live_server(path)
    except ServeError as exc:
        raise ModelLoadError(f"cannot load 'registry:{root}': {exc}") from None
    if state is not None and state.follow:
        check = kw.pop("check", state.state == "ready")
        return load_chat_model(state.spec, model=state.name, check=check, **kw)
    kw.pop("check", None)
    return RegistryChatModel(registry=str(path), model_kwargs=kw)


class RegistryChatModel(BaseChatModel):
    """The registry's current version, in-process, reloaded when ``current`` moves.

    ``model_kwargs`` go to ``load_chat_model("local:<dir>", ...)`` for each
    version; ``loader`` (path -> chat model) replaces that, for tests.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    registry: str
    model_kwargs: dict[str, Any] = Field(default_factory=dict)
    loader: Loader | None = None

    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _signature: Signature | None = PrivateAttr(default=None)
    _entry: ModelVersion | None = PrivateAttr(default=None)
    _model: BaseChatModel | None = PrivateAttr(default=None)
    _structured: dict[tuple[str, int, bool], tuple[Any, Runnable[Any, Any]]] = PrivateAttr(
        default_factory=dict)

    @property
    def _llm_type(self) -> str:
        return "agentic-loop-registry"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"registry": self.registry, "model_id": self.model_id}

    @property
    def model_id(self) -> str:
        """``<registry folder>@<version>`` of the version answering now (trajectories keep it)."""
        self.current()
        return self._id_of(self._entry)

    def _id_of(self, entry: ModelVersion | None) -> str:
        """What ``entry``'s answers say wrote them: the monitor reads the version from it."""
        return f"{Path(self.registry).name}@{entry.version if entry is not None else 'none'}"

    @property
    def version(self) -> str:
        """The registry version answering now."""
        self.current()
        return self._entry.version if self._entry is not None else "none"

    def current(self) -> BaseChatModel:
        """The current version's chat model (loaded when ``current`` moved since the last call)."""
        return self._answering()[0]

    def _answering(self) -> tuple[BaseChatModel, str]:
        """The current version's chat model and the id its answers are stamped with."""
        signature = index_signature(self.registry)
        with self._lock:
            if self._model is not None and signature == self._signature:
                return self._model, self._id_of(self._entry)
            entry = Registry(self.registry).get("current")
            if self._model is None or self._entry is None or entry.version != self._entry.version:
                previous = self._entry
                self._model = self._load(entry)
                self._entry = entry
                if previous is not None and self.loader is None and previous.path != entry.path:
                    from agentic_loop.models.local import release_engine

                    release_engine(previous.path)  # its weights go once its calls are answered
            self._signature = signature
            return self._model, self._id_of(self._entry)

    def _load(self, entry: ModelVersion) -> BaseChatModel:
        if self.loader is not None:
            return self.loader(entry.path)
        from agentic_loop.models import load_chat_model

        kw = {"model_id": f"{Path(self.registry).name}@{entry.version}", **self.model_kwargs}
        return load_chat_model(f"local:{entry.path}", **kw)

    # -- delegation: every call goes to the version current at its start ------

    # every answer names the version that wrote it (``model_name``: ``<registry>@<version>``),
    # whatever the loaded model calls itself: a run's rounds carry it, and the monitor reads it

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        model, answered_by = self._answering()
        result = model._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
        for generation in result.generations:
            generation.message = _stamped(generation.message, answered_by)
        return result

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                run_manager: CallbackManagerForLLMRun | None = None,
                **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        model, answered_by = self._answering()
        for chunk in model._stream(messages, stop=stop, run_manager=run_manager, **kwargs):
            if "model_name" in (chunk.message.response_metadata or {}):
                chunk.message = _stamped(chunk.message, answered_by)
            yield chunk

    def batch(self, inputs: list[LanguageModelInput],
              config: RunnableConfig | list[RunnableConfig] | None = None, *,
              return_exceptions: bool = False, **kwargs: Any) -> list[Any]:
        """The current version's ``batch`` (a local model decodes them in shared batches)."""
        model, answered_by = self._answering()
        answers = model.batch(inputs, config, return_exceptions=return_exceptions, **kwargs)
        return [_stamped(a, answered_by) if isinstance(a, BaseMessage) else a for a in answers]

    def with_structured_output(self, schema: Any = None, *, include_raw: bool = False,
                               **kwargs: Any) -> Runnable[LanguageModelInput, Any]:
        """The current version's structured output, looked up again at each call."""

        def structured() -> Runnable[Any, Any]:
            model = self.current()
            key = (self.version, id(schema), include_raw)
            if key not in self._structured:
                runnable = model.with_structured_output(schema, include_raw=include_raw, **kwargs)
                self._structured = {key: (schema, runnable)}  # only the current version's
            return self._structured[key][1]

        structured()  # a bad schema fails here, not mid-run
        return _per_call(structured, f"registry-structured[{getattr(schema, '__name__', '')}]")

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None,
                   **kwargs: Any) -> Runnable[LanguageModelInput, Any]:
        """The current version's ``bind_tools``, looked up again at each call."""
        return _per_call(lambda: self.current().bind_tools(tools, tool_choice=tool_choice,
                                                           **kwargs), "registry-tools")


def _stamped(message: Any, model_id: str) -> Any:
    """``message`` saying ``model_id`` wrote it (``response_metadata["model_name"]``)."""
    meta = {**(message.response_metadata or {}), "model_name": model_id}
    return message.model_copy(update={"response_metadata": meta})


def _per_call(make: Callable[[], Runnable[Any, Any]], name: str) -> Runnable[Any, Any]:
    def call(value: Any, config: RunnableConfig) -> Any:
        return make().invoke(value, config)

    async def acall(value: Any, config: RunnableConfig) -> Any:
        return await make().ainvoke(value, config)

    return RunnableLambda(call, afunc=acall, name=name)


def _load_registry_spec(target: str | None, source: str, kw: dict[str, Any]) -> BaseChatModel:
    return load_registry_model(target or "", **kw)


#: ``"registry:<dir>"`` in the provider table: the registry's current version, and its weights.
REGISTRY_PROVIDER = ModelProvider(
    name="registry", form="registry:<registry dir>", load=_load_registry_spec,
    target_name="registry folder", example="registry:runs/registry",
    model_dir=registry_model_dir)
register_provider(REGISTRY_PROVIDER)
