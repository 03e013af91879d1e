"""Child side of :func:`agentic_loop.judges.sandbox.run_python_tests`.

This file is not imported by the library: its source is passed to a fresh
``python -I -c`` in a temporary directory (so the child never imports the
``agentic_loop`` package or anything heavy). It reads a JSON payload, opens
the result file, lowers its resource limits, installs an audit hook that
refuses process creation, signals, sockets and writes outside its working
directory, then runs the solution and each test, and writes one JSON result.

The audit hook is a guard against accidents and careless code, not a security
boundary: CPython cannot stop determined native code. The OS-level limits
(rlimits, network and PID namespaces when available, process-group kill on
timeout) are what bound the damage.
"""

import json
import os
import resource
import signal
import socket
import sys
import traceback

MARK = "sandbox: "  # prefix of every refusal, so the parent can name the reason

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


def _inside(root, path):
    if isinstance(path, int):
        return True  # an already-open descriptor: it was checked when it was opened
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    real = os.path.realpath(os.fspath(path))  # relative paths resolve against the cwd
    return real == root or real.startswith(root + os.sep)


def _make_hook(root):
    def hook(event, args):
        if event in _SPAWN_EVENTS:
            raise PermissionError(f"{MARK}{event} is not allowed (no processes, signals or native calls)")
        if event == "socket.__new__" and args[1] != socket.AF_UNIX:
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


def _limit(which, value):
    try:
        _soft, hard = resource.getrlimit(which)
        new = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (new, new))
    except (ValueError, OSError):
        pass  # a limit this kernel refuses is covered by the parent's wall-clock kill


def _error_text(err):
    """One line: the exception and where in the solution or test it was raised."""
    text = traceback.format_exception_only(type(err), err)[-1].strip()
    if isinstance(err, SyntaxError):
        return f"{text} (at {err.filename} line {err.lineno})"[:500]
    frames = [
        f for f in traceback.extract_tb(err.__traceback__)
        if f.filename.startswith(("<solution>", "<test "))
    ]
    if frames:
        text += f" (at {frames[-1].filename} line {frames[-1].lineno})"
    return text[:500]


def main():
    with open(sys.argv[1], encoding="utf-8") as fh:
        payload = json.load(fh)
    result_file = open(payload["result_path"], "w", encoding="utf-8")  # noqa: SIM115
    root = os.path.realpath(payload["workdir"])
    os.chdir(root)

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write raises instead of killing
    mb = 1024 * 1024
    _limit(resource.RLIMIT_AS, payload["memory_mb"] * mb)
    _limit(resource.RLIMIT_CPU, payload["cpu_s"])
    _limit(resource.RLIMIT_FSIZE, payload["fsize_mb"] * mb)
    _limit(resource.RLIMIT_NPROC, 0)  # non-root only: the kernel exempts root
    _limit(resource.RLIMIT_NOFILE, 64)
    _limit(resource.RLIMIT_CORE, 0)
    sys.addaudithook(_make_hook(root))
    sys.setrecursionlimit(2000)

    namespace = {"__name__": "__main__"}
    outcome = {"setup_error": None, "cases": []}
    try:
        exec(compile(payload["code"], "<solution>", "exec"), namespace)  # noqa: S102
    except BaseException as err:  # noqa: BLE001 - SystemExit etc. are the solution failing
        outcome["setup_error"] = _error_text(err)
    for i, test in enumerate(payload["tests"]):
        if outcome["setup_error"] is not None:
            outcome["cases"].append({"passed": False, "error": "not run: the solution failed"})
            continue
        try:
            exec(compile(test, f"<test {i}>", "exec"), namespace)  # noqa: S102
            outcome["cases"].append({"passed": True, "error": None})
        except BaseException as err:  # noqa: BLE001 - any escape is a failed test
            outcome["cases"].append({"passed": False, "error": _error_text(err)})
    try:
        sys.stdout.flush()
    except BaseException:  # noqa: BLE001, S110 - the solution may have closed stdout
        pass
    result_file.write(json.dumps(outcome))
    result_file.flush()
    os._exit(0)  # skip atexit handlers the solution may have registered


if __name__ == "__main__":
    main()
