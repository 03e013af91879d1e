"""Canary and shadow at the serving front: sticky user keys, shares, shadow copies, numbers.

Real HTTP on loopback: two small backends in threads (each answers JSON naming itself and
the body "model" it got, and records every request), a FrontProxy with an ArmTable in
front; /metrics is parsed with prometheus_client's own parser.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentic_loop.distill.release.canary import ArmTable, CanaryState
from agentic_loop.distill.release.front import ARMS_PATH, METRICS_PATH, VERSION_HEADER, FrontProxy
from agentic_loop.distill.release.router import bucket_of
from agentic_loop.distill.release.serve import free_port

CHAT = "/v1/chat/completions"
SALT = "test-salt"


class _Backend(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # /v1/models, a balancer's /health
        payload = json.dumps({"data": [{"id": "agent"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server: Any = self.server
        server.got.append(body)
        if body.get("stream"):
            return self._stream(body["model"])
        time.sleep(server.delay_s)
        payload = json.dumps({"backend": server.name, "model": body.get("model")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _stream(self, model: str) -> None:
        """Server-sent events, one every 0.3 s (HTTP/1.0: the answer ends when it closes)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for event in _events(model):
            self.wfile.write(event)
            self.wfile.flush()
            time.sleep(0.3)

    def log_message(self, *args: object) -> None:
        pass


def _events(model: str) -> list[bytes]:
    chunks = [json.dumps({"model": model, "choices": [{"delta": {"content": f"part {i}"}}]})
              for i in range(3)]
    return [f"data: {c}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]


def _start(name: str, delay_s: float = 0.0) -> tuple[Any, str]:
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), _Backend)
    server.name, server.got, server.delay_s = name, [], delay_s
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture()
def backends() -> Iterator[tuple[Any, str, Any, str]]:
    a, url_a = _start("current")
    b, url_b = _start("candidate", delay_s=0.0)
    yield a, url_a, b, url_b
    a.shutdown()
    b.shutdown()


def _front(url: str, table: Callable[[], ArmTable | None]) -> FrontProxy:
    front = FrontProxy("127.0.0.1", free_port("127.0.0.1"), hold_s=5.0, arms=table)
    front.route_to(url)
    return front


def _table(fraction: float, mode: str = "canary", backend: str | None = None) -> ArmTable:
    state = CanaryState(candidate="v2", fraction=fraction, mode=mode, salt=SALT)  # type: ignore[arg-type]
    return ArmTable.from_state(state, current="v1", candidate_model="agent-v2",
                               served_name="agent", candidate_backend=backend)


def _ask(client: httpx.Client, front: FrontProxy, *, key: str | None = None,
         how: str = "header", model: str = "agent") -> httpx.Response:
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    headers = {}
    if key is not None and how == "body":
        body["user"] = key
    elif key is not None:
        headers["x-agentic-loop-user" if how == "header" else "x-user-id"] = key
    return client.post(f"{front.url}{CHAT}", json=body, headers=headers, timeout=10)


