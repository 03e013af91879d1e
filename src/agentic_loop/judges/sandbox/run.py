"""Run untrusted Python against tests, isolated by the OS, with a verdict it cannot write.

Generated code is a verifier's input, and the loop trains on what verifiers
accept: code that can fool its check teaches the next model to fool checks.
So :func:`run_python_tests` must neither let the code touch the machine nor
let it decide its own verdict. Each call starts **two** sandboxed processes:

* the **solution process** runs ``code`` and then answers requests: look up a
  name, call a function, get an attribute, apply an operator;
* the **tests process** runs the tests. It never executes solution code: it
  imports its own standard library and third-party modules (a name the
  solution binds by ``import`` is imported here too), only the solution's own
  names are looked up in the solution process, calls are forwarded there, and
  what comes back is parsed as *plain data* (numbers, strings, bytes, ``None``,
  containers of them, fractions, decimals, dates, numeric numpy arrays) or
  stays an opaque handle to an object in the solution process. The tests
  process writes the verdict to a file descriptor only the parent holds
  (:mod:`~agentic_loop.judges.sandbox.runner`'s docstring has the exact rules).

What is guaranteed (on a machine with every layer of :data:`ALL_LAYERS`;
``strict=True`` refuses to run without them):

* **The verdict is the tests'.** A test passes only if it runs to the end in
  the tests process. The solution cannot reach that process (its own PID and
  mount namespaces, a different sandbox), cannot write the verdict, cannot end
  the tests early (``sys.exit``, ``os._exit``, a crash or a hang fail every
  test not yet passed), cannot rebind a test's builtins (``len``, ``all``,
  ``AssertionError``: builtins come before the solution's names), cannot
  patch a library the tests use (``math.isclose``, ``re.search``), and cannot
  pass back an object with a lying ``__eq__``: comparing a solution object
  fails the test, a subclass of a plain type arrives as the plain type, and a
  NaN anywhere in a value fails the test that received it. Calls
  with expected values (``assert f(2, 3) == 5``) are therefore compared in
  the tests process on the value ``f`` returned; the solution never sees ``5``.
* **The machine is out of reach** (see
  :mod:`~agentic_loop.judges.sandbox.isolation`): a user namespace with uid
  65534, which is an unprivileged host uid even when the caller is root
  (:mod:`~agentic_loop.judges.sandbox.launch`), and no capabilities; a mount
  namespace with a read-only view of the interpreter, no ``/sys``, an empty
  read-only ``/proc/sys``, and size-capped tmpfs as the only writable places
  (``/sandbox``, ``/tmp``, ``/dev/shm``); its own ``/proc`` and PID namespace
  (no host process, no host environment); no network (an empty network
  namespace and seccomp refusing non-Unix sockets); ``no_new_privs``; a
  seccomp filter refusing new processes, programs, namespaces, mounts,
  ``ptrace``, kernel interfaces and memory no limit counts (memfd, System V
  IPC; :mod:`~agentic_loop.judges.sandbox.seccomp`); ``memory_mb`` bounding
  the address space *and* the tmpfs files together
  (:func:`~agentic_loop.judges.sandbox.bwrap.plan_memory`); rlimits on CPU,
  file size (``fsize_mb``), open files, and processes and threads together
  (64, enforced because the uid is not root); death with the parent; and at
  the wall-clock limit the process group of both sandboxes is killed. Each
  layer is listed in ``layers`` only if a probe saw it hold.

What is **not** guaranteed:

* that a passing solution is *correct*: it may return memorised values, or
  detect the calls the tests make. The verdict is exactly as strong as the
  tests (which are trusted: a test that swallows every exception, or checks
  nothing, passes);
* a check is as strong as what it asks: ``assert f() != 6`` passes any other
  wrong answer; the ``__bool__``, ``__len__``, ``__str__`` and ``in`` of a
  solution object are its own word, and a name a test uses without importing
  it is the solution's (import the helpers a check relies on);
* only literals and the solution's own objects cross: passing a lambda or a
  test-side object to a solution function fails that test; module-level data
  is copied into the tests' namespace the first time a test reads it, and a
  solution that defines a builtin's name (``sum``) is shadowed by the builtin;
* without the namespace layers (``mode == "fallback"``, e.g. a kernel without
  user namespaces) the solution runs as the caller's user (a fresh
  unprivileged uid for a root caller, where the interpreter is readable by
  one; else root, reported) and could reach the tests process through
  ``/proc``; the result's ``layers`` say what held.

An infinite loop, a fork bomb, a write outside the sandbox, a memory hog or a
network call ends as a *failed* :class:`SandboxResult` whose ``reason`` says
why (an advisory audit hook in the solution process turns most attempts into
a readable refusal before the OS layers stop them). Tests run in order in one
namespace; a single timeout covers the run.

Example:
    >>> r = run_python_tests("def add(a, b):\\n    return a + b",
    ...                      ["assert add(1, 2) == 3", "assert add(-1, 1) == 1"])
    >>> r.passed, r.n_passed, r.n_tests
    (False, 1, 2)
    >>> r.reason.startswith("test 2 failed: AssertionError")
    True
    >>> forged = "import os\\nos.write(1, b'all tests passed')\\nos._exit(0)"
    >>> run_python_tests(forged, "assert True").reason
    "the solution's process exited with code 0 before answering the tests"
"""

