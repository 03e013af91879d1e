"""Child side of :func:`agentic_loop.judges.sandbox.run.run_python_tests`.

This file is not imported by the library: its source is passed to a fresh
``python -I -c`` inside the sandbox (so a child never imports the
``agentic_loop`` package or anything heavy). ``argv[1]`` names its role:

``solution``
    The **untrusted** process. It lowers its limits, installs the seccomp
    filter and an audit hook, runs the solution, sends one ``hello`` line
    (``ready`` or the solution's error) and then serves the test process's
    requests: look up a name, call a function, get an attribute, apply an
    operator. Values cross back as *plain data* or as opaque handles;
    nothing it sends can carry code.
``tests``
    The process that **decides**. It never runs solution code: the test
    sources run here against their own standard library and third-party
    modules, and only the solution's own names are fetched from the solution
    process (see below). It writes the verdict on a pipe only the parent reads.
``probe``
    Reports which isolation layers are in force, as JSON on stdout.

Everything here that the solution process does is advisory: the solution
runs in that process and may rewrite any of it. What the verdict rests on is
that the tests process, which only parses JSON from the solution, decides.

**Names.** A name a test uses resolves to, in order: the test's own (its
``import math`` is this process's ``math``), a builtin, then a name the
solution's *source* binds only by ``import`` (``import math``, ``from math
import isclose``, ``from math import *``), which this process imports itself,
so patching ``math.isclose`` before importing it changes nothing here. Any
other name is the solution's: a module or a library function under its own
name is still imported here; the rest crosses as plain data or a handle.

**Values** cross as plain data: ``None``, bools, numbers, strings, bytes,
lists, tuples, dicts, sets, fractions, decimals, and data this process rebuilds
with its own classes (namedtuples, ``OrderedDict``, ``Counter``,
``defaultdict`` of a builtin, ``deque``, ``datetime`` values, numeric numpy
arrays). A subclass of a plain type arrives as the plain type (an ``int``
whose ``__eq__`` always says True arrives as its ``int`` value). Exceptions
arrive by type (builtin, library or a stand-in named like the solution's),
arguments and plain attributes. A NaN anywhere in a value fails the test that
received it (:class:`NotPlainData`, even if the test catches it): no
comparison can check it. Anything else stays a handle that can be called,
read, indexed, iterated and sized, each answer again plain data or a handle,
but never compared or hashed: ``==``, ``!=``, ``<`` or a set lookup on a
solution object (``f() != 6``, ``f() not in {6}``, ``Stack() == Stack()``)
fails its test; only an object's identity answers ``==`` with itself.
A ``StopIteration`` from anything but ``next()`` arrives as ``RuntimeError``
(as in a generator), so it cannot silently end a test's ``map()``.

**What stays the test author's job.** A check is only as strong as what it
asks: ``assert f() != 6`` passes every other wrong answer and ``assert f()``
any truthy one, so assert the right value (``== 5``). The truth value,
``len``, ``str`` and ``in`` of a solution object, and whatever its methods
return, are the solution's own answers. A name the test uses without
defining or importing it is the solution's: ``from math import isclose as
close`` or ``close = math.isclose`` make ``close`` a solution function, so
import the helpers a check relies on in the test itself. A task whose right
answer is NaN must ask for another value (``None``); one that asks for an
``__eq__`` must check it through plain data (the fields of two objects).
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

_PR_SET_PDEATHSIG, _PR_GET_PDEATHSIG, _PR_SET_DUMPABLE = 1, 2, 4
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


def _prctl(*args: Any) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(*args) == 0)
    except (OSError, AttributeError):
        return False


def _drop_root(uid: int | None) -> None:
    """Become ``uid`` with every capability set empty, or stop: tested code never runs as root.

    Under a root caller bwrap starts the runner as its user namespace's root
    (mapped to the host's root for bwrap's own setup) with only CAP_SETUID,
    CAP_SETGID and CAP_SETPCAP; ``uid`` maps to an unused unprivileged host
    uid. Leaving root empties the permitted, effective and ambient sets; the
    bounding and inheritable sets are emptied here by hand.
    """
    if uid is None:
        return
    for cap in range(_LAST_CAP + 1):
        _prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the kernel's last cap
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.capset(ctypes.byref(_CapHeader(_CAP_VERSION_3, 0)), (_CapData * 2)())
    if 0 in os.getresuid() or 0 in os.getresgid():
        raise PermissionError(f"{MARK}could not leave root (uids {os.getresuid()})")


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


def _private_tmpfs(mounts: dict[str, list[int]] | None) -> None:
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
    _prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)  # leaving root cleared it: /proc/self was root's
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
    for cap in range(_LAST_CAP + 1):
        _prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.capset(ctypes.byref(_CapHeader(_CAP_VERSION_3, 0)), (_CapData * 2)())


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
    """Leave root, limits, die-with-parent, no_new_privs and seccomp: all before untrusted code.

    Root is left first, then the private tmpfs mounts are made: changing uid
    or user namespace clears the parent-death signal and the dumpable flag,
    so both are set after them.
    """
    _drop_root(payload.get("drop_to"))
    _private_tmpfs(payload.get("mounts"))
    pdeathsig = _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    _prctl(_PR_SET_DUMPABLE, 1 if dumpable else 0, 0, 0, 0)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write raises instead of killing
    mb = 1024 * 1024
    _limit(resource.RLIMIT_AS, payload["memory_mb"] * mb)
    _limit(resource.RLIMIT_CPU, payload["cpu_s"])
    _limit(resource.RLIMIT_FSIZE, payload["fsize_mb"] * mb)
    _limit(resource.RLIMIT_NPROC, payload["nproc"])  # threads count; the kernel exempts root
    _limit(resource.RLIMIT_NOFILE, 64)
    # 1, not 0: a core_pattern that pipes to a helper ignores the limit, except the kernel's
    # special value 1, which suppresses the dump (a crash would otherwise run a root helper)
    _limit(resource.RLIMIT_CORE, 1)
    _limit(resource.RLIMIT_MSGQUEUE, 0)  # POSIX message queues hold kernel memory
    _limit(resource.RLIMIT_SIGPENDING, 256)  # so do queued signals and POSIX timers
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


class NotPlainData(BaseException):
    """A test received what it cannot check itself: NaN, or a solution object in a comparison.

    A ``BaseException`` so that ``except Exception`` cannot swallow it; the
    tests process also fails the test that received one even when it was caught.
    """


_NAN = ("NaN in the solution's value: NaN is unequal to everything, so a check such as "
        "`!= 6` would pass it (a task whose answer is undefined should ask for None)")


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
_FACTORIES = {t.__name__: t for t in (list, int, set, dict, str, float, tuple, frozenset, bytes)}
_WHEN_FIELDS = {"datetime": 7, "date": 3, "time": 4, "timedelta": 3}


def _type_names(kind: type) -> frozenset[str]:
    """``module.qualname`` of ``kind`` and its bases: how a library type is recognised."""
    return frozenset(f"{getattr(k, '__module__', '')}.{getattr(k, '__qualname__', '')}"
                     for k in kind.__mro__)


def _offset(value: Any) -> int | None:
    off = value.utcoffset()
    return None if off is None else (off.days * 86400 + off.seconds) * 10**6 + off.microseconds


def _when(value: Any, names: frozenset[str]) -> list[Any] | None:
    """A ``datetime`` value as ``[kind, fields, UTC offset in µs]``; ``None`` for anything else."""
    if "datetime.datetime" in names:
        fields = [value.year, value.month, value.day, value.hour, value.minute, value.second,
                  value.microsecond]
        return ["datetime", [int(v) for v in fields], _offset(value)]
    if "datetime.date" in names:
        return ["date", [int(value.year), int(value.month), int(value.day)], None]
    if "datetime.time" in names:
        fields = [value.hour, value.minute, value.second, value.microsecond]
        return ["time", [int(v) for v in fields], _offset(value)]
    if "datetime.timedelta" in names:
        return ["timedelta", [int(value.days), int(value.seconds), int(value.microseconds)], None]
    return None


def encode(value: Any, to_handle: Callable[[Any], Any], depth: int = 0) -> Any:
    """A JSON-able form of ``value``: plain data by value, anything else through ``to_handle``.

    A subclass of a plain type crosses as that plain type, so an ``int`` whose
    ``__eq__`` always says True arrives as its ``int`` value; namedtuples,
    ``OrderedDict``, ``Counter``, ``defaultdict`` of a builtin, ``deque``,
    ``datetime`` values and numeric numpy arrays cross as data the receiver
    rebuilds with its own classes. What the solution's side sends is advisory:
    only :func:`decode` on the tests' side decides what a value is.

    >>> class Liar(int):
    ...     def __eq__(self, other):
    ...         return True
    >>> encode([Liar(3), (2.5, "x"), {True: None}], to_handle=repr)
    {'l': [3, {'t': [2.5, 'x']}, {'d': [[True, None]]}]}
    """
    kind = type(value)
    if kind in _EXACT:
        return value
    if depth > MAX_DEPTH:
        return to_handle(value)

    def enc(item: Any) -> Any:
        return encode(item, to_handle, depth + 1)

    if isinstance(value, int):  # bool is exact, so this is a subclass: IntEnum, a liar
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    names = _type_names(kind)
    if isinstance(value, tuple):
        items = [enc(v) for v in tuple.__iter__(value)]
        fields = getattr(kind, "_fields", None)
        if (type(fields) is tuple and len(fields) == len(items) and kind.__name__.isidentifier()
                and all(type(f) is str and f.isidentifier() and f[0] != "_" for f in fields)):
            return {"nt": [kind.__name__, list(fields), items]}
        return {"t": items}
    if isinstance(value, list):
        return {"l": [enc(v) for v in list.__iter__(value)]}
    if isinstance(value, frozenset):
        return {"f": [enc(v) for v in frozenset.__iter__(value)]}
    if isinstance(value, set):
        return {"s": [enc(v) for v in set.__iter__(value)]}
    if isinstance(value, dict):
        pairs = [[enc(k), enc(v)] for k, v in dict.items(value)]
        factory = getattr(value, "default_factory", None)
        factory_name = next((k for k, v in _FACTORIES.items() if v is factory), None)
        if "collections.Counter" in names:
            return {"ctr": pairs}
        if "collections.OrderedDict" in names:
            return {"od": pairs}
        if "collections.defaultdict" in names and (factory is None or factory_name):
            return {"dd": [factory_name, pairs]}
        return {"d": pairs}
    if isinstance(value, bytearray):
        return {"ba": bytearray.hex(value)}
    if isinstance(value, bytes):
        return {"b": bytes.hex(value)}
    if isinstance(value, complex):
        return {"c": [float(value.real), float(value.imag)]}
    if kind is range:
        return {"r": [value.start, value.stop, value.step]}
    if isinstance(value, BaseException):  # by type, arguments and plain attributes
        attrs = {k: v for k, v in vars(value).items() if not k.startswith("__")}
        return {"e": [to_handle(kind), enc(tuple(value.args)), enc(attrs)]}
    if "fractions.Fraction" in names:
        return {"q": [int(value.numerator), int(value.denominator)]}
    if names & {"decimal.Decimal", "_decimal.Decimal"}:
        return {"m": str(value)}
    if "collections.deque" in names:
        return {"dq": [[enc(v) for v in value], value.maxlen]}
    when = _when(value, names)
    if when is not None:
        return {"dt": when}
    if "numpy.ndarray" in names and value.dtype.kind in "biufc":
        return {"np": [value.dtype.str, [int(n) for n in value.shape], enc(value.tolist())]}
    if "numpy.generic" in names:
        item = value.item()
        if type(item) is not kind:
            return enc(item)
    return to_handle(value)


def decode(obj: Any, from_handle: Callable[[dict[str, Any]], Any], *,
           strict: bool = False) -> Any:
    """The inverse of :func:`encode`, built from this process's own classes.

    Raises ``ValueError`` (or ``TypeError``, ``ArithmeticError``) on anything
    malformed. ``strict`` is the tests' side: a NaN anywhere in the value
    raises :class:`NotPlainData`, since no comparison can check it.

    >>> decode({"nt": ["Point", ["x", "y"], [1, 2]]}, from_handle=repr)
    Point(x=1, y=2)
    >>> try:
    ...     decode({"l": [1.5, {"c": [float("nan"), 0.0]}]}, from_handle=repr, strict=True)
    ... except NotPlainData as err:
    ...     print(str(err)[:28])
    NaN in the solution's value:
    """
    if type(obj) in _EXACT:
        if strict and type(obj) is float and obj != obj:
            raise NotPlainData(_NAN)
        return obj
    if type(obj) is not dict or not obj:
        raise ValueError("malformed value")
    if "h" in obj:
        return from_handle(obj)
    (tag, body), = obj.items()

    def sub(item: Any) -> Any:
        return decode(item, from_handle, strict=strict)

    value = _rebuild(tag, body, sub)
    if strict and (type(value) is complex and value != value
                   or tag == "m" and value.is_nan()):
        raise NotPlainData(_NAN)
    return value


def _rebuild(tag: str, body: Any, sub: Callable[[Any], Any]) -> Any:
    """One tagged value of :func:`encode`, made here from ``body`` (already plain JSON)."""
    import collections  # noqa: PLC0415 - loaded at start-up anyway, by typing

    if tag in ("l", "t", "s", "f") and type(body) is list:
        return {"l": list, "t": tuple, "s": set, "f": frozenset}[tag]([sub(v) for v in body])
    if tag in ("d", "od", "ctr") and type(body) is list:
        pairs = [(sub(k), sub(v)) for k, v in body]
        if tag == "ctr":
            return collections.Counter(dict(pairs))
        return (dict if tag == "d" else collections.OrderedDict)(pairs)
    if tag == "dd" and type(body) is list and len(body) == 2 and type(body[1]) is list:
        if body[0] is not None and body[0] not in _FACTORIES:
            raise ValueError(f"malformed defaultdict factory {body[0]!r}")
        factory = None if body[0] is None else _FACTORIES[body[0]]
        return collections.defaultdict(factory, [(sub(k), sub(v)) for k, v in body[1]])
    if tag == "nt" and type(body) is list and len(body) == 3 and type(body[2]) is list:
        if type(body[0]) is not str or type(body[1]) is not list:
            raise ValueError("malformed namedtuple")
        return collections.namedtuple(body[0], body[1])(*[sub(v) for v in body[2]])
    if tag == "dq" and type(body) is list and len(body) == 2 and type(body[0]) is list:
        if body[1] is not None and type(body[1]) is not int:
            raise ValueError("malformed deque")
        return collections.deque([sub(v) for v in body[0]], body[1])
    if tag == "r" and type(body) is list and all(type(v) is int for v in body):
        return range(*body)
    if tag == "e" and type(body) is list and len(body) == 3:
        cls, args, attrs = sub(body[0]), sub(body[1]), sub(body[2])
        if not (isinstance(cls, type) and issubclass(cls, BaseException)
                and type(args) is tuple and type(attrs) is dict):
            raise ValueError("malformed exception")
        base = next(c for c in cls.__mro__ if getattr(builtins, c.__name__, None) is c)
        return _make_exception(cls, args, attrs, base)
    if tag in ("b", "ba") and type(body) is str:
        return (bytes if tag == "b" else bytearray).fromhex(body)
    if tag == "c" and type(body) is list and len(body) == 2 and all(
            type(v) in (int, float) for v in body):
        return complex(body[0], body[1])
    if tag == "q" and type(body) is list and len(body) == 2 and all(type(v) is int for v in body):
        import fractions  # noqa: PLC0415 - rare: keeps start-up fast

        return fractions.Fraction(body[0], body[1])
    if tag == "m" and type(body) is str:
        import decimal  # noqa: PLC0415

        return decimal.Decimal(body)
    if tag == "dt" and type(body) is list and len(body) == 3:
        return _rebuild_when(*body)
    if tag == "np" and type(body) is list and len(body) == 3:
        return _rebuild_array(body[0], body[1], sub(body[2]))
    raise ValueError(f"malformed value tag {tag!r}")


def _make_exception(cls: type[BaseException], args: tuple[Any, ...], attrs: dict[Any, Any],
                    fallback: Callable[..., BaseException]) -> BaseException:
    """An exception of ``cls`` made here, with the solution's ``args`` and plain attributes.

    >>> import json
    >>> err = _make_exception(json.JSONDecodeError, ("Expecting value",), {"pos": 0}, ValueError)
    >>> type(err).__name__, str(err), err.pos
    ('JSONDecodeError', 'Expecting value', 0)
    """
    try:
        exc = cls(*args)
    except Exception:  # noqa: BLE001 - a library class that wants other arguments
        try:
            exc = cls.__new__(cls, *args)  # sets args; the attributes follow
        except Exception:  # noqa: BLE001
            exc = fallback(*args)
    for key, value in attrs.items():
        if type(key) is str and key.isidentifier() and not key.startswith("__"):
            try:
                setattr(exc, key, value)
            except (AttributeError, TypeError):
                pass  # a read-only attribute keeps the class's own value
    return exc


def _rebuild_when(kind: Any, fields: Any, offset: Any) -> Any:
    import datetime as dt  # noqa: PLC0415

    if (kind not in _WHEN_FIELDS or type(fields) is not list
            or len(fields) != _WHEN_FIELDS[kind] or not all(type(v) is int for v in fields)
            or (offset is not None and type(offset) is not int)):
        raise ValueError("malformed date or time")
    tz = None if offset is None else dt.timezone(dt.timedelta(microseconds=offset))
    if kind == "datetime":
        return dt.datetime(*fields).replace(tzinfo=tz)
    if kind == "time":
        return dt.time(*fields).replace(tzinfo=tz)
    return (dt.date if kind == "date" else dt.timedelta)(*fields)


def _rebuild_array(dtype_name: Any, shape: Any, data: Any) -> Any:
    """A numeric numpy array from its dtype, shape and (already decoded) nested lists."""
    if type(dtype_name) is not str or type(shape) is not list or not all(
            type(n) is int and n >= 0 for n in shape):
        raise ValueError("malformed array")
    try:
        import numpy  # noqa: PLC0415
    except ImportError:
        raise NotPlainData("a numpy array, but numpy cannot be imported by the tests") from None
    dtype = numpy.dtype(dtype_name)
    if dtype.kind not in "biufc":
        raise ValueError(f"malformed array dtype {dtype_name!r}")
    return numpy.array(data, dtype=dtype).reshape(shape)


# ------------------------------------------------------------- the solution side

_OPS: dict[str, Callable[..., Any]] = {
    "call": lambda f, *a, **k: f(*a, **k),
    "getattr": getattr, "setattr": setattr, "delattr": delattr,
    "getitem": operator.getitem, "setitem": operator.setitem, "delitem": operator.delitem,
    "len": len, "iter": iter, "next": next, "contains": operator.contains, "bool": bool,
    "repr": repr, "str": str, "index": operator.index,
    "isinstance": isinstance, "issubclass": issubclass,
    "add": operator.add, "sub": operator.sub,
    "mul": operator.mul, "truediv": operator.truediv, "floordiv": operator.floordiv,
    "mod": operator.mod, "pow": operator.pow, "matmul": operator.matmul,
    "and": operator.and_, "or": operator.or_, "xor": operator.xor,
    "lshift": operator.lshift, "rshift": operator.rshift, "neg": operator.neg,
    "pos": operator.pos, "abs": operator.abs, "invert": operator.invert,
}  # no comparisons: the tests never let the solution compare (see _refuse_comparison)


def _exception_info(cls: type[BaseException]) -> list[str]:
    return [c.__name__ for c in cls.__mro__ if getattr(builtins, c.__name__, None) is c]


def _origin(value: Any) -> dict[str, Any]:
    """Where a library module, class or function lives, so the tests can import their own.

    Only a hint: the tests process decides whether to import it (see
    :class:`_SolutionNames`); ``{}`` for anything the solution made itself.

    >>> import math
    >>> _origin(math), _origin(math.isclose), _origin(lambda: 0)
    ({'mod': 'math'}, {'lib': ['math', 'isclose']}, {})
    """
    if isinstance(value, type(sys)):
        name = getattr(value, "__name__", None)
        return {"mod": name} if type(name) is str else {}
    if not callable(value):
        return {}
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if type(module) is not str or type(qualname) is not str or module == "__main__":
        return {}
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return {"lib": [module, qualname]} if found is value else {}


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
            out.update(_origin(value))
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
            origin: dict[str, Any] = {}
            if request["fn"] == "get":
                name = request["args"][0]
                if name not in namespace:
                    raise NameError(f"name {name!r} is not defined")
                result = namespace[name]
                origin = _origin(result)
            else:
                fn = _OPS[request["fn"]]
                args = [decode(a, from_handle) for a in request["args"]]
                kwargs = {k: decode(v, from_handle) for k, v in request.get("kw", {}).items()}
                result = fn(*args, **kwargs)
            reply: dict[str, Any] = {"ok": encode(result, to_handle), **origin}
        except BaseException as err:  # noqa: BLE001 - the error goes to the tests process
            try:
                args_enc = encode(tuple(err.args), lambda v: repr(v)[:200])
            except BaseException:  # noqa: BLE001
                args_enc = {"t": [str(err)[:500]]}
            try:  # attributes such as JSONDecodeError.pos, as data
                attrs = encode({k: v for k, v in vars(err).items() if not k.startswith("__")},
                               lambda v: repr(v)[:200])
            except BaseException:  # noqa: BLE001
                attrs = {"d": []}
            reply = {"err": to_handle(type(err)) | {"args": args_enc, "attrs": attrs}}
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
        self.refused: str | None = None  # what the running test received and cannot check
        self.exc_classes: dict[int, type[BaseException]] = {}
        self.proxies: dict[int, Remote] = {}

    def fail(self, why: str) -> ChannelError:
        self.broken = self.broken or why
        return ChannelError(why)

    def refuse(self, why: str) -> NotPlainData:
        """Fail the running test, even if it catches what this returns."""
        self.refused = self.refused or why
        return NotPlainData(why)

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

    def exchange(self, fn: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        message = {"fn": fn, "args": [encode(a, _outgoing) for a in args],
                   "kw": {k: encode(v, _outgoing) for k, v in kwargs.items()}}
        if self.broken:
            raise ChannelError(self.broken)
        try:
            _write_line(self.req_fd, message)
        except OSError:
            raise self.fail("the solution's process ended") from None
        return self.receive()

    def request(self, fn: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return self.answer(self.exchange(fn, *args, **kwargs))
        except (StopIteration, StopAsyncIteration) as stop:
            if fn == "next":
                raise
            # as PEP 479 does for generators: from a call it would silently end the test's
            # `map()` or `zip()`, so `assert all(map(valid, items))` would pass on nothing
            raise RuntimeError(
                f"the solution raised {type(stop).__name__} outside iteration") from None

    def answer(self, reply: dict[str, Any]) -> Any:
        """The value in ``reply`` as plain data or a handle, or its exception raised here."""
        try:
            if "ok" in reply:
                return decode(reply["ok"], self.handle, strict=True)
            exc = self.exception(reply["err"])
        except NotPlainData as refused:
            raise self.refuse(str(refused)) from None
        except (ValueError, TypeError, KeyError, IndexError, RecursionError, ArithmeticError):
            raise self.fail("the solution's process sent a malformed answer") from None
        raise exc

    def lookup(self, name: str) -> Any:
        """The solution's value for ``name``; a library module or function is imported here."""
        reply = self.exchange("get", name)
        module, lib = reply.get("mod"), reply.get("lib")
        if type(module) is str:
            found = _import_here(module, "")
            if found is not _MISSING:
                return found
        where = _own_name(lib, name)
        if where is not None:
            found = _import_here(*where)
            if found is not _MISSING:
                return found
        return self.answer(reply)

    def exception(self, err: dict[str, Any]) -> BaseException:
        """The solution's exception, made here: its class, its args, its plain attributes."""
        cls = self.exception_class(err)
        args = decode(err.get("args", {"t": []}), lambda _o: "<object>", strict=True)
        args = args if isinstance(args, tuple) else (str(args),)
        attrs = decode(err.get("attrs", {"d": []}), lambda _o: "<object>", strict=True)
        if type(attrs) is not dict:
            raise ValueError("malformed exception attributes")
        return _make_exception(cls, args, attrs, self.exception_class(err, library=False))

    def exception_class(self, info: dict[str, Any], *, library: bool = True
                        ) -> type[BaseException]:
        name, bases = info["exc"]
        where = _own_name(info.get("lib"), name) if library else None
        if where is not None:
            found = _import_here(*where)
            if isinstance(found, type) and issubclass(found, BaseException):
                return found  # e.g. json.JSONDecodeError, so `except json.JSONDecodeError` works
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
        h = int(obj["h"])
        if h not in self.proxies:  # one proxy per object, so `is` holds between two answers
            self.proxies[h] = Remote(self, h, str(obj.get("type", "object"))[:80])
        return self.proxies[h]


