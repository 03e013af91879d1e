"""The confinement both sandboxed processes put on themselves before anything untrusted runs.

Why a module: the order of the steps is the guarantee (leave root, mount the
capped tmpfs, die with the parent, rlimits, no_new_privs and seccomp), so one
function, :func:`confine`, makes them all, and each role calls it first,
right after reading its payload (:func:`read_payload`).

Example:
    >>> payload = {"memory_mb": 64, "cpu_s": 5, "fsize_mb": 8, "nproc": 4}
    >>> [value for _which, value in rlimits(payload)]
    [67108864, 5, 8388608, 4, 64, 1, 0, 256]
"""

from __future__ import annotations

import json
import resource
import signal
import sys
from typing import Any

from agentic_loop.judges.sandbox.runner.mounts import private_tmpfs
from agentic_loop.judges.sandbox.runner.privileges import (
    PR_SET_DUMPABLE,
    PR_SET_PDEATHSIG,
    drop_root,
    install_seccomp,
    prctl,
)


def rlimits(payload: dict[str, Any]) -> list[tuple[int, int]]:
    """The resource limits of a run, in the order they are set (address space in bytes)."""
    mb = 1024 * 1024
    return [
        (resource.RLIMIT_AS, payload["memory_mb"] * mb),
        (resource.RLIMIT_CPU, payload["cpu_s"]),
        (resource.RLIMIT_FSIZE, payload["fsize_mb"] * mb),
        (resource.RLIMIT_NPROC, payload["nproc"]),  # threads count; the kernel exempts root
        (resource.RLIMIT_NOFILE, 64),
        # 1, not 0: a core_pattern that pipes to a helper ignores the limit, except the kernel's
        # special value 1, which suppresses the dump (a crash would otherwise run a root helper)
        (resource.RLIMIT_CORE, 1),
        (resource.RLIMIT_MSGQUEUE, 0),  # POSIX message queues hold kernel memory
        (resource.RLIMIT_SIGPENDING, 256),  # so do queued signals and POSIX timers
    ]


def _limit(which: int, value: int) -> None:
    try:
        _soft, hard = resource.getrlimit(which)
        new = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (new, new))
    except (ValueError, OSError):
        pass  # a limit this kernel refuses is covered by the parent's wall-clock kill


def confine(payload: dict[str, Any], *, dumpable: bool) -> dict[str, bool]:
    """Leave root, limits, die-with-parent, no_new_privs and seccomp: all before untrusted code.

    Root is left first, then the private tmpfs mounts are made: changing uid
    or user namespace clears the parent-death signal and the dumpable flag,
    so both are set after them.
    """
    drop_root(payload.get("drop_to"))
    private_tmpfs(payload.get("mounts"))
    pdeathsig = prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    prctl(PR_SET_DUMPABLE, 1 if dumpable else 0, 0, 0, 0)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write raises instead of killing
    for which, value in rlimits(payload):
        _limit(which, value)
    seccomp = install_seccomp(payload.get("seccomp"))
    sys.setrecursionlimit(2000)
    return {"pdeathsig": pdeathsig, "seccomp": seccomp}


def read_payload() -> dict[str, Any]:
    """The parent's JSON payload: all of stdin, read before the confinement starts."""
    data = sys.stdin.buffer.read()
    payload: dict[str, Any] = json.loads(data)
    return payload
