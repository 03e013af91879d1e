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
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote, unquote

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
    "normalize_namespace",
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
            raise ValueError(
                f"Namespace {namespace!r} has an empty or non-string label {label!r}; "
                "use non-empty strings such as ('archive', 'taglines')."
            )
        if label in (".", "..") or label in RESERVED_NAMES:
            raise ValueError(
                f"Namespace label {label!r} in {namespace!r} is reserved (it names a file the "
                "collection keeps); pick another label."
            )
    return labels


def namespace_dir(root: Path, namespace: Namespace | None) -> Path:
    """The folder of ``namespace`` under ``root`` (``root`` itself for no namespace)."""
    labels = normalize_namespace(namespace)
    return root.joinpath(*(quote(label, safe="") for label in labels)) if labels else root


def namespace_of(root: Path, directory: Path) -> tuple[str, ...]:
    """The namespace a folder under ``root`` stands for (the inverse of :func:`namespace_dir`)."""
    return tuple(unquote(part) for part in directory.relative_to(root).parts)
