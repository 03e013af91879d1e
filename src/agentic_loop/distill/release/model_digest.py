"""A model folder's content digest: the same weights and config give the same digest.

Why: a model registered twice (an improve round re-run after its ``state.json``
was lost, a folder registered by hand again) got a second version number for
one model, and promoting the "new" version changed nothing that served while
the audit log said it did. The registry refuses a second registration by this
digest, so the digest is about the model, not about where it lies or what was
written about it afterwards. It covers every file of the folder except:

* the model card (``model_card.yaml``): evaluations are appended to it after
  training, before the model is registered;
* the training run's bookkeeping (``run.json``, ``checkpoints/``, ``stages/``)
  and hidden files: what ``register(copy=True)`` leaves behind too;
* ``README.md`` (documentation a library writes beside an adapter).

Files are streamed in 1 MiB blocks. Each file's digest is cached by its path,
size, modification time and inode (:class:`DigestCache`, a small JSON file),
so looking at an unchanged multi-GB folder again costs one ``stat`` per file.

Example:
    >>> import tempfile, pathlib
    >>> a = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (a / "config.json").write_text("{}")
    >>> _ = (a / "model.safetensors").write_bytes(b"weights")
    >>> first = model_digest(a)
    >>> _ = (a / "model_card.yaml").write_text("evals: []")    # the card is not the model
    >>> model_digest(a) == first, len(first)
    (True, 64)
    >>> _ = (a / "model.safetensors").write_bytes(b"other weights")
    >>> model_digest(a) == first
    False
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from agentic_loop.atomic import atomic_write_bytes
from agentic_loop.distill.train.model_card import CARD_FILE

__all__ = ["DigestCache", "model_digest", "model_files", "model_shape"]

#: Top-level names that are not the model (see the module doc).
SKIPPED = frozenset({CARD_FILE, "run.json", "checkpoints", "stages", "README.md"})
_BLOCK = 1 << 20


def model_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The files the digest covers, relative to ``folder``, sorted."""
    root = Path(folder)
    found = []
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if rel.parts[0] in SKIPPED or any(p.startswith(".") for p in rel.parts):
            continue
        if path.is_file():
            found.append(rel)
    return sorted(found)


def model_shape(folder: str | os.PathLike[str]) -> tuple[tuple[str, int], ...]:
    """Each covered file's name and size: equal digests need equal shapes (a cheap pre-check)."""
    root = Path(folder)
    return tuple((rel.as_posix(), (root / rel).stat().st_size) for rel in model_files(root))


class DigestCache:
    """File digests kept by (path, size, mtime, inode) in ``path``; a bad file is a cold cache.

    Losing an entry (a concurrent writer, a deleted file) only costs reading
    that file again, so the file is written without a lock.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._files: dict[str, list[object]] = {}
        self._changed = False
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and isinstance(data.get("files"), dict):
                self._files = data["files"]
        except (OSError, ValueError):
            pass

    def file_digest(self, path: Path) -> str:
        """The sha256 of ``path``'s bytes (from the cache while the file is unchanged)."""
        st = path.stat()
        key = str(path.resolve())
        signature = [st.st_size, st.st_mtime_ns, st.st_ino]
        cached = self._files.get(key)
        if isinstance(cached, list) and len(cached) == 4 and cached[:3] == signature:
            return str(cached[3])
        digest = _sha256(path)
        self._files[key] = [*signature, digest]
        self._changed = True
        return digest

    def save(self) -> None:
        """Write the cache back (only when it learned something), dropping vanished files."""
        if not self._changed:
            return
        files = {k: v for k, v in self._files.items() if Path(k).is_file()}
        if not self.path.parent.is_dir():  # reads create no registry folder
            return
        try:
            atomic_write_bytes(self.path, json.dumps({"files": files}).encode("utf-8"))
        except OSError:  # a read-only registry: the next look reads the files again
            return
        self._changed = False


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def model_digest(folder: str | os.PathLike[str], cache: DigestCache | None = None) -> str:
    """The sha256 over the covered files' names and contents (see the module doc)."""
    root = Path(folder)
    total = hashlib.sha256()
    for rel in model_files(root):
        file = root / rel
        digest = cache.file_digest(file) if cache is not None else _sha256(file)
        total.update(f"{rel.as_posix()}\0{digest}\n".encode())
    return total.hexdigest()
