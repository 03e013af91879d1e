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
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

if TYPE_CHECKING:
    from agentic_loop.models.engine.requests import Row

__all__ = ["DecodeBatch", "SpareRoomLayer", "common_length", "common_prefix", "drop_leading",
           "left_pad", "new_cache"]


class SpareRoomLayer(DynamicLayer):
    """A KV cache layer that keeps room for the next tokens instead of re-concatenating.

    transformers' ``DynamicLayer`` appends each step's key and value with
    ``torch.cat``, copying the whole cache of every layer every step: on a 32-row
    batch of a 30-layer model that was about a third of a step's time. This layer
    writes into a buffer with ``spare`` free positions and hands out views of it
    (``keys`` is ``room[..., start:end, :]``). Rows leaving index the buffer once,
    trimming leading padding only moves ``start``; after anything else replaced
    ``keys``/``values`` (rows joining), the next update copies them once into a new
    buffer with room again.

        >>> layer = SpareRoomLayer()
        >>> k = torch.arange(6.0).reshape(1, 1, 3, 2)
        >>> layer.update(k, k)[0].shape, layer.update(k[:, :, :1], k[:, :, :1])[0].shape
        (torch.Size([1, 1, 3, 2]), torch.Size([1, 1, 4, 2]))
        >>> drop_leading(layer, 2); layer.keys[0, 0].tolist()
        [[4.0, 5.0], [0.0, 1.0]]
    """

    spare = 32
    _key_room: torch.Tensor
    _value_room: torch.Tensor
    _start = 0  # room[..., start:end, :] is what ``keys`` shows
    _end = 0
    _view: torch.Tensor | None = None  # the ``keys`` view last handed out

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        new = key_states.shape[-2]
        if not (self._in_room() and self._end + new <= self._key_room.shape[-2]):
            # first update, keys replaced, or the room is full: copy into a new room
            keys, values = self.keys, self.values
            assert keys is not None and values is not None  # set by lazy_initialization
            length = keys.shape[-2] if keys.dim() == 4 else 0
            shape = (*key_states.shape[:-2], length + new + self.spare, key_states.shape[-1])
            key_room, value_room = key_states.new_empty(shape), value_states.new_empty(shape)
            if length:
                key_room[..., :length, :] = keys
                value_room[..., :length, :] = values
            self._key_room, self._value_room = key_room, value_room
            self._start, self._end = 0, length
        self._key_room[..., self._end : self._end + new, :] = key_states
        self._value_room[..., self._end : self._end + new, :] = value_states
        self._end += new
        return self._show()

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep the rows at ``indices``: one copy of the room, which keeps its spare space."""
        if not self._in_room():
            super().batch_select_indices(indices)
            return
        self._key_room = self._key_room.index_select(0, indices)
        self._value_room = self._value_room.index_select(0, indices)
        self._show()

    def _in_room(self) -> bool:
        """Whether ``keys`` is still the view this layer handed out (nothing replaced it)."""
        return self.is_initialized and self.keys is self._view

    def _show(self) -> tuple[torch.Tensor, torch.Tensor]:
        self.keys = self._view = self._key_room[..., self._start : self._end, :]
        self.values = self._value_room[..., self._start : self._end, :]
        return self.keys, self.values


def drop_leading(layer: Any, n: int) -> None:
    """Forget a cache layer's first ``n`` positions (padding no row attends to any more):
    in place for a :class:`SpareRoomLayer` still showing its room, else by slicing."""
    if isinstance(layer, SpareRoomLayer) and layer._in_room():
        layer._start += n
        layer._show()
    else:
        layer.keys, layer.values = layer.keys[..., n:, :], layer.values[..., n:, :]


def new_cache(config: Any | None) -> DynamicCache:
    """A ``DynamicCache`` for ``config``'s model whose full-attention layers keep spare room
    (sliding-window layers stay as the config makes them). Without a config, every layer
    is a :class:`SpareRoomLayer`, made as the model first writes to it.

    >>> from transformers import LlamaConfig
    >>> type(new_cache(LlamaConfig(num_hidden_layers=2)).layers[0]).__name__
    'SpareRoomLayer'
    """
    if config is None:
        cache = DynamicCache()
        cache.layer_class_to_replicate = SpareRoomLayer
        return cache
    cache = DynamicCache(config=config)
    cache.layers = [SpareRoomLayer() if type(layer) is DynamicLayer else layer
                    for layer in cache.layers]
    return cache


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
                drop_leading(layer, unused)

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
    return min([shortest - 1, *(common_length(prompts[0], p) for p in prompts[1:])])


def common_length(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share.

    >>> common_length((1, 2, 3), (1, 2, 4, 5))
    2
    """
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
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
