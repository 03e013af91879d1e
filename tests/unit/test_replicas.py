"""Replicas of one version behind the real vllm-router: every replica gets requests, an adapter
change reaches all of them or none, and a replica that fails a load or dies is taken out while
requests keep succeeding on the others.

The replicas are the vLLM stand-in (tests/replica_helpers.py: real HTTP servers in real child
processes, started through vLLM's command line, answering ``<model>@<port>:<adapter>``); the
balancer is the real ``vllm-router`` binary (``make router``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import httpx
import pytest
from replica_helpers import replica_stand_in_python
from serve_helpers import adapter_dir, lora_calls, model_dir

from agentic_loop.distill.release.replicas import (
    BalancerError,
    ReplicaSet,
    RouterNotInstalledError,
    find_vllm_router,
    router_command,
)
from agentic_loop.distill.release.serve import ServeError, free_port, serve
from agentic_loop.errors import ConfigError


@pytest.fixture(scope="module")
def router() -> str:
    try:
        return find_vllm_router()
    except RouterNotInstalledError as exc:
        pytest.skip(str(exc))


@pytest.fixture()
def python(tmp_path: Path) -> Path:
    return replica_stand_in_python(tmp_path / "vllm")


def _records(tmp_path: Path, fail: int | None = None):  # noqa: ANN202 - a small factory
    def env(index: int) -> Mapping[str, str]:
        extra = {"STAND_IN_FAIL_LOADS": "1"} if index == fail else {}
        return {"STAND_IN_RECORD": str(tmp_path / f"record{index}.json"), **extra}
    return env


@pytest.fixture()
def replicas(request: pytest.FixtureRequest, tmp_path: Path, python: Path,
             router: str) -> Iterator[ReplicaSet]:
    fail = getattr(request, "param", None)
    base = model_dir(tmp_path, "base")
    adapter = adapter_dir(tmp_path, "a1", base)
    adapter_dir(tmp_path, "a2", base)
    adapter_dir(tmp_path, "a3-broken", base)
    with ReplicaSet(adapter, replicas=3, name="agent", python=python, device="cpu",
                    router=router, policy="round_robin", replica_env=_records(tmp_path, fail),
                    health_s=0.5, record=tmp_path / "replicas.json", timeout=30).start() as rs:
        yield rs


def _ask(rs: ReplicaSet, n: int) -> list[str]:
    """``n`` answers through the balancer; each must succeed."""
    answers = []
    with httpx.Client(timeout=10) as client:
        for _ in range(n):
            reply = client.post(f"{rs.base_url}/chat/completions", json={
                "model": "agent", "messages": [{"role": "user", "content": "who?"}]})
            assert reply.status_code == 200, reply.text
            answers.append(reply.json()["choices"][0]["message"]["content"])
    return answers


def _port(rs: ReplicaSet, index: int) -> str:
    return rs.replicas[index].url.rsplit(":", 1)[1]


def test_parallel_sizes_reach_the_vllm_command_line(tmp_path: Path, python: Path) -> None:
    record = tmp_path / "record.json"
    with serve(model_dir(tmp_path, "m"), python=python, device="cpu", timeout=30,
               env={"STAND_IN_RECORD": str(record)}, tensor_parallel_size=2,
               pipeline_parallel_size=2, data_parallel_size=4):
        argv = json.loads(record.read_text())["argv"]
    flags = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].endswith("-size")}
    assert flags == {"--tensor-parallel-size": "2", "--pipeline-parallel-size": "2",
                     "--data-parallel-size": "4"}
    with pytest.raises(ConfigError, match="tensor_parallel_size=0"):
        serve(model_dir(tmp_path, "m2"), python=python, device="cpu", tensor_parallel_size=0)


def test_a_missing_balancer_or_bad_policy_is_a_clear_error(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RouterNotInstalledError, match="make setup"):
        find_vllm_router(tmp_path / "nowhere" / "vllm-router")
    monkeypatch.setenv("AGENTIC_LOOP_VLLM_ROUTER", str(tmp_path / "gone"))
    with pytest.raises(RouterNotInstalledError, match="gone"):
        find_vllm_router()
    with pytest.raises(BalancerError, match="round_robin"):
        router_command("vllm-router", port=1, workers=[], policy="fastest")
    with pytest.raises(ConfigError, match="replicas=0"):
        ReplicaSet(tmp_path, replicas=0)


def test_requests_through_the_balancer_reach_every_replica(replicas: ReplicaSet) -> None:
    assert sorted(replicas.balancer.workers()) == sorted(r.url for r in replicas.replicas)
    answers = _ask(replicas, 9)
    assert {a.split("@")[1].split(":")[0] for a in answers} == {
        _port(replicas, i) for i in range(3)}
    assert all(a.endswith(":a1") for a in answers)  # the adapter it was started on


def test_an_adapter_swap_reaches_every_replica(replicas: ReplicaSet, tmp_path: Path) -> None:
    assert replicas.load_lora_adapter("agent", tmp_path / "a2", replace=True) == [0, 1, 2]
    answers = _ask(replicas, 9)
    assert all(a.endswith(":a2") for a in answers), answers
    assert len({a.split("@")[1] for a in answers}) == 3
    for index in range(3):  # staged under another name first, then switched, then unstaged
        record = tmp_path / f"record{index}.json"
        calls = [(c["endpoint"], c["lora_name"]) for c in lora_calls(record)]
        assert calls == [("/v1/load_lora_adapter", "agent--staged"),
                         ("/v1/load_lora_adapter", "agent"),
                         ("/v1/unload_lora_adapter", "agent--staged")]
    state = json.loads((tmp_path / "replicas.json").read_text())
    assert [r["adapters"]["agent"] for r in state["replicas"]] == [str(tmp_path / "a2")] * 3


@pytest.mark.parametrize("replicas", [1], indirect=True)  # replica 1 answers 500 to any load
def test_a_replica_that_fails_the_load_is_taken_out(replicas: ReplicaSet, tmp_path: Path) -> None:
    assert replicas.load_lora_adapter("agent", tmp_path / "a2", replace=True) == [0, 2]
    out = replicas.replicas[1]
    assert sorted(replicas.balancer.workers()) == sorted([replicas.replicas[0].url,
                                                         replicas.replicas[2].url])
    answers = _ask(replicas, 8)
    assert all(a.endswith(":a2") for a in answers), answers  # never the old adapter
    assert _port(replicas, 1) not in {a.split("@")[1].split(":")[0] for a in answers}
    # it never switched: no commit was sent to it, only the staging load it refused
    assert [c["lora_name"] for c in lora_calls(tmp_path / "record1.json")] == ["agent--staged"]
    state = json.loads((tmp_path / "replicas.json").read_text())["replicas"][1]
    assert state["in_service"] is False and state["running"] is True
    assert "could not load" in state["out_reason"] and "a2" in state["out_reason"]
    assert state["adapters"]["agent"].endswith("a1") and out.out_at is not None
    with pytest.raises(ServeError, match="load_lora_adapter"):  # it still cannot load: stays out
        replicas.readmit(1)
    assert not out.in_service and len(replicas.balancer.workers()) == 2


def test_a_load_no_replica_takes_changes_nothing(replicas: ReplicaSet, tmp_path: Path) -> None:
    with pytest.raises(BalancerError, match="none changed"):
        replicas.load_lora_adapter("agent", tmp_path / "a3-broken", replace=True)
    assert len(replicas.in_service()) == 3 and len(replicas.balancer.workers()) == 3
    assert all(a.endswith(":a1") for a in _ask(replicas, 6))
    for index in range(3):  # nothing was committed anywhere
        assert [c["lora_name"] for c in lora_calls(tmp_path / f"record{index}.json")] == [
            "agent--staged"]


@pytest.mark.slow
def test_a_replica_killed_mid_run_is_taken_out(replicas: ReplicaSet, tmp_path: Path) -> None:
    _ask(replicas, 3)
    victim = replicas.replicas[2]
    os.killpg(victim.server.process.pid, signal.SIGKILL)
    answers = _ask(replicas, 12)  # the balancer retries on the others: none fails
    deadline = time.monotonic() + 10
    while victim.in_service and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not victim.in_service, "the health check did not take the dead replica out"
    assert victim.url not in replicas.balancer.workers()
    assert "exited with code -9" in str(victim.out_reason)
    answers += _ask(replicas, 6)
    assert _port(replicas, 2) not in {a.split("@")[1].split(":")[0] for a in answers[12:]}
    state = json.loads((tmp_path / "replicas.json").read_text())
    assert [r["in_service"] for r in state["replicas"]] == [True, True, False]
    assert replicas.running
    with pytest.raises(BalancerError, match="not running"):
        replicas.readmit(2)


def test_a_canary_adapter_reaches_every_replica_and_leaves_all(replicas: ReplicaSet,
                                                              tmp_path: Path) -> None:
    # what a front proxy hands over instead of forwarding vLLM's LoRA routes to one replica
    replicas.lora_request("/v1/load_lora_adapter",
                          {"lora_name": "agent-v2", "lora_path": str(tmp_path / "a2")})
    assert "agent-v2" in replicas.served_models()
    with httpx.Client(timeout=10) as client:
        answers = [client.post(f"{replicas.base_url}/chat/completions", json={
            "model": "agent-v2", "messages": [{"role": "user", "content": "who?"}]}
        ).json()["choices"][0]["message"]["content"] for _ in range(6)]
    assert all(a.endswith(":a2") for a in answers) and len(set(answers)) == 3
    assert all(r.adapters == {"agent": str(tmp_path / "a1"), "agent-v2": str(tmp_path / "a2")}
               for r in replicas.replicas)
    replicas.lora_request("/v1/unload_lora_adapter", {"lora_name": "agent-v2"})
    assert all("agent-v2" not in r.adapters for r in replicas.replicas)
    for index in range(3):
        assert lora_calls(tmp_path / f"record{index}.json")[-1] == {
            "endpoint": "/v1/unload_lora_adapter", "lora_name": "agent-v2"}
    with pytest.raises(BalancerError, match="not a LoRA endpoint"):
        replicas.lora_request("/v1/models", {})


@pytest.mark.slow
def test_the_serve_command_runs_replicas_with_parallel_flags(tmp_path: Path, python: Path,
                                                             router: str) -> None:
    base = model_dir(tmp_path, "base")
    port = free_port("127.0.0.1")
    record = tmp_path / "record.json"
    cli = Path(sys.executable).parent / "agentic-loop"
    process = subprocess.Popen(
        [str(cli), "serve", "--model", str(base), "--name", "agent", "--port", str(port),
         "--replicas", "2", "--balancer-policy", "round_robin", "--vllm-python", str(python),
         "--vllm-router", router, "--tensor-parallel-size", "2", "--timeout", "30"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**os.environ, "STAND_IN_RECORD": str(record)})
    printed = []
    try:
        assert process.stdout is not None
        for line in process.stdout:  # until it says it serves (or exits: then it fails below)
            printed.append(line.decode())
            if b"Ctrl-C stops it" in line:
                break
        assert "on 2 replicas behind vllm-router" in "".join(printed), printed
        answers = [httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=5,
                              json={"model": "agent", "messages": []}
                              ).json()["choices"][0]["message"]["content"] for _ in range(4)]
        assert len({a.split("@")[1] for a in answers}) == 2, answers  # two replicas answer
        argv = json.loads(record.read_text())["argv"]
        assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
    finally:
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=60)[0].decode()
    assert process.returncode == 0, "".join(printed) + output
    with pytest.raises(httpx.HTTPError):  # the balancer is gone with the command
        httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2)


def test_each_replica_gets_its_own_gpus(tmp_path: Path) -> None:
    rs = ReplicaSet(tmp_path, replicas=2, device="cuda", tensor_parallel_size=2)
    assert [rs._replica_env(i) for i in range(2)] == [{"CUDA_VISIBLE_DEVICES": "0,1"},
                                                      {"CUDA_VISIBLE_DEVICES": "2,3"}]
    assert ReplicaSet(tmp_path, replicas=2, device="cpu")._replica_env(1) == {}


def test_a_commit_no_replica_takes_unloads_the_staged_copy(replicas: ReplicaSet,
                                                          tmp_path: Path) -> None:
    # without replace, "agent" is already loaded: every replica stages, then refuses the commit
    with pytest.raises(BalancerError, match="none could take it"):
        replicas.load_lora_adapter("agent", tmp_path / "a2", replace=False)
    assert len(replicas.in_service()) == 3
    for index in range(3):  # the staged copy left every replica again
        calls = [(c["endpoint"], c["lora_name"]) for c in lora_calls(tmp_path /
                                                                     f"record{index}.json")]
        assert calls == [("/v1/load_lora_adapter", "agent--staged"),
                         ("/v1/load_lora_adapter", "agent"),
                         ("/v1/unload_lora_adapter", "agent--staged")]
        models = httpx.get(f"{replicas.replicas[index].url}/v1/models", timeout=10).json()
        assert "agent--staged" not in {m["id"] for m in models["data"]}
    assert all(a.endswith(":a1") for a in _ask(replicas, 3))
