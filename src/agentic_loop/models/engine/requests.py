"""One generation request: its sampling settings, its answer, and its decoding state.

Why apart from the engine: these are the engine's data, shared with
:mod:`~agentic_loop.models.engine.decode_batch` (which holds a batch's rows) and with
callers that build requests (``LocalChatModel``, the benches), while
:mod:`~agentic_loop.models.engine.engine` keeps only the scheduling: admission,
prefill, continuous batching. A :class:`Row` turns sampled tokens into text:
stop strings, the grammar's end, the token budget, streamed pieces held back
until no stop string can still begin in them.

Example:
    >>> params = GenerationParams(max_tokens=8, temperature=0.0, stop=("\\n",))
    >>> params.greedy
    True
    >>> GenerationParams(top_p=0.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: top_p=0.0: pass a number in (0, 1]
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import torch

from agentic_loop.errors import ConfigError
from agentic_loop.models.engine.grammar import (
    Grammar,
    allocate_token_masks,
    apply_token_masks,
    fill_token_mask,
)

__all__ = ["GenerationOutput", "GenerationParams", "GenerationRequest", "Row",
           "mask_grammar_rows"]


@dataclass(frozen=True)
class GenerationParams:
    """Sampling settings of one request. ``temperature <= 0`` means greedy."""

    max_tokens: int = 256
    temperature: float = 0.7
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ConfigError(f"max_tokens={self.max_tokens}: pass an int >= 1")
        if not 0.0 < self.top_p <= 1.0:
            raise ConfigError(f"top_p={self.top_p}: pass a number in (0, 1]")
        if self.temperature < 0:
            raise ConfigError(f"temperature={self.temperature}: pass a number >= 0")

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


@dataclass
class GenerationOutput:
    """The decoded text of one request and its token accounting."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str  # "stop" (EOS, stop string or grammar complete) | "length"
    grammar_complete: bool | None = None  # None when no grammar was used


@dataclass
class GenerationRequest:
    prompt_ids: list[int]
    params: GenerationParams
    grammar: Grammar | None = None
    on_text: Callable[[str], None] | None = None
    future: Future[GenerationOutput] = field(default_factory=Future)


class Row:
    """Decoding state of one request inside a running batch."""

    def __init__(self, request: GenerationRequest, tokenizer: Any) -> None:
        self.request = request
        self.params = request.params
        self.tokenizer = tokenizer
        self.matcher = request.grammar.matcher() if request.grammar is not None else None
        self.generator: torch.Generator | None = None
        if self.params.seed is not None:
            self.generator = torch.Generator().manual_seed(self.params.seed)
        self.ids: list[int] = []
        self.text = ""
        self.emitted = 0
        self.finish_reason: str | None = None
        self.error: Exception | None = None  # set by ``fail``: this row alone ends with it
        self._hold = max((len(s) for s in self.params.stop), default=1) - 1

    def push(self, token: int, eos_ids: set[int]) -> None:
        """Add a sampled token; decide whether this row is finished."""
        if token in eos_ids:
            self.finish_reason = "stop"
            self._flush(final=True)
            return
        self.ids.append(token)
        if self.matcher is not None:
            self.matcher.consume_token(token)
        text = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        if text.endswith("\ufffd"):  # an incomplete UTF-8 sequence: wait for more bytes
            text = text[:-1]
        self.text = text
        for stop in self.params.stop:
            at = self.text.find(stop, max(0, self.emitted - len(stop)))
            if at != -1:
                self.text = self.text[:at]
                self.finish_reason = "stop"
                break
        if self.finish_reason is None and self.matcher is not None and self.matcher.is_stopped():
            self.finish_reason = "stop"
        if self.finish_reason is None and len(self.ids) >= self.params.max_tokens:
            self.finish_reason = "length"
        self._flush(final=self.finish_reason is not None)

    def fail(self, error: Exception) -> None:
        """End this row with ``error`` (its caller gets the exception); the batch goes on."""
        self.error = error
        self.finish_reason = "error"

    def _flush(self, final: bool) -> None:
        on_text = self.request.on_text
        limit = len(self.text) if final else max(self.emitted, len(self.text) - self._hold)
        if limit > self.emitted:
            if on_text is not None:
                on_text(self.text[self.emitted : limit])
            self.emitted = limit

    def output(self, prompt_tokens: int) -> GenerationOutput:
        complete = None
        if self.matcher is not None:
            complete = bool(self.matcher.is_accepting())
        return GenerationOutput(
            text=self.text,
            prompt_tokens=prompt_tokens,
            completion_tokens=len(self.ids),
            finish_reason=self.finish_reason or "length",
            grammar_complete=complete,
        )


def mask_grammar_rows(logits: torch.Tensor, active: list[Row]) -> set[int]:
    """Set to ``-inf``, in place, the logits each row's grammar forbids (one logits row per
    ``active`` request); return the slots that were masked.

    All grammar rows of the batch share one llguidance bitmask, which the matchers fill
    in place, and are masked in one tensor operation.
    """
    slots = [slot for slot, row in enumerate(active) if row.matcher is not None]
    if not slots:
        return set()
    grammar = active[slots[0]].request.grammar
    assert grammar is not None
    bitmask = allocate_token_masks(len(active), grammar.mask_vocab_size)
    for slot in slots:
        fill_token_mask(active[slot].matcher, bitmask, slot)
    apply_token_masks(logits, bitmask, slots)
    return set(slots)
