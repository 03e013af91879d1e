"""In-process batched decoding for a Hugging Face causal LM.

Why our own decoding loop instead of ``model.generate``: the architectures run
many small requests at once (``batch``, concurrent graphs, critiques), each
with its own stop strings, sampling seed, token budget and possibly its own
grammar. The engine gathers whatever requests arrive within a few
milliseconds into one padded batch, decodes them together with a shared KV
cache, applies each row's grammar mask, and drops rows from the batch as soon
as they finish. Callers just submit and wait; batching happens underneath,
which is also what makes LangChain's thread-pool ``batch`` truly batched.

Example (with a real model; see ``LocalChatModel`` for the usual entry point):
    >>> params = GenerationParams(max_tokens=8, temperature=0.0, stop=("\\n",))
    >>> params.greedy
    True
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import torch

from agentic_loop.errors import ConfigError
from agentic_loop.models.errors import GrammarError
from agentic_loop.models.grammar import (
    Grammar,
    allocate_token_masks,
    apply_token_masks,
    fill_token_mask,
)

logger = logging.getLogger(__name__)

__all__ = ["GenerationEngine", "GenerationOutput", "GenerationParams", "GenerationRequest"]


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


class _Row:
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


def _sample(logits: torch.Tensor, params: GenerationParams, gen: torch.Generator | None,
            masked: bool = False) -> int:
    """Pick the next token from one row of logits; ``masked``: a grammar has set the logits
    of the tokens it forbids to ``-inf`` (see :func:`_mask_grammar_rows`).

    Restricting to the allowed tokens before sorting matters: under a grammar most
    steps allow a handful of tokens (often exactly one), so we never sort the full
    vocabulary.
    """
    candidates: torch.Tensor | None = None
    if masked:
        candidates = torch.isfinite(logits).nonzero().squeeze(1)
        if candidates.numel() == 1:
            return int(candidates.item())
        if candidates.numel() == 0:
            raise GrammarError("the grammar allows no next token; the schema may be unsatisfiable: "
                               "relax its bounds or patterns")
        logits = logits[candidates]
    if params.greedy:
        choice = int(torch.argmax(logits).item())
    else:
        probs = torch.softmax(logits / params.temperature, dim=-1)
        if params.top_p < 1.0:
            sorted_probs, order = torch.sort(probs, descending=True)
            keep = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < params.top_p
            keep[0] = True
            probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_probs[keep])
        choice = int(torch.multinomial(probs, 1, generator=gen).item())
    return int(candidates[choice].item()) if candidates is not None else choice


def _mask_grammar_rows(logits: torch.Tensor, active: list[_Row]) -> set[int]:
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


class GenerationEngine:
    """Owns a model and a worker thread that decodes submitted requests in batches.

    ``max_batch_size`` caps rows decoded together; ``batch_window_s`` is how
    long the worker waits for companions after the first request arrives.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_batch_size: int = 8,
        batch_window_s: float = 0.01,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.device = next(model.parameters()).device
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        self.max_batch_size = max_batch_size
        self.batch_window_s = batch_window_s
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else tokenizer.eos_token_id)
        self.eos_ids = self._eos_ids()
        self._queue: queue.Queue[GenerationRequest] = queue.Queue()
        #: How many batches were decoded and the widest one, to verify batching.
        self.stats = {"batches": 0, "requests": 0, "max_rows": 0}
        self._worker = threading.Thread(target=self._loop, name="agentic-loop-decoder", daemon=True)
        self._worker.start()

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        for source in (self.tokenizer.eos_token_id, self.model.generation_config.eos_token_id):
            if isinstance(source, int):
                ids.add(source)
            elif isinstance(source, (list, tuple)):
                ids.update(int(i) for i in source)
        return ids

    # -- public API ---------------------------------------------------------
    def submit(self, request: GenerationRequest) -> Future[GenerationOutput]:
        """Queue one request; the returned future resolves when it is decoded."""
        if not request.prompt_ids:
            raise ConfigError("cannot generate from an empty prompt; pass at least one token")
        self._queue.put(request)
        return request.future

    def generate(
        self,
        prompts: Sequence[list[int]],
        params: GenerationParams,
        grammar: Grammar | None = None,
    ) -> list[GenerationOutput]:
        """Decode several prompts with the same settings and wait for all."""
        futures = [self.submit(GenerationRequest(list(p), params, grammar)) for p in prompts]
        return [f.result() for f in futures]

    # -- worker -------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            batch = [first]
            deadline = time.monotonic() + self.batch_window_s
            while len(batch) < self.max_batch_size:
                remaining = deadline - time.monotonic()
                try:
                    batch.append(self._queue.get(timeout=max(remaining, 0.0)) if remaining > 0
                                 else self._queue.get_nowait())
                except queue.Empty:
                    break
            live = [r for r in batch if r.future.set_running_or_notify_cancel()]
            if not live:
                continue
            self.stats["batches"] += 1
            self.stats["requests"] += len(live)
            self.stats["max_rows"] = max(self.stats["max_rows"], len(live))
            try:
                outputs = self._decode(live)
            except BaseException as exc:  # keep the worker alive; fail these requests only
                logger.exception("batched decoding failed")
                for r in live:
                    if not r.future.done():
                        r.future.set_exception(exc)
                continue
            for r, out in zip(live, outputs):
                r.future.set_result(out)

    @torch.inference_mode()
    def _decode(self, requests: list[GenerationRequest]) -> list[GenerationOutput]:
        from transformers import DynamicCache

        rows = [_Row(r, self.tokenizer) for r in requests]
        lengths = [len(r.prompt_ids) for r in requests]
        width = max(lengths)
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(requests):  # left padding keeps every row's last token aligned
            input_ids[i, width - lengths[i] :] = torch.tensor(r.prompt_ids, dtype=torch.long)
            attention[i, width - lengths[i] :] = 1
        input_ids, attention = input_ids.to(self.device), attention.to(self.device)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache()
        active = list(range(len(rows)))
        out = self.model(input_ids=input_ids, attention_mask=attention, position_ids=positions,
                         past_key_values=cache, use_cache=True)
        logits = out.logits[:, -1, :].float().cpu()
        for _ in range(max(r.params.max_tokens for r in requests) + 1):
            logits = logits[:, : self.vocab_size]
            masked = _mask_grammar_rows(logits, [rows[idx] for idx in active])
            next_tokens: list[int] = []
            for slot, idx in enumerate(active):
                row = rows[idx]
                token = _sample(logits[slot], row.params, row.generator, slot in masked)
                row.push(token, self.eos_ids)
                next_tokens.append(token)
            keep = [slot for slot, idx in enumerate(active) if rows[idx].finish_reason is None]
            if not keep:
                break
            if len(keep) < len(active):
                index = torch.tensor(keep, dtype=torch.long, device=self.device)
                cache.batch_select_indices(index)
                attention = attention.index_select(0, index)
                positions = positions.index_select(0, index)
                active = [active[s] for s in keep]
                next_tokens = [next_tokens[s] for s in keep]
            step = torch.tensor(next_tokens, dtype=torch.long, device=self.device).unsqueeze(1)
            attention = torch.cat([attention, torch.ones_like(step)], dim=1)
            positions = positions[:, -1:] + 1
            out = self.model(input_ids=step, attention_mask=attention, position_ids=positions,
                             past_key_values=cache, use_cache=True)
            logits = out.logits[:, -1, :].float().cpu()
        return [row.output(n) for row, n in zip(rows, lengths)]
