"""``meta.json``: which embedder built a collection, so it is never searched with another.

Vectors from two embedders live in different spaces: comparing them gives
confident nonsense. ``meta.json`` records the embedder's name and dimension
(and the collection kind and schema version) when a collection is created;
opening it with another embedder is refused unless re-embedding is asked for.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "meta.json"
    >>> write_meta(path, CollectionMeta(kind="archive", embedder="hashing-v1-64", dim=64))
    >>> read_meta(path).embedder
    'hashing-v1-64'
    >>> _ = path.write_text("{not json")
    >>> try:
    ...     read_meta(path)
    ... except ArchiveCorruptedError as err:
    ...     print(str(err).split(" (")[0].endswith("meta.json is corrupted"))
    True
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentic_loop.atomic import atomic_write_bytes
from agentic_loop.memory.errors import ArchiveCorruptedError
from agentic_loop.memory.records import utc_now

__all__ = ["SCHEMA_VERSION", "CollectionMeta", "read_meta", "write_meta"]

SCHEMA_VERSION = 1


class CollectionMeta(BaseModel):
    """The content of ``meta.json``."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    kind: str
    embedder: str
    dim: Annotated[int, Field(gt=0)]
    created_at: datetime = Field(default_factory=utc_now)


def read_meta(path: Path) -> CollectionMeta | None:
    """Read ``meta.json``; ``None`` if it does not exist; a clear error if it is unreadable."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ArchiveCorruptedError(f"Cannot read {path}: {exc}.") from exc
    try:
        meta = CollectionMeta.model_validate_json(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ())) or "file"
        raise ArchiveCorruptedError(
            f"{path} is corrupted ({where}: {err.get('msg')}). It only records which embedder built "
            f"this collection; the records in {path.parent / 'entries.jsonl'} are not affected. To "
            f"recover, delete {path} and reopen the collection with the embedder it was built with "
            "(the default is all-MiniLM-L6-v2): meta.json is recreated and the index rebuilt."
        ) from exc
    if meta.schema_version > SCHEMA_VERSION:
        raise ArchiveCorruptedError(
            f"{path} has schema version {meta.schema_version}, newer than this agentic-loop "
            f"understands ({SCHEMA_VERSION}). Upgrade agentic-loop to open it."
        )
    return meta


def write_meta(path: Path, meta: CollectionMeta) -> None:
    """Write ``meta.json`` atomically."""
    atomic_write_bytes(path, meta.model_dump_json(indent=2).encode() + b"\n")
