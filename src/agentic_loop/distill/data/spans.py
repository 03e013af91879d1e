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
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["PRIORITY", "Finding", "replace_spans", "replace_words"]

#: Tie-breaks between equally confident claims on a merged span (most harmful first);
#: a SECRET claim wins whatever the scores.
PRIORITY: tuple[str, ...] = ("SECRET", "CREDIT_CARD", "IBAN_CODE", "US_SSN", "KR_RRN",
                             "EMAIL_ADDRESS", "STREET_ADDRESS", "PHONE_NUMBER", "PERSON")
PERSON_PLACEHOLDER = "<PERSON>"


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
        alternatives = "|".join(r"\s+".join(map(re.escape, w.split())) for w in ordered)
        pattern = re.compile(rf"(?<![\w<])(?:{alternatives})(?![\w>])", flags)
        text, n = pattern.subn(PERSON_PLACEHOLDER, text)
        count += n
    # "<PERSON> <PERSON>" left by parts replaced one by one reads as one name
    text, merged = re.subn(r"<PERSON>(?:[ \t]+<PERSON>)+", PERSON_PLACEHOLDER, text)
    return text, count
