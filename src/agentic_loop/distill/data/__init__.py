"""Training data: logged runs in, TRL-ready SFT rows and DPO pairs out, through a PII gate.

Enters: trajectory logs (and archives), read by file with every bad line named.
Leaves: ``sft.jsonl``, ``pairs.jsonl`` and ``manifest.json`` (:func:`export_datasets`).
Between: filters, :class:`PiiGate` redaction, rewards in ``[0, 1]``, curation.
Only what the checks accept trains: every sample carries its verdict (every
check held, guard flags; :mod:`.verdicts`), and failing or flagged samples
never become SFT rows or chosen responses; the manifest counts each drop.

Example:
    >>> from agentic_loop.distill.data import PiiGate, composite_reward
    >>> PiiGate("off").anonymize("hello").text, composite_reward(8.0)
    ('hello', 0.8)
"""

from agentic_loop.distill.data.curate import CurationLog, FilterStep
from agentic_loop.distill.data.datasets import (
    Message,
    PairRow,
    SftRow,
    preference_pairs,
    sft_rows,
)
from agentic_loop.distill.data.errors import EmptyExportError, ExportError
from agentic_loop.distill.data.export import ExportProgress, ExportReport, export_datasets
from agentic_loop.distill.data.pii.gate import (
    DEFAULT_ENTITIES,
    DEFAULT_PHONE_REGIONS,
    PiiError,
    PiiGate,
    PiiReport,
    Redaction,
)
from agentic_loop.distill.data.reward import RewardWeights, composite_reward
from agentic_loop.distill.data.samples import Sample, trajectory_samples

__all__ = [
    "DEFAULT_ENTITIES",
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
    "RewardWeights",
    "Sample",
    "SftRow",
    "composite_reward",
    "export_datasets",
    "preference_pairs",
    "sft_rows",
    "trajectory_samples",
]
