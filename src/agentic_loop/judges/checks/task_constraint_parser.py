"""Read the verifiable constraints a task states in plain words.

"Write a tagline in EXACTLY 12 words. Must avoid the words 'we' and 'our'."
already says how to check it: ``exact_words=12, exclude_words=["we", "our"]``.
Parsing that deterministically lets Python verify what the task demands
instead of asking a model whether it complied; a model asked that question
says yes to everything. Only explicit demands are recognised (counts in
digits or words, "at least" / "no fewer than" / "less than" / "between";
IFEval-style layout, frequency and language instructions, see
:mod:`agentic_loop.judges.checks.task_layout_phrases`; the tools an agent must use or
verify with and its step limits, see :mod:`agentic_loop.judges.checks.tool_phrases`); a
task that merely mentions a paragraph or a title states nothing, and anything else is left to the
rubric's other features.

Example:
    >>> constraints_from_task("Write a tagline for a bookstore in EXACTLY 12 words. "
    ...                       "Must avoid the words 'we', 'our', and 'discover'.")
    {'exact_words': 12, 'exclude_words': ['we', 'our', 'discover']}
    >>> constraints_from_task("Write a 3-sentence tagline (30-80 words total) for a cafe.")
    {'word_count': (30, 80), 'sentence_count': (3, 3)}
    >>> constraints_from_task("Your response should contain less than 5 sentences. "
    ...                       "In your entire response, refrain from the use of any commas.")
    {'sentence_count': (1, 4), 'no_commas': True}
    >>> constraints_from_task("What is 53 * 47? Use the calculator, at most 5 steps.")
    {'tool_called': 'calculator', 'max_steps': 5}
    >>> constraints_from_task("Tagline for museum.")
    {}
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from agentic_loop.judges.checks import task_layout_phrases as layout
from agentic_loop.judges.checks import tool_phrases
from agentic_loop.judges.checks.constraint_phrases import FLAGS, TaskText

__all__ = ["constraints_from_task"]

_OPEN, _CLOSE = "'\"‘“", "'\"’”"
_QUOTED_LIST = (rf"((?:[{_OPEN}][^{_OPEN}{_CLOSE}]+[{_CLOSE}]"
                rf"(?:\s*,?\s*(?:and|or)\s+|\s*,\s*)?)+)")
_RESPONSE = r"(?:the|your)\s+(?:entire\s+)?(?:response|answer|reply|output)"


def _quoted_words(text: str) -> list[str]:
    return [w.strip() for w in re.findall(rf"[{_OPEN}]([^{_OPEN}{_CLOSE}]+)[{_CLOSE}]", text)
            if w.strip()]


def _bare_list(text: str) -> list[str]:
    """ "sleep, cloth, and stop" -> the words (each at most three words long)."""
    items = [w.strip(" '\"‘’“”") for w in re.split(r",|\band\b|\bor\b", text)]
    items = [w for w in items if w]
    return items if items and all(len(w.split()) <= 3 for w in items) else []


def _word_counts(text: TaskText) -> dict[str, Any]:
    exact = text.exact_relation(r"words?")
    found = text.count(r"words?", approximate=True)
    if found is None:
        return {}
    if found[0] == found[1] and (exact or found[0] > 0):
        plain = re.search(r"\bin\s+\x00", text.text) or exact
        return {"exact_words": found[0]} if plain else {}
    return {"word_count": found}


#: "Do not mention", "must never contain", "don't say": a demand turned into its opposite.
_VERB = (r"(?:use|using|include|including|mention|mentioning|contain|containing|say|saying|"
         r"write|writing|put|add|have)")
_NEGATED_VERB = (rf"(?:(?:(?:do|does|must|should|may|can|will|shall)\s+not|\w+n't|cannot|never)"
                 rf"(?:\s+(?:ever|once|at\s+all))?\s+{_VERB})")
#: Any negation before a word list: an "include" reading of it would ask for the opposite.
_NEGATION = (r"\b(?:not|never|no|nor|without|avoid\w*|refrain\w*|exclud\w*|omit\w*|ban\w*|"
             r"forbid\w*|prohibit\w*)\b"
             r"|n't\b|\bleave\s+out\b|\bfree\s+of\b")


def _exclude_words(text: TaskText) -> list[str] | None:
    verbs = (rf"\b(?:avoid|without|exclude|omit|leave\s+out|refrain\s+from(?:\s+using)?|"
             rf"not\s+include|{_NEGATED_VERB})")
    m = text.search(rf"{verbs}\s+(?:using\s+)?(?:any\s+of\s+)?(?:the\s+)?(?:(?:key)?words?\s*:?"
                    rf"\s*)?{_QUOTED_LIST}")
    if m:
        return _quoted_words(m.group(1))
    m = text.search(rf"{verbs}\s+(?:the\s+)?(?:key)?words?\s+(?P<list>[^.;:\n\"“]+?)\s+in\s+"
                    rf"{_RESPONSE}", take=False)
    if m and (words := _bare_list(m.group("list"))):
        text.take(m)
        return words
    return None


def _include_words(text: TaskText) -> list[str] | None:
    m = text.search(rf"\b(?:include|use|mention|contain)s?\s+(?:the\s+)?(?:key)?words?\s*:?\s*"
                    rf"{_QUOTED_LIST}", take=False)
    if m and not _negated(text.text, m.start()):
        text.take(m)
        return _quoted_words(m.group(1)) or None
    m = text.search(rf"\binclude\s+(?:the\s+)?keywords?\s+(?P<list>[^.;:\n\"“]+?)\s+(?:in\s+"
                    rf"{_RESPONSE}|(?=[.;\n]|$))", take=False)
    if m and not _negated(text.text, m.start()) and (words := _bare_list(m.group("list"))):
        text.take(m)
        return words
    return None


def _negated(text: str, start: int) -> bool:
    """True when the clause before ``start`` negates what follows ("do not ever mention")."""
    clause = re.split(r"[.;!?\n]|\bbut\b", text[:start])[-1]
    return re.search(_NEGATION, clause, re.IGNORECASE) is not None


def _case(text: TaskText) -> dict[str, bool]:
    if text.search(r"\b(?:all|only|entirely|in)\s+(?:small\s+)?lower[- ]?case\b"
                   r"|\bno\s+capital\s+letters\s+(?:are\s+)?allowed"):
        return {"lowercase": True}
    if text.search(r"\b(?:all|only|entirely|in)\s+(?:upper[- ]?case|capital\s+letters|caps)\b"
                   r"|\bcapital\s+letters\s+only\b"):
        return {"uppercase": True}
    return {}


def _no_commas(text: TaskText) -> bool | None:
    verb = r"(?:use|using|include|including|contain|containing|add|put|write|have|type)"
    return True if text.search(
        rf"\b(?:refrain\s+from|avoid|without|(?:do\s+not|don't|never|must\s+not|should\s+not|"
        rf"cannot|can't)\s+{verb})(?:\s+(?:the\s+use\s+of|{verb}|any|a\s+single|of))*"
        rf"\s+commas?\b|\bno\s+commas?\b|\bcommas?\s+(?:are|is)\s+not\s+(?:allowed|permitted)"
        rf"|\bzero\s+commas\b") else None


def _json(text: TaskText) -> bool | None:
    if re.search(r"\b(?:valid\s+)?json\b", text.text, FLAGS) and text.search(
            r"\b(?:as|in|return|output|reply with|respond with|valid)\s+"
            r"(?:a\s+|an\s+)?(?:valid\s+)?json"):
        return True
    return None


def _affix(verb: str) -> Callable[[TaskText], str | None]:
    """How the whole answer must start; "one per line starting with '- '" says how each
    line starts (a bullet list's own check), not the answer, so it is not read here."""
    def read(text: TaskText) -> str | None:
        m = text.search(rf"(?<!line )(?<!lines )(?<!bullet )(?<!item )"
                        rf"\b{verb}(?:s|ing)? with\s+[{_OPEN}]([^{_OPEN}{_CLOSE}]+)[{_CLOSE}]")
        return m.group(1) if m else None

    return read


def _end_phrase(text: TaskText) -> str | None:
    m = text.search(r"\b(?:finish|end|conclude)\s+(?:your\s+\w+\s+|it\s+)?with\s+(?:this|the"
                    r"(?:\s+following)?)\s+exact\s+phrase\s*:?\s*(?:[\"“](?P<q>[^\"”\n]+)[\"”]"
                    r"|(?P<u>[^\n]+?[.?!])(?=\.?\s+(?:No|Nothing)\s+other\s+words|\.?\s*$"
                    r"|\.?\s+[A-Z]))")
    if not m:
        return None
    text.search(r"\b(?:No|Nothing)\s+other\s+words\s+should\s+follow[^.\n]*\.?")
    return (m.group("q") or m.group("u")).strip()


def _tools(keyword: str) -> Callable[[TaskText], str | list[str] | None]:
    """The tools the task demands for ``keyword`` (one name, or a list of several)."""
    def read(text: TaskText) -> str | list[str] | None:
        names = tool_phrases.tool_demands(text.original).get(keyword)
        return None if not names else names[0] if len(names) == 1 else names

    return read


def _counted(noun: str, floor: int) -> Callable[[TaskText], tuple[int, int | None] | None]:
    return lambda text: text.count(noun, floor=floor)


# (keyword, reader) in reading order: readers that consume phrases others could misread come
# first ("3 words in all caps" is not a word count, "the word X ... 3 times" not a frequency
# of X-words); the result is ordered by _ORDER.
_READERS: tuple[tuple[str, Callable[[TaskText], Any]], ...] = (
    ("tool_called", _tools("tool_called")),
    ("verified_with", _tools("verified_with")),
    ("max_tool_calls", tool_phrases.max_tool_calls),
    ("max_steps", tool_phrases.max_steps),
    ("repeat_request", layout.repeat_request),
    ("capital_word_count", layout.capital_word_count),
    ("letter_frequency", layout.letter_frequency),
    ("word_frequency", layout.word_frequency),
    ("highlight_count", layout.highlight_count),
    ("placeholder_count", layout.placeholder_count),
    ("section_count", layout.section_count),
    ("paragraph_count", layout.paragraph_count),
    ("paragraph_first_word", layout.paragraph_first_word),
    ("title", layout.title),
    ("postscript", layout.postscript),
    ("quoted", layout.quoted),
    ("two_responses", layout.two_responses),
    ("first_word", layout.first_word),
    ("ends_with", _end_phrase),
    ("language", layout.language),
    ("sentence_count", _counted(r"sentences?", 1)),
    # "5 bullet points", and "List exactly 3 birds as bullet points" (the count is of items).
    ("bullet_count", _counted(r"bullet(?:s|\s+points?)|bullet-points?|(?:[a-z-]+\s+){1,3}?as\s+"
                              r"(?:a\s+)?(?:markdown\s+)?bullet(?:ed)?(?:s|\s+points?|\s+list|"
                              r"\s+items?|-points?)", 0)),
    ("exclude_words", _exclude_words),
    ("include_words", _include_words),
    ("no_commas", _no_commas),
    ("json", _json),
    ("starts_with", _affix("start")),
)
_ORDER = ("exact_words", "word_count", "sentence_count", "bullet_count", "exclude_words",
          "include_words", "lowercase", "uppercase", "no_commas", "json", "starts_with",
          "ends_with", *(k for k, _ in _READERS))


def constraints_from_task(task: str) -> dict[str, Any]:
    """Constraint keywords (as for ``Rubric.for_constraints``) stated in ``task``.

    >>> constraints_from_task("Answer with at least 300 words. Your answer must contain a "
    ...                       "title, wrapped in double angular brackets, such as <<poem of joy>>.")
    {'word_count': (300, None), 'title': True}
    >>> constraints_from_task("Summarize the second paragraph and suggest a title.")
    {}
    >>> constraints_from_task("List exactly 3 birds as bullet points, one per line starting "
    ...                       "with '- '.")
    {'bullet_count': (3, 3)}
    """
    text = TaskText(task)
    found: dict[str, Any] = {}
    for keyword, read in _READERS:
        if keyword == "sentence_count":  # after the phrases that hold "words" of their own
            found.update(_word_counts(text))
            found.update(_case(text))
        value = read(text)
        if value is not None:
            found[keyword] = value
    if "ends_with" not in found and (value := _affix("end")(text)) is not None:
        found["ends_with"] = value
    return {k: found[k] for k in sorted(found, key=_ORDER.index)}
