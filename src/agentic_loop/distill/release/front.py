"""The served registry's stable address: a small HTTP proxy in front of a replaceable vLLM.

Why: a merged model (what ``distill`` writes by default) or another base
needs a new vLLM process (45-110 s to start on CPU), and restarting vLLM
behind the clients' port failed every request sent meanwhile. The front owns
the port; vLLM runs behind it on its own, so a new version comes up beside
the old one:

* :meth:`FrontProxy.route_to` points new requests at another backend; the
  requests already running finish where they started, and
  :meth:`FrontProxy.drain` waits for them before the old vLLM stops;
* ``route_to(None)`` *holds* new requests (they wait, up to ``hold_s``)
  while no backend can answer: a restart in place, where two vLLMs do not
  fit (one GPU), delays requests instead of failing them.

Every path and method is forwarded as it is; answers stream through chunk
by chunk (server-sent events arrive as vLLM writes them). A backend that
cannot be reached gives a 502 whose body says which one and why.

The front's own paths: ``GET IDENTITY_PATH`` answers the ``identity``
callable (the serve process's token and version), even while requests are
held; :func:`~agentic_loop.distill.release.live.check_server` checks
``serving.json`` against it (a pid can be reused, a token drawn at start
cannot). ``GET /metrics``: Prometheus's text format
(:mod:`~agentic_loop.distill.release.canary.metrics`). ``GET
ARMS_PATH?since=<unix>``: each version's requests, errors and latencies since
then, with the canary being run.

**Canary and shadow.** With ``arms`` (a callable answering an
:class:`~agentic_loop.distill.release.canary.ArmTable`), each request's user
key (:func:`~agentic_loop.distill.release.canary.user_key`: a header, or
OpenAI's ``user`` field) picks its version: sticky routing for any client.
Canary: a request in the candidate's buckets goes to the candidate (body
``"model"`` rewritten). Shadow: it goes to current, and a copy goes to the
candidate in the background (counted, dropped, never waited for; it waits at
most ``shadow_hold_s`` for a backend, and :meth:`FrontProxy.stop` cancels it).
The ``x-agentic-loop-version`` header names who answered (a request naming
the candidate's served id goes to, and is labelled, the candidate). ``/metrics``
counts every request; the ramp's numbers (``observations``, ``ARMS_PATH``)
only those the split applies to (a JSON body for the split model, with a user
key): keyless requests, other models, ``GET /v1/models`` and health polls
would dilute current's error rate and latencies.

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
import json
import logging
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, NamedTuple, Self

from agentic_loop.distill.release.canary import (
    ArmObservations,
    ArmTable,
    FrontMetrics,
    json_body,
    user_key,
)
from agentic_loop.distill.release.canary.metrics import CONTENT_TYPE
from agentic_loop.distill.release.canary.table import Arm
from agentic_loop.distill.release.serve import ServeError
from agentic_loop.errors import short_error

__all__ = ["ARMS_PATH", "IDENTITY_PATH", "METRICS_PATH", "VERSION_HEADER", "FrontProxy"]

log = logging.getLogger(__name__)

#: The front's own route: who serves here (see the module doc).
IDENTITY_PATH = "/agentic-loop/identity"
#: Each version's numbers since a time (see the module doc).
ARMS_PATH = "/agentic-loop/arms"
METRICS_PATH = "/metrics"
#: The answer header that names the version that answered.
VERSION_HEADER = "x-agentic-loop-version"

#: Headers that describe one hop of a connection, not the message: never forwarded.
_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization",
                  "te", "trailer", "trailers", "transfer-encoding", "upgrade", "host",
                  "content-length"})


def _forwarded(headers: Any) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers.items() if k.lower() not in _HOP]


class _Pick(NamedTuple):
    """Who answers; a shadow copy too; the JSON body (or None); the split applied to it."""

    arm: Arm
    shadow: bool
    parsed: dict[str, Any] | None
    split: bool


def _pick(table: ArmTable | None, headers: Any, content: bytes) -> _Pick:
    """Who answers a request, and whether the canary split applied to it."""
    if table is None:
        return _Pick("current", False, None, False)
    parsed = json_body(content)
    model = parsed.get("model") if parsed is not None else None
    if parsed is None or not table.splits(model):
        named = None not in (table.candidate, model) and model == table.candidate_model
        return _Pick("candidate" if named else "current", False, parsed, False)
    key = user_key(headers, parsed)
    if key is None or table.arm_of(key) == "current":
        return _Pick("current", False, parsed, key is not None)
    if table.mode == "canary":
        return _Pick("candidate", False, parsed, True)
    return _Pick("current", True, parsed, True)


def _body_for(table: ArmTable | None, arm: Arm, body: bytes,
              parsed: dict[str, Any] | None) -> bytes:
    """``body`` with the ``"model"`` of ``arm`` (as it came when the arm names none)."""
    model = table.model_for(arm) if table is not None else None
    if model is None or parsed is None or parsed.get("model") == model:
        return body
    return json.dumps({**parsed, "model": model}).encode()


class ThreadedApp:
    """An ASGI ``app`` served by uvicorn on ``host:port`` in a daemon thread (port 0: a free one).

    :meth:`start` returns once the socket listens (a :class:`ServeError` when it cannot: the
    port is taken); :attr:`url` then names the port really bound; :meth:`stop` ends it.
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


