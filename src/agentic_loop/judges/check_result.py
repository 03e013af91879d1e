"""The small types a check speaks in: its value, its kind and the result it may explain.

Kept apart from :mod:`agentic_loop.judges.features` so that the constraint
builders (:mod:`agentic_loop.judges.checks`), which return checks, and the
:class:`~agentic_loop.judges.features.Feature` that wraps them both import
these without importing each other (a feature rebuilds a saved constraint
through the builders; the builders never need a feature).

Example:
    >>> CheckResult(3, "3 words")
    CheckResult(value=3, detail='3 words')
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = ["CheckFn", "CheckResult", "FeatureKind", "FeatureValue"]

FeatureKind = Literal["bool", "count"]
FeatureValue = bool | int


@dataclass(frozen=True)
class CheckResult:
    """What a check may return when it has more to say than the bare value.

    ``detail`` explains the value (``"found: our, we"``) and ends up in the
    evaluation's explanation and in the hints given to a refine step.

    >>> CheckResult(False, "found: we").value
    False
    """

    value: FeatureValue
    detail: str = ""


CheckFn = Callable[[str, str], bool | int | CheckResult]
