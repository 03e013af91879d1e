"""The seccomp filter every sandboxed process installs before untrusted code runs.

Why a filter of our own: the namespaces (see
:mod:`~agentic_loop.judges.sandbox.isolation`) hide the host, but the kernel's
whole system-call surface stays reachable, and some of it holds memory that
no rlimit counts. The filter refuses, with ``EPERM``, what tested code never
needs:

* **new processes and programs**: ``fork``, ``vfork``, ``clone`` without
  ``CLONE_THREAD`` (threads stay allowed), ``execve``, ``execveat``;
  ``clone3`` answers ``ENOSYS`` so the C library falls back to ``clone``,
  whose flags a classic BPF filter can read;
* **new namespaces and mounts**: ``unshare``, ``setns``, ``clone`` with any
  ``CLONE_NEW*`` flag, ``mount`` and the new mount API, ``pivot_root``,
  ``chroot``;
* **host-wide pools**: Linux AIO (``io_setup`` draws on the host's single
  ``fs.aio-max-nr``: one run took 63,488 of 65,536 events);
* **system calls newer than this list** (above
  :data:`LAST_REVIEWED_X86_64`) answer ``ENOSYS``, so a kernel upgrade adds
  no unreviewed surface;
* **reaching other processes or the kernel**: ``ptrace``,
  ``process_vm_readv/writev``, ``pidfd_getfd``, ``kcmp``, ``bpf``,
  ``perf_event_open``, ``userfaultfd``, ``io_uring_*`` (its requests bypass
  seccomp), keyrings, modules, ``kexec``, ``reboot``, swap, clocks, host
  names, ``open_by_handle_at``, ``iopl``/``ioperm``, ``personality``;
* **network sockets**: ``socket`` with any family but ``AF_UNIX``;
* **memory no rlimit counts**: ``memfd_create`` and ``memfd_secret`` (a memfd
  holds pages that no mount's size cap bounds), System V shared memory,
  semaphores and message queues (a fresh IPC namespace allows gigabytes of
  each), ``inotify`` (kernel memory per watch), pages a pipe pins
  (``vmsplice`` of one byte from each of 16 huge pages pins 32 MiB per pipe:
  767 MiB held under ``memory_mb=128``; ``splice``, ``tee`` and ``sendfile``
  reference page-cache folios the same way; Python's ``shutil`` and
  ``socket.sendfile`` fall back to plain reads and writes), and growing a kernel buffer
  past its default: ``fcntl(F_SETPIPE_SZ)`` and ``setsockopt`` of
  ``SO_SNDBUF``/``SO_RCVBUF`` (without this, 455 MiB sat in Unix socket
  buffers under ``memory_mb=512``). ``/dev/shm`` stays, as a size-capped
  tmpfs (see :mod:`~agentic_loop.judges.sandbox.bwrap`).

The program is classic BPF for x86-64 only: on any other architecture
:func:`seccomp_filter` returns ``None`` and the sandbox reports the
``seccomp`` layer as missing (``strict=True`` then refuses to run). A call
from another ABI (32-bit or x32) kills the process. The program is built
here, in the trusted parent, and installed by the child runner with
``prctl(PR_SET_SECCOMP)`` after ``PR_SET_NO_NEW_PRIVS``; no library is needed.

Example:
    >>> prog = seccomp_filter("x86_64")
    >>> len(prog) % 8, len(prog) // 8 < 255
    (0, True)
    >>> seccomp_filter("riscv64") is None
    True
"""

from __future__ import annotations

import errno
import platform
import struct

__all__ = ["DENIED_SYSCALLS_X86_64", "LAST_REVIEWED_X86_64", "seccomp_filter"]

_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_OFF_NR, _OFF_ARCH = 0, 4  # struct seccomp_data; then the low halves of args[0..2]:
_OFF_ARG0, _OFF_ARG1, _OFF_ARG2 = 16, 24, 32

_CLONE_THREAD = 0x00010000
_CLONE_NEW_MASK = 0x7E020080  # NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET|NEWTIME
_AF_UNIX = 1
_F_SETPIPE_SZ = 1031
_SOL_SOCKET, _SO_SNDBUF, _SO_RCVBUF = 1, 7, 8

