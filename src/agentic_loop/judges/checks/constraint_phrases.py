"""How a task states a count: numbers in digits or words, and the relation around them.

"at least 300 words", "no fewer than three paragraphs", "less than 5
sentences", "between 10 and 12 words", "5 bullet points or more", "twice":
one reader for all of them, so every count constraint the task parser
recognises is read the same way. :class:`TaskText` lets each recogniser
*consume* what it matched, so one phrase never feeds two constraints ("words
with all capital letters should appear 3 times" is not also "all capital
letters").

Example:
    >>> text = TaskText("Answer with no fewer than three paragraphs, please.")
    >>> text.count(r"paragraphs?")
    (3, None)
    >>> text.count(r"paragraphs?") is None        # consumed
    True
    >>> TaskText("Summarize the first 3 paragraphs.").count(r"paragraphs?") is None
    True
    >>> TaskText("It should appear less than 4 times").times()
    (0, 3)
"""

from __future__ import annotations

import math
import re

__all__ = ["FLAGS", "N", "NUMBER_WORDS", "ORDINALS", "TaskText", "number"]

FLAGS = re.IGNORECASE

NUMBER_WORDS = {"zero": 0, "one": 1, "single": 1, "two": 2, "three": 3, "four": 4, "five": 5,
                "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11,
                "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
                "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20}
ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6,
            "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10}
#: A count in digits or words.
N = r"(?:\d+|" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True)) + r")"

_AT_LEAST = ("at least", "no fewer than", "no less than", "not less than", "not fewer than",
             "a minimum of", "minimum of", "at minimum", "minimum", "min")
_MORE_THAN = ("more than", "over", "greater than", "in excess of")
_AT_MOST = ("at most", "no more than", "not more than", "a maximum of", "maximum of", "maximum",
            "max", "up to", "not exceeding", "no longer than", "within")
_LESS_THAN = ("less than", "fewer than", "under", "below")
_EXACT = ("exactly", "precisely", "just", "only")
_ABOUT = ("about", "around", "approximately", "roughly")
_RELATIONS = sorted(_AT_LEAST + _MORE_THAN + _AT_MOST + _LESS_THAN + _EXACT + _ABOUT,
                    key=len, reverse=True)
_REL = "|".join(re.escape(r) for r in _RELATIONS)
_ADJECTIVE = (r"(?:short|long|brief|concise|distinct|separate|different|full|complete|"
              r"markdown|numbered|unique|whole)")
#: Words that, just before a count, make it a reference ("the first 3 paragraphs"), not a demand.
_REFERENCE = {"the", "these", "those", "first", "last", "next", "following", "previous",
              "above", "below", "other", "remaining", "top", "its", "their", "his", "her"}


def number(text: str) -> int:
    """The value of a count written in digits or words.

    >>> number("12"), number("Three"), number("single")
    (12, 3, 1)
    """
    text = text.strip().lower()
    return int(text) if text.isdigit() else NUMBER_WORDS[text]


def _count_re(noun: str) -> re.Pattern[str]:
    return re.compile(
        rf"\b(?:between\s+(?P<a>{N})\s+and\s+(?P<b>{N})|from\s+(?P<c>{N})\s+to\s+(?P<d>{N})"
        rf"|(?P<e>\d+)\s*(?:-|–|to)\s*(?P<f>\d+)"
        rf"|(?:(?P<rel>{_REL})\s+)?(?:a\s+)?(?P<n>{N})(?:\s+or\s+(?P<post>more|fewer|less))?)"
        rf"(?:\s*-\s*|\s+)(?:{_ADJECTIVE}\s+)?(?:{noun})\b"
        rf"(?:\s+(?:or\s+)?(?P<post2>or more|or fewer|or less|at most|at least|maximum|minimum"
        rf"|max|min)\b)?", FLAGS)


