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

Three paths are the front's own: ``GET /agentic-loop/identity`` (``IDENTITY_PATH``)
answers what the ``identity`` callable returns (the serve process's token and
the version it serves), whatever the backend is doing, even while requests
are held. Other processes check ``serving.json`` against it
(:func:`~agentic_loop.distill.release.live.check_server`): a pid can be
reused, a token drawn at start cannot. ``GET /metrics`` answers Prometheus's
text format (:mod:`~agentic_loop.distill.release.canary.metrics`), and ``GET
/agentic-loop/arms?since=<unix>`` (``ARMS_PATH``) each version's requests,
errors and latencies since then, with the canary being run.

**Canary and shadow at the server.** With ``arms`` (a callable the serve
process owns, answering an :class:`~agentic_loop.distill.release.canary.ArmTable`),
each request's user key (:func:`~agentic_loop.distill.release.canary.user_key`:
a header, or OpenAI's ``user`` field) picks its version, so any client in any
language gets sticky canary routing. Canary: a request in the candidate's
buckets goes to the candidate (its body's ``"model"`` rewritten). Shadow: it
goes to current, and a copy goes to the candidate in the background (its
answer is counted, then dropped; never waited for). Every answer says who
answered in the ``x-agentic-loop-version`` header, and every request is counted
for its version when its answer ends.

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
from typing import Any, Self

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


def _pick(table: ArmTable | None, headers: Any,
          content: bytes) -> tuple[Arm, bool, dict[str, Any] | None]:
    """The arm that answers a request, whether a shadow copy goes to the candidate, and the
    body as a JSON object (None: not one; not parsed without a table)."""
    if table is None:
        return "current", False, None
    parsed = json_body(content)
    if parsed is None or not table.splits(parsed.get("model")):
        return "current", False, parsed
    if table.arm_of(user_key(headers, parsed)) == "current":
        return "current", False, parsed
    return ("candidate", False, parsed) if table.mode == "canary" else ("current", True, parsed)


def _body_for(table: ArmTable | None, arm: Arm, body: bytes,
              parsed: dict[str, Any] | None) -> bytes:
    """``body`` with the ``"model"`` of ``arm`` (as it came when the arm names none)."""
    model = table.model_for(arm) if table is not None else None
    if model is None or parsed is None or parsed.get("model") == model:
        return body
    return json.dumps({**parsed, "model": model}).encode()


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


class FrontProxy:
    """An HTTP proxy on ``host:port`` that forwards every request to the backend set now.

    ``hold_s``: how long a request waits while no backend is set before it
    gets a 503. ``identity``: what ``GET IDENTITY_PATH`` answers (a 404
    without it). ``arms``: the versions to route between now (None, or a
    callable answering None: everything to the backend, version unknown).
    ``max_shadow``: shadow copies running at once; more are not sent.
    Start it with :meth:`start` (or ``with``); it runs in a daemon thread of
    this process.
    """

    def __init__(self, host: str, port: int, *, hold_s: float = 300.0,
                 identity: Callable[[], dict[str, Any]] | None = None,
                 arms: Callable[[], ArmTable | None] | None = None,
                 max_shadow: int = 64,
                 lora: Callable[[str, dict[str, Any]], None] | None = None) -> None:
        self.host, self.port, self.hold_s = host, port, hold_s
        self._lora = lora  # replicas: vLLM's LoRA routes go to every replica, not one
        self._identity = identity
        self._arms = arms
        self.max_shadow = max_shadow
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
        """Stop listening; requests still running are cut."""
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

    def _record(self, version: str, route: str, status: int, started: float) -> None:
        latency = time.monotonic() - started
        self.observations.record(version, route, status, latency)
        self.metrics.observe(version, route, status, latency)

    async def _wait_backend(self, table: ArmTable | None, arm: Arm) -> str | None:
        """The backend for ``arm`` once there is one; None after ``hold_s`` without."""
        if arm == "candidate" and table is not None and table.candidate_backend:
            return table.candidate_backend.rstrip("/")
        deadline = time.monotonic() + self.hold_s
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
            arm, shadow, parsed = _pick(table, request.headers, content)
            version = table.version(arm) if table is not None else "unknown"
            named = version if table is not None else None  # the version header's value
            backend = await self._wait_backend(table, arm)
            if backend is None:
                self._record(version, route, 503, started)
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
                    self._record(version, route, 502, started)
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
                    self._record(version, route, answer.status_code, started)

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
                backend = await self._wait_backend(table, "candidate")
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
                self._record(version, route, status, started)

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
                return error(500, str(exc).splitlines()[0][:500] if str(exc) else repr(exc))
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
