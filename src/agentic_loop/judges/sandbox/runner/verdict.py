"""The process that decides: it runs the test sources and writes the verdict.

Why a module: this is the ``tests`` role. It never runs solution code: the
test sources run here against their own standard library and third-party
modules, and only the solution's own names are fetched from the solution
process (:mod:`~agentic_loop.judges.sandbox.runner.names`). It writes the
verdict on a pipe only the parent reads; what it rests on is that this
process, which only parses JSON from the solution, decides.

Example:
    >>> namespace = _TestGlobals(__builtins__=builtins)
    >>> exec("total = len([1, 2]) + sum([3])", namespace)
    >>> namespace["total"]
    5
"""

from __future__ import annotations

import builtins
import os
import sys
from typing import Any

from agentic_loop.judges.sandbox.runner.client import Client
from agentic_loop.judges.sandbox.runner.common import ChannelError, NotPlainData, error_text
from agentic_loop.judges.sandbox.runner.confinement import confine, read_payload
from agentic_loop.judges.sandbox.runner.names import SolutionNames
from agentic_loop.judges.sandbox.runner.wire import write_line


class _TestGlobals(dict[str, Any]):
    """The tests' namespace: their own names, then builtins, then the solution's names.

    Builtins come before the solution's names so that a solution defining
    ``len`` or ``all`` cannot change what the tests' own checks compute;
    :class:`SolutionNames` says how the rest resolve. Plain data is copied
    in on first use; the solution's objects stay behind handles.
    """

    names: SolutionNames

    def __missing__(self, name: str) -> Any:
        if hasattr(builtins, name):
            raise KeyError(name)
        try:
            value = self.names.resolve(name)
        except NameError:
            raise KeyError(name) from None
        self[name] = value
        return value


def _case(err: BaseException | None, client: Client) -> dict[str, Any]:
    """One test's outcome; a refused value or a broken channel fails it even if it was caught."""
    case: dict[str, Any] = {"passed": err is None,
                            "error": None if err is None else error_text(err)}
    if client.broken:
        case = {"passed": False, "error": f"the channel broke: {client.broken}"}
    elif client.refused is not None and not isinstance(err, NotPlainData):
        case = {"passed": False, "error": f"NotPlainData: {client.refused} (the test caught it)"}
    client.refused = None
    return case


def run_tests() -> None:
    """Wait for the solution's hello, run every test here, write the verdict."""
    payload = read_payload()
    req_fd, rep_fd, verdict_fd = payload["fds"]
    os.chdir(os.path.realpath(payload["workdir"]))
    confine(payload, dumpable=False)
    client = Client(req_fd, rep_fd)
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
    namespace.names = SolutionNames(client, code if isinstance(code, str) else None)
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
    write_line(verdict_fd, outcome)
    os._exit(0)
