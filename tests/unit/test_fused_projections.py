"""Sibling projections computed as one product: bit-identical to the layers alone, for a
whole model too; out of the way of gradients, other inputs, weight changes and threads."""

from __future__ import annotations

import copy
import gc
import weakref
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

import agentic_loop.models.engine.fused_projections as fused
from agentic_loop.models.engine.fused_projections import UNSHARED_LIMIT, fuse_projections
from agentic_loop.models.engine.invariance import make_batch_invariant
from agentic_loop.models.engine.packed_linear import (
    GROUPS,
    can_pack,
    forget_packed,
    pack_linears,
    packed_product,
)

pytestmark = pytest.mark.skipif(not torch.backends.mkldnn.is_available(),
                                reason="this torch build has no oneDNN")

DTYPES = [torch.float32, pytest.param(torch.bfloat16, marks=pytest.mark.skipif(
    not can_pack(torch.zeros(2, 2, dtype=torch.bfloat16)), reason="no oneDNN bf16 kernels"))]


def _block(dtype: torch.dtype, widths: tuple[int, ...], n_in: int = 576,
           bias: bool = False) -> torch.nn.Module:
    torch.manual_seed(0)
    block = torch.nn.Module()
    names = ("q_proj", "k_proj", "v_proj") if len(widths) == 3 else ("gate_proj", "up_proj")
    for name, width in zip(names, widths, strict=True):
        setattr(block, name, torch.nn.Linear(n_in, width, bias=bias).to(dtype))
    pack_linears(block)
    return block


def _llama(dtype: torch.dtype) -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=160,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    model = LlamaForCausalLM(config).to(dtype).eval()
    pack_linears(model)
    make_batch_invariant(model)
    return model


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("widths", [(576, 192, 192), (1536, 1536)])
@torch.inference_mode()
def test_the_stacked_product_is_bit_identical_to_each_layer_alone(
        dtype: torch.dtype, widths: tuple[int, ...]) -> None:
    block = _block(dtype, widths)
    layers = list(block.children())
    assert fuse_projections(block) == 1
    for rows in (1, 2, 3, 8, 17, 32, 64, 200):
        x = torch.randn(rows, 1, 576, dtype=dtype)
        together = [layer(x) for layer in layers]  # the first computes all, the rest take
        assert _one_product(together), rows
        assert all(torch.equal(got, layer.product(x))
                   for got, layer in zip(together, layers, strict=True)), rows


def _one_product(outputs: list[torch.Tensor]) -> bool:
    """Whether the outputs are columns of one product (views of one storage)."""
    return len({o.untyped_storage().data_ptr() for o in outputs}) == 1


