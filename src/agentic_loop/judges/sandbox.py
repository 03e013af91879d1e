"""Run untrusted Python against tests in a bounded child process.

Generated code is a verifier's input, so running it must never hang the loop,
eat the machine or touch anything outside a scratch directory. Each call to
:func:`run_python_tests` starts a fresh ``python -I`` in its own temporary
directory and session, with:

* a **wall-clock timeout**: past it the whole process group is killed;
* **rlimits**: address space (``memory_mb``), CPU seconds, file size
  (``fsize_mb``, also caps what it prints), open files, no core dumps, and
  no new processes for non-root users;
* **no network**: a fresh network namespace (``unshare --net``) where the
  system allows one (as root, or through an unprivileged user namespace),
  always backed by an audit hook refusing non-Unix sockets;
* **its own PID namespace** where allowed, so nothing it starts survives it;
* an **audit hook** refusing process creation, signals, native ``ctypes``
  calls, and any write, delete, rename, chmod or ``chdir`` outside its
  working directory.

Reading files stays allowed (the solution must be able to import the
standard library). An infinite loop, a fork bomb, a write outside its
directory, a memory hog or
a network call ends as a *failed* :class:`SandboxResult` whose ``reason``
says which limit it hit. The audit hook guards against accidents and careless
code; it is not a security boundary against code written to escape it (that
needs a container or VM). Tests run in order in one namespace after the
solution; a single timeout covers them all.

Example:
    >>> r = run_python_tests("def add(a, b):\\n    return a + b",
    ...                      ["assert add(1, 2) == 3", "assert add(-1, 1) == 1"])
    >>> r.passed, r.n_passed, r.n_tests
    (False, 1, 2)
    >>> r.reason.startswith("test 2 failed: AssertionError")
    True
"""

from __future__ import annotations

import functools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

__all__ = ["SandboxResult", "TestCaseResult", "isolation_mode", "run_python_tests"]

_MARK = "sandbox: "  # the runner prefixes every refusal with it
_TAIL = 2000  # characters of stdout/stderr kept in a result


class TestCaseResult(BaseModel):
    """One test's outcome: ``error`` is the exception line when it failed."""

    __test__ = False  # not a pytest test class despite its name

    index: int
    passed: bool
    error: str | None = None


class SandboxResult(BaseModel):
    """What a sandboxed run did; ``reason`` says why it failed (``None`` when it passed)."""

    passed: bool
    n_tests: int
    n_passed: int
    reason: str | None = None
    cases: list[TestCaseResult] = Field(default_factory=list)
    timed_out: bool = False
    exit_code: int | None = None
    duration_s: float = 0.0
    isolation: str = ""
    stdout: str = ""
    stderr: str = ""

    @property
    def pass_rate(self) -> float:
        """Share of tests that passed, in ``[0, 1]``."""
        return self.n_passed / self.n_tests if self.n_tests else 0.0


@functools.cache
def _runner_source() -> str:
    return Path(__file__).with_name("_sandbox_runner.py").read_text(encoding="utf-8")


