"""Every constraint keyword: true, false and edge cases, plus validation of the values."""

from __future__ import annotations

from typing import Any

import pytest

from agentic_loop.judges.checks.constraint_features import (
    CONSTRAINT_KEYWORDS,
    constraint_feature,
    constraints_to_text,
)
from agentic_loop.judges.checks.episode_checks import EPISODE_KEYWORDS

DESIGN_KEYWORDS = {
    "word_count", "exact_words", "sentence_count", "include_words", "exclude_words", "regex",
    "json", "lowercase", "uppercase", "no_commas", "bullet_count", "starts_with", "ends_with",
    "answer",
}


def value_of(keyword: str, constraint: Any, output: str) -> bool | int:
    return constraint_feature(keyword, constraint).run_check("task", output).value


def holds(keyword: str, constraint: Any, output: str) -> bool:
    feature = constraint_feature(keyword, constraint)
    return feature.credit(feature.run_check("task", output).value) == 1.0


IFEVAL_KEYWORDS = {
    "paragraph_count", "paragraph_first_word", "title", "postscript", "quoted", "highlight_count",
    "section_count", "capital_word_count", "word_frequency", "letter_frequency",
    "placeholder_count", "first_word", "repeat_request", "two_responses", "language",
}


def test_keywords_are_exactly_the_design_ones_plus_python_tests() -> None:
    assert set(CONSTRAINT_KEYWORDS) == (DESIGN_KEYWORDS | {"python_tests"} | IFEVAL_KEYWORDS
                                        | {"check"}  # check: the user's own, by reference
                                        | set(EPISODE_KEYWORDS))  # over an agent's episode


@pytest.mark.parametrize(
    ("keyword", "constraint", "output", "expected"),
    [
        ("word_count", (3, 5), "one two three", True),
        ("word_count", (3, 5), "one two", False),
        ("word_count", (3, 5), "a b c d e f", False),
        ("word_count", (2, 2), "state-of-the-art café!", True),  # hyphenated = 1 word
        ("word_count", [3, None], "a b c d e f g", True),  # open upper bound, list form
        ("word_count", (0, 0), "", True),
        ("exact_words", 3, "Don't stop, e-mail!", True),  # don't / stop / e-mail
        ("exact_words", 12,
         "Books for every reader, stories for every mood, and good coffee too!", True),
        ("exact_words", 2, "Hello.", False),
        ("sentence_count", (2, 3), "One. Two.", True),
        ("sentence_count", (2, 3), "Only one, really.", False),
        ("sentence_count", (1, 1), "Dr. Who arrived.", True),
        ("bullet_count", (2, 3), "- a\n- b", True),
        ("bullet_count", (2, 3), "- a", False),
        ("bullet_count", (0, 0), "no bullets", True),
        ("include_words", ["book", "coffee"], "Book lovers drink Coffee.", True),
        ("include_words", ["book", "coffee"], "Books and coffee", False),  # plural is another word
        ("include_words", "tea", "TEA time", True),  # a single string is one word
        ("include_words", ["tea"], "", False),
        ("exclude_words", ["we", "our"], "Stories on every shelf.", True),
        ("exclude_words", ["we", "our"], "We're open", True),  # whole words only
        ("exclude_words", ["we", "our"], "OUR shelves", False),
        ("exclude_words", ["we"], "", False),  # a blank output complies with nothing
        ("regex", r"^\d{3}-\d{4}$", "555-1234", True),
        ("regex", r"^\d{3}-\d{4}$", "call 555-1234", False),
        ("regex", r"(?i)hello", "HELLO there", True),
        ("json", True, '{"name": "Ada"}', True),
        ("json", True, "```json\n[1, 2]\n```", True),
        ("json", True, "{name: 'Ada'}", False),
        ("json", True, "", False),
        ("lowercase", True, "all small here", True),
        ("lowercase", True, "Not small", False),
        ("lowercase", True, "  ", False),
        ("uppercase", True, "LOUD", True),
        ("uppercase", True, "LOUD-ish", False),
        ("no_commas", True, "No commas here.", True),
        ("no_commas", True, "One, two", False),
        ("no_commas", True, "", False),
        ("starts_with", "Dear", "dear friend", True),
        ("starts_with", "Dear", "Hello dear", False),
        ("ends_with", "Cheers.", "Bye. cheers.", True),
        ("ends_with", "Cheers.", "Cheers. Bye.", False),
        ("answer", 42, "6 x 7 = 42", True),
        ("answer", 42, "I think 41, no wait, 42.0", True),
        ("answer", 42, "42 is wrong, it is 43", False),
        ("answer", -1234, "The balance is -1,234.", True),
        ("answer", -1234, "The balance is 1,234.", False),
        ("answer", "1,234", "That is 1234 in total", True),  # numeric string compares as a number
        ("answer", 0.1, "0.1000000001", True),  # within the default tolerance
        ("answer", {"value": 3.14, "tolerance": 0.01}, "about 3.141", True),
        ("answer", {"value": 3.14, "tolerance": 0.0001}, "about 3.15", False),
        ("answer", 7, "no number at all", False),
        ("answer", "Paris", "Let me think.\nThe answer is Paris.", True),
        ("answer", "Paris", "Paris is lovely.\nThe answer is Berlin.", False),
        ("answer", "New York", "Answer: new   york", True),
        ("answer", "Paris", "", False),
    ],
)
def test_constraint_checks(keyword: str, constraint: Any, output: str, expected: bool) -> None:
    assert holds(keyword, constraint, output) is expected


