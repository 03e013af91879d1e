"""The serve process follows canary.json: the candidate's adapter goes into the running vLLM,
the front splits requests by user key, and a removed file sends everything back to current.

Against a real registry and the stand-in vLLM (tests/serve_helpers.py: a real HTTP server in
a real child process that records every adapter call and answers with the body's model).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_helpers import adapter_dir, lora_calls, model_dir, stand_in_python

from agentic_loop.distill.release import Registry
from agentic_loop.distill.release.canary import CanaryFollower, CanaryState, write_canary
from agentic_loop.distill.release.front import ARMS_PATH, IDENTITY_PATH, VERSION_HEADER
from agentic_loop.distill.release.router import bucket_of
from agentic_loop.distill.release.serve_watch import RegistryServer, serve_registered


@pytest.fixture()
def python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STAND_IN_RECORD", str(tmp_path / "record.json"))
    return stand_in_python(tmp_path / "vllm")


def _registry(tmp_path: Path) -> Registry:
    base = model_dir(tmp_path, "base")
    reg = Registry(tmp_path / "agent")
    reg.register(adapter_dir(tmp_path, "a1", base))
    reg.register(adapter_dir(tmp_path, "a2", base))
    reg.register(model_dir(tmp_path, "merged"))  # v3: a whole model, not an adapter
    reg.promote("v1")
    return reg


def _serve(reg: Registry, python: Path) -> RegistryServer:
    # poll_s: the tests drive the watcher through check_canary(), so no thread races them
    return serve_registered(reg, python=python, device="cpu", timeout=30, poll_s=3600)


def _answers(server: RegistryServer, keys: list[str]) -> dict[str, tuple[str, str]]:
    """Each key's (version header, answering model) through the front."""
    out = {}
    with httpx.Client(timeout=10) as client:
        for key in keys:
            answer = client.post(f"{server.base_url}/chat/completions",
                                 headers={"x-agentic-loop-user": key},
                                 json={"model": "agent", "messages": [
                                     {"role": "user", "content": "which model?"}]})
            assert answer.status_code == 200, answer.text
            out[key] = (answer.headers[VERSION_HEADER], answer.json()["model"])
    return out


def _identity(server: RegistryServer) -> dict[str, object]:
    return dict(httpx.get(server.base_url.removesuffix("/v1") + IDENTITY_PATH).json())


KEYS = [f"user-{i}" for i in range(16)]


def test_a_canary_file_loads_the_candidate_and_splits_requests_by_key(tmp_path: Path,
                                                                      python: Path) -> None:
    reg = _registry(tmp_path)
    state = CanaryState(candidate="v2", fraction=0.5)
    in_canary = {k for k in KEYS if bucket_of(k, state.salt) < 0.5}
    assert 0 < len(in_canary) < len(KEYS)
    with _serve(reg, python) as server:
        assert set(_answers(server, KEYS).values()) == {("v1", "agent")}
        write_canary(reg, state)
        assert server.check_canary() == "canary of v2 at 0.5 against v1"
        assert lora_calls(tmp_path / "record.json") == [{
            "endpoint": "/v1/load_lora_adapter", "lora_name": "a2-v2",
            "lora_path": str(tmp_path / "a2")}]
        assert "a2-v2" in server.served_models()
        answers = _answers(server, KEYS)
        assert answers == {k: ("v2", "a2-v2") if k in in_canary else ("v1", "agent")
                           for k in KEYS}
        assert server.check_canary() is None  # the file did not change: nothing to do
        arms = httpx.get(server.base_url.removesuffix("/v1") + ARMS_PATH).json()
        assert arms["canary"]["candidate"] == "v2"
        assert arms["arms"]["v2"]["requests"] == len(in_canary)
        assert _identity(server)["canary"] == "v2"

        write_canary(reg, None)
        assert server.check_canary() == "no canary: every request goes to v1"
        assert lora_calls(tmp_path / "record.json")[-1] == {
            "endpoint": "/v1/unload_lora_adapter", "lora_name": "a2-v2"}
        assert "a2-v2" not in server.served_models()
        assert set(_answers(server, KEYS).values()) == {("v1", "agent")}
        assert _identity(server)["canary"] is None