class FrontProxy:
    """An HTTP proxy on ``host:port`` that forwards every request to the backend set now.

    ``hold_s``: how long a request waits while no backend is set before it
    gets a 503. ``identity``: what ``GET IDENTITY_PATH`` answers (a 404
    without it). ``arms``: the versions to route between now (None, or a
    callable answering None: everything to the backend, version unknown).
    ``max_shadow``: shadow copies running at once; more are not sent.
    ``shadow_hold_s``: how long a shadow copy waits for a backend before it is dropped.
    Start it with :meth:`start` (or ``with``); it runs in a daemon thread.
    """

    def __init__(self, host: str, port: int, *, hold_s: float = 300.0,
                 identity: Callable[[], dict[str, Any]] | None = None,
                 arms: Callable[[], ArmTable | None] | None = None,
                 max_shadow: int = 64, shadow_hold_s: float = 5.0,
                 lora: Callable[[str, dict[str, Any]], None] | None = None) -> None:
        self.host, self.port, self.hold_s = host, port, hold_s
        self._lora = lora  # replicas: vLLM's LoRA routes go to every replica, not one
        self._identity = identity
        self._arms = arms
        self.max_shadow, self.shadow_hold_s = max_shadow, shadow_hold_s
        self.observations = ArmObservations()
        self.metrics = FrontMetrics()
        self.shadow_dropped = 0  #: shadow copies not sent: ``max_shadow`` were running
        self._shadows: set[asyncio.Task[None]] = set()
        self.url = f"http://{host}:{port}"
        self._backend: str | None = None
        self._in_flight: Counter[str] = Counter()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: ThreadedApp | None = None

    def __repr__(self) -> str:
        return f"FrontProxy({self.url!r} -> {self._backend!r})"

    @property
    def backend(self) -> str | None:
        """Where new requests go now (None: they are held)."""
        return self._backend

    # -- life cycle ---------------------------------------------------------

    def start(self, timeout: float = 10.0) -> Self:
        """Listen on the port; a :class:`ServeError` when it cannot (the port is taken)."""
        self._runner = ThreadedApp(self._app(), self.host, self.port, name="front")
        self._runner.start(timeout)
        return self

    def stop(self) -> None:
        """Stop listening; requests still running are cut, shadow copies cancelled."""
        if self._runner is not None:
            self._runner.stop()

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

    def table(self) -> ArmTable | None:
        """The arm table now (None: no ``arms``, or it failed: logged, never a failed request)."""
        if self._arms is None:
            return None
        try:
            return self._arms()
        except Exception as exc:  # noqa: BLE001 - routing must outlive a bad table
            log.warning("the front's arm table failed (%s); routing to current", exc)
            return None

    def _record(self, version: str, route: str, status: int, started: float, split: bool) -> None:
        """Count an ended request in ``/metrics``, and for the ramp when the split applied."""
        latency = time.monotonic() - started
        if split:
            self.observations.record(version, route, status, latency)
        self.metrics.observe(version, route, status, latency)

    async def _wait_backend(self, table: ArmTable | None, arm: Arm, hold_s: float) -> str | None:
        """The backend for ``arm`` once there is one; None after ``hold_s`` without."""
        if arm == "candidate" and table is not None and table.candidate_backend:
            return table.candidate_backend.rstrip("/")
        deadline = time.monotonic() + hold_s
        while self._backend is None:  # held: a restart in place is bringing vLLM up
            if time.monotonic() > deadline:
                return None
            await asyncio.sleep(0.05)
        return self._backend

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
            for task in (shadows := list(self._shadows)):  # stopping: cancel running copies
                task.cancel()
            await asyncio.gather(*shadows, return_exceptions=True)
            await client.aclose()

        def error(status: int, message: str, version: str | None = None) -> Response:
            headers = {VERSION_HEADER: version} if version is not None else None
            return JSONResponse({"error": {"message": message, "type": "front_proxy",
                                           "code": status}}, status_code=status, headers=headers)

        async def forward(request: Request) -> Response:
            assert client is not None
            started, route = time.monotonic(), request.url.path
            content = await request.body()
            table = self.table()
            arm, shadow, parsed, split = _pick(table, request.headers, content)
            version = table.version(arm) if table is not None else "unknown"
            named = version if table is not None else None  # the version header's value
            backend = await self._wait_backend(table, arm, self.hold_s)
            if backend is None:
                self._record(version, route, 503, started, split)
                return error(503, f"no model server behind {self.url} for {self.hold_s:g} "
                                  "s (a restart is under way, or it failed: see the serve "
                                  "process's output)", named)
            if shadow and table is not None:
                mirror(request, table, content, parsed)  # shadow: a copy, never waited for
            self._in_flight[backend] += 1  # no await since the pick: route_to sees it
            try:
                upstream = client.build_request(
                    request.method, backend + route,
                    params=request.url.query or None, headers=_forwarded(request.headers),
                    content=_body_for(table, arm, content, parsed))
                answer = await client.send(upstream, stream=True)
            except BaseException as exc:  # the answer never started: this request is done
                self._in_flight[backend] -= 1
                if isinstance(exc, httpx.HTTPError):
                    self._record(version, route, 502, started, split)
                    return error(502, f"the model server at {backend} did not answer "
                                      f"({type(exc).__name__}: {exc})", named)
                raise

            async def body() -> AsyncIterator[bytes]:
                try:
                    async for chunk in answer.aiter_raw():
                        yield chunk
                finally:
                    await answer.aclose()
                    self._in_flight[backend] -= 1
                    self._record(version, route, answer.status_code, started, split)

            headers = dict(_forwarded(answer.headers))
            if named is not None:
                headers[VERSION_HEADER] = named
            return StreamingResponse(body(), status_code=answer.status_code, headers=headers)

        def mirror(request: Request, table: ArmTable, content: bytes,
                   parsed: dict[str, Any] | None) -> None:
            if len(self._shadows) >= self.max_shadow:
                self.shadow_dropped += 1
                return
            method, route, query = request.method, request.url.path, request.url.query
            headers = _forwarded(request.headers)

            async def copy() -> None:
                assert client is not None
                started = time.monotonic()
                backend = await self._wait_backend(table, "candidate", self.shadow_hold_s)
                if backend is None:
                    return
                version = table.version("candidate")
                self._in_flight[backend] += 1
                try:
                    answer = await client.request(
                        method, backend + route, params=query or None, headers=headers,
                        content=_body_for(table, "candidate", content, parsed))
                    status = answer.status_code
                except httpx.HTTPError:
                    status = 502
                finally:
                    self._in_flight[backend] -= 1
                self._record(version, route, status, started, True)  # copies of split requests

            task = asyncio.get_running_loop().create_task(copy())
            self._shadows.add(task)
            task.add_done_callback(self._shadows.discard)

        async def lora_route(request: Request) -> Response:
            if self._lora is None:
                return await forward(request)
            try:
                payload = json.loads(await request.body() or b"{}")
                await asyncio.to_thread(self._lora, request.url.path, payload)
            except Exception as exc:  # noqa: BLE001 - the caller reads it, as vLLM's answer

                return error(500, short_error(exc))
            return JSONResponse({})

        async def identity(request: Request) -> Response:
            if self._identity is None:
                return error(404, f"{self.url} serves no identity (not a registry's server)")
            return JSONResponse(self._identity())

        async def metrics(request: Request) -> Response:
            table = self.table()
            self.metrics.set_fraction(table.fraction if table and table.candidate else 0.0)
            return Response(self.metrics.render(), media_type=CONTENT_TYPE)

        async def arms(request: Request) -> Response:
            since_text = request.query_params.get("since")
            try:
                since = float(since_text) if since_text else None
            except ValueError:
                return error(400, f"since={since_text!r}: pass a unix time in seconds")
            table = self.table()
            state = table.state if table is not None and table.candidate else None
            return JSONResponse({"canary": state.model_dump(mode="json") if state else None,
                                 "current": table.current if table is not None else None,
                                 "arms": self.observations.snapshot(since)})

        methods = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]
        return Starlette(routes=[Route(IDENTITY_PATH, identity, methods=["GET"]),
                                 Route(METRICS_PATH, metrics, methods=["GET"]),
                                 Route(ARMS_PATH, arms, methods=["GET"]),
                                 Route("/v1/load_lora_adapter", lora_route, methods=["POST"]),
                                 Route("/v1/unload_lora_adapter", lora_route, methods=["POST"]),
                                 Route("/{path:path}", forward, methods=methods)],
                         lifespan=lifespan)
