"""Distillation data: trajectories through a PII gate and curation into SFT and DPO sets.

The training loop starts here. :func:`export_datasets` reads trajectory logs
(and optionally an archive), drops what should not be learned from (errored,
non-consenting, outlier, rare or unsafe runs), anonymizes every text with
:class:`PiiGate` (Presidio, offline), and writes TRL-ready ``sft.jsonl`` and
``pairs.jsonl`` with a ``manifest.json`` recording every count and hash.

Presidio and spaCy load only when a :class:`PiiGate` in ``"spacy"`` or
``"regex"`` mode is built, and training, evaluation, registry and serving load
torch and TRL inside their functions, so importing this package stays fast.

Example:
    >>> from agentic_loop.distill import PiiGate, export_datasets
    >>> PiiGate("off").anonymize("hello").text
    'hello'
"""

from agentic_loop.distill.curate import CurationLog, FilterStep
from agentic_loop.distill.datasets import Message, PairRow, SftRow, preference_pairs, sft_rows
from agentic_loop.distill.errors import EmptyExportError, ExportError
from agentic_loop.distill.evaluate import EvalReport, evaluate_models
from agentic_loop.distill.export import ExportProgress, ExportReport, export_datasets
from agentic_loop.distill.gate import Decision, GateDecision, gate
from agentic_loop.distill.pii import (
    DEFAULT_ENTITIES,
    DEFAULT_PHONE_REGIONS,
    PiiError,
    PiiGate,
    PiiReport,
    Redaction,
)
from agentic_loop.distill.pipeline import distill_loop
from agentic_loop.distill.registry import Registry, RegistryError
from agentic_loop.distill.samples import Sample, trajectory_samples
from agentic_loop.distill.serve import VLLMServer, serve, serve_registered
from agentic_loop.distill.train import TrainResult, train

__all__ = [
    "DEFAULT_ENTITIES",
    "Decision",
    "EvalReport",
    "GateDecision",
    "Registry",
    "RegistryError",
    "TrainResult",
    "VLLMServer",
    "distill_loop",
    "evaluate_models",
    "gate",
    "serve",
    "serve_registered",
    "train",
    "DEFAULT_PHONE_REGIONS",
    "CurationLog",
    "EmptyExportError",
    "ExportError",
    "ExportProgress",
    "ExportReport",
    "FilterStep",
    "Message",
    "PairRow",
    "PiiError",
    "PiiGate",
    "PiiReport",
    "Redaction",
    "Sample",
    "SftRow",
    "export_datasets",
    "preference_pairs",
    "sft_rows",
    "trajectory_samples",
]
