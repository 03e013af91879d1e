"""The served registry's stable address: a small HTTP proxy in front of a replaceable vLLM.

Why: an adapter swaps into a running vLLM, but a merged model (what
``distill`` writes by default) or another base needs a new vLLM process, and
a start takes 45-110 s on CPU. Restarting vLLM behind the clients' port
failed every request sent meanwhile. The front owns the port instead, and
vLLM runs behind it on a port of its own, so a new version can come up
beside the old one:

* :meth:`FrontProxy.route_to` points new requests at another backend; the
  requests already running finish where they started, and
  :meth:`FrontProxy.drain` waits for them before the old vLLM stops;
* ``route_to(None)`` *holds* new requests (they wait, up to ``hold_s``)
  while no backend can answer: a restart in place, where two vLLMs do not
  fit (one GPU), delays requests instead of failing them.

Every path and method is forwarded as it is (``/v1/chat/completions``,
``/v1/models``, the LoRA endpoints), and answers stream through chunk by
chunk, so server-sent events arrive as vLLM writes them. A backend that
cannot be reached gives a 502 whose body says which one and why.

One path is the front's own: ``GET /agentic-loop/identity`` (``IDENTITY_PATH``)
answers what the ``identity`` callable returns (the serve process's token and
the version it serves), whatever the backend is doing, even while requests
are held. Other processes check ``serving.json`` against it
(:func:`~agentic_loop.distill.release.live.check_server`): a pid can be
reused, a token drawn at start cannot.

Example (a backend that is not there):
    >>> from agentic_loop.distill.release.serve import free_port
    >>> import httpx
    >>> with FrontProxy("127.0.0.1", free_port("127.0.0.1"), hold_s=0.2) as front:
    ...     held = httpx.get(f"{front.url}/v1/models")  # no backend yet: held, then 503
    ...     front.route_to("http://127.0.0.1:9")       # nothing listens on port 9
    ...     gone = httpx.get(f"{front.url}/v1/models")
    >>> held.status_code, gone.status_code, "127.0.0.1:9" in gone.json()["error"]["message"]
    (503, 502, True)
    >>> with FrontProxy("127.0.0.1", free_port("127.0.0.1"), identity=lambda: {"token": "t"}) as f:
    ...     httpx.get(f"{f.url}{IDENTITY_PATH}").json()
    {'token': 't'}
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Self

from agentic_loop.distill.release.serve import ServeError

__all__ = ["IDENTITY_PATH", "FrontProxy"]

#: The front's own route: who serves here (see the module doc).
IDENTITY_PATH = "/agentic-loop/identity"

#: Headers that describe one hop of a connection, not the message: never forwarded.
_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
                  "te", "trailer", "trailers", "transfer-encoding", "upgrade", "host",
                  "content-length"})


def _forwarded(headers: Any) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers.items() if k.lower() not in _HOP]


class FrontProxy:
    """An HTTP proxy on ``host:port`` that forwards every request to the backend set now.

    ``hold_s``: how long a request waits while no backend is set before it
    gets a 503. ``identity``: what ``GET IDENTITY_PATH`` answers (a 404
    without it). Start it with :meth:`start` (or ``with``); it runs in a
    daemon thread of this process.
    """

    def __init__(self, host: str, port: int, *, hold_s: float = 300.0,
                 identity: Callable[[], dict[str, Any]] | None = None) -> None:
        self.host, self.port, self.hold_s = host, port, hold_s
        self._identity = identity
        self.url = f"http://{host}:{port}"
        self._backend: str | None = None
        self._in_flight: Counter[str] = Counter()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"FrontProxy({self.url!r} -> {self._backend!r})"

    @property
    def backend(self) -> str | None:
        """Where new requests go now (None: they are held)."""
        return self._backend

    # -- life cycle ---------------------------------------------------------

    def start(self, timeout: float = 10.0) -> Self:
        """Listen on the port; a :class:`ServeError` when it cannot (the port is taken)."""
        import uvicorn

        config = uvicorn.Config(self._app(), host=self.host, port=self.port, lifespan="on",
                                log_level="error", access_log=False, timeout_keep_alive=30)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._serve, name="registry-front", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise ServeError(f"the front could not listen on {self.host}:{self.port} (is "
                                 "the port taken?); pass another --port, or none for a free one")
            time.sleep(0.01)
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

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- routing --------------------------------------------------------------

    def route_to(self, backend: str | None) -> None:
        """Send new requests to ``backend`` (``http://host:port``, no path), or hold them (None).

        Runs on the proxy's event loop, so no request can pick the old backend
        after this returns without being counted by :meth:`in_flight`.
        """
        backend = backend.rstrip("/") if backend else None
        if self._loop is None:
            self._backend = backend
            return

        async def switch() -> None:
            self._backend = backend

        asyncio.run_coroutine_threadsafe(switch(), self._loop).result(timeout=10)

    def in_flight(self, backend: str) -> int:
        """Requests forwarded to ``backend`` whose answer has not finished."""
        return self._in_flight[backend.rstrip("/")]

    def drain(self, backend: str, timeout: float) -> bool:
        """Wait until ``backend`` has no request running (True), or ``timeout`` passed."""
        deadline = time.monotonic() + timeout
        while self.in_flight(backend) > 0:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    # -- the proxy --------------------------------------------------------------

    def _app(self) -> Any:
        import httpx
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response, StreamingResponse
        from starlette.routing import Route

        client: httpx.AsyncClient | None = None

        @asynccontextmanager
        async def lifespan(app: Any) -> AsyncIterator[None]:
            nonlocal client
            self._loop = asyncio.get_running_loop()
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
            client = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=10.0), limits=limits)
            yield
            await client.aclose()

        def error(status: int, message: str) -> Response:
            return JSONResponse({"error": {"message": message, "type": "front_proxy",
                                           "code": status}}, status_code=status)

        async def forward(request: Request) -> Response:
            assert client is not None
            deadline = time.monotonic() + self.hold_s
            while self._backend is None:  # held: a restart in place is bringing vLLM up
                if time.monotonic() > deadline:
                    return error(503, f"no model server behind {self.url} for {self.hold_s:g} "
                                      "s (a restart is under way, or it failed: see the serve "
                                      "process's output)")
                await asyncio.sleep(0.05)
            backend = self._backend
            self._in_flight[backend] += 1  # no await since the pick: route_to sees it
            try:
                upstream = client.build_request(
                    request.method, backend + request.url.path,
                    params=request.url.query or None, headers=_forwarded(request.headers),
                    content=await request.body())
                answer = await client.send(upstream, stream=True)
            except BaseException as exc:  # the answer never started: this request is done
                self._in_flight[backend] -= 1
                if isinstance(exc, httpx.HTTPError):
                    return error(502, f"the model server at {backend} did not answer "
                                      f"({type(exc).__name__}: {exc})")
                raise

            async def body() -> AsyncIterator[bytes]:
                try:
                    async for chunk in answer.aiter_raw():
                        yield chunk
                finally:
                    await answer.aclose()
                    self._in_flight[backend] -= 1

            return StreamingResponse(body(), status_code=answer.status_code,
                                     headers=dict(_forwarded(answer.headers)))

        async def identity(request: Request) -> Response:
            if self._identity is None:
                return error(404, f"{self.url} serves no identity (not a registry's server)")
            return JSONResponse(self._identity())

        methods = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]
        return Starlette(routes=[Route(IDENTITY_PATH, identity, methods=["GET"]),
                                 Route("/{path:path}", forward, methods=methods)],
                         lifespan=lifespan)
