"""Serving a registry under one stable name that promote and rollback never change.

serving.json, sync_served (no server, a dead pid, an adapter swap, a merged-model restart,
a failed swap), the serve process's watcher, the CLI output, and ``registry:<dir>`` specs,
against a real registry and a stand-in vLLM (tests/serve_helpers.py: a real HTTP server in a
real child process). The real vLLM is tests/integration/test_vllm_serve.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import BaseModel
from serve_helpers import adapter_dir, lora_calls, model_dir, stand_in_python
from typer.testing import CliRunner

from agentic_loop.cli import app
from agentic_loop.distill.release import Registry, ServeError, read_serving, sync_served
from agentic_loop.distill.release.live import ServingState, write_serving
from agentic_loop.distill.release.live_model import RegistryChatModel
from agentic_loop.distill.release.serve_watch import RegistryServer, serve_registered
from agentic_loop.models import ModelLoadError, load_chat_model, model_id_of, resolve_model_dir
from agentic_loop.testing import ScriptedChatModel


@pytest.fixture()
def python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STAND_IN_RECORD", str(tmp_path / "record.json"))
    return stand_in_python(tmp_path / "vllm")


def _record(tmp_path: Path) -> Path:
    return tmp_path / "record.json"


def _starts(tmp_path: Path) -> list[str]:
    return (tmp_path / "record.json.starts").read_text().split()


def _serve(reg: Registry, python: Path, version: str = "current", **kw: object) -> RegistryServer:
    # poll_s: the tests drive the watcher through check(), so no thread races them
    return serve_registered(reg, version, python=python, device="cpu", timeout=30, poll_s=3600,
                            **kw)


def _adapters(tmp_path: Path, *names: str, rank: int = 8) -> Registry:
    base = model_dir(tmp_path, "base")
    reg = Registry(tmp_path / "agent")
    for name in names:
        reg.register(adapter_dir(tmp_path, name, base, rank=rank))
    return reg


def test_no_server_and_a_dead_pid(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "reg")
    reg.register(model_dir(tmp_path))
    reg.promote("v1")
    assert sync_served(reg) == "no server running"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    write_serving(reg.root, ServingState(name="reg", url="http://127.0.0.1:9/v1", port=9,
                                         pid=int(dead.stdout), token="t", version="v1",
                                         path="/x", mode="model"))
    assert sync_served(reg) == (
        f"no server running (removed the stale serving.json: its serve process, pid "
        f"{dead.stdout.strip()}, has exited); start one with `agentic-loop serve`")
    assert read_serving(reg.root) is None


def test_serving_json_records_the_stable_name_and_goes_on_exit(tmp_path: Path,
                                                               python: Path) -> None:
    reg = Registry(tmp_path / "agent")
    reg.register(model_dir(tmp_path, "m1"))
    reg.promote("v1")
    with _serve(reg, python) as server:
        state = read_serving(reg.root)
        assert state is not None and state.pid == os.getpid() and state.token == server.token
        assert (state.name, state.version, state.mode, state.state, state.follow) == (
            "agent", "v1", "model", "ready", True)
        assert state.url == server.base_url and str(state.port) in state.url
        assert server.served_models() == ["agent"]
        assert sync_served(reg) == "v1 already served under 'agent'"
        with pytest.raises(ServeError, match="already served as 'agent'.*stop it first"):
            _serve(reg, python)
    assert read_serving(reg.root) is None and not server.running


def test_promote_swaps_an_adapter_in_under_the_same_name(tmp_path: Path, python: Path) -> None:
    reg = _adapters(tmp_path, "a1", "a2", "a3")
    reg.promote("v1")
    with _serve(reg, python, name="tagline") as server:
        assert server.served_models() == ["tagline-base", "tagline"]
        reg.promote("v2")
        assert sync_served(reg) == "adapter v2 swapped in under 'tagline'"
        assert lora_calls(_record(tmp_path)) == [{
            "endpoint": "/v1/load_lora_adapter", "lora_name": "tagline",
            "lora_path": str(tmp_path / "a2"), "load_inplace": True}]
        state = read_serving(reg.root)
        assert state is not None and (state.version, state.path) == ("v2", str(tmp_path / "a2"))
        assert server.check() == "v2 already served under 'tagline'"  # the watcher sees it
        assert server.version == "v2"
        reg.rollback()  # the watcher alone follows a rollback, no restart
        assert server.check() == "adapter v1 swapped in under 'tagline'"
        assert server.served_models() == ["tagline-base", "tagline"]
    assert _starts(tmp_path) == [str((tmp_path / "base").resolve())]  # one vLLM start in all


@pytest.mark.parametrize("swap", ["side-by-side", "restart"])
def test_a_merged_model_gets_a_new_vllm_behind_the_same_port(tmp_path: Path, python: Path,
                                                             swap: str) -> None:
    reg = Registry(tmp_path / "agent")
    for name in ("m1", "m2", "broken"):
        reg.register(model_dir(tmp_path, name))
    reg.promote("v1")
    with _serve(reg, python, swap=swap) as server:
        port = read_serving(reg.root).port  # type: ignore[union-attr]
        first = server.server.process.pid
        reg.promote("v2")
        assert sync_served(reg).startswith("restarting on v2: the serve process")
        how = "beside" if swap == "side-by-side" else "after"
        assert server.check() == f"restarted on v2 under 'agent' ({how} v1)"
        state = read_serving(reg.root)
        assert state is not None and (state.version, state.port, state.state) == ("v2", port,
                                                                                   "ready")
        assert server.served_models() == ["agent"] and server.server.process.pid != first
        assert _ask(server) == "m2"
        reg.promote("v3")  # does not start: back on v2, remembered, not retried
        assert server.check() is not None and server.version == "v2" and server.running
        state = read_serving(reg.root)
        assert state is not None and (state.version, state.failed) == ("v2", "v3")
        assert "exited with code 3" in (state.error or "")
        assert sync_served(reg).startswith("v3 could not be put live")
        assert _ask(server) == "m2"
    starts = [Path(p).name for p in _starts(tmp_path)]
    # side by side, v2 never stopped for v3; in place, it was, and came back
    assert starts == ["m1", "m2", "broken"] + (["m2"] if swap == "restart" else [])


def _ask(server: RegistryServer) -> str:
    return str(server.chat_model(max_retries=0).invoke("which model?").content)


@pytest.mark.parametrize("swap", ["side-by-side", "restart"])
def test_no_request_fails_while_a_merged_model_takes_over(
        tmp_path: Path, python: Path, monkeypatch: pytest.MonkeyPatch, swap: str) -> None:
    import threading

    reg = Registry(tmp_path / "agent")
    for name in ("m1", "m2"):
        reg.register(model_dir(tmp_path, name))
    reg.promote("v1")
    monkeypatch.setenv("STAND_IN_ANSWER_S", "0.05")  # requests are running at the switch
    with _serve(reg, python, swap=swap) as server:
        monkeypatch.setenv("STAND_IN_START_S", "1.0")  # the new vLLM takes a while to start
        answers: list[str] = []
        failures: list[BaseException] = []
        done = threading.Event()

        def client() -> None:
            llm = server.chat_model(max_retries=0)  # a failed request would show, not retry
            while not done.is_set():
                try:
                    answers.append(str(llm.invoke("which model?").content))
                except Exception as exc:  # noqa: BLE001 - every failure is the test's finding
                    failures.append(exc)

        clients = [threading.Thread(target=client) for _ in range(4)]
        for c in clients:
            c.start()
        deadline = time.monotonic() + 10
        while len(answers) < 8 and time.monotonic() < deadline:  # v1 is answering
            time.sleep(0.01)
        reg.promote("v2")
        assert server.check().startswith("restarted on v2")  # type: ignore[union-attr]
        settled = len(answers)
        time.sleep(0.3)
        done.set()
        for c in clients:
            c.join()
    assert not failures, failures[:3]
    assert answers.count("m1") > 4 and set(answers[settled + 4:]) == {"m2"}


def test_an_adapter_vllm_refuses_is_reported_and_the_old_one_serves(tmp_path: Path,
                                                                     python: Path) -> None:
    reg = _adapters(tmp_path, "a1", "broken")
    reg.promote("v1")
    with _serve(reg, python):
        reg.promote("v2")
        message = sync_served(reg)
        assert message.startswith("could not swap v2 in") and "still serving v1" in message
        state = read_serving(reg.root)
        assert state is not None and (state.version, state.failed) == ("v1", "v2")


def test_a_fixed_version_does_not_follow(tmp_path: Path, python: Path) -> None:
    reg = Registry(tmp_path / "agent")
    reg.register(model_dir(tmp_path, "m1"))
    reg.register(model_dir(tmp_path, "m2"))
    reg.promote("v2")
    with _serve(reg, python, version="v1") as server:
        assert (server.model, server.version, server.follow) == ("agent", "v1", False)
        assert "does not follow promote" in sync_served(reg)
        # it does not serve current: registry: loads current (v2) in-process instead
        assert isinstance(load_chat_model(f"registry:{reg.root}"), RegistryChatModel)


def test_cli_promote_and_rollback_say_what_the_server_did(tmp_path: Path, python: Path) -> None:
    reg = _adapters(tmp_path, "a1", "a2")
    runner = CliRunner()
    out = runner.invoke(app, ["promote", "v1", "--registry", str(reg.root)])
    assert out.exit_code == 0 and "serving: no server running" in out.output
    with _serve(reg, python):
        out = runner.invoke(app, ["promote", "v2", "--registry", str(reg.root)])
        assert out.exit_code == 0, out.output
        assert "current: v2 (was v1)" in out.output
        assert "serving: adapter v2 swapped in under 'agent'" in out.output
        out = runner.invoke(app, ["rollback", "--registry", str(reg.root)])
        assert "serving: adapter v1 swapped in under 'agent'" in out.output


def test_registry_spec_goes_through_the_live_server(tmp_path: Path, python: Path) -> None:
    reg = Registry(tmp_path / "agent")
    reg.register(model_dir(tmp_path, "m1"))
    reg.promote("v1")
    with _serve(reg, python) as server:
        llm = load_chat_model(f"registry:{reg.root}", temperature=0.0)
        assert model_id_of(llm) == "agent"
        assert llm.openai_api_base == server.base_url  # type: ignore[attr-defined]
    assert isinstance(load_chat_model(f"registry:{reg.root}"), RegistryChatModel)  # no server
    assert resolve_model_dir(f"registry:{reg.root}") == tmp_path / "m1"


class Verdict(BaseModel):
    ok: bool


def test_in_process_registry_model_follows_promote_and_rollback(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "agent")
    for name in ("m1", "m2"):
        reg.register(model_dir(tmp_path, name))
    reg.promote("v1")
    loads: list[str] = []

    def loader(path: str) -> ScriptedChatModel:
        loads.append(Path(path).name)
        name = Path(path).name
        return ScriptedChatModel(default=f"from {name}",
                                 structured={"*": [{"ok": name == "m2"}] * 10})

    llm = RegistryChatModel(registry=str(reg.root), loader=loader)
    judge = llm.with_structured_output(Verdict)
    assert llm.invoke("hi").content == "from m1" and judge.invoke("x") == Verdict(ok=False)
    assert [m.content for m in llm.batch(["a", "b"])] == ["from m1", "from m1"]
    reg.promote("v2")
    assert llm.invoke("hi").content == "from m2" and judge.invoke("x") == Verdict(ok=True)
    assert model_id_of(llm) == "agent@v2"
    reg.rollback()
    assert llm.invoke("hi").content == "from m1"
    assert loads == ["m1", "m2", "m1"]  # loaded only when current moved


def test_registry_spec_errors(tmp_path: Path) -> None:
    from agentic_loop.distill.release import RegistryError

    with pytest.raises(ModelLoadError, match="no model registry at"):
        load_chat_model(f"registry:{tmp_path / 'missing'}")
    reg = _adapters(tmp_path, "a1")
    with pytest.raises(RegistryError, match="no current version yet"):
        load_chat_model(f"registry:{reg.root}")
    reg.promote("v1")
    llm = load_chat_model(f"registry:{reg.root}")
    # The stand-in adapter has no weights: in-process loading names it and its base.
    with pytest.raises(ModelLoadError, match=r"could not load the LoRA adapter in .*a1 on its"):
        llm.invoke("hi")
    index = json.loads(reg.index_path.read_text())
    assert index["current"] == "v1"  # nothing was changed by the failed load


def test_the_watcher_thread_follows_current_by_itself(tmp_path: Path, python: Path) -> None:
    import time

    reg = Registry(tmp_path / "agent")
    reg.register(model_dir(tmp_path, "m1"))
    reg.register(model_dir(tmp_path, "m2"))
    reg.promote("v1")
    with serve_registered(reg, python=python, device="cpu", timeout=30, poll_s=0.1) as server:
        reg.promote("v2")  # nobody calls sync_served or check(): the thread restarts vLLM
        deadline = time.monotonic() + 30
        while server.version != "v2" and time.monotonic() < deadline:
            time.sleep(0.1)
        state = read_serving(reg.root)
        assert server.version == "v2" and state is not None and state.state == "ready"
        assert server.served_models() == ["agent"]
    assert [Path(p).name for p in _starts(tmp_path)] == ["m1", "m2"]


def test_a_restart_that_leaves_nothing_to_serve_is_an_error(
        tmp_path: Path, python: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reg = Registry(tmp_path / "agent")
    reg.register(model_dir(tmp_path, "m1"))
    reg.register(model_dir(tmp_path, "m2"))
    reg.promote("v1")
    server = _serve(reg, python, swap="restart")  # v1 stops before v2 starts
    monkeypatch.setenv("STAND_IN_MODE", "crash")  # from now on no start succeeds
    reg.promote("v2")
    with pytest.raises(ServeError, match="exited with code 3"):
        server.check()
    with pytest.raises(ServeError, match="v2 did not start .* neither did v1 again"):
        server.wait()
    assert read_serving(reg.root) is None and not server.running
