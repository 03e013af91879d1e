"""National ID numbers of a dozen countries by format and checksum; passport numbers in context.

A support ticket from Lyon quotes a NIR, one from Chennai an Aadhaar
number: identifiers that name one person for life. Presidio ships
recognizers for several (UK NHS and NINO, Spain's NIF and NIE, Italy's
codice fiscale, Poland's PESEL, India's Aadhaar and PAN, Germany's
Steuer-ID and Personalausweis) but loads none of them for English, and it
trusts a checksum alone, although every tenth 12-digit number passes
Aadhaar's check and every eleventh 10-digit one the NHS check. Here those
are used, the others (France's NIR, China's resident ID, Japan's My
Number, Brazil's CPF and CNPJ, the Netherlands' BSN, a spaced Steuer-ID)
are validated with ``python-stdnum``, and :class:`CheckedIdRecognizer`
puts every one under one policy:

* a match must stand alone: no letter or digit touches it (``ORD-…`` is an order);
* a **strong** format (a checksum over a long or structured value: NIR,
  codice fiscale, NIF/NIE, resident ID, NINO, CPF written ``123.456.789-09``)
  is redacted wherever it appears;
* a **weak** one (a bare run of digits whose checksum one number in ten
  passes: Aadhaar, NHS, PESEL, My Number, Steuer-ID, BSN, a bare CPF) needs
  a context word within 40 characters, in several languages ("Aadhaar",
  "NHS", "PESEL", "マイナンバー", "CPF", "national ID"...);
* context is looked for in the raw text (:func:`~.recognizers.context_regex`),
  not in spaCy's lemmas, so both modes behave the same in any script.

Passport numbers share no format or checksum: :func:`passport_recognizer`
takes a 6-10 character id with at least four digits when a passport word
(passport, passeport, Reisepass, pasaporte, passaporto, paszport, паспорт,
护照, パスポート, 여권...) stands near.

Example:
    >>> text = "NIR 1 84 12 76 451 089 46, Aadhaar 2345 6789 0124"
    >>> [(text[s:e], entity) for s, e, entity in find_national_ids(text)]
    [('1 84 12 76 451 089 46', 'FR_NIR'), ('2345 6789 0124', 'IN_AADHAAR')]
    >>> find_national_ids("Your order 2345 6789 0124 has shipped.")  # a checksum is not enough
    []
    >>> find_national_ids("NIR 1 84 12 76 451 089 47")  # wrong key
    []
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from presidio_analyzer import EntityRecognizer, Pattern, PatternRecognizer, RecognizerResult

from agentic_loop.distill.data.pii.entities import NATIONAL_ID_ENTITIES
from agentic_loop.distill.data.pii.recognizers import ContextPatternRecognizer, context_regex

if TYPE_CHECKING:
    from presidio_analyzer.nlp_engine import NlpArtifacts

__all__ = ["BIRTH_CONTEXT", "DATE_OF_BIRTH", "NATIONAL_ID_ENTITIES", "PASSPORT",
           "PASSPORT_CONTEXT", "CheckedIdRecognizer", "birth_date_recognizer",
           "StdnumRecognizer", "find_national_ids", "national_id_recognizers",
           "passport_recognizer"]

PASSPORT = "PASSPORT"
#: Words that make any number beside them an identity number, in several languages.
GENERIC_CONTEXT: tuple[str, ...] = (
    "national id", "national identity", "identity number", "identity card", "id card",
    "id number", "id no", "identification number", "personal number", "personal id",
    "citizen id", "tax id", "tax number", "social security", "身份证", "身分證", "身分証",
    "numéro d'identification", "número de identificación", "documento de identidad",
    "carta d'identità", "numer identyfikacyjny",
)
#: Words that say an id beside them is a passport number.
PASSPORT_CONTEXT: tuple[str, ...] = (
    "passport", "passeport", "reisepass", "passnummer", "pass-nr", "pasaporte", "passaporto",
    "passaporte", "paszport", "paspoort", "pasaport", "passeport n°", "travel document",
    "паспорт", "διαβατήριο", "护照", "護照", "パスポート", "旅券", "여권", "جواز السفر", "جواز سفر",
    "דרכון", "पासपोर्ट", "หนังสือเดินทาง",
)
DATE_OF_BIRTH = "DATE_OF_BIRTH"
#: Words that make a date beside them someone's date of birth, in many languages.
BIRTH_CONTEXT: tuple[str, ...] = (
    "date of birth", "birth date", "birthdate", "birthday", "dob", "d.o.b", "born", "née", "né",
    "date de naissance", "geburtsdatum", "geboren", "geb.", "geb.-datum", "geburtstag",
    "fecha de nacimiento", "nacido",
    "nacida", "data di nascita", "nato", "nata", "data de nascimento", "nascido", "nascida",
    "geboortedatum", "data urodzenia", "urodzony", "urodzona", "дата рождения", "родился",
    "родилась", "出生日期", "出生", "生年月日", "生日", "誕生日", "생년월일", "생일", "जन्म तिथि",
    "जन्मतिथि", "تاريخ الميلاد", "תאריך לידה", "doğum tarihi", "ngày sinh",
)
_MONTHS = (r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?|janvier|février|"
           r"fevrier|mars|avril|mai|juin|juillet|août|aout|septembre|octobre|novembre|décembre|"
           r"januar|februar|märz|juni|juli|oktober|dezember|enero|febrero|marzo|abril|mayo|junio|"
           r"julio|agosto|septiembre|octubre|noviembre|diciembre|gennaio|febbraio|aprile|maggio|"
           r"giugno|luglio|settembre|ottobre|dicembre|janeiro|fevereiro|março|maio|junho|julho|"
           r"setembro|outubro|dezembro")
WEAK_SCORE = 0.3  # below the gate's default threshold (0.35): dropped unless context lifts it
BOOST = 0.4
_DIGITS = r"(?<![0-9A-Za-z])"
_END = r"(?![0-9A-Za-z])"


class StdnumRecognizer(PatternRecognizer):
    """A pattern recognizer whose matches count only when ``validator`` (a stdnum check) passes.

    >>> from stdnum.br import cpf
    >>> r = StdnumRecognizer("BR_CPF", [Pattern("CPF", r"\\d{3}\\.\\d{3}\\.\\d{3}-\\d{2}", 0.5)],
    ...                      cpf.is_valid)
    >>> [x.score for x in r.analyze("CPF 390.533.447-05 / 390.533.447-06", None)]
    [1.0]
    """

    def __init__(self, entity: str, patterns: Sequence[Pattern],
                 validator: Callable[[str], bool], *, name: str | None = None,
                 supported_language: str = "en") -> None:
        self._validator = validator
        super().__init__(supported_entity=entity, patterns=list(patterns),
                         name=name or f"{entity.title().replace('_', '')}Recognizer",
                         supported_language=supported_language)

    def validate_result(self, pattern_text: str) -> bool:
        """Whether stdnum accepts the number (separators are its business)."""
        return bool(self._validator(pattern_text))


class CheckedIdRecognizer(EntityRecognizer):
    """A national-ID pattern recognizer under the module's policy: alone, checked, in context.

    ``weak`` is ``True`` when every match needs a context word, or the names
    of the patterns that do (a bare CPF does, a dotted one does not).
    ``accept`` rejects matches the inner recognizer's pattern lets through;
    ``weak_when`` makes a match weak by its value (a PAN in lowercase needs
    a context word, one in capitals does not). Context words are the inner
    recognizer's own, plus ``context`` and :data:`GENERIC_CONTEXT`.
    """

    def __init__(self, inner: PatternRecognizer, context: Sequence[str] = (), *,
                 weak: bool | Collection[str] = False,
                 accept: Callable[[str], bool] | None = None,
                 weak_when: Callable[[str], bool] | None = None, window: int = 40) -> None:
        self.inner = inner
        self.weak = weak
        self.accept = accept
        self.weak_when = weak_when
        self.window = window
        words = [*(inner.context or []), *context, *GENERIC_CONTEXT]
        self._context = context_regex(list(dict.fromkeys(w.lower() for w in words)))
        self.label: str = getattr(inner, "name", None) or type(inner).__name__
        super().__init__(supported_entities=inner.supported_entities, name=self.label,
                         supported_language=inner.supported_language)

    def load(self) -> None:
        """Nothing to load: the inner recognizer compiled its patterns."""

    def has_context(self, text: str, start: int, end: int) -> bool:
        """Whether a context word stands within ``window`` characters of ``text[start:end]``."""
        return bool(self._context.search(text[max(0, start - self.window):start])
                    or self._context.search(text[end:end + self.window]))

    def analyze(self, text: str, entities: list[str],
                nlp_artifacts: NlpArtifacts | None = None) -> list[RecognizerResult]:
        """The inner recognizer's checked matches, scored by this module's policy."""
        out = []
        for result in self.inner.analyze(text, self.inner.supported_entities, None):
            value = text[result.start:result.end]
            if _touching(text, result.start, result.end) or (
                    self.accept is not None and not self.accept(value)):
                continue
            pattern = getattr(result.analysis_explanation, "pattern_name", None)
            weak = self.weak is True or (not isinstance(self.weak, bool) and pattern in self.weak
                                         ) or bool(self.weak_when and self.weak_when(value))
            if self.has_context(text, result.start, result.end):
                result.score = min(1.0, result.score + BOOST)
            elif weak:
                result.score = min(result.score, WEAK_SCORE)
            result.recognition_metadata = {  # scored here: Presidio must not boost it again
                RecognizerResult.RECOGNIZER_NAME_KEY: self.label,
                RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: self.id,
                RecognizerResult.IS_SCORE_ENHANCED_BY_CONTEXT_KEY: True}
            out.append(result)
        return out


def _touching(text: str, start: int, end: int) -> bool:
    """Whether a letter or digit (or one behind ``-``, ``/``, ``.``, ``_``, ``#``) touches it."""
    before, after = text[max(0, start - 2):start], text[end:end + 2]
    joined = "-/._#"
    return bool((before[-1:].isascii() and before[-1:].isalnum())
                or (before[-1:] in joined and before[:1].isascii() and before[:1].isalnum()
                    and len(before) == 2)
                or (after[:1].isascii() and after[:1].isalnum())
                or (after[:1] in joined and len(after) == 2 and after[1:].isascii()
                    and after[1:].isalnum()))


def _cn_ric(number: str) -> bool:
    """China's resident ID: the ISO 7064 check character and a real birth date.

    stdnum also wants the birth place among the county codes it knows; a
    privacy gate must not let a real number through because its county was
    renamed, so the place is not checked.
    """
    from stdnum.cn import ric
    from stdnum.exceptions import ValidationError

    number = ric.compact(number.replace(" ", "").replace("-", ""))  # "110105 19491231 002X"
    try:
        ric.get_birth_date(number)
    except ValidationError:
        return False
    return (len(number) == 18 and number[:-1].isdigit()
            and ric.calc_check_digit(number) == number[-1])


def _stdnum(module: str) -> Callable[[str], bool]:
    import importlib

    is_valid: Callable[[str], bool] = importlib.import_module(f"stdnum.{module}").is_valid
    return is_valid


def _not_upper(value: str) -> bool:
    return not value.isupper()


def _pattern(name: str, regex: str) -> Pattern:
    return Pattern(name, _DIGITS + regex + _END, 0.5)


# entity -> (context words, weak patterns) of the ids python-stdnum validates
_STDNUM: dict[str, tuple[str, tuple[Pattern, ...], str | Callable[[str], bool],
                         tuple[str, ...], bool | frozenset[str]]] = {
    "FR_NIR": ("FrNirRecognizer", (
        _pattern("NIR", r"[12][ .]?\d{2}[ .]?(?:0[1-9]|1[0-2]|[2-9]\d)[ .]?(?:\d{2}|2[ABab])"
                        r"[ .]?\d{3}[ .]?\d{3}[ .]?\d{2}"),),
        lambda v: _stdnum("fr.nir")(v.replace(".", "")),
        ("nir", "insee", "sécurité sociale", "securite sociale", "numéro de sécu", "carte vitale"),
        False),
    "CN_RIC": ("CnRicRecognizer", (
        _pattern("RIC", r"\d{6}[ -]?(?:18|19|20)\d{6}[ -]?\d{3}[\dXx]"),),
               _cn_ric, ("身份证号", "身份证号码", "居民身份证", "resident identity"), False),
    "JP_MY_NUMBER": ("JpMyNumberRecognizer", (_pattern("My Number", r"\d{4}[ -]?\d{4}[ -]?\d{4}"),),
                     "jp.in_", ("my number", "mynumber", "individual number", "マイナンバー",
                                "個人番号"), True),
    "BR_CPF": ("BrCpfRecognizer", (_pattern("CPF", r"\d{3}\.\d{3}\.\d{3}-\d{2}"),
                                   _pattern("CPF bare", r"\d{11}")),
               "br.cpf", ("cpf", "cadastro de pessoas"), frozenset({"CPF bare"})),
    "BR_CNPJ": ("BrCnpjRecognizer", (_pattern("CNPJ", r"\d{2}\.\d{3}\.\d{3}/\d{4}-\d{2}"),
                                     _pattern("CNPJ bare", r"\d{14}")),
                "br.cnpj", ("cnpj", "cadastro nacional"), frozenset({"CNPJ bare"})),
    "NL_BSN": ("NlBsnRecognizer", (_pattern(
        "BSN", r"\d{4}\.?\d{2}\.?\d{3}|\d{9}|\d{3} \d{3} \d{3}"),), "nl.bsn",
               ("bsn", "burgerservicenummer", "sofinummer"), True),
    # Presidio's ES_NIF and ES_NIE patterns take "12345678-Z" and "X1234567L"; Spaniards also
    # write "12.345.678-Z" and "X-1234567-L"
    "ES_NIF": ("EsNifDottedRecognizer", (
        _pattern("NIF dotted", r"\d{1,2}\.\d{3}\.\d{3}[ -]?[A-Za-z]"),),
        lambda v: _stdnum("es.nif")(v.replace(".", "")), ("dni", "nif", "documento nacional"),
        False),
    "ES_NIE": ("EsNieSpacedRecognizer", (
        _pattern("NIE spaced", r"[XYZxyz](?:[ -]\d{7}[ -]?|\d{7}[ -])[A-Za-z]"),),
        "es.nie", ("nie", "extranjero"), False),
    "DE_TAX_ID": ("DeTaxIdSpacedRecognizer", (_pattern("Steuer-ID spaced",
                                                       r"\d{2} \d{3} \d{3} \d{3}"),),
                  "de.idnr", ("steuer-id", "steuerid", "identifikationsnummer", "idnr"), True),
}
# the ids Presidio ships a recognizer for: extra context words, weak or not, and stdnum's check
# on top of Presidio's (its codice fiscale keeps a wrong check letter at a lower score)
_PRESIDIO: dict[str, tuple[str, tuple[str, ...], bool, str | None]] = {
    "UK_NHS": ("NhsRecognizer", ("nhs number", "nhs no", "health number", "patient"), True,
               "gb.nhs"),
    "UK_NINO": ("UkNinoRecognizer", ("national insurance number", "ni no"), False, None),
    "ES_NIF": ("EsNifRecognizer", ("dni", "nif", "documento nacional"), False, "es.nif"),
    "ES_NIE": ("EsNieRecognizer", ("nie", "extranjero"), False, "es.nie"),
    "IT_FISCAL_CODE": ("ItFiscalCodeRecognizer", ("codice fiscale", "c.f.", "fiscal code"),
                       False, "it.codicefiscale"),
    "PL_PESEL": ("PlPeselRecognizer", ("pesel", "numer pesel"), True, "pl.pesel"),
    "IN_AADHAAR": ("InAadhaarRecognizer", ("aadhaar", "aadhar", "uid", "आधार"), True,
                   "in_.aadhaar"),
    "IN_PAN": ("InPanRecognizer", ("pan", "pan card", "permanent account number"), False,
               "in_.pan"),
    "DE_TAX_ID": ("DeTaxIdRecognizer", ("steuer-id", "steuerid", "tax id"), True, "de.idnr"),
    "DE_ID_CARD": ("DeIdCardRecognizer", ("personalausweis", "ausweisnummer", "id card"), True,
                   None),
}


def national_id_recognizers(supported_language: str = "en") -> list[CheckedIdRecognizer]:
    """Every national-ID recognizer (Presidio's and stdnum's), under the module's policy.

    >>> sorted({e for r in national_id_recognizers() for e in r.supported_entities}) == sorted(
    ...     e for e in NATIONAL_ID_ENTITIES if e != PASSPORT)
    True
    """
    from presidio_analyzer import predefined_recognizers as presidio

    out: list[CheckedIdRecognizer] = []
    for entity, (cls, context, weak, check) in _PRESIDIO.items():
        recognizer = getattr(presidio, cls)
        accept = _stdnum(check) if check else None
        strict, weak_when = None, None
        if entity == "IN_PAN":  # stdnum checks the shape, so the slow loose patterns can go;
            strict = [p for p in recognizer.PATTERNS if p.name == "PAN (High)"]
            weak_when = _not_upper  # one in lowercase ("hello2024x" is none) needs context
        inner = recognizer(supported_language=supported_language, patterns=strict)
        out.append(CheckedIdRecognizer(inner, context, weak=weak, accept=accept,
                                       weak_when=weak_when))
    for entity, (name, patterns, rule, context, weak_patterns) in _STDNUM.items():
        validator = _stdnum(rule) if isinstance(rule, str) else rule
        inner = StdnumRecognizer(entity, patterns, validator, name=name,
                                 supported_language=supported_language)
        out.append(CheckedIdRecognizer(inner, context, weak=weak_patterns))
    return out


class _PassportRecognizer(ContextPatternRecognizer):
    def validate_result(self, pattern_text: str) -> bool | None:
        """Four digits or more, a digit in each part, or a letter series then six digits or
        more ("EZ 7654321"); ``None`` keeps the pattern's score."""
        parts = pattern_text.split()
        digits = sum(c.isdigit() for c in pattern_text)
        series = len(parts) == 2 and parts[0].isalpha() and parts[1].isdigit() and len(
            parts[1]) >= 6
        return None if digits >= 4 and (series or all(any(c.isdigit() for c in p) for p in parts)
                                        ) else False


def passport_recognizer(supported_language: str = "en") -> ContextPatternRecognizer:
    """``PASSPORT``: a 6-10 character id with four digits or more, next to a passport word.

    >>> r = passport_recognizer()
    >>> [x.score for x in r.analyze_text("Reisepass C01X00T47, gültig bis 2031")]
    [0.7]
    >>> [x.score for x in r.analyze_text("Serial C01X00T47 shipped")]
    [0.3]
    >>> r.analyze_text("passport holder 12 34")
    []
    """
    token = (r"(?<![0-9A-Za-z])(?:[A-Za-z0-9]{6,10}|[A-Za-z0-9]{2,4} [A-Za-z0-9]{4,8})"
             r"(?![0-9A-Za-z])")
    return _PassportRecognizer(PASSPORT, [Pattern("passport id", token, WEAK_SCORE)],
                               PASSPORT_CONTEXT, boost=BOOST, name="PassportRecognizer",
                               supported_language=supported_language)


def birth_date_recognizer(supported_language: str = "en") -> ContextPatternRecognizer:
    """``DATE_OF_BIRTH``: a date (numeric, ISO, with a month name, 年月日) next to a birth word.

    A date alone is no personal data (a release, a deadline); beside "date of
    birth", "Geburtsdatum", "né le", "生年月日" it names a person's birthday.

    >>> r = birth_date_recognizer()
    >>> [x.score for x in r.analyze_text("Geburtsdatum: 02.11.1990")]
    [0.7]
    >>> [x.score for x in r.analyze_text("Released on 02.11.1990")]
    [0.3]
    """
    year = r"(?:19|20)\d{2}"
    dates = (rf"\d{{1,2}}[./\-]\d{{1,2}}[./\-](?:{year}|\d{{2}})|"
             rf"{year}[./\-]\d{{1,2}}[./\-]\d{{1,2}}|"
             rf"\d{{1,2}}\.?\s+(?:de\s+)?(?i:{_MONTHS})\s+(?:de\s+)?{year}|"
             rf"(?i:{_MONTHS})\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+{year}|"
             rf"{year}\s?[年년]\s?\d{{1,2}}\s?[月월]\s?\d{{1,2}}\s?[日일]")
    pattern = Pattern("date", rf"(?<![\w/.\-])(?:{dates})(?![\w/\-]|\.\d)", WEAK_SCORE)
    return ContextPatternRecognizer(DATE_OF_BIRTH, [pattern], BIRTH_CONTEXT, boost=BOOST,
                                    window=30, name="BirthDateRecognizer",
                                    supported_language=supported_language)


@lru_cache(maxsize=1)
def _all() -> tuple[list[CheckedIdRecognizer], ContextPatternRecognizer]:
    return national_id_recognizers(), passport_recognizer()


def find_national_ids(text: str, threshold: float = 0.35) -> list[tuple[int, int, str]]:
    """``(start, end, entity)`` of every national ID and passport number scoring ``threshold``+."""
    ids, passports = _all()
    results = [r for rec in ids for r in rec.analyze(text, rec.supported_entities)]
    found = {(r.start, r.end, r.entity_type) for r in [*results, *passports.analyze_text(text)]
             if r.score >= threshold}
    return sorted(found)
