"""The PII gate: personal data and credentials found and replaced before any text reaches a dataset.

Why a package: the gate is one verb (:class:`PiiGate.anonymize`) over many
recognizers, one module per family: :mod:`.gate` (the gate: Presidio's
analyzer, overlap merging, the report), :mod:`.entities` (the entity names
and the error every module shares), :mod:`.recognizers` (the analyzer's
assembly and the context rules), :mod:`.secrets` (credentials, in every
mode), :mod:`.names` and :mod:`.script_names` (person names in Latin and
other scripts), :mod:`.gazetteer` (places, so a city is not a person),
:mod:`.national_ids` (ID, passport and birth-date numbers with their
checksums), :mod:`.addresses` and :mod:`.world_addresses` (street
addresses), :mod:`.phones` and :mod:`.obfuscated` (phones and e-mails, also
spelled out), :mod:`.spans` (merging and replacing findings).

Example:
    >>> from agentic_loop.distill.data.pii import PiiGate
    >>> PiiGate("off").anonymize("key ghp_4fQ9xT2mZr8LwP1vKd7sYb3NcHe6UjAq0GiR").text
    'key <SECRET>'
"""

from agentic_loop.distill.data.pii.entities import (
    DEFAULT_ENTITIES,
    DEFAULT_PHONE_REGIONS,
    PiiError,
    PiiMode,
)
from agentic_loop.distill.data.pii.gate import PiiGate, PiiReport, Redaction

__all__ = ["DEFAULT_ENTITIES", "DEFAULT_PHONE_REGIONS", "PiiError", "PiiGate", "PiiMode",
           "PiiReport", "Redaction"]
