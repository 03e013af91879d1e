"""The sandbox: tested code runs isolated from the host, and a separate process decides the verdict.

Why a package: isolation has several jobs, one module each. :mod:`.run`
runs a solution against its tests (the public verb, :func:`run_python_tests`);
:mod:`.isolation` probes which layers this machine grants and reports only
what it verified; :mod:`.bwrap` builds the bubblewrap command and splits the
memory budget; :mod:`.launch` starts a sandboxed process (as an unprivileged
host uid when the caller is root) and kills it with everything inside;
:mod:`.seccomp` writes the system-call filter; :mod:`.runner` holds the parts
of the child program, which its bootstrap embeds and hands to ``python -I -c``
inside the sandbox (the library only reads their source).

Example:
    >>> from agentic_loop.judges.sandbox import run_python_tests
    >>> run_python_tests("def add(a, b):\\n    return a + b", ["assert add(2, 3) == 5"]).passed
    True
"""

from agentic_loop.judges.sandbox.run import (
    ALL_LAYERS,
    SandboxResult,
    SandboxUnavailableError,
    TestCaseResult,
    isolation_mode,
    run_python_tests,
    sandbox_layers,
)

__all__ = ["ALL_LAYERS", "SandboxResult", "SandboxUnavailableError", "TestCaseResult",
           "isolation_mode", "run_python_tests", "sandbox_layers"]
