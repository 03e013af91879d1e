"""Packed linear weights on the CPU: the same numbers in bf16, fresh after a weight
changes, out of the way of autograd and copies, and batch-invariant in fp32 from two rows."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from agentic_loop.models.engine.invariance import TwoRowLinear, make_batch_invariant
from agentic_loop.models.engine.packed_linear import (
    PackedLinear,
    can_pack,
    forget_packed,
    pack_linears,
)

pytestmark = pytest.mark.skipif(not torch.backends.mkldnn.is_available(),
                                reason="this torch build has no oneDNN")


def _layer(dtype: torch.dtype, n_in: int = 1536, n_out: int = 576) -> torch.nn.Linear:
    torch.manual_seed(0)
    layer = torch.nn.Linear(n_in, n_out).to(dtype)
    assert pack_linears(layer) == 1 and type(layer) is PackedLinear
    return layer


@torch.inference_mode()
def test_bf16_packed_outputs_are_those_of_f_linear_at_every_row_count() -> None:
    layer = _layer(torch.bfloat16)
    x = torch.randn(64, 1536, dtype=torch.bfloat16)
    for rows in (1, 2, 3, 8, 33, 64):
        expected = torch.nn.functional.linear(x[:rows], layer.weight, layer.bias)
        assert torch.equal(layer(x[:rows]), expected), rows
    strided = torch.randn(4, 7, 1536, dtype=torch.bfloat16)[:, 2:]  # not contiguous
    assert torch.equal(layer(strided), torch.nn.functional.linear(
        strided.contiguous(), layer.weight, layer.bias))


@torch.inference_mode()
def test_fp32_packed_rows_agree_alone_and_in_any_batch_from_two_rows() -> None:
    layer = _layer(torch.float32)
    x = torch.randn(40, 1536)
    together = layer(x)
    for rows in (2, 3, 7, 8, 17):
        assert torch.equal(layer(x[:rows]), together[:rows]), rows
    layer.__class__ = TwoRowLinear  # a lone row runs as two
    assert torch.equal(layer(x[:1]), together[:1])


def test_an_in_place_weight_change_repacks() -> None:
    layer = _layer(torch.bfloat16, 8, 4)
    x = torch.randn(2, 8, dtype=torch.bfloat16)
    with torch.inference_mode():
        before = layer(x)
    with torch.no_grad():
        layer.weight.mul_(2)  # a merged adapter, a loaded state dict
    with torch.inference_mode():
        after = layer(x)
    assert not torch.equal(before, after)
    assert torch.equal(after, torch.nn.functional.linear(x, layer.weight, layer.bias))


def test_a_write_through_data_needs_forget_packed() -> None:
    layer = _layer(torch.bfloat16, 8, 4)
    x = torch.randn(2, 8, dtype=torch.bfloat16)
    with torch.no_grad():
        layer(x)
        layer.weight.data += 1  # PEFT's default merge: no version counter moves
        assert forget_packed(layer) == 1
        assert torch.equal(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias))


def test_gradients_take_the_plain_path_and_flow() -> None:
    layer = _layer(torch.float32, 8, 4)
    x = torch.randn(3, 8, requires_grad=True)
    layer(x).sum().backward()
    assert layer.weight.grad is not None and x.grad is not None
    layer.weight.requires_grad_(False)  # a frozen weight with a trainable bias
    layer.bias.grad = None
    layer(torch.randn(3, 8)).sum().backward()
    assert layer.bias.grad is not None


def test_autocast_and_a_model_moved_to_another_dtype_take_f_linear() -> None:
    layer = _layer(torch.float32, 8, 4)
    x = torch.randn(2, 8)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert layer(x).dtype == torch.bfloat16
    layer.half()
    with torch.no_grad():
        assert layer(x.half()).dtype == torch.float16


def test_copies_and_state_dicts_are_those_of_a_plain_linear() -> None:
    layer = _layer(torch.bfloat16, 8, 4)
    with torch.no_grad():
        layer(torch.ones(2, 8, dtype=torch.bfloat16))  # packs
    twin = copy.deepcopy(layer)
    assert set(layer.state_dict()) == {"weight", "bias"}
    with torch.no_grad():
        twin.weight.zero_()
        assert torch.equal(twin(torch.ones(2, 8, dtype=torch.bfloat16)),
                           twin.bias.expand(2, 4))  # its own packing, not the original's
        assert not torch.equal(layer(torch.ones(2, 8, dtype=torch.bfloat16)),
                               layer.bias.expand(2, 4))


def test_only_plain_cpu_linears_of_packable_dtypes_are_packed() -> None:
    assert not can_pack(torch.zeros(4, 4, dtype=torch.float16))
    assert not can_pack(torch.zeros(4, dtype=torch.float32))

    class Adapter(torch.nn.Linear):  # a subclass keeps its own forward
        pass

    module = torch.nn.Sequential(torch.nn.Linear(4, 4), Adapter(4, 4),
                                 torch.nn.Linear(4, 4).to(torch.float16))
    assert pack_linears(module) == 1
    assert [type(m).__name__ for m in module] == ["PackedLinear", "Adapter", "Linear"]
    assert pack_linears(module) == 0  # idempotent


def test_a_packed_fp32_model_is_made_batch_invariant_and_an_unpacked_one_is_left() -> None:
    config = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2)
    plain, packed = LlamaForCausalLM(config).eval(), LlamaForCausalLM(config).eval()
    assert make_batch_invariant(plain) is False
    pack_linears(packed)
    assert make_batch_invariant(packed) is True
    assert isinstance(packed.lm_head, TwoRowLinear)
