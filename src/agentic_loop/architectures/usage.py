"""Count LLM calls, tokens and LLM-seconds of everything run inside a ``with track_usage()`` block.

Nodes call the generator, the critic and the reflector, possibly through
several layers (structured output, retries). A callback handler registered
through a context variable sees every chat-model call made in that context,
however deep, without threading a handler through every signature.

``llm_seconds`` is the wall time during which at least one of those calls was
in flight: the n samples of a best-of-n round, decoded together, cost their
shared time once (each still counts as a call with its tokens), so a bench can
compare pass rates per LLM-second across ways of spending the model.

Example:
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> fake = ScriptedChatModel(responses=["one two", "three"])
    >>> with track_usage() as usage:
    ...     _ = fake.invoke("a b c")
    ...     _ = fake.invoke("d")
    >>> usage.llm_calls, usage.output_tokens, usage.llm_seconds > 0
    (2, 3, True)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.tracers.context import register_configure_hook

from agentic_loop.agents.recorder import was_refused

__all__ = ["UsageCounter", "track_usage"]


class UsageCounter(BaseCallbackHandler):
    """Sums calls, token usage and in-flight wall time of chat-model calls (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.llm_calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self._busy_s = 0.0
        self._open: set[UUID] = set()
        self._since = 0.0

    def _drop_refused(self) -> None:
        """Forget calls an agent's episode refused at their start (its step or time limit):
        they never ran, and no end will close them."""
        with self._lock:
            for run_id in [r for r in self._open if was_refused(r)]:
                self._open.discard(run_id)
                self.llm_calls -= 1

    @property
    def llm_seconds(self) -> float:
        """Wall seconds with at least one call in flight (a call still running counts so far)."""
        self._drop_refused()
        with self._lock:
            running = time.perf_counter() - self._since if self._open else 0.0
            return self._busy_s + running

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: UUID,
                            **kwargs: Any) -> None:
        with self._lock:
            self.llm_calls += 1
            if not self._open:
                self._since = time.perf_counter()
            self._open.add(run_id)

    def _closed(self, run_id: UUID) -> None:
        with self._lock:
            if run_id in self._open:
                self._open.discard(run_id)
                if not self._open:
                    self._busy_s += time.perf_counter() - self._since

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._closed(run_id)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        self._closed(run_id)
        for generations in response.generations:
            for gen in generations:
                usage = getattr(getattr(gen, "message", None), "usage_metadata", None) \
                    if isinstance(gen, ChatGeneration) else None
                if usage:
                    with self._lock:
                        self.input_tokens += int(usage.get("input_tokens", 0))
                        self.output_tokens += int(usage.get("output_tokens", 0))

    def as_dict(self) -> dict[str, float]:
        self._drop_refused()
        return {"llm_calls": self.llm_calls, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens,
                "total_tokens": self.input_tokens + self.output_tokens,
                "llm_seconds": round(self.llm_seconds, 4)}


_current: ContextVar[UsageCounter | None] = ContextVar("agentic_loop_usage", default=None)
register_configure_hook(_current, inheritable=True)


@contextmanager
def track_usage() -> Iterator[UsageCounter]:
    """Count every chat-model call made in this context (nested blocks count separately)."""
    counter = UsageCounter()
    token = _current.set(counter)
    try:
        yield counter
    finally:
        _current.reset(token)
