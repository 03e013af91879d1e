"""From a model spec to the Hugging Face directory behind it: one resolver for chat and weights.

``load_chat_model`` (chat), training and the KL drift measure (weights) all
resolve a spec the same way, through :func:`local_model_dir`:
``"local"`` is the embedded model's converted directory, ``"local:<dir>"``
and a bare directory path are that directory, a provider's spec is the
directory its ``model_dir`` names (``"registry:<dir>"``: the registry's
current version's), and the directory must hold
``config.json`` (a full model) or ``adapter_config.json`` (a LoRA adapter).
A served model (``"openai:..."``) has no weights here, so
:func:`resolve_model_dir` refuses it. Every failure is a
:class:`~agentic_loop.models.errors.ModelDirError`, which is both a
``ModelSpecError`` and a ``ModelLoadError``.

Example:
    >>> import tempfile, pathlib, json
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "config.json").write_text("{}")
    >>> resolve_model_dir(f"local:{d}") == d == resolve_model_dir(d)
    True
    >>> is_adapter_dir(d)
    False
    >>> resolve_model_dir("openai:http://127.0.0.1:8000/v1")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.models.errors.ModelDirError: 'openai:http://127.0.0.1:8000/v1' is a served model...
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from agentic_loop.models.embedded import ensure_converted
from agentic_loop.models.errors import ModelDirError, ModelSpecError
from agentic_loop.models.providers import get_provider
from agentic_loop.models.spec import ModelSpec, resolve_spec

__all__ = [
    "ADAPTER_CONFIG",
    "ModelDirError",
    "adapter_base",
    "is_adapter_dir",
    "local_model_dir",
    "resolve_model_dir",
]

ADAPTER_CONFIG = "adapter_config.json"


def is_adapter_dir(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` holds a PEFT (LoRA) adapter rather than a full model."""
    return (Path(path) / ADAPTER_CONFIG).is_file()


def adapter_base(path: str | os.PathLike[str]) -> str:
    """The base model an adapter was trained on (``base_model_name_or_path``)."""
    config_path = Path(path) / ADAPTER_CONFIG
    try:
        base = json.loads(config_path.read_text(encoding="utf-8")).get("base_model_name_or_path")
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelDirError(f"cannot read the adapter config {config_path}: {exc}; "
                            "re-save the adapter") from None
    if not base:
        raise ModelDirError(f"{config_path} names no base_model_name_or_path; re-save the adapter "
                            "with its base model set")
    return str(base)


def local_model_dir(spec: ModelSpec, *, source: str | None = None,
                    cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The checked directory of a local ``spec`` (the embedded model is converted once).

    ``source`` is the text the user gave, named in errors; ``cache_dir``
    overrides where the embedded model is converted.
    """
    text = source if source is not None else f"{spec.provider}:{spec.target or ''}".rstrip(":")
    if spec.provider == "langchain":
        raise ModelDirError(
            f"{text!r} is neither a model directory nor a model spec of a local model (no such "
            "directory here; as a LangChain spec it names a hosted model, whose weights are not "
            "on this machine); pass 'local', 'local:<dir>' or a model directory")
    if spec.provider != "local":
        row = get_provider(spec.provider)  # a provider from above may know its weights' folder
        if row is not None and row.model_dir is not None:
            return local_model_dir(ModelSpec("local", str(row.model_dir(spec.target or ""))),
                                   source=text)
        raise ModelDirError(
            f"{text!r} is a served model: its weights are not on this machine; pass 'local', "
            "'local:<dir>' or a model directory")
    if spec.target is None:
        path = ensure_converted(cache_dir=Path(cache_dir) if cache_dir is not None else None)
    else:
        path = Path(spec.target).expanduser()
    if not path.is_dir():
        raise ModelDirError(
            f"model directory {path} (from {text!r}) does not exist; pass a Hugging Face model "
            "directory, e.g. one written by `agentic-loop distill`")
    if not ((path / "config.json").is_file() or is_adapter_dir(path)):
        raise ModelDirError(f"{path} is not a Hugging Face model directory: it has neither "
                            f"config.json nor {ADAPTER_CONFIG}; pass the directory that holds "
                            "the model's config.json and weights")
    return path


def resolve_model_dir(spec: str | os.PathLike[str], *,
                      cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The HF directory for ``spec``: ``"local"``, ``"local:<dir>"`` or a directory path."""
    text = os.fspath(spec)
    try:
        parsed = resolve_spec(text)
    except ModelSpecError as exc:
        raise ModelDirError(
            f"{text!r} is neither a model directory nor a model spec: {exc}") from None
    return local_model_dir(parsed, source=text, cache_dir=cache_dir)
