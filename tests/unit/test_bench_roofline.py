"""The roofline's arithmetic and the decode profile's clock (bench/roofline.py,
bench/decode_profile.py): the pure parts, checked against hand-counted numbers."""

from __future__ import annotations

import time
from types import ModuleType

import pytest
from bench_helpers import load_bench


@pytest.fixture(scope="module")
def roofline() -> ModuleType:
    return load_bench("roofline")


@pytest.fixture(scope="module")
def decode_profile() -> ModuleType:
    return load_bench("decode_profile")


SMOLLM2_135M = {"hidden_size": 576, "intermediate_size": 1536, "vocab_size": 49152,
                "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3}


def test_the_shape_comes_from_a_real_llama_config(roofline: ModuleType) -> None:
    from transformers import LlamaConfig

    shape = roofline.ModelShape.from_config(LlamaConfig(**SMOLLM2_135M))
    assert (shape.head_dim, shape.kv_heads, shape.layers) == (64, 3, 30)
    names = [name for name, *_ in shape.linears()]
    assert names == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                     "down_proj", "lm_head"]


def test_matmul_parameters_match_the_real_models_linear_weights(roofline: ModuleType) -> None:
    """P counts every nn.Linear weight of a real (tiny) Llama, the tied LM head included."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(hidden_size=32, intermediate_size=48, vocab_size=101,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         tie_word_embeddings=True)
    model = LlamaForCausalLM(config)
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    assert roofline.ModelShape.from_config(config).matmul_params() == linear


def test_decode_flops_add_matmuls_and_attention_over_each_fed_tokens_context(
        roofline: ModuleType) -> None:
    shape = roofline.ModelShape.from_config(type("C", (), SMOLLM2_135M)())
    p = shape.matmul_params()
    assert p == 134_479_872  # 30 x 3,538,944 + 576 x 49,152
    # prompt 10, 4 tokens generated: 3 fed, at contexts 11, 12, 13
    flops, fed = roofline.decode_flops(shape, [(10, 4)])
    assert fed == 3
    assert flops == 3 * 2 * p + 4 * 30 * 576 * (11 + 12 + 13)
    two, fed_two = roofline.decode_flops(shape, [(10, 4), (10, 4), (7, 0)])
    assert (two, fed_two) == (2 * flops, 6)


def test_achieved_is_a_fraction_of_the_peak(roofline: ModuleType) -> None:
    assert roofline.achieved(3e9, 1.0, 12.0) == {"gflops": 3.0, "fraction_of_peak": 0.25}
    assert roofline.achieved(3e9, 0.0, 12.0)["gflops"] == 0.0


def test_the_clock_charges_exclusive_time_and_prefill_absorbs_what_it_calls(
        decode_profile: ModuleType) -> None:
    class Loop:
        def decode(self) -> None:
            time.sleep(0.01)
            self.prefill()
            self.step()

        def prefill(self) -> None:
            self.step()  # inside prefill: charged to prefill, not to the step

        def step(self) -> None:
            time.sleep(0.05)

    original = Loop.__dict__["step"]
    clock = decode_profile.StageClock(
        [(Loop, "decode", "loop overhead (Python)"), (Loop, "prefill", "prefill"),
         (Loop, "step", "sampling"), (Loop, "gone", "grammar masks")])
    with clock:
        Loop().decode()
    assert clock.calls["sampling"] == 1 and clock.calls["prefill"] == 1
    assert clock.seconds["sampling"] >= 0.05 and clock.seconds["prefill"] >= 0.05
    # exclusive: the loop's own 10 ms, not the 100 ms of what it called
    assert 0.01 <= clock.seconds["loop overhead (Python)"] < 0.05
    assert clock.missing == ["Loop.gone"]
    assert Loop.__dict__["step"] is original  # restored
    out = decode_profile.shares(clock.seconds)
    assert set(out["share"]) == {"sampling", "loop overhead (Python)"}
    assert abs(sum(out["share"].values()) - 1.0) < 0.01
    assert out["prefill_s"] >= 0.05


def test_the_clock_finds_every_engine_stage_it_names(decode_profile: ModuleType) -> None:
    """The labels are real engine functions: a rename there shows up here, not as a silent
    zero in the bench's table."""
    targets = decode_profile.engine_stages(None)
    labels = {label for _, _, label in targets}
    assert labels <= {*decode_profile.DECODE_STAGES, *decode_profile.ABSORBING}
    clock = decode_profile.StageClock(targets)
    with clock:
        pass
    assert clock.missing == []


def test_linear_layers_are_clocked_even_when_a_layer_replaced_its_forward(
        decode_profile: ModuleType) -> None:
    import torch

    plain, replaced = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)
    replaced.forward = lambda x: torch.nn.functional.linear(  # type: ignore[method-assign]
        x, replaced.weight, replaced.bias)
    original = torch.nn.functional.linear
    clock = decode_profile.StageClock(
        [(torch.nn.functional, "linear", "forward: linear layers")])
    with clock:
        plain(torch.ones(1, 4))
        replaced(torch.ones(1, 4))
    assert clock.calls["forward: linear layers"] == 2
    assert torch.nn.functional.linear is original
