"""Model spec strings: one short string names any model the library can run.

* ``"local"`` - the embedded SmolLM2-135M-Instruct (CPU, offline);
* ``"local:<dir>"`` - any Hugging Face causal-LM directory on disk;
* ``"openai:<base_url>"`` - an OpenAI-compatible server (vLLM), with ``model=``.

Example:
    >>> parse_spec("local")
    ModelSpec(provider='local', target=None)
    >>> parse_spec("openai:http://127.0.0.1:8000/v1")
    ModelSpec(provider='openai', target='http://127.0.0.1:8000/v1')
"""

from __future__ import annotations

from dataclasses import dataclass

from agentic_loop.models.errors import ModelSpecError

__all__ = ["ModelSpec", "parse_spec"]

_FORMS = ('"local" (embedded SmolLM2-135M), "local:<model dir>", '
          '"openai:<base_url>" with model=<served model name>')


@dataclass(frozen=True)
class ModelSpec:
    provider: str  # "local" | "openai"
    target: str | None  # model dir, base URL, or None for the embedded model


def parse_spec(spec: str) -> ModelSpec:
    """Split a spec string into provider and target; a clear error if it is neither."""
    if not isinstance(spec, str) or not spec.strip():
        raise ModelSpecError(f"empty model spec {spec!r}; use one of: {_FORMS}")
    spec = spec.strip()
    provider, _, target = spec.partition(":")
    provider = provider.lower()
    if provider == "local":
        if _ and not target.strip():
            raise ModelSpecError(f"model spec {spec!r} names no directory after 'local:'")
        return ModelSpec("local", target.strip() or None)
    if provider == "openai":
        target = target.strip()
        if not target.startswith(("http://", "https://")):
            raise ModelSpecError(
                f"model spec {spec!r} needs a base URL, e.g. 'openai:http://127.0.0.1:8000/v1'")
        return ModelSpec("openai", target)
    raise ModelSpecError(f"unknown model spec {spec!r}; use one of: {_FORMS}")
