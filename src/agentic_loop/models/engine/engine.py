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
:mod:`~agentic_loop.models.engine.join_policy`). Callers just submit and wait;
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
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import torch

from agentic_loop.errors import ConfigError
from agentic_loop.models.engine.decode_batch import DecodeBatch, common_prefix, new_cache
from agentic_loop.models.engine.grammar import Grammar
from agentic_loop.models.engine.join_policy import JoinPolicy
from agentic_loop.models.engine.prefix_memory import DEFAULT_PREFIX_BYTES, PrefixMemory
from agentic_loop.models.engine.requests import (
    GenerationOutput,
    GenerationParams,
    GenerationRequest,
    Row,
    mask_grammar_rows,
)
from agentic_loop.models.engine.token_sampling import sample_tokens
from agentic_loop.models.errors import GrammarError, ModelCallError

logger = logging.getLogger(__name__)

__all__ = ["GenerationEngine", "GenerationOutput", "GenerationParams", "GenerationRequest"]


class GenerationEngine:
    """Owns a model and a worker thread that decodes submitted requests in batches.

    ``max_batch_size`` caps rows decoded together; ``batch_window_s`` is how
    long the worker waits for companions after the first request arrives when
    it is idle. While it decodes, requests that arrive join the running batch
    between steps (continuous batching), so a loop's second-round request
    never waits for another request's long answer to finish.
    ``shared_prefix_min``: the shortest prompt prefix worth computing once for a
    prefill group, or copying from a remembered one (see ``_prefill``).
    ``join_min`` / ``join_wait_steps``: how arrivals mid-decode join (:class:`JoinPolicy`).
    ``prefix_cache``: reuse prompt prefixes (remembered ones, and a group's shared one);
    False computes every prompt token (a baseline for benches). ``prefix_cache_bytes``:
    the KV bytes :class:`PrefixMemory` may keep (least recently used out).
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
        prefix_cache: bool = True,
        prefix_cache_bytes: int = DEFAULT_PREFIX_BYTES,
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
        self._retiring = False  # set by ``retire``: close once idle
        self._gate = threading.Lock()  # a submit never lands in a queue the worker has left
        #: Busy periods, requests, the widest batch, requests that joined a running batch
        #: and the prefills that took them in (``join_prefills``): to verify batching.
        #: Prompt tokens whose KV was copied from a remembered prefix; prompt tokens of the
        #: requests prefilled (``prompt_tokens_sent``) and those the model computed for them
        #: (``prompt_tokens_computed``: shared prefixes and repeated prompts count once).
        self.stats = {"batches": 0, "requests": 0, "max_rows": 0, "joined": 0,
                      "join_prefills": 0, "reused_prefix_tokens": 0,
                      "prompt_tokens_sent": 0, "prompt_tokens_computed": 0}
        self.prefix_memory = PrefixMemory(minimum=shared_prefix_min,
                                          budget_bytes=prefix_cache_bytes, enabled=prefix_cache)
        #: Seconds spent decoding (prefills and steps), counted before each step's answers
        #: are handed out: the difference over a stretch of work is that work's compute,
        #: even when the engine never goes idle in between.
        self.busy_s = 0.0
        #: The part of ``busy_s`` spent prefilling prompts (what prefix reuse saves).
        self.prefill_s = 0.0
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
        with self._gate:
            if self._closed.is_set():
                raise ModelCallError("this generation engine is closed; load the model again")
            self._queue.put(request)
        return request.future

    @property
    def closed(self) -> bool:
        """True once the worker stopped (``close``, or ``retire`` and idle): submit refuses."""
        return self._closed.is_set()

    def retire(self) -> None:
        """Close once every request submitted so far is answered; submits meanwhile are
        served too. How a registry's old version frees its weights without failing a call
        that is still running on it (``release_engine`` in :mod:`.local`).
        """
        self._retiring = True
        self._queue.put(None)  # wake an idle worker

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
            if self._retiring:
                with self._gate:
                    if self._queue.empty():
                        self._closed.set()
                        _OPEN_ENGINES.discard(self)
                        break
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

    @property
    def prefix_cache(self) -> bool:
        """Whether prompt prefixes are reused (remembered ones, and a group's shared one)."""
        return self.prefix_memory.enabled

    def _prefill(self, requests: list[GenerationRequest]) -> DecodeBatch:
        """Run the prompts of ``requests`` and return their decoding state.

        Work that several prompts share is done once: identical prompts (best-of-n's
        samples) are computed once and their state copied, and a prefix every distinct
        prompt starts with (all but the last token of a lone prompt), when it is at least
        ``shared_prefix_min`` tokens, is computed once and its KV cache broadcast; the
        part of it a remembered prefix shares (the system prompt, an agent's previous
        step) is copied from :class:`PrefixMemory` instead of computed. The rest of each
        prompt is left-padded after that prefix, so a row's attention mask reads
        ``prefix, padding, its own tokens``. When remembered prefixes cover the distinct
        prompts better than their shared one does (concurrent agent episodes, each at its
        own step), each prompt is prefilled alone from its own best match and the rows
        are merged.
        """
        started = time.perf_counter()
        prompts = [tuple(r.prompt_ids) for r in requests]
        unique = list(dict.fromkeys(prompts))
        self.stats["prompt_tokens_sent"] += sum(len(p) for p in prompts)
        if len(unique) > 1 and self._alone_is_cheaper(unique):
            parts = [self._prefill_group([r for r in requests if tuple(r.prompt_ids) == p])
                     for p in unique]
            batch = parts[0]
            for part in parts[1:]:
                batch = batch.merge(part)
        else:
            batch = self._prefill_group(requests)
        self.prefill_s += time.perf_counter() - started
        return batch

    def _alone_is_cheaper(self, unique: list[tuple[int, ...]]) -> bool:
        """Whether prefilling each distinct prompt alone from its best remembered prefix
        computes fewer positions (padding included, and a few per extra forward pass)
        than one padded forward after their shared prefix."""
        memory = self.prefix_memory
        if not memory.enabled or not len(memory):
            return False
        shared = common_prefix(unique)
        shared = shared if shared >= self.shared_prefix_min else 0
        group = (shared - memory.match(unique[0][:shared]) if shared else 0) \
            + len(unique) * max(len(p) - shared for p in unique)
        alone = sum(len(p) - memory.match(p[:-1]) + _PASS_COST for p in unique)
        return alone < group

    def _prefill_group(self, requests: list[GenerationRequest]) -> DecodeBatch:
        """``_prefill`` of ``requests`` in one padded forward pass after their shared prefix."""
        prompts = [tuple(r.prompt_ids) for r in requests]
        unique = list(dict.fromkeys(prompts))
        shared = common_prefix(unique) if len(unique) > 1 else len(unique[0]) - 1
        if shared < self.shared_prefix_min or not self.prefix_cache:
            shared = 0
        cache = new_cache(getattr(self.model, "config", None))
        reused = 0
        if shared:
            reused = self.prefix_memory.fill(self.model, cache, unique[0][:shared], self.device)
            self.stats["reused_prefix_tokens"] += reused
            if len(unique) > 1:
                cache.batch_repeat_interleave(len(unique))
        self.stats["prompt_tokens_computed"] += shared - reused + sum(
            len(p) - shared for p in unique)
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
        batch.rows = [Row(r, self.tokenizer) for r in requests]
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
            for slot in mask_grammar_rows(logits, batch.rows):
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
                    self._remember(batch, slot)
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
            joining = self._admissible(self._queued(free))  # no waiting for more
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

    def _remember(self, batch: DecodeBatch, slot: int) -> None:
        """Keep the KV of a finished row's prompt and the output tokens fed so far: an
        agent's next step, or a conversation's next turn, starts with them."""
        width = batch.attention.shape[1]
        if not self.prefix_cache or any(layer.keys.shape[-2] != width
                                        for layer in batch.cache.layers):
            return  # off, or a layer keeps a window, not every position
        columns = batch.attention[slot].nonzero().squeeze(1)  # the row's tokens, in order
        fed = len(columns) - batch.prompt_tokens[slot]
        row = batch.rows[slot]
        tokens = (*row.request.prompt_ids, *row.ids[:fed])
        try:
            self.prefix_memory.remember(self.model, tokens, [
                (layer.keys[slot : slot + 1].index_select(-2, columns),
                 layer.values[slot : slot + 1].index_select(-2, columns))
                for layer in batch.cache.layers])
        except (RuntimeError, IndexError):  # a cache layout we do not know: answers go on
            logger.warning("could not remember a finished row's prefix", exc_info=True)


#: A forward pass's fixed cost, in prompt positions, when choosing how to prefill: a pass
#: reads every weight however few positions it computes. Measured (SmolLM2-135M, bf16, 2
#: threads): a one-token pass 41 ms, a 32-prompt prefill 1.3 ms a position; at 8, 32
#: remembered chat prompts were prefilled alone in 1.3 s instead of together in 0.45 s.
_PASS_COST = 32

#: Engines whose worker is alive; closed at interpreter exit.
_OPEN_ENGINES: weakref.WeakSet[GenerationEngine] = weakref.WeakSet()


@atexit.register
def _close_open_engines() -> None:
    for engine in list(_OPEN_ENGINES):
        engine.close()
