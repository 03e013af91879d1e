"""In-process batched decoding for a Hugging Face causal LM.

Why our own decoding loop instead of ``model.generate``: the architectures run
many small requests at once (``batch``, concurrent graphs, critiques), each
with its own stop strings, sampling seed, token budget and possibly its own
grammar. The engine gathers whatever requests arrive within a few
milliseconds into one padded batch, decodes them together with a shared KV
cache, and applies each row's grammar mask. Batching is continuous: a row
leaves the batch (and its caller gets the answer) the step it finishes, and
requests that arrive meanwhile are prefilled and join the running batch
between steps, so a loop's next-round request never waits for a stranger's
long answer, and the batch stays full (arrivals join in groups: see
:mod:`~agentic_loop.models.join_policy`). Callers just submit and wait;
batching happens underneath, which is also what makes LangChain's
thread-pool ``batch`` truly batched.

Example (with a real model; see ``LocalChatModel`` for the usual entry point):
    >>> params = GenerationParams(max_tokens=8, temperature=0.0, stop=("\\n",))
    >>> params.greedy
    True
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import torch

from agentic_loop.errors import ConfigError
from agentic_loop.models.decode_batch import DecodeBatch, common_prefix, new_cache
from agentic_loop.models.errors import GrammarError, ModelCallError
from agentic_loop.models.grammar import (
    Grammar,
    allocate_token_masks,
    apply_token_masks,
    fill_token_mask,
)
from agentic_loop.models.join_policy import JoinPolicy
from agentic_loop.models.prefix_memory import PrefixMemory
from agentic_loop.models.token_sampling import sample_tokens

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
    long the worker waits for companions after the first request arrives when
    it is idle. While it decodes, requests that arrive join the running batch
    between steps (continuous batching), so a loop's second-round request
    never waits for another request's long answer to finish.
    ``shared_prefix_min``: the shortest prompt prefix worth computing once for a
    prefill group, or copying from the previous prefill (see ``_prefill``).
    ``join_min`` / ``join_wait_steps``: how arrivals mid-decode join (:class:`JoinPolicy`).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_batch_size: int = 32,
        batch_window_s: float = 0.01,
        shared_prefix_min: int = 16,
        join_min: int = 8,
        join_wait_steps: int = 8,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.device = next(model.parameters()).device
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        self.max_batch_size = max_batch_size
        self.batch_window_s = batch_window_s
        self.shared_prefix_min = shared_prefix_min
        self._joins = JoinPolicy(join_min, join_wait_steps)  # bad settings fail here
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else tokenizer.eos_token_id)
        self.eos_ids = self._eos_ids()
        self._queue: queue.Queue[GenerationRequest | None] = queue.Queue()  # None: wake up
        self._closed = threading.Event()
        #: Busy periods, requests, the widest batch, requests that joined a running batch
        #: and the prefills that took them in (``join_prefills``): to verify batching.
        #: Prompt tokens whose KV was copied from the previous prefill's prefix.
        self.stats = {"batches": 0, "requests": 0, "max_rows": 0, "joined": 0,
                      "join_prefills": 0, "reused_prefix_tokens": 0}
        self._prefix = PrefixMemory(minimum=shared_prefix_min)
        #: Seconds spent decoding (prefills and steps), counted before each step's answers
        #: are handed out: the difference over a stretch of work is that work's compute,
        #: even when the engine never goes idle in between.
        self.busy_s = 0.0
        self._running: list[GenerationRequest] = []  # admitted in the current busy period
        self._worker = threading.Thread(target=self._loop, name="agentic-loop-decoder", daemon=True)
        self._worker.start()
        _OPEN_ENGINES.add(self)

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
        if self._closed.is_set():
            raise ModelCallError("this generation engine is closed; load the model again")
        self._queue.put(request)
        return request.future

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the worker: a running batch stops at its next step, and its requests and
        the queued ones fail with :class:`ModelCallError`. Called for every engine at
        interpreter exit, so no decoder thread is inside torch while the process ends
        (which can abort it).
        """
        self._closed.set()
        self._queue.put(None)
        if self._worker is not threading.current_thread():
            self._worker.join(timeout_s)
        _OPEN_ENGINES.discard(self)

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
        while not self._closed.is_set():
            first = self._queue.get()
            if first is None:
                continue
            batch = [first]
            deadline = time.monotonic() + self.batch_window_s
            while len(batch) < self.max_batch_size:
                remaining = deadline - time.monotonic()
                try:
                    item = (self._queue.get(timeout=max(remaining, 0.0)) if remaining > 0
                            else self._queue.get_nowait())
                except queue.Empty:
                    break
                if item is not None:
                    batch.append(item)
            live = self._admissible(batch)
            if not live:
                continue
            self.stats["batches"] += 1
            self._running = []
            try:
                self._decode(live)
            except BaseException as exc:  # keep the worker alive; fail these requests only
                if not self._closed.is_set():
                    logger.exception("batched decoding failed")
                for r in [*live, *self._running]:
                    if not r.future.done():
                        r.future.set_exception(exc)
        closed = ModelCallError("the generation engine was closed before this request finished")
        for item in self._queued(limit=None):  # fail what is still queued
            if item.future.set_running_or_notify_cancel():
                item.future.set_exception(closed)

    def _admissible(self, requests: list[GenerationRequest]) -> list[GenerationRequest]:
        """The requests not cancelled while they waited, now marked running and counted."""
        live = [r for r in requests if r.future.set_running_or_notify_cancel()]
        self.stats["requests"] += len(live)
        return live

    def _queued(self, limit: int | None) -> list[GenerationRequest]:
        """Up to ``limit`` (None: all) requests taken off the queue without waiting; the
        wake-up markers ``close`` puts there are dropped."""
        taken: list[GenerationRequest] = []
        while limit is None or len(taken) < limit:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                taken.append(item)
        return taken

    def _waiting(self, free: int) -> list[GenerationRequest]:
        """Up to ``free`` queued requests, without waiting for more to arrive."""
        return self._admissible(self._queued(free))

    def _prefill(self, requests: list[GenerationRequest]) -> DecodeBatch:
        """Run the prompts of ``requests`` and return their decoding state.

        Work that several prompts share is done once: identical prompts (best-of-n's
        samples) are computed once and their state copied, and a prefix every distinct
        prompt starts with (all but the last token of a lone prompt), when it is at least
        ``shared_prefix_min`` tokens, is computed once and its KV cache broadcast; the
        part of it the previous prefill's prefix shares (the system prompt) is copied
        from :class:`PrefixMemory` instead of computed. The rest of each prompt is
        left-padded after that prefix, so a row's attention mask reads ``prefix,
        padding, its own tokens``.
        """
        prompts = [tuple(r.prompt_ids) for r in requests]
        unique = list(dict.fromkeys(prompts))
        shared = common_prefix(unique) if len(unique) > 1 else len(unique[0]) - 1
        if shared < self.shared_prefix_min:
            shared = 0
        cache = new_cache(getattr(self.model, "config", None))
        if shared:
            self.stats["reused_prefix_tokens"] += self._prefix.fill(
                self.model, cache, unique[0][:shared], self.device)
            if len(unique) > 1:
                cache.batch_repeat_interleave(len(unique))
        tails = [p[shared:] for p in unique]
        width = max(len(t) for t in tails)
        input_ids = torch.full((len(unique), width), self.pad_id, dtype=torch.long)
        own = torch.zeros((len(unique), width), dtype=torch.long)
        for i, tail in enumerate(tails):  # left padding keeps every row's last token aligned
            input_ids[i, width - len(tail) :] = torch.tensor(tail, dtype=torch.long)
            own[i, width - len(tail) :] = 1
        input_ids, own = input_ids.to(self.device), own.to(self.device)
        positions = shared + (own.cumsum(-1) - 1).clamp(min=0)
        attention = torch.cat([own.new_ones((len(unique), shared)), own], dim=1)
        out = self.model(input_ids=input_ids, attention_mask=attention, position_ids=positions,
                         past_key_values=cache, use_cache=True, logits_to_keep=1)
        batch = DecodeBatch(rows=[], prompt_tokens=[], cache=cache, attention=attention,
                       positions=positions[:, -1:], logits=out.logits[:, -1, :].float().cpu())
        if len(unique) < len(prompts):  # copy each distinct prompt's state to its requests
            slot = {p: i for i, p in enumerate(unique)}
            batch.select([slot[p] for p in prompts], self.device)
        batch.rows = [_Row(r, self.tokenizer) for r in requests]
        batch.prompt_tokens = [len(p) for p in prompts]
        return batch

    @torch.inference_mode()
    def _decode(self, requests: list[GenerationRequest]) -> None:
        """Decode ``requests`` and every request that arrives while they run (continuous
        batching): a finished row resolves its future and leaves the batch at once, and
        queued requests are prefilled and join the running batch between steps, up to
        ``max_batch_size`` rows. One call is one busy period of the engine.
        """
        clock = time.perf_counter()
        batch = self._prefill(requests)
        self._running = list(requests)
        self.stats["max_rows"] = max(self.stats["max_rows"], len(batch.rows))
        self._joins.waited = 0  # a period that raised may have left a count
        while batch.rows:
            if self._closed.is_set():
                raise ModelCallError("the generation engine was closed while this request ran")
            logits = batch.logits[:, : self.vocab_size]
            for slot in _mask_grammar_rows(logits, batch.rows):
                if not torch.isfinite(logits[slot]).any():
                    batch.rows[slot].fail(GrammarError(
                        "the grammar allows no next token; the schema may be unsatisfiable: "
                        "relax its bounds or patterns"))
                    logits[slot, 0] = 0.0  # any finite row: its sample is never used
            next_tokens = sample_tokens(
                logits, temperatures=[r.params.temperature for r in batch.rows],
                top_ps=[r.params.top_p for r in batch.rows],
                generators=[r.generator for r in batch.rows])
            for row, token in zip(batch.rows, next_tokens, strict=True):
                if row.error is None:
                    row.push(token, self.eos_ids)
            keep = [slot for slot, row in enumerate(batch.rows) if row.finish_reason is None]
            now = time.perf_counter()
            self.busy_s, clock = self.busy_s + now - clock, now
            for slot, row in enumerate(batch.rows):
                if row.error is not None:
                    row.request.future.set_exception(row.error)
                elif row.finish_reason is not None:
                    row.request.future.set_result(row.output(batch.prompt_tokens[slot]))
            if len(keep) < len(batch.rows):
                batch.select(keep, self.device)
                next_tokens = [next_tokens[s] for s in keep]
            if batch.rows:
                step = torch.tensor(next_tokens, dtype=torch.long, device=self.device)
                batch.step(self.model, step.unsqueeze(1))
            free = self.max_batch_size - len(batch.rows)
            if not self._joins.due(queued=self._queue.qsize(), free=free,
                                   running=len(batch.rows)):
                continue
            joining = self._waiting(free)
            if joining:
                self._running.extend(joining)
                if batch.rows:
                    self.stats["joined"] += len(joining)
                    self.stats["join_prefills"] += 1
                    batch = batch.merge(self._prefill(joining))
                else:
                    batch = self._prefill(joining)
                self.stats["max_rows"] = max(self.stats["max_rows"], len(batch.rows))
        self.busy_s += time.perf_counter() - clock


#: Engines whose worker is alive; closed at interpreter exit.
_OPEN_ENGINES: weakref.WeakSet[GenerationEngine] = weakref.WeakSet()


@atexit.register
def _close_open_engines() -> None:
    for engine in list(_OPEN_ENGINES):
        engine.close()
