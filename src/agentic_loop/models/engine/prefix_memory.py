"""The KV cache of recent prompt prefixes the engine computed, reused by later prefills.

Why: with continuous batching, requests join a running batch a few at a time, so
most prefills hold one or two prompts, and each recomputed the system prompt
every architecture sends first (about 35 of a typical 90-token prompt for the
embedded model). An agent is worse: it re-sends the whole conversation at
every step, so step k+1's prompt is step k's prompt plus the call and the tool
result, and concurrent episodes share their system prompt and tool
descriptions. The engine therefore keeps the keys and values of several recent
prefixes (the prompts it prefilled, and each finished row's prompt and
output), least recently used out once their bytes exceed a budget; a later
prefill copies the longest part its own prefix shares with one of them (at
least ``minimum`` tokens) and computes only the rest, as vLLM's automatic
prefix caching does for a whole server. A prefix that another remembered one
extends is dropped (the longer one serves every match it would), so an
episode holds one entry, its latest step. The memory is tied to the model's
weights: any in-place change to a parameter (a merged adapter, a loaded state
dict) makes it stale, and it is then recomputed rather than reused.

    >>> from transformers import LlamaConfig, LlamaForCausalLM
    >>> from agentic_loop.models.engine.decode_batch import new_cache
    >>> model = LlamaForCausalLM(LlamaConfig(
    ...     vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
    ...     num_attention_heads=2, num_key_value_heads=1)).eval()
    >>> memory, cpu = PrefixMemory(minimum=4), torch.device("cpu")
    >>> memory.fill(model, new_cache(model.config), tuple(range(10)), cpu)  # computed
    0
    >>> memory.fill(model, new_cache(model.config), (*range(6), 20, 21), cpu)  # 6 copied
    6
    >>> memory.fill(model, new_cache(model.config), (*range(10), 30, 31), cpu)  # 10 copied
    10
    >>> len(memory), memory.match((*range(6), 20, 21, 22))  # the first prefix was extended
    (2, 8)
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch

from agentic_loop.errors import ConfigError

__all__ = ["DEFAULT_PREFIX_BYTES", "PrefixMemory", "shared_length"]

#: 512 MiB: about 11,600 tokens of SmolLM2-135M's KV in float32 (30 layers, 3 KV heads of
#: 64: 46 KB a token; twice the tokens in bf16), the latest step of 16 concurrent
#: 700-token episodes.
DEFAULT_PREFIX_BYTES = 512 * 2**20

KV = list[tuple[torch.Tensor, torch.Tensor]]  # per layer (keys, values), [1, heads, n, dim]


def shared_length(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """How many leading tokens ``a`` and ``b`` share (slice comparisons, in C: a remembered
    prefix is compared with every prefill's prompt, and both run to thousands of tokens).

    >>> shared_length((1, 2, 3, 4), (1, 2, 9)), shared_length((1, 2), (1, 2, 3))
    (2, 2)
    """
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    low, high = 0, n  # a[:low] == b[:low] and a[:high] != b[:high]
    while high - low > 1:
        mid = (low + high) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid
    return low


def _weights(model: Any) -> tuple[tuple[int, int], ...]:
    """Each parameter's identity and in-place version counter: changes when weights do."""
    return tuple((id(p), p._version) for p in model.parameters())


class PrefixMemory:
    """Remembered prefixes (tokens and per-layer KV, batch 1), least recently used first.

    ``minimum``: the fewest shared tokens worth copying. ``budget_bytes``: the most KV
    bytes kept (a prefix larger than that alone is not kept). ``enabled=False``: nothing
    is remembered or copied (every prefill computes its whole prompt).
    """

    def __init__(self, minimum: int, budget_bytes: int = DEFAULT_PREFIX_BYTES,
                 enabled: bool = True) -> None:
        if budget_bytes < 0:
            raise ConfigError(f"prefix_cache_bytes={budget_bytes}: pass a byte count >= 0 "
                              "(0 keeps nothing)")
        self.minimum = minimum
        self.budget_bytes = budget_bytes
        self.enabled = enabled
        self._entries: OrderedDict[tuple[int, ...], KV] = OrderedDict()
        self._sizes: dict[tuple[int, ...], int] = {}
        self._weights: tuple[tuple[int, int], ...] = ()
        #: Entries dropped to stay under the budget.
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        """KV bytes held now."""
        return sum(self._sizes.values())

    def clear(self) -> None:
        self._entries.clear()
        self._sizes.clear()

    def _current(self, model: Any) -> tuple[tuple[int, int], ...]:
        """The weights' signature; forgets everything computed under other weights."""
        weights = _weights(model)
        if weights != self._weights:
            self.clear()
            self._weights = weights
        return weights

    def _best(self, tokens: tuple[int, ...]) -> tuple[int, tuple[int, ...] | None]:
        best, key = 0, None
        for remembered in self._entries:
            n = shared_length(remembered, tokens)
            if n > best:
                best, key = n, remembered
        return (best, key) if best >= self.minimum else (0, None)

    def match(self, tokens: tuple[int, ...]) -> int:
        """How many leading tokens of ``tokens`` a prefill would copy now (0 below
        ``minimum``); the weights are not checked, and nothing is marked used."""
        return self._best(tokens)[0] if self.enabled else 0

    def fill(self, model: Any, cache: Any, tokens: tuple[int, ...], device: torch.device) -> int:
        """Put the KV of ``tokens`` (positions 0..n-1, batch 1) into the empty ``cache``,
        copying the longest part a remembered prefix shares and computing the rest; then
        remember ``tokens`` (unless a layer keeps a sliding window rather than every
        position). Returns how many tokens were copied instead of computed."""
        reuse, key = 0, None
        if self.enabled:
            self._current(model)
            reuse, key = self._best(tokens)
        if key is not None:
            self._entries.move_to_end(key)
            for layer, (keys, values) in enumerate(self._entries[key]):
                cache.update(keys[..., :reuse, :], values[..., :reuse, :], layer)
        if reuse == len(tokens):
            return reuse
        ids = torch.tensor([tokens[reuse:]], dtype=torch.long, device=device)
        at = torch.arange(reuse, len(tokens), device=device)[None]
        seen = torch.ones((1, len(tokens)), dtype=torch.long, device=device)
        model(input_ids=ids, position_ids=at, attention_mask=seen, past_key_values=cache,
              use_cache=True, logits_to_keep=1)
        n = len(tokens)
        if self.enabled and all(layer.keys.shape[-2] == n for layer in cache.layers):
            self.remember(model, tokens, [(layer.keys[..., :n, :].clone(),
                                           layer.values[..., :n, :].clone())
                                          for layer in cache.layers])
        return reuse

    def remember(self, model: Any, tokens: tuple[int, ...], kv: KV) -> None:
        """Keep ``kv`` (per layer, batch 1, exactly ``len(tokens)`` positions, not shared
        with a live cache) as the KV of ``tokens`` under ``model``'s current weights."""
        if not self.enabled or len(tokens) < self.minimum:
            return
        self._current(model)
        for key in list(self._entries):
            if len(key) >= len(tokens) and key[: len(tokens)] == tokens:
                self._entries.move_to_end(key)  # already held, inside a longer prefix
                return
            if len(key) < len(tokens) and tokens[: len(key)] == key:
                self._drop(key)  # the new prefix extends it
        size = sum(k.nbytes + v.nbytes for k, v in kv)
        if size > self.budget_bytes:
            return
        self._entries[tokens], self._sizes[tokens] = kv, size
        while self.bytes > self.budget_bytes:
            self._drop(next(iter(self._entries)))
            self.evictions += 1

    def _drop(self, key: tuple[int, ...]) -> None:
        del self._entries[key]
        del self._sizes[key]
