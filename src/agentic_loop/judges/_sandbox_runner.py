"""Child side of :func:`agentic_loop.judges.sandbox.run_python_tests`.

This file is not imported by the library: its source is passed to a fresh
``python -I -c`` inside the sandbox (so a child never imports the
``agentic_loop`` package or anything heavy). ``argv[1]`` names its role:

``solution``
    The **untrusted** process. It lowers its limits, installs the seccomp
    filter and an audit hook, runs the solution, sends one ``hello`` line
    (``ready`` or the solution's error) and then serves the test process's
    requests: look up a name, call a function, get an attribute, apply an
    operator. Values cross back as *literals* (numbers, strings, bytes,
    lists, tuples, dicts, sets, ``None``, fractions, decimals) or as opaque
    handles; nothing it sends can carry code.
``tests``
    The process that **decides**. It never runs solution code: the test
    sources run here, and every name they do not define (and that is not a
    builtin) is fetched from the solution process. It writes the verdict on
    a pipe only the parent reads.
``probe``
    Reports which isolation layers are in force, as JSON on stdout.

Everything here that the solution process does is advisory: the solution
runs in that process and may rewrite any of it. What the verdict rests on is
that the tests process, which only parses JSON from the solution, decides.
"""

from __future__ import annotations

import builtins
import ctypes
import json
import operator
import os
import resource
import signal
import sys
from collections.abc import Callable
from typing import Any

MARK = "sandbox: "  # prefix of every refusal, so the parent can name the reason
MAX_LINE = 16 * 1024 * 1024  # longest message either side accepts
MAX_DEPTH = 64  # deepest literal sent across
_AF_UNIX = 1  # socket.AF_UNIX, without importing socket at start-up

# ---------------------------------------------------------------- process setup

_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP = 1, 4, 38, 22
_SECCOMP_MODE_FILTER = 2


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _prctl(*args: Any) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(*args) == 0)
    except (OSError, AttributeError):
        return False


def _install_seccomp(program_hex: str | None) -> bool:
    """``PR_SET_NO_NEW_PRIVS`` then the parent's filter; False when the kernel refuses."""
    _prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if not program_hex:
        return False
    program = bytes.fromhex(program_hex)
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    return _prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0)


def _limit(which: int, value: int) -> None:
    try:
        _soft, hard = resource.getrlimit(which)
        new = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (new, new))
    except (ValueError, OSError):
        pass  # a limit this kernel refuses is covered by the parent's wall-clock kill


def _confine(payload: dict[str, Any], *, dumpable: bool) -> dict[str, bool]:
    """Limits, die-with-parent, no_new_privs and seccomp: all before untrusted code."""
    pdeathsig = _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if not dumpable:
        _prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write raises instead of killing
    mb = 1024 * 1024
    _limit(resource.RLIMIT_AS, payload["memory_mb"] * mb)
    _limit(resource.RLIMIT_CPU, payload["cpu_s"])
    _limit(resource.RLIMIT_FSIZE, payload["fsize_mb"] * mb)
    _limit(resource.RLIMIT_NPROC, payload["nproc"])  # the kernel exempts the host's root
    _limit(resource.RLIMIT_NOFILE, 64)
    _limit(resource.RLIMIT_CORE, 0)
    seccomp = _install_seccomp(payload.get("seccomp"))
    sys.setrecursionlimit(2000)
    return {"pdeathsig": pdeathsig, "seccomp": seccomp}


def _read_payload() -> dict[str, Any]:
    data = sys.stdin.buffer.read()
    payload: dict[str, Any] = json.loads(data)
    return payload


# ------------------------------------------------------------ audit hook (advisory)

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


def _make_hook(root: str) -> Callable[[str, tuple[Any, ...]], None]:
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


def _error_text(err: BaseException) -> str:
    """One line: the exception and where in the solution or test it was raised."""
    import traceback  # noqa: PLC0415 - only on failures: keeps start-up fast

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


# ---------------------------------------------------------------- the wire format


class ChannelError(BaseException):
    """The solution process broke the protocol or went away.

    A ``BaseException`` so that a test's ``except Exception`` cannot swallow it;
    the tests process also marks the case failed when one was raised at all.
    """


