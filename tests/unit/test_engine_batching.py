"""The decoding engine's continuous batching gives every request the answer it gets alone.

A tiny randomly initialised Llama in float64 (exact enough that padding can't flip an
argmax) decodes requests of different lengths and budgets three ways: one at a time,
all at once, and arriving while others run, so they join a batch mid-decode and leave
it as they finish. Greedy tokens must be identical in all three.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest
import torch
from engine_helpers import VOCAB, DigitTokenizer, tiny_llama

from agentic_loop.models.engine.engine import GenerationEngine, GenerationParams, GenerationRequest
from agentic_loop.models.errors import ModelCallError


@pytest.fixture(scope="module")
def tiny_model() -> Any:
    return tiny_llama(max_positions=256)


def _prompts() -> list[tuple[list[int], int]]:
    gen = torch.Generator().manual_seed(1)
    out = []
    for n, budget in [(3, 12), (17, 5), (9, 20), (30, 8), (5, 16), (12, 3), (24, 10)]:
        out.append(([int(t) for t in torch.randint(2, VOCAB, (n,), generator=gen)], budget))
    return out


def _request(prompt: list[int], budget: int) -> GenerationRequest:
    params = GenerationParams(max_tokens=budget, temperature=0.0)
    return GenerationRequest(prompt_ids=prompt, params=params)


def test_joining_and_leaving_rows_decode_what_they_would_alone(tiny_model: Any) -> None:
    tokenizer = DigitTokenizer()
    prompts = _prompts()
    solo = GenerationEngine(tiny_model, tokenizer, max_batch_size=1, shared_prefix_min=10**9)
    alone = [solo.submit(_request(p, b)).result().text for p, b in prompts]
    assert [len(t) for t in alone] == [b for _, b in prompts]  # each ran to its own budget

    together = GenerationEngine(tiny_model, tokenizer, max_batch_size=8)
    assert [f.result().text for f in [together.submit(_request(p, b)) for p, b in prompts]] \
        == alone

    # Staggered: a long request starts alone; the others arrive while it decodes, so they
    # are prefilled and merged into its batch, at most 4 rows at a time, and leave as they
    # finish, which frees slots for the rest.
    staggered = GenerationEngine(tiny_model, tokenizer, max_batch_size=4, batch_window_s=0.0)
    first = staggered.submit(_request([7, 8, 9, 10], 120))
    while staggered.stats["requests"] == 0:
        time.sleep(0.0005)
    futures = [staggered.submit(_request(p, b)) for p, b in prompts]
    assert [f.result(timeout=60).text for f in futures] == alone
    assert first.result(timeout=60).text == solo.submit(_request([7, 8, 9, 10], 120)).result().text
    assert staggered.stats["batches"] == 1 and staggered.stats["joined"] == len(prompts)
    assert staggered.stats["max_rows"] == 4  # never more rows than the cap


def test_a_request_joining_mid_decode_finishes_before_the_long_one(tiny_model: Any) -> None:
    engine = GenerationEngine(tiny_model, DigitTokenizer(), max_batch_size=4)
    long = engine.submit(_request([5, 6, 7], 200))
    while engine.stats["requests"] == 0:  # the long request is decoding now
        time.sleep(0.001)
    short = engine.submit(_request([9] * 40, 2))
    assert short.result(timeout=60).completion_tokens == 2
    assert not long.done()  # the short one did not wait for the long one
    metered = engine.busy_s  # counted up to the short answer, though the engine is still busy
    assert metered > 0
    assert long.result(timeout=60).completion_tokens == 200
    assert engine.stats["batches"] == 1  # one busy period served both
    assert engine.busy_s > metered
    assert engine.stats["max_rows"] == 2


def test_arrivals_mid_decode_join_in_one_prefill(tiny_model: Any) -> None:
    # Three requests arrive one at a time while a long one decodes: with join_min=3 and
    # no deadline they wait for each other and join in one prefill, each with its solo answer.
    prompts = _prompts()[:3]
    solo = GenerationEngine(tiny_model, DigitTokenizer(), max_batch_size=1, shared_prefix_min=10**9)
    alone = [solo.submit(_request(p, b)).result().text for p, b in prompts]
    engine = GenerationEngine(tiny_model, DigitTokenizer(), max_batch_size=8, join_min=3,
                              join_wait_steps=10**9)
    long = engine.submit(_request([5, 6, 7], 2000))
    while engine.stats["requests"] == 0:
        time.sleep(0.001)
    futures = []
    for p, b in prompts:
        futures.append(engine.submit(_request(p, b)))
        time.sleep(0.02)  # each arrives some steps after the one before
    assert [f.result(timeout=60).text for f in futures] == alone
    assert not long.done()
    assert engine.stats["joined"] == 3 and engine.stats["join_prefills"] == 1
    engine.close()

    # join_min=1 takes each arrival at the next step: three prefills.
    eager = GenerationEngine(tiny_model, DigitTokenizer(), max_batch_size=8, join_min=1)
    long = eager.submit(_request([5, 6, 7], 2000))
    while eager.stats["requests"] == 0:
        time.sleep(0.001)
    for p, b in prompts:
        eager.submit(_request(p, b)).result(timeout=60)
    assert eager.stats["join_prefills"] == 3
    eager.close()


def test_join_settings_below_one_are_refused(tiny_model: Any) -> None:
    from agentic_loop.errors import ConfigError

    with pytest.raises(ConfigError, match="join_min=0"):
        GenerationEngine(tiny_model, DigitTokenizer(), join_min=0)


def test_shared_prefixes_and_repeated_prompts_are_computed_once(tiny_model: Any) -> None:
    # A 20-token "system prompt" every request starts with, distinct tails, and one prompt
    # asked three times (best-of-n): computed once each, yet every answer is its solo answer.
    gen = torch.Generator().manual_seed(2)
    system = [int(t) for t in torch.randint(2, VOCAB, (20,), generator=gen)]
    tails = [[int(t) for t in torch.randint(2, VOCAB, (n,), generator=gen)] for n in (1, 7, 15)]
    prompts = [system + tails[1], system + tails[0], system + tails[1], system + tails[2],
               system + tails[1], system]
    solo = GenerationEngine(tiny_model, DigitTokenizer(), max_batch_size=1, shared_prefix_min=10**9)
    alone = [solo.submit(_request(p, 9)).result().text for p in prompts]
    calls: list[tuple[int, ...]] = []
    engine = GenerationEngine(_Recorder(tiny_model, calls), DigitTokenizer(), max_batch_size=8,
                              batch_window_s=0.2)
    assert [f.result(timeout=60).text for f in [engine.submit(_request(p, 9)) for p in prompts]] \
        == alone
    prefill = [shape for shape in calls if shape[1] > 1]
    # the system prompt once (minus the token the bare one keeps), then the 4 distinct tails
    assert prefill == [(1, 19), (4, 16)]


def test_a_later_prefill_copies_the_prefix_it_shares_with_the_last_one(tiny_model: Any) -> None:
    gen = torch.Generator().manual_seed(4)
    system = [int(t) for t in torch.randint(2, VOCAB, (20,), generator=gen)]
    first = system + [2, *(int(t) for t in torch.randint(2, VOCAB, (5,), generator=gen))]
    second = system + [3, *(int(t) for t in torch.randint(2, VOCAB, (8,), generator=gen))]
    model = copy.deepcopy(tiny_model)
    reference = GenerationEngine(model, DigitTokenizer(), max_batch_size=1,
                                 shared_prefix_min=10**9)  # never shares: the plain path
    alone = [reference.submit(_request(p, 9)).result().text for p in (first, second)]
    calls: list[tuple[int, ...]] = []
    engine = GenerationEngine(_Recorder(model, calls), DigitTokenizer(), max_batch_size=1)
    assert engine.submit(_request(first, 9)).result(timeout=60).text == alone[0]
    calls.clear()
    assert engine.submit(_request(second, 9)).result(timeout=60).text == alone[1]
    assert engine.stats["reused_prefix_tokens"] == 20  # the system prompt was copied
    assert [shape for shape in calls if shape[1] > 1] == [(1, 8)]  # second[20:-1] computed

    # Weights changed in place: the remembered prefix is stale and is recomputed.
    with torch.no_grad():
        model.model.layers[0].mlp.up_proj.weight.mul_(1.5)
    changed = reference.submit(_request(second, 9)).result().text
    assert changed != alone[1]  # the change matters to this prompt's answer
    assert engine.submit(_request(second, 9)).result(timeout=60).text == changed
    assert engine.stats["reused_prefix_tokens"] == 20


class _Recorder(torch.nn.Module):
    """The model, recording the shape of every ``input_ids`` it is called with."""

    def __init__(self, model: Any, calls: list[tuple[int, ...]]) -> None:
        super().__init__()
        self.model, self.calls = model, calls
        self.generation_config = model.generation_config

    def get_output_embeddings(self) -> Any:
        return self.model.get_output_embeddings()

    def forward(self, **kwargs: Any) -> Any:
        self.calls.append(tuple(kwargs["input_ids"].shape))
        return self.model(**kwargs)


def test_closing_fails_running_and_queued_requests_and_refuses_new_ones(tiny_model: Any) -> None:
    engine = GenerationEngine(tiny_model, DigitTokenizer(), max_batch_size=1)
    running = engine.submit(_request([5, 6, 7], 200))
    while engine.stats["requests"] == 0:
        time.sleep(0.0005)
    queued = engine.submit(_request([8, 9], 4))
    engine.close()
    assert not engine._worker.is_alive()
    for future in (running, queued):
        with pytest.raises(ModelCallError, match="closed"):
            future.result(timeout=10)
    with pytest.raises(ModelCallError, match="closed; load the model again"):
        engine.submit(_request([1, 2], 3))
