"""The flywheel's lease on a registry: one service acts on it at a time, a dead one lets go.

Why a kernel lock and not a file with a pid: two services turning the same
registry would run two rounds on the same runs and ramp two canaries over
each other; a pid file outlives a crash (``kill -9``, a lost host) and its
pid is soon someone else's. An exclusive, non-blocking ``fcntl.flock`` on
``<registry>/flywheel.lock`` is held by the open file itself: the kernel
drops it the moment the holder exits, however it exits, so a crashed
holder loses the lease with nothing to clean up. The holder writes its pid,
host and start time into the file, so a second service is refused with an
error that says who holds it and how to stop it.

Limits: ``flock`` is reliable on a local file system; on NFS (and some
other network file systems) it may not exclude another host, so keep a
registry's flywheel on one host's file system (one registry per host FS).

Example:
    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> with Lease(root) as lease:
    ...     holder = read_holder(root)
    ...     Lease(root).acquire()
    Traceback (most recent call last):
    ...
    agentic_loop.distill.flywheel.lease.LeaseHeldError: the registry ... is leased by ...
    >>> holder["pid"] == os.getpid(), lease.held, lease_holder(root)
    (True, False, None)
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from agentic_loop.clock import utc_stamp
from agentic_loop.errors import ReleaseError

__all__ = ["LEASE_FILE", "Lease", "LeaseHeldError", "lease_holder", "read_holder"]

LEASE_FILE = "flywheel.lock"


class LeaseHeldError(ReleaseError):
    """Another flywheel service holds the registry's lease; the message names it."""


def read_holder(registry: str | os.PathLike[str]) -> dict[str, Any] | None:
    """What the lease file says about its holder (pid, host, started), or None."""
    try:
        data = json.loads((Path(registry).expanduser() / LEASE_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def lease_holder(registry: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The holder of a lease that is held now, or None (free: no file, or its holder died).

    It asks the kernel with a shared, non-blocking ``flock`` taken and dropped
    at once (a service starting in that instant is refused and can start again).
    """
    path = Path(registry).expanduser() / LEASE_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return read_holder(registry) or {}
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


class Lease:
    """An exclusive lease on ``<registry>/flywheel.lock`` (see the module doc)."""

    def __init__(self, registry: str | os.PathLike[str]) -> None:
        self.root = Path(registry).expanduser()
        self.path = self.root / LEASE_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """True while this object holds the lease."""
        return self._fd is not None

    def acquire(self) -> Self:
        """Take the lease now, or raise :class:`LeaseHeldError` naming the holder."""
        if self._fd is not None:
            return self
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = read_holder(self.root) or {}
            pid, host = holder.get("pid", "?"), holder.get("host", "?")
            raise LeaseHeldError(
                f"the registry {self.root} is leased by another flywheel service (pid {pid} on "
                f"{host}, since {holder.get('started', '?')}); one service acts on a registry "
                f"at a time: stop that one first (`kill {pid}` on {host}: it stops after its "
                "tick), or point this one at another registry") from None
        payload = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                              "started": utc_stamp()}) + "\n"
        os.ftruncate(fd, 0)
        os.pwrite(fd, payload.encode(), 0)
        os.fsync(fd)
        self._fd = fd
        return self

    def release(self) -> None:
        """Let the lease go (the kernel does it too when the process dies)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> Self:
        return self.acquire()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
