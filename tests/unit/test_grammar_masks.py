"""The batched grammar mask (llguidance bitmasks filled in place, applied to many logits rows
at once) allows exactly the tokens the matcher allows, row by row, and leaves free rows alone.

Uses the embedded model's tokenizer only (no weights are loaded)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pydantic import BaseModel, Field

from agentic_loop.models.engine.grammar import (
    JsonGrammar,
    allocate_token_masks,
    apply_token_masks,
    constrained_json_schema,
    fill_token_mask,
)

torch = pytest.importorskip("torch")


class Verdict(BaseModel):
    ok: bool
    why: str = Field(max_length=12)


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from agentic_loop.models.embedded import ensure_converted

    return AutoTokenizer.from_pretrained(str(ensure_converted()))


def reference_allowed(matcher, vocab: int) -> np.ndarray:
    """The old per-row numpy unpacking of ``compute_bitmask``."""
    bits = np.frombuffer(matcher.compute_bitmask(), dtype=np.uint8)
    allowed = np.zeros(vocab, dtype=bool)
    unpacked = np.unpackbits(bits, bitorder="little")[:vocab].astype(bool)
    allowed[: unpacked.shape[0]] = unpacked
    return allowed


def test_batched_masks_match_each_matcher_and_spare_free_rows(tokenizer):
    vocab = len(tokenizer) + 64  # a model output layer wider than the tokenizer
    grammar = JsonGrammar(constrained_json_schema(Verdict), tokenizer, vocab)
    fresh, advanced = grammar.matcher(), grammar.matcher()
    for token in tokenizer.encode('{"ok":true,"why":"', add_special_tokens=False):
        assert advanced.consume_token(token)
    logits = torch.randn(3, vocab)
    free_before = logits[1].clone()
    bitmask = allocate_token_masks(3, grammar.mask_vocab_size)
    fill_token_mask(fresh, bitmask, 0)
    fill_token_mask(advanced, bitmask, 2)
    apply_token_masks(logits, bitmask, [0, 2])
    assert torch.equal(logits[1], free_before)
    for row, matcher in ((0, fresh), (2, advanced)):
        expected = reference_allowed(matcher, vocab)
        got = torch.isfinite(logits[row]).numpy()
        assert (got == expected).all()
        assert 0 < got.sum() < vocab
        assert not got[grammar.mask_vocab_size :].any()  # past the tokenizer: never allowed
    assert torch.equal(grammar.allowed_mask(advanced), torch.from_numpy(
        reference_allowed(advanced, vocab)))


def test_greedy_decoding_under_the_mask_yields_valid_json(tokenizer):
    """Walk the grammar with random logits, always taking the best allowed token."""
    vocab = len(tokenizer)
    grammar = JsonGrammar(constrained_json_schema(Verdict), tokenizer, vocab)
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        matcher, ids = grammar.matcher(), []
        bitmask = allocate_token_masks(1, grammar.mask_vocab_size)
        while not matcher.is_stopped() and len(ids) < 60:
            logits = torch.randn(1, vocab, generator=gen)
            fill_token_mask(matcher, bitmask, 0)
            apply_token_masks(logits, bitmask, [0])
            token = int(torch.argmax(logits[0]))
            if token == tokenizer.eos_token_id:
                break
            assert matcher.consume_token(token)
            ids.append(token)
        assert matcher.is_accepting()
        Verdict.model_validate(json.loads(tokenizer.decode(ids)))
