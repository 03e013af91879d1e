"""The recognizers' building blocks: offline e-mail, context-boosted patterns, vetted spaCy guesses.

:func:`~agentic_loop.distill.data.pii.analyzer.build_analyzer` assembles the
analyzer a :class:`~agentic_loop.distill.data.pii.gate.PiiGate` uses from
the ones below (in place of, or beside, Presidio's stock ones) and from the
recognizer families built on them (national IDs, phones, spelled contacts).
Two problems with the stock recognizers, and one gap:

* Presidio's ``EmailRecognizer`` validates each match with ``tldextract``,
  whose default extractor fetches the public suffix list from the internet
  on first use. Offline it prints stack traces, and behind a firewall that
  drops packets it hangs. :class:`OfflineEmailRecognizer` validates with an
  extractor that only reads the snapshot bundled inside ``tldextract``.
* Presidio boosts a match's score when a context word ("account", "bank")
  stands near it, but only from the NLP engine's lemmas: with no NLP model
  (the regex-only gate) it never fires, and an English pipeline does not split
  Korean words ("계좌번호" is one token, not "계좌"). :class:`ContextPatternRecognizer`
  looks for its context words in the raw text around the match instead, so
  it behaves the same in every mode and in any script.
* :func:`bank_account_recognizer` is the example custom recognizer: a
  Korean-style bank account number, three-two-six digits (``110-23-456789``),
  which on its own scores below the gate's threshold (such numbers are
  common) and is redacted once a context word stands near it.
* phone numbers beyond ``phonenumbers``' metadata (Korean mobiles by
  format, ``+CC`` numbers, digit groups beside a phone word in any
  language) are :mod:`~agentic_loop.distill.data.pii.phones`' job.

Example:
    >>> recognizer = bank_account_recognizer()
    >>> hits = recognizer.analyze_text("계좌번호 110-23-456789 입니다")
    >>> [(r.entity_type, r.score) for r in hits]
    [('BANK_ACCOUNT', 0.7)]
    >>> [r.score for r in recognizer.analyze_text("Order 110-23-456789 shipped.")]
    [0.3]
    >>> OfflineEmailRecognizer().validate_result("ana@example.com")
    True
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from presidio_analyzer import (
    EntityRecognizer,
    Pattern,
    PatternRecognizer,
    RecognizerResult,
)
from presidio_analyzer.predefined_recognizers import (
    EmailRecognizer,
    IpRecognizer,
    SpacyRecognizer,
)

from agentic_loop.errors import ConfigError

if TYPE_CHECKING:
    import tldextract
    from presidio_analyzer.nlp_engine import NlpArtifacts

__all__ = [
    "BANK_ACCOUNT_CONTEXT",
    "ContextPatternRecognizer",
    "HostIpRecognizer",
    "VettedSpacyRecognizer",
    "OfflineEmailRecognizer",
    "bank_account_recognizer",
    "name_recognizer",
    "context_regex",
    "offline_tld_extractor",
]

#: Words that, near a 3-2-6 digit number, say it is a bank account (English and Korean).
BANK_ACCOUNT_CONTEXT: tuple[str, ...] = (
    "account", "acct", "bank", "deposit", "transfer", "iban",
    "계좌", "은행", "입금", "송금", "예금주",
)


@lru_cache(maxsize=1)
def offline_tld_extractor() -> tldextract.TLDExtract:
    """A ``tldextract`` extractor that never touches the network or a disk cache.

    ``suffix_list_urls=()`` disables the download, ``cache_dir=None`` the cache,
    so the public suffix list comes from the snapshot shipped in the package.

    >>> offline_tld_extractor()("mail.example.co.kr").suffix
    'co.kr'
    """
    import tldextract

    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None, fallback_to_snapshot=True)


class OfflineEmailRecognizer(EmailRecognizer):
    """Presidio's e-mail recognizer, validating domains with the bundled suffix list only."""

    def validate_result(self, pattern_text: str) -> bool:
        """Whether the match ends in a real public suffix (``.com``, ``.co.kr``...).

        >>> OfflineEmailRecognizer().validate_result("root@localhost.invalidtld")
        False
        """
        return offline_tld_extractor()(pattern_text).fqdn != ""