def _stacked_calls(model: torch.nn.Module, ids: torch.Tensor,
                   monkeypatch: pytest.MonkeyPatch) -> int:
    calls: list[int] = []

    def counting(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None
                 ) -> torch.Tensor:
        calls.append(x.shape[0])
        return packed_product(x, packed, bias)

    monkeypatch.setattr(fused, "packed_product", counting)
    with torch.no_grad():
        model(ids)
    monkeypatch.undo()
    return len(calls)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_fused_model_gives_the_logits_of_the_same_model_unfused(
        dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = _llama(dtype)
    model = copy.deepcopy(plain)
    assert fuse_projections(model) == 4 and fuse_projections(model) == 0  # 2 per block, once
    for rows in (1, 3):
        ids = torch.randint(0, 96, (rows, 7))
        with torch.inference_mode():
            assert torch.equal(model(ids).logits, plain(ids).logits), rows
        assert _stacked_calls(model, ids, monkeypatch) == 4  # every group stacked


def test_biases_are_stacked_too() -> None:
    block = _block(torch.float32, (8, 4, 4), n_in=8, bias=True)
    layers = list(block.children())
    fuse_projections(block)
    x = torch.randn(3, 8)
    with torch.no_grad():
        together = [layer(x) for layer in layers]
        assert _one_product(together)
        assert all(torch.equal(t, layer.product(x)) for t, layer in zip(together, layers,
                                                                         strict=True))


def test_another_input_or_another_order_computes_alone() -> None:
    block = _block(torch.float32, (8, 4, 4), n_in=8)
    fuse_projections(block)
    x, y = torch.randn(2, 8), torch.randn(2, 8)
    with torch.no_grad():
        block.q_proj(x)
        assert torch.equal(block.k_proj(y), block.k_proj.product(y))  # not x's columns
        assert torch.equal(block.v_proj(x), block.v_proj.product(x))
        assert torch.equal(block.v_proj(x), block.v_proj.product(x))  # taken once, then alone


def test_gradients_take_each_layer_alone_and_flow() -> None:
    block = _block(torch.float32, (8, 4, 4), n_in=8)
    fuse_projections(block)
    x = torch.randn(3, 8, requires_grad=True)
    sum(layer(x).sum() for layer in block.children()).backward()
    assert x.grad is not None and all(p.grad is not None for p in block.parameters())


def test_a_changed_weight_repacks_the_stacked_weight() -> None:
    block = _block(torch.float32, (8, 4, 4), n_in=8)
    fuse_projections(block)
    x = torch.randn(2, 8)
    with torch.no_grad():
        before = [layer(x) for layer in block.children()]
        block.v_proj.weight.mul_(2)  # the version counter moves
        after = [layer(x) for layer in block.children()]
        assert torch.equal(after[0], before[0]) and not torch.equal(after[2], before[2])
        assert torch.equal(after[2], block.v_proj.product(x))
        block.k_proj.weight.data += 1  # no counter moves: forget_packed is the way
        forget_packed(block)
        assert torch.equal(block.q_proj(x), before[0])
        assert torch.equal(block.k_proj(x), block.k_proj.product(x))


def test_a_lone_row_is_computed_as_two_when_the_layers_ask() -> None:
    model = _llama(torch.float32)
    fuse_projections(model)
    attention = model.model.layers[0].self_attn
    x = torch.randn(1, 1, 64)
    calls: list[int] = []
    import agentic_loop.models.engine.fused_projections as fused

    def counting(rows: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None
                 ) -> torch.Tensor:
        calls.append(rows.shape[0])
        return packed_product(rows, packed, bias)

    original, fused.packed_product = fused.packed_product, counting
    try:
        with torch.no_grad():
            attention.q_proj(x)
    finally:
        fused.packed_product = original
    assert calls == [2]  # the row twice, one result kept


def test_threads_keep_their_own_pending_columns() -> None:
    block = _block(torch.float32, (64, 32, 32), n_in=64)
    fuse_projections(block)
    inputs = [torch.randn(4, 64) for _ in range(2)]
    expected = [[layer.product(x) for layer in block.children()] for x in inputs]

    def run(i: int) -> int:
        stacked = 0
        with torch.no_grad():
            for _ in range(200):
                got = [layer(inputs[i]) for layer in block.children()]
                assert all(torch.equal(a, b) for a, b in zip(got, expected[i], strict=True))
                stacked += _one_product(got)
        return stacked

    with ThreadPoolExecutor(2) as pool:  # .result() raises what a thread raised
        assert [f.result() for f in [pool.submit(run, i) for i in range(2)]] == [200, 200]


def test_siblings_fed_other_inputs_stop_stacking() -> None:
    block = _block(torch.float32, (8, 4, 4), n_in=8)  # cross-attention: k, v read memory
    fuse_projections(block)
    memory = torch.randn(5, 8)
    with torch.no_grad():
        for _ in range(UNSHARED_LIMIT + 2):
            x = torch.randn(2, 8)
            q, k = block.q_proj(x), block.k_proj(memory)
            assert torch.equal(k, block.k_proj.product(memory))
        assert q.shape == (2, 8) and q.is_contiguous()  # q alone now: its own product


def test_a_pre_hook_makes_the_layers_compute_alone() -> None:
    block = _block(torch.float32, (8, 4, 4), n_in=8)
    fuse_projections(block)
    block.k_proj.register_forward_pre_hook(lambda module, args: (args[0] * 2,))
    x = torch.randn(2, 8)
    with torch.no_grad():
        block.q_proj(x)
        assert torch.equal(block.k_proj(x), block.k_proj.product(x * 2))


def test_siblings_whose_stacked_bits_differ_here_are_not_grouped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    block = _block(torch.float32, (8, 4, 4), n_in=8)
    monkeypatch.setattr(fused, "packed_product",
                        lambda x, packed, bias: packed_product(x, packed, bias) + 1e-6)
    assert fuse_projections(block) == 0 and block.q_proj not in GROUPS


def test_half_precision_layers_that_cannot_pack_are_not_grouped() -> None:
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=96, hidden_size=64, intermediate_size=160, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2)).to(torch.float16).eval()
    make_batch_invariant(model)  # fp16 linears become two-row layers, never packed
    assert fuse_projections(model) == 0


def test_a_released_model_leaves_its_groups() -> None:
    model = _llama(torch.float32)
    fuse_projections(model)
    with torch.no_grad():
        model(torch.randint(0, 96, (2, 5)))
    layer = weakref.ref(model.model.layers[0].self_attn.q_proj)
    gc.collect()
    before = len(GROUPS)
    del model
    gc.collect()
    assert layer() is None and len(GROUPS) == before - 10  # 5 fused layers a block


@pytest.mark.skipif(not can_pack(torch.zeros(2, 2, dtype=torch.bfloat16)),
                    reason="no oneDNN bf16 kernels")
def test_a_model_moved_to_another_dtype_repacks() -> None:
    block = _block(torch.float32, (8, 4, 4), n_in=8)
    fuse_projections(block)
    x = torch.randn(2, 8)
    with torch.no_grad():
        block.q_proj(x)
        block.to(torch.bfloat16)  # .to() keeps each parameter and its version counter
        got = [layer(x.bfloat16()) for layer in block.children()]
        assert all(torch.equal(g, layer.product(x.bfloat16()))
                   for g, layer in zip(got, block.children(), strict=True))
