"""A chat model that routes each call to the current or a candidate model: canary or shadow.

Why a chat model: the architectures, the critic and any LangChain code take a
chat model, so a release experiment must look like one. :class:`Router` is a
``BaseChatModel`` over a *current* and a *candidate* model (chat models, or
specs for :func:`~agentic_loop.models.load_chat_model`); ``invoke``,
``batch``, ``ainvoke``, ``stream``, ``astream``, ``with_structured_output``
and ``bind_tools`` all go to the model the call is routed to.

``mode="canary"``
    a ``fraction`` (default 0.1) of users get the candidate. The user's key is
    hashed with ``salt`` into a bucket in [0, 1); buckets below ``fraction``
    go to the candidate, so the same user always gets the same model (and a
    whole architecture run, critic calls included, stays on one model).
``mode="shadow"``
    every call (or a random ``fraction`` of them, default all) also runs on the
    candidate, beside the current model's call, in a thread pool
    (:mod:`.router_shadow`). The caller only ever gets the current model's
    answer; both answers, both scores (``scorer``, e.g.
    :func:`~agentic_loop.distill.release.router_shadow.rubric_scorer`) and
    both latencies go to the JSONL ``shadow_log``. Structured and tool calls
    are not shadowed (they are the current model's).

The user key, first found wins: ``config["configurable"]["user_id"]``,
``config["metadata"]["user_id"]`` or a ``user_id=`` call keyword (raw ids,
hashed with :func:`~agentic_loop.trajectories.hash_user_id`), then
``config["configurable"]["run_metadata"]["user_id_hash"]``, which an
architecture's ``run(task, user_id=...)`` (or a graph input's ``user_id``)
sets and every model call inside the run sees. Both paths give one user the
same bucket. A call with no user goes to the current model
(``unkeyed="current"``, the default), or is bucketed by a hash of its prompt
(``unkeyed="prompt"``: note that a run's refine prompts differ, so its rounds
may then land on different models).

Every answer's ``response_metadata`` says who answered: ``"model_name"`` (the
answering model's :func:`~agentic_loop.models.model_id_of`) and ``"route"``
(``"current"`` or ``"candidate"``); trajectories record it per round.

Example:
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> router = Router(ScriptedChatModel(default="old", model_id="m-v1"),
    ...                 ScriptedChatModel(default="new", model_id="m-v2"), fraction=0.5)
    >>> answers = {u: router.invoke("hi", {"configurable": {"user_id": u}}) for u in "abcdefgh"}
    >>> sorted({a.response_metadata["route"] for a in answers.values()})
    ['candidate', 'current']
    >>> again = router.invoke("hi", {"configurable": {"user_id": "d"}})   # d's bucket: 0.006
    >>> again.content == answers["d"].content, again.response_metadata["model_name"]
    (True, 'm-v2')
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda, ensure_config
from pydantic import PrivateAttr

from agentic_loop.distill.release.router_shadow import Scorer, ShadowJob, ShadowRunner
from agentic_loop.errors import ConfigError
from agentic_loop.hashing import unit_hash
from agentic_loop.models import load_chat_model, model_id_of, with_structured_output
from agentic_loop.models.structured_output import message_text
from agentic_loop.trajectories import hash_user_id

if TYPE_CHECKING:
    from agentic_loop.distill.release.registry import ModelVersion, Registry

__all__ = ["DEFAULT_SALT", "Route", "Router", "bucket_of", "served_model_id"]

Route = Literal["current", "candidate"]
DEFAULT_SALT = "agentic-loop-canary"


def bucket_of(key: str, salt: str = DEFAULT_SALT) -> float:
    """The key's place in [0, 1): stable across processes and machines (SHA-256, not ``hash``);
    :func:`agentic_loop.hashing.unit_hash` with the canary's salt.

    >>> bucket_of("user-1") == bucket_of("user-1"), 0.0 <= bucket_of("user-1") < 1.0
    (True, True)
    """
    return unit_hash(key, salt)


def served_model_id(version: ModelVersion) -> str:
    """The id a registry version answers under: ``<name>-<version>``, as ``serve_registered``
    names it on vLLM and :meth:`Router.from_registry` loads it.

    >>> from agentic_loop.distill.release.registry import ModelVersion
    >>> served_model_id(ModelVersion(version="v3", path="/m", name="tagline", registered_at=""))
    'tagline-v3'
    """
    return f"{version.name}-{version.version}"


def _stamped(message: AIMessage, route: Route, model_id: str) -> AIMessage:
    meta = {**message.response_metadata, "model_name": model_id, "route": route}
    return message.model_copy(update={"response_metadata": meta})


def _unstamped(chunk: BaseMessage) -> AIMessageChunk:
    """A chunk without its own model name: chunks add up, and names would be concatenated.

    A model that cannot stream yields its whole answer as one ``AIMessage``; it
    becomes a chunk here, so the stream's chunks add up like any other.
    """
    if not isinstance(chunk, AIMessageChunk):
        calls = getattr(chunk, "tool_calls", None) or []
        chunk = AIMessageChunk(
            content=chunk.content, additional_kwargs=chunk.additional_kwargs,
            response_metadata=chunk.response_metadata, id=chunk.id,
            usage_metadata=getattr(chunk, "usage_metadata", None),
            tool_call_chunks=[tool_call_chunk(name=c["name"], args=json.dumps(c["args"]),
                                              id=c.get("id"), index=i)
                              for i, c in enumerate(calls)])
    if "model_name" not in chunk.response_metadata and "route" not in chunk.response_metadata:
        return chunk
    meta = {k: v for k, v in chunk.response_metadata.items() if k not in ("model_name", "route")}
    return chunk.model_copy(update={"response_metadata": meta})


@contextmanager
def _reporting(job: ShadowJob | None) -> Iterator[Callable[[str], None]]:
    """Tell ``job`` how the current model's call went: ``done(text)``, an error, or a stream
    the caller stopped reading (no shadow job: nothing to tell)."""
    started = time.perf_counter()

    def done(text: str) -> None:
        if job is not None:
            job.current_done(text, time.perf_counter() - started)

    try:
        yield done
    except GeneratorExit:
        if job is not None:
            job.current_failed("the caller stopped reading the stream", None)
        raise
    except BaseException as exc:
        if job is not None:
            job.current_failed(exc, time.perf_counter() - started)
        raise


class Router(BaseChatModel):
    """Canary or shadow routing between ``current`` and ``candidate`` (see the module doc)."""

    current: Any
    candidate: Any
    mode: Literal["canary", "shadow"] = "canary"
    fraction: float = 0.1
    salt: str = DEFAULT_SALT
    unkeyed: Literal["current", "prompt"] = "current"
    scorer: Any = None
    shadow_log: str | None = None
    shadow_workers: int = 2
    max_pending: int = 64
    seed: int | None = None
    model_id: str = ""
    current_id: str = ""
    candidate_id: str = ""

    _shadow: ShadowRunner | None = PrivateAttr(default=None)
    _rng: random.Random = PrivateAttr(default_factory=random.Random)
    _rng_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __init__(self, current: Any, candidate: Any, *, mode: str = "canary",
                 fraction: float | None = None, scorer: Scorer | None = None,
                 shadow_log: str | os.PathLike[str] | None = None, **kw: Any) -> None:
        if mode not in ("canary", "shadow"):
            raise ConfigError(f"router mode={mode!r}: pass 'canary' or 'shadow'")
        fraction = (0.1 if mode == "canary" else 1.0) if fraction is None else fraction
        if isinstance(fraction, bool) or not 0.0 <= float(fraction) <= 1.0:
            raise ConfigError(f"router fraction={fraction!r}: pass a share of traffic in [0, 1]")
        if mode == "shadow" and shadow_log is None:
            raise ConfigError("router mode='shadow' needs shadow_log=PATH: the JSONL file where "
                              "both models' answers are logged for comparison")
        if kw.get("unkeyed", "current") not in ("current", "prompt"):
            raise ConfigError(f"router unkeyed={kw['unkeyed']!r}: pass 'current' or 'prompt'")
        current, candidate = load_chat_model(current), load_chat_model(candidate)
        ids = model_id_of(current), model_id_of(candidate)
        kw.setdefault("model_id", f"router:{ids[0]}|{ids[1]}")
        super().__init__(current=current, candidate=candidate, mode=mode,
                         fraction=float(fraction), scorer=scorer,
                         shadow_log=None if shadow_log is None else os.fspath(shadow_log),
                         current_id=ids[0], candidate_id=ids[1], **kw)
        self._rng = random.Random(self.seed)
        if self.mode == "shadow" and self.shadow_log is not None:
            self._shadow = ShadowRunner(self.candidate, self.shadow_log, scorer=self.scorer,
                                        current_id=self.current_id,
                                        candidate_id=self.candidate_id,
                                        workers=self.shadow_workers,
                                        max_pending=self.max_pending)

    @classmethod
    def from_registry(cls, registry: Registry | str | os.PathLike[str], candidate: str | int, *,
                      mode: str = "canary", fraction: float | None = None,
                      loader: Callable[[ModelVersion], Any] | None = None,
                      model_kwargs: dict[str, Any] | None = None, **kw: Any) -> Router:
        """The registry's current version against ``candidate`` (e.g. ``"v3"``).

        Each version loads as ``load_chat_model("local:<path>", model_id=<name>-<version>)``
        (:func:`served_model_id`, the name the monitor maps back to the version), with
        ``model_kwargs``; ``loader(version)`` replaces that (e.g. a served model's spec).
        """
        from agentic_loop.distill.release.registry import Registry, RegistryError

        reg = registry if isinstance(registry, Registry) else Registry(registry)
        current, challenger = reg.get("current"), reg.get(candidate)
        if current.version == challenger.version:
            raise RegistryError(f"candidate {challenger.version} is already the current version "
                                f"of {reg.root}; pass a version that is not current")

        def load(version: ModelVersion) -> Any:
            if loader is not None:
                return loader(version)
            return load_chat_model(f"local:{version.path}", model_id=served_model_id(version),
                                   **(model_kwargs or {}))

        return cls(load(current), load(challenger), mode=mode, fraction=fraction, **kw)

    # -- routing ----------------------------------------------------------------------
    @property
    def _llm_type(self) -> str:
        return f"router-{self.mode}"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"mode": self.mode, "fraction": self.fraction, "current": self.current_id,
                "candidate": self.candidate_id}

    def route_key(self, config: RunnableConfig | None, messages: list[BaseMessage] | None = None,
                  user_id: str | None = None) -> str | None:
        """The hashed key a call is bucketed by (see the module doc); None: no user."""
        config = config or {}
        configurable = config.get("configurable") or {}
        raw = user_id or configurable.get("user_id") or (config.get("metadata") or {}).get(
            "user_id")
        if raw:
            return hash_user_id(str(raw))
        hashed = (configurable.get("run_metadata") or {}).get("user_id_hash")
        if hashed:
            return str(hashed)
        if self.unkeyed == "prompt" and messages:
            text = "\n".join(message_text(m) for m in messages)
            return "prompt:" + hashlib.sha256(text.encode()).hexdigest()
        return None

    def choose(self, key: str | None) -> Route:
        """The route of a call with ``key``: canary buckets; shadow always answers with current."""
        if self.mode == "shadow" or key is None:
            return "current"
        return "candidate" if bucket_of(key, self.salt) < self.fraction else "current"

    def model_id_for(self, config: RunnableConfig | None) -> str | None:
        """The id of the model a run with ``config`` goes to, before any call is made: a
        run's trajectory names it (:func:`~agentic_loop.models.model_id_of`), so the
        monitor counts a candidate's run that failed before its first answer against the
        candidate. None when each call's prompt decides (``unkeyed="prompt"``, no user).
        """
        key = self.route_key(config)
        if key is None and self.mode == "canary" and self.unkeyed == "prompt":
            return None
        return self._id(self.choose(key))

    def _pick(self, input: LanguageModelInput, config: RunnableConfig,
              kwargs: dict[str, Any]) -> tuple[Route, Any, list[BaseMessage], str | None]:
        messages = self._convert_input(input).to_messages()
        key = self.route_key(config, messages, kwargs.pop("user_id", None))
        route = self.choose(key)
        return route, (self.candidate if route == "candidate" else self.current), messages, key

    def _id(self, route: Route) -> str:
        return self.candidate_id if route == "candidate" else self.current_id

    def _shadow_job(self, messages: list[BaseMessage], key: str | None,
                    stop: list[str] | None, kwargs: dict[str, Any]) -> ShadowJob | None:
        if self._shadow is None:
            return None
        with self._rng_lock:
            sampled = self.fraction >= 1.0 or self._rng.random() < self.fraction
        return self._shadow.start(messages, key=key, stop=stop, **kwargs) if sampled else None

    # -- calls ------------------------------------------------------------------------
    def _start(self, input: LanguageModelInput, config: RunnableConfig | None,
               stop: list[str] | None, kwargs: dict[str, Any]
               ) -> tuple[Route, Any, list[BaseMessage], RunnableConfig, ShadowJob | None]:
        """A call's route, model, messages and config, and its shadow job (None: no shadow)."""
        config = ensure_config(config)
        route, model, messages, key = self._pick(input, config, kwargs)
        return route, model, messages, config, self._shadow_job(messages, key, stop, kwargs)

    def _last_chunk(self, route: Route) -> AIMessageChunk:
        return AIMessageChunk(content="", response_metadata={"model_name": self._id(route),
                                                             "route": route})

    def invoke(self, input: LanguageModelInput, config: RunnableConfig | None = None, *,
               stop: list[str] | None = None, **kwargs: Any) -> AIMessage:
        route, model, messages, config, job = self._start(input, config, stop, kwargs)
        with _reporting(job) as done:
            answer = model.invoke(messages, config, stop=stop, **kwargs)
            done(message_text(answer))
        return _stamped(answer, route, self._id(route))

    async def ainvoke(self, input: LanguageModelInput, config: RunnableConfig | None = None, *,
                      stop: list[str] | None = None, **kwargs: Any) -> AIMessage:
        route, model, messages, config, job = self._start(input, config, stop, kwargs)
        with _reporting(job) as done:
            answer = await model.ainvoke(messages, config, stop=stop, **kwargs)
            done(message_text(answer))
        return _stamped(answer, route, self._id(route))

    def stream(self, input: LanguageModelInput, config: RunnableConfig | None = None, *,
               stop: list[str] | None = None, **kwargs: Any) -> Iterator[AIMessageChunk]:
        route, model, messages, config, job = self._start(input, config, stop, kwargs)
        with _reporting(job) as done:
            parts = []
            for chunk in model.stream(messages, config, stop=stop, **kwargs):
                parts.append(message_text(chunk))
                yield _unstamped(chunk)
            done("".join(parts))
        yield self._last_chunk(route)

    async def astream(self, input: LanguageModelInput, config: RunnableConfig | None = None, *,
                      stop: list[str] | None = None,
                      **kwargs: Any) -> AsyncIterator[AIMessageChunk]:
        route, model, messages, config, job = self._start(input, config, stop, kwargs)
        with _reporting(job) as done:
            parts = []
            async for chunk in model.astream(messages, config, stop=stop, **kwargs):
                parts.append(message_text(chunk))
                yield _unstamped(chunk)
            done("".join(parts))
        yield self._last_chunk(route)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None,
                  **kwargs: Any) -> ChatResult:
        """``generate()``'s path: routed by the config of the run around the call (the
        router's own run is traced by ``generate``; the routed call adds no second trace)."""
        ambient = ensure_config()
        config: RunnableConfig = {"configurable": ambient.get("configurable") or {},
                                  "metadata": ambient.get("metadata") or {}}
        answer = self.invoke(messages, config, stop=stop, **kwargs)
        return ChatResult(generations=[ChatGeneration(message=answer)])

    # -- structured output and tools: built on the routed model, per call --------------
    def _per_route(self, build: Callable[[Any], Runnable[Any, Any]],
                   name: str) -> Runnable[LanguageModelInput, Any]:
        built: dict[Route, Runnable[Any, Any]] = {}
        lock = threading.Lock()

        def runnable_for(value: LanguageModelInput, config: RunnableConfig,
                         kwargs: dict[str, Any]) -> tuple[Route, Runnable[Any, Any]]:
            route, model, _, _ = self._pick(value, config, kwargs)
            with lock:
                if route not in built:
                    built[route] = build(model)
            return route, built[route]

        def mark(route: Route, out: Any) -> Any:
            if isinstance(out, AIMessage):
                return _stamped(out, route, self._id(route))
            if isinstance(out, dict) and isinstance(out.get("raw"), AIMessage):
                return {**out, "raw": _stamped(out["raw"], route, self._id(route))}
            return out

        def call(value: LanguageModelInput, config: RunnableConfig, **kwargs: Any) -> Any:
            route, runnable = runnable_for(value, config, kwargs)
            return mark(route, runnable.invoke(value, config, **kwargs))

        async def acall(value: LanguageModelInput, config: RunnableConfig, **kwargs: Any) -> Any:
            route, runnable = runnable_for(value, config, kwargs)
            return mark(route, await runnable.ainvoke(value, config, **kwargs))

        return RunnableLambda(call, afunc=acall, name=name)

    def with_structured_output(self, schema: Any, *, include_raw: bool = False,
                               **kwargs: Any) -> Runnable[LanguageModelInput, Any]:
        """Structured output of the model each call is routed to (its own kind of request)."""
        if kwargs:
            def build(model: Any) -> Runnable[Any, Any]:
                return model.with_structured_output(schema, include_raw=include_raw, **kwargs)
        else:
            def build(model: Any) -> Runnable[Any, Any]:
                return with_structured_output(model, schema, include_raw=include_raw)
        name = getattr(schema, "__name__", None) or "schema"
        return self._per_route(build, f"router-structured[{name}]")

    def bind_tools(self, tools: Any, *, tool_choice: str | None = None,
                   **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        """The routed model with ``tools`` bound (each model formats them its own way)."""
        extra = dict(kwargs, **({"tool_choice": tool_choice} if tool_choice else {}))
        return self._per_route(lambda model: model.bind_tools(tools, **extra), "router-tools")

    # -- shadow pool ------------------------------------------------------------------
    @property
    def shadow(self) -> ShadowRunner | None:
        """The shadow runner (``mode="shadow"``): its ``logged`` and ``skipped`` counts."""
        return self._shadow

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait for started shadow calls to be logged; True when all were within ``timeout_s``."""
        return True if self._shadow is None else self._shadow.flush(timeout_s)

    def close(self, *, wait: bool = True) -> None:
        """Stop shadowing (answers keep working); ``wait`` lets started shadow calls log."""
        if self._shadow is not None:
            self._shadow.close(wait=wait)