from __future__ import annotations

import json
import math
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from agentic_loop.errors import ConfigError
from agentic_loop.judges.sandbox.bwrap import MemoryPlan, plan_memory
from agentic_loop.judges.sandbox.isolation import (
    ALL_LAYERS,
    SANDBOX_DIR,
    Isolation,
    host_env,
    isolation,
    runner_source,
    sandbox_layers,
)
from agentic_loop.judges.sandbox.launch import SandboxUnavailableError, kill_sandbox
from agentic_loop.judges.sandbox.seccomp import seccomp_filter

__all__ = [
    "ALL_LAYERS",
    "SandboxResult",
    "SandboxUnavailableError",
    "TestCaseResult",
    "isolation_mode",
    "run_python_tests",
    "sandbox_layers",
]

_MARK = "sandbox: "  # the runner prefixes every refusal with it
_TAIL = 2000  # characters of stdout/stderr kept in a result
_VERDICT_MAX = 64 * 1024 * 1024
_GRACE_S = 1.0  # how long the solution may take to flush and exit once the tests are done


class TestCaseResult(BaseModel):
    """One test's outcome: ``error`` is the exception line when it failed."""

    __test__ = False  # not a pytest test class despite its name

    index: int
    passed: bool
    error: str | None = None


class SandboxResult(BaseModel):
    """What a sandboxed run did; ``reason`` says why it failed (``None`` when it passed).

    ``exit_code`` is the solution process's; ``layers`` are the isolation
    layers the run had (see :data:`ALL_LAYERS`).
    """

    passed: bool
    n_tests: int
    n_passed: int
    reason: str | None = None
    cases: list[TestCaseResult] = Field(default_factory=list)
    timed_out: bool = False
    exit_code: int | None = None
    duration_s: float = 0.0
    isolation: str = ""
    layers: list[str] = Field(default_factory=list)
    stdout: str = ""
    stderr: str = ""

    @property
    def pass_rate(self) -> float:
        """Share of tests that passed, in ``[0, 1]``."""
        return self.n_passed / self.n_tests if self.n_tests else 0.0


def isolation_mode() -> str:
    """How runs are isolated on this machine, for reports and logs.

    >>> isolation_mode().startswith(("bwrap: ", "fallback: "))
    True
    """
    return isolation().describe()


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - 4 * _TAIL))
            return fh.read().decode("utf-8", "replace")[-_TAIL:]
    except OSError:
        return ""


def _classify(error: str, memory_mb: int) -> str:
    if error.startswith("MemoryError"):
        return f"memory limit of {memory_mb} MB exceeded ({error})"
    if _MARK in error:
        return "blocked by the sandbox: " + error.split(_MARK, 1)[1]
    return error


def _signal_reason(code: int | None, memory_mb: int) -> str | None:
    if code is None:
        return None
    if code < 0:
        signum = -code
    elif code > 128:  # bwrap reports a child killed by a signal as 128 + signal
        signum = code - 128
    else:
        return None
    if signum == signal.SIGXCPU:
        return "CPU time limit exceeded (killed by SIGXCPU)"
    if signum == signal.SIGKILL:
        return f"killed by SIGKILL (likely the memory limit of {memory_mb} MB)"
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    return f"crashed: killed by {name}"


