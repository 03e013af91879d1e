"""The batched token sampler: right distribution, exact nucleus, seeds independent of the batch."""

from __future__ import annotations

import pytest
import torch

from agentic_loop.models.engine.token_sampling import NUCLEUS_CANDIDATES, nucleus, sample_tokens


def _draw(logits: torch.Tensor, temperature: float, top_p: float, n: int) -> list[int]:
    rows = logits.expand(n, -1).contiguous()
    return sample_tokens(rows, temperatures=[temperature] * n, top_ps=[top_p] * n,
                         generators=[None] * n)


def test_draws_follow_the_tempered_softmax() -> None:
    torch.manual_seed(0)
    logits = torch.log(torch.tensor([[1.0, 2.0, 3.0, 4.0]]))
    n = 20_000
    counts = torch.bincount(torch.tensor(_draw(logits, 1.0, 1.0, n)), minlength=4).float()
    expected = torch.tensor([0.1, 0.2, 0.3, 0.4]) * n
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 16.3  # chi-square, 3 degrees of freedom, p = 0.001
    # temperature 0.5 squares the odds: 1:4:9:16
    counts = torch.bincount(torch.tensor(_draw(logits, 0.5, 1.0, n)), minlength=4).float()
    assert abs(float(counts[3] / n) - 16 / 30) < 0.02


def test_greedy_rows_take_the_argmax_and_forbidden_tokens_never_come() -> None:
    logits = torch.tensor([[0.0, 5.0, 1.0], [9.0, float("-inf"), 8.0]])
    assert sample_tokens(logits, temperatures=[0.0, 0.0], top_ps=[1.0, 1.0],
                         generators=[None, None]) == [1, 0]
    torch.manual_seed(1)
    only_two = torch.tensor([[float("-inf"), 0.0, float("-inf")]])
    assert set(_draw(only_two, 1.0, 1.0, 500)) == {1}
    assert set(_draw(only_two, 1.0, 0.5, 500)) == {1}


def test_nucleus_matches_a_full_sort_on_peaked_and_flat_rows() -> None:
    torch.manual_seed(2)
    vocab = 1000
    peaked = torch.softmax(torch.randn(3, vocab) * 8, dim=-1)  # nucleus among the top 64
    flat = torch.softmax(torch.randn(3, vocab) * 0.1, dim=-1)  # nucleus of hundreds of tokens
    probs = torch.cat([peaked, flat])
    top_p = torch.tensor([0.9, 0.5, 1.0, 0.9, 0.5, 1.0])
    got = nucleus(probs, top_p)
    for row in range(probs.shape[0]):
        vals, order = probs[row].sort(descending=True)
        before = vals.cumsum(0) - vals
        size = int((before < top_p[row]).sum()) if top_p[row] < 1 else vocab
        want = set(order[:size].tolist())
        assert set(got[row].nonzero().squeeze(1).tolist()) == want
        assert torch.equal(got[row][list(want)], probs[row][list(want)])
    assert int((got[3] > 0).sum()) > NUCLEUS_CANDIDATES  # the flat row took a wider tier


def test_a_seeded_row_draws_the_same_whatever_shares_its_batch() -> None:
    logits = torch.randn(1, 300, generator=torch.Generator().manual_seed(3))

    def seeded(at: int, companions: int) -> int:
        others = torch.randn(companions, 300)
        rows = torch.cat([others[:at], logits, others[at:]])
        gens: list[torch.Generator | None] = [None] * (companions + 1)
        gens[at] = torch.Generator().manual_seed(42)
        return sample_tokens(rows, temperatures=[1.0] * (companions + 1),
                             top_ps=[0.95] * (companions + 1), generators=gens)[at]

    assert seeded(0, 0) == seeded(1, 3) == seeded(7, 7)
    assert len({seeded(0, 0) for _ in range(3)}) == 1


