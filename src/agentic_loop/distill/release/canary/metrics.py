"""``/metrics`` of the serving front, in Prometheus's text format, per version and route.

Why its own ``CollectorRegistry``: the global one is shared by everything in
the process (and by every front a test starts); one registry per front keeps
its numbers its own. ``prometheus_client`` (the ``serve`` extra) is imported
when a front is made, not with the package. Routes are request paths; past ``max_routes`` distinct
paths new ones count as ``"other"``, so a client probing random paths cannot
grow the series without bound.

Example:
    >>> from prometheus_client.parser import text_string_to_metric_families
    >>> metrics = FrontMetrics()
    >>> metrics.observe("v1", "/v1/chat/completions", 200, 0.2)
    >>> metrics.observe("v2", "/v1/chat/completions", 502, 0.1)
    >>> metrics.set_fraction(0.25)
    >>> families = {f.name: f for f in text_string_to_metric_families(metrics.render().decode())}
    >>> [(s.labels["version"], s.labels["code"], s.value)
    ...  for s in families["agentic_loop_requests"].samples if s.name.endswith("_total")]
    [('v1', '200', 1.0), ('v2', '502', 1.0)]
    >>> families["agentic_loop_canary_fraction"].samples[0].value
    0.25
"""

from __future__ import annotations

import threading

from agentic_loop.distill.release.canary.observations import is_error

__all__ = ["CONTENT_TYPE", "FrontMetrics"]

#: The media type of Prometheus's text format 0.0.4 (what ``GET /metrics`` answers).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Latency buckets (seconds): a cached short answer up to a long generation on CPU.
BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class FrontMetrics:
    """The front's counters, histogram and canary gauge (see the module doc)."""

    def __init__(self, max_routes: int = 64) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry(auto_describe=True)
        self.max_routes = max_routes
        self._routes: set[str] = set()
        self._lock = threading.Lock()
        self.requests = Counter("agentic_loop_requests", "Requests through the front that ended",
                                ["version", "route", "code"], registry=self.registry)
        self.errors = Counter("agentic_loop_request_errors",
                              "Requests that ended with status >= 500 or no answer",
                              ["version", "route"], registry=self.registry)
        self.seconds = Histogram("agentic_loop_request_seconds",
                                 "Seconds from a request's arrival to the end of its answer",
                                 ["version", "route"], buckets=BUCKETS, registry=self.registry)
        self.fraction = Gauge("agentic_loop_canary_fraction",
                              "Share of user keys routed (canary) or mirrored (shadow) to the "
                              "candidate; 0 without a canary", registry=self.registry)

    def _route(self, route: str) -> str:
        with self._lock:
            if route in self._routes:
                return route
            if len(self._routes) < self.max_routes:
                self._routes.add(route)
                return route
        return "other"

    def observe(self, version: str, route: str, status: int, latency_s: float) -> None:
        """Count one request that ended."""
        route = self._route(route)
        self.requests.labels(version, route, str(status)).inc()
        if is_error(status):
            self.errors.labels(version, route).inc()
        self.seconds.labels(version, route).observe(max(0.0, latency_s))

    def set_fraction(self, fraction: float) -> None:
        """The canary's share now (0: no canary)."""
        self.fraction.set(fraction)

    def render(self) -> bytes:
        """The text format ``GET /metrics`` answers."""
        from prometheus_client.exposition import generate_latest

        return generate_latest(self.registry)
