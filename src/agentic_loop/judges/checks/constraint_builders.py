"""How each constraint keyword's value is checked and turned into a check.

One builder per keyword of :mod:`agentic_loop.judges.checks.constraint_features`:
it validates the value a user wrote (raising
:class:`~agentic_loop.errors.ConfigError` that names the keyword, the value
and what to pass), normalises it for saving, and returns the instruction to
show a model plus the pure-Python check (built on
:mod:`agentic_loop.judges.checks.text_measures`). Kept apart from the public
``constraint_feature`` so that module stays a short table of keywords.

Example:
    >>> built = BUILDERS["word_count"]((3, 5))
    >>> built.value, built.description, built.check("", "one two three")
    ([3, 5], 'Use between 3 and 5 words.', CheckResult(value=3, detail='3 words'))
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jsonschema import exceptions as jsonschema_exceptions
from jsonschema import validators

from agentic_loop.errors import ConfigError
from agentic_loop.judges.check_result import CheckResult, FeatureKind
from agentic_loop.judges.checks import text_measures
from agentic_loop.judges.sandbox.run import run_python_tests

__all__ = ["BUILDERS", "DEFAULT_ANSWER_TOLERANCE", "EMPTY_OUTPUT", "Built", "bad_value", "between",
           "check_range", "counter", "require_flag"]

#: Absolute tolerance of a numeric ``answer`` unless the constraint gives one.
DEFAULT_ANSWER_TOLERANCE = 1e-6

_EMPTY = CheckResult(False, "the output is empty")


@dataclass(frozen=True)
class Built:
    """What a keyword builder returns: the normalised value and the feature parts."""

    value: Any
    description: str
    check: Callable[[str, str], CheckResult]
    kind: FeatureKind = "bool"
    target: tuple[int, int | None] | None = None


def _bad(keyword: str, value: Any, expected: str) -> ConfigError:
    return ConfigError(f"constraint {keyword}={value!r} is invalid; pass {expected}")


def _range(keyword: str, value: Any) -> tuple[int, int | None]:
    expected = "a pair (min, max) of ints >= 0 with min <= max (max may be None)"
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise _bad(keyword, value, expected)
    lo, hi = value
    if isinstance(lo, bool) or not isinstance(lo, int) or lo < 0:
        raise _bad(keyword, value, expected)
    if hi is not None and (isinstance(hi, bool) or not isinstance(hi, int) or hi < lo):
        raise _bad(keyword, value, expected)
    return lo, hi


def _between(lo: int, hi: int | None, noun: str) -> str:
    if hi is None:
        return f"at least {lo} {noun}"
    return f"exactly {lo} {noun}" if lo == hi else f"between {lo} and {hi} {noun}"


def _word_list(keyword: str, value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if (
        not isinstance(value, (list, tuple))
        or not value
        or not all(isinstance(w, str) and text_measures.words(w) for w in value)
    ):
        raise _bad(keyword, value, "a non-empty list of words or phrases")
    return list(value)


def _quoted(items: Sequence[str]) -> str:
    return ", ".join(f'"{w}"' for w in items)


def _flag(keyword: str, value: Any) -> None:
    if value is not True:
        raise _bad(keyword, value, "True (leave the keyword out to drop the constraint)")


def _counter(measure: Callable[[str], int], noun: str) -> Callable[[str, str], CheckResult]:
    def check(task: str, output: str) -> CheckResult:
        n = measure(output)
        return CheckResult(n, f"{n} {noun}")

    return check


def _word_count(value: Any) -> Built:
    lo, hi = _range("word_count", value)
    return Built([lo, hi], f"Use {_between(lo, hi, 'words')}.",
                  _counter(text_measures.word_count, "words"), "count", (lo, hi))


def _exact_words(value: Any) -> Built:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _bad("exact_words", value, "an int >= 1")
    return Built(value, f"Use exactly {value} words.",
                  _counter(text_measures.word_count, "words"), "count", (value, value))


def _sentence_count(value: Any) -> Built:
    lo, hi = _range("sentence_count", value)
    return Built([lo, hi], f"Write {_between(lo, hi, 'sentences')}.",
                  _counter(text_measures.sentence_count, "sentences"), "count", (lo, hi))


def _bullet_count(value: Any) -> Built:
    lo, hi = _range("bullet_count", value)
    return Built([lo, hi], f"Use {_between(lo, hi, 'bullet points')} (lines starting with \"- \").",
                  _counter(text_measures.bullet_count, "bullet points"), "count", (lo, hi))


def _include_words(value: Any) -> Built:
    wanted = _word_list("include_words", value)

    def check(task: str, output: str) -> CheckResult:
        if not output.strip():
            return _EMPTY
        missing = [w for w in wanted if w not in text_measures.find_words(output, wanted)]
        return CheckResult(not missing, f"missing {_quoted(missing)}" if missing else "")

    return Built(wanted, f"Include the words {_quoted(wanted)}.", check)


def _exclude_words(value: Any) -> Built:
    banned = _word_list("exclude_words", value)

    def check(task: str, output: str) -> CheckResult:
        if not output.strip():
            return _EMPTY
        found = text_measures.find_words(output, banned)
        return CheckResult(not found, f"found {_quoted(found)}" if found else "")

    return Built(banned, f"Do not use the words {_quoted(banned)}.", check)


def _regex(value: Any) -> Built:
    if not isinstance(value, str) or not value:
        raise _bad("regex", value, "a non-empty regular expression string")
    try:
        pattern = re.compile(value)
    except re.error as err:
        raise _bad("regex", value, f"a valid regular expression ({err})") from err

    def check(task: str, output: str) -> CheckResult:
        if not output.strip():
            return _EMPTY
        ok = pattern.search(output) is not None
        return CheckResult(ok, "" if ok else "no match")

    return Built(value, f"Match the regular expression /{value}/.", check)


def _json(value: Any) -> Built:
    if value is True:
        schema = None
        description = "Reply with valid JSON only."
    elif isinstance(value, Mapping):
        schema = dict(value)
        try:
            validators.validator_for(schema).check_schema(schema)
        except jsonschema_exceptions.SchemaError as err:
            raise _bad("json", value, f"True or a valid JSON schema ({err.message})") from err
        description = (
            "Reply with JSON only, valid against this JSON schema: "
            + json.dumps(schema, separators=(",", ":"))
        )
    else:
        raise _bad("json", value, "True or a JSON schema (a dict)")
    validator = validators.validator_for(schema)(schema) if schema is not None else None

    def check(task: str, output: str) -> CheckResult:
        ok, parsed, error = text_measures.parse_json_output(output)
        if not ok:
            return CheckResult(False, error)
        if validator is not None:
            problem = jsonschema_exceptions.best_match(validator.iter_errors(parsed))
            if problem is not None:
                where = "/".join(str(p) for p in problem.absolute_path) or "(root)"
                return CheckResult(False, f"schema violation at {where}: {problem.message}"[:300])
        return CheckResult(True)

    return Built(schema if schema is not None else True, description, check)


def _case_check(keyword: str, value: Any, test: Callable[[str], bool], wrong: str,
                description: str) -> Built:
    _flag(keyword, value)

    def check(task: str, output: str) -> CheckResult:
        if not output.strip():
            return _EMPTY
        ok = test(output)
        return CheckResult(ok, "" if ok else wrong)

    return Built(True, description, check)


def _lowercase(value: Any) -> Built:
    return _case_check("lowercase", value, text_measures.is_lowercase,
                       "has capital letters or no letters",
                       "Write in lowercase only, with no capital letters.")


def _uppercase(value: Any) -> Built:
    return _case_check("uppercase", value, text_measures.is_uppercase,
                       "has lowercase letters or no letters", "Write in capital letters only.")


def _no_commas(value: Any) -> Built:
    return _case_check("no_commas", value, lambda out: not text_measures.has_commas(out),
                       "has commas", "Do not use any commas.")


def _affix(keyword: str, value: Any, test: Callable[[str, str], bool], verb: str) -> Built:
    if not isinstance(value, str) or not value.strip():
        raise _bad(keyword, value, "a non-empty string")

    def check(task: str, output: str) -> CheckResult:
        if not output.strip():
            return _EMPTY
        ok = test(output, value)
        return CheckResult(ok, "" if ok else f"{verb}s with {_excerpt(output, keyword)!r}")

    return Built(value, f'{verb.capitalize()} with "{value}".', check)


def _excerpt(output: str, keyword: str) -> str:
    text = output.strip()
    return text[:40] if keyword == "starts_with" else text[-40:]


def _starts_with(value: Any) -> Built:
    return _affix("starts_with", value, text_measures.starts_with, "start")


def _ends_with(value: Any) -> Built:
    return _affix("ends_with", value, text_measures.ends_with, "end")


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            return text_measures.parse_number(value)
        except ValueError:
            return None
    return None


def _answer(value: Any) -> Built:
    expected_text = "a number, a non-empty string, or {'value': ..., 'tolerance': t >= 0}"
    tolerance = DEFAULT_ANSWER_TOLERANCE
    expected = value
    if isinstance(value, Mapping):
        if set(value) - {"value", "tolerance"} or "value" not in value:
            raise _bad("answer", value, expected_text)
        expected = value["value"]
        tolerance = value.get("tolerance", DEFAULT_ANSWER_TOLERANCE)
        if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or tolerance < 0:
            raise _bad("answer", value, expected_text)
    number = _as_number(expected)
    if number is not None:

        def check(task: str, output: str) -> CheckResult:
            got = text_measures.last_number(output)
            if got is None:
                return CheckResult(False, "no number found")
            ok = math.isclose(got, number, rel_tol=1e-9, abs_tol=tolerance)
            return CheckResult(ok, "" if ok else f"the last number is {got:g}")

        description = "Give the final answer as the last number in your reply."
    elif isinstance(expected, str) and text_measures.words(expected):
        wanted = expected

        def check(task: str, output: str) -> CheckResult:
            line = text_measures.last_line(output)
            if not line:
                return _EMPTY
            ok = bool(text_measures.find_words(line, [wanted]))
            return CheckResult(ok, "" if ok else f"the last line is {line[:60]!r}")

        description = "State the final answer on the last line of your reply."
    else:
        raise _bad("answer", value, expected_text)
    return Built(dict(value) if isinstance(value, Mapping) else value, description, check)


def _python_tests(value: Any) -> Built:
    expected = ("a test string, a list of test strings, or "
                "{'tests': [...], 'timeout_s': s, 'memory_mb': m}")
    options: dict[str, Any] = {}
    tests = value
    if isinstance(value, Mapping):
        if "tests" not in value or set(value) - {"tests", "timeout_s", "memory_mb"}:
            raise _bad("python_tests", value, expected)
        tests = value["tests"]
        options = {k: value[k] for k in ("timeout_s", "memory_mb") if k in value}
    test_list = [tests] if isinstance(tests, str) else tests
    if (not isinstance(test_list, (list, tuple)) or not test_list
            or not all(isinstance(t, str) and t.strip() for t in test_list)):
        raise _bad("python_tests", value, expected)
    test_list = list(test_list)
    n = len(test_list)

    def check(task: str, output: str) -> CheckResult:
        if not output.strip():
            return CheckResult(0, "the output is empty")
        result = run_python_tests(text_measures.extract_code(output), test_list, **options)
        detail = f"{result.n_passed}/{n} tests pass"
        reason = f"; {result.reason}" if result.reason else ""
        return CheckResult(result.n_passed, detail + reason)

    shown = "\n".join(test_list)
    description = (
        "Reply with Python code in a ```python block that passes these tests:\n" + shown
    )
    normalised = {"tests": test_list, **options} if options else test_list
    return Built(normalised, description, check, "count", (n, n))


# Shared with the builders of the other keywords (constraint_builders_ifeval).
EMPTY_OUTPUT = _EMPTY
bad_value = _bad
between = _between
check_range = _range
counter = _counter
require_flag = _flag

#: Keyword -> builder, in the order the keywords are documented.
BUILDERS: dict[str, Callable[[Any], Built]] = {
    "word_count": _word_count,
    "exact_words": _exact_words,
    "sentence_count": _sentence_count,
    "include_words": _include_words,
    "exclude_words": _exclude_words,
    "regex": _regex,
    "json": _json,
    "lowercase": _lowercase,
    "uppercase": _uppercase,
    "no_commas": _no_commas,
    "bullet_count": _bullet_count,
    "starts_with": _starts_with,
    "ends_with": _ends_with,
    "answer": _answer,
    "python_tests": _python_tests,
}
