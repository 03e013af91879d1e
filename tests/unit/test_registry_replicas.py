"""A registry served by 3 replicas behind vllm-router (after /tmp/h5/registry_replicas.diff):
a promote reaches every replica through the front, a replica that cannot load it is taken out
and named in replicas.json, a canary reaches the replicas in service, and a clean stop removes
the record. The replicas are the vLLM stand-in of tests/replica_helpers.py."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from replica_helpers import replica_stand_in_python
from serve_helpers import adapter_dir, model_dir

from agentic_loop.distill.release import Registry, read_serving, sync_served
from agentic_loop.distill.release.canary import CanaryState, write_canary
from agentic_loop.distill.release.front import VERSION_HEADER
from agentic_loop.distill.release.replicas import RouterNotInstalledError, find_vllm_router
from agentic_loop.distill.release.serve_watch import serve_registered


def test_promote_and_canary_reach_every_replica_in_service(tmp_path: Path) -> None:
    try:
        router = find_vllm_router()
    except RouterNotInstalledError as exc:
        pytest.skip(str(exc))
    python = replica_stand_in_python(tmp_path / "vllm")
    base = model_dir(tmp_path, "base")
    reg = Registry(tmp_path / "agent")
    for name in ("a1", "a2", "a3"):
        reg.register(adapter_dir(tmp_path, name, base))
    reg.promote("v1")

    def env(index: int) -> dict[str, str]:  # replica 2 cannot load any new adapter
        fail = {"STAND_IN_FAIL_LOADS": "1"} if index == 2 else {}
        return {"STAND_IN_RECORD": str(tmp_path / f"record{index}.json"), **fail}

    with serve_registered(reg, python=python, device="cpu", timeout=30, poll_s=3600,
                          replicas=3, policy="round_robin", router=router,
                          replica_env=env) as server:
        def ask(key: str = "k") -> tuple[str, str]:
            reply = httpx.post(f"{server.base_url}/chat/completions", timeout=10,
                               headers={"x-agentic-loop-user": key},
                               json={"model": "agent", "messages": []})
            assert reply.status_code == 200, reply.text
            return reply.headers[VERSION_HEADER], reply.json()["choices"][0]["message"]["content"]

        first = [ask()[1] for _ in range(6)]
        assert all(a.endswith(":a1") for a in first) and len(set(first)) == 3, first
        record_path = Path(str(read_serving(reg.root).replicas))  # type: ignore[union-attr]

        reg.promote("v2")
        assert sync_served(reg) == "adapter v2 swapped in under 'agent'"
        after = [ask()[1] for _ in range(6)]
        assert all(a.endswith(":a2") for a in after) and len(set(after)) == 2, after
        assert read_serving(reg.root).version == "v2"  # type: ignore[union-attr]
        record = json.loads(record_path.read_text())["replicas"]
        assert [r["in_service"] for r in record] == [True, True, False]
        assert [Path(r["adapters"]["agent"]).name for r in record] == ["a2", "a2", "a1"]

        write_canary(reg, CanaryState(candidate="v3", fraction=0.5))
        assert server.check_canary() == "canary of v3 at 0.5 against v2"
        answers = [ask(f"user-{i}") for i in range(16)]
        assert {v for v, _ in answers} == {"v2", "v3"}
        assert all(a.endswith(":a3") == (v == "v3") for v, a in answers), answers
        write_canary(reg, None)
        assert server.check_canary() == "no canary: every request goes to v2"
        record = json.loads(record_path.read_text())["replicas"]
        assert [sorted(r["adapters"]) for r in record] == [["agent"]] * 3
    assert not record_path.exists()  # removed on a clean stop
