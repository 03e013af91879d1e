"""The flywheel's status over HTTP: the page, its JSON, Prometheus ``/metrics`` and a health check.

Why a server of its own: the service's state lives in its process, and a
person (the page), a dashboard (``/status.json``) and Prometheus
(``/metrics``) read it while the service works. :class:`StatusServer` asks
the ``status`` callable on every request, so what it answers is never older
than the request; it runs starlette under uvicorn in a daemon thread of the
service, as the serving front does (:class:`ThreadedApp` below is that
life cycle: start, wait until it listens, stop).

Routes: ``GET /`` the HTML page (:func:`render_status_page`), ``GET
/status.json`` the same status as JSON, ``GET /metrics`` what ``metrics``
returns, as Prometheus text (404 without it), ``GET /healthz`` ``{"ok":
true}``. A ``status`` callable that raises answers 500 with the error's text
(the page's poll then marks itself stale).

Example:
    >>> import httpx
    >>> from datetime import datetime, timezone
    >>> from agentic_loop.distill.flywheel.status import FlywheelStatus
    >>> now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    >>> with StatusServer(lambda: FlywheelStatus(registry="r", updated_at=now, phase="idle"),
    ...                   metrics=lambda: "flywheel_up 1\\n") as server:
    ...     page = httpx.get(server.url + "/")
    ...     data = httpx.get(server.url + "/status.json").json()
    ...     metrics = httpx.get(server.url + "/metrics")
    >>> page.headers["content-type"], data["phase"], metrics.text
    ('text/html; charset=utf-8', 'idle', 'flywheel_up 1\\n')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Self

from agentic_loop.distill.flywheel.status import FlywheelStatus
from agentic_loop.distill.flywheel.status_page import render_status_page
from agentic_loop.distill.release.canary.metrics import CONTENT_TYPE as PROMETHEUS_TYPE
from agentic_loop.distill.release.front import ThreadedApp

__all__ = ["PROMETHEUS_TYPE", "StatusServer", "ThreadedApp"]


class StatusServer:
    """Serves ``status()`` as a page and as JSON, and ``metrics()`` for Prometheus (module doc).

    ``refresh_s``: how often the page polls for a new status.
    """

    def __init__(self, status: Callable[[], FlywheelStatus], *, host: str = "127.0.0.1",
                 port: int = 0, metrics: Callable[[], str] | None = None,
                 refresh_s: float = 5.0) -> None:
        self._status, self._metrics, self.refresh_s = status, metrics, refresh_s
        self._runner = ThreadedApp(self._app(), host, port, name="flywheel-status")

    def __repr__(self) -> str:
        return f"StatusServer({self.url!r})"

    @property
    def url(self) -> str:
        """``http://host:port`` (the real port once started)."""
        return self._runner.url

    def start(self, timeout: float = 10.0) -> Self:
        """Listen (a :class:`ServeError` when the port is taken)."""
        self._runner.start(timeout)
        return self

    def stop(self) -> None:
        """Stop listening."""
        self._runner.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
        from starlette.routing import Route

        def failed(what: str, exc: Exception) -> Response:
            return PlainTextResponse(f"the flywheel's {what} failed ({type(exc).__name__}: "
                                     f"{exc}); see the service's log", status_code=500)

        def page(request: Request) -> Response:
            try:
                html = render_status_page(self._status(), refresh_s=self.refresh_s)
            except Exception as exc:  # noqa: BLE001 (the page says so; the service goes on)
                return failed("status", exc)
            return HTMLResponse(html, headers={"cache-control": "no-store"})

        def status_json(request: Request) -> Response:
            try:
                data = self._status().model_dump(mode="json")
            except Exception as exc:  # noqa: BLE001
                return failed("status", exc)
            return JSONResponse(data, headers={"cache-control": "no-store"})

        def metrics(request: Request) -> Response:
            if self._metrics is None:
                return PlainTextResponse("this flywheel exports no metrics", status_code=404)
            try:
                text = self._metrics()
            except Exception as exc:  # noqa: BLE001
                return failed("metrics", exc)
            return Response(text, media_type=PROMETHEUS_TYPE)

        def healthz(request: Request) -> Response:
            return JSONResponse({"ok": True})

        return Starlette(routes=[Route("/", page, methods=["GET"]),
                                 Route("/status.json", status_json, methods=["GET"]),
                                 Route("/metrics", metrics, methods=["GET"]),
                                 Route("/healthz", healthz, methods=["GET"])])
