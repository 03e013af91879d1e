"""Leaving root, emptying the capability sets and installing the seccomp filter (via prctl).

Why a module: these are the kernel calls that take privileges away for good,
and the order they run in is part of what the sandbox guarantees (see
:func:`agentic_loop.judges.sandbox.runner.confinement.confine`, the one
caller). ``ctypes`` talks to libc directly because the runner may import
nothing but the standard library.

Example:
    >>> import ctypes
    >>> signal_number = ctypes.c_int(-1)
    >>> prctl(PR_GET_PDEATHSIG, ctypes.byref(signal_number), 0, 0, 0), signal_number.value >= 0
    (True, True)
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

from agentic_loop.judges.sandbox.runner.common import MARK

PR_SET_PDEATHSIG, PR_GET_PDEATHSIG, PR_SET_DUMPABLE = 1, 2, 4
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _PR_CAPBSET_DROP = 38, 22, 24
_SECCOMP_MODE_FILTER = 2
_CAP_VERSION_3 = 0x20080522
_LAST_CAP = 63  # the bounding set is cleared bit by bit, up to any cap a kernel may know


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def prctl(*args: Any) -> bool:
    """``prctl(2)`` with ``args``; True when the kernel said yes."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(*args) == 0)
    except (OSError, AttributeError):
        return False


def drop_bounding_set() -> None:
    """Empty the bounding set: no later exec can regain a capability."""
    for cap in range(_LAST_CAP + 1):
        prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the kernel's last cap


def empty_capabilities() -> None:
    """Empty the effective, permitted and inheritable sets (``capset`` with all zeros)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.capset(ctypes.byref(_CapHeader(_CAP_VERSION_3, 0)), (_CapData * 2)())


def drop_root(uid: int | None) -> None:
    """Become ``uid`` with every capability set empty, or stop: tested code never runs as root.

    Under a root caller bwrap starts the runner as its user namespace's root
    (mapped to the host's root for bwrap's own setup) with only CAP_SETUID,
    CAP_SETGID and CAP_SETPCAP; ``uid`` maps to an unused unprivileged host
    uid. Leaving root empties the permitted, effective and ambient sets; the
    bounding and inheritable sets are emptied here by hand.
    """
    if uid is None:
        return
    drop_bounding_set()
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    empty_capabilities()
    if 0 in os.getresuid() or 0 in os.getresgid():
        raise PermissionError(f"{MARK}could not leave root (uids {os.getresuid()})")


def install_seccomp(program_hex: str | None) -> bool:
    """``PR_SET_NO_NEW_PRIVS`` then the parent's filter; False when the kernel refuses."""
    prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if not program_hex:
        return False
    program = bytes.fromhex(program_hex)
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    return prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0)
