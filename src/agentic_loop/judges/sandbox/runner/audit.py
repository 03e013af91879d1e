"""The solution process's audit hook: friendly, named refusals before the OS layers say no.

Why a module: the hook is advisory (the solution runs in its process and can
work around it), yet it turns a spawn, a socket or a write outside the
sandbox into a ``PermissionError`` that names the reason, which the parent
reports; the namespaces, seccomp and rlimits are what actually hold.

Example:
    >>> hook = make_hook("/sandbox")
    >>> hook("open", ("/sandbox/out.txt", "w", 0))
    >>> hook("open", ("/etc/passwd", "w", 0))
    Traceback (most recent call last):
    ...
    PermissionError: sandbox: writing outside the sandbox is not allowed: /etc/passwd
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from agentic_loop.judges.sandbox.runner.common import MARK

_AF_UNIX = 1  # socket.AF_UNIX, without importing socket at start-up

_SPAWN_EVENTS = frozenset({
    "os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.spawn", "os.system",
    "subprocess.Popen", "pty.spawn", "os.kill", "os.killpg", "signal.pthread_kill",
    "ctypes.call_function", "ctypes.dlsym", "ctypes.dlsym/handle",
})
_PATH_EVENTS = {  # event -> indexes of path arguments that must stay inside the sandbox
    "os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.rename": (0, 1),
    "os.link": (0, 1), "os.symlink": (1,), "os.chmod": (0,), "os.chown": (0,),
    "os.chflags": (0,), "os.lchflags": (0,), "os.truncate": (0,), "os.utime": (0,),
    "os.setxattr": (0,), "os.removexattr": (0,), "os.chdir": (0,), "shutil.rmtree": (0,),
    "shutil.move": (0, 1), "shutil.copyfile": (1,), "shutil.copytree": (1,),
    "os.mkfifo": (0,), "os.mknod": (0,),
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


def _inside(root: str, path: Any) -> bool:
    if isinstance(path, int):
        return True  # an already-open descriptor: it was checked when it was opened
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    real = os.path.realpath(os.fspath(path))  # relative paths resolve against the cwd
    return real == root or real.startswith(root + os.sep)


def make_hook(root: str) -> Callable[[str, tuple[Any, ...]], None]:
    """Friendly refusals with a reason; the OS layers are what actually hold."""

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in _SPAWN_EVENTS:
            raise PermissionError(
                f"{MARK}{event} is not allowed (no processes, signals or native calls)"
            )
        if event == "socket.__new__" and args[1] != _AF_UNIX:
            raise PermissionError(f"{MARK}network access is not allowed (socket family {args[1]})")
        if event in ("socket.connect", "socket.bind", "socket.getaddrinfo", "socket.sendto"):
            raise PermissionError(f"{MARK}network access is not allowed ({event})")
        if event == "open":
            path, mode, flags = args
            writing = (mode is not None and any(c in mode for c in "wax+")) or (
                mode is None and isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            if writing and path is not None and not _inside(root, path):
                raise PermissionError(f"{MARK}writing outside the sandbox is not allowed: {path}")
        elif event in _PATH_EVENTS:
            for i in _PATH_EVENTS[event]:
                if i < len(args) and args[i] is not None and not _inside(root, args[i]):
                    raise PermissionError(
                        f"{MARK}{event} outside the sandbox is not allowed: {args[i]}"
                    )

    return hook
