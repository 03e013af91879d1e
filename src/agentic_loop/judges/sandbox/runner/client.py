"""The tests process's end of the channel, and the proxy that stands for a solution object.

Why a module: every answer from the solution's process arrives here and is
parsed, never executed (:class:`Client`); what stays in that process is
represented by a :class:`Remote`, which can be called, read, indexed,
iterated and sized but never compared or hashed. A library module or
function the solution names is imported by this process itself
(:func:`import_here`), never taken from the solution.

Example:
    >>> import math
    >>> import_here("math", "isclose") is math.isclose, own_name(["math", "isclose"], "close")
    (True, None)
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable
from typing import Any

from agentic_loop.judges.sandbox.runner.common import PACKAGE, ChannelError, NotPlainData
from agentic_loop.judges.sandbox.runner.wire import (
    decode,
    encode,
    line_reader,
    make_exception,
    write_line,
)


class Client:
    """The tests process's end of the channel; every answer is parsed, never executed."""

    def __init__(self, req_fd: int, rep_fd: int) -> None:
        self.req_fd = req_fd
        self.read_line = line_reader(rep_fd)
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
            write_line(self.req_fd, message)
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
            found = import_here(module, "")
            if found is not MISSING:
                return found
        where = own_name(lib, name)
        if where is not None:
            found = import_here(*where)
            if found is not MISSING:
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
        return make_exception(cls, args, attrs, self.exception_class(err, library=False))

    def exception_class(self, info: dict[str, Any], *, library: bool = True
                        ) -> type[BaseException]:
        name, bases = info["exc"]
        where = own_name(info.get("lib"), name) if library else None
        if where is not None:
            found = import_here(*where)
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


MISSING: Any = object()


def own_name(lib: Any, name: Any) -> tuple[str, str] | None:
    """``lib`` as ``(module, qualname)`` when it is a library object named ``name``, else None.

    A library object crosses by import only under its own name (``isclose``
    for ``math.isclose``): renamed (``solve = some.lib.function``) it is the
    solution's name, and calling it asks the solution.
    """
    if (type(lib) is list and len(lib) == 2 and all(type(p) is str for p in lib)
            and lib[1].rsplit(".", 1)[-1] == name):
        return lib[0], lib[1]
    return None


def import_here(module: str, qualname: str) -> Any:
    """``module.qualname`` as the tests process imports it itself, or ``MISSING``.

    The solution only ever names what to import; this process never imports
    its own ``__main__`` (the runner's bootstrap) or the runner's own modules
    (:data:`~agentic_loop.judges.sandbox.runner.common.PACKAGE`, its parts and
    the packages above it) for it.

    >>> import math
    >>> import_here("math", "isclose") is math.isclose, import_here("__main__", "") is MISSING
    (True, True)
    >>> import_here(PACKAGE + ".wire", "write_line") is MISSING
    True
    """
    parts = module.split(".")
    if parts[0] == "__main__" or _is_runner(module) or not all(
            p.isidentifier() for p in parts) or (
            qualname and not all(p.isidentifier() for p in qualname.split("."))):
        return MISSING
    import importlib  # noqa: PLC0415 - only when a test uses a name it did not import

    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split(".") if qualname else ():
            found = getattr(found, part)
    except Exception:  # noqa: BLE001 - e.g. a module the solution built at run time
        return MISSING
    return found


def _is_runner(module: str) -> bool:
    """Whether the runner's bootstrap registered ``module``: its package, parts or parents."""
    return (module == PACKAGE or module.startswith(PACKAGE + ".")
            or PACKAGE.startswith(module + "."))


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

    def __init__(self, client: Client, h: int, type_name: str) -> None:
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
