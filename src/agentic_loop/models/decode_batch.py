"""The state of the rows an engine decodes together, and how rows join and leave it.

Why a module of its own: continuous batching is mostly bookkeeping on tensors
(a KV cache per layer, an attention mask, each row's last position, the next
logits), kept apart from the engine's threading and sampling so each can be
read alone. Rows are left-padded to the cache's width; a row that finishes is
dropped (``select``), a prefilled group joins (``merge``), and padding no row
uses any more is trimmed.

    >>> left_pad(torch.ones(2, 3, dtype=torch.long), 5).tolist()
    [[0, 0, 1, 1, 1], [0, 0, 1, 1, 1]]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from agentic_loop.models.engine import _Row as Row

__all__ = ["DecodeBatch", "common_prefix", "left_pad"]


@dataclass
class DecodeBatch:
    """The rows decoding together: their KV cache, attention mask, last positions and the
    logits of their next token. Rows are left-padded to the cache's width, so rows of any
    length can leave (``select``) or join (``merge``) between steps.
    """

    rows: list[Row]
    prompt_tokens: list[int]
    cache: Any  # transformers.DynamicCache
    attention: torch.Tensor  # [rows, width], 1 where a row has a real token
    positions: torch.Tensor  # [rows, 1], position of each row's last token
    logits: torch.Tensor  # [rows, vocab], float32 on the CPU

    def step(self, model: Any, tokens: torch.Tensor) -> None:
        """Feed one token per row; the logits become those of the token after it."""
        self.attention = torch.cat([self.attention, torch.ones_like(tokens)], dim=1)
        self.positions = self.positions + 1
        out = model(input_ids=tokens, attention_mask=self.attention, position_ids=self.positions,
                    past_key_values=self.cache, use_cache=True)
        self.logits = out.logits[:, -1, :].float().cpu()

    def select(self, slots: list[int], device: torch.device) -> None:
        """Keep only the rows at ``slots``, then drop the columns no kept row attends to."""
        if self.rows:
            self.rows = [self.rows[s] for s in slots]
            self.prompt_tokens = [self.prompt_tokens[s] for s in slots]
        if not slots:
            return
        index = torch.tensor(slots, dtype=torch.long, device=device)
        self.cache.batch_select_indices(index)
        self.attention = self.attention.index_select(0, index)
        self.positions = self.positions.index_select(0, index)
        self.logits = self.logits.index_select(0, index.cpu())
        unused = int(self.attention.any(dim=0).int().argmax())  # leading all-padding columns
        if unused > 0:
            self.attention = self.attention[:, unused:]
            for layer in self.cache.layers:
                layer.keys = layer.keys[:, :, unused:, :]
                layer.values = layer.values[:, :, unused:, :]

    def merge(self, other: DecodeBatch) -> DecodeBatch:
        """One batch of both: the narrower one is left-padded to the wider's width."""
        width = max(self.attention.shape[1], other.attention.shape[1])
        for a, b in zip(self.cache.layers, other.cache.layers, strict=True):
            a.keys = torch.cat([left_pad(a.keys, width), left_pad(b.keys, width)], dim=0)
            a.values = torch.cat([left_pad(a.values, width), left_pad(b.values, width)], dim=0)
        self.attention = torch.cat([left_pad(self.attention, width),
                                    left_pad(other.attention, width)], dim=0)
        self.positions = torch.cat([self.positions, other.positions], dim=0)
        self.logits = torch.cat([self.logits, other.logits], dim=0)
        self.rows += other.rows
        self.prompt_tokens += other.prompt_tokens
        return self


def common_prefix(prompts: Sequence[tuple[int, ...]]) -> int:
    """How many leading tokens all ``prompts`` share, leaving each at least one of its own.

    >>> common_prefix([(1, 2, 3, 4), (1, 2, 3, 5), (1, 2, 9)])
    2
    >>> common_prefix([(1, 2), (1, 2, 3)])  # one prompt is the other's prefix
    1
    """
    shortest = min(len(p) for p in prompts)
    n = 0
    while n < shortest - 1 and all(p[n] == prompts[0][n] for p in prompts):
        n += 1
    return n


def left_pad(t: torch.Tensor, width: int) -> torch.Tensor:
    """``t`` with zeros prepended on its sequence axis (last for masks, -2 for KV) to ``width``."""
    axis = 1 if t.dim() == 2 else -2
    missing = width - t.shape[axis]
    if missing <= 0:
        return t
    shape = list(t.shape)
    shape[axis] = missing
    return torch.cat([t.new_zeros(shape), t], dim=axis)
