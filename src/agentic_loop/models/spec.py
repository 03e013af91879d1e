"""Model spec strings: one short string names any model the library can run.

* ``"local"`` - the embedded SmolLM2-135M-Instruct (CPU, offline);
* ``"local:<dir>"`` - any Hugging Face causal-LM directory on disk;
* ``"openai:<base_url>"`` - an OpenAI-compatible server (vLLM), with ``model=``.

:func:`resolve_spec` is the one resolver every caller uses: the spec
grammar above, plus a bare path to an existing directory, read as
``"local:<dir>"``. Turning a local spec into its checked directory is
:func:`~agentic_loop.models.model_dirs.local_model_dir`.

Example:
    >>> parse_spec("local")
    ModelSpec(provider='local', target=None)
    >>> parse_spec("openai:http://127.0.0.1:8000/v1")
    ModelSpec(provider='openai', target='http://127.0.0.1:8000/v1')
    >>> import tempfile
    >>> resolve_spec(tempfile.gettempdir()).provider
    'local'
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from agentic_loop.models.errors import ModelSpecError

__all__ = ["ModelSpec", "parse_spec", "resolve_spec"]

_FORMS = ('"local" (embedded SmolLM2-135M), "local:<model dir>", '
          '"openai:<base_url>" with model=<served model name>')


@dataclass(frozen=True)
class ModelSpec:
    """A parsed spec: ``provider`` and what it points at."""

    provider: str  # "local" | "openai"
    target: str | None  # model dir, base URL, or None for the embedded model


def parse_spec(spec: str) -> ModelSpec:
    """Split a spec string into provider and target; a clear error if it is neither."""
    if not isinstance(spec, str):
        raise ModelSpecError(f"model spec {spec!r} is a {type(spec).__name__}, not a string; "
                             f"use one of: {_FORMS}")
    if not spec.strip():
        raise ModelSpecError(f"empty model spec {spec!r}; use one of: {_FORMS}")
    spec = spec.strip()
    provider, _, target = spec.partition(":")
    provider = provider.lower()
    if provider == "local":
        if _ and not target.strip():
            raise ModelSpecError(f"model spec {spec!r} names no directory after 'local:'; "
                                 "write 'local:<model dir>' or just 'local'")
        return ModelSpec("local", target.strip() or None)
    if provider == "openai":
        target = target.strip()
        if not target.startswith(("http://", "https://")):
            raise ModelSpecError(
                f"model spec {spec!r} needs a base URL, e.g. 'openai:http://127.0.0.1:8000/v1'")
        return ModelSpec("openai", target)
    raise ModelSpecError(f"unknown model spec {spec!r}; use one of: {_FORMS}")


def resolve_spec(spec: str | os.PathLike[str]) -> ModelSpec:
    """:func:`parse_spec`, and a path to an existing directory as ``"local:<dir>"``.

    The spec grammar wins: a directory is only looked for when the text is
    not a spec.
    """
    text = os.fspath(spec) if isinstance(spec, os.PathLike) else spec
    try:
        return parse_spec(text)
    except ModelSpecError:
        path = Path(text).expanduser() if isinstance(text, str) and text.strip() else None
        if path is not None and path.is_dir():
            return ModelSpec("local", str(path))
        raise