_CLIENT: _Client | None = None
_MISSING: Any = object()


def _own_name(lib: Any, name: Any) -> tuple[str, str] | None:
    """``lib`` as ``(module, qualname)`` when it is a library object named ``name``, else None.

    A library object crosses by import only under its own name (``isclose``
    for ``math.isclose``): renamed (``solve = some.lib.function``) it is the
    solution's name, and calling it asks the solution.
    """
    if (type(lib) is list and len(lib) == 2 and all(type(p) is str for p in lib)
            and lib[1].rsplit(".", 1)[-1] == name):
        return lib[0], lib[1]
    return None


def _import_here(module: str, qualname: str) -> Any:
    """``module.qualname`` as the tests process imports it itself, or ``_MISSING``.

    The solution only ever names what to import; this process never imports
    its own ``__main__`` (this runner) for it.

    >>> import math
    >>> _import_here("math", "isclose") is math.isclose, _import_here("__main__", "") is _MISSING
    (True, True)
    """
    parts = module.split(".")
    if parts[0] == "__main__" or not all(p.isidentifier() for p in parts) or (
            qualname and not all(p.isidentifier() for p in qualname.split("."))):
        return _MISSING
    import importlib  # noqa: PLC0415 - only when a test uses a name it did not import

    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split(".") if qualname else ():
            found = getattr(found, part)
    except Exception:  # noqa: BLE001 - e.g. a module the solution built at run time
        return _MISSING
    return found


