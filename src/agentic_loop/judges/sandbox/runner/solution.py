"""The untrusted process: it confines itself, runs the solution, then answers the tests' requests.

Why a module: this is the ``solution`` role. It lowers its limits, installs
the seccomp filter and an audit hook, runs the solution, sends one ``hello``
line (``ready`` or the solution's error) and then serves the tests process's
requests: look up a name, call a function, get an attribute, apply an
operator. Values cross back as plain data or opaque handles
(:mod:`~agentic_loop.judges.sandbox.runner.wire`); nothing it sends can carry
code, and everything it does is advisory, since the solution runs here too.

Example:
    >>> _OPS["add"](2, 3), "eq" in _OPS  # no comparisons: the tests never ask for one
    (5, False)
"""

from __future__ import annotations

import builtins
import json
import operator
import os
import sys
from collections.abc import Callable
from typing import Any

from agentic_loop.judges.sandbox.runner.audit import make_hook
from agentic_loop.judges.sandbox.runner.common import ChannelError, error_text
from agentic_loop.judges.sandbox.runner.confinement import confine, read_payload
from agentic_loop.judges.sandbox.runner.wire import decode, encode, line_reader, write_line

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
}  # no comparisons: the tests never let the solution compare (see client.Remote)


def _exception_info(cls: type[BaseException]) -> list[str]:
    return [c.__name__ for c in cls.__mro__ if getattr(builtins, c.__name__, None) is c]


def _origin(value: Any) -> dict[str, Any]:
    """Where a library module, class or function lives, so the tests can import their own.

    Only a hint: the tests process decides whether to import it (see
    :class:`~agentic_loop.judges.sandbox.runner.names.SolutionNames`); ``{}`` for
    anything the solution made itself.

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
    payload = read_payload()
    req_fd, rep_fd = payload["fds"]
    root = os.path.realpath(payload["workdir"])
    os.chdir(root)
    confine(payload, dumpable=True)
    sys.addaudithook(make_hook(root))
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
        hello["setup_error"] = error_text(err)
    try:
        sys.stdout.flush()
    except BaseException:  # noqa: BLE001, S110 - the solution may have closed stdout
        pass
    write_line(rep_fd, hello)
    read_line = line_reader(req_fd)
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
            write_line(rep_fd, reply)
        except (OSError, ValueError, TypeError):
            write_line(rep_fd, {"err": {"exc": ["TypeError", ["TypeError"]],
                                         "args": {"t": ["the reply could not be encoded"]}}})
    try:
        sys.stdout.flush()
    except BaseException:  # noqa: BLE001, S110
        pass
    os._exit(0)  # skip atexit handlers the solution may have registered
