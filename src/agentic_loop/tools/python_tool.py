"""A Python interpreter tool that runs the agent's code in the judges' sandbox.

Why the same sandbox: an agent that can run code could otherwise rewrite the
verdict it is judged by: the archive, the trajectory files, the evaluator's
process, the host. So each call goes through
:func:`~agentic_loop.judges.sandbox.run_python_tests` (the code is the
"solution", with one trivial test), with every layer it has: its own user,
mount, PID, network and IPC namespaces, seccomp, rlimits on time, memory,
file size and processes, size-capped tmpfs as the only writable places, and
the process group killed at the time limit. The code sees none of the host's
files but the interpreter's (read-only); nothing it writes outlives the call.
Where ``bwrap`` is unavailable the policy is ``run_python_tests``'s: a
weaker fallback (the layers it lacks are in
:func:`~agentic_loop.judges.sandbox.isolation_mode`), or, with
``strict=True``, a refusal, returned as an error result.

What the agent gets back: the printed output (its last 2000 characters), the
value of a final bare expression as an interactive session would show it
(``53 * 47`` alone prints ``2491``), then the stderr tail. Code that raises,
times out or is stopped by the sandbox gives an error result with that output
and the reason.

Example:
    >>> run = python_tool()
    >>> call = {"type": "tool_call", "name": "python", "id": "1"}
    >>> run.invoke({**call, "args": {"code": "x = 53\\nx * 47"}}).content
    '2491'
    >>> failed = run.invoke({**call, "args": {"code": "print('start')\\n1 / 0"}})
    >>> failed.status, failed.content
    ('error', 'start\\nthe code raised: ZeroDivisionError: division by zero (at <code> line 2)')
"""

from __future__ import annotations

import ast

from langchain_core.tools import StructuredTool

from agentic_loop.errors import ConfigError
from agentic_loop.judges.sandbox import run_python_tests
from agentic_loop.tools.safe import SafeTool, ToolFailed, safe_tool

__all__ = ["PYTHON_TOOL_DESCRIPTION", "echo_last_expression", "python_tool", "run_python"]

PYTHON_TOOL_DESCRIPTION = (
    "Run Python code in a sandbox and return what it prints. The value of a final bare "
    "expression is shown too, e.g. code '53 * 47' returns 2491. No files, network or "
    "installed state survive the call; use print() to see values."
)
_SHOWN = 2000  # run_python_tests keeps the last 2000 characters of stdout and of stderr
_GRACE_S = 10.0  # the sandbox kills the code itself at its limit; this only guards the host


def echo_last_expression(code: str) -> str:
    """``code`` with its final bare expression printed (``repr``), as a Python prompt would.

    Code that does not parse, or ends in a statement, is returned unchanged; a
    final expression of ``None`` (``print(...)``) prints nothing more.

    >>> print(echo_last_expression("x = 2\\nx * 21"))
    x = 2
    __value = (x * 21)
    if __value is not None: print(repr(__value))
    >>> echo_last_expression("print(1)\\ny = 2")
    'print(1)\\ny = 2'
    """
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return code
    last = tree.body[-1]
    lines = code.splitlines()
    segment = ast.get_source_segment(code, last)
    if segment is None or last.col_offset != 0 or last.lineno < 1:
        return code
    head = "\n".join(lines[:last.lineno - 1])
    tail = f"__value = ({segment})\nif __value is not None: print(repr(__value))"
    return f"{head}\n{tail}" if head else tail


def run_python(code: str, *, timeout_s: float = 5.0, memory_mb: int = 512, fsize_mb: int = 16,
               strict: bool = False) -> str:
    """Run ``code`` in the sandbox; what it printed, or :class:`ToolFailed` saying why not.

    Raises:
        ToolFailed: the code raised, timed out or was stopped by the sandbox
            (the message holds its output and the reason), or ``strict=True`` and
            a sandbox layer is missing.
    """
    if not isinstance(code, str) or not code.strip():
        raise ToolFailed("code must be non-empty Python source, e.g. 'print(53 * 47)'")
    try:
        result = run_python_tests(echo_last_expression(code), "pass", timeout_s=timeout_s,
                                  memory_mb=memory_mb, fsize_mb=fsize_mb, strict=strict)
    except ConfigError:
        raise
    except Exception as err:  # SandboxUnavailableError and start-up failures: an error result
        raise ToolFailed(f"the sandbox could not run the code: {err}") from err
    parts = [result.stdout.rstrip("\n")] if result.stdout.strip() else []
    if len(result.stdout) >= _SHOWN:
        parts.insert(0, f"[only the last {_SHOWN} characters of the output are shown]")
    if result.stderr.strip():
        parts.append("stderr: " + result.stderr.strip())
    if result.passed:
        return "\n".join(parts) if parts else "(no output: print() the values you want to see)"
    reason = (result.reason or "the code failed").replace("the solution raised", "the code raised")
    reason = reason.replace("<solution>", "<code>").replace("the solution's", "the code's")
    raise ToolFailed("\n".join([*parts, reason]))


def python_tool(*, name: str = "python", description: str = PYTHON_TOOL_DESCRIPTION,
                timeout_s: float = 5.0, memory_mb: int = 512, fsize_mb: int = 16,
                strict: bool = False) -> SafeTool:
    """A sandboxed Python interpreter tool (one argument, ``code``); see the module docstring.

    ``timeout_s``, ``memory_mb`` and ``fsize_mb`` are each call's limits, as in
    :func:`~agentic_loop.judges.sandbox.run_python_tests`; ``strict=True``
    refuses to run (an error result) on a machine lacking a sandbox layer.

    Raises:
        ConfigError: for limits ``run_python_tests`` would refuse.
    """
    if not (isinstance(timeout_s, (int, float)) and not isinstance(timeout_s, bool)
            and 0 < timeout_s <= 600):
        raise ConfigError(f"timeout_s must be in (0, 600] seconds, got {timeout_s!r}")
    if isinstance(memory_mb, bool) or not isinstance(memory_mb, int) or memory_mb < 64:
        raise ConfigError(f"memory_mb must be an int >= 64 (Python needs ~30 MB), "
                          f"got {memory_mb!r}")
    if isinstance(fsize_mb, bool) or not isinstance(fsize_mb, int) or fsize_mb < 1:
        raise ConfigError(f"fsize_mb must be an int >= 1, got {fsize_mb!r}")

    def python(code: str) -> str:
        return run_python(code, timeout_s=timeout_s, memory_mb=memory_mb, fsize_mb=fsize_mb,
                          strict=strict)

    inner = StructuredTool.from_function(python, name=name, description=description)
    return safe_tool(inner, timeout_s=timeout_s + _GRACE_S)
