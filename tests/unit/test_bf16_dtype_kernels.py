"""bf16 on the CPU: the two kernels that made a row's numbers depend on its batch, and the fix.

Real torch kernels at the embedded model's shapes (no model load): a lone row through
the MLP's down projection, and attention over left padding.
"""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from agentic_loop.models.cpu_caps import native_bf16
from agentic_loop.models.engine.attention import (
    GQA_SDPA,
    GQA_SDPA_WIDE,
    sdpa_gqa_attention,
    sdpa_gqa_wide_attention,
)
from agentic_loop.models.engine.invariance import make_batch_invariant, two_rows

#: bit-exact kernel claims hold on the CPUs whose default is bf16 (measured there); an
#: AVX2-only CPU emulates bf16 with other kernels and runs fp32 by default
native = pytest.mark.skipif(not native_bf16(), reason="this CPU has no native bf16")


@pytest.fixture(autouse=True)
def one_thread() -> object:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the engine's setting under load; kernels differ by threads
    yield None
    torch.set_num_threads(threads)


@native
@torch.inference_mode()
def test_a_lone_row_gets_the_numbers_it_gets_in_a_batch() -> None:
    torch.manual_seed(0)
    layer = torch.nn.Linear(1536, 576, bias=False).to(torch.bfloat16)  # the down projection
    rows = torch.randn(256, 1536).to(torch.bfloat16)
    batched = layer(rows.view(32, 8, 1536)).view(256, 576)
    assert two_rows(layer) == 1 and two_rows(layer) == 0  # once per layer
    alone = torch.cat([layer(rows[i : i + 1].view(1, 1, 1536)).view(1, 576) for i in range(256)])
    assert torch.equal(alone, batched)


@native
@torch.inference_mode()
def test_wide_attention_does_not_see_the_padding() -> None:
    """Prefill-shaped: causal attention over a prompt alone vs left-padded under a mask."""
    torch.manual_seed(0)
    module = torch.nn.Module()
    module.num_key_value_groups = 3  # type: ignore[assignment]
    flips = {GQA_SDPA: 0, GQA_SDPA_WIDE: 0}
    for length, pad in [(40, 7), (97, 31), (120, 3), (64, 64)]:
        q = torch.randn(1, 9, length, 64).to(torch.bfloat16)
        k, v = (torch.randn(1, 3, length, 64).to(torch.bfloat16) for _ in range(2))
        padded = [torch.cat([t.new_zeros(1, t.shape[1], pad, 64), t], dim=2) for t in (q, k, v)]
        width = pad + length
        real = torch.arange(width) >= pad
        mask = (torch.ones(width, width, dtype=torch.bool).tril() & real).view(1, 1, width, width)
        for name, attend in ((GQA_SDPA, sdpa_gqa_attention),
                             (GQA_SDPA_WIDE, sdpa_gqa_wide_attention)):
            alone = attend(module, q, k, v, None, is_causal=True)[0]
            beside = attend(module, *padded, mask)[0][:, pad:]
            assert beside.dtype is torch.bfloat16
            flips[name] += int((alone != beside).sum())
    assert flips[GQA_SDPA_WIDE] == 0, flips


def _tiny(dtype: torch.dtype) -> LlamaForCausalLM:
    """Random weights at SmolLM2-135M's widths (two layers)."""
    config = LlamaConfig(vocab_size=256, hidden_size=576, intermediate_size=1536,
                         num_hidden_layers=2, num_attention_heads=9, num_key_value_heads=3)
    config._attn_implementation = "sdpa"
    return LlamaForCausalLM(config).to(dtype).eval()


def test_only_bf16_and_fp16_models_on_the_cpu_are_changed() -> None:
    assert make_batch_invariant(_tiny(torch.float32)) is False
    model = _tiny(torch.bfloat16)
    assert make_batch_invariant(model) is True
    assert model.config._attn_implementation == GQA_SDPA_WIDE


def test_an_invariant_model_is_freed_when_its_last_reference_goes() -> None:
    """No reference cycle (a forward bound to its own layer): a released engine's weights
    go at once, not at the next full garbage collection."""
    import gc
    import weakref

    model = _tiny(torch.bfloat16)
    make_batch_invariant(model)
    layer = weakref.ref(model.model.layers[0].mlp.down_proj)
    gc.disable()
    try:
        del model
        assert layer() is None
    finally:
        gc.enable()


def next_logits(model: LlamaForCausalLM, prompts: list[torch.Tensor]) -> torch.Tensor:
    """Each prompt alone (all but its last token, then a cached step of one token) and
    together (left-padded, one pass): the logits after each prompt, alone then together."""
    alone = []
    for ids in prompts:
        cache = model(input_ids=ids[None, :-1], use_cache=True).past_key_values
        alone.append(model(input_ids=ids[None, -1:], past_key_values=cache,
                           position_ids=torch.tensor([[len(ids) - 1]])).logits[0, -1])
    width = max(len(ids) for ids in prompts)
    batch = torch.zeros(len(prompts), width, dtype=torch.long)
    seen = torch.zeros(len(prompts), width, dtype=torch.long)
    for i, ids in enumerate(prompts):
        batch[i, width - len(ids):], seen[i, width - len(ids):] = ids, 1
    positions = (seen.cumsum(-1) - 1).clamp(min=0)
    together = model(input_ids=batch, attention_mask=seen, position_ids=positions).logits[:, -1]
    return torch.stack([torch.stack(alone), together])


@native
@torch.inference_mode()
def test_an_invariant_model_answers_alone_as_in_a_padded_batch() -> None:
    torch.manual_seed(0)
    model = _tiny(torch.bfloat16)
    make_batch_invariant(model)
    prompts = [torch.randint(0, 256, (n,)) for n in (9, 23, 40, 17, 31, 12, 40, 5)]
    alone, together = next_logits(model, prompts)
    assert torch.equal(alone, together)
