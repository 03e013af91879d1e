"""Crash-safe whole-file writes: write a temporary file, fsync it, rename it over.

A file written in place is half old and half new if the process dies in the
middle. Every file this library rewrites (a compacted log, ``meta.json``, a
search index, an export) goes through :func:`atomic_write` instead, so a
reader sees either the old file or the new one, never a mix, and the new
one is on disk (file *and* directory entry fsync'd) once the call returns.

Example:
    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "settings.json"
    >>> atomic_write_bytes(target, b'{"a": 1}')
    >>> target.read_bytes()
    b'{"a": 1}'
    >>> with atomic_write(target) as tmp:          # a tool that writes to a path
    ...     _ = tmp.write_text('{"a": 2}')
    >>> target.read_text()
    '{"a": 2}'
    >>> sorted(p.name for p in target.parent.iterdir())   # no temporary left behind
    ['settings.json']
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_write", "atomic_write_bytes", "fsync_dir", "fsync_path"]


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Flush a directory entry to disk, so a file just created or renamed in it survives a crash.

    Silently does nothing on platforms that cannot open a directory (Windows).
    """
    try:
        fd = os.open(os.fspath(directory), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_path(path: str | os.PathLike[str]) -> None:
    """Flush a file another library wrote (by path) to disk."""
    fd = os.open(os.fspath(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _mode_for(target: Path) -> int:
    """The mode a plain ``open(target, "w")`` would leave: the file's own, or 0666 & ~umask."""
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        return 0o666 & ~_UMASK


def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it replaces ``path`` atomically.

    Write the new content to the yielded path (by any means, e.g. a library
    that only takes a file name). When the block exits normally the
    temporary file is fsync'd, renamed over ``path`` and the directory is
    fsync'd. If the block raises, the temporary file is removed and ``path``
    is left exactly as it was. The file gets the permissions ``open`` would
    give it (an existing file's mode, else 0666 less the umask), not the
    0600 of a temporary file.
    """
    target = Path(path)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        fsync_path(tmp)
        os.chmod(tmp, _mode_for(target))
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(target.parent)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (see :func:`atomic_write`)."""
    with atomic_write(path) as tmp, open(tmp, "wb") as fh:
        fh.write(data)
