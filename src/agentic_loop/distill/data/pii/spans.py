"""Found spans to placeholders: overlaps merged, each replacement counted by type and recognizer.

Several recognizers often claim overlapping text (a phone number inside an
API key, a street inside an address, a first name inside a full name). A
privacy gate must remove the union of what they claim, not pick one and
leave the rest. :func:`replace_spans` merges overlapping or touching spans
into one, names it after its strongest claim (a secret first, then the
highest score, then :data:`PRIORITY`, then the longest span), and writes
``<ENTITY>`` once.

:func:`replace_words` is record-level propagation: once a name is known
for a record, every other occurrence of it, in any of the record's texts,
goes too.

Example:
    >>> text = "key AKIAQ7X3M2K9L4P8R5T1 from Ana"
    >>> spans = [Finding(4, 24, "SECRET", "aws", 1.0), Finding(8, 14, "PHONE_NUMBER", "p", 0.4),
    ...          Finding(30, 33, "PERSON", "spacy", 0.85)]
    >>> out, kept = replace_spans(text, spans)
    >>> out, [(f.entity, f.recognizer) for f in kept]
    ('key <SECRET> from <PERSON>', [('SECRET', 'aws'), ('PERSON', 'spacy')])
    >>> replace_words("Ana met ANA and Anabel.", ["ana"])
    ('<PERSON> met <PERSON> and Anabel.', 2)
    >>> replace_words("王伟先生说: 王伟 will call", ["王伟"])
    ('<PERSON>先生说: <PERSON> will call', 2)
    >>> replace_values("Updated with 2345-6789-0124.", {"2345 6789 0124": "IN_AADHAAR"})
    ('Updated with <IN_AADHAAR>.', Counter({'IN_AADHAAR': 1}))
    >>> folded, where = fold_width("mail ａｎａ＠ｘ．ｃｏｍ")
    >>> folded, map_span(where, 5, len(folded))
    ('mail ana@x.com', (5, 14))
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["PRIORITY", "Finding", "fold_width", "map_span", "replace_spans", "replace_values",
           "replace_words"]

#: Tie-breaks between equally confident claims on a merged span (most harmful first);
#: a SECRET claim wins whatever the scores.
PRIORITY: tuple[str, ...] = ("SECRET", "CREDIT_CARD", "IBAN_CODE", "US_SSN", "KR_RRN",
                             "CN_RIC", "FR_NIR", "IT_FISCAL_CODE", "ES_NIF", "ES_NIE",
                             "PL_PESEL", "DE_TAX_ID", "UK_NINO", "UK_NHS", "IN_AADHAAR",
                             "JP_MY_NUMBER", "BR_CPF", "BR_CNPJ", "NL_BSN", "IN_PAN",
                             "DE_ID_CARD", "PASSPORT", "DATE_OF_BIRTH",
                             "EMAIL_ADDRESS", "STREET_ADDRESS",
                             "PHONE_NUMBER", "PERSON")
PERSON_PLACEHOLDER = "<PERSON>"
_UNSPACED = re.compile(r"[\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


@dataclass(frozen=True)
class Finding:
    """One span a recognizer claims: ``text[start:end]`` is an ``entity``."""

    start: int
    end: int
    entity: str
    recognizer: str
    score: float = 1.0


def _rank(finding: Finding) -> tuple[bool, float, int, int]:
    order = PRIORITY.index(finding.entity) if finding.entity in PRIORITY else len(PRIORITY)
    return (finding.entity == "SECRET", finding.score, -order, finding.end - finding.start)


def replace_spans(text: str, findings: Iterable[Finding]) -> tuple[str, list[Finding]]:
    """``text`` with every (merged) span replaced by ``<ENTITY>``, and the merged spans."""
    merged: list[tuple[int, int, Finding]] = []
    for f in sorted(findings, key=lambda f: (f.start, -f.end)):
        if f.end <= f.start:
            continue
        if merged and f.start <= merged[-1][1]:
            start, end, best = merged[-1]
            merged[-1] = (start, max(end, f.end), max(best, f, key=_rank))
        else:
            merged.append((f.start, f.end, f))
    out, last, kept = [], 0, []
    for start, end, best in merged:
        out += [text[last:start], f"<{best.entity}>"]
        last = end
        kept.append(Finding(start, end, best.entity, best.recognizer, best.score))
    out.append(text[last:])
    return "".join(out), kept


def replace_words(text: str, words: Sequence[str], *, exact_case: Sequence[str] = ()
                  ) -> tuple[str, int]:
    """Replace whole-word occurrences of ``words`` (case-insensitive) by ``<PERSON>``.

    Words in ``exact_case`` are replaced only as written (a name that is also
    an English word, "Grace", must not take "grace" with it). Longer words go
    first, so "de Vries" is one placeholder, not two. Returns the text and
    the number of replacements.
    """
    count = 0
    for group, flags in ((words, re.IGNORECASE), (exact_case, 0)):
        ordered = sorted({w for w in group if w.strip()}, key=len, reverse=True)
        if not ordered:
            continue
        # Han, kana, Hangul and Thai write words without spaces or with particles attached
        # ("王伟先生", "김민준님"): no word boundary is required around such a name
        unspaced = [w for w in ordered if _UNSPACED.search(w)]
        spaced = [w for w in ordered if w not in unspaced]
        alternatives = "|".join(r"\s+".join(map(re.escape, w.split())) for w in spaced)
        if spaced:
            pattern = re.compile(rf"(?<![\w<])(?:{alternatives})(?![\w>])", flags)
            text, n = pattern.subn(PERSON_PLACEHOLDER, text)
            count += n
        if unspaced:
            pattern = re.compile("|".join(r"\s*".join(map(re.escape, w.split()))
                                          for w in unspaced), flags)
            text, n = pattern.subn(PERSON_PLACEHOLDER, text)
            count += n
    # "<PERSON> <PERSON>" left by parts replaced one by one reads as one name
    text, merged = re.subn(r"<PERSON>(?:[ \t]*<PERSON>)+", PERSON_PLACEHOLDER, text)
    return text, count


def replace_values(text: str, values: dict[str, str]) -> tuple[str, Counter[str]]:
    """Replace every occurrence of ``values`` (value -> entity) by ``<ENTITY>``; count by entity.

    Record-level propagation for what is no name: a number found once in a
    run (a passport number after "Passport:") goes everywhere else in the run
    too, where no context word stands beside it ("I updated your file with
    it"). A value with six digits or more matches whatever separators are
    written between its digits; others match as written, spaces aside.
    Longer values go first.
    """
    count: Counter[str] = Counter()
    for value in sorted(values, key=len, reverse=True):
        digits = re.sub(r"\D", "", value)
        if len(digits) >= 6 and len(digits) >= len(re.sub(r"[\W_]", "", value)) - 2:
            letters = re.sub(r"[\W_]", "", value)
            body = r"[\s.\-/]?".join(map(re.escape, letters))
            pattern = re.compile(rf"(?<![0-9A-Za-z]){body}(?![0-9A-Za-z])", re.IGNORECASE)
        else:
            body = r"\s+".join(map(re.escape, value.split()))
            pattern = re.compile(rf"(?<![\w<]){body}(?![\w>])" if value[:1].isalnum()
                                 and value[-1:].isalnum() else body, re.IGNORECASE)
        text, n = pattern.subn(f"<{values[value]}>", text)
        count[values[value]] += n
    return text, +count


def fold_width(text: str) -> tuple[str, list[int] | None]:
    """``text`` in NFKC form, one character at a time, and where each folded character came from.

    Fullwidth forms ("ａｎａ＠ｘ．ｃｏｍ", "０９０－１２３４"), ligatures and other
    compatibility characters read as their plain letters and digits to a
    person, but no recognizer's pattern matches them. The gate analyzes the
    folded text and maps each finding back with :func:`map_span`, so the
    original characters are what gets replaced. ``None`` means nothing changed.
    """
    if text.isascii() or unicodedata.is_normalized("NFKC", text):
        return text, None
    out: list[str] = []
    where: list[int] = []
    for i, char in enumerate(text):
        folded = unicodedata.normalize("NFKC", char)
        out.append(folded)
        where.extend([i] * len(folded))
    where.append(len(text))
    return "".join(out), where


def map_span(where: list[int] | None, start: int, end: int) -> tuple[int, int]:
    """A span of :func:`fold_width`'s folded text as a span of the original text."""
    if where is None or end <= start:
        return start, end
    return where[start], where[end - 1] + 1
