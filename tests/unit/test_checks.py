"""The pure measurements behind every check: words, sentences, numbers, case, fences."""

from __future__ import annotations

import pytest

from agentic_loop.judges.checks import text_measures


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("   \n\t ", 0),
        ("Hello", 1),
        ("Hello, world!", 2),
        ("state-of-the-art design", 2),  # hyphenated word = one word
        ("e‑mail me", 2),  # non-breaking hyphen inside a word
        ("don't stop", 2),  # apostrophe inside a word
        ("don’t stop", 2),  # curly apostrophe
        ("word -- word — word", 3),  # dashes between spaces are not words
        ("Price: $1,250.99 today", 3),  # number with separators is one word
        ("3.14 is pi", 3),
        ("café naïve Zürich", 3),  # unicode letters
        ("Привет мир", 2),  # Cyrillic
        ("🙂 🎉 !!!", 0),  # emoji and punctuation only
        ("**bold** _under_ `code`", 3),  # markdown symbols stripped
        ("snake_case_name", 3),  # underscores separate (they are punctuation here)
        ("- one\n- two\n- three", 3),
        ("end.Next", 2),
    ],
)
def test_word_count(text: str, expected: int) -> None:
    assert text_measures.word_count(text) == expected


def test_words_keep_their_spelling() -> None:
    assert text_measures.words("Well-known e-mail, 1,000 don't!") == [
        "Well-known", "e-mail", "1,000", "don't"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("...", 0),
        ("One sentence without a stop", 1),
        ("One. Two! Three?", 3),
        ("Wait... really?! Yes.", 3),
        ("Dr. Smith met Mr. Jones, e.g. at noon.", 1),  # abbreviations do not split
        ("Pi is 3.14. It never ends.", 2),  # decimals do not split
        ('He said "stop." Then left.', 2),  # closing quote after the stop
        ("Line one\nLine two", 1),  # a newline alone does not end a sentence
        ("你好。再见。", 1),  # CJK full stops need a following space to split
        ("你好。 再见。", 2),
    ],
)
def test_sentence_count(text: str, expected: int) -> None:
    assert text_measures.sentence_count(text) == expected


@pytest.mark.parametrize(
    ("text", "candidates", "found"),
    [
        ("We love it", ["we"], ["we"]),
        ("we're here", ["we"], []),  # contraction is another word
        ("Weekly deals", ["we"], []),  # no substring match
        ("OUR shop", ["our"], ["our"]),  # case-insensitive
        ("The team-building day", ["team"], []),  # part of a hyphenated word
        ("The team-building day", ["team-building"], ["team-building"]),
        ("Take it to the Next   Level!", ["next level"], ["next level"]),  # phrase, any spacing
        ("next, level", ["next level"], ["next level"]),  # punctuation between words is ignored
        ("Zürich and ZÜRICH", ["zürich"], ["zürich"]),
        ("ﬁne print", ["fine"], ["fine"]),  # NFKC folds the ligature
        ("", ["we"], []),
    ],
)
def test_find_words(text: str, candidates: list[str], found: list[str]) -> None:
    assert text_measures.find_words(text, candidates) == found


@pytest.mark.parametrize(
    ("text", "lower", "upper"),
    [
        ("all lowercase here", True, False),
        ("ALL CAPS HERE", False, True),
        ("Mixed Case", False, False),
        ("numbers 123 and symbols %$", True, False),
        ("123 456", False, False),  # no letters at all: neither
        ("", False, False),
        ("ÉCOLE", False, True),
        ("école", True, False),
        ("ǅ", False, False),  # title-case letter is neither
        ("東京 TOKYO", False, True),  # uncased letters do not break uppercase
    ],
)
def test_case_checks(text: str, lower: bool, upper: bool) -> None:
    assert text_measures.is_lowercase(text) is lower
    assert text_measures.is_uppercase(text) is upper


@pytest.mark.parametrize(
    ("text", "expected"),
    [("no commas", False), ("a, b", True), ("a，b", True), ("a، b", True), ("a、b", True),
     ("", False)],
)
def test_has_commas(text: str, expected: bool) -> None:
    assert text_measures.has_commas(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("- a\n- b", 2),
        ("* a\n+ b\n• c", 3),
        ("1. a\n2) b\n10. c", 3),
        ("  - indented\n\t- tab", 2),
        ("-no space\n*emphasis*\n---\n1.5 is a number", 0),
        ("Intro line\n- a\ntext - not a bullet", 1),
    ],
)
def test_bullet_count(text: str, expected: int) -> None:
    assert text_measures.bullet_count(text) == expected


def test_starts_and_ends_with() -> None:
    assert text_measures.starts_with("  Dear Sir, hello", "dear sir")
    assert not text_measures.starts_with("Hello, Dear Sir", "dear sir")
    assert text_measures.ends_with("Thanks!\n\n", "THANKS!")
    assert not text_measures.ends_with("Thanks! P.S.", "thanks!")
    assert not text_measures.starts_with("", "x")
    assert text_measures.ends_with("Ｔhanks", "thanks")  # full-width letters normalised


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is 42.", 42.0),
        ("It costs 1,234,567 dollars", 1234567.0),
        ("Result: -17", -17.0),
        ("Result: −17", -17.0),  # Unicode minus
        ("x = +3.5", 3.5),
        ("about .5 of it", 0.5),
        ("First 3 then 4", 4.0),  # the LAST number
        ("pages 10-12", 12.0),  # hyphen between numbers is a range, not a sign
        ("$1,250.00 total", 1250.0),
        ("growth of 50%", 50.0),
        ("\\boxed{2491}", 2491.0),
        ("v2 of the model", None),  # a digit glued to letters is not a number
        ("no numbers here", None),
        ("", None),
        ("1,2,3", 3.0),  # a list, not thousands
        ("Answer: 3.", 3.0),  # sentence full stop is not a decimal point
    ],
)
def test_last_number(text: str, expected: float | None) -> None:
    assert text_measures.last_number(text) == expected


def test_parse_number_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="'12abc' is not a number"):
        text_measures.parse_number("12abc")
    assert text_measures.parse_number(" 1,000 ") == 1000.0


def test_last_line() -> None:
    assert text_measures.last_line("a\n b \n\n") == "b"
    assert text_measures.last_line("") == ""


def test_extract_code_prefers_python_fence() -> None:
    text = "```\nplain\n```\nthen\n```python\nx = 1\n```\n```py\ny = 2\n```"
    assert text_measures.extract_code(text) == "x = 1\n"
    assert text_measures.extract_code("```\nz = 3\n```") == "z = 3\n"
    assert text_measures.extract_code("no fence") == "no fence"


@pytest.mark.parametrize(
    ("text", "ok", "value"),
    [
        ('{"a": [1, 2]}', True, {"a": [1, 2]}),
        ("  [1, 2]  ", True, [1, 2]),
        ('```json\n{"a": 1}\n```', True, {"a": 1}),
        ('```\n{"a": 1}\n```', True, {"a": 1}),
        ('Here it is: {"a": 1}', False, None),  # prose around JSON is not JSON
        ("{'a': 1}", False, None),
        ("", False, None),
        ('```python\n{"a": 1}\n```', False, None),
    ],
)
def test_parse_json_output(text: str, ok: bool, value: object) -> None:
    parsed_ok, parsed, error = text_measures.parse_json_output(text)
    assert parsed_ok is ok
    assert parsed == value
    assert (error == "") is ok
