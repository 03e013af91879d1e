"""Per-version request numbers at the serving front: what a canary ramp decides on.

Why in memory, bounded: the front sees every request, and the flywheel
service asks it (``GET /agentic-loop/arms?since=<unix>``) for each arm's
counts and latencies since its stage began. Keeping the last
``keep`` (50,000) requests per version bounds the memory of a server that
runs for months, and is far more than a ramp stage needs; the totals
(``since=None``) keep counting past it.

An error is an answer with status >= 500, or no answer from the backend
(recorded as 502).

Example:
    >>> arms = ArmObservations()
    >>> arms.record("v1", "/v1/chat/completions", 200, 0.25)
    >>> arms.record("v2", "/v1/chat/completions", 502, 0.01)
    >>> snap = arms.snapshot()
    >>> snap["v1"], snap["v2"]["errors"]
    ({'requests': 1, 'errors': 0, 'error_flags': [False], 'latencies_s': [0.25]}, 1)
    >>> arms.snapshot(since=time.time() + 60)
    {}
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, NamedTuple

__all__ = ["ArmObservations", "is_error"]


class _Ended(NamedTuple):
    at: float  #: unix time the request ended
    route: str
    status: int
    latency_s: float


def is_error(status: int) -> bool:
    """An answer that counts as the server's error: status >= 500."""
    return status >= 500


class ArmObservations:
    """Thread-safe request outcomes per version (see the module doc)."""

    def __init__(self, keep: int = 50_000) -> None:
        self.keep = keep
        self._lock = threading.Lock()
        self._ended: dict[str, deque[_Ended]] = {}
        self._totals: dict[str, list[int]] = {}  # version: [requests, errors]

    def record(self, version: str, route: str, status: int, latency_s: float) -> None:
        """One request to ``version`` ended now with ``status`` after ``latency_s`` seconds."""
        ended = _Ended(time.time(), route, int(status), float(latency_s))
        with self._lock:
            self._ended.setdefault(version, deque(maxlen=self.keep)).append(ended)
            totals = self._totals.setdefault(version, [0, 0])
            totals[0] += 1
            totals[1] += is_error(ended.status)

    def snapshot(self, since: float | None = None) -> dict[str, dict[str, Any]]:
        """``{version: {"requests", "errors", "error_flags", "latencies_s"}}`` of the requests
        that ended at or after ``since`` (unix time; None: all, flags and latencies of the last
        ``keep`` only); flags and latencies in the order the requests ended."""
        with self._lock:
            kept = {version: list(ended) for version, ended in self._ended.items()}
            totals = {version: list(counts) for version, counts in self._totals.items()}
        out: dict[str, dict[str, Any]] = {}
        for version, ended in kept.items():
            window = ended if since is None else [e for e in ended if e.at >= since]
            if not window:
                continue
            requests, errors = (totals[version] if since is None else
                                (len(window), sum(is_error(e.status) for e in window)))
            out[version] = {"requests": requests, "errors": errors,
                            "error_flags": [is_error(e.status) for e in window],
                            "latencies_s": [e.latency_s for e in window]}
        return out
