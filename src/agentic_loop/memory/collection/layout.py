"""Where a memory collection keeps its files, and how namespaces map to folders.

A collection (an :class:`~agentic_loop.memory.Archive` or a
:class:`~agentic_loop.memory.ReflexionMemory`) lives in one folder::

    <root>/<namespace...>/
        entries.jsonl         the records, append-only (the only source of truth)
        meta.json             schema version, kind, embedder name and dimension
        index.faiss           task vectors (derived, rebuilt when missing or stale)
        outputs.faiss         output vectors for near-duplicate checks (derived)
        index.json            which log rows the two index files cover (derived)

A namespace is a tuple of labels (``("archive", "taglines")``), one folder
per label. Labels are percent-encoded, so any string (a user id, an e-mail)
is a safe folder name and the mapping reverses exactly.

Example:
    >>> from pathlib import Path
    >>> namespace_dir(Path("data/archive"), ("users", "ana@example.com")).as_posix()
    'data/archive/users/ana%40example.com'
    >>> namespace_dir(Path("data/archive"), "taglines").as_posix()
    'data/archive/taglines'
    >>> namespace_of(Path("data/archive"), Path("data/archive/users/ana%40example.com"))
    ('users', 'ana@example.com')
    >>> make_collection_dir(Path("/proc/1/archive"), "archive")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.memory.errors.ArchiveError: cannot create the archive folder /proc/1/archive: ...
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote, unquote

from agentic_loop.errors import ConfigError
from agentic_loop.memory.errors import ArchiveError
from agentic_loop.paths import make_dir

__all__ = [
    "ENTRIES",
    "INDEX_STATE",
    "META",
    "OUTPUT_INDEX",
    "RESERVED_NAMES",
    "TASK_INDEX",
    "Namespace",
    "namespace_dir",
    "namespace_of",
    "make_collection_dir",
    "normalize_namespace",
    "remove_index_files",
    "remove_temporaries",
]

ENTRIES = "entries.jsonl"
META = "meta.json"
TASK_INDEX = "index.faiss"
OUTPUT_INDEX = "outputs.faiss"
INDEX_STATE = "index.json"

RESERVED_NAMES = frozenset(
    {ENTRIES, META, TASK_INDEX, OUTPUT_INDEX, INDEX_STATE, f"{ENTRIES}.lock", f"{ENTRIES}.corrupt"}
)

Namespace = str | tuple[str, ...]


def normalize_namespace(namespace: Namespace | None) -> tuple[str, ...]:
    """Turn ``None``, a label or a tuple of labels into a validated tuple of labels."""
    if namespace is None:
        return ()
    labels = (namespace,) if isinstance(namespace, str) else tuple(namespace)
    for label in labels:
        if not isinstance(label, str) or not label:
            raise ConfigError(
                f"namespace {namespace!r} has an empty or non-string label {label!r}; "
                "use non-empty strings such as ('archive', 'taglines')"
            )
        if label in (".", "..") or label in RESERVED_NAMES:
            raise ConfigError(
                f"namespace label {label!r} in {namespace!r} is reserved (it names a file the "
                "collection keeps); pick another label"
            )
    return labels


def namespace_dir(root: Path, namespace: Namespace | None) -> Path:
    """The folder of ``namespace`` under ``root`` (``root`` itself for no namespace)."""
    labels = normalize_namespace(namespace)
    return root.joinpath(*(quote(label, safe="") for label in labels)) if labels else root


def namespace_of(root: Path, directory: Path) -> tuple[str, ...]:
    """The namespace a folder under ``root`` stands for (the inverse of :func:`namespace_dir`)."""
    return tuple(unquote(part) for part in directory.relative_to(root).parts)


def make_collection_dir(directory: Path, kind: str) -> None:
    """Create a collection's folder (and its parents), or say why it cannot be one."""
    make_dir(directory, what=f"{kind} folder", error=ArchiveError)


def remove_temporaries(directory: Path) -> None:
    """Delete the temporary files a crashed writer left in a collection folder.

    Call it holding the collection's lock: every writer holds it while its
    temporary file exists, so any temporary found then is an orphan.
    """
    for name in (ENTRIES, META, TASK_INDEX, OUTPUT_INDEX, INDEX_STATE):
        for orphan in directory.glob(f".{name}.*.tmp"):
            orphan.unlink(missing_ok=True)


def remove_index_files(directory: Path) -> None:
    """Delete a collection's derived index files; they are rebuilt from the log when needed."""
    for name in (INDEX_STATE, TASK_INDEX, OUTPUT_INDEX):
        (directory / name).unlink(missing_ok=True)