@functools.cache
def _namespace_prefix() -> tuple[str, ...]:
    """The ``unshare`` command line this system accepts, or ``()`` when none works."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return ()
    base = (unshare, "--net", "--pid", "--fork", "--kill-child")
    for prefix in (base, (*base[:1], "--user", "--map-root-user", *base[1:])):
        try:
            done = subprocess.run(
                [*prefix, "true"], capture_output=True, timeout=10, check=False
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0:
            return prefix
    return ()


def isolation_mode() -> str:
    """How runs are isolated on this system, for reports and logs.

    >>> isolation_mode() in ("namespaces (net, pid) + hooks", "user namespaces (net, pid) + hooks",
    ...                      "hooks only (no network namespace available)")
    True
    """
    prefix = _namespace_prefix()
    if not prefix:
        return "hooks only (no network namespace available)"
    return ("user namespaces" if "--user" in prefix else "namespaces") + " (net, pid) + hooks"


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


def _signal_reason(code: int, memory_mb: int, via_unshare: bool) -> str | None:
    if code < 0:
        signum = -code
    elif via_unshare and code > 128:
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


def _check_args(code: str, tests: Sequence[str], timeout_s: float, memory_mb: int) -> list[str]:
    if not isinstance(code, str):
        raise TypeError(f"code must be a string of Python source, got {type(code).__name__}.")
    test_list = [tests] if isinstance(tests, str) else list(tests)
    if not test_list or not all(isinstance(t, str) and t.strip() for t in test_list):
        raise ValueError(
            f"tests must be a non-empty string or a non-empty list of non-empty strings "
            f"(e.g. ['assert f(1) == 2']), got {tests!r}."
        )
    if not (isinstance(timeout_s, (int, float)) and 0 < timeout_s <= 600):
        raise ValueError(f"timeout_s must be in (0, 600] seconds, got {timeout_s!r}.")
    if not (isinstance(memory_mb, int) and memory_mb >= 64):
        raise ValueError(f"memory_mb must be an int >= 64 (Python needs ~30 MB), got {memory_mb!r}.")
    return test_list


def run_python_tests(
    code: str,
    tests: str | Sequence[str],
    *,
    timeout_s: float = 5.0,
    memory_mb: int = 512,
    fsize_mb: int = 16,
) -> SandboxResult:
    """Run ``code`` then each test in a sandboxed child; never raises for what the code does.

    Args:
        code: the solution's Python source (use
            :func:`~agentic_loop.judges.checks.extract_code` on a chat reply).
        tests: one test (a string) or several; each is Python source run after
            the solution in the same namespace, failing by raising (``assert``).
        timeout_s: wall-clock limit for the whole run; the CPU limit follows it.
        memory_mb: address-space limit of the child.
        fsize_mb: largest file the child may write (stdout and stderr included).

    Raises ``TypeError`` / ``ValueError`` only for malformed arguments.

    >>> run_python_tests("while True: pass", "assert True", timeout_s=0.5).reason
    'timed out after 0.5 s (process group killed)'
    """
    test_list = _check_args(code, tests, timeout_s, memory_mb)
    prefix = _namespace_prefix()
    n = len(test_list)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="agentic-loop-sandbox-", ignore_cleanup_errors=True) as tmp:
        base = Path(tmp)
        workdir = base / "work"
        workdir.mkdir()
        payload_path, result_path = base / "payload.json", base / "result.json"
        payload_path.write_text(
            json.dumps({
                "code": code, "tests": test_list, "workdir": str(workdir),
                "result_path": str(result_path), "memory_mb": memory_mb,
                "cpu_s": math.ceil(timeout_s) + 1, "fsize_mb": fsize_mb,
            }),
            encoding="utf-8",
        )
        env = {
            "PATH": os.defpath, "HOME": str(workdir), "TMPDIR": str(workdir), "LANG": "C.UTF-8",
            "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        }
        out_path, err_path = base / "stdout.txt", base / "stderr.txt"
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = subprocess.Popen(
                [*prefix, sys.executable, "-I", "-c", _runner_source(), str(payload_path)],
                cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True, close_fds=True,
            )
            timed_out = False
            try:
                code_ = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                code_ = proc.wait()
        duration = time.monotonic() - started
        common = {
            "n_tests": n, "timed_out": timed_out, "exit_code": code_,
            "duration_s": round(duration, 3), "isolation": isolation_mode(),
            "stdout": _tail(out_path), "stderr": _tail(err_path),
        }
        failed = [TestCaseResult(index=i, passed=False, error="not run") for i in range(n)]
        if timed_out:
            reason = f"timed out after {timeout_s:g} s (process group killed)"
            return SandboxResult(passed=False, n_passed=0, reason=reason, cases=failed, **common)
        try:
            outcome = json.loads(result_path.read_text(encoding="utf-8"))
            raw_cases = outcome["cases"]
        except (OSError, ValueError, KeyError, TypeError):
            reason = _signal_reason(code_, memory_mb, bool(prefix)) or (
                f"the process exited with code {code_} before reporting results"
            )
            if common["stderr"].strip():
                reason += f"; stderr: {common['stderr'].strip().splitlines()[-1][:300]}"
            return SandboxResult(passed=False, n_passed=0, reason=reason, cases=failed, **common)

    cases = [
        TestCaseResult(index=i, passed=bool(c.get("passed")), error=c.get("error"))
        for i, c in enumerate(raw_cases[:n])
    ]
    n_passed = sum(c.passed for c in cases)
    reason: str | None = None
    if outcome.get("setup_error"):
        reason = "the solution raised: " + _classify(outcome["setup_error"], memory_mb)
    elif n_passed < n:
        first = next(c for c in cases if not c.passed)
        reason = f"test {first.index + 1} failed: " + _classify(first.error or "", memory_mb)
    return SandboxResult(
        passed=reason is None, n_passed=n_passed, reason=reason, cases=cases, **common
    )
