"""Training: an exported dataset folder in, a trained model folder with its card out.

Enters: ``sft.jsonl`` / ``pairs.jsonl`` / ``manifest.json`` and a base model spec.
Leaves: the model (merged, or a LoRA adapter) and ``model_card.yaml`` (:func:`train`).
Between: checked settings, TRL SFT then DPO stages, resumable checkpoints.
GRPO enters a task file (or an export's prompts) instead, and rewards the
model's own samples with each task's locked rubric (:mod:`.grpo`, :mod:`.rewards`).

Example (settings are checked before anything loads):
    >>> from agentic_loop.distill.train import TrainSettings
    >>> TrainSettings(method="sft+dpo").stages
    ('sft', 'dpo')
"""

from agentic_loop.distill.train.grpo import Device, accelerate_command, grpo_config_kwargs
from agentic_loop.distill.train.model_card import ModelCard, ModelCardError, read_card
from agentic_loop.distill.train.prompt_set import PromptSet, PromptTask, load_prompt_set
from agentic_loop.distill.train.rewards import RewardFunction, RubricRewards, score_completion
from agentic_loop.distill.train.settings import TrainSettings
from agentic_loop.distill.train.stages import StageResult
from agentic_loop.distill.train.trainer import TrainError, TrainResult, train, training_precision
from agentic_loop.distill.train.training_data import TrainingDataError, load_training_data

__all__ = [
    "Device",
    "ModelCard",
    "ModelCardError",
    "PromptSet",
    "PromptTask",
    "RewardFunction",
    "RubricRewards",
    "StageResult",
    "TrainError",
    "TrainResult",
    "TrainSettings",
    "TrainingDataError",
    "accelerate_command",
    "grpo_config_kwargs",
    "load_prompt_set",
    "load_training_data",
    "read_card",
    "score_completion",
    "train",
    "training_precision",
]
