"""``meta.json``: which embedder built a collection, so it is never searched with another.

Vectors from two embedders live in different spaces: comparing them gives
confident nonsense. ``meta.json`` records the embedder's name and dimension
(and the collection kind and schema version) when a collection is created;
opening it with another embedder is refused unless re-embedding is asked for
(:func:`open_meta`), and an embedder that reuses a name for another
dimension is caught before its first vector is compared (:func:`check_dim`).
The comparison is the memory policy's embedder guard
(:func:`agentic_loop.memory.policy.check_embedder`), shared with the store
backend, which records the embedder in the store instead.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "meta.json"
    >>> write_meta(path, CollectionMeta(kind="archive", embedder="hashing-v1-64", dim=64))
    >>> read_meta(path).embedder
    'hashing-v1-64'
    >>> from agentic_loop.memory.embeddings import HashingEmbedder
    >>> open_meta(path.parent, "archive", HashingEmbedder(dim=32), reembed=False)
    Traceback (most recent call last):
    ...
    agentic_loop.memory.errors.EmbedderMismatchError: the archive at ... was built with ...
    >>> meta, checked = open_meta(path.parent, "archive", HashingEmbedder(dim=32), reembed=True)
    >>> meta.embedder, meta.dim, checked
    ('hashing-v1-32', 32, True)
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
from agentic_loop.clock import utc_now
from agentic_loop.memory.collection.layout import ENTRIES, META, remove_index_files
from agentic_loop.memory.embeddings import TextEmbedder
from agentic_loop.memory.errors import ArchiveCorruptedError, ArchiveError
from agentic_loop.memory.policy import check_embedder

__all__ = [
    "SCHEMA_VERSION",
    "CollectionMeta",
    "check_dim",
    "collection_dirs",
    "open_meta",
    "read_meta",
    "write_meta",
]

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
        raise ArchiveCorruptedError(
            f"cannot read {path}: {exc}; check its permissions, or delete it to recreate it"
        ) from exc
    try:
        meta = CollectionMeta.model_validate_json(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ())) or "file"
        raise ArchiveCorruptedError(
            f"{path} is corrupted ({where}: {err.get('msg')}); it only records which embedder "
            f"built this collection; the records in {path.parent / ENTRIES} are not affected; "
            f"to recover, delete {path} and reopen the collection with the embedder it was "
            "built with (the default is all-MiniLM-L6-v2): meta.json is recreated and the "
            "index rebuilt"
        ) from exc
    if meta.schema_version > SCHEMA_VERSION:
        raise ArchiveCorruptedError(
            f"{path} has schema version {meta.schema_version}, newer than this agentic-loop "
            f"understands ({SCHEMA_VERSION}); upgrade agentic-loop to open it"
        )
    return meta


def write_meta(path: Path, meta: CollectionMeta) -> None:
    """Write ``meta.json`` atomically."""
    atomic_write_bytes(path, meta.model_dump_json(indent=2).encode() + b"\n")


def open_meta(
    directory: Path, kind: str, embedder: TextEmbedder, *, reembed: bool
) -> tuple[CollectionMeta, bool]:
    """The ``meta.json`` of the collection in ``directory``, written when new or re-embedded.

    Refuses a collection of another ``kind``, or one built by another
    embedder unless ``reembed`` (then the index files are deleted, to be
    rebuilt with ``embedder``). Returns the meta and whether ``embedder``'s
    dimension is known to match it already (asking an embedder its
    dimension may load a model, so an existing collection checks it later
    with :func:`check_dim`).
    """
    meta_path = directory / META
    meta = read_meta(meta_path)
    name = embedder.name
    if meta is None:
        meta = CollectionMeta(kind=kind, embedder=name, dim=embedder.dim)
        write_meta(meta_path, meta)
        return meta, True
    if meta.kind != kind:
        raise ArchiveError(
            f"{directory} holds a {meta.kind!r} collection (see {meta_path}), not a {kind!r} "
            "one; open it with the matching class, or use another folder or namespace"
        )
    built: CollectionMeta = meta
    if not reembed:  # the dimension is checked later (check_dim): asking may load a model
        check_embedder((built.embedder, built.dim), (name, None), mismatch=lambda: (
            f"the {kind} at {directory} was built with the embedder {built.embedder!r} "
            f"(dim {built.dim}), but it was opened with {name!r}; open it with the same "
            f"embedder, or pass reembed=True to re-embed every record with {name!r} "
            f"(recorded in {meta_path})"
        ))
    if meta.embedder == name:
        return meta, False
    meta = CollectionMeta(kind=kind, embedder=name, dim=embedder.dim, created_at=meta.created_at)
    remove_index_files(directory)
    write_meta(meta_path, meta)
    return meta, True


def check_dim(meta: CollectionMeta, embedder: TextEmbedder, directory: Path) -> None:
    """Refuse an ``embedder`` that shares the stored embedder's name but not its dimension."""
    dim = embedder.dim
    check_embedder((meta.embedder, meta.dim), (meta.embedder, dim), mismatch=lambda: (
        f"the {meta.kind} at {directory} holds {meta.dim}-dimensional vectors from "
        f"{meta.embedder!r}, but the embedder given under that name makes "
        f"{dim}-dimensional ones; it is a different model: give it its own name, or pass "
        "reembed=True"
    ))


def collection_dirs(root: Path, kind: str, *, skip_corrupted: bool = False) -> list[Path]:
    """The folders under ``root`` (itself included) holding a collection of ``kind``, sorted.

    A collection is recognized by its ``meta.json``; only that file is read.
    A corrupted one raises :class:`ArchiveCorruptedError`, or is passed over
    with ``skip_corrupted`` (a listing that should not fail for one folder).
    """
    found = []
    for meta_path in sorted(root.rglob(META)):
        if not meta_path.is_file():
            continue
        try:
            meta = read_meta(meta_path)
        except ArchiveCorruptedError:
            if not skip_corrupted:
                raise
            continue
        if meta is not None and meta.kind == kind:
            found.append(meta_path.parent)
    return found
