"""A user's own verifier, defined outside the package: the checks the by-reference tests load.

Rubrics and task files name these by import path (``"user_checks:valid_invoice"``; the
suite puts ``tests/`` on ``sys.path``, as it does for ``distill_helpers``) or by the name
:func:`register_invoice_check` registers. ``CALLS`` records every call, so a test can tell
which stage ran the check.
"""

from __future__ import annotations

import re
import threading

from agentic_loop.judges import CheckResult, register_check

#: (task, output) of every call of :func:`valid_invoice`, in call order.
CALLS: list[tuple[str, str]] = []
_LOCK = threading.Lock()

INVOICE = re.compile(r"INV-\d{4}")


def valid_invoice(task: str, output: str) -> CheckResult:
    """A business rule: the answer is one invoice number, ``INV-`` and four digits."""
    with _LOCK:
        CALLS.append((task, output))
    ok = INVOICE.fullmatch(output.strip()) is not None
    return CheckResult(ok, "" if ok else f"not an invoice number: {output.strip()[:40]!r}")


def digit_count(task: str, output: str) -> int:
    """How many digits the answer has (a count check, for a target)."""
    return sum(ch.isdigit() for ch in output)


def register_invoice_check() -> None:
    """Register :func:`valid_invoice` under the name ``"valid_invoice"``."""
    register_check("valid_invoice", valid_invoice)


NOT_A_FUNCTION = 42
