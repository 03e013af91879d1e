"""Which registered models learned from erased data, and marking them in the registry's audit.

Why it matters: erasing rows does not erase what a model learned from them.
A model card names its dataset (``data.dir`` and ``data.manifest_sha256``),
and the registry keeps a copy of every card, so the versions trained on
erased rows can be named and marked
(:meth:`~agentic_loop.distill.release.Registry.record_data_removal`) for a
person to decide whether to retrain or retire them.

A version is *certainly* affected when its card's manifest hash is the hash
an erased export had just before its rows were removed. It is *possibly*
affected when it was trained on the same folder (an earlier export written
there) after the oldest erased run was logged: a model trained before the
run existed cannot hold it.

Example:
    >>> from datetime import UTC, datetime
    >>> from pathlib import Path
    >>> from agentic_loop.distill.forget.exports import ExportErasure
    >>> from agentic_loop.distill.release.registry_audit import ModelVersion
    >>> hit = ExportErasure(dir=Path("/d/export"), rows_removed=2, manifest_sha256_before="ab")
    >>> card = {"name": "m", "base_model": "local", "method": "sft",
    ...         "data": {"dir": "/d/export", "manifest_sha256": "ab"}}
    >>> v1 = ModelVersion(version="v1", path="/m", name="m", registered_at="", card=card)
    >>> affects(v1, [hit], earliest=None)
    'trained on /d/export (2 rows erased from it)'
    >>> card = {**card, "data": {"dir": "/d/export", "manifest_sha256": "00"},
    ...         "finished_at": "2025-01-01T00:00:00+00:00"}
    >>> v2 = ModelVersion(version="v2", path="/m", name="m", registered_at="", card=card)
    >>> print(affects(v2, [hit], earliest=datetime(2025, 6, 1, tzinfo=UTC)))
    None
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from agentic_loop.distill.forget.exports import ExportErasure
from agentic_loop.distill.forget.files import parse_time

if TYPE_CHECKING:
    from agentic_loop.distill.release.registry_audit import ModelVersion

__all__ = ["AffectedModel", "affects", "card_data_dirs", "mark_models"]


class AffectedModel(BaseModel):
    """A registered version trained on erased rows: where, which, and why we think so."""

    model_config = ConfigDict(frozen=True)

    registry: str
    version: str
    name: str
    reason: str


def _resolve(path: str | None) -> Path | None:
    return Path(path).expanduser().resolve() if path else None


def affects(version: ModelVersion, erasures: Sequence[ExportErasure], *,
            earliest: datetime | None) -> str | None:
    """Why ``version`` (by the copy of its model card) holds erased rows, or ``None``."""
    card = version.card
    sha = card.data.manifest_sha256 if card else None
    folder = _resolve(card.data.dir if card else None)
    trained = parse_time((card.finished_at or card.started_at if card else None)
                         or version.registered_at)
    for erasure in erasures:
        if not erasure.rows_removed:
            continue
        what = f"trained on {erasure.dir} ({erasure.rows_removed} rows erased from it)"
        if sha and sha == erasure.manifest_sha256_before:
            return what
        same_dir = folder is not None and folder == erasure.dir.resolve()
        if same_dir and (earliest is None or trained is None or trained >= earliest):
            return f"{what}; an earlier export in that folder, made after the erased data"
    return None


def _registries(roots: Sequence[str | os.PathLike[str]]) -> list[Any]:
    from agentic_loop.distill.release.registry import INDEX_FILE, Registry

    return [Registry(Path(r).expanduser()) for r in roots
            if (Path(r).expanduser() / INDEX_FILE).is_file()]


def card_data_dirs(roots: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The dataset folders the registered models' cards name (exports to look into)."""
    found = []
    for registry in _registries(roots):
        for version in registry.versions():
            folder = _resolve(version.card.data.dir if version.card else None)
            if folder is not None and folder.is_dir():
                found.append(folder)
    return list(dict.fromkeys(found))


def mark_models(roots: Sequence[str | os.PathLike[str]], erasures: Sequence[ExportErasure], *,
                earliest: datetime | None, reason: str, dry_run: bool = False,
                ) -> list[AffectedModel]:
    """Find the versions trained on erased rows in every registry under ``roots`` and, unless
    ``dry_run``, log a ``data_removed`` audit entry for each; return them."""
    affected = []
    for registry in _registries(roots):
        for version in registry.versions():
            why = affects(version, erasures, earliest=earliest)
            if why is None:
                continue
            affected.append(AffectedModel(registry=str(registry.root), version=version.version,
                                          name=version.name, reason=why))
            if not dry_run:
                registry.record_data_removal(version.version, reason=f"{reason}: {why}")
    return affected
