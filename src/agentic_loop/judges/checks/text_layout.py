"""Pure-Python measurements of an answer's layout: paragraphs, sections, highlights, marks.

Instruction-following prompts ask for shapes as much as for words: "3
paragraphs separated by ***", "a title in <<double angular brackets>>", "a
postscript starting with P.S.", "at least 2 *highlighted* sections". These are
facts Python can read off the text, so the checks built on them (see
:mod:`agentic_loop.judges.checks.constraint_builders_ifeval`) never ask a model.

Conventions (chosen to be lenient with how chat models format, strict with
what was asked):

* **Paragraphs** are the chunks between blank lines (``"blank_line"``) or
  between markdown divider lines of three or more asterisks
  (``"***"``); chunks without any word are not paragraphs. With
  ``"blank_line"`` a ``***`` line also separates, so a divided answer counts
  the same either way.
* **Highlights** are ``*text*`` or ``**text**`` spans on one line with some
  word inside; list bullets (``* item``) are not highlights.
* **Section markers** are lines that start (after markdown ``#``, ``*`` or
  ``>``) with the marker word and a number or letter: ``SECTION 1``,
  ``## Section 2:``, ``**Part III**``; case is ignored.
* **Placeholders** are ``[bracketed text]`` that is not a markdown link.
* Markdown emphasis, leading quotes and whitespace are ignored around first
  words and postscripts; comparisons are NFKC-normalised and case-folded.

Example:
    >>> paragraphs("One.\\n\\n***\\n\\nTwo.\\n\\nThree.", "***")
    ['One.', 'Two.\\n\\nThree.']
    >>> highlight_count("*Bold* claim and **another** one\\n* a bullet")
    2
    >>> section_count("SECTION 1\\nhi\\n## Section 2: more", "Section")
    2
    >>> placeholder_count("Meet at [address] on [date]; see [docs](http://x).")
    2
"""

from __future__ import annotations

import re

from agentic_loop.judges.checks.text_measures import normalize, words

__all__ = [
    "PARAGRAPH_SEPARATORS",
    "capital_word_count",
    "first_word",
    "has_postscript",
    "has_title",
    "highlight_count",
    "letter_count",
    "paragraphs",
    "placeholder_count",
    "repeats_request",
    "section_count",
    "split_responses",
    "word_frequency",
    "wrapped_in_quotes",
]

#: How paragraphs may be separated: blank lines, or a markdown divider line of asterisks.
PARAGRAPH_SEPARATORS = ("blank_line", "***")

_DIVIDER = r"^[ \t]*\*[ \t]*\*[ \t]*\*[ \t*]*$"
_DIVIDER_RE = re.compile(_DIVIDER, re.MULTILINE)
_BLANK_OR_DIVIDER_RE = re.compile(rf"\n[ \t]*\n|{_DIVIDER}", re.MULTILINE)
_HIGHLIGHT_RE = re.compile(r"(?<![*\w])(\*\*?)(?=\S)([^*\n]+?)(?<=\S)\1(?![*\w])")
_PLACEHOLDER_RE = re.compile(r"\[([^\[\]\n]*[^\W_][^\[\]\n]*)\](?!\()")
_TITLE_RE = re.compile(r"<<\s*([^<>\n]*?[^\W_][^<>\n]*?)\s*>>")
_LEAD_RE = re.compile(r"^[\s>#*_`~\"'“‘(\[-]+")
_OPEN_QUOTES = ('"', "\u201c", "\u201e", "\u00ab", "\uff02")
_CLOSE_QUOTES = ('"', "\u201d", "\u201c", "\u00bb", "\uff02")


def paragraphs(text: str, separator: str = "blank_line") -> list[str]:
    """The paragraphs of ``text`` (stripped, word-bearing chunks) under ``separator``.

    >>> paragraphs("a b\\n\\n\\n  c d  \\n \\n")
    ['a b', 'c d']
    >>> paragraphs("a\\n\\nb", "***")
    ['a\\n\\nb']
    """
    splitter = _DIVIDER_RE if separator == "***" else _BLANK_OR_DIVIDER_RE
    chunks = splitter.split(text.replace("\r\n", "\n"))
    return [c.strip() for c in chunks if words(c)]


def first_word(text: str) -> str:
    """The first word of ``text``, markdown and leading punctuation ignored ("" when none).

    >>> first_word("  **Summer** is here"), first_word("## 'Hello,' she said"), first_word("--")
    ('Summer', 'Hello', '')
    """
    found = words(_LEAD_RE.sub("", text))
    return found[0] if found else ""


def highlight_count(text: str) -> int:
    """How many ``*highlighted*`` or ``**bold**`` spans with a word inside ``text`` holds.

    >>> highlight_count("**Note:** see *this* and * that * and 2*3*4")
    2
    """
    return sum(1 for m in _HIGHLIGHT_RE.finditer(text) if words(m.group(2)))


