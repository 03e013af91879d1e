"""Read the verifiable constraints a task states in plain words.

"Write a tagline in EXACTLY 12 words. Must avoid the words 'we' and 'our'."
already says how to check it: ``exact_words=12, exclude_words=["we", "our"]``.
Parsing that deterministically lets Python verify what the task demands
instead of asking a model whether it complied; a model asked that question
says yes to everything. Only unambiguous phrasings are recognised; anything
else is left to the rubric's other features.

Example:
    >>> constraints_from_task("Write a tagline for a bookstore in EXACTLY 12 words. "
    ...                       "Must avoid the words 'we', 'our', and 'discover'.")
    {'exact_words': 12, 'exclude_words': ['we', 'our', 'discover']}
    >>> constraints_from_task("Write a 3-sentence tagline (30-80 words total) for a cafe.")
    {'word_count': (30, 80), 'sentence_count': (3, 3)}
    >>> constraints_from_task("Tagline for museum.")
    {}
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["constraints_from_task"]

_NUM_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
              "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
_N = r"(\d+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_FLAGS = re.IGNORECASE


def _num(text: str) -> int:
    return int(text) if text.isdigit() else _NUM_WORDS[text.lower()]


def _quoted_words(text: str) -> list[str]:
    return [w.strip() for w in re.findall(r"['\"‘“]([^'\"’”]+)['\"’”]", text) if w.strip()]


def constraints_from_task(task: str) -> dict[str, Any]:
    """Constraint keywords (as for ``Rubric.for_constraints``) stated in ``task``."""
    found: dict[str, Any] = {}
    if m := re.search(rf"\b(?:exactly|precisely)\s+{_N}\s+words?\b", task, _FLAGS):
        found["exact_words"] = _num(m.group(1))
    elif m := re.search(r"\(?\b(\d+)\s*(?:-|–|to)\s*(\d+)\s+words?\b", task, _FLAGS):
        lo, hi = sorted((int(m.group(1)), int(m.group(2))))
        found["word_count"] = (lo, hi)
    elif m := re.search(rf"\b(?:at most|no more than|under|fewer than|up to)\s+{_N}\s+words?\b",
                        task, _FLAGS):
        limit = _num(m.group(1)) - (1 if m.group(0).lower().startswith(("under", "fewer")) else 0)
        found["word_count"] = (1, limit)
    elif m := re.search(rf"\b(?:at least|no fewer than|more than)\s+{_N}\s+words?\b", task, _FLAGS):
        floor = _num(m.group(1)) + (1 if m.group(0).lower().startswith("more") else 0)
        found["word_count"] = (floor, None)
    elif m := re.search(rf"\bin\s+{_N}\s+words?\b", task, _FLAGS):
        found["exact_words"] = _num(m.group(1))
    if m := re.search(rf"\b(?:exactly\s+)?{_N}[- ]sentences?\b", task, _FLAGS):
        n = _num(m.group(1))
        found["sentence_count"] = (n, n)
    if m := re.search(rf"\b(?:exactly\s+)?{_N}\s+bullet(?:s| points?)\b", task, _FLAGS):
        n = _num(m.group(1))
        found["bullet_count"] = (n, n)
    if m := re.search(r"\b(?:avoid|without|must not use|do not use|don't use|never use|exclude)"
                      r"\s+(?:using\s+)?(?:the\s+)?words?\s*[:]?\s*((?:['\"‘“][^'\"’”]+['\"’”]"
                      r"(?:\s*,?\s*(?:and|or)\s+|\s*,\s*)?)+)", task, _FLAGS):
        found["exclude_words"] = _quoted_words(m.group(1))
    if m := re.search(r"\b(?:include|use|mention|contain)s?\s+(?:the\s+)?words?\s*[:]?\s*"
                      r"((?:['\"‘“][^'\"’”]+['\"’”](?:\s*,?\s*and\s+|\s*,\s*)?)+)", task, _FLAGS):
        words = [w for w in _quoted_words(m.group(1)) if w not in found.get("exclude_words", [])]
        if words:
            found["include_words"] = words
    if re.search(r"\b(?:all|only|entirely|in)\s+lower[- ]?case\b", task, _FLAGS):
        found["lowercase"] = True
    elif re.search(r"\b(?:all|only|entirely|in)\s+(?:upper[- ]?case|capital letters|caps)\b",
                   task, _FLAGS):
        found["uppercase"] = True
    if re.search(r"\b(?:no|without(?: any)?|do not use|don't use)\s+commas?\b", task, _FLAGS):
        found["no_commas"] = True
    if re.search(r"\b(?:valid\s+)?json\b", task, _FLAGS) and re.search(
            r"\b(?:as|in|return|output|reply with|respond with|valid)\s+"
            r"(?:a\s+|an\s+)?(?:valid\s+)?json",
            task, _FLAGS):
        found["json"] = True
    if m := re.search(r"\bstart(?:s|ing)? with\s+['\"‘“]([^'\"’”]+)['\"’”]", task, _FLAGS):
        found["starts_with"] = m.group(1)
    if m := re.search(r"\bend(?:s|ing)? with\s+['\"‘“]([^'\"’”]+)['\"’”]", task, _FLAGS):
        found["ends_with"] = m.group(1)
    return found
