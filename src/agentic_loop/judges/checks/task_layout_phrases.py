"""Recognisers of the layout, frequency and language constraints a task states in words.

Each recogniser reads one kind of instruction-following demand ("Highlight at
least 2 sections with markdown", "a title wrapped in double angular
brackets", "the letter q should appear at least 5 times", "Your ENTIRE
response should be in Spanish") from a :class:`TaskText`, consumes the phrase
it read and returns the ``Rubric.for_constraints`` value, or None. They only
fire on explicit demands: a task that merely mentions a paragraph, a title or
a section states no constraint. :mod:`agentic_loop.judges.checks.task_constraint_parser`
runs them in order.

Example:
    >>> text = TaskText("Write a poem. Include a title wrapped in double angular brackets, "
    ...                 "such as <<poem of joy>>. Highlight at least 2 sections with markdown.")
    >>> title(text), highlight_count(text)
    (True, (2, None))
    >>> title(TaskText("Suggest a title for my novel."))
"""

from __future__ import annotations

import re
from typing import Any

from agentic_loop.judges.checks.constraint_phrases import FLAGS, ORDINALS, N, TaskText, number
from agentic_loop.judges.checks.language_id import LANGUAGE_NAMES

__all__ = [
    "capital_word_count", "first_word", "highlight_count", "language", "letter_frequency",
    "paragraph_count", "paragraph_first_word", "placeholder_count", "postscript", "quoted",
    "repeat_request", "section_count", "title", "two_responses", "word_frequency",
]

_RESPONSE = r"(?:response|answer|reply|output|text|essay|poem|story|letter|email|post|message)"
_ORD = "|".join(ORDINALS)
_WORD = r"['\"‘“]?(?P<word>[^\W\d_](?:[\w-]|['’](?=\w))*)['\"’”]?"
_LANGS = "|".join(sorted(LANGUAGE_NAMES.values(), key=len, reverse=True))


def capital_word_count(text: TaskText) -> tuple[int, int | None] | None:
    """ "words with all capital letters should appear at least 3 times", "3 words in all caps"."""
    caps = r"(?:all\s+)?(?:capital(?:ized)?\s+letters|caps|upper[- ]?case(?:\s+letters)?)"
    m = text.search(rf"\bwords?\s+(?:with|in|written\s+in|using|that\s+are\s+in)\s+{caps}"
                    rf"|\b(?:all[- ](?:caps|capital)|fully\s+capitali[sz]ed|upper[- ]?case)"
                    rf"\s+words\b", take=False)
    if m and (found := text.count_after(m)) is not None:
        return found
    return text.count(rf"words?\s+(?:with|in|written\s+in|using)\s+{caps}", floor=0)


def word_frequency(text: TaskText) -> dict[str, Any] | None:
    """ "the word X should appear at least 3 times", "use the keyword 'X' twice"."""
    m = text.search(rf"\b(?:the\s+)?(?:key)?word\s+{_WORD}\s+(?:should|must|needs?\s+to|has\s+to"
                    rf"|shall|is\s+to|to)?\s*(?:appear|occur|be\s+used|be\s+mentioned|be\s+included"
                    rf"|show\s+up)", take=False)
    m = m or text.search(rf"\b(?:use|include|mention|repeat)\s+the\s+(?:key)?word\s+{_WORD}",
                         take=False)
    found = text.count_after(m, window=60) if m else None
    return {"word": m.group("word"), "count": list(found)} if m and found else None


def letter_frequency(text: TaskText) -> dict[str, Any] | None:
    """ "the letter q should appear at least 5 times"."""
    m = text.search(r"\bletter\s+['\"‘“]?(?P<letter>[^\W\d_])['\"’”]?(?![\w])", take=False)
    found = text.count_after(m, window=70) if m else None
    return {"letter": m.group("letter").lower(), "count": list(found)} if m and found else None


def paragraph_count(text: TaskText) -> dict[str, Any] | tuple[int, int | None] | None:
    """ "Your response should contain 3 paragraphs" (separated by *** or blank lines)."""
    found = text.count(r"paragraphs?")
    if found is None:
        return None
    divider = re.search(r"\*\*\*(?!\*\*\*)|markdown\s+divider", text.original, FLAGS)
    return {"count": list(found), "separator": "***"} if divider else found