_Import = tuple[str, str, str]  # ("import" | "as" | "from", module, attribute)
_Scope = tuple[dict[str, list[_Import]], set[str], list[str]]


def _module_scope(code: str) -> _Scope | None:
    """How the solution's source binds its module-level names: imports, other bindings, ``*``.

    Read from the source the parent passed, not asked of the solution (which
    could say anything). ``None`` when the source cannot be parsed here.

    >>> imports, others, stars = _module_scope(
    ...     "import numpy as np\\nimport os.path\\nfrom math import *\\nfrom re import search\\n"
    ...     "search = 1\\ndef f():\\n    global g\\n    import json")
    >>> imports["np"], imports["os"], sorted(others), stars
    ([('as', 'numpy', '')], [('import', 'os.path', '')], ['f', 'g', 'search'], ['math'])
    """
    import ast  # noqa: PLC0415 - only when a test uses a name it did not define

    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    imports: dict[str, list[_Import]] = {}
    others = {n for node in ast.walk(tree) if isinstance(node, ast.Global) for n in node.names}
    stars: list[str] = []
    comprehensions = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    while todo:  # a stack, not recursion: a deeply nested solution cannot stop the walk
        node, in_comprehension = todo.pop()
        children: list[ast.AST] = []
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    imports.setdefault(alias.asname, []).append(("as", alias.name, ""))
                else:
                    top = alias.name.split(".")[0]
                    imports.setdefault(top, []).append(("import", alias.name, ""))
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    stars += [node.module] if node.module and not node.level else []
                elif node.level or not node.module or node.module == "__future__":
                    others.add(alias.asname or alias.name)
                else:
                    imports.setdefault(alias.asname or alias.name, []).append(
                        ("from", node.module, alias.name))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            # their bodies are their own scope; decorators, bases and defaults are this one
            if not isinstance(node, ast.Lambda):
                others.add(node.name)
                children += node.decorator_list
            if isinstance(node, ast.ClassDef):
                children += node.bases + [k.value for k in node.keywords]
            else:
                children += node.args.defaults + [d for d in node.args.kw_defaults if d]
        elif isinstance(node, ast.AnnAssign) and node.value is None:
            children = [node.annotation]  # `x: int` alone binds nothing
        else:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                if not in_comprehension:  # a comprehension's own targets stay inside it
                    others.add(node.id)  # (`del x` binds nothing: x is gone, or imported)
            elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
                others.add(node.target.id)
            elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
                others.add(node.name)
            elif isinstance(node, ast.MatchMapping) and node.rest:
                others.add(node.rest)
            children = list(ast.iter_child_nodes(node))
            in_comprehension = in_comprehension or isinstance(node, comprehensions)
        todo += [(child, in_comprehension) for child in children]
    return imports, others, stars


