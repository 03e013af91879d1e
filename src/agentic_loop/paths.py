"""Folders the package creates, with one clear error when the machine refuses.

Why: a path a user names (an archive, a trajectory log, a registry, an
export) can be impossible to create for many reasons: a file in the way,
``/proc`` or ``/sys``, a read-only disk, no permission, a name too long.
Python reports each as a different raw ``OSError``; every store of the
package instead raises its own area's error (a subclass of
:class:`~agentic_loop.errors.AgenticLoopError`) that names the path, says
what is wrong in words and what to pass instead, so apps catch one root and
the CLI prints one line.

Example:
    >>> import tempfile, pathlib
    >>> from agentic_loop.errors import StorageError
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> make_dir(tmp / "a" / "b", what="trajectory log folder").is_dir()
    True
    >>> _ = (tmp / "f").write_text("x")
    >>> make_dir(tmp / "f" / "sub", what="archive folder")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.errors.StorageError: cannot create the archive folder .../f/sub: a file is ...
    >>> make_dir("/proc/1/x", what="registry", error=StorageError)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.errors.StorageError: cannot create the registry /proc/1/x: this part of ...
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from agentic_loop.errors import AgenticLoopError, StorageError

__all__ = ["describe_path_error", "file_signature", "make_dir"]

_WHY = {
    errno.EEXIST: "a file is in the way (it exists and is not a folder)",
    errno.ENOTDIR: "a file is in the way (a part of the path is a file, not a folder)",
    errno.EACCES: "permission denied",
    errno.EPERM: "the system does not permit it",
    errno.EROFS: "the disk is read-only",
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.ENAMETOOLONG: "a name in the path is too long",
    errno.ELOOP: "the path loops through symbolic links",
}
_KERNEL_FS = ("/proc", "/sys")


def describe_path_error(path: str | os.PathLike[str], exc: OSError) -> str:
    """What went wrong with ``path``, in words, and what to pass instead.

    >>> describe_path_error("/data/x", PermissionError(13, "Permission denied"))
    'permission denied; pass a path you may write to'
    """
    text = os.fspath(path)
    if any(text == root or text.startswith(root + "/") for root in _KERNEL_FS):
        return ("this part of the file system belongs to the kernel and holds no user files; "
                "pass a path on a writable disk")
    why = _WHY.get(exc.errno or 0) or (exc.strerror or str(exc) or type(exc).__name__).lower()
    fix = ("pass a path you may write to" if exc.errno in (errno.EACCES, errno.EPERM)
           else "pass the path of a folder" if exc.errno in (errno.EEXIST, errno.ENOTDIR)
           else "pass another path")
    return f"{why}; {fix}"


def make_dir(path: str | os.PathLike[str], *, what: str,
             error: type[AgenticLoopError] = StorageError) -> Path:
    """Create folder ``path`` and its parents (nothing to do if it exists); returns it.

    ``what`` names the folder in the message (``"archive folder"``);
    ``error`` is the area's error class raised when the machine refuses.
    """
    folder = Path(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = describe_path_error(folder, exc)
        raise error(f"cannot create the {what} {folder}: {why}") from exc
    return folder


def file_signature(path: Path) -> tuple[int, int, int] | None:
    """What changes whenever ``path`` is rewritten (mtime, inode, size); None without it."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_ino, st.st_size
