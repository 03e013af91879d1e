"""The canary file: what the flywheel service asks the serving front to do with a candidate.

Why a file: the service that ramps a canary and the serve process that routes
requests are separate processes (often started at different times), and the
registry folder is the one place both already share. The service writes
``<registry>/canary.json`` (atomically: a reader sees the old state or the
new one, never half of one), the serve process checks it at each poll
(:mod:`~agentic_loop.distill.release.canary.follow`), and a missing file
means "no canary: every request goes to the current version".

Example:
    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> read_canary(root) is None
    True
    >>> write_canary(root, CanaryState(candidate="v3", fraction=0.05))
    >>> state = read_canary(root)
    >>> state.candidate, state.fraction, state.mode, canary_file(root).name
    ('v3', 0.05, 'canary', 'canary.json')
    >>> write_canary(root, None); read_canary(root) is None
    True
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from agentic_loop.atomic import atomic_write_bytes
from agentic_loop.clock import utc_now
from agentic_loop.distill.release.registry import Registry
from agentic_loop.distill.release.router import DEFAULT_SALT
from agentic_loop.errors import ConfigError, StorageError

__all__ = ["CANARY_FILE", "CanaryState", "canary_file", "read_canary", "write_canary"]

CANARY_FILE = "canary.json"


class CanaryState(BaseModel):
    """One canary (or shadow) of a candidate version against the registry's current."""

    candidate: str  #: a registry version, e.g. "v3"
    #: (0, 1]: the share of user keys routed to the candidate (shadow: the share mirrored)
    fraction: float
    mode: Literal["canary", "shadow"] = "canary"
    stage: int = 0  #: the index into the ramp's stages (for display)
    salt: str = DEFAULT_SALT  #: hashed with each user key into its bucket
    started_at: datetime = Field(default_factory=utc_now)

    @field_validator("fraction")
    @classmethod
    def _share(cls, value: float) -> float:
        if not 0.0 < value <= 1.0:
            raise ConfigError(f"fraction={value!r}: pass a share of user keys in (0, 1]")
        return value


def canary_file(registry: Registry | str | os.PathLike[str]) -> Path:
    """``<registry>/canary.json``."""
    root = registry.root if isinstance(registry, Registry) else Path(registry).expanduser()
    return root / CANARY_FILE


def read_canary(registry: Registry | str | os.PathLike[str]) -> CanaryState | None:
    """The canary the registry's server should run; None when there is none (no file).

    A file that is not a canary state raises a :class:`StorageError` naming it.
    """
    path = canary_file(registry)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"cannot read the canary file {path} ({exc}); check its "
                           "permissions, or delete it to route every request to current") from exc
    try:
        return CanaryState.model_validate_json(data)
    except (ValidationError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise StorageError(f"the canary file {path} is not a canary state ({first}); write "
                           "it again with write_canary(), or delete it to route every request "
                           "to current") from None


def write_canary(registry: Registry | str | os.PathLike[str], state: CanaryState | None) -> None:
    """Write ``state`` atomically; None removes the file (no canary)."""
    path = canary_file(registry)
    if state is None:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, (state.model_dump_json(indent=2) + "\n").encode())
