"""Turn a model spec into the Hugging Face directory behind it, for training and KL drift.

Training and the KL measure need the weights themselves, not a chat
endpoint. ``"local"`` is the embedded model's converted directory,
``"local:<dir>"`` and a bare directory path are that directory; a served
model (``"openai:..."``) has no weights here and is refused with a clear
error. A LoRA adapter directory is recognized by its ``adapter_config.json``.

Example:
    >>> import tempfile, pathlib, json
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "config.json").write_text("{}")
    >>> resolve_model_dir(f"local:{d}") == d
    True
    >>> is_adapter_dir(d)
    False
    >>> resolve_model_dir("openai:http://127.0.0.1:8000/v1")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.distill.model_dirs.ModelDirError: 'openai:http://127.0.0.1:8000/v1' is a served model...
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from agentic_loop.models import parse_spec
from agentic_loop.models.embedded import ensure_converted

__all__ = ["ModelDirError", "adapter_base", "is_adapter_dir", "resolve_model_dir"]

ADAPTER_CONFIG = "adapter_config.json"


class ModelDirError(ValueError):
    """A spec does not name a usable model directory; the message says what to pass."""


def is_adapter_dir(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` holds a PEFT (LoRA) adapter rather than a full model."""
    return (Path(path) / ADAPTER_CONFIG).is_file()


def adapter_base(path: str | os.PathLike[str]) -> str:
    """The base model an adapter was trained on (``base_model_name_or_path``)."""
    config_path = Path(path) / ADAPTER_CONFIG
    try:
        base = json.loads(config_path.read_text(encoding="utf-8")).get("base_model_name_or_path")
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelDirError(f"cannot read the adapter config {config_path}: {exc}") from None
    if not base:
        raise ModelDirError(f"{config_path} names no base_model_name_or_path; re-save the adapter "
                            "with its base model set.")
    return str(base)


def resolve_model_dir(spec: str | os.PathLike[str]) -> Path:
    """The HF directory for ``spec``: ``"local"``, ``"local:<dir>"`` or a directory path."""
    text = os.fspath(spec)
    candidate = Path(text).expanduser()
    if candidate.is_dir():
        path = candidate
    else:
        try:
            parsed = parse_spec(text)
        except ValueError as exc:
            raise ModelDirError(f"{text!r} is neither a model directory nor a model spec: {exc}") from None
        if parsed.provider != "local":
            raise ModelDirError(
                f"{text!r} is a served model: its weights are not on this machine. Pass 'local', "
                "'local:<dir>' or a model directory.")
        path = ensure_converted() if parsed.target is None else Path(parsed.target).expanduser()
    if not path.is_dir():
        raise ModelDirError(f"model directory {path} (from {text!r}) does not exist.")
    if not ((path / "config.json").is_file() or is_adapter_dir(path)):
        raise ModelDirError(f"{path} is not a Hugging Face model directory: it has neither "
                            f"config.json nor {ADAPTER_CONFIG}.")
    return path