def test_a_full_model_candidate_gets_a_vllm_of_its_own_and_one_that_fails_is_reported(
        tmp_path: Path, python: Path) -> None:
    reg = _registry(tmp_path)
    broken = reg.register(model_dir(tmp_path, "broken")).version  # its vLLM does not start
    with _serve(reg, python) as server:
        write_canary(reg, CanaryState(candidate="v3", fraction=1.0))  # a merged model
        assert server.check_canary() == "canary of v3 at 1 against v1"
        assert set(_answers(server, KEYS).values()) == {("v3", "merged-v3")}
        starts = Path(f"{tmp_path / 'record.json'}.starts").read_text().splitlines()
        assert starts[-1].endswith("merged") and len(starts) == 2  # a vLLM of its own
        assert lora_calls(tmp_path / "record.json") == []  # nothing went into current's
        write_canary(reg, None)
        assert server.check_canary() == "no canary: every request goes to v1"
        assert set(_answers(server, KEYS).values()) == {("v1", "agent")}
        write_canary(reg, CanaryState(candidate=broken, fraction=1.0))
        message = server.check_canary()
        assert message is not None and message.startswith(
            f"canary not served ({broken} did not start beside"), message
        identity = _identity(server)
        assert identity["canary"] is None and "did not start" in str(identity["canary_error"])
        assert set(_answers(server, KEYS).values()) == {("v1", "agent")}
        write_canary(reg, CanaryState(candidate="v9", fraction=1.0))
        assert "v9 is not a version of" in (server.check_canary() or "")
        (reg.root / "canary.json").write_text("{not json")
        assert "is not a canary state" in (server.check_canary() or "")
        assert set(_answers(server, KEYS).values()) == {("v1", "agent")}


def test_promoting_the_candidate_ends_the_split_and_current_follows(tmp_path: Path,
                                                                   python: Path) -> None:
    reg = _registry(tmp_path)
    with _serve(reg, python) as server:
        write_canary(reg, CanaryState(candidate="v2", fraction=1.0, mode="shadow"))
        assert server.check_canary() == "shadow of v2 at 1 against v1"
        assert set(_answers(server, KEYS[:3]).values()) == {("v1", "agent")}  # shadow: current
        reg.promote("v2")  # the ramp's end: the registry's current is the candidate
        assert server.check_canary() == "no canary: every request goes to v2"
        assert set(_answers(server, KEYS[:3]).values()) == {("v2", "agent")}
        assert [c["endpoint"] for c in lora_calls(tmp_path / "record.json")] == [
            "/v1/load_lora_adapter", "/v1/load_lora_adapter", "/v1/unload_lora_adapter"]
        serving = json.loads((reg.root / "serving.json").read_text())
        assert serving["version"] == "v2"


def test_a_canary_file_there_at_start_is_served_and_the_watcher_follows_it(
        tmp_path: Path, python: Path) -> None:
    reg = _registry(tmp_path)
    write_canary(reg, CanaryState(candidate="v2", fraction=1.0))  # a restart resumes its canary
    with serve_registered(reg, python=python, device="cpu", timeout=30, poll_s=0.1) as server:
        assert _identity(server)["canary"] == "v2"
        assert set(_answers(server, KEYS[:3]).values()) == {("v2", "a2-v2")}
        write_canary(reg, None)  # the watcher thread alone sees it go
        deadline = time.monotonic() + 10
        while _identity(server)["canary"] is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert set(_answers(server, KEYS[:3]).values()) == {("v1", "agent")}


class _FlakyLoRA(BaseHTTPRequestHandler):
    """A vLLM LoRA endpoint that answers 503 to the first ``fail`` loads, then 200."""

    def do_POST(self) -> None:
        server: Any = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server.calls.append((self.path, body["lora_name"]))
        failing = self.path.endswith("/load_lora_adapter") and server.fail > 0
        server.fail -= failing
        self.send_response(503 if failing else 200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


def test_a_failed_candidate_load_is_retried_after_the_backoff(tmp_path: Path) -> None:
    reg = _registry(tmp_path)
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), _FlakyLoRA)
    server.calls, server.fail = [], 1
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    follower = CanaryFollower(reg, served_name="agent", lora_url=lambda: url,
                              why_not=lambda entry: None, retry_s=0.3)
    try:
        current = reg.get("v1")
        write_canary(reg, CanaryState(candidate="v2", fraction=1.0))
        first = follower.sync(current)
        assert first is not None and "could not load v2's adapter" in first
        assert follower.candidate is None and follower.error is not None
        assert follower.sync(current) is None  # within the backoff: not tried again
        assert len(server.calls) == 1 and follower.error is not None  # still reported
        time.sleep(0.35)
        assert follower.sync(current) == "canary of v2 at 1 against v1"
        assert follower.candidate == "v2" and follower.error is None
        assert server.calls == [("/v1/load_lora_adapter", "a2-v2")] * 2
        assert follower.sync(current) is None and len(server.calls) == 2  # loaded: no more
    finally:
        server.shutdown()
