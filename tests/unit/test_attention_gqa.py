"""``sdpa_gqa`` computes what transformers' ``sdpa`` does, on padded batches and cached steps."""

from __future__ import annotations

import torch

from agentic_loop.models.engine.attention import GQA_SDPA, use_gqa_sdpa
from agentic_loop.models.engine.decode_batch import new_cache


def _tiny(attn: str) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, initializer_range=0.5,
                         attn_implementation=attn)
    return LlamaForCausalLM(config).to(torch.float64).eval()


def _run(model: torch.nn.Module) -> list[torch.Tensor]:
    """A left-padded prefill, then three one-token steps on the cache: every step's logits."""
    ids = torch.randint(2, 64, (3, 7), generator=torch.Generator().manual_seed(1))
    attention = torch.ones(3, 7, dtype=torch.long)
    attention[0, :4], attention[1, :2] = 0, 0
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    cache = new_cache(model.config)
    logits = []
    with torch.inference_mode():
        out = model(input_ids=ids, attention_mask=attention, position_ids=positions,
                    past_key_values=cache, use_cache=True)
        logits.append(out.logits[attention.bool()])  # padding positions are don't-cares
        for _ in range(3):
            token = out.logits[:, -1:].argmax(-1)
            attention = torch.cat([attention, torch.ones_like(token)], dim=1)
            positions = positions[:, -1:] + 1
            out = model(input_ids=token, attention_mask=attention, position_ids=positions,
                        past_key_values=cache, use_cache=True)
            logits.append(out.logits)
    return logits


def test_gqa_sdpa_matches_sdpa_on_padded_prefill_and_steps() -> None:
    stock, ours = _tiny("sdpa"), _tiny("sdpa")
    assert use_gqa_sdpa(ours) and ours.config._attn_implementation == GQA_SDPA
    for a, b in zip(_run(stock), _run(ours), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_only_cpu_sdpa_models_switch() -> None:
    eager = _tiny("eager")
    assert not use_gqa_sdpa(eager)
    assert eager.config._attn_implementation == "eager"
