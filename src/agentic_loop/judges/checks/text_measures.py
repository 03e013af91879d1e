"""Pure-Python measurements of a text: the facts a judge must never ask an LLM.

A small model asked "how many words is this?" guesses; Python counts. Every
function here is pure, deterministic and model-free, so the constraint
features built on them (see :mod:`agentic_loop.judges.checks.constraint_features`) give the
same answer on every run.

Conventions, chosen once and used everywhere:

* **Words** are runs of letters or digits. Apostrophes and hyphens *inside* a
  word keep it whole (``don't``, ``state-of-the-art`` and ``e-mail`` are one
  word each); numbers keep their separators (``1,000`` and ``3.14`` are one
  word). Surrounding punctuation, dashes between spaces, emoji and markdown
  symbols are not words. A run of CJK characters without spaces counts as one
  word (no segmentation is attempted).
* **Word matching** (include/exclude/phrases) compares word sequences after
  Unicode NFKC normalisation and case folding, so it is whole-word and
  case-insensitive: ``"we"`` does not match ``"weekly"`` nor ``"we're"``.
* **Sentences** end at ``.``, ``!``, ``?``, ``…`` (and their CJK forms)
  followed by a space or the end of the text; common abbreviations (``Dr.``,
  ``e.g.``) and decimals (``3.14``) do not end a sentence. A final fragment
  without a full stop still counts.
* **Numbers** accept thousands separators (``1,234``), decimals, a leading
  sign (``-``, ``+`` or the Unicode minus ``−``), currency and percent signs
  around them. A hyphen between two numbers (``10-12``) is a range, not a
  minus.

Example:
    >>> word_count("A state-of-the-art café, don't you think?")
    6
    >>> sentence_count("Dr. Smith arrived. He paid $3.50! Fine")
    3
    >>> last_number("Total: 1,234 items, a loss of −56.5%.")
    -56.5
    >>> find_words("We love our weekly market.", ["we", "our", "market"])
    ['we', 'our', 'market']
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

from agentic_loop.errors import ConfigError

__all__ = [
    "BULLET_RE",
    "bullet_count",
    "ends_with",
    "extract_code",
    "find_words",
    "has_commas",
    "is_lowercase",
    "is_uppercase",
    "last_line",
    "last_number",
    "normalize",
    "numbers",
    "parse_json_output",
    "parse_number",
    "sentence_count",
    "sentences",
    "starts_with",
    "word_count",
    "words",
]

# A number with separators first, so "1,000" and "3.14" stay one word; then a
# word: letters/digits joined by inner apostrophes or hyphens (ASCII hyphen,
# Unicode hyphen and non-breaking hyphen).
_WORD_RE = re.compile(r"\d+(?:[.,:]\d+)+|[^\W_]+(?:[-\u2010\u2011'\u2019][^\W_]+)*")

_SENTENCE_END_RE = re.compile(r"[.!?\u2026\u3002\uff01\uff1f]+[\"'\u201d\u2019)\]]*(?=\s|$)")
_ABBREVIATIONS = frozenset(
    {"mr.", "mrs.", "ms.", "dr.", "prof.", "sr.", "jr.", "st.", "vs.", "e.g.", "i.e.", "cf.",
     "no.", "fig.", "approx.", "inc.", "ltd.", "co.", "a.m.", "p.m.", "u.s.", "u.k."}
)

#: A bullet line: ``-``, ``*``, ``+``, ``•`` (and kin) or ``1.`` / ``1)`` then a space.
BULLET_RE = re.compile(r"^[ \t]*(?:[-*+\u2022\u2023\u25aa\u25e6\u2013]|\d{1,3}[.)])[ \t]+\S",
                       re.MULTILINE)

_NUMBER_RE = re.compile(
    r"(?<![\w.])([-+\u2212]?)(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?!\d)"
)
_FENCE_RE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_COMMAS = (",", "\uff0c", "\u060c", "\u3001")


def normalize(text: str) -> str:
    """NFKC-normalise, unify curly apostrophes and case-fold, for comparisons.

    >>> normalize("Ｃafé’S")
    "café's"
    """
    return unicodedata.normalize("NFKC", text).replace("\u2019", "'").casefold()


def words(text: str) -> list[str]:
    """The words of ``text`` as written (see the module docstring for the rules).

    >>> words("Well-known -- e-mail: 3.14, 1,000 & don't!")
    ['Well-known', 'e-mail', '3.14', '1,000', "don't"]
    >>> words("")
    []
    """
    return _WORD_RE.findall(text)


def word_count(text: str) -> int:
    """How many words ``text`` holds; hyphenated and apostrophised words count once.

    >>> word_count("  -- ... 🙂 ")
    0
    >>> word_count("Read. Think -- write!")
    3
    """
    return len(words(text))


def sentences(text: str) -> list[str]:
    """Split ``text`` into sentences; fragments without any word are dropped.

    >>> sentences("It works, e.g. here. Pi is 3.14! Right?! ok")
    ['It works, e.g. here.', 'Pi is 3.14!', 'Right?!', 'ok']
    """
    found: list[str] = []
    start = 0
    for match in _SENTENCE_END_RE.finditer(text):
        if match.group().startswith("."):
            preceding = re.search(r"(\S+)$", text[: match.start() + 1])
            if preceding and preceding.group(1).casefold() in _ABBREVIATIONS:
                continue
        segment = text[start : match.end()].strip()
        if words(segment):
            found.append(segment)
        start = match.end()
    tail = text[start:].strip()
    if words(tail):
        found.append(tail)
    return found


def sentence_count(text: str) -> int:
    """How many sentences ``text`` holds (see :func:`sentences`).

    >>> sentence_count("No full stop at the end")
    1
    >>> sentence_count("...")
    0
    """
    return len(sentences(text))


def _token_sequence(text: str) -> list[str]:
    return [normalize(w) for w in words(text)]


def _contains_phrase(tokens: Sequence[str], phrase: Sequence[str]) -> bool:
    n = len(phrase)
    if n == 0:
        return False
    return any(list(tokens[i : i + n]) == list(phrase) for i in range(len(tokens) - n + 1))


def find_words(text: str, candidates: Iterable[str]) -> list[str]:
    """Which of ``candidates`` occur in ``text`` as whole words, case-insensitively.

    A candidate may be a phrase (``"next level"``); it matches a run of
    consecutive words. Candidates are returned in the order given.

    >>> find_words("Our team-building is next-level. Next level!", ["team", "next level", "our"])
    ['next level', 'our']
    """
    tokens = _token_sequence(text)
    return [c for c in candidates if _contains_phrase(tokens, _token_sequence(c))]


def _has_letters(text: str) -> bool:
    return any(ch.isalpha() for ch in text)


def _is_titlecase(ch: str) -> bool:
    return unicodedata.category(ch) == "Lt"  # e.g. "ǅ"; str.istitle() is True for "A" too


def is_lowercase(text: str) -> bool:
    """True when ``text`` has letters and none of them is upper- or title-case.

    >>> is_lowercase("all small, even é and 42")
    True
    >>> is_lowercase("one Capital"), is_lowercase("123")
    (False, False)
    """
    return _has_letters(text) and not any(ch.isupper() or _is_titlecase(ch) for ch in text)


def is_uppercase(text: str) -> bool:
    """True when ``text`` has letters and none of them is lower- or title-case.

    Letters without case (CJK, Arabic) are neither, so they do not fail it.

    >>> is_uppercase("LOUD AND CLEAR, 100%"), is_uppercase("LOUD but not")
    (True, False)
    """
    return _has_letters(text) and not any(ch.islower() or _is_titlecase(ch) for ch in text)


def has_commas(text: str) -> bool:
    """True when ``text`` holds a comma (ASCII, full-width, Arabic or ideographic).

    >>> has_commas("no commas here"), has_commas("one，two")
    (False, True)
    """
    return any(c in text for c in _COMMAS)


def bullet_count(text: str) -> int:
    """How many lines of ``text`` are list items (``-``, ``*``, ``•``, ``1.``, ``2)``).

    >>> bullet_count("Intro\\n- one\\n  * two\\n3) three\\n*not a bullet*\\n---")
    3
    """
    return len(BULLET_RE.findall(text))


def starts_with(text: str, prefix: str) -> bool:
    """True when ``text`` (leading whitespace ignored) starts with ``prefix``, any case.

    >>> starts_with("  Dear reader, hi", "dear reader")
    True
    """
    return normalize(text.strip()).startswith(normalize(prefix.strip()))


def ends_with(text: str, suffix: str) -> bool:
    """True when ``text`` (trailing whitespace ignored) ends with ``suffix``, any case.

    Markdown emphasis closing the text (``**...?**``) is ignored.

    >>> ends_with("Any other questions?\\n", "any other QUESTIONS?")
    True
    >>> ends_with("**Any other questions?**  ", "Any other questions?")
    True
    """
    body, wanted = normalize(text.strip()), normalize(suffix.strip())
    return body.endswith(wanted) or body.rstrip("*_ \t\n").endswith(wanted)


def parse_number(token: str) -> float:
    """Parse one number as written in text: thousands commas, signs, Unicode minus.

    Raises ``ValueError`` with the offending text when it is not a number.

    >>> parse_number("−1,234.5"), parse_number("+7"), parse_number(".5")
    (-1234.5, 7.0, 0.5)
    """
    cleaned = token.strip().replace("\u2212", "-").replace(",", "")
    if not re.fullmatch(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)", cleaned):
        raise ConfigError(f"{token!r} is not a number (expected e.g. 42, -3.5 or 1,234)")
    return float(cleaned)


def numbers(text: str) -> list[float]:
    """Every number in ``text``, in order (see the module docstring for the rules).

    >>> numbers("pages 10-12, cost $1,250.00, delta -3, v2 and 50%")
    [10.0, 12.0, 1250.0, -3.0, 50.0]
    """
    return [parse_number(sign + digits) for sign, digits in _NUMBER_RE.findall(text)]


def last_number(text: str) -> float | None:
    """The last number in ``text``, or ``None`` when there is none.

    >>> last_number("So 3 + 4 = **7**."), last_number("no digits")
    (7.0, None)
    """
    found = numbers(text)
    return found[-1] if found else None


def last_line(text: str) -> str:
    """The last non-blank line of ``text`` (empty string when there is none).

    >>> last_line("work...\\nAnswer: Paris\\n\\n")
    'Answer: Paris'
    """
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def extract_code(text: str, languages: Sequence[str] = ("python", "py", "python3", "")) -> str:
    """The code of the first fenced block in one of ``languages``, else ``text`` itself.

    Languages are tried in order, so a ```` ```python ```` block wins over an
    unlabelled one. Without any fence the whole text is taken as code.

    >>> extract_code("Here:\\n```python\\ndef f():\\n    return 1\\n```\\nDone.")
    'def f():\\n    return 1\\n'
    >>> extract_code("x = 1")
    'x = 1'
    """
    blocks = [(m.group(1).casefold(), m.group(2)) for m in _FENCE_RE.finditer(text)]
    for language in languages:
        for label, body in blocks:
            if label == language:
                return body
    return text


def parse_json_output(text: str) -> tuple[bool, Any, str]:
    """Parse ``text`` as JSON: ``(ok, value, error)``.

    The whole text must be one JSON document; surrounding whitespace and a
    single enclosing ```` ```json ```` fence are tolerated because chat models
    add them out of habit.

    >>> parse_json_output('```json\\n{"a": 1}\\n```')
    (True, {'a': 1}, '')
    >>> parse_json_output("{'a': 1}")[0]
    False
    """
    body = text.strip()
    fenced = _FENCE_RE.fullmatch(body)
    if fenced and fenced.group(1).casefold() in ("json", ""):
        body = fenced.group(2).strip()
    if not body:
        return False, None, "the output is empty"
    try:
        return True, json.loads(body), ""
    except json.JSONDecodeError as err:
        return False, None, f"invalid JSON: {err.msg} at line {err.lineno} column {err.colno}"