def _line_reader(fd: int) -> Callable[[], bytes]:
    buf = bytearray()

    def read_line() -> bytes:
        while True:
            end = buf.find(b"\n")
            if end >= 0:
                line = bytes(buf[:end])
                del buf[: end + 1]
                return line
            if len(buf) > MAX_LINE:
                raise ChannelError("a message from the other process is too long")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise ChannelError("the solution's process ended")
            buf.extend(chunk)

    return read_line


def _write_line(fd: int, obj: Any) -> None:
    data = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


_EXACT = (type(None), bool, int, float, str)


def encode(value: Any, to_handle: Callable[[Any], Any], depth: int = 0) -> Any:
    """A JSON-able form of ``value``: literals by value, anything else through ``to_handle``."""
    kind = type(value)
    if kind in _EXACT:
        return value
    if depth > MAX_DEPTH:
        return to_handle(value)
    if kind in (list, tuple, set, frozenset):
        tag = "l" if kind is list else "t" if kind is tuple else "s" if kind is set else "f"
        return {tag: [encode(v, to_handle, depth + 1) for v in value]}
    if kind is dict:
        return {"d": [[encode(k, to_handle, depth + 1), encode(v, to_handle, depth + 1)]
                      for k, v in value.items()]}
    if kind in (bytes, bytearray):
        return {"b" if kind is bytes else "ba": value.hex()}
    if kind is complex:
        return {"c": [value.real, value.imag]}
    name = (kind.__module__, kind.__qualname__)
    if name == ("fractions", "Fraction"):
        return {"q": [value.numerator, value.denominator]}
    if name in (("decimal", "Decimal"), ("_decimal", "Decimal")):
        return {"m": str(value)}
    return to_handle(value)


def decode(obj: Any, from_handle: Callable[[dict[str, Any]], Any]) -> Any:
    """The inverse of :func:`encode`; raises ``ValueError`` on anything malformed."""
    if type(obj) in _EXACT:
        return obj
    if type(obj) is not dict or len(obj) not in (1, 2, 3):
        raise ValueError("malformed value")
    if "h" in obj:
        return from_handle(obj)
    (tag, body), = obj.items()
    if tag in ("l", "t", "s", "f") and type(body) is list:
        items = [decode(v, from_handle) for v in body]
        return {"l": list, "t": tuple, "s": set, "f": frozenset}[tag](items)
    if tag == "d" and type(body) is list:
        return {decode(k, from_handle): decode(v, from_handle) for k, v in body}
    if tag in ("b", "ba") and type(body) is str:
        return (bytes if tag == "b" else bytearray).fromhex(body)
    if tag == "c" and type(body) is list:
        return complex(float(body[0]), float(body[1]))
    if tag == "q" and type(body) is list and all(type(v) is int for v in body):
        import fractions  # noqa: PLC0415 - rare: keeps start-up fast

        return fractions.Fraction(body[0], body[1])
    if tag == "m" and type(body) is str:
        import decimal  # noqa: PLC0415

        return decimal.Decimal(body)
    raise ValueError(f"malformed value tag {tag!r}")


# ------------------------------------------------------------- the solution side

_OPS: dict[str, Callable[..., Any]] = {
    "call": lambda f, *a, **k: f(*a, **k),
    "getattr": getattr, "setattr": setattr, "delattr": delattr,
    "getitem": operator.getitem, "setitem": operator.setitem, "delitem": operator.delitem,
    "len": len, "iter": iter, "next": next, "contains": operator.contains, "bool": bool,
    "repr": repr, "str": str, "hash": hash, "index": operator.index, "int": int,
    "float": float, "isinstance": isinstance, "issubclass": issubclass,
    "eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
    "gt": operator.gt, "ge": operator.ge, "add": operator.add, "sub": operator.sub,
    "mul": operator.mul, "truediv": operator.truediv, "floordiv": operator.floordiv,
    "mod": operator.mod, "pow": operator.pow, "matmul": operator.matmul,
    "and": operator.and_, "or": operator.or_, "xor": operator.xor,
    "lshift": operator.lshift, "rshift": operator.rshift, "neg": operator.neg,
    "pos": operator.pos, "abs": operator.abs, "invert": operator.invert,
}


def _exception_info(cls: type[BaseException]) -> list[str]:
    return [c.__name__ for c in cls.__mro__ if getattr(builtins, c.__name__, None) is c]


