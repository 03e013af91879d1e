"""Phone numbers beyond ``phonenumbers``' metadata: by format, by country code, by context.

Presidio's phone recognizer asks ``phonenumbers`` whether a number is valid
in each configured region. That misses real numbers in three ways, and
catches numbers that are none:

* a block the metadata lists as unallocated (``+44 7911 48xxxx``,
  ``010-5975-8829``): :class:`InternationalPhoneRecognizer` takes any ``+``
  and country code with 8 to 15 digits, :func:`korean_mobile_recognizer`
  Korean mobiles by format;
* a country not configured, or digits spaced one by one ("6 1 2 3 4 5 6 7
  8", "138 0013 8000"): :class:`ContextPhoneRecognizer` takes digit groups
  next to a phone word in any of many languages (:data:`PHONE_CONTEXT`);
* order, tracking and invoice numbers that happen to be valid somewhere
  ("Order 4383322926"): :class:`WordedPhoneRecognizer` keeps Presidio's
  recognizer but wants a phone word beside an unformatted run of digits.

Every context word is looked for in the raw text, so both modes agree.

Example:
    >>> [r.score for r in ContextPhoneRecognizer().analyze_text("mi móvil: 6 1 2 3 4 5 6 7 8")]
    [0.7]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from presidio_analyzer import Pattern, PatternRecognizer, RecognizerResult
from presidio_analyzer.predefined_recognizers import PhoneRecognizer

from agentic_loop.distill.data.pii.recognizers import ContextPatternRecognizer, context_regex

if TYPE_CHECKING:
    from presidio_analyzer.nlp_engine import NlpArtifacts

__all__ = ["PHONE_CONTEXT", "ContextPhoneRecognizer", "InternationalPhoneRecognizer",
           "WordedPhoneRecognizer", "korean_mobile_recognizer"]


def korean_mobile_recognizer(supported_language: str = "en") -> PatternRecognizer:
    """``PHONE_NUMBER`` by format: Korean mobiles ``01X-XXXX-XXXX``, national or ``+82``.

    >>> text = "call 010-5975-8829 or +82 10 5975 8829"
    >>> [r.score for r in korean_mobile_recognizer().analyze(text, None)]
    [0.5, 0.5]
    >>> korean_mobile_recognizer().analyze("version 2010-2023-1234", None)
    []
    """
    sep = r"[-. ]?"
    patterns = [
        Pattern("KR mobile", rf"(?<![\d-])01[016789]{sep}\d{{3,4}}{sep}\d{{4}}(?![\d-])", 0.5),
        Pattern("KR mobile (+82)",
                rf"\+82{sep}\(?0?\)?1[016789]{sep}\d{{3,4}}{sep}\d{{4}}(?![\d-])", 0.5),
    ]
    return PatternRecognizer("PHONE_NUMBER", name="KoreanMobileRecognizer", patterns=patterns,
                             supported_language=supported_language)


#: Words that make a run of digit groups beside them a phone number, in many languages.
PHONE_CONTEXT: tuple[str, ...] = (
    "phone", "telephone", "tel", "mobile", "cell", "cellphone", "call", "fax", "whatsapp",
    "signal", "sms", "text me", "móvil", "movil", "teléfono", "telefono", "llama", "llámame",
    "téléphone", "portable", "appelez", "appelle", "telefon", "handy", "rufnummer", "cellulare",
    "chiama", "telefone", "celular", "ligue", "telefonu", "komórka", "телефон", "тел", "номер",
    "电话", "電話", "手机", "手機", "携帯", "전화", "휴대폰", "핸드폰", "연락처", "هاتف", "جوال",
    "טלפון", "फ़ोन", "फोन", "मोबाइल", "โทร", "ring mig", "ring meg", "ring til", "mobil", "bel me",
    "bel mij", "mobiel", "zadzwoń", "dzwoń", "puhelin", "soita", "hubungi", "điện thoại",
    "τηλέφωνο", "τηλ", "κινητό", "volejte", "tlf", "تلفن", "موبایل",
)


class WordedPhoneRecognizer(PhoneRecognizer):
    """Presidio's phone recognizer (``phonenumbers``, per region), where an unformatted run of
    digits needs a phone word nearby.

    ``phonenumbers`` deems many order, tracking and invoice numbers valid
    phones ("Order 4383322926"); a number written as people write phones
    (groups, ``+``, parentheses) keeps Presidio's score, a bare run of digits
    or a short dotted one ("39.39.39") scores below the gate's threshold
    unless a phone word (:data:`PHONE_CONTEXT`, any language) stands within
    40 characters. Scored here, in the raw text, so both modes agree.

    >>> r = WordedPhoneRecognizer(supported_regions=["US"])
    >>> text = "Order 2125550175 or (212) 555-0175"
    >>> [round(x.score, 2) for x in r.analyze(text, ["PHONE_NUMBER"])]
    [0.3, 0.4]
    >>> [round(x.score, 2) for x in r.analyze("Call 2125550175", ["PHONE_NUMBER"])]
    [0.4]
    """

    def analyze(self, text: str, entities: list[str], nlp_artifacts: NlpArtifacts | None = None,
                ) -> list[RecognizerResult]:
        """Presidio's findings, bare digit runs without a phone word lowered below threshold."""
        results = super().analyze(text, entities, nlp_artifacts)  # type: ignore[arg-type]
        for result in results:
            value = text[result.start:result.end]
            bare = value.isdigit() or (re.fullmatch(r"[\d.]+", value) is not None
                                       and sum(c.isdigit() for c in value) < 10)
            window = text[max(0, result.start - 40):result.start] + " " + text[
                result.end:result.end + 40]
            if bare and not _phone_words().search(window):
                result.score = min(result.score, 0.3)
            result.recognition_metadata[RecognizerResult.IS_SCORE_ENHANCED_BY_CONTEXT_KEY] = True
        return results