def section_count(text: str, marker: str = "Section") -> int:
    """How many lines start with ``marker`` and a number (or Roman numeral or letter).

    >>> section_count("Part 1\\nx\\nPART II\\ny\\nsee part 3 below", "part")
    2
    """
    pattern = re.compile(
        rf"^[ \t>#*_]*{re.escape(marker.strip())}[ \t]+(?:\d+|[ivxlc]+|[a-z])\b",
        re.IGNORECASE | re.MULTILINE)
    return len(pattern.findall(text))


def placeholder_count(text: str) -> int:
    """How many ``[placeholders]`` with a word inside ``text`` holds (links are not).

    >>> placeholder_count("[name], [ ], [x](url), [your city]")
    2
    """
    return len(_PLACEHOLDER_RE.findall(text))


def has_title(text: str) -> bool:
    """True when ``text`` holds a title wrapped in double angular brackets, ``<<like this>>``.

    >>> has_title("<<Poem of Joy>>\\nLines..."), has_title("<< >> no"), has_title("<Title>")
    (True, False, False)
    """
    return _TITLE_RE.search(text.replace("\u00ab\u00ab", "<<").replace("\u00bb\u00bb", ">>")) \
        is not None


def _marker_pattern(marker: str) -> str:
    letters = [ch for ch in marker.casefold() if ch.isalpha()]
    return r"\.?\s?".join(re.escape(ch) for ch in letters) + r"\.?"


def has_postscript(text: str, marker: str = "P.S.") -> bool:
    """True when a line after the first starts with ``marker`` (dots and spaces optional).

    A ``P.S.`` postscript does not count as a ``P.P.S`` one, nor the reverse.

    >>> has_postscript("Hi.\\n\\n**P.S.** Bring snacks."), has_postscript("Hi.\\nPS: ok")
    (True, True)
    >>> has_postscript("Hi.\\nP.P.S. later"), has_postscript("P.S. only line")
    (False, False)
    """
    lines = [ln for ln in text.replace("\r\n", "\n").split("\n") if ln.strip()]
    pattern = re.compile(rf"^[\s>*_]*{_marker_pattern(marker)}(?![a-z])", re.IGNORECASE)
    return any(pattern.match(normalize(line)) for line in lines[1:])


def wrapped_in_quotes(text: str) -> bool:
    """True when the whole of ``text`` (whitespace aside) is inside double quotation marks.

    >>> wrapped_in_quotes(' "Hello there." \\n'), wrapped_in_quotes("\u201cCurly\u201d")
    (True, True)
    >>> wrapped_in_quotes('"One" and "two"'), wrapped_in_quotes('"')
    (True, False)
    """
    body = text.strip()
    return (len(body) >= 2 and body.startswith(_OPEN_QUOTES) and body.endswith(_CLOSE_QUOTES)
            and bool(words(body)))


def capital_word_count(text: str) -> int:
    """How many words are written in capital letters only (``NASA``, ``I``; not ``Nasa``).

    >>> capital_word_count("I love NASA but not Nasa, 2024 or R2-D2!")
    3
    """
    return sum(1 for w in words(text) if w.isupper())


def word_frequency(text: str, word: str) -> int:
    """How many times ``word`` (or phrase) occurs in ``text`` as whole words, any case.

    >>> word_frequency("Rain, rain, go away; RAIN again. Rainy day.", "rain")
    3
    """
    tokens = [normalize(w) for w in words(text)]
    target = [normalize(w) for w in words(word)]
    n = len(target)
    if not n:
        return 0
    return sum(1 for i in range(len(tokens) - n + 1) if tokens[i:i + n] == target)


def letter_count(text: str, letter: str) -> int:
    """How many times ``letter`` occurs in ``text``, any case (accents kept apart).

    >>> letter_count("Quick quiz: Qatar?", "q")
    3
    """
    target = normalize(letter)
    return normalize(text).count(target) if target else 0


def split_responses(text: str, separator: str = "******") -> list[str]:
    """The non-blank parts of ``text`` between ``separator`` marks (6 asterisks by default).

    >>> split_responses("First.\\n******\\nSecond.")
    ['First.', 'Second.']
    """
    return [part.strip() for part in text.split(separator) if part.strip().strip("*").strip()]


def _flat(text: str) -> str:
    return " ".join(normalize(text).replace("\u201c", '"').replace("\u201d", '"').split())


def repeats_request(text: str, request: str) -> tuple[bool, str]:
    """``(repeated, rest)``: whether ``text`` opens with ``request`` word for word; what follows.

    Case, spacing and curly quotes are ignored; a quoted or markdown-bold
    repetition is accepted.

    >>> repeats_request("Write a haiku about rain.\\n\\nDrops on tin roofs...",
    ...                 "Write a  haiku about rain.")
    (True, 'drops on tin roofs...')
    >>> repeats_request("Sure! Write a haiku about rain. Drops", "Write a haiku about rain.")[0]
    False
    """
    body, wanted = _flat(text), _flat(request)
    for opening in ("", '"', "**", "> "):
        candidate = body[len(opening):] if body.startswith(opening) else None
        if candidate is not None and wanted and candidate.startswith(wanted):
            return True, candidate[len(wanted):].strip(' "*\n')
    return False, ""