#: x86-64 numbers of the system calls refused outright (``EPERM``).
DENIED_SYSCALLS_X86_64: dict[str, int] = {
    "fork": 57, "vfork": 58, "execve": 59, "execveat": 322,
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
    "pidfd_getfd": 438, "kcmp": 312,
    "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
    "unshare": 272, "setns": 308, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
    "keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321,
    "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "fanotify_init": 300,
    "kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313,
    "delete_module": 176, "reboot": 169, "swapon": 167, "swapoff": 168, "acct": 163,
    "syslog": 103, "quotactl": 179, "open_by_handle_at": 304, "name_to_handle_at": 303,
    "iopl": 172, "ioperm": 173, "personality": 135, "uselib": 134, "vhangup": 153,
    "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159,
    "sethostname": 170, "setdomainname": 171, "mknod": 133, "mknodat": 259,
    "memfd_create": 319, "memfd_secret": 447, "shmget": 29, "semget": 64, "msgget": 68,
    "inotify_init": 253, "inotify_init1": 294,
    "io_setup": 206, "io_destroy": 207, "io_getevents": 208, "io_submit": 209, "io_cancel": 210,
    "io_pgetevents": 333, "vmsplice": 278, "splice": 275, "tee": 276, "sendfile": 40,
}
#: The newest system call this list was reviewed against (``mseal``); newer ones answer
#: ``ENOSYS``, as on an older kernel, until someone reviews them.
LAST_REVIEWED_X86_64 = 462
_CLONE, _CLONE3, _SOCKET, _FCNTL, _SETSOCKOPT = 56, 435, 41, 72, 54


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def seccomp_filter(machine: str | None = None) -> bytes | None:
    """The filter as a ``struct sock_filter[]`` byte string, or ``None`` off x86-64.

    Args:
        machine: ``platform.machine()`` of the host (the default).

    >>> seccomp_filter("aarch64") is None
    True
    """
    if (machine or platform.machine()) not in ("x86_64", "AMD64"):
        return None
    eperm = _RET_ERRNO | errno.EPERM
    prog = [
        _insn(_LD_W_ABS, _OFF_ARCH),
        _insn(_JEQ_K, _AUDIT_ARCH_X86_64, 1, 0),
        _insn(_RET_K, _RET_KILL_PROCESS),
        _insn(_LD_W_ABS, _OFF_NR),
        _insn(_JGE_K, _X32_BIT, 0, 1),  # the x32 ABI: same numbers with bit 30 set
        _insn(_RET_K, _RET_KILL_PROCESS),
        _insn(_JGE_K, LAST_REVIEWED_X86_64 + 1, 0, 1),
        _insn(_RET_K, _RET_ERRNO | errno.ENOSYS),
    ]
    for nr in sorted(set(DENIED_SYSCALLS_X86_64.values())):
        prog += [_insn(_JEQ_K, nr, 0, 1), _insn(_RET_K, eperm)]
    prog += [
        _insn(_JEQ_K, _CLONE3, 0, 1),
        _insn(_RET_K, _RET_ERRNO | errno.ENOSYS),
        # clone: refuse namespaces, allow threads, refuse new processes
        _insn(_JEQ_K, _CLONE, 0, 5),
        _insn(_LD_W_ABS, _OFF_ARG0),
        _insn(_JSET_K, _CLONE_NEW_MASK, 2, 0),
        _insn(_JSET_K, _CLONE_THREAD, 0, 1),
        _insn(_RET_K, _RET_ALLOW),
        _insn(_RET_K, eperm),
        # fcntl: every command but F_SETPIPE_SZ
        _insn(_JEQ_K, _FCNTL, 0, 4),
        _insn(_LD_W_ABS, _OFF_ARG1),
        _insn(_JEQ_K, _F_SETPIPE_SZ, 0, 1),
        _insn(_RET_K, eperm),
        _insn(_RET_K, _RET_ALLOW),
        # setsockopt: not the buffer sizes
        _insn(_JEQ_K, _SETSOCKOPT, 0, 7),
        _insn(_LD_W_ABS, _OFF_ARG1),
        _insn(_JEQ_K, _SOL_SOCKET, 0, 4),
        _insn(_LD_W_ABS, _OFF_ARG2),
        _insn(_JEQ_K, _SO_SNDBUF, 1, 0),
        _insn(_JEQ_K, _SO_RCVBUF, 0, 1),
        _insn(_RET_K, eperm),
        _insn(_RET_K, _RET_ALLOW),
        # socket: AF_UNIX only
        _insn(_JEQ_K, _SOCKET, 0, 3),
        _insn(_LD_W_ABS, _OFF_ARG0),
        _insn(_JEQ_K, _AF_UNIX, 1, 0),
        _insn(_RET_K, _RET_ERRNO | errno.EAFNOSUPPORT),
        _insn(_RET_K, _RET_ALLOW),
    ]
    return b"".join(prog)