class TaskText:
    """A task's text from which recognisers take (and blank out) the phrases they read."""

    def __init__(self, text: str) -> None:
        self.original = text
        self.text = text

    def take(self, match: re.Match[str], group: int | str = 0) -> None:
        """Blank out ``match`` (or one group of it) so no later recogniser reads it again."""
        start, end = match.span(group)
        self.text = self.text[:start] + "\x00" * (end - start) + self.text[end:]

    def search(self, pattern: str | re.Pattern[str], *, take: bool = True) -> re.Match[str] | None:
        """The first match of ``pattern`` (case-insensitive), consumed unless ``take=False``."""
        found = (pattern if isinstance(pattern, re.Pattern) else re.compile(pattern, FLAGS)
                 ).search(self.text)
        if found and take:
            self.take(found)
        return found

    def count_after(self, match: re.Match[str], noun: str | None = None, *, floor: int = 0,
                    window: int = 90) -> tuple[int, int | None] | None:
        """The count stated just after ``match`` (of ``noun``, or "n times" when None).

        When there is one, both the match and the count phrase are consumed.
        """
        tail = TaskText(self.text[match.end():match.end() + window])
        found = tail.times() if noun is None else tail.count(noun, floor=floor)
        if found is not None:
            used = tail.text.rindex("\x00") + 1
            self.text = (self.text[:match.start()] + "\x00" * (match.end() + used - match.start())
                         + self.text[match.end() + used:])
        return found

    def _is_reference(self, start: int) -> bool:
        before = re.findall(r"[a-z]+", self.text[max(0, start - 30):start].lower())
        return bool(before) and before[-1] in _REFERENCE

    def count(self, noun: str, *, floor: int = 1,
              approximate: bool = False) -> tuple[int, int | None] | None:
        """The ``(min, max)`` stated for ``noun`` (a regex), consumed; None when none is.

        ``floor`` is the minimum of "at most n"; "about n" gives a +-20%
        range when ``approximate``, and is no constraint otherwise.
        """
        for m in _count_re(noun).finditer(self.text):
            found = self._read(m, floor, approximate)
            if found is not None and not (m.group("n") and not m.group("rel")
                                          and self._is_reference(m.start())):
                self.take(m)
                return found
        return None

    def exact_relation(self, noun: str) -> bool:
        """True when the next count of ``noun`` is stated with "exactly" or "precisely"."""
        for m in _count_re(noun).finditer(self.text):
            rel = (m.group("rel") or "").lower()
            return m.group("n") is not None and not m.group("post") and not m.group("post2") \
                and rel in ("exactly", "precisely")
        return False

    def times(self) -> tuple[int, int | None] | None:
        """The ``(min, max)`` of "at least 3 times", "twice", "less than 2 times"; consumed."""
        words = {"once": 1, "twice": 2, "thrice": 3}
        m = re.search(rf"\b(?:(?P<rel>{_REL})\s+)?(?P<w>once|twice|thrice)\b", self.text, FLAGS)
        if m:
            self.take(m)
            return _relate((m.group("rel") or "").lower(), words[m.group("w").lower()], 0, False)
        return self.count(r"times?", floor=0)

    @staticmethod
    def _read(m: re.Match[str], floor: int, approximate: bool) -> tuple[int, int | None] | None:
        for lo_key, hi_key in (("a", "b"), ("c", "d"), ("e", "f")):
            if m.group(lo_key):
                lo, hi = sorted((number(m.group(lo_key)), number(m.group(hi_key))))
                return lo, hi
        rel = (m.group("rel") or "").lower()
        post = (m.group("post") or m.group("post2") or "").lower().replace("or ", "")
        rel = {"more": "at least", "fewer": "at most", "less": "at most", "at most": "at most",
               "at least": "at least", "maximum": "at most", "max": "at most",
               "minimum": "at least", "min": "at least"}.get(post, rel)
        return _relate(rel, number(m.group("n")), floor, approximate)


def _relate(rel: str, n: int, floor: int, approximate: bool) -> tuple[int, int | None] | None:
    if rel in _AT_LEAST:
        return n, None
    if rel in _MORE_THAN:
        return n + 1, None
    if rel in _AT_MOST:
        return min(floor, n), n
    if rel in _LESS_THAN:
        return min(floor, max(n - 1, 0)), max(n - 1, 0)
    if rel in _ABOUT:
        return (math.floor(0.8 * n), math.ceil(1.2 * n)) if approximate else None
    return n, n
