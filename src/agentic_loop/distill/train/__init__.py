"""Training: an exported dataset folder in, a trained model folder with its card out.

Enters: ``sft.jsonl`` / ``pairs.jsonl`` / ``manifest.json`` and a base model spec.
Leaves: the model (merged, or a LoRA adapter) and ``model_card.yaml`` (:func:`train`).
Between: checked settings, TRL SFT then DPO stages, resumable checkpoints.

Example (settings are checked before anything loads):
    >>> from agentic_loop.distill.train import TrainSettings
    >>> TrainSettings(method="sft+dpo").stages
    ('sft', 'dpo')
"""

from agentic_loop.distill.train.model_card import ModelCard, ModelCardError, read_card
from agentic_loop.distill.train.settings import TrainSettings
from agentic_loop.distill.train.stages import StageResult
from agentic_loop.distill.train.trainer import TrainError, TrainResult, train, training_precision
from agentic_loop.distill.train.training_data import TrainingDataError, load_training_data

__all__ = [
    "ModelCard",
    "ModelCardError",
    "StageResult",
    "TrainError",
    "TrainResult",
    "TrainSettings",
    "TrainingDataError",
    "load_training_data",
    "read_card",
    "train",
    "training_precision",
]