@pytest.mark.parametrize("u", [0.0, 1 - 1e-7])
def test_the_edges_of_the_uniform_pick_a_token_with_mass(u: float) -> None:
    from agentic_loop.models.engine.token_sampling import _inverse_cdf

    probs = torch.tensor([[0.0, 0.5, 0.0, 0.5, 0.0]])
    pick = int(_inverse_cdf(probs, torch.tensor([u]))[0])
    assert probs[0, pick] > 0


def _whole_vocabulary_draw(logits: torch.Tensor, temperature: float, top_p: float,
                           u: float) -> int:
    """The draw written out over the whole vocabulary: the nucleus by a full sort, every
    other token 0, then the first token whose running sum (vocabulary order) exceeds u."""
    probs = torch.softmax(logits / temperature, dim=-1)
    vals, _ = probs.sort(descending=True)
    size = max(int(((vals.cumsum(0) - vals) < top_p).sum()), 1)
    kept = probs * (probs >= vals[size - 1])  # every token as likely as the least kept one
    cdf = kept.cumsum(0)
    return int(torch.searchsorted(cdf, torch.tensor([u]) * cdf[-1], side="right")[0])


def test_a_tie_running_past_a_tier_sends_the_row_to_the_next_tier() -> None:
    probs = torch.full((1, 1000), 1e-6)
    probs[0, 500] = 0.5
    probs[0, 100:200] = 0.004  # 100 tokens tied at the edge, past the first tier's 64
    probs /= probs.sum()
    kept = nucleus(probs, torch.tensor([0.6]))
    assert int((kept > 0).sum()) == 101  # the top token and every tied one
    gen = [torch.Generator().manual_seed(s) for s in range(200)]
    draws = {sample_tokens(probs.log(), temperatures=[1.0], top_ps=[0.6], generators=[g])[0]
             for g in gen}
    assert draws <= set(kept[0].nonzero().squeeze(1).tolist()) and len(draws) > 20


def test_a_top_p_of_nan_draws_from_every_token() -> None:
    probs = torch.tensor([[0.0, 1.0, 0.0]])
    assert sample_tokens(probs.log(), temperatures=[1.0], top_ps=[float("nan")],
                         generators=[torch.Generator().manual_seed(0)]) == [1]


def test_tokens_tied_at_the_edge_of_the_nucleus_are_all_kept() -> None:
    probs = torch.tensor([[0.4, 0.1, 0.2, 0.1, 0.1, 0.1]])
    kept = nucleus(probs, torch.tensor([0.65]))  # 0.4 + 0.2 + one 0.1 reach it: all 0.1s stay
    assert torch.equal(kept, probs)
    assert torch.equal(nucleus(probs, torch.tensor([0.5])), probs * (probs >= 0.2))


def test_drawing_among_the_candidates_picks_what_the_whole_vocabulary_would() -> None:
    gen = torch.Generator().manual_seed(5)
    rows, vocab = 48, 5000
    scale = torch.rand(rows, 1, generator=gen) * 12  # from flat to sharply peaked rows
    logits = torch.randn(rows, vocab, generator=gen) * scale
    temperatures = [0.3 + 1.2 * float(t) for t in torch.rand(rows, generator=gen)]
    top_ps = [float(p) for p in torch.rand(rows, generator=gen)]
    top_ps[:4] = [1.0, 0.999, 0.5, 0.95]
    logits[4], top_ps[4] = 0.0, 0.99  # a flat row: its nucleus is wider than every tier
    seeds = [torch.Generator().manual_seed(100 + i) for i in range(rows)]
    got = sample_tokens(logits, temperatures=temperatures, top_ps=top_ps,
                        generators=seeds)  # type: ignore[arg-type]
    want = [_whole_vocabulary_draw(logits[i], temperatures[i], top_ps[i],
                                   float(torch.rand((), generator=torch.Generator()
                                                    .manual_seed(100 + i))))
            for i in range(rows)]
    assert got == want
