"""The provider table: which ``<provider>:<target>`` spec loads which chat model.

``models/`` is the ground floor: it knows the providers it implements
(``local``, ``openai`` and LangChain's ``provider:model``, registered by
:mod:`agentic_loop.models.loaders`) and nothing above it. A provider that
lives higher up (the model registry's ``registry:<dir>``, in
``distill/release``) contributes its row from there, in two ways that give
the same row: a :func:`register_provider` call when its package is imported,
and an entry point in the ``agentic_loop.model_providers`` group (see
``pyproject.toml``), looked up lazily by :func:`get_provider` when a spec
names a provider the table does not hold yet. So ``load_chat_model(
"registry:runs/registry")`` works without importing the registry first, and
``models/`` imports nothing of ``distill/``.

Example:
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> echo = ModelProvider(name="echo", form="echo:<text>", target_name="text",
    ...                      load=lambda target, source, kw: ScriptedChatModel(default=target))
    >>> register_provider(echo)
    >>> get_provider("echo") is echo, "echo" in known_providers()
    (True, True)
    >>> provider_of("nope", spec="nope:x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.models.errors.ModelSpecError: model spec 'nope:x' names the provider 'nope'...
    >>> unregister_provider("echo")
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

from agentic_loop.models.errors import ModelLoadError, ModelSpecError

__all__ = [
    "ENTRY_POINT_GROUP",
    "ModelProvider",
    "get_provider",
    "known_providers",
    "provider_forms",
    "provider_of",
    "register_provider",
    "unregister_provider",
]

#: The entry-point group a package names its providers in (``name = "module:ModelProvider"``).
ENTRY_POINT_GROUP = "agentic_loop.model_providers"

#: ``load(target, source, kw)``: the target after ``<name>:`` (None when the spec has none),
#: the spec as the user wrote it (for errors) and the keyword arguments of ``load_chat_model``.
Loader = Callable[[str | None, str, dict[str, Any]], BaseChatModel]


@dataclass(frozen=True)
class ModelProvider:
    """One row of the table: how a ``<name>:<target>`` spec is written and loaded.

    ``model_dir`` maps a target to the directory of the weights behind it
    (training and the drift measure need them); None for a served model.
    """

    name: str
    form: str  # how the spec is written, for help and errors: "registry:<registry dir>"
    load: Loader
    target_name: str = "target"  # what the target is, in errors: "registry folder"
    example: str = ""  # a spec that works, in errors: "registry:runs/registry"
    target_required: bool = True
    model_dir: Callable[[str], Path] | None = None


_TABLE: dict[str, ModelProvider] = {}
_LOCK = threading.Lock()


def register_provider(provider: ModelProvider) -> None:
    """Add (or replace) ``provider``'s row; its name is matched case-insensitively."""
    if not provider.name or ":" in provider.name or provider.name != provider.name.strip():
        raise ModelSpecError(f"model provider name {provider.name!r} is not usable; name it "
                             "with letters, digits, '-' or '_' (no ':' or spaces)")
    with _LOCK:
        _TABLE[provider.name.lower()] = provider


def unregister_provider(name: str) -> None:
    """Remove ``name``'s row (tests; a plugin being unloaded); no error when absent."""
    with _LOCK:
        _TABLE.pop(name.lower(), None)


@cache
def _entry_points() -> dict[str, metadata.EntryPoint]:
    """The installed packages' providers by name (read once: they change only on install)."""
    return {ep.name.lower(): ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def get_provider(name: str) -> ModelProvider | None:
    """``name``'s row: the table, else an installed entry point (loaded now), else None."""
    key = name.lower()
    with _LOCK:
        found = _TABLE.get(key)
    if found is not None:
        return found
    entry = _entry_points().get(key)
    if entry is None:
        return None
    try:
        provider = entry.load()
    except Exception as exc:  # noqa: BLE001 - a broken plugin, named with its entry point
        raise ModelLoadError(
            f"the model provider {name!r} (entry point {entry.value!r} in group "
            f"{ENTRY_POINT_GROUP!r}) failed to import: {type(exc).__name__}: {exc}; reinstall "
            "the package that provides it (`make setup` or `pip install -e .`)") from exc
    if not isinstance(provider, ModelProvider):
        raise ModelLoadError(f"the entry point {entry.value!r} for the model provider {name!r} "
                             f"is a {type(provider).__name__}, not a ModelProvider; point it at "
                             "the provider object")
    register_provider(provider)
    return provider


def known_providers() -> list[str]:
    """Every provider name a spec may start with: the table's and the installed entry points'."""
    with _LOCK:
        names = set(_TABLE)
    return sorted(names | set(_entry_points()))


def provider_forms() -> dict[str, str]:
    """How each known provider's spec is written, by name (entry points loaded), for errors."""
    forms = {}
    for name in known_providers():
        try:
            provider = get_provider(name)
        except ModelLoadError:
            provider = None
        forms[name] = provider.form if provider is not None else f"{name}:... (fails to import)"
    return forms


def provider_of(name: str, *, spec: str) -> ModelProvider:
    """``name``'s row, or a :class:`ModelSpecError` naming ``spec`` and the known providers."""
    provider = get_provider(name)
    if provider is None:
        raise ModelSpecError(
            f"model spec {spec!r} names the provider {name!r}, which is not installed; known "
            f"providers: {', '.join(known_providers())} (or a LangChain 'provider:model' spec)")
    return provider