def _check_args(code: Any, tests: Any, timeout_s: Any, memory_mb: Any, fsize_mb: Any,
                strict: Any) -> list[str]:
    if not isinstance(code, str):
        raise ConfigError(f"code must be a string of Python source, got {type(code).__name__}")
    test_list = [tests] if isinstance(tests, str) else list(tests)
    if not test_list or not all(isinstance(t, str) and t.strip() for t in test_list):
        raise ConfigError(
            f"tests must be a non-empty string or a non-empty list of non-empty strings "
            f"(e.g. ['assert f(1) == 2']), got {tests!r}"
        )
    if not (isinstance(timeout_s, (int, float)) and 0 < timeout_s <= 600):
        raise ConfigError(f"timeout_s must be in (0, 600] seconds, got {timeout_s!r}")
    if not (isinstance(memory_mb, int) and memory_mb >= 64):
        raise ConfigError(
            f"memory_mb must be an int >= 64 (Python needs ~30 MB), got {memory_mb!r}"
        )
    if not (isinstance(fsize_mb, int) and fsize_mb >= 1):
        raise ConfigError(f"fsize_mb must be an int >= 1, got {fsize_mb!r}")
    if not isinstance(strict, bool):
        raise ConfigError(f"strict must be True or False, got {strict!r}")
    return test_list