@lru_cache(maxsize=1)
def _phone_words() -> re.Pattern[str]:
    return context_regex(PHONE_CONTEXT)


class ContextPhoneRecognizer(ContextPatternRecognizer):
    """``PHONE_NUMBER``: 8 to 15 digits in groups (``6 1 2 3 4 5 6 7 8``, ``138 0013 8000``)
    next to a phone word in any of many languages, whatever the country's format.

    ``phonenumbers`` knows the formats of the configured regions only; a
    number from elsewhere, or one spaced digit by digit, is still a phone
    number when the text says so. Alone it scores below the gate's threshold.
    A number valid in one of ``excluded_regions`` only (a default region the
    gate was configured without) is left, as the configuration asks.

    >>> r = ContextPhoneRecognizer()
    >>> [x.score for x in r.analyze_text("电话：138 0013 8000")]
    [0.7]
    >>> [x.score for x in r.analyze_text("Population 138 0013 8000")]
    [0.3]
    """

    def __init__(self, supported_language: str = "en",
                 excluded_regions: Sequence[str] = ()) -> None:
        self.excluded_regions = tuple(excluded_regions)
        pattern = Pattern("digit groups", r"(?<![\w+.,/-])\+?\d{1,4}(?:[ .\-]\(?\d{1,5}\)?){1,10}"
                                          r"(?![\w-]|[.,]\d)", 0.3)
        super().__init__("PHONE_NUMBER", [pattern], PHONE_CONTEXT, name="ContextPhoneRecognizer",
                         supported_language=supported_language)

    def validate_result(self, pattern_text: str) -> bool | None:
        """8 to 15 digits, as E.164 allows, and no date (``None`` keeps the pattern's score)."""
        if re.fullmatch(r"\d{4}[-.]\d{1,2}[-.]\d{1,2}|\d{1,2}[-.]\d{1,2}[-.]\d{2,4}", pattern_text):
            return False
        if not 8 <= sum(c.isdigit() for c in pattern_text) <= 15:
            return False
        return False if self._excluded(pattern_text) else None

    def _excluded(self, value: str) -> bool:
        import phonenumbers

        for region in self.excluded_regions:
            try:
                if phonenumbers.is_valid_number(phonenumbers.parse(value, region)):
                    return True
            except phonenumbers.NumberParseException:
                continue
        return False


class InternationalPhoneRecognizer(PatternRecognizer):
    """``PHONE_NUMBER`` by format: ``+`` and a country code, 8 to 15 digits in groups.

    ``phonenumbers`` rejects numbers in blocks its metadata lists as
    unallocated (``+44 7911 48xxxx``); a number written with a ``+`` prefix
    is a phone number whatever the metadata says.

    >>> r = InternationalPhoneRecognizer()
    >>> text = "mobile +44 7911 482036, fax +1 (212) 555-0175"
    >>> [round(x.score, 2) for x in r.analyze(text, None)]
    [0.5, 0.5]
    >>> r.analyze("up +12 points, +3 more", None)
    []
    """

    def __init__(self, supported_language: str = "en") -> None:
        pattern = Pattern("international (+CC)",
                          r"(?<![\w+])\+\d{1,3}(?:[ .\-]?\(?\d{1,5}\)?){2,6}(?![\d\-])", 0.5)
        super().__init__("PHONE_NUMBER", name="InternationalPhoneRecognizer", patterns=[pattern],
                         supported_language=supported_language)

    def validate_result(self, pattern_text: str) -> bool | None:
        """Between 8 and 15 digits, as E.164 allows (``None`` keeps the pattern's score)."""
        return None if 8 <= sum(c.isdigit() for c in pattern_text) <= 15 else False
