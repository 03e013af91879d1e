"""The critic and the spread report on the real embedded model (SmolLM2-135M)."""

from __future__ import annotations

from typing import Any

import pytest

from agentic_loop.judges import (
    Critic,
    Critique,
    LLMJudge,
    copywriting_rubric,
    spread_report,
)
from agentic_loop.judges.checks.lexicon import CLICHES
from agentic_loop.judges.checks.text_measures import find_words, word_count

pytestmark = pytest.mark.slow

TASK = "Write a tagline for an independent bookstore in 4 to 12 words."
CLEAN = "Quiet shelves, loud stories, and tea by the window"
CLICHED = "Unleash a game-changer reading experience that takes your mind to the next level"


@pytest.fixture(scope="module")
def judged(local_llm: Any) -> dict[str, Any]:
    """Three real drafts from the model plus two fixed ones, critiqued and graded once."""
    drafts = local_llm.batch([TASK] * 3, temperature=1.0, max_tokens=32)
    outputs = [d.content.strip() for d in drafts] + [CLEAN, CLICHED]
    rubric = copywriting_rubric(word_range=(4, 12))
    critiques = Critic(local_llm, rubric).batch([(TASK, o) for o in outputs])
    baseline = LLMJudge(local_llm).batch([(TASK, o) for o in outputs])
    return {"rubric": rubric, "outputs": outputs, "critiques": critiques, "baseline": baseline}


def test_critic_features_are_valid_every_time(judged: dict[str, Any]) -> None:
    rubric = judged["rubric"]
    for output, critique in zip(judged["outputs"], judged["critiques"], strict=True):
        assert isinstance(critique, Critique)
        assert critique.attempts == 1  # grammar-constrained decoding: valid on the first try
        assert list(critique.values) == list(rubric.names)
        for feature in rubric.llm_features:
            assert isinstance(critique.values[feature.name], bool)
        # the checks are Python's, whatever the model thinks
        assert critique.values["word_count"] == word_count(output)
        assert critique.values["cliche_free"] is (not find_words(output, CLICHES))
        assert critique.overall_score is not None and 1 <= critique.overall_score <= 10
        assert critique.critique is not None and len(critique.critique) <= 300
        assert 0.0 <= critique.score <= 10.0


def test_checks_decide_over_the_small_models_opinion(judged: dict[str, Any]) -> None:
    by_output = dict(zip(judged["outputs"], judged["critiques"], strict=True))
    clean, cliched = by_output[CLEAN], by_output[CLICHED]
    assert clean.passed and not cliched.passed
    assert clean.score > cliched.score  # whatever the LLM booleans said


def test_spread_report_on_real_outputs(judged: dict[str, Any]) -> None:
    report = spread_report(judged["critiques"], baseline=[j.score for j in judged["baseline"]])
    print("\n" + str(report))  # visible with `pytest -s`: the honest comparison
    assert report.n == 5
    assert report.checks_only is not None and report.checks_only.distinct >= 2
    assert report.composite.distinct >= 2
    assert report.llm_overall is not None and report.baseline is not None
    assert {f.name for f in report.features} == set(judged["rubric"].names)
    for spread in (report.composite, report.llm_overall, report.baseline):
        assert spread.min <= spread.mean <= spread.max