def _eventually(check: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_one_key_always_gets_one_version_from_a_header_or_the_body(backends: Any) -> None:
    _, url_a, _, _ = backends
    table = _table(0.5)  # the candidate on the same backend: only the body "model" changes
    with _front(url_a, lambda: table) as front, httpx.Client() as client:
        for i in range(12):
            key = f"user-{i}"
            expected = "v2" if bucket_of(key, SALT) < 0.5 else "v1"
            answers = [_ask(client, front, key=key, how=how)
                       for how in ("header", "x-user-id", "body", "header")]
            assert {a.headers[VERSION_HEADER] for a in answers} == {expected}, key
            models = {a.json()["model"] for a in answers}
            assert models == {"agent-v2" if expected == "v2" else "agent"}
        for _ in range(3):  # no key, or another model's name: current, body as it came
            assert _ask(client, front).headers[VERSION_HEADER] == "v1"
        other = _ask(client, front, key="user-0", model="agent-base")
        assert (other.headers[VERSION_HEADER], other.json()["model"]) == ("v1", "agent-base")


def test_about_fraction_of_distinct_keys_reach_the_candidate(backends: Any) -> None:
    _, url_a, _, url_b = backends
    fraction, n = 0.25, 400
    with _front(url_a, lambda: _table(fraction, backend=url_b)) as front, \
            httpx.Client() as client:
        served = [_ask(client, front, key=f"k{i}").json()["backend"] for i in range(n)]
    to_candidate = served.count("candidate")
    spread = 4.5 * math.sqrt(n * fraction * (1 - fraction))  # binomial: 4.5 sd either side
    assert abs(to_candidate - n * fraction) < spread, to_candidate
    assert 0 < to_candidate < n


def test_shadow_answers_with_current_and_copies_to_the_candidate_without_waiting(
        backends: Any) -> None:
    a, url_a, _, _ = backends
    slow, url_slow = _start("candidate", delay_s=1.5)
    try:
        with _front(url_a, lambda: _table(1.0, mode="shadow", backend=url_slow)) as front, \
                httpx.Client() as client:
            started = time.monotonic()
            answer = _ask(client, front, key="alice")
            took = time.monotonic() - started
            assert answer.json() == {"backend": "current", "model": "agent"}
            assert answer.headers[VERSION_HEADER] == "v1" and took < 1.0, took
            assert _eventually(lambda: len(slow.got) == 1)
            assert slow.got[0]["model"] == "agent-v2" and a.got[0]["model"] == "agent"
            _ask(client, front)  # no key: not mirrored, and not in the ramp's numbers
            assert _eventually(lambda: front.observations.snapshot().get("v2", {}).get(
                "requests") == 1)
            assert front.observations.snapshot()["v1"]["requests"] == 1 and len(slow.got) == 1
    finally:
        slow.shutdown()


def test_a_dead_candidate_backend_is_a_502_counted_for_the_candidate(backends: Any) -> None:
    _, url_a, _, _ = backends
    dead = f"http://127.0.0.1:{free_port('127.0.0.1')}"
    with _front(url_a, lambda: _table(1.0, backend=dead)) as front, httpx.Client() as client:
        answer = _ask(client, front, key="bob")
        assert answer.status_code == 502 and dead in answer.json()["error"]["message"]
        assert answer.headers[VERSION_HEADER] == "v2"
        assert _ask(client, front).status_code == 200  # no key: current still answers
        arms = client.get(f"{front.url}{ARMS_PATH}").json()["arms"]
    assert arms["v2"]["requests"] == 1 and arms["v2"]["errors"] == 1
    assert "v1" not in arms  # the keyless request is not one the split applies to


def _families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_metrics_and_arms_count_exactly_the_requests_sent(backends: Any) -> None:
    _, url_a, _, url_b = backends
    table = _table(0.5, backend=url_b)
    keys = [f"user-{i}" for i in range(30)]
    expected = {"v1": 0, "v2": 0}  # the split requests: what the ramp decides on
    for key in keys:
        expected["v2" if bucket_of(key, SALT) < 0.5 else "v1"] += 1
    counted = {"v1": expected["v1"] + 5, "v2": expected["v2"]}  # /metrics: the keyless too
    with _front(url_a, lambda: table) as front, httpx.Client() as client:
        before = time.time()
        for key in keys:
            assert _ask(client, front, key=key).status_code == 200
        for _ in range(5):
            _ask(client, front)
        done = lambda: {v: n["requests"] for v, n in  # noqa: E731
                        front.observations.snapshot().items()} == expected
        assert _eventually(done)
        metrics = client.get(f"{front.url}{METRICS_PATH}")
        arms = client.get(f"{front.url}{ARMS_PATH}", params={"since": before}).json()
        later = client.get(f"{front.url}{ARMS_PATH}", params={"since": time.time() + 60}).json()
        bad = client.get(f"{front.url}{ARMS_PATH}", params={"since": "yesterday"})
    families = _families(metrics.text)
    totals = {s.labels["version"]: s.value for s in families["agentic_loop_requests"].samples
              if s.name == "agentic_loop_requests_total"}
    assert totals == {v: float(n) for v, n in counted.items()}
    assert {s.labels["route"] for s in families["agentic_loop_requests"].samples} == {CHAT}
    counts = {s.labels["version"]: s.value for s in families["agentic_loop_request_seconds"].samples
              if s.name == "agentic_loop_request_seconds_count"}
    assert counts == totals
    assert not [s for s in families["agentic_loop_request_errors"].samples if s.value]
    assert families["agentic_loop_canary_fraction"].samples[0].value == 0.5
    assert arms["canary"]["candidate"] == "v2" and arms["canary"]["fraction"] == 0.5
    assert {v: (n["requests"], n["errors"], len(n["latencies_s"]))
            for v, n in arms["arms"].items()} == {v: (n, 0, n) for v, n in expected.items()}
    assert later["arms"] == {} and bad.status_code == 400


def test_a_table_that_fails_or_is_missing_sends_everything_to_current(backends: Any) -> None:
    _, url_a, _, url_b = backends
    tables: list[ArmTable | None] = [None]

    def arms() -> ArmTable | None:
        if tables[0] is None:
            raise OSError("the table broke")
        return tables[0]

    with _front(url_a, arms) as front, httpx.Client() as client:
        broken = _ask(client, front, key="carol")
        assert broken.status_code == 200 and broken.json()["backend"] == "current"
        assert VERSION_HEADER not in broken.headers  # no table: no version to name
        tables[0] = ArmTable(current="v1", served_name="agent")  # no candidate
        plain = _ask(client, front, key="carol")
        assert (plain.json()["backend"], plain.headers[VERSION_HEADER]) == ("current", "v1")
        assert client.get(f"{front.url}{ARMS_PATH}").json()["canary"] is None
        metrics = _families(client.get(f"{front.url}{METRICS_PATH}").text)
        assert metrics["agentic_loop_canary_fraction"].samples[0].value == 0.0


def _totals(front: FrontProxy, client: httpx.Client) -> dict[str, float]:
    """Requests per version in /metrics, over every route and status."""
    families = _families(client.get(f"{front.url}{METRICS_PATH}").text)
    totals: dict[str, float] = {}
    for sample in families["agentic_loop_requests"].samples:
        if sample.name == "agentic_loop_requests_total":
            version = sample.labels["version"]
            totals[version] = totals.get(version, 0.0) + sample.value
    return totals


def test_the_ramp_numbers_keep_only_split_requests_and_metrics_keep_all(backends: Any) -> None:
    _, url_a, b, url_b = backends
    table = _table(1.0, backend=url_b)
    with _front(url_a, lambda: table) as front, httpx.Client() as client:
        assert _ask(client, front, key="dave").json()["backend"] == "candidate"  # split
        _ask(client, front)  # no key
        _ask(client, front, key="dave", model="agent-base")  # another model
        client.get(f"{front.url}/v1/models")
        client.get(f"{front.url}/health")  # a balancer's poll
        direct = _ask(client, front, model="agent-v2")  # the candidate's own id, no key
        assert (direct.headers[VERSION_HEADER], direct.json()["backend"]) == ("v2", "candidate")
        assert _eventually(lambda: _totals(front, client) == {"v1": 4.0, "v2": 2.0})
        arms = client.get(f"{front.url}{ARMS_PATH}").json()["arms"]
    assert {v: n["requests"] for v, n in arms.items()} == {"v2": 1}
    assert [g["model"] for g in b.got] == ["agent-v2", "agent-v2"]


def test_a_streamed_canary_answer_arrives_chunk_by_chunk_with_the_body_rewritten(
        backends: Any) -> None:
    a, url_a, _, _ = backends
    table = _table(1.0)  # the candidate on the same backend: the body "model" is rewritten
    body = {"model": "agent", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with _front(url_a, lambda: table) as front, httpx.Client(timeout=10) as client:
        arrived: list[tuple[float, bytes]] = []
        with client.stream("POST", f"{front.url}{CHAT}", json=body,
                           headers={"x-agentic-loop-user": "erin"}) as answer:
            assert answer.headers[VERSION_HEADER] == "v2"
            assert answer.headers["content-type"].startswith("text/event-stream")
            for chunk in answer.iter_raw():
                arrived.append((time.monotonic(), chunk))
    assert a.got[-1]["model"] == "agent-v2" and a.got[-1]["stream"] is True
    assert b"".join(c for _, c in arrived) == b"".join(_events("agent-v2"))
    first = next(t for t, c in arrived if b"part 0" in c)
    last = next(t for t, c in arrived if b"[DONE]" in c)
    assert last - first > 0.6, arrived  # passed on as written, not gathered to the end


def test_stop_cancels_the_shadow_copies_still_running(backends: Any) -> None:
    _, url_a, _, _ = backends
    slow, url_slow = _start("candidate", delay_s=3.0)
    try:
        front = _front(url_a, lambda: _table(1.0, mode="shadow", backend=url_slow)).start()
        with httpx.Client() as client:
            assert _ask(client, front, key="frank").json()["backend"] == "current"
        assert _eventually(lambda: len(slow.got) == 1) and len(front._shadows) == 1
        started = time.monotonic()
        front.stop()
        assert time.monotonic() - started < 2.5  # not waiting for the candidate's answer
        assert not front._shadows and front.in_flight(url_slow) == 0
        assert "v2" not in front.observations.snapshot()  # cancelled, not counted as an answer
    finally:
        slow.shutdown()