def _import_spec(spec: _Import, name: str) -> Any:
    """What one of the solution's import statements binds ``name`` to, imported here."""
    how, module, attr = spec
    if how == "from":
        found = _import_here(module, attr)
        if found is _MISSING:
            found = _import_here(f"{module}.{attr}", "")
        # `from m import f as g` is the solution's name g: only modules cross renamed
        return found if attr == name or isinstance(found, type(sys)) else _MISSING
    found = _import_here(module, "")
    if how == "import" and found is not _MISSING:
        return sys.modules.get(module.split(".")[0], _MISSING)  # `import a.b` binds `a`
    return found


def _star_export(module: str, name: str) -> Any:
    found = _import_here(module, "")
    public = getattr(found, "__all__", None)
    exported = not name.startswith("_") if public is None else name in list(public)
    return getattr(found, name, _MISSING) if found is not _MISSING and exported else _MISSING


class _SolutionNames:
    """Resolves a name a test uses but neither defines nor finds among the builtins.

    A name the solution's source binds only by ``import`` is imported by the
    tests process itself (so ``math.isclose`` is the real one even if the
    solution rebound it before importing); so is a module, and a library
    function or class under its own name. Every other name is the solution's
    own: its value crosses as plain data, or stays behind a handle.
    """

    def __init__(self, client: _Client, code: str | None) -> None:
        self.client = client
        self.code = code
        self.scope: _Scope | None = None

    def resolve(self, name: str) -> Any:
        if self.code is not None and self.scope is None:
            self.scope = _module_scope(self.code)
            if self.scope is None:
                raise self.client.refuse(
                    "the tests' process could not parse the solution's source to tell its "
                    "imports from its own names")
        imports, others, stars = self.scope or ({}, set(), [])
        if name not in others:
            for spec in imports.get(name, ()):
                found = _import_spec(spec, name)
                if found is not _MISSING:
                    return found
            for module in reversed(stars):
                found = _star_export(module, name)
                if found is not _MISSING:
                    return found
        return self.client.lookup(name)


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


