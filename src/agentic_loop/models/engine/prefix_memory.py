"""The KV cache of the last prompt prefix the engine computed, reused by the next prefill.

Why: with continuous batching, requests join a running batch a few at a time, so
most prefills hold one or two prompts, and each recomputed the system prompt
every architecture sends first (about 35 of a typical 90-token prompt for the
embedded model). The engine keeps the keys and values of the last prefix it
computed; a later prefill copies the part its own prefix shares with it (at
least ``minimum`` tokens) and computes only the rest, as vLLM's automatic prefix
caching does for a whole server. The memory is tied to the model's weights:
any in-place change to a parameter (a merged adapter, a loaded state dict)
makes it stale, and it is then recomputed rather than reused.

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
"""

from __future__ import annotations

from typing import Any

import torch

from agentic_loop.models.engine.decode_batch import common_length

__all__ = ["PrefixMemory"]


class PrefixMemory:
    """One remembered prefix (its tokens and per-layer KV, batch 1) and how to reuse it."""

    def __init__(self, minimum: int) -> None:
        self.minimum = minimum
        self._tokens: tuple[int, ...] = ()
        self._kv: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._weights: tuple[tuple[int, int], ...] = ()

    def fill(self, model: Any, cache: Any, tokens: tuple[int, ...], device: torch.device) -> int:
        """Put the KV of ``tokens`` (positions 0..n-1, batch 1) into the empty ``cache``,
        copying what the remembered prefix shares and computing the rest; then remember
        ``tokens``. Returns how many tokens were copied instead of computed."""
        weights = tuple((id(p), p._version) for p in model.parameters())
        reuse = common_length(self._tokens, tokens) if weights == self._weights else 0
        if reuse < self.minimum:
            reuse = 0
        for layer, (keys, values) in enumerate(self._kv if reuse else []):
            cache.update(keys[..., :reuse, :], values[..., :reuse, :], layer)
        if reuse == len(tokens):
            return reuse
        ids = torch.tensor([tokens[reuse:]], dtype=torch.long, device=device)
        at = torch.arange(reuse, len(tokens), device=device)[None]
        seen = torch.ones((1, len(tokens)), dtype=torch.long, device=device)
        model(input_ids=ids, position_ids=at, attention_mask=seen, past_key_values=cache,
              use_cache=True, logits_to_keep=1)
        self._tokens, self._weights = tokens, weights
        self._kv = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
        return reuse
