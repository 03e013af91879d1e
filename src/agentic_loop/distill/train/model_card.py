"""``model_card.yaml``: what a trained model is, what it learned from, and how it did.

A model directory without a record of its base, data and settings cannot be
trusted, reproduced or rolled back with confidence. ``train`` writes this
card next to the weights; the evaluation gate appends its results to it;
the registry keeps a copy of it with every version. YAML, because people
read it (``cat model_card.yaml``) as often as programs do.

Example:
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> card = ModelCard(name="m1", base_model="local", method="sft",
    ...                  data=DataRef(dir="data/x", manifest_sha256="ab12", sft_rows=3, pairs=0))
    >>> write_card(d, card)
    >>> read_card(d).data.sft_rows
    3
    >>> add_eval(d, {"decision": "PROMOTE", "p_value": 0.01})
    >>> read_card(d).evals[0]["decision"]
    'PROMOTE'
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentic_loop.atomic import atomic_write_bytes
from agentic_loop.clock import utc_stamp
from agentic_loop.errors import TrainError

__all__ = ["CARD_FILE", "DataRef", "ModelCard", "ModelCardError", "add_eval", "read_card",
           "write_card"]

CARD_FILE = "model_card.yaml"


class ModelCardError(TrainError, ValueError):
    """A model card is missing or unreadable; the message names the file.

    A :class:`~agentic_loop.errors.TrainError` that is still a ``ValueError``.
    """


class DataRef(BaseModel):
    """The data a model was trained on: its folder (or task file), hash and counts.

    ``prompts`` counts GRPO's tasks (it trains on prompts, not rows).
    """

    dir: str
    manifest_sha256: str
    sft_rows: int = 0
    pairs: int = 0
    prompts: int = 0


class ModelCard(BaseModel):
    """The card's fields. Unknown keys are kept, so older code can read newer cards."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = 1
    name: str
    base_model: str
    base_model_path: str | None = None
    method: str
    adapter: bool = False
    lora: dict[str, Any] | None = None
    data: DataRef
    hyperparameters: dict[str, Any] = Field(default_factory=dict)
    precision: str | None = None
    stages: list[dict[str, Any]] = Field(default_factory=list)
    metrics: dict[str, Any] = Field(default_factory=dict)
    started_at: str | None = None
    finished_at: str | None = None
    config_fingerprint: str | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    evals: list[dict[str, Any]] = Field(default_factory=list)
    #: how the training prompts were built (the export manifest's ``prompt_format``: template,
    #: version, system message, parts): serve the model with the same chat
    prompt_format: dict[str, Any] | None = None
    #: GRPO: the reward functions and weights, error counts, locked rubrics, per-step curve
    reward: dict[str, Any] | None = None


def _card_path(path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    return p if p.name == CARD_FILE else p / CARD_FILE


def write_card(model_dir: str | os.PathLike[str], card: ModelCard) -> None:
    """Write ``model_dir/model_card.yaml`` atomically."""
    text = yaml.safe_dump(card.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
    atomic_write_bytes(_card_path(model_dir), text.encode("utf-8"))


def read_card(model_dir: str | os.PathLike[str]) -> ModelCard:
    """Read a card (pass the model dir or the card file itself)."""
    path = _card_path(model_dir)
    if not path.is_file():
        raise ModelCardError(f"no model card at {path}; models trained by `agentic-loop "
                             "distill` have one; train the model with it, or register it "
                             "with --no-card")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        return ModelCard.model_validate(data)
    except (yaml.YAMLError, ValidationError) as exc:
        raise ModelCardError(f"the model card {path} is unreadable: {exc}; restore it from the "
                             "registry's copy or retrain") from None


def add_eval(model_dir: str | os.PathLike[str], result: dict[str, Any]) -> None:
    """Append one evaluation result (stamped with the time) to the card's ``evals``."""
    card = read_card(model_dir)
    card.evals.append({"at": utc_stamp(), **result})
    write_card(model_dir, card)
