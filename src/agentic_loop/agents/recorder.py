"""A callback handler that times an episode's steps and enforces its step and time limits.

Why callbacks: an agent is a black box that returns its conversation only when
it finishes. The callbacks of its runs see every model call and tool call as
it happens, however deep in the agent's graph, so one handler in the episode's
config gives each step's latency, tokens and model, keeps the conversation so
far (an agent that raises mid-episode loses its graph state, not the record),
and stops the episode cooperatively: the model call past ``max_steps``, or any
step begun after the deadline, raises :class:`StepLimitReached` or
:class:`TimeLimitReached` (``raise_error``), which the agent's graph lets
through like any error of its nodes.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> recorder = EpisodeRecorder(max_steps=1)
    >>> llm = ScriptedChatModel(responses=["one", "two"])
    >>> _ = llm.invoke([HumanMessage("hi")], {"callbacks": [recorder]})
    >>> recorder.model_calls, [type(m).__name__ for m in recorder.conversation]
    (1, ['HumanMessage', 'AIMessage'])
    >>> llm.invoke("again", {"callbacks": [recorder]})
    Traceback (most recent call last):
    ...
    agentic_loop.agents.recorder.StepLimitReached: the episode reached its limit of 1 model calls
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, LLMResult

from agentic_loop.errors import AgenticLoopError, ConfigError
from agentic_loop.models.tools import tool_specs

__all__ = ["EpisodeLimitReached", "EpisodeRecorder", "StepLimitReached", "StepTiming",
           "TimeLimitReached", "was_refused"]

#: Model calls a recorder refused at their start (the limits), newest last; bounded.
_REFUSED: OrderedDict[UUID, None] = OrderedDict()
_REFUSED_LOCK = threading.Lock()


def _refuse(run_id: UUID) -> None:
    with _REFUSED_LOCK:
        _REFUSED[run_id] = None
        while len(_REFUSED) > 4096:
            _REFUSED.popitem(last=False)


def _offered_tools(params: Any) -> list[dict[str, Any]] | None:
    """The tools a model call was bound with (its ``invocation_params``), as OpenAI function
    specs; None when it had none or they cannot be read as function tools.

    >>> _offered_tools({"tools": [{"type": "function", "function": {"name": "f"}}]})
    [{'type': 'function', 'function': {'name': 'f'}}]
    >>> _offered_tools({"stop": None}) is None
    True
    """
    tools = params.get("tools") if isinstance(params, dict) else None
    if not tools or not isinstance(tools, (list, tuple)):
        return None
    try:
        return tool_specs(tools)
    except ConfigError:  # a provider's own tool kind (web search, ...): not trainable as calls
        return None


def was_refused(run_id: UUID) -> bool:
    """Whether a recorder stopped this model call at its start (it never ran: a usage counter
    that saw it start must not count it)."""
    with _REFUSED_LOCK:
        return run_id in _REFUSED


class EpisodeLimitReached(AgenticLoopError, RuntimeError):
    """An episode hit its step or time limit; raised inside the agent to stop it."""


class StepLimitReached(EpisodeLimitReached):
    """The agent asked for one more model call than ``max_steps`` allows."""


class TimeLimitReached(EpisodeLimitReached):
    """The agent began a step after the episode's wall-clock deadline."""


@dataclass
class StepTiming:
    """What the callbacks saw of one model or tool call."""

    kind: str  # "model" | "tool"
    started: float
    latency_s: float | None = None
    call_id: str | None = None
    error: str | None = None
    message: BaseMessage | None = None


