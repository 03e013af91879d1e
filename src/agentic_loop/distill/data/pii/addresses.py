"""Street addresses by their shape: a house number, a street, and the city or postcode after it.

Presidio finds places by name (``LOCATION``, from spaCy) but has no street
address recognizer, and "221B Baker Street, London NW1 6XE" is the most
identifying thing a support ticket holds. :func:`find_addresses` matches
the usual layouts without a model:

* number first (US, UK, Canada, Australia, India, France, Korea romanized):
  ``1600 Pennsylvania Avenue NW, Washington, DC 20500``, ``Flat 4, 12 MG
  Road, Bengaluru 560001``, ``8 rue de la Paix, 75002 Paris``,
  ``152 Teheran-ro, Gangnam-gu, Seoul``;
* street first (Netherlands, Germany, Spain, Italy...):
  ``Keizersgracht 221-B, 1015 CJ Amsterdam``, ``Hauptstraße 5, 10115 Berlin``,
  ``Calle Mayor 12``;
* Korean: ``서울특별시 강남구 테헤란로 152``; and ``PO Box 4471``;
* Japanese, Chinese, Russian, Polish, Nordic, Spanish/Italian/Portuguese
  with a comma before the number: :mod:`~agentic_loop.distill.data.pii.world_addresses`.

A street needs a street word ("Street", "Rd", "laan", "straße"...) next to
the number, so "3 easy steps" or "version 2 release" is not an address.
City, state, postcode and unit that follow are taken into the span.

Example:
    >>> text = "Ship it to 742 Evergreen Terrace, Springfield, OR 97403 by Friday."
    >>> [text[s:e] for s, e in find_addresses(text)]
    ['742 Evergreen Terrace, Springfield, OR 97403']
    >>> find_addresses("Follow these 3 simple steps on the main road.")
    []
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from agentic_loop.distill.data.pii.world_addresses import WORLD_PATTERNS

if TYPE_CHECKING:
    from presidio_analyzer import EntityRecognizer

__all__ = ["STREET_ADDRESS", "address_recognizer", "find_addresses"]

STREET_ADDRESS = "STREET_ADDRESS"

_SUFFIX = (r"(?:Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Place|Pl|"
           r"Terrace|Ter|Way|Parkway|Pkwy|Circle|Cir|Highway|Hwy|Square|Sq|Trail|Trl|Close|"
           r"Crescent|Cres|Grove|Gardens|Gdns|Mews|Row|Walk|Hill|Green|Park|Rise|Vale|View|Wharf|"
           r"Quay|Parade|Broadway|Alley|Plaza|Loop|Marg|Nagar|Path|Gali)\.?")
_WORD = r"(?:[A-Z][A-Za-z'\-]*|[A-Z]{1,3}|\d{1,3}(?:st|nd|rd|th))"
_UNIT = r"(?:(?:Apt|Apartment|Suite|Ste|Unit|Flat|Floor|Fl|Room|#)\.?\s*[\w\-]{1,6})"
_POSTCODE = (r"(?:[A-Z]{2}\s+\d{5}(?:-\d{4})?|\d{5}(?:-\d{4})?|"           # US state + ZIP, ZIP
             r"[A-Z]{1,2}\d[A-Z\d]?\s*\d[A-Z]{2}|"                          # UK
             r"[A-Z]\d[A-Z]\s?\d[A-Z]\d|"                                   # Canada
             r"\d{4}\s?[A-Z]{2}|\d{6}|\d{4,5})")                            # NL, India, others
_CITY = r"[A-Z][A-Za-z'\-]+(?:\s+[A-Z][A-Za-z'\-]+){0,2}"
_TAIL = (rf"(?:,?\s+{_UNIT})?"
         rf"(?:,\s*(?:{_CITY}|[A-Z][a-z]+-gu|[A-Z][a-z]+-si)(?=[,\s.;)]|$)){{0,3}}"
         rf"(?:,?\s+{_POSTCODE}(?![\w-])(?:,?\s+{_CITY}(?=[,\s.;)]|$))?)?")

_NUMBER_FIRST = re.compile(
    rf"(?:\b{_UNIT},?\s+)?\b\d{{1,6}}[A-Za-z]?(?:-\d{{1,4}})?,?\s+"
    rf"(?:(?:{_WORD})\s+){{1,3}}{_SUFFIX}(?:\s+(?:NW|NE|SW|SE|N|S|E|W)\b)?{_TAIL}")
_FRENCH = re.compile(
    r"\b\d{1,5}(?:\s?(?:bis|ter))?,?\s+(?i:rue|avenue|av\.|boulevard|bd|chemin|allée|impasse|"
    r"place|quai|route)\s+(?:(?:de|du|des|la|le|l'|d')\s*)*[A-ZÉ][\w'\-]+(?:\s+[A-Z][\w'\-]+){0,3}"
    rf"(?:,?\s+\d{{5}}\s+{_CITY})?")
_KOREAN_ROMAN = re.compile(
    rf"\b\d{{1,5}}(?:-\d{{1,4}})?,?\s+[A-Z][a-z]+-(?:ro|gil|daero)(?:\s*\d+(?:beon)?-gil)?{_TAIL}")
_STREET_FIRST = re.compile(
    r"\b(?:[A-Z][a-zäöüßéèàíóúñ'\-]*(?:straße|strasse|str\.|weg|gasse|platz|allee|ring|damm|"
    r"laan|straat|gracht|plein|kade|singel|dijk|steeg|markt)|"
    r"(?:[A-ZÄÖÜ][a-zäöüß]+-){1,3}(?:Straße|Strasse|Str\.|Weg|Gasse|Platz|Allee|Ring|Damm)|"
    r"[A-ZÄÖÜ][a-zäöüß]+er\s+(?:Straße|Strasse|Str\.|Weg|Gasse|Platz|Allee|Ring|Damm)|"
    r"(?:Calle|Avenida|Av\.|Carrer|Via|Viale|Piazza|Corso|Rua|Praça)\s+(?:de\s+|del\s+|la\s+)?"
    r"[A-Z][\w'\-]+(?:\s+[A-Z][\w'\-]+)?)"
    r"\s+\d{1,5}(?:\s?[a-zA-Z](?![a-z]))?(?:[-/]\s?[\dA-Za-z]{1,4})?"
    rf"(?:,\s*(?:\d{{4}}\s?[A-Z]{{2}}|\d{{4,5}})\s+{_CITY})?")
_KOREAN = re.compile(
    r"(?:[가-힣]+(?:특별시|광역시|특별자치시|도|시)\s+)?[가-힣]+(?:구|군|시)\s+"
    r"(?:[가-힣]+(?:동|읍|면)\s+)?[가-힣0-9]+(?:로|길|거리|가)\s*\d+(?:-\d+)?(?:\s*\d+호)?")
_PO_BOX = re.compile(r"\b(?i:P\.?\s?O\.?\s?Box|Post Office Box)\s+\d{1,6}\b")
# what follows a street and number: a floor or flat ("3º B", "m. 15", "kv. 7"), then a postcode
# (Poland 00-514, Portugal 1100-053, Brazil 01310-200, Netherlands 1016 GV, Sweden 111 52,
# four or five digits) and its city ("Zürich", "Warszawa"), which stay with the address
_AFTER = re.compile(
    # "º" and "ª" read "o" and "a" once the gate has folded the text to NFKC
    r"(?:,?\s*(?:\d{1,2}(?:\s?[º°]|[ºªoa](?![a-z]))\s?[A-Za-z]?|"
    r"(?i:m|kv|apt|app|apto|piso|lok)\.?\s?\d{1,4}))?"
    r",?\s*(?:\d{2}-\d{3}|\d{4,5}-\d{3}|\d{4}\s?[A-Z]{2}(?![\w])|\d{3}\s\d{2}|\d{4,5})(?![\w-])"
    r"(?:\s+(?=[A-ZÀ-ÞĀ-Ž])[\w'\-]+(?:\s+(?=[A-ZÀ-Þ])[\w'\-]+)?)?")
# "In 2019 Apple Park opened": a year before a capitalized place is not a house number
_YEAR_ALONE = re.compile(r"(?:19|20)\d\d\s[^,\d]*$")
_PATTERNS = (_NUMBER_FIRST, _FRENCH, _KOREAN_ROMAN, _STREET_FIRST, _KOREAN, _PO_BOX,
             *WORLD_PATTERNS)


def find_addresses(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every street address in ``text``, overlaps merged."""
    spans = sorted(m.span() for p in _PATTERNS for m in p.finditer(text)
                   if not _YEAR_ALONE.match(m.group()))
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        end = start + len(text[start:end].rstrip(" ,."))
        after = _AFTER.match(text, end)
        end = after.end() if after else end
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def address_recognizer(supported_language: str = "en") -> EntityRecognizer:
    """:func:`find_addresses` as a Presidio recognizer of ``STREET_ADDRESS`` (score 0.85).

    >>> r = address_recognizer()
    >>> [x.entity_type for x in r.analyze("Flat 2, 14 Mill Lane, Leeds LS6 2QE", [])]
    ['STREET_ADDRESS']
    """
    from presidio_analyzer import EntityRecognizer, RecognizerResult

    class StreetAddressRecognizer(EntityRecognizer):
        def load(self) -> None:
            """Nothing to load: the patterns are compiled at import."""

        def analyze(self, text: str, entities: list[str],
                    nlp_artifacts: object = None) -> list[RecognizerResult]:
            return [RecognizerResult(STREET_ADDRESS, start, end, 0.85)
                    for start, end in find_addresses(text)]

    return StreetAddressRecognizer(supported_entities=[STREET_ADDRESS],
                                   name="StreetAddressRecognizer",
                                   supported_language=supported_language)
