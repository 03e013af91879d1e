"""What both sandboxed processes share: the refusal prefix, the size caps, the two stop signals.

Why a module: the solution's and the tests' sides, the confinement and the
wire format all name the same limits and raise the same two
``BaseException`` subclasses; defining them once keeps the two sides of the
channel agreeing. Like every part of :mod:`agentic_loop.judges.sandbox.runner`
it imports only the standard library (and earlier parts), because it runs
inside the sandbox without the package.

Example:
    >>> try:
    ...     raise ValueError("bad")
    ... except ValueError as err:
    ...     error_text(err)
    'ValueError: bad'
    >>> error_text(NotPlainData("NaN"))
    'NotPlainData: NaN'
"""

from __future__ import annotations

#: The runner's own package: the tests process never imports it (or its parents) for a name.
PACKAGE = __name__.rpartition(".")[0]
MARK = "sandbox: "  # prefix of every refusal, so the parent can name the reason
MAX_LINE = 16 * 1024 * 1024  # longest message either side accepts
MAX_DEPTH = 64  # deepest literal sent across


def error_text(err: BaseException) -> str:
    """One line: the exception and where in the solution or test it was raised."""
    import traceback  # noqa: PLC0415 - only on failures: keeps start-up fast

    text = traceback.format_exception_only(type(err), err)[-1].strip()
    # this module's own classes read as their bare names, as a __main__ program's would
    text = text.removeprefix(f"{__name__}.")
    if isinstance(err, SyntaxError):
        return f"{text} (at {err.filename} line {err.lineno})"[:500]
    frames = [
        f for f in traceback.extract_tb(err.__traceback__)
        if f.filename.startswith(("<solution>", "<test "))
    ]
    if frames:
        text += f" (at {frames[-1].filename} line {frames[-1].lineno})"
    return text[:500]


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
