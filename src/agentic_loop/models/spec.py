"""Model spec strings: one short string names any model the library can run.

Our own forms:

* ``"local"`` - the embedded SmolLM2-135M-Instruct (CPU, offline);
* ``"local:<dir>"`` - any Hugging Face causal-LM directory on disk;
* ``"openai:<base_url>"`` - an OpenAI-compatible server (vLLM), with ``model=``;
  only when the part after ``openai:`` is a URL;
* ``"<provider>:<target>"`` for a provider contributed from above through
  :mod:`~agentic_loop.models.providers`: ``"registry:<dir>"``, a model
  registry's *current* version, always (``distill/release`` registers it).

Every other spec is LangChain's: ``"openai:gpt-4o-mini"``,
``"anthropic:claude-3-5-haiku-latest"`` or a bare ``"gpt-4o"`` (provider
inferred) go to ``langchain.chat_models.init_chat_model`` (provider
``"langchain"`` here; the spec is passed on whole).

:func:`resolve_spec` is the one resolver every caller uses: the spec
grammar above, plus a bare path to an existing directory, read as
``"local:<dir>"`` (our forms win, then a directory, then LangChain).
Turning a local spec into its checked directory is
:func:`~agentic_loop.models.model_dirs.local_model_dir`.

Example:
    >>> parse_spec("local")
    ModelSpec(provider='local', target=None)
    >>> parse_spec("openai:http://127.0.0.1:8000/v1")
    ModelSpec(provider='openai', target='http://127.0.0.1:8000/v1')
    >>> parse_spec("openai:gpt-4o-mini")
    ModelSpec(provider='langchain', target='openai:gpt-4o-mini')
    >>> parse_spec("registry:runs/registry")
    ModelSpec(provider='registry', target='runs/registry')
    >>> import tempfile
    >>> resolve_spec(tempfile.gettempdir()).provider
    'local'
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from agentic_loop.models.errors import ModelDirError, ModelSpecError
from agentic_loop.models.providers import get_provider, provider_forms

__all__ = ["BUILT_IN", "SPEC_FORMS", "ModelSpec", "parse_spec", "resolve_spec", "spec_forms"]

#: The providers whose grammar is written here (``langchain``: every spec that is not ours).
BUILT_IN = ("local", "openai", "langchain")
#: The built-in forms; :func:`spec_forms` adds the providers registered from above.
SPEC_FORMS = ('"local" (embedded SmolLM2-135M), "local:<model dir>", '
              '"openai:<base_url>" with model=<served model name>, '
              'or a LangChain init_chat_model spec such as "openai:gpt-4o-mini"')
#: ``host:port[/path]`` after ``openai:``: a server address missing its scheme, not a model name.
_ADDRESS = re.compile(r"^[A-Za-z0-9.-]+:\d+(/\S*)?$")


@dataclass(frozen=True)
class ModelSpec:
    """A parsed spec: ``provider`` and what it points at."""

    provider: str  # "local" | "openai" | "registry" | "langchain"
    target: str | None  # model dir, base URL, registry dir, LangChain spec, None: embedded


def spec_forms() -> str:
    """Every form a spec may take: the built-in ones and each registered provider's."""
    others = [f'"{form}"' for name, form in provider_forms().items() if name not in BUILT_IN]
    if not others:
        return SPEC_FORMS
    head, _, tail = SPEC_FORMS.rpartition(", or ")
    return f"{head}, {', '.join(others)}, or {tail}"


def parse_spec(spec: str) -> ModelSpec:
    """Split a spec string into provider and target; a clear error if it is unusable.

    Specs that are not ours are LangChain's: they parse here and are checked
    when :func:`~agentic_loop.models.load_chat_model` hands them to
    ``init_chat_model``.
    """
    if not isinstance(spec, str):
        raise ModelSpecError(f"model spec {spec!r} is a {type(spec).__name__}, not a string; "
                             f"use one of: {spec_forms()}")
    if not spec.strip():
        raise ModelSpecError(f"empty model spec {spec!r}; use one of: {spec_forms()}")
    spec = spec.strip()
    provider, colon, target = spec.partition(":")
    provider = provider.lower()
    target = target.strip()
    if provider == "local":
        if colon and not target:
            raise ModelSpecError(f"model spec {spec!r} names no directory after 'local:'; "
                                 "write 'local:<model dir>' or just 'local'")
        return ModelSpec("local", target or None)
    if provider == "openai":
        if target.startswith(("http://", "https://")):
            return ModelSpec("openai", target)
        if not target or _ADDRESS.match(target):
            raise ModelSpecError(
                f"model spec {spec!r} needs a base URL, e.g. 'openai:http://127.0.0.1:8000/v1', "
                "or an OpenAI model name, e.g. 'openai:gpt-4o-mini'")
    elif colon and provider not in BUILT_IN:
        row = get_provider(provider)  # registered from above, or an installed entry point
        if row is not None:
            if row.target_required and not target:
                example = f", e.g. {row.example!r}" if row.example else ""
                raise ModelSpecError(f"model spec {spec!r} names no {row.target_name} after "
                                     f"'{provider}:'; write {row.form!r}{example}")
            return ModelSpec(provider, target or None)
    return ModelSpec("langchain", spec)


def resolve_spec(spec: str | os.PathLike[str]) -> ModelSpec:
    """:func:`parse_spec`, and a path to an existing directory as ``"local:<dir>"``.

    Our own forms win; a directory is only looked for when the text is not
    one of them, and LangChain gets the rest, except a path (``./x``, ``~/x``,
    ``a/b``) that names no directory: that is a :class:`ModelDirError`.
    """
    text = os.fspath(spec) if isinstance(spec, os.PathLike) else spec
    parsed = parse_spec(text)
    if parsed.provider == "langchain":
        path = Path(text.strip()).expanduser()
        if path.is_dir():
            return ModelSpec("local", str(path))
        if ":" not in text and (text.strip().startswith((".", "~")) or os.sep in text):
            raise ModelDirError(
                f"model directory {path} does not exist; pass a Hugging Face model directory "
                "(e.g. one written by `agentic-loop distill`), 'local', or a LangChain spec "
                "such as 'openai:gpt-4o-mini'")
    return parsed
