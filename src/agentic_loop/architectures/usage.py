"""Count LLM calls and tokens of everything run inside a ``with track_usage()`` block.

Nodes call the generator, the critic and the reflector, possibly through
several layers (structured output, retries). A callback handler registered
through a context variable sees every chat-model call made in that context,
however deep, without threading a handler through every signature.

Example:
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> fake = ScriptedChatModel(responses=["one two", "three"])
    >>> with track_usage() as usage:
    ...     _ = fake.invoke("a b c")
    ...     _ = fake.invoke("d")
    >>> usage.llm_calls, usage.output_tokens
    (2, 3)
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.tracers.context import register_configure_hook

__all__ = ["UsageCounter", "track_usage"]


class UsageCounter(BaseCallbackHandler):
    """Sums calls and token usage reported by chat models (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.llm_calls = 0
        self.input_tokens = 0
        self.output_tokens = 0

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        with self._lock:
            self.llm_calls += 1

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        for generations in response.generations:
            for gen in generations:
                usage = getattr(getattr(gen, "message", None), "usage_metadata", None) \
                    if isinstance(gen, ChatGeneration) else None
                if usage:
                    with self._lock:
                        self.input_tokens += int(usage.get("input_tokens", 0))
                        self.output_tokens += int(usage.get("output_tokens", 0))

    def as_dict(self) -> dict[str, int]:
        return {"llm_calls": self.llm_calls, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens,
                "total_tokens": self.input_tokens + self.output_tokens}


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