def context_regex(words: Sequence[str]) -> re.Pattern[str]:
    """One case-insensitive regex for context ``words``, the same in every mode and script.

    A short Latin word (under six letters: "tel", "nhs", "cpf", "né") must stand
    whole, a plural ``s`` allowed; a longer one may begin a longer word, as
    compounds and inflections do ("Reisepassnummer", "paszportu",
    "passports"); any other word is a substring, because Korean, Chinese and
    Japanese attach particles to it ("계좌번호로", "マイナンバーは").

    Spaces, hyphens and underscores inside a word are interchangeable or
    absent, as in field names ("nhs number" matches ``"nhs_number":``,
    "steuer-id" matches ``steuer_id=``).

    >>> rx = context_regex(["passport", "tel", "护照", "nhs number"])
    >>> [bool(rx.search(t)) for t in ("Passportnummer", "hotel", "Tel.", "护照号码", "NHS_Number")]
    [True, False, True, True, True]
    """
    def one(word: str) -> str:
        body = r"[\s_\-]?".join(map(re.escape, re.split(r"[\s_\-]+", word.strip())))
        if not all(ord(c) < 0x250 or 0x1E00 <= ord(c) <= 0x1EFF for c in word):
            return body  # Latin letters with accents ("née") stand whole: "année" is no "née"
        return rf"\b{body}" + (r"\w*" if len(word) >= 6 else r"(?:s|es)?\b")

    return re.compile("|".join(map(one, words)), re.IGNORECASE)


class ContextPatternRecognizer(PatternRecognizer):
    """A pattern recognizer that raises a match's score when a context word is near it.

    ``window`` is how many characters on each side of the match are searched.
    An ASCII context word must appear as a whole word (case-insensitive); any
    other word as a substring, because Korean and similar languages attach
    particles and compounds to the word ("계좌번호로"). A match with a context
    word nearby scores ``min(1, score + boost)``.
    """

    def __init__(
        self,
        supported_entity: str,
        patterns: Sequence[Pattern],
        context: Sequence[str],
        *,
        boost: float = 0.4,
        window: int = 40,
        name: str | None = None,
        supported_language: str = "en",
    ) -> None:
        if not context:
            raise ConfigError(f"{supported_entity}: a context recognizer needs at least one "
                              "context word; pass context=[...]")
        if not 0 < boost <= 1:
            raise ConfigError(f"boost must be in (0, 1], got {boost!r}")
        if window < 1:
            raise ConfigError(f"window must be at least 1 character, got {window!r}")
        super().__init__(
            supported_entity=supported_entity,
            patterns=list(patterns),
            context=list(context),
            name=name or type(self).__name__,  # Presidio's own default, typed
            supported_language=supported_language,
        )
        self.boost = boost
        self.window = window
        self._context_regex = context_regex(context)

    def has_context(self, text: str, start: int, end: int) -> bool:
        """Whether a context word stands within ``window`` characters of ``text[start:end]``."""
        before = text[max(0, start - self.window):start]
        after = text[end:end + self.window]
        return bool(self._context_regex.search(before) or self._context_regex.search(after))

    def enhance_using_context(
        self,
        text: str,
        raw_recognizer_results: list[RecognizerResult],
        other_raw_recognizer_results: list[RecognizerResult],
        nlp_artifacts: NlpArtifacts | None,
        context: list[str] | None = None,
    ) -> list[RecognizerResult]:
        """Boost matches with a context word nearby; mark them so Presidio does not boost twice."""
        for result in raw_recognizer_results:
            if self.has_context(text, result.start, result.end):
                result.score = round(min(1.0, result.score + self.boost), 6)
                enhanced = RecognizerResult.IS_SCORE_ENHANCED_BY_CONTEXT_KEY
                result.recognition_metadata[enhanced] = True
        return raw_recognizer_results

    def analyze_text(self, text: str) -> list[RecognizerResult]:
        """Match and context-boost ``text`` with this recognizer alone (no analyzer needed)."""
        results = self.analyze(text, self.supported_entities, None)
        for result in results:
            result.recognition_metadata = {RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: self.id}
        return self.enhance_using_context(text, results, [], None)


