"""The training loop: logged runs become data, data becomes weights, weights are gated and served.

Four stages, one subpackage each, importable on their own, in the order data
flows (each imports only the stages before it), with the loop on top:

:mod:`agentic_loop.distill.data`
    trajectory logs (and archives) through filters and the PII gate into
    TRL-ready ``sft.jsonl`` and ``pairs.jsonl`` with a ``manifest.json``
    (:func:`export_datasets`).
:mod:`agentic_loop.distill.train`
    an exported folder into a trained model and its ``model_card.yaml``
    (:func:`train`: TRL SFT and/or DPO, LoRA or full, resumable; or GRPO on a
    task file, each task's locked rubric as the reward).
:mod:`agentic_loop.distill.eval`
    a candidate against the current model on a golden set
    (:func:`evaluate_models`, :func:`gate`).
:mod:`agentic_loop.distill.release`
    the :class:`Registry` (promote, rollback), vLLM behind a front proxy
    (:func:`serve`), canary and shadow routing, monitors.
:mod:`agentic_loop.distill.loop`
    improvement rounds over all four (:func:`improve`); the one-shot
    pipeline (:func:`distill_loop`) is one round of it on runs already logged.
:mod:`agentic_loop.distill.forget`
    a user's data, or data past a retention age, erased from logs, memories,
    datasets and the registry's records.

Presidio and spaCy load only when a :class:`PiiGate` in ``"spacy"`` or
``"regex"`` mode is built, and training, evaluation, registry and serving load
torch and TRL inside their functions, so importing this package stays fast.

Example:
    >>> from agentic_loop.distill import PiiGate, export_datasets
    >>> PiiGate("off").anonymize("hello").text
    'hello'
"""

from agentic_loop.distill.data import (
    DEFAULT_ENTITIES,
    DEFAULT_PHONE_REGIONS,
    CurationLog,
    EmptyExportError,
    ExportError,
    ExportProgress,
    ExportReport,
    FilterStep,
    Message,
    PairRow,
    PiiError,
    PiiGate,
    PiiReport,
    Redaction,
    Sample,
    SftRow,
    export_datasets,
    preference_pairs,
    sft_rows,
    trajectory_samples,
)
from agentic_loop.distill.eval import Decision, EvalReport, GateDecision, evaluate_models, gate
from agentic_loop.distill.forget import (
    ForgetReport,
    enforce_retention,
    forget_user,
    withdraw_consent,
)
from agentic_loop.distill.loop import distill_loop, improve
from agentic_loop.distill.release import (
    Registry,
    RegistryError,
    VLLMServer,
    serve,
    serve_registered,
)
from agentic_loop.distill.train import RubricRewards, TrainResult, load_prompt_set, train

__all__ = [
    "DEFAULT_ENTITIES",
    "Decision",
    "EvalReport",
    "GateDecision",
    "Registry",
    "RegistryError",
    "RubricRewards",
    "TrainResult",
    "VLLMServer",
    "distill_loop",
    "evaluate_models",
    "gate",
    "improve",
    "load_prompt_set",
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
    "ForgetReport",
    "enforce_retention",
    "forget_user",
    "withdraw_consent",
    "preference_pairs",
    "sft_rows",
    "trajectory_samples",
]
