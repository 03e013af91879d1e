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

import threading
import time
from collections.abc import Callable
from typing import Any, Self

from agentic_loop.distill.flywheel.status import FlywheelStatus
from agentic_loop.distill.flywheel.status_page import render_status_page
from agentic_loop.distill.release.serve import ServeError

__all__ = ["PROMETHEUS_TYPE", "StatusServer", "ThreadedApp"]

#: The content type of Prometheus' text exposition format.
PROMETHEUS_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ThreadedApp:
    """An ASGI ``app`` served by uvicorn on ``host:port`` in a daemon thread (port 0: a free one).

    :meth:`start` returns once the socket listens (a :class:`ServeError` when
    it cannot: the port is taken); :attr:`url` then names the port really
    bound; :meth:`stop` ends it.
    """

    def __init__(self, app: Any, host: str, port: int, *, name: str) -> None:
        self.app, self.host, self.port, self.name = app, host, port, name
        self.url = f"http://{host}:{port}"
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 10.0) -> Self:
        """Listen; wait up to ``timeout`` s for the socket."""
        import uvicorn

        config = uvicorn.Config(self.app, host=self.host, port=self.port, lifespan="on",
                                log_level="error", access_log=False, timeout_keep_alive=30)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise ServeError(f"the {self.name} could not listen on {self.host}:{self.port} "
                                 "(is the port taken?); pass another port, or 0 for a free one")
            time.sleep(0.01)
        sockets = [s for server in self._server.servers for s in server.sockets]
        if sockets:  # port 0: the one the system chose
            self.port = int(sockets[0].getsockname()[1])
            self.url = f"http://{self.host}:{self.port}"
        return self

    def _serve(self) -> None:
        try:
            self._server.run()
        except SystemExit:  # uvicorn exits when it cannot bind: start() reports it
            pass

    def stop(self) -> None:
        """Stop listening; requests still running are cut."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)


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