def paragraph_first_word(text: TaskText) -> dict[str, Any] | None:
    """ "Paragraph 2 must start with word X", "the first paragraph should begin with 'X'"."""
    start = r"(?:must|should|has\s+to|needs\s+to|shall)?\s*(?:start|begin)s?\s+with"
    m = text.search(rf"\bparagraph\s+(?:number\s+|no\.?\s*)?(?P<i>{N})\s+{start}\s+(?:the\s+)?"
                    rf"(?:word\s+){_WORD}"
                    rf"|\b(?:the\s+)?(?P<o>{_ORD}|\d+(?:st|nd|rd|th))\s+paragraph\s+{start}\s+"
                    rf"(?:the\s+)?word\s+{_WORD.replace('?P<word>', '?P<word2>')}")
    if not m:
        return None
    word = m.group("word") or m.group("word2")
    if m.group("i"):
        index = number(m.group("i"))
    else:
        ordinal = m.group("o").lower()
        index = ORDINALS.get(ordinal) or int(re.sub(r"\D", "", ordinal))
    return {"index": index, "word": word}


def title(text: TaskText) -> bool | None:
    """ "a title, wrapped in double angular brackets, such as <<poem of joy>>"."""
    brackets = r"(?:double\s+angular\s+brackets|double\s+angle\s+brackets|<<[^<>\n]*>>)"
    m = text.search(rf"\btitle\b[^.\n]{{0,80}}?{brackets}(?:[^.\n]{{0,40}}<<[^<>\n]*>>)?"
                    rf"|{brackets}[^.\n]{{0,40}}\btitle\b")
    return True if m else None


def postscript(text: TaskText) -> str | None:
    """ "add a postscript starting with P.S.", "end with a P.P.S"."""
    marker = r"(?P<m>p\.?\s?p\.?\s?s\b\.?|p\.?\s?s\b\.?)"
    m = text.search(rf"\b(?:post\s?script|p\.\s?s\.)\s+(?:that\s+|which\s+)?(?:starts?|starting"
                    rf"|begins?|beginning)\s+with\s+['\"“]?{marker}"
                    rf"|\b(?:add|include|end\s+with|finish\s+with|write|append|put)\s+"
                    rf"(?:a|an)\s+{marker.replace('?P<m>', '?P<m2>')}")
    if not m:
        return None
    raw = (m.group("m") or m.group("m2")).lower()
    return "P.P.S." if raw.count("p") == 2 else "P.S."


def quoted(text: TaskText) -> bool | None:
    """ "Wrap your entire response with double quotation marks"."""
    quotes = r"double\s+(?:quotation\s+marks|quotes|quote\s+marks)"
    m = text.search(rf"\b(?:wrap|enclose|put|surround)\s+(?:your\s+|the\s+)?(?:entire\s+|whole\s+)?"
                    rf"{_RESPONSE}\s+(?:with|in|inside|within|between)\s+{quotes}"
                    rf"|\b(?:entire\s+|whole\s+)?{_RESPONSE}\s+(?:should|must)\s+be\s+(?:wrapped|"
                    rf"enclosed|put|surrounded)\s+(?:with|in|inside|within|by)\s+{quotes}")
    return True if m else None


def highlight_count(text: TaskText) -> tuple[int, int | None] | None:
    """ "Highlight at least 2 sections in your answer with markdown"."""
    parts = r"(?:sections?|parts?|phrases?|passages?|key\s+points?|points?|words?|areas?)"
    m = text.search(rf"\bhighlight(?:s|ing)?\b[^.\n]{{0,40}}?(?=\b(?:at|no|a|exactly|more|"
                    rf"{N})\b)", take=False)
    found = text.count_after(m, parts, window=60) if m else None
    if found:
        return found
    m = text.search(rf"\b(?:(?:at\s+least|no\s+fewer\s+than|exactly)\s+)?{N}\s+highlighted\s+"
                    rf"{parts}", take=False)
    if m:
        text.take(m)
        return TaskText(m.group(0).replace("highlighted ", "")).count(parts, floor=0)
    return None


def placeholder_count(text: TaskText) -> tuple[int, int | None] | None:
    """ "at least 2 placeholders represented by square brackets, such as [address]"."""
    found = text.count(r"placeholders?", floor=0)
    if found is not None:
        text.search(r"square\s+brackets[^.\n]{0,30}?\[[^\]\n]*\]")
    return found