def test_json_schema_validation() -> None:
    schema = {"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]}
    feature = constraint_feature("json", schema)
    assert feature.run_check("t", '{"age": 3}').value is True
    bad = feature.run_check("t", '{"age": "three"}')
    assert bad.value is False
    assert "schema violation at age" in bad.detail
    missing = feature.run_check("t", "{}")
    assert missing.value is False and "'age' is a required property" in missing.detail
    assert "valid against this JSON schema" in feature.description


def test_counts_report_their_value_and_partial_credit() -> None:
    feature = constraint_feature("word_count", (10, 12))
    result = feature.run_check("t", " ".join(["word"] * 15))
    assert result.value == 15
    assert result.detail == "15 words"
    assert feature.credit(15) == pytest.approx(0.75)


def test_details_name_what_was_found() -> None:
    assert constraint_feature("exclude_words", ["we", "our"]).run_check(
        "t", "We did our best").detail == 'found "we", "our"'
    assert constraint_feature("include_words", ["a", "b"]).run_check(
        "t", "a only").detail == 'missing "b"'
    assert constraint_feature("answer", 5).run_check("t", "it is 4").detail == (
        "the last number is 4")
    assert constraint_feature("starts_with", "Hi").run_check("t", "Yo there").detail == \
        "starts with 'Yo there'"


def test_answer_never_leaks_the_expected_value() -> None:
    for value in (2491, "Canberra", {"value": 0.125, "tolerance": 0.001}):
        feature = constraint_feature("answer", value)
        wrong = feature.run_check("t", "The answer is 17.\nSydney")
        shown = feature.description + wrong.detail
        assert str(value if not isinstance(value, dict) else value["value"]) not in shown


def test_python_tests_counts_passing_tests() -> None:
    feature = constraint_feature("python_tests", ["assert f(1) == 2", "assert f(2) == 5"])
    assert feature.kind == "count" and feature.target == (2, 2)
    reply = "Sure:\n```python\ndef f(x):\n    return 2 * x\n```"
    result = feature.run_check("Write f.", reply)
    assert result.value == 1
    assert result.detail.startswith("1/2 tests pass; test 2 failed: AssertionError")
    assert feature.credit(result.value) == pytest.approx(0.5)
    assert feature.run_check("t", "").value == 0


def test_python_tests_options_are_kept() -> None:
    feature = constraint_feature("python_tests", {"tests": "assert True", "timeout_s": 1.5})
    assert feature.constraint == ("python_tests", {"tests": ["assert True"], "timeout_s": 1.5})
    assert feature.run_check("t", "x = 1").value == 1


@pytest.mark.parametrize(
    ("keyword", "value", "message"),
    [
        ("word_count", (5, 3), "min <= max"),
        ("word_count", 10, "a pair"),
        ("word_count", (-1, 3), "ints >= 0"),
        ("word_count", (True, 3), "ints >= 0"),
        ("exact_words", 0, "an int >= 1"),
        ("exact_words", 2.5, "an int >= 1"),
        ("include_words", [], "non-empty list"),
        ("include_words", ["ok", "!!"], "non-empty list"),
        ("exclude_words", [3], "non-empty list"),
        ("regex", "(unclosed", "valid regular expression"),
        ("regex", "", "non-empty regular expression"),
        ("json", {"type": "nonsense"}, "valid JSON schema"),
        ("json", "yes", "True or a JSON schema"),
        ("lowercase", "yes", "True"),
        ("no_commas", 1, "True"),
        ("starts_with", "  ", "non-empty string"),
        ("answer", True, "a number, a non-empty string"),
        ("answer", float("nan"), "a number, a non-empty string"),
        ("answer", {"value": 3, "tol": 1}, "a number, a non-empty string"),
        ("answer", {"value": 3, "tolerance": -1}, "a number, a non-empty string"),
        ("python_tests", [], "a test string"),
        ("python_tests", {"tests": ["assert 1"], "cpu": 3}, "a test string"),
    ],
)
def test_bad_values_are_rejected_with_the_keyword(keyword: str, value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=rf"constraint {keyword}=.*{message}"):
        constraint_feature(keyword, value)


def test_unknown_keyword_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError,
                       match="unknown constraint 'max_words'.*word_count.*python_tests"):
        constraint_feature("max_words", 10)


def test_name_weight_and_description_overrides() -> None:
    feature = constraint_feature("exclude_words", ["x"], name="no_x", weight=2.5,
                                 description="Never say x.")
    assert (feature.name, feature.weight, feature.description) == ("no_x", 2.5, "Never say x.")
    assert feature.constraint == ("exclude_words", ["x"])


def test_constraints_to_text() -> None:
    text = constraints_to_text(word_count=(10, 12), exclude_words=["we", "our"], lowercase=True,
                               no_commas=False)
    assert text.splitlines() == [
        "- Use between 10 and 12 words.",
        '- Do not use the words "we", "our".',
        "- Write in lowercase only, with no capital letters.",
    ]
    assert constraints_to_text() == ""