_SYMBOLS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _refuse_comparison(fn: str) -> Callable[[Remote, Any], Any]:
    """A solution object is never compared: its answer would be its own ``__eq__``.

    So ``assert f() == 5``, ``assert f() != 6`` and ``Stack() == Stack()``
    fail when ``f`` or ``Stack`` hands back an object rather than plain data.
    Only identity answers ``==`` and ``!=`` (one proxy per object, so
    ``f() == Color.RED`` holds when ``f`` returned that very member): the
    solution could return that object anyway, and no method of it runs.
    """

    def op(self: Remote, other: Any) -> Any:
        if other is self and fn in ("eq", "ne"):
            return fn == "eq"
        kind = object.__getattribute__(self, "_type")
        raise object.__getattribute__(self, "_client").refuse(
            f"a solution object ({kind}) was compared with {_SYMBOLS[fn]}: its own __{fn}__ "
            f"would decide the check; compare plain data instead (an attribute, a method's "
            f"result, list() of it)")

    op.__name__ = f"__{fn}__"
    return op


class Remote:
    """A proxy for an object that stays in the solution's process.

    It can be called, read, indexed, iterated and sized, each answer arriving
    as plain data or another proxy; it is never compared or hashed (see
    :func:`_refuse_comparison`).
    """

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
        return self._client.request("bool", self) is True

    def __contains__(self, item: Any) -> bool:
        return self._client.request("contains", self, item) is True

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
        # a set or dict lookup is a comparison too: `f() not in {6}` must not pass an object
        raise self._client.refuse(
            f"a solution object ({self._type}) was hashed (a set member or dict key): "
            f"a set of them would be compared; collect plain data instead")

    def __instancecheck__(self, obj: Any) -> bool:
        return bool(self._client.request("isinstance", obj, self) is True)

    def __subclasscheck__(self, cls: Any) -> bool:
        return bool(self._client.request("issubclass", cls, self) is True)

    __getitem__ = _remote_op("getitem")
    __setitem__ = _remote_op("setitem")
    __delitem__ = _remote_op("delitem")
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
    __eq__ = _refuse_comparison("eq")
    __ne__ = _refuse_comparison("ne")
    __lt__ = _refuse_comparison("lt")
    __le__ = _refuse_comparison("le")
    __gt__ = _refuse_comparison("gt")
    __ge__ = _refuse_comparison("ge")


