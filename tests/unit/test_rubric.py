"""Features, rubrics and evaluations: validation, scoring, determinism, explanation, saving."""

from __future__ import annotations

import json
import random

import pytest

from agentic_loop.judges import CheckResult, Evaluation, Feature, Rubric
from agentic_loop.judges.checks.constraint_features import CONSTRAINT_KEYWORDS

# -- Feature ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [("bad name", "bad_name"), ("1st", "f_1st"), ("class", "f_class"), ("", "my_feature"),
     ("on-brief?", "on_brief")],
)
def test_feature_names_must_be_identifiers(name: str, suggestion: str) -> None:
    with pytest.raises(ValueError, match=f"not a valid Python identifier.*e.g. '{suggestion}'"):
        Feature(name, "desc", 1.0)


@pytest.mark.parametrize("name", ["critique", "overall_score"])
def test_feature_names_reserved_for_the_critic(name: str) -> None:
    with pytest.raises(ValueError, match="reserved"):
        Feature(name, "desc", 1.0)


def test_feature_private_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="may not start with '_'"):
        Feature("_hidden", "desc")


@pytest.mark.parametrize("weight", [-1, float("nan"), float("inf"), "2", True])
def test_feature_weight_must_be_a_finite_non_negative_number(weight: object) -> None:
    with pytest.raises(ValueError, match="weight must be"):
        Feature("ok", "desc", weight)  # type: ignore[arg-type]


def test_feature_kind_and_target_rules() -> None:
    with pytest.raises(ValueError, match="needs target"):
        Feature("n", "count it", kind="count")
    with pytest.raises(ValueError, match="takes no target"):
        Feature("b", "yes or no", kind="bool", target=(0, 1))
    with pytest.raises(ValueError, match="target max must be"):
        Feature("n", "count it", target=(3, 1))
    with pytest.raises(ValueError, match="kind must be"):
        Feature("n", "x", kind="float")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="description must be"):
        Feature("n", "   ")
    with pytest.raises(TypeError, match="check must be a callable"):
        Feature("n", "x", check=42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="check 'len' is not a registered check name"):
        Feature("n", "x", check="len")  # a string is a reference (judges/check_refs.py)
    assert Feature("n", "x", target=[1, None]).target == (1, None)


def test_count_credit_is_graded_relative_to_the_missed_bound() -> None:
    f = Feature("words", "10 to 12 words", target=(10, 12))
    assert [f.credit(n) for n in (0, 5, 10, 12, 15, 24, 30)] == [0.0, 0.5, 1.0, 1.0, 0.75, 0.0, 0.0]
    none = Feature("cliches", "No clichés", target=(0, 0))
    assert [none.credit(n) for n in (0, 1, 2)] == [1.0, 0.0, 0.0]
    at_least = Feature("n", "at least 4", target=(4, None))
    assert [at_least.credit(n) for n in (2, 4, 400)] == [0.5, 1.0, 1.0]


def test_feature_values_are_type_checked() -> None:
    b = Feature("ok", "fine?")
    with pytest.raises(TypeError, match="bool feature"):
        b.credit(1)
    c = Feature("n", "how many", target=(0, 3))
    with pytest.raises(TypeError, match="count feature"):
        c.credit(True)
    with pytest.raises(TypeError, match="count feature"):
        c.credit(-1)


def test_broken_or_mistyped_checks_fail_loudly() -> None:
    boom = Feature("boom", "explodes", check=lambda t, o: 1 / 0)
    with pytest.raises(RuntimeError, match="check of feature 'boom' raised ZeroDivisionError"):
        boom.run_check("t", "o")
    counts_without_target = Feature("n", "counts", check=lambda t, o: len(o))
    with pytest.raises(TypeError, match="bool feature"):
        counts_without_target.run_check("t", "abc")
    with pytest.raises(TypeError, match="judged by the LLM"):
        Feature("llm", "asks the model").run_check("t", "o")