def _wait(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait up to ``timeout`` s for ``proc``; True when it ended (and is reaped).

    A pidfd wakes us the moment the process exits; ``Popen.wait(timeout)``
    polls with sleeps of up to 50 ms, which would dominate a 50 ms run.
    """
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=max(timeout, 0.0))
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        ready = poller.poll(max(0, math.ceil(timeout * 1000)))
    finally:
        os.close(fd)
    if ready:
        proc.wait()
        return True
    return proc.poll() is not None


def _spawn(role: str, iso: Isolation, payload: dict[str, Any], fds: tuple[int, ...],
           base: Path, memory: MemoryPlan) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """Start one sandboxed runner; its stdout and stderr go to files only the parent reads."""
    argv = [sys.executable, "-I", "-c", runner_source(), role]
    launcher = iso.launcher
    owned: Path | None = None
    if iso.mode == "bwrap":
        workdir, cwd = SANDBOX_DIR, base
    else:
        owned = cwd = base / f"{role}-work"
        cwd.mkdir()
        workdir = str(cwd)
    out_path, err_path = base / f"{role}.out", base / f"{role}.err"
    with tempfile.TemporaryFile() as stdin, out_path.open("wb") as out, \
            err_path.open("wb") as err:
        stdin.write(json.dumps({**payload, "workdir": workdir, "fds": list(fds),
                                "drop_to": launcher.runner_uid,
                                "mounts": memory.mounts() if iso.mode == "bwrap" else None,
                                }).encode())
        stdin.seek(0)
        proc = launcher.start(argv, memory=memory, cwd=cwd, env=host_env(workdir), stdin=stdin,
                              stdout=out, stderr=err, pass_fds=fds, owned_dir=owned)
    return proc, out_path, err_path


def run_python_tests(
    code: str,
    tests: str | Sequence[str],
    *,
    timeout_s: float = 5.0,
    memory_mb: int = 512,
    fsize_mb: int = 16,
    strict: bool = False,
) -> SandboxResult:
    """Run ``code`` in one sandbox and ``tests`` against it in another; never raises for the code.

    Args:
        code: the solution's Python source (use
            :func:`~agentic_loop.judges.checks.text_measures.extract_code` on a chat reply).
        tests: one test (a string) or several; each is Python source run in
            order in one namespace, failing by raising (``assert``). Names it
            does not define are the solution's (see the module docstring).
        timeout_s: wall-clock limit for the whole run; the CPU limit follows it.
        memory_mb: the most each sandboxed process can hold in memory: its
            address space plus the files in its tmpfs mounts.
        fsize_mb: largest file a process may write (stdout and stderr
            included); the writable tmpfs mounts hold up to five times that,
            and never more than a quarter of ``memory_mb``.
        strict: refuse (:class:`SandboxUnavailableError`) unless every layer
            of :data:`ALL_LAYERS` is in force on this machine.

    Raises:
        ConfigError: for malformed arguments.
        SandboxUnavailableError: with ``strict=True`` when a layer is missing,
            or when the sandbox itself cannot start.

    >>> run_python_tests("while True: pass", "assert True", timeout_s=0.5).reason
    'timed out after 0.5 s (process group killed)'
    """
    test_list = _check_args(code, tests, timeout_s, memory_mb, fsize_mb, strict)
    iso = isolation()
    if strict and iso.missing:
        raise SandboxUnavailableError(
            f"strict=True but this machine lacks the sandbox layers {', '.join(iso.missing)}"
            f"{f' ({iso.note})' if iso.note else ''}; enable unprivileged user namespaces "
            f"or pass strict=False to accept the weaker isolation"
        )
    n = len(test_list)
    filt = seccomp_filter()
    memory = plan_memory(memory_mb, fsize_mb)
    limits = {"memory_mb": memory.address_mb, "cpu_s": math.ceil(timeout_s) + 1,
              "fsize_mb": fsize_mb, "nproc": 64, "seccomp": filt.hex() if filt else None}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="agentic-loop-sandbox-",
                                     ignore_cleanup_errors=True) as tmp, \
            tempfile.TemporaryFile() as verdict_file:
        base = Path(tmp)
        req_r, req_w = os.pipe()  # tests -> solution
        rep_r, rep_w = os.pipe()  # solution -> tests
        verdict_fd = verdict_file.fileno()
        try:
            solution, s_out, s_err = _spawn("solution", iso, {**limits, "code": code},
                                            (req_r, rep_w), base, memory)
            try:
                tester, t_out, t_err = _spawn("tests", iso, {**limits, "tests": test_list,
                                                           "code": code},
                                              (req_w, rep_r, verdict_fd), base, memory)
            except BaseException:
                kill_sandbox(solution)
                solution.wait()
                raise
        finally:
            for fd in (req_r, req_w, rep_r, rep_w):
                os.close(fd)
        timed_out = not _wait(tester, timeout_s - (time.monotonic() - started))
        if timed_out:
            kill_sandbox(tester)
            tester.wait()
        killed_solution = not _wait(solution, 0 if timed_out else _GRACE_S)
        kill_sandbox(solution)  # nothing it started survives the run
        s_code = solution.wait()
        duration = time.monotonic() - started
        verdict_file.seek(0)
        raw = verdict_file.read(_VERDICT_MAX)
        stdout = (_tail(s_out) + _tail(t_out))[-_TAIL:]
        t_stderr = _tail(t_err)
        stderr = (_tail(s_err) + t_stderr)[-_TAIL:]
        t_code = tester.returncode
    common: dict[str, Any] = {
        "n_tests": n, "timed_out": timed_out, "exit_code": None if killed_solution else s_code,
        "duration_s": round(duration, 3), "isolation": iso.describe(),
        "layers": list(iso.layers), "stdout": stdout, "stderr": stderr,
    }
    failed = [TestCaseResult(index=i, passed=False, error="not run") for i in range(n)]
    if timed_out:
        late = f"timed out after {timeout_s:g} s (process group killed)"
        return SandboxResult(passed=False, n_passed=0, reason=late, cases=failed, **common)
    outcome: dict[str, Any] = {}
    raw_cases: list[dict[str, Any]] = []
    try:
        outcome = json.loads(raw)
        raw_cases = outcome["cases"]
        complete = len(raw_cases) == n
    except (ValueError, KeyError, TypeError):
        complete = False
    if not complete:
        crashed = _signal_reason(t_code, memory_mb) or (
            f"the tests' process exited with code {t_code} before reporting results"
        )
        tail = t_stderr.strip()
        if tail:
            crashed += f"; stderr: {tail.splitlines()[-1][:300]}"
        return SandboxResult(passed=False, n_passed=0, reason=crashed, cases=failed, **common)
    cases = [
        TestCaseResult(index=i, passed=c.get("passed") is True, error=c.get("error"))
        for i, c in enumerate(raw_cases)
    ]
    n_passed = sum(c.passed for c in cases)
    reason: str | None = None
    if outcome.get("setup_error"):
        reason = "the solution raised: " + _classify(outcome["setup_error"], memory_mb)
    elif outcome.get("channel"):
        reason = _channel_reason(str(outcome["channel"]), None if killed_solution else s_code,
                                 memory_mb)
    elif n_passed < n:
        first = next(c for c in cases if not c.passed)
        reason = f"test {first.index + 1} failed: " + _classify(first.error or "", memory_mb)
    return SandboxResult(
        passed=reason is None, n_passed=n_passed, reason=reason, cases=cases, **common
    )


def _channel_reason(channel: str, s_code: int | None, memory_mb: int) -> str:
    """Why the solution stopped answering: its exit, its signal, or a broken message."""
    by_signal = _signal_reason(s_code, memory_mb)
    if by_signal:
        return f"the solution's process stopped: {by_signal}"
    if s_code is not None and "ended" in channel:
        return f"the solution's process exited with code {s_code} before answering the tests"
    return f"the solution's process broke the protocol: {channel}"
