"""Private tmpfs mounts capped in bytes *and* files, made in a namespace of the runner's own.

Why a module: bwrap caps a tmpfs's bytes only, so the runner remounts the
writable places itself (see :func:`private_tmpfs`); reading
``/proc/self/mountinfo`` and re-binding what was mounted below is its own job.

Example:
    >>> _unescape("/tmp/my\\\\040checkout")
    '/tmp/my checkout'
"""

from __future__ import annotations

import ctypes
import os

from agentic_loop.judges.sandbox.runner.common import MARK
from agentic_loop.judges.sandbox.runner.privileges import (
    PR_SET_DUMPABLE,
    drop_bounding_set,
    empty_capabilities,
    prctl,
)

_CLONE_NEWNS, _CLONE_NEWUSER = 0x00020000, 0x10000000
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC = 2, 4, 4096, 16384


def _unescape(field: str) -> str:
    """A mountinfo path: spaces, tabs, newlines and backslashes are written as octal ``\\ooo``."""
    parts = field.split("\\")
    return parts[0] + "".join(chr(int(p[:3], 8)) + p[3:] if p[:3].isdigit() else "\\" + p
                              for p in parts[1:])


def _mounts_below(where: str) -> list[str]:
    """The outermost mount points strictly below ``where`` (from ``/proc/self/mountinfo``)."""
    found: list[str] = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            point = _unescape(line.split()[4])
            if point.startswith(where.rstrip("/") + "/"):
                found.append(point)
    outer: list[str] = []
    for point in sorted(set(found), key=len):
        if not any(point.startswith(o + "/") for o in outer):
            outer.append(point)
    return outer


def private_tmpfs(mounts: dict[str, list[int]] | None) -> None:
    """Mount fresh tmpfs over the writable places, capped in bytes *and* files, then no caps.

    bwrap caps a tmpfs's bytes only, and every file costs kernel memory that
    no byte cap counts (issue 29's reviewers: 518,000 directories, 596 MiB
    under ``memory_mb=128``). A mount needs ``CAP_SYS_ADMIN``, which the
    runner never holds in bwrap's namespace, so it makes a user and mount
    namespace of its own (still uid 65534, mapped to itself), mounts there,
    and empties every capability set again before anything else runs. Where
    the kernel refuses nested namespaces the probe sees uncapped files and
    reports the ``memory-limit`` layer missing.
    """
    if not mounts:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.geteuid(), os.getegid()
    prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # leaving root cleared it: /proc/self was root's
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS) != 0:
        return
    for name, text in (("uid_map", f"{uid} {uid} 1"), ("setgroups", "deny"),
                       ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w", encoding="ascii") as fh:
            fh.write(text)
    for where, (size_mb, inodes) in mounts.items():
        # what is mounted below (an interpreter bound inside /tmp, when a checkout lives there)
        # is held open and bound again on top of the new tmpfs, read-only as it was
        below = [(point, os.open(point, os.O_PATH)) for point in _mounts_below(where)]
        options = f"size={int(size_mb) * 1024 * 1024},nr_inodes={int(inodes)},mode=1777"
        if libc.mount(b"tmpfs", os.fsencode(where), b"tmpfs", _MS_NOSUID | _MS_NODEV,
                      options.encode()) != 0:
            raise PermissionError(f"{MARK}could not mount a private tmpfs on {where} "
                                  f"({os.strerror(ctypes.get_errno())})")
        for point, fd in below:
            os.makedirs(point, mode=0o755, exist_ok=True)
            if libc.mount(os.fsencode(f"/proc/self/fd/{fd}"), os.fsencode(point), None,
                          _MS_BIND | _MS_REC, None) != 0:
                raise PermissionError(f"{MARK}could not bind {point} again over {where} "
                                      f"({os.strerror(ctypes.get_errno())})")
            os.close(fd)
    os.chdir(os.getcwd())  # the same path, now the new mount (the cwd was the one below)
    drop_bounding_set()
    empty_capabilities()
