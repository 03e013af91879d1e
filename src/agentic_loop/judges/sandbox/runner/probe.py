"""The ``probe`` role: which isolation layers are in force, reported from the inside as JSON.

Why a module: the parent trusts only what it verified (see
:mod:`agentic_loop.judges.sandbox.isolation`), so a probe process confines
itself exactly as a run does and then reports its uid, capabilities,
namespaces, limits, seccomp mode and the memory no rlimit counts. It runs
no untrusted code.

Example:
    >>> sorted(_memory_report())
    ['memfd_refused', 'sysv_refused', 'writable_tmpfs_inodes', 'writable_tmpfs_mb']
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
from typing import Any

from agentic_loop.judges.sandbox.runner.confinement import confine, read_payload
from agentic_loop.judges.sandbox.runner.privileges import PR_GET_PDEATHSIG, prctl

_KERNEL_TREES = ("/proc/sys", "/sys")
_KERNEL_FILES = ("/proc/sysrq-trigger", "/proc/mtrr", "/proc/kmsg")
_SWEEP_MAX = 5000  # files tried under the trees; /proc/sys has ~1,500, /sys far more


def _kernel_writable() -> list[str]:
    """Kernel interfaces this process can open for writing (none are written).

    Files everyone may write on purpose (``ns_last_pid``, PSI triggers: the
    kernel checks a capability on write) are skipped.
    """
    import stat  # noqa: PLC0415 - the probe only

    paths = list(_KERNEL_FILES)
    for top in _KERNEL_TREES:
        for root, _dirs, files in os.walk(top):
            paths.extend(os.path.join(root, f) for f in files)
            if len(paths) > _SWEEP_MAX:
                break
    found = []
    for path in paths[:_SWEEP_MAX]:
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            continue
        if not stat.S_ISREG(mode) or mode & stat.S_IWOTH:
            continue
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY))
        except OSError:
            continue
        found.append(path)
    return found[:20]


def _writable_tmpfs() -> tuple[float, int] | None:
    """MiB and files the writable in-memory mounts can hold together; ``None`` if unbounded."""
    total, files = 0.0, 0
    with open("/proc/self/mounts", encoding="utf-8") as fh:  # a covered mount: the top one
        mounts = {where: (fstype, options) for _dev, where, fstype, options in
                  (line.split()[:4] for line in fh)}
    for where, (fstype, options) in mounts.items():
        if fstype not in ("tmpfs", "ramfs") or "ro" in options.split(","):
            continue
        where = where.replace("\\040", " ")
        try:
            inner = [os.path.join(where, d) for d in os.listdir(where)]
        except OSError:
            inner = []
        if not any(os.path.isdir(d) and os.access(d, os.W_OK) for d in [where, *inner]):
            continue
        if fstype == "ramfs":
            return None
        st = os.statvfs(where)
        total += st.f_blocks * st.f_frsize / (1024 * 1024)
        files += st.f_files
    return total, files


def _memory_report() -> dict[str, Any]:
    """Whether memory no rlimit counts can be held: memfd, System V IPC, writable tmpfs."""
    try:
        os.close(os.memfd_create("probe"))
        memfd_refused = False
    except OSError:
        memfd_refused = True
    libc = ctypes.CDLL(None, use_errno=True)
    ipc_private, ipc_creat, ipc_rmid = 0, 0o1000, 0
    refused = []
    for get, ctl, args in ((libc.shmget, libc.shmctl, (4096,)), (libc.semget, libc.semctl, (1,)),
                           (libc.msgget, libc.msgctl, ())):
        ident = get(ipc_private, *args, ipc_creat | 0o600)
        refused.append(ident < 0)
        if ident >= 0:
            ctl(ident, *((0,) if ctl is libc.semctl else ()), ipc_rmid, None)
    writable = _writable_tmpfs()
    return {"memfd_refused": memfd_refused, "sysv_refused": all(refused),
            "writable_tmpfs_mb": writable and writable[0],
            "writable_tmpfs_inodes": writable and writable[1]}


def _threads_capped() -> bool:
    """True when the kernel refuses a thread past a lowered ``RLIMIT_NPROC`` (threads count)."""
    import threading  # noqa: PLC0415 - the probe only

    resource.setrlimit(resource.RLIMIT_NPROC, (4, 4))
    threading.stack_size(256 * 1024)
    release = threading.Event()
    started = []
    try:
        for _ in range(8):
            worker = threading.Thread(target=release.wait, daemon=True)
            worker.start()
            started.append(worker)
    except RuntimeError:
        pass
    release.set()
    for worker in started:
        worker.join()
    return len(started) < 8


def probe() -> None:
    """Report the layers in force, from the inside, on the parent's socket (see the isolation)."""
    payload = read_payload()
    confine(payload, dumpable=True)
    status = dict(
        line.split(":", 1) for line in open("/proc/self/status", encoding="utf-8")  # noqa: SIM115
        if ":" in line
    )
    try:
        with open("/proc/net/dev", encoding="utf-8") as fh:
            interfaces = [ln.split(":")[0].strip() for ln in fh.readlines()[2:]]
    except OSError:
        interfaces = []
    try:
        child = os.fork()
    except OSError:
        forked = False
    else:  # pragma: no cover - only without the seccomp layer
        if child == 0:
            os._exit(0)
        os.waitpid(child, 0)
        forked = True
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    pdeathsig = ctypes.c_int(0)
    prctl(PR_GET_PDEATHSIG, ctypes.byref(pdeathsig), 0, 0, 0)
    namespaces: dict[str, str | None] = {}
    for kind in ("user", "mnt", "pid", "net", "ipc"):
        try:
            namespaces[kind] = os.readlink(f"/proc/self/ns/{kind}")
        except OSError:
            namespaces[kind] = None
    limits = {"as": resource.RLIMIT_AS, "cpu": resource.RLIMIT_CPU,
              "fsize": resource.RLIMIT_FSIZE, "nofile": resource.RLIMIT_NOFILE,
              "nproc": resource.RLIMIT_NPROC, "core": resource.RLIMIT_CORE}
    report = {
        "uid": os.getuid(),
        "caps": {k: int(status.get(k, "f").strip() or "f", 16)
                 for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")},
        "ns": namespaces,
        "no_new_privs": status.get("NoNewPrivs", "").strip() == "1",
        "seccomp": status.get("Seccomp", "").strip() == "2" and not forked,
        "parent_pid_visible": str(payload["host_pid"]) in pids,
        "host_path_visible": os.path.exists(payload["host_marker"]),
        "root_writable": os.access("/", os.W_OK),
        "interfaces": interfaces,
        "pdeathsig": pdeathsig.value == signal.SIGKILL,
        "rlimits": {k: resource.getrlimit(v)[0] for k, v in limits.items()},
        "kernel_writable": _kernel_writable(),
        "memory": _memory_report(),
        "threads_capped": _threads_capped(),
    }
    data = json.dumps(report).encode()
    if payload.get("cred_fd") is not None:  # the kernel stamps our credentials on the datagram
        import socket  # noqa: PLC0415 - the probe only

        socket.socket(fileno=payload["cred_fd"]).send(data)
    print(data.decode())
    sys.stdout.flush()
    os._exit(0)
