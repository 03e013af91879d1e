"""A tiny random Llama and a tokenizer for the engine's tests (batching, prefix memory).

Float64 and sharp attention (``initializer_range=0.5``): context changes the tokens, and
padding can't flip an argmax, so greedy answers compare exactly across ways of decoding.
EOS is never chosen, so every row runs to its own budget and lengths stay varied.
"""

from __future__ import annotations

from typing import Any

import torch

VOCAB, EOS, PAD = 64, 0, 1


class DigitTokenizer:
    """A tokenizer for the engine's needs: token ``i`` decodes to ``chr(65 + i)``."""

    pad_token_id = PAD
    eos_token_id = EOS

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(65 + i) for i in ids if not (skip_special_tokens and i in (EOS, PAD)))


def tiny_llama(max_positions: int = 512) -> Any:
    """A 2-layer random Llama (grouped-query attention) that never emits EOS."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=max_positions, eos_token_id=EOS,
                         pad_token_id=PAD, initializer_range=0.5)
    model = LlamaForCausalLM(config).to(torch.float64).eval()
    with torch.no_grad():
        model.lm_head.weight[EOS].fill_(0.0)
    return model