def section_count(text: TaskText) -> dict[str, Any] | None:
    """ "Your response must have 3 sections. Mark the beginning of each section with SECTION X"."""
    m = text.search(r"\b(?:mark|begin|start|label|head|title)\w*\s+(?:the\s+beginning\s+of\s+)?"
                    r"(?:each|every)\s+(?:section\s+)?(?:with|by|using)\s+(?:the\s+)?"
                    r"(?:word\s+)?['\"“]?(?P<marker>[A-Za-z]+)\s+X\b", take=False)
    if not m:
        return None
    found = text.count(r"sections?")
    if found is None:
        return None
    text.take(m)
    text.search(r"such\s+as[:\s]*" + re.escape(m.group("marker")) + r"\s+1\b")
    return {"count": list(found), "marker": m.group("marker")}


def first_word(text: TaskText) -> str | None:
    """ "The first word of your response should be X", "start your answer with the word 'X'"."""
    m = text.search(rf"\bfirst\s+word\s+of\s+(?:your|the|each)\s+(?:entire\s+)?{_RESPONSE}\s+"
                    rf"(?:should|must|has\s+to|needs\s+to|shall)\s+be\s+(?:the\s+word\s+)?{_WORD}"
                    rf"|\b(?:start|begin)\s+(?:your|the)\s+(?:entire\s+)?{_RESPONSE}\s+with\s+"
                    rf"the\s+word\s+{_WORD.replace('?P<word>', '?P<word2>')}")
    return (m.group("word") or m.group("word2")) if m else None


def repeat_request(text: TaskText) -> str | None:
    """ "First repeat the request word for word without change, then give your answer"."""
    m = text.search(r"(?:\b(?:first\s*,?|begin\s+by|start\s+by)\s+)?\brepeat(?:ing)?\s+the\s+"
                    r"(?:request|question|prompt|"
                    r"instructions?)\b(?=[^.\n(]*\b(?:word\s+for\s+word|verbatim|without\s+change)\b)"
                    r"[^.\n(]*(?:\([^)]*\))?\.?")
    if not m:
        return None
    before = text.original[:m.start()].strip()
    after = re.sub(r"^\W+", "", text.original[m.end():]).strip()
    request = before or after
    return " ".join(request.split()) or None


def two_responses(text: TaskText) -> bool | None:
    """ "Give two different responses ... separated by 6 asterisk symbols: ******"."""
    if not re.search(r"\*{6}|\b(?:6|six)\s+asterisks?", text.text, FLAGS):
        return None
    m = text.search(r"\b(?:two|2)\s+(?:different\s+|distinct\s+|separate\s+)?(?:responses|answers"
                    r"|versions|replies)\b")
    if m:
        text.search(r"separated\s+by[^.\n]*?\*{6}|\*{6}")
    return True if m else None


def language(text: TaskText) -> str | None:
    """ "Your ENTIRE response should be in Spanish language, no other language is allowed"."""
    end = r"(?=\s*(?:$|[.,;:!?)\n]|language\b|only\b|and\b|no\b|please\b|with\b|without\b))"
    m = text.search(rf"\b{_RESPONSE}\s+(?:should|must|has\s+to|needs\s+to|is\s+to|shall)\s+be\s+"
                    rf"(?:written\s+)?(?:entirely\s+|only\s+|wholly\s+|completely\s+|fully\s+)?"
                    rf"(?:in|using)\s+(?:the\s+)?(?P<l1>{_LANGS}){end}"
                    rf"|\b(?:respond|reply|answer|write|written|speak)\b[^.\n]{{0,60}}?\b(?:only\s+"
                    rf"|entirely\s+|solely\s+)?in\s+(?P<l2>{_LANGS}){end}"
                    rf"|\busing\s+only\s+(?:the\s+)?(?P<l3>{_LANGS})\s+language\b")
    if not m:
        return None
    name = (m.group("l1") or m.group("l2") or m.group("l3")).lower()
    text.search(r"\bno\s+other\s+language\s+is\s+allowed")
    return next(code for code, lang in LANGUAGE_NAMES.items() if lang.lower() == name)
