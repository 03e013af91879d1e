"""E-mail addresses and phone numbers written out in words, the way people dodge scrapers.

"firstname dot lastname at gmail dot com", "ana [at] example [dot] org" and
"oh one oh, five nine seven five, eight eight two nine" carry the same
personal data as their plain forms, and no pattern recognizer for the plain
forms matches them.

* :func:`find_spelled_emails`: a local part, ``at`` / ``[at]`` / ``(at)``
  / `` @ `` (or ``arroba``, ``arobase``, ``chiocciola``, ``собака``...), and a
  domain whose parts are joined by ``dot`` / ``[dot]`` / `` . `` / ``.`` (or
  ``punto``, ``point``, ``Punkt``, ``точка``...): "ana . lopez @ example . com";
  the domain must end in a real public suffix (the bundled list, offline).
  A plain ``.`` after a spelled ``at`` counts only after a username-like
  local part ("ana.lopez at gmail.com", not "I work at amazon.com").
* :func:`find_spelled_phones`: seven or more digits given as words in
  English, Spanish, Portuguese, French, Italian or German ("zero", "oh",
  "double five", "seis", "neun") or digit groups, with at least one word.

Example:
    >>> text = "write to ana dot kim at gmail dot com or call five five five, 0 1 7 5"
    >>> [text[s:e] for s, e in find_spelled_emails(text)]
    ['ana dot kim at gmail dot com']
    >>> [text[s:e] for s, e in find_spelled_phones(text)]
    ['five five five, 0 1 7 5']
    >>> find_spelled_emails("look at the data dot csv"), find_spelled_phones("one or two")
    ([], [])
    >>> spaced = "ana . lopez @ example . com"
    >>> find_spelled_emails(spaced) == [(0, len(spaced))]
    True
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from presidio_analyzer import EntityRecognizer

__all__ = ["find_spelled_emails", "find_spelled_phones", "spelled_recognizers"]

# "dot" and "at" as people write them in English, Spanish, Portuguese, French, Italian, German,
# Polish and Russian; an "@" or "." with spaces around counts as spelled too
_DOT_WORDS = r"(?:dot|punto|ponto|point|punkt|kropka|точка)"
_AT_WORDS = r"(?:at|arroba|arobase|chiocciola|klammeraffe|małpa|malpa|собака)"
_DOT = rf"(?:\s*[\[({{<]{_DOT_WORDS}[\])}}>]\s*|\s+{_DOT_WORDS}\s+|\s+\.\s+|\.)"
_AT = rf"(?:\s*[\[({{<]{_AT_WORDS}[\])}}>]\s*|\s+{_AT_WORDS}\s+|\s*@\s*)"
_PART = r"[A-Za-z0-9][A-Za-z0-9_+\-]*"
_SPELLED_EMAIL = re.compile(
    rf"(?i)(?<![\w.@])({_PART}(?:{_DOT}{_PART}){{0,3}}){_AT}({_PART}(?:{_DOT}{_PART}){{1,3}})\b")
# digits as words in English, Spanish, Portuguese, French, Italian and German
_DIGIT_WORDS = frozenset("""
zero oh o one two three four five six seven eight nine
cero uno dos tres cuatro cinco seis siete ocho nueve um dois três tres quatro sete oito nove
zéro un deux trois quatre cinq sept huit neuf due tre quattro cinque sei sette otto
null eins zwei zwo drei vier fünf sechs sieben acht neun
""".split())
_WORD_ALTERNATIVES = "|".join(sorted(_DIGIT_WORDS, key=len, reverse=True))
_PHONE_TOKEN = rf"(?:{_WORD_ALTERNATIVES}|double\s+\w+|triple\s+\w+|\+?\d{{1,4}})"
_SPELLED_PHONE = re.compile(rf"(?i)\b{_PHONE_TOKEN}(?:[\s,.\-]{{1,3}}{_PHONE_TOKEN})+\b")


def find_spelled_emails(text: str) -> list[tuple[int, int]]:
    """Spans of e-mail addresses with ``at``/``dot`` spelled out (plain ones are Presidio's)."""
    from agentic_loop.distill.data.pii.recognizers import offline_tld_extractor

    spans: list[tuple[int, int]] = []
    pos = 0
    # a rejected match ("me at jdoe.wanders") must not hide one starting inside it
    # ("jdoe.wanders [at] proton [dot] me"): the search resumes after its first character
    while (match := _SPELLED_EMAIL.search(text, pos)) is not None:
        pos = match.start() + 1
        value = match.group()
        spelled_dot = re.search(rf"(?i)\s{_DOT_WORDS}\s|[\[({{<]{_DOT_WORDS}|\s\.\s", value)
        if "@" in value and not spelled_dot and not re.search(r"\s@|@\s|[\[({<]", value):
            continue  # an ordinary address: the e-mail recognizer's job
        domain = re.sub(r"\s+", "", re.sub(_DOT, ".", match.group(2), flags=re.I))
        username = re.fullmatch(r"[A-Za-z]{2}\S*[._+\d]\S*", match.group(1))  # "ana.lopez at"
        if "@" not in value and not re.search(r"[\[({<]", value) and not (spelled_dot or username):
            continue  # "work at amazon.com"-like prose needs a spelled dot or a username
        if offline_tld_extractor()(domain).fqdn:
            spans.append(match.span())
            pos = match.end()
    return spans


def _digits(token: str) -> int:
    token = token.lower().strip()
    if token.isdigit() or token.lstrip("+").isdigit():
        return len(token.lstrip("+"))
    if token.startswith(("double", "triple")):
        return 2 if token.startswith("double") else 3
    return int(token in _DIGIT_WORDS)


def find_spelled_phones(text: str) -> list[tuple[int, int]]:
    """Spans of 7+ digit sequences that spell at least one digit as a word."""
    spans = []
    for match in _SPELLED_PHONE.finditer(text):
        tokens = re.findall(_PHONE_TOKEN, match.group(), flags=re.I)
        words = sum(1 for t in tokens if not t.lstrip("+").isdigit())
        singles = sum(1 for t in tokens if t.lower() in ("o", "one", "un", "uno", "um", "due"))
        if words and sum(map(_digits, tokens)) >= 7 and words > singles / 2:
            spans.append(match.span())
    return spans


def spelled_recognizers(supported_language: str = "en") -> list[EntityRecognizer]:
    """Both finders as Presidio recognizers (``EMAIL_ADDRESS`` and ``PHONE_NUMBER``, 0.8).

    >>> [r.name for r in spelled_recognizers()]
    ['SpelledEmailRecognizer', 'SpelledPhoneRecognizer']
    """
    from presidio_analyzer import EntityRecognizer, RecognizerResult

    class _Spelled(EntityRecognizer):
        def __init__(self, entity: str, name: str, finder: object) -> None:
            self._finder = finder
            super().__init__(supported_entities=[entity], name=name,
                             supported_language=supported_language)

        def load(self) -> None:
            """Nothing to load: the patterns are compiled at import."""

        def analyze(self, text: str, entities: list[str],
                    nlp_artifacts: object = None) -> list[RecognizerResult]:
            finder = self._finder
            assert callable(finder)
            return [RecognizerResult(self.supported_entities[0], s, e, 0.8)
                    for s, e in finder(text)]

    return [_Spelled("EMAIL_ADDRESS", "SpelledEmailRecognizer", find_spelled_emails),
            _Spelled("PHONE_NUMBER", "SpelledPhoneRecognizer", find_spelled_phones)]
