"""The front proxy that holds a served registry's port: streaming, hang-ups, switching, holding.

Real HTTP on loopback: two small backends in threads (each answers with its
own name, and streams lines slowly on ``/stream``), the proxy in front.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from agentic_loop.distill.release.front import IDENTITY_PATH, FrontProxy
from agentic_loop.distill.release.serve import free_port


class _Backend(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        name = self.server.name  # type: ignore[attr-defined]
        if self.path.startswith(("/stream", "/endless")):
            # /endless writes for 30 s unless the reader hangs up first
            lines, pause = (5, 0.3) if self.path.startswith("/stream") else (300, 0.1)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            try:
                for i in range(lines):
                    self.wfile.write(f"data: {name} {i}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(pause)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        body = f"{name} {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _backend(name: str) -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Backend)
    server.name = name  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture()
def backends() -> Iterator[tuple[str, str]]:
    a, url_a = _backend("a")
    b, url_b = _backend("b")
    yield url_a, url_b
    a.shutdown()
    b.shutdown()


@pytest.fixture()
def front() -> Iterator[FrontProxy]:
    with FrontProxy("127.0.0.1", free_port("127.0.0.1"), hold_s=5.0) as proxy:
        yield proxy


def test_paths_and_queries_pass_through_and_lines_stream_as_written(
        front: FrontProxy, backends: tuple[str, str]) -> None:
    front.route_to(backends[0])
    assert httpx.get(f"{front.url}/v1/models?x=1").text == "a /v1/models?x=1"
    started = time.perf_counter()
    with httpx.stream("GET", f"{front.url}/stream", timeout=10) as answer:
        lines = []
        for line in answer.iter_lines():
            if line:
                lines.append((line, time.perf_counter() - started))
    assert [text for text, _ in lines] == [f"data: a {i}" for i in range(5)]
    # written 0.3 s apart, they arrive apart: the proxy does not wait for the whole answer
    assert lines[-1][1] - lines[0][1] > 0.5


def test_a_client_that_hangs_up_mid_stream_is_no_longer_counted(
        front: FrontProxy, backends: tuple[str, str]) -> None:
    front.route_to(backends[0])
    with httpx.stream("GET", f"{front.url}/endless", timeout=10) as answer:
        lines = answer.iter_lines()  # kept: a dropped line iterator closes the connection
        next(lines)
        assert front.in_flight(backends[0]) == 1  # the backend writes on for 30 s
    assert front.drain(backends[0], timeout=10)  # so only the hang-up can have ended it


def test_switching_sends_new_requests_on_and_lets_running_ones_finish(
        front: FrontProxy, backends: tuple[str, str]) -> None:
    a, b = backends
    front.route_to(a)
    running: list[str] = []

    def slow() -> None:
        with httpx.stream("GET", f"{front.url}/stream", timeout=10) as answer:
            running.extend(line for line in answer.iter_lines() if line)

    thread = threading.Thread(target=slow)
    thread.start()
    deadline = time.monotonic() + 5
    while front.in_flight(a) == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    front.route_to(b)
    assert httpx.get(f"{front.url}/ping").text == "b /ping"  # new requests: the new backend
    assert front.drain(a, timeout=10)
    thread.join()
    assert running == [f"data: a {i}" for i in range(5)]  # the old one finished its answer


def test_held_requests_wait_for_a_backend_and_then_get_answered(
        front: FrontProxy, backends: tuple[str, str]) -> None:
    front.route_to(None)
    answers: list[str] = []
    thread = threading.Thread(target=lambda: answers.append(
        httpx.get(f"{front.url}/held", timeout=10).text))
    thread.start()
    time.sleep(0.5)
    assert not answers  # still waiting
    front.route_to(backends[1])
    thread.join()
    assert answers == ["b /held"]


def test_a_taken_port_is_a_clear_error(front: FrontProxy) -> None:
    from agentic_loop.distill.release.serve import ServeError

    with pytest.raises(ServeError, match=r"could not listen on .*is the port taken"):
        FrontProxy("127.0.0.1", front.port).start()


def test_the_identity_route_answers_while_requests_are_held() -> None:
    """A restart in place holds requests; the identity check must not wait behind them."""
    with FrontProxy("127.0.0.1", free_port("127.0.0.1"), hold_s=30.0,
                    identity=lambda: {"token": "t", "version": "v2"}) as front:
        started = time.perf_counter()
        answer = httpx.get(f"{front.url}{IDENTITY_PATH}", timeout=5)
        assert answer.json() == {"token": "t", "version": "v2"}
        assert time.perf_counter() - started < 5  # not held for hold_s