def serve_solution() -> None:
    """Run the solution, say hello, then answer the tests process until it hangs up."""
    payload = _read_payload()
    req_fd, rep_fd = payload["fds"]
    root = os.path.realpath(payload["workdir"])
    os.chdir(root)
    _confine(payload, dumpable=True)
    sys.addaudithook(_make_hook(root))
    namespace: dict[str, Any] = {"__name__": "__main__"}
    handles: dict[int, Any] = {}
    ids: dict[int, int] = {}

    def to_handle(value: Any) -> dict[str, Any]:
        h = ids.get(id(value))
        if h is None or handles.get(h) is not value:
            h = len(handles) + 1
            handles[h] = value
            ids[id(value)] = h
        out: dict[str, Any] = {"h": h, "type": type(value).__name__[:80]}
        if isinstance(value, type) and issubclass(value, BaseException):
            out["exc"] = [value.__name__[:80], _exception_info(value)]
        return out

    def from_handle(obj: dict[str, Any]) -> Any:
        return handles[obj["h"]]

    hello: dict[str, Any] = {"hello": True}
    try:
        exec(compile(payload["code"], "<solution>", "exec"), namespace)  # noqa: S102
    except BaseException as err:  # noqa: BLE001 - SystemExit etc. are the solution failing
        hello["setup_error"] = _error_text(err)
    try:
        sys.stdout.flush()
    except BaseException:  # noqa: BLE001, S110 - the solution may have closed stdout
        pass
    _write_line(rep_fd, hello)
    read_line = _line_reader(req_fd)
    while True:
        try:
            request = json.loads(read_line())
        except ChannelError:
            break
        try:
            if request["fn"] == "get":
                name = request["args"][0]
                if name not in namespace:
                    raise NameError(f"name {name!r} is not defined")
                result = namespace[name]
            else:
                fn = _OPS[request["fn"]]
                args = [decode(a, from_handle) for a in request["args"]]
                kwargs = {k: decode(v, from_handle) for k, v in request.get("kw", {}).items()}
                result = fn(*args, **kwargs)
            reply: dict[str, Any] = {"ok": encode(result, to_handle)}
        except BaseException as err:  # noqa: BLE001 - the error goes to the tests process
            try:
                args_enc = encode(tuple(err.args), lambda v: repr(v)[:200])
            except BaseException:  # noqa: BLE001
                args_enc = {"t": [str(err)[:500]]}
            reply = {"err": to_handle(type(err)) | {"args": args_enc}}
        try:
            _write_line(rep_fd, reply)
        except (OSError, ValueError, TypeError):
            _write_line(rep_fd, {"err": {"exc": ["TypeError", ["TypeError"]],
                                         "args": {"t": ["the reply could not be encoded"]}}})
    try:
        sys.stdout.flush()
    except BaseException:  # noqa: BLE001, S110
        pass
    os._exit(0)  # skip atexit handlers the solution may have registered


# ---------------------------------------------------------------- the tests side


class _Client:
    """The tests process's end of the channel; every answer is parsed, never executed."""

    def __init__(self, req_fd: int, rep_fd: int) -> None:
        self.req_fd = req_fd
        self.read_line = _line_reader(rep_fd)
        self.broken: str | None = None
        self.exc_classes: dict[int, type[BaseException]] = {}

    def fail(self, why: str) -> ChannelError:
        self.broken = self.broken or why
        return ChannelError(why)

    def receive(self) -> dict[str, Any]:
        if self.broken:
            raise ChannelError(self.broken)
        try:
            message = json.loads(self.read_line())
        except ChannelError as err:
            raise self.fail(str(err)) from None
        except (ValueError, RecursionError):
            raise self.fail("the solution's process sent a malformed message") from None
        if type(message) is not dict:
            raise self.fail("the solution's process sent a malformed message")
        return message

    def request(self, fn: str, *args: Any, **kwargs: Any) -> Any:
        message = {"fn": fn, "args": [encode(a, _outgoing) for a in args],
                   "kw": {k: encode(v, _outgoing) for k, v in kwargs.items()}}
        if self.broken:
            raise ChannelError(self.broken)
        try:
            _write_line(self.req_fd, message)
        except OSError:
            raise self.fail("the solution's process ended") from None
        reply = self.receive()
        try:
            if "ok" in reply:
                return decode(reply["ok"], self.handle)
            err = reply["err"]
            cls = self.exception_class(err)
            args = decode(err.get("args", {"t": []}), lambda _o: "<object>")
            exc = cls(*args) if isinstance(args, tuple) else cls(str(args))
        except (ValueError, TypeError, KeyError, IndexError, RecursionError):
            raise self.fail("the solution's process sent a malformed answer") from None
        raise exc

    def exception_class(self, info: dict[str, Any]) -> type[BaseException]:
        name, bases = info["exc"]
        base = next((getattr(builtins, b) for b in bases if isinstance(b, str)
                     and isinstance(getattr(builtins, b, None), type)
                     and issubclass(getattr(builtins, b), BaseException)), Exception)
        if base.__name__ == name or "h" not in info:
            return base  # a builtin exception: raise the real class
        h = int(info["h"])
        if h not in self.exc_classes:
            self.exc_classes[h] = type(str(name)[:80], (base,),
                                       {"__module__": "solution", "_h": h})
        return self.exc_classes[h]

    def handle(self, obj: dict[str, Any]) -> Any:
        if "exc" in obj:
            return self.exception_class(obj)
        return Remote(self, int(obj["h"]), str(obj.get("type", "object")))