def test_check_receives_task_and_output() -> None:
    seen: list[tuple[str, str]] = []

    def check(task: str, output: str) -> CheckResult:
        seen.append((task, output))
        return CheckResult(output.startswith(task), "prefix test")

    f = Feature("echo", "Output repeats the task.", check=check)
    assert f.run_check("ab", "abc") == CheckResult(True, "prefix test")
    assert seen == [("ab", "abc")]


# -- Rubric construction ---------------------------------------------------


def test_rubric_validation() -> None:
    with pytest.raises(ValueError, match="has no features"):
        Rubric([])
    with pytest.raises(ValueError, match=r"duplicate feature names \['a'\]"):
        Rubric([Feature("a", "x"), Feature("a", "y")])
    with pytest.raises(ValueError, match="all weights are zero"):
        Rubric([Feature("a", "x", 0), Feature("b", "y", 0.0)])
    with pytest.raises(TypeError, match="every item must be a Feature"):
        Rubric([Feature("a", "x"), "b"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="list of Feature"):
        Rubric(Feature("a", "x"))  # type: ignore[arg-type]


def test_for_constraints_rejects_unknown_and_empty() -> None:
    with pytest.raises(ValueError,
                       match="unknown constraint 'max_words'; valid keywords: word_count"):
        Rubric.for_constraints(max_words=10)
    with pytest.raises(ValueError, match="at least one constraint"):
        Rubric.for_constraints()
    with pytest.raises(ValueError, match="at least one constraint"):
        Rubric.for_constraints(lowercase=False, json=None)


def test_for_constraints_with_extra_features_and_clash() -> None:
    vivid = Feature("vivid", "Concrete imagery.")
    rubric = Rubric.for_constraints(word_count=(10, 12), features=[vivid])
    assert rubric.names == ("word_count", "vivid")
    assert [f.source for f in rubric] == ["check", "llm"]
    with pytest.raises(ValueError, match="duplicate feature names"):
        Rubric.for_constraints(no_commas=True, features=[Feature("no_commas", "dup")])


def test_rubric_introspection() -> None:
    rubric = Rubric.for_constraints(exact_words=3, features=[Feature("vivid", "Imagery.")])
    assert [f.name for f in rubric.check_features] == ["exact_words"]
    assert [f.name for f in rubric.llm_features] == ["vivid"]
    assert rubric["vivid"].source == "llm"
    with pytest.raises(KeyError, match="has no feature 'nope'"):
        rubric["nope"]
    assert len(rubric) == 2
    assert "exact_words[check:count]" in repr(rubric)


# -- scoring ---------------------------------------------------------------


def test_score_is_weighted_share_of_credit() -> None:
    rubric = Rubric([
        Feature("a", "a", 3.0, check=lambda t, o: True),
        Feature("b", "b", 1.0),
        Feature("n", "n", 0.0, target=(0, 0)),  # zero weight: shown, never counted
    ])
    assert rubric.score({"a": True, "b": True, "n": 5}) == 10.0
    assert rubric.score({"a": True, "b": False, "n": 0}) == 7.5
    assert rubric.score({"a": False, "b": True, "n": 0}) == 2.5
    assert rubric.score({"a": False, "b": False, "n": 0}) == 0.0


def test_score_rejects_missing_or_extra_values() -> None:
    rubric = Rubric.for_constraints(exact_words=3, no_commas=True)
    with pytest.raises(ValueError, match=r"missing \['no_commas'\], unexpected \['typo'\]"):
        rubric.score({"exact_words": 3, "typo": True})


def test_score_is_deterministic_and_order_free() -> None:
    features = [Feature(f"f{i}", f"feature {i}", w)
                for i, w in enumerate([0.3, 1.7, 2.0, 0.1, 5.5])]
    rubric = Rubric(features)
    rng = random.Random(7)
    for _ in range(50):
        values = {f.name: rng.random() < 0.5 for f in features}
        shuffled = dict(sorted(values.items(), key=lambda kv: rng.random()))
        first = rubric.score(values)
        assert all(rubric.score(values) == first for _ in range(3))
        assert rubric.score(shuffled) == first
        assert 0.0 <= first <= 10.0


def test_evaluate_is_deterministic() -> None:
    rubric = Rubric.for_constraints(word_count=(5, 8), exclude_words=["we"], no_commas=True,
                                    sentence_count=(1, 2), answer=12)
    output = "We sold 12 books, then 3 more. Great day!"
    first = rubric.evaluate("task", output)
    for _ in range(5):
        again = rubric.evaluate("task", output)
        assert again == first
        assert again.model_dump_json() == first.model_dump_json()


# -- evaluation ------------------------------------------------------------


def test_evaluate_checks_only_needs_no_llm_values() -> None:
    rubric = Rubric.for_constraints(word_count=(10, 12), exclude_words=["we", "our"])
    ev = rubric.evaluate("Write a tagline.",
                         "Stories for every reader, shelves for every curious mind")
    assert ev.values == {"word_count": 9, "exclude_words": True}
    assert ev.score == pytest.approx(9.5)
    assert ev.passed is False
    assert [c.name for c in ev.failed_checks] == ["word_count"]
    assert ev.failed_checks[0].hint == "Use between 10 and 12 words. (9 words)"


def test_evaluate_needs_llm_values_for_llm_features() -> None:
    rubric = Rubric.for_constraints(exact_words=2, features=[Feature("vivid", "Imagery.")])
    with pytest.raises(ValueError, match=r"has LLM features \['vivid'\].*Critic"):
        rubric.evaluate("t", "two words")
    with pytest.raises(ValueError, match="computed in Python; they are never taken from the LLM"):
        rubric.evaluate("t", "two words", llm_values={"vivid": True, "exact_words": 2})
    with pytest.raises(TypeError, match="bool feature"):
        rubric.evaluate("t", "two words", llm_values={"vivid": "yes"})
    ev = rubric.evaluate("t", "two words", llm_values={"vivid": False})
    assert ev.score == 5.0
    assert ev.passed is True  # only check features decide `passed`


def test_evaluate_rejects_non_string_output() -> None:
    with pytest.raises(TypeError, match="output must be a string, got NoneType"):
        Rubric.for_constraints(no_commas=True).evaluate("t", None)  # type: ignore[arg-type]


def test_points_sum_to_the_score_and_explain_lists_every_feature() -> None:
    rubric = Rubric.for_constraints(word_count=(3, 5), no_commas=True, answer=7,
                                    features=[Feature("clear", "Clear.", 2.0)])
    ev = rubric.evaluate("t", "It is 7, clearly 7 and more words", llm_values={"clear": True})
    assert sum(f.points for f in ev.features) == pytest.approx(ev.score)
    assert sum(f.max_points for f in ev.features) == pytest.approx(10.0)
    text = ev.explain()
    for name in rubric.names:
        assert name in text
    assert "score " + f"{ev.score:.2f}/10" in text
    assert "has commas" in text
    assert "1 check(s) failed" not in text  # two failed: word_count and no_commas
    assert "2 check(s) failed" in text


def test_evaluation_round_trips_through_json() -> None:
    rubric = Rubric.for_constraints(exact_words=2, features=[Feature("n", "claims", target=(0, 1))])
    ev = rubric.evaluate("t", "two words", llm_values={"n": 3})
    data = json.loads(ev.model_dump_json())
    assert data["values"] == {"exact_words": 2, "n": 3}
    assert data["passed"] is True
    assert Evaluation.model_validate(data) == ev  # derived fields in a dump are ignored on load
    assert Evaluation.model_validate_json(ev.model_dump_json()).explain() == ev.explain()


def test_feedback_lists_only_failed_checks() -> None:
    rubric = Rubric.for_constraints(lowercase=True, exclude_words=["we"])
    assert rubric.evaluate("t", "all good here").feedback == ""
    feedback = rubric.evaluate("t", "We Shout").feedback
    assert feedback.splitlines() == [
        "Fix these requirements:",
        "- Write in lowercase only, with no capital letters. (has capital letters or no letters)",
        '- Do not use the words "we". (found "we")',
    ]


# -- saving ----------------------------------------------------------------


def test_constraint_rubric_round_trips_through_json() -> None:
    constraints = {
        "word_count": [10, 12], "exact_words": 11, "sentence_count": [1, None],
        "include_words": ["book"], "exclude_words": ["we", "our"], "regex": r"\bbooks?\b",
        "json": {"type": "object"}, "lowercase": True, "uppercase": True, "no_commas": True,
        "bullet_count": [0, 3], "starts_with": "Read", "ends_with": "now.",
        "answer": {"value": 3.5, "tolerance": 0.1}, "python_tests": ["assert True"],
        "paragraph_count": {"count": [3, 3], "separator": "***"},
        "paragraph_first_word": {"index": 2, "word": "Then"}, "title": True,
        "postscript": "P.S.", "quoted": True, "highlight_count": [2, None],
        "section_count": {"count": [3, 3], "marker": "SECTION"}, "capital_word_count": [0, 3],
        "word_frequency": {"word": "book", "count": [2, None]},
        "letter_frequency": {"letter": "q", "count": [1, None]}, "placeholder_count": [2, None],
        "first_word": "Read", "repeat_request": "Write a tagline.", "two_responses": True,
        "language": "en", "check": "operator:contains",
        "tool_called": {"name": "calculator", "args": {"expression": "53*47"}},
        "no_tool_errors": True, "max_steps": 5, "max_tool_calls": 3,
        "verified_with": {"tool": "run_tests", "contains": "passed"},
        "restates_tool_result": "calculator",
    }
    assert set(constraints) == set(CONSTRAINT_KEYWORDS)
    rubric = Rubric.for_constraints(
        name="everything", version="2", features=[Feature("n_claims", "Claims.", 2, target=(0, 2))],
        **constraints,
    )
    saved = json.loads(json.dumps(rubric.to_dict()))
    loaded = Rubric.from_dict(saved)
    assert loaded.to_dict() == rubric.to_dict()
    assert (loaded.name, loaded.version, loaded.names) == ("everything", "2", rubric.names)
    assert loaded.constraints == constraints
    output = "read 11 books now."
    assert loaded.evaluate("t", output, {"n_claims": 1}) == rubric.evaluate(
        "t", output, {"n_claims": 1})


def test_rubric_from_task_file_record() -> None:
    record = json.loads(
        '{"task": "Tagline", "constraints": {"word_count": [3, 6], "no_commas": true}}')
    rubric = Rubric.for_constraints(**record["constraints"])
    assert rubric.evaluate(record["task"], "Stories for curious minds").passed


def test_lambda_checks_cannot_be_saved() -> None:
    rubric = Rubric([Feature("mine", "Mine.", check=lambda t, o: True)])
    with pytest.raises(ValueError, match="'mine': its check .*lambda and cannot be saved"):
        rubric.to_dict()


def test_from_dict_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="'features' list"):
        Rubric.from_dict({"name": "x"})
    with pytest.raises(ValueError, match=r"unknown keys \['colour'\]"):
        Rubric.from_dict({"features": [], "colour": "red"})
    with pytest.raises(ValueError, match=r"unknown keys \['wieght'\]"):
        Rubric.from_dict({"features": [{"name": "a", "description": "x", "wieght": 2}]})
    with pytest.raises(ValueError, match="unknown constraint 'wordcount'"):
        Rubric.from_dict({"features": [{"name": "a", "constraint": "wordcount", "value": [1, 2]}]})


def test_description_override_is_saved() -> None:
    from agentic_loop.judges import constraint_feature

    rubric = Rubric([constraint_feature("exclude_words", ["meh"], name="no_meh",
                                        description="Be enthusiastic.")])
    saved = rubric.to_dict()
    assert saved["features"][0]["description"] == "Be enthusiastic."
    assert Rubric.from_dict(saved)["no_meh"].description == "Be enthusiastic."
    plain = Rubric.for_constraints(no_commas=True).to_dict()
    assert "description" not in plain["features"][0]


def test_describe_renders_instructions() -> None:
    rubric = Rubric.for_constraints(word_count=(10, 12), exclude_words=["we"], starts_with="Read")
    assert rubric.describe() == (
        '- Use between 10 and 12 words.\n- Do not use the words "we".\n- Start with "Read".'
    )
