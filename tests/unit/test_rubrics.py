"""Ready rubrics: checks carry the decisive weight; each scores real outputs correctly."""

from __future__ import annotations

import pytest

from agentic_loop.judges import (
    CLICHES,
    Rubric,
    code_rubric,
    copywriting_rubric,
    instruction_rubric,
    math_rubric,
)
from agentic_loop.judges.checks.text_measures import find_words

ALL_TRUE = {"on_brief": True, "concrete_imagery": True, "engaging": True}


def check_share(rubric: Rubric) -> float:
    total = sum(f.weight for f in rubric)
    return sum(f.weight for f in rubric.check_features) / total


def test_copywriting_checks_dominate() -> None:
    rubric = copywriting_rubric()
    assert check_share(rubric) > 0.5
    assert [f.name for f in rubric.llm_features] == ["on_brief", "concrete_imagery", "engaging"]
    assert [f.name for f in rubric.check_features] == ["word_count", "cliche_free"]


def test_copywriting_scores() -> None:
    rubric = copywriting_rubric(word_range=(4, 10))
    good = rubric.evaluate("Bakery tagline", "Warm rye waiting for you at dawn", ALL_TRUE)
    cliche = rubric.evaluate("Bakery tagline", "A game-changer for your morning toast", ALL_TRUE)
    long = rubric.evaluate("Bakery tagline", " ".join(["bread"] * 20), ALL_TRUE)
    assert good.score == 10.0 and good.passed
    assert cliche.values["cliche_free"] is False
    assert 'found "game-changer"' in cliche.failed_checks[0].hint
    assert long.values["word_count"] == 20 and long.score < good.score
    # an all-"yes" judge cannot lift a failing draft above a passing one with all "no"
    no_llm = {k: False for k in ALL_TRUE}
    assert rubric.evaluate("t", "Warm rye waiting for you at dawn", no_llm).score > cliche.score


def test_copywriting_custom_lexicon_and_saving() -> None:
    rubric = copywriting_rubric(cliches=["artisanal"])
    ev = rubric.evaluate("t", "Artisanal loaves for hungry neighbours", ALL_TRUE)
    assert ev.values["cliche_free"] is False
    assert Rubric.from_dict(rubric.to_dict()).to_dict() == rubric.to_dict()


def test_cliche_lexicon_entries_are_matchable_and_unique() -> None:
    assert len(CLICHES) == len(set(CLICHES)) >= 50
    for phrase in CLICHES:
        assert find_words(f"so {phrase} indeed", [phrase]) == [phrase], phrase


def test_instruction_rubric() -> None:
    rubric = instruction_rubric(exact_words=4, lowercase=True, ends_with="now")
    assert rubric.name == "instruction"
    assert rubric.evaluate("t", "read more books now").passed
    assert not rubric.evaluate("t", "Read more books now").passed
    with pytest.raises(ValueError, match="unknown constraint"):
        instruction_rubric(all_lower=True)


@pytest.mark.parametrize(
    ("answer", "output", "score"),
    [
        (2491, "53 x 47: 53*47 = 2,491", 10.0),
        (2491, "I believe it is 2490.", 0.0),
        (-3, "x = -3", 10.0),
        ("Canberra", "The capital is\nCanberra", 10.0),
    ],
)
def test_math_rubric(answer: object, output: str, score: float) -> None:
    assert math_rubric(answer).evaluate("q", output).score == score  # type: ignore[arg-type]


def test_code_rubric_partial_credit_and_failures() -> None:
    rubric = code_rubric(["assert is_even(2)", "assert not is_even(3)", "assert is_even(0)"],
                         timeout_s=2)
    right = "```python\ndef is_even(n):\n    return n % 2 == 0\n```"
    half = "```python\ndef is_even(n):\n    return n == 2\n```"
    loops = "```python\ndef is_even(n):\n    while True:\n        pass\n```"
    assert rubric.evaluate("t", right).score == 10.0
    assert rubric.evaluate("t", half).score == pytest.approx(6.666667)
    looping = rubric.evaluate("t", loops)
    assert looping.score == 0.0 and "timed out" in looping.features[0].detail
    assert Rubric.from_dict(rubric.to_dict()).constraints == rubric.constraints