def bank_account_recognizer(
    context: Sequence[str] = BANK_ACCOUNT_CONTEXT, **kwargs: Any
) -> ContextPatternRecognizer:
    """The shipped custom recognizer: ``BANK_ACCOUNT``, three-two-six digits (``110-23-456789``).

    It scores 0.3 alone (below the gate's default threshold of 0.35) and 0.7
    with a context word nearby. Keywords are passed to
    :class:`ContextPatternRecognizer`.

    >>> [r.score for r in bank_account_recognizer().analyze_text("bank account: 110-23-456789")]
    [0.7]
    """
    pattern = Pattern("KR bank account (3-2-6)", r"(?<![\d-])\d{3}-\d{2}-\d{6}(?![\d-])", 0.3)
    return ContextPatternRecognizer(
        "BANK_ACCOUNT", [pattern], context, name="BankAccountRecognizer", **kwargs
    )


class HostIpRecognizer(IpRecognizer):
    """Presidio's IP recognizer, less the addresses that name no machine: loopback, unspecified.

    ``127.0.0.1``, ``::1``, ``0.0.0.0`` and ``::`` are the same on every
    host; replacing them teaches a model nothing about privacy and breaks the
    meaning of networking answers ("IPv6 loopback is ::1").

    >>> r = HostIpRecognizer()
    >>> [r.invalidate_result(ip) for ip in ("::1", "127.0.0.1", "0.0.0.0", "203.0.113.9")]
    [True, True, True, False]
    """

    def invalidate_result(self, pattern_text: str) -> bool:
        """Invalid, loopback or unspecified addresses are no finding."""
        import ipaddress

        if super().invalidate_result(pattern_text):
            return True
        address = ipaddress.ip_interface(pattern_text).ip
        return address.is_loopback or address.is_unspecified


class VettedSpacyRecognizer(SpacyRecognizer):
    """Presidio's spaCy NER recognizer, its guesses vetted before the analyzer merges them.

    The small English model calls sentence-initial verbs ("Summarise"), ids,
    places and whole phrases of other languages ("Vielen Dank") people. A
    ``PERSON`` must look like a name
    (:func:`~agentic_loop.distill.data.pii.names.plausible_person`) and a
    ``LOCATION`` must not be code. Vetting happens here, not after the
    analyzer, because Presidio drops a rule's finding that a higher-scoring
    spaCy span contains: a guess rejected later would take the rule's name with it.
    """

    def analyze(self, text: str, entities: list[str],
                nlp_artifacts: NlpArtifacts | None = None) -> list[RecognizerResult]:
        """spaCy's entities, less the guesses that cannot be what they claim."""
        from agentic_loop.distill.data.pii.names import code_like, plausible_person

        out = []
        for result in super().analyze(text, entities, nlp_artifacts):
            if result.entity_type == "PERSON" and not plausible_person(
                    text, result.start, result.end):
                continue
            if result.entity_type == "LOCATION" and code_like(text[result.start:result.end]):
                continue
            out.append(result)
        return out


def name_recognizer(supported_language: str = "en") -> EntityRecognizer:
    """:func:`~agentic_loop.distill.data.pii.names.find_names` as a recognizer of ``PERSON``.

    Each finding scores 0.7 and carries the rule that found it as its recognizer name.

    >>> r = name_recognizer()
    >>> [x.entity_type for x in r.analyze("Dear Mr. Okonkwo,", [])]
    ['PERSON']
    """
    from agentic_loop.distill.data.pii.names import find_names

    class NameRuleRecognizer(EntityRecognizer):
        def load(self) -> None:
            """The lists load lazily, on the first text."""

        def analyze(self, text: str, entities: list[str],
                    nlp_artifacts: object = None) -> list[RecognizerResult]:
            return [RecognizerResult("PERSON", start, end, 0.7, recognition_metadata={
                RecognizerResult.RECOGNIZER_NAME_KEY: f"NameRules:{rule}"})
                for start, end, rule in find_names(text)]

    return NameRuleRecognizer(supported_entities=["PERSON"], name="NameRuleRecognizer",
                              supported_language=supported_language)