_CLIENT: _Client | None = None


def _outgoing(value: Any) -> dict[str, Any]:
    if isinstance(value, Remote):
        return {"h": object.__getattribute__(value, "_h")}
    h = getattr(value, "_h", None) if isinstance(value, type) else None
    if isinstance(h, int):
        return {"h": h}
    raise TypeError(
        f"cannot pass {type(value).__name__} {value!r:.60} to the solution: only literals "
        "(numbers, strings, containers of them) and the solution's own objects cross "
        "the sandbox boundary"
    )


def _remote_op(fn: str) -> Callable[..., Any]:
    def op(self: Remote, *args: Any) -> Any:
        return object.__getattribute__(self, "_client").request(fn, self, *args)

    op.__name__ = f"__{fn}__"
    return op


def _compare(fn: str) -> Callable[[Remote, Any], Any]:
    """Solution objects compare with each other in the solution, never with test values.

    A test value compared with an object the solution returned gets
    ``NotImplemented`` (so ``==`` is False): an object whose ``__eq__`` always
    says True cannot make ``assert f() == 5`` pass.
    """

    def op(self: Remote, other: Any) -> Any:
        if not isinstance(other, Remote):
            return NotImplemented
        return object.__getattribute__(self, "_client").request(fn, self, other)

    op.__name__ = f"__{fn}__"
    return op


