"""Builders of the layout, frequency and language constraint keywords (IFEval-style).

The constraints that instruction-following prompts state most often beyond
word counts: paragraphs and their first words, a ``<<title>>``, a ``P.S.``,
a quoted answer, ``*highlights*``, ``SECTION X`` markers, capital-word,
keyword and letter frequencies, ``[placeholders]``, a first word, repeating
the request, two responses and the response language. Each builder works as
those of :mod:`agentic_loop.judges.checks.constraint_builders` do: it validates
the value (a :class:`~agentic_loop.errors.ConfigError` names the keyword and
what to pass), normalises it for saving (JSON-ready; building from the
normalised value gives it back) and returns the instruction plus a pure
check built on :mod:`agentic_loop.judges.checks.text_layout` and
:mod:`agentic_loop.judges.checks.language_id`.

Example:
    >>> built = IFEVAL_BUILDERS["paragraph_count"]({"count": (2, 2), "separator": "***"})
    >>> built.value
    {'count': [2, 2], 'separator': '***'}
    >>> built.check("", "One.\\n***\\nTwo.")
    CheckResult(value=2, detail='2 paragraphs')
    >>> IFEVAL_BUILDERS["title"](True).description
    'Include a title wrapped in double angular brackets, such as <<my title>>.'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agentic_loop.judges.check_result import CheckResult
from agentic_loop.judges.checks import language_id, text_layout, text_measures
from agentic_loop.judges.checks.constraint_builders import (
    EMPTY_OUTPUT,
    Built,
    bad_value,
    between,
    check_range,
    counter,
    require_flag,
)

__all__ = ["IFEVAL_BUILDERS"]


def _yes_no(test: Callable[[str], bool], wrong: str) -> Callable[[str, str], CheckResult]:
    def check(task: str, output: str) -> CheckResult:
        if not output.strip():
            return EMPTY_OUTPUT
        ok = test(output)
        return CheckResult(ok, "" if ok else wrong)

    return check


def _options(keyword: str, value: Any, main: str, extra: Mapping[str, Any],
             expected: str) -> tuple[Any, dict[str, Any]]:
    """Split ``value`` into its main part and options: a bare main value, or a dict of both."""
    if not isinstance(value, Mapping):
        return value, dict(extra)
    if main not in value or set(value) - {main, *extra}:
        raise bad_value(keyword, value, expected)
    return value[main], {k: value.get(k, default) for k, default in extra.items()}


def _separator(keyword: str, value: Any, separator: Any, expected: str) -> str:
    if separator not in text_layout.PARAGRAPH_SEPARATORS:
        raise bad_value(keyword, value, expected)
    return str(separator)


def _split_words(separator: str) -> str:
    return "separated by a line of ***" if separator == "***" else "separated by blank lines"


def _paragraph_count(value: Any) -> Built:
    expected = ("a pair (min, max) or {'count': (min, max), 'separator': 'blank_line' | '***'}")
    count, opts = _options("paragraph_count", value, "count", {"separator": "blank_line"},
                           expected)
    separator = _separator("paragraph_count", value, opts["separator"], expected)
    lo, hi = check_range("paragraph_count", count)
    saved: Any = [lo, hi] if separator == "blank_line" else {"count": [lo, hi],
                                                             "separator": separator}
    return Built(saved, f"Write {between(lo, hi, 'paragraphs')}, {_split_words(separator)}.",
                 counter(lambda out: len(text_layout.paragraphs(out, separator)), "paragraphs"),
                 "count", (lo, hi))


def _paragraph_first_word(value: Any) -> Built:
    expected = "{'index': i >= 1, 'word': 'Word'} (optionally 'separator': 'blank_line' | '***')"
    if not isinstance(value, Mapping) or {"index", "word"} - set(value) or \
            set(value) - {"index", "word", "separator"}:
        raise bad_value("paragraph_first_word", value, expected)
    index, word = value["index"], value["word"]
    separator = _separator("paragraph_first_word", value, value.get("separator", "blank_line"),
                           expected)
    if isinstance(index, bool) or not isinstance(index, int) or index < 1 or \
            not isinstance(word, str) or len(text_measures.words(word)) != 1:
        raise bad_value("paragraph_first_word", value, expected)

    def check(task: str, output: str) -> CheckResult:
        found = text_layout.paragraphs(output, separator)
        if len(found) < index:
            return CheckResult(False, f"only {len(found)} paragraphs")
        first = text_layout.first_word(found[index - 1])
        ok = text_measures.normalize(first) == text_measures.normalize(word)
        return CheckResult(ok, "" if ok else f"paragraph {index} starts with {first!r}")

    saved = {"index": index, "word": word}
    if separator != "blank_line":
        saved["separator"] = separator
    return Built(saved, f'Start paragraph {index} with the word "{word}" '
                        f"(paragraphs {_split_words(separator)}).", check)


def _title(value: Any) -> Built:
    require_flag("title", value)
    return Built(True, "Include a title wrapped in double angular brackets, such as <<my title>>.",
                 _yes_no(text_layout.has_title, "no <<title>> found"))


def _postscript(value: Any) -> Built:
    marker = "P.S." if value is True else value
    if not isinstance(marker, str) or not marker.strip() or \
            not marker.replace(".", "").replace(" ", "").isalpha():
        raise bad_value("postscript", value, "True or the marker it starts with, e.g. 'P.S.'")
    marker = marker.strip()
    return Built(marker, f"End with a postscript starting with {marker}",
                 _yes_no(lambda out: text_layout.has_postscript(out, marker),
                         f"no line starts with {marker}"))


def _quoted(value: Any) -> Built:
    require_flag("quoted", value)
    return Built(True, "Wrap your entire response in double quotation marks.",
                 _yes_no(text_layout.wrapped_in_quotes, "not wrapped in double quotation marks"))


def _ranged(keyword: str, measure: Callable[[str], int], noun: str,
            instruction: Callable[[str], str]) -> Callable[[Any], Built]:
    """A builder for a ``(min, max)`` count of ``noun``; ``instruction(between_text)``."""
    def build(value: Any) -> Built:
        lo, hi = check_range(keyword, value)
        return Built([lo, hi], instruction(between(lo, hi, noun)), counter(measure, noun),
                     "count", (lo, hi))

    return build


def _section_count(value: Any) -> Built:
    expected = "a pair (min, max) or {'count': (min, max), 'marker': 'SECTION'}"
    count, opts = _options("section_count", value, "count", {"marker": "Section"}, expected)
    marker = opts["marker"]
    if not isinstance(marker, str) or len(text_measures.words(marker)) != 1:
        raise bad_value("section_count", value, expected)
    lo, hi = check_range("section_count", count)
    return Built({"count": [lo, hi], "marker": marker},
                 f"Write {between(lo, hi, 'sections')}; begin each with {marker} X "
                 f"({marker} 1, {marker} 2, ...).",
                 counter(lambda out: text_layout.section_count(out, marker), "sections"),
                 "count", (lo, hi))


def _frequency(keyword: str, value: Any, item: str, valid: Callable[[Any], bool],
               measure: Callable[[str, str], int], noun: str) -> Built:
    expected = f"{{'{item}': ..., 'count': (min, max)}}"
    if not isinstance(value, Mapping) or set(value) != {item, "count"} or not valid(value[item]):
        raise bad_value(keyword, value, expected)
    target = str(value[item])
    lo, hi = check_range(keyword, value["count"])
    times = between(lo, hi, "times").replace("exactly 1 times", "exactly once")
    return Built({item: target, "count": [lo, hi]}, f'Use the {noun} "{target}" {times}.',
                 counter(lambda out: measure(out, target), f'times "{target}"'),
                 "count", (lo, hi))


def _word_frequency(value: Any) -> Built:
    return _frequency("word_frequency", value, "word",
                      lambda w: isinstance(w, str) and bool(text_measures.words(w)),
                      text_layout.word_frequency, "word")


def _letter_frequency(value: Any) -> Built:
    return _frequency("letter_frequency", value, "letter",
                      lambda c: isinstance(c, str) and len(c) == 1 and c.isalpha(),
                      text_layout.letter_count, "letter")


def _first_word(value: Any) -> Built:
    if not isinstance(value, str) or len(text_measures.words(value)) != 1:
        raise bad_value("first_word", value, "one word, e.g. 'Yes'")
    wanted = text_measures.words(value)[0]

    def check(task: str, output: str) -> CheckResult:
        first = text_layout.first_word(output)
        if not first:
            return EMPTY_OUTPUT
        ok = text_measures.normalize(first) == text_measures.normalize(wanted)
        return CheckResult(ok, "" if ok else f"the first word is {first!r}")

    return Built(wanted, f'Make "{wanted}" the first word of your response.', check)


def _repeat_request(value: Any) -> Built:
    if not isinstance(value, str) or not text_measures.words(value):
        raise bad_value("repeat_request", value, "the request text to repeat first")
    request = " ".join(value.split())

    def check(task: str, output: str) -> CheckResult:
        if not output.strip():
            return EMPTY_OUTPUT
        repeated, rest = text_layout.repeats_request(output, request)
        if not repeated:
            return CheckResult(False, "does not open with the request word for word")
        ok = bool(text_measures.words(rest))
        return CheckResult(ok, "" if ok else "no answer after the repeated request")

    return Built(request, "First repeat the request word for word without change, "
                          "then give your answer.", check)


def _two_responses(value: Any) -> Built:
    require_flag("two_responses", value)

    def check(task: str, output: str) -> CheckResult:
        parts = text_layout.split_responses(output)
        if len(parts) != 2:
            return CheckResult(False, f"{len(parts)} responses separated by ******")
        same = text_measures.normalize(parts[0]) == text_measures.normalize(parts[1])
        return CheckResult(not same, "the two responses are the same" if same else "")

    return Built(True, "Give two different responses, separated by 6 asterisks: ******.", check)


def _language(value: Any) -> Built:
    code = language_id.language_code(value) if isinstance(value, str) else None
    if code is None:
        raise bad_value("language", value, "a language name or ISO 639-1 code, one of "
                        + ", ".join(language_id.LANGUAGE_NAMES))
    name = language_id.LANGUAGE_NAMES[code]
    return Built(code, f"Write your entire response in {name}, and no other language.",
                 _yes_no(lambda out: language_id.in_language(out, code), f"not all in {name}"))


#: Keyword -> builder for the layout, frequency and language constraints.
IFEVAL_BUILDERS: dict[str, Callable[[Any], Built]] = {
    "paragraph_count": _paragraph_count,
    "paragraph_first_word": _paragraph_first_word,
    "title": _title,
    "postscript": _postscript,
    "quoted": _quoted,
    "highlight_count": _ranged("highlight_count", text_layout.highlight_count,
                               "highlighted sections",
                               lambda n: f"Highlight {n} with markdown, i.e. *like this*."),
    "section_count": _section_count,
    "capital_word_count": _ranged("capital_word_count", text_layout.capital_word_count,
                                  "all-capital words",
                                  lambda n: f"Use {n} (words written in all capital letters)."),
    "word_frequency": _word_frequency,
    "letter_frequency": _letter_frequency,
    "placeholder_count": _ranged("placeholder_count", text_layout.placeholder_count,
                                 "placeholders",
                                 lambda n: f"Include {n} in square brackets, such as [address]."),
    "first_word": _first_word,
    "repeat_request": _repeat_request,
    "two_responses": _two_responses,
    "language": _language,
}