class EpisodeRecorder(BaseCallbackHandler):
    """Times model and tool calls, keeps the conversation, and enforces the episode's limits.

    ``max_steps``: model calls allowed (None: no limit); ``deadline``: a
    ``time.perf_counter()`` after which no step may start (None: none).
    Thread-safe: a tool node may run several calls at once.
    """

    raise_error = True
    run_inline = True

    def __init__(self, *, max_steps: int | None = None, deadline: float | None = None) -> None:
        self.max_steps = max_steps
        self.deadline = deadline
        self._lock = threading.Lock()
        self._open: dict[UUID, StepTiming] = {}
        self.steps: list[StepTiming] = []
        self.model_calls = 0
        #: the last conversation a model was sent, plus what came after it
        self.conversation: list[BaseMessage] = []
        #: messages of the first model call's prompt (the episode's steps start after them)
        self.prompt_len: int | None = None
        self.system: str | None = None
        #: the tools the first model call was offered, as OpenAI function specs
        self.tools: list[dict[str, Any]] | None = None
        #: set to stop the episode at its next step (the time limit, seen from outside)
        self.cancelled = False

    def _check_time(self, run_id: UUID) -> None:
        if self.cancelled or (self.deadline is not None and time.perf_counter() > self.deadline):
            _refuse(run_id)
            raise TimeLimitReached("the episode ran past its wall-clock limit")

    def on_chat_model_start(self, serialized: Any, messages: list[list[BaseMessage]], *,
                            run_id: UUID, **kwargs: Any) -> None:
        self._check_time(run_id)
        with self._lock:
            if self.max_steps is not None and self.model_calls >= self.max_steps:
                _refuse(run_id)
                raise StepLimitReached(
                    f"the episode reached its limit of {self.max_steps} model calls")
            self.model_calls += 1
            sent = list(messages[0]) if messages else []
            if self.prompt_len is None:
                self.prompt_len = len(sent)
                first = sent[0] if sent else None
                if first is not None and first.type == "system" and isinstance(first.content,
                                                                                 str):
                    self.system = first.content
                self.tools = _offered_tools(kwargs.get("invocation_params"))
            self.conversation = sent
            timing = StepTiming("model", time.perf_counter())
            self._open[run_id] = timing
            self.steps.append(timing)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            timing = self._open.pop(run_id, None)
            if timing is None:
                return
            timing.latency_s = round(time.perf_counter() - timing.started, 4)
            gens = response.generations[0] if response.generations else []
            message = gens[0].message if gens and isinstance(gens[0], ChatGeneration) else None
            if isinstance(message, AIMessage):
                timing.message = message
                self.conversation = [*self.conversation, message]

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            timing = self._open.pop(run_id, None)
            if timing is not None:
                timing.latency_s = round(time.perf_counter() - timing.started, 4)
                timing.error = f"{type(error).__name__}: {error}"

    def on_tool_start(self, serialized: Any, input_str: str, *, run_id: UUID,
                      parent_run_id: UUID | None = None, inputs: dict[str, Any] | None = None,
                      **kwargs: Any) -> None:
        self._check_time(run_id)
        with self._lock:
            parent = self._open.get(parent_run_id) if parent_run_id is not None else None
            if parent is not None and parent.kind == "tool":
                return  # a tool run inside a tool (safe_tool's inner tool): one step, not two
            timing = StepTiming("tool", time.perf_counter(), call_id=kwargs.get("tool_call_id"))
            self._open[run_id] = timing
            self.steps.append(timing)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            timing = self._open.pop(run_id, None)
            if timing is None:
                return
            timing.latency_s = round(time.perf_counter() - timing.started, 4)
            if isinstance(output, ToolMessage):
                timing.call_id = timing.call_id or output.tool_call_id
                timing.message = output
                self.conversation = [*self.conversation, output]

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            timing = self._open.pop(run_id, None)
            if timing is not None:
                timing.latency_s = round(time.perf_counter() - timing.started, 4)
                timing.error = f"{type(error).__name__}: {error}"

    def latency_of(self, message: BaseMessage, model_index: int) -> float | None:
        """The latency of a step: a tool result by its call id, a model call by its index."""
        with self._lock:
            if isinstance(message, ToolMessage):
                for step in self.steps:
                    if step.kind == "tool" and step.call_id == message.tool_call_id:
                        return step.latency_s
                return None
            models = [s for s in self.steps if s.kind == "model"]
            return models[model_index].latency_s if model_index < len(models) else None
