"""spread_report: statistics, checks-only row, LLM overall row, feature constancy, errors."""

from __future__ import annotations

import pytest

from agentic_loop.judges import Critic, Feature, Rubric, spread_report
from agentic_loop.judges.spread import Spread
from agentic_loop.testing import ScriptedChatModel


def test_spread_statistics() -> None:
    s = Spread.of([9, 9, 9, 7])
    assert (s.n, s.mean, s.min, s.max, s.distinct) == (4, 8.5, 7.0, 9.0, 2)
    assert s.std == pytest.approx(0.8660254)
    assert s.range == 2.0
    with pytest.raises(ValueError, match="empty"):
        Spread.of([])


def test_report_on_critiques_shows_flat_llm_and_spread_composite() -> None:
    rubric = Rubric.for_constraints(word_count=(3, 5), features=[Feature("vivid", "Imagery.")])
    fake = ScriptedChatModel(default_structured={"vivid": True, "critique": "ok",
                                                 "overall_score": 9})
    critic = Critic(fake, rubric)
    outputs = ["Warm rye at dawn", "Bread", "Fresh bread and warm rye for every hungry neighbour"]
    critiques = [critic.critique("t", o) for o in outputs]
    report = spread_report(critiques, baseline=[9, 9, 8])
    assert report.n == 3
    assert report.llm_overall is not None and report.llm_overall.distinct == 1
    assert report.llm_overall.std == 0.0
    assert report.composite.distinct == 3 and report.composite.std > 1.0
    assert report.checks_only is not None and report.checks_only.distinct == 3
    vivid = next(f for f in report.features if f.name == "vivid")
    assert (vivid.source, vivid.distinct, vivid.values) == ("llm", 1, ["True"])
    text = str(report)
    for label in ("composite", "checks only", "llm overall", "baseline", "vivid", "word_count"):
        assert label in text


def test_report_errors() -> None:
    r1 = Rubric.for_constraints(no_commas=True)
    r2 = Rubric.for_constraints(lowercase=True)
    with pytest.raises(ValueError, match="at least one"):
        spread_report([])
    with pytest.raises(ValueError, match="different features"):
        spread_report([r1.evaluate("t", "a"), r2.evaluate("t", "a")])
    with pytest.raises(ValueError, match="baseline has 2 scores for 1 items"):
        spread_report([r1.evaluate("t", "a")], baseline=[1, 2])
    with pytest.raises(TypeError, match="expected a Critique or Evaluation"):
        spread_report([3.0])  # type: ignore[list-item]