class _TestGlobals(dict[str, Any]):
    """The tests' namespace: their own names, then builtins, then the solution's names.

    Builtins come before the solution's names so that a solution defining
    ``len`` or ``all`` cannot change what the tests' own checks compute;
    :class:`_SolutionNames` says how the rest resolve. Plain data is copied
    in on first use; the solution's objects stay behind handles.
    """

    names: _SolutionNames

    def __missing__(self, name: str) -> Any:
        if hasattr(builtins, name):
            raise KeyError(name)
        try:
            value = self.names.resolve(name)
        except NameError:
            raise KeyError(name) from None
        self[name] = value
        return value


def _case(err: BaseException | None, client: _Client) -> dict[str, Any]:
    """One test's outcome; a refused value or a broken channel fails it even if it was caught."""
    case: dict[str, Any] = {"passed": err is None,
                            "error": None if err is None else _error_text(err)}
    if client.broken:
        case = {"passed": False, "error": f"the channel broke: {client.broken}"}
    elif client.refused is not None and not isinstance(err, NotPlainData):
        case = {"passed": False, "error": f"NotPlainData: {client.refused} (the test caught it)"}
    client.refused = None
    return case


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
    code = payload.get("code")
    namespace.names = _SolutionNames(client, code if isinstance(code, str) else None)
    for i, test in enumerate(tests):
        if outcome["setup_error"] is not None or outcome["channel"] is not None:
            outcome["cases"].append({"passed": False, "error": "not run: the solution failed"})
            continue
        error: BaseException | None = None
        try:
            exec(compile(test, f"<test {i}>", "exec"), namespace)  # noqa: S102
        except BaseException as err:  # noqa: BLE001 - any escape is a failed test
            error = err
        outcome["cases"].append(_case(error, client))
        outcome["channel"] = client.broken
    try:
        sys.stdout.flush()
    except BaseException:  # noqa: BLE001, S110 - a test may have closed stdout
        pass
    _write_line(verdict_fd, outcome)
    os._exit(0)


# -------------------------------------------------------------------- the probe


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
    payload = _read_payload()
    _confine(payload, dumpable=True)
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
    _prctl(_PR_GET_PDEATHSIG, ctypes.byref(pdeathsig), 0, 0, 0)
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


if __name__ == "__main__":
    {"solution": serve_solution, "tests": run_tests, "probe": probe}[sys.argv[1]]()