class Remote:
    """A proxy for an object that stays in the solution's process."""

    __slots__ = ("_client", "_h", "_type")

    def __init__(self, client: _Client, h: int, type_name: str) -> None:
        object.__setattr__(self, "_client", client)
        object.__setattr__(self, "_h", h)
        object.__setattr__(self, "_type", type_name)

    def __getattr__(self, name: str) -> Any:
        return self._client.request("getattr", self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._client.request("setattr", self, name, value)

    def __delattr__(self, name: str) -> None:
        self._client.request("delattr", self, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._client.request("call", self, *args, **kwargs)

    def __bool__(self) -> bool:
        return bool(self._client.request("bool", self) is True)

    def __len__(self) -> int:
        n = self._client.request("len", self)
        if type(n) is not int or n < 0:
            raise TypeError("len() of a solution object did not return a non-negative int")
        return n

    def __iter__(self) -> Any:
        return self._client.request("iter", self)

    def __next__(self) -> Any:
        return self._client.request("next", self)

    def __repr__(self) -> str:
        text = self._client.request("repr", self)
        return text if type(text) is str else f"<solution {self._type}>"

    def __str__(self) -> str:
        text = self._client.request("str", self)
        return text if type(text) is str else f"<solution {self._type}>"

    def __hash__(self) -> int:
        return hash(("solution-object", self._h))

    def __instancecheck__(self, obj: Any) -> bool:
        return bool(self._client.request("isinstance", obj, self) is True)

    def __subclasscheck__(self, cls: Any) -> bool:
        return bool(self._client.request("issubclass", cls, self) is True)

    __getitem__ = _remote_op("getitem")
    __setitem__ = _remote_op("setitem")
    __delitem__ = _remote_op("delitem")
    __contains__ = _remote_op("contains")
    __index__ = _remote_op("index")
    __add__ = _remote_op("add")
    __sub__ = _remote_op("sub")
    __mul__ = _remote_op("mul")
    __truediv__ = _remote_op("truediv")
    __floordiv__ = _remote_op("floordiv")
    __mod__ = _remote_op("mod")
    __pow__ = _remote_op("pow")
    __matmul__ = _remote_op("matmul")
    __and__ = _remote_op("and")
    __or__ = _remote_op("or")
    __xor__ = _remote_op("xor")
    __lshift__ = _remote_op("lshift")
    __rshift__ = _remote_op("rshift")
    __neg__ = _remote_op("neg")
    __pos__ = _remote_op("pos")
    __abs__ = _remote_op("abs")
    __invert__ = _remote_op("invert")
    __eq__ = _compare("eq")
    __ne__ = _compare("ne")
    __lt__ = _compare("lt")
    __le__ = _compare("le")
    __gt__ = _compare("gt")
    __ge__ = _compare("ge")


class _TestGlobals(dict[str, Any]):
    """The tests' namespace: their own names, then builtins, then the solution's names.

    Builtins come before the solution's names so that a solution defining
    ``len`` or ``all`` cannot change what the tests' own checks compute.
    Literal values are copied in on first use; objects stay remote.
    """

    client: _Client

    def __missing__(self, name: str) -> Any:
        if hasattr(builtins, name):
            raise KeyError(name)
        try:
            value = self.client.request("get", name)
        except NameError:
            raise KeyError(name) from None
        self[name] = value
        return value


def run_tests() -> None:
    """Wait for the solution's hello, run every test here, write the verdict."""
    payload = _read_payload()
    req_fd, rep_fd, verdict_fd = payload["fds"]
    os.chdir(os.path.realpath(payload["workdir"]))
    _confine(payload, dumpable=False)
    client = _Client(req_fd, rep_fd)
    tests: list[str] = payload["tests"]
    outcome: dict[str, Any] = {"setup_error": None, "channel": None, "cases": []}
    try:
        hello = client.receive()
        if hello.get("hello") is not True:
            raise client.fail("the solution's process sent a malformed message")
        if hello.get("setup_error") is not None:
            outcome["setup_error"] = str(hello["setup_error"])[:500]
    except ChannelError as err:
        outcome["channel"] = str(err)
    namespace = _TestGlobals(__name__="__main__", __builtins__=builtins)
    namespace.client = client
    for i, test in enumerate(tests):
        if outcome["setup_error"] is not None or outcome["channel"] is not None:
            outcome["cases"].append({"passed": False, "error": "not run: the solution failed"})
            continue
        try:
            exec(compile(test, f"<test {i}>", "exec"), namespace)  # noqa: S102
            case: dict[str, Any] = {"passed": True, "error": None}
        except BaseException as err:  # noqa: BLE001 - any escape is a failed test
            case = {"passed": False, "error": _error_text(err)}
        if client.broken:  # even if the test swallowed the ChannelError
            case = {"passed": False, "error": f"the channel broke: {client.broken}"}
            outcome["channel"] = client.broken
        outcome["cases"].append(case)
    try:
        sys.stdout.flush()
    except BaseException:  # noqa: BLE001, S110 - a test may have closed stdout
        pass
    _write_line(verdict_fd, outcome)
    os._exit(0)


# -------------------------------------------------------------------- the probe


def probe() -> None:
    """Report the layers in force, from the inside."""
    payload = _read_payload()
    confined = _confine(payload, dumpable=True)
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
    report = {
        "uid": os.getuid(),
        "no_new_privs": status.get("NoNewPrivs", "").strip() == "1",
        "seccomp": status.get("Seccomp", "").strip() == "2" and not forked,
        "parent_pid_visible": str(payload["host_pid"]) in pids,
        "host_path_visible": os.path.exists(payload["host_marker"]),
        "root_writable": os.access("/", os.W_OK),
        "interfaces": interfaces,
        "pdeathsig": confined["pdeathsig"],
    }
    print(json.dumps(report))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    {"solution": serve_solution, "tests": run_tests, "probe": probe}[sys.argv[1]]()
