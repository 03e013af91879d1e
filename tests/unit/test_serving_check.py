"""serving.json is checked, never trusted: a reused pid, a dead server, another server on the port.

A stale record used to pass for a live server whenever its pid was alive, so
promote said "restarting on v2" about a server that did not exist, and
``registry:`` clients were sent to it for good. Here the pid of a real,
unrelated process (a ``sleep``) stands in for a reused pid, the servers are real
HTTP servers (front proxies, a socket that never answers), the registry is real.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from serve_helpers import adapter_dir, model_dir, stand_in_python
from typer.testing import CliRunner

from agentic_loop.cli import app
from agentic_loop.distill.release import Registry, ServeError, read_serving, sync_served
from agentic_loop.distill.release.front import IDENTITY_PATH, FrontProxy
from agentic_loop.distill.release.live import (
    ServingState,
    StaleServingWarning,
    check_server,
    live_server,
    write_serving,
)
from agentic_loop.distill.release.live_model import RegistryChatModel
from agentic_loop.distill.release.serve import free_port
from agentic_loop.distill.release.serve_watch import serve_registered
from agentic_loop.models import load_chat_model


@pytest.fixture()
def other_pid() -> Iterator[int]:
    """The pid of a live process that is not a serve process (what a reused pid looks like)."""
    sleeper = subprocess.Popen(["sleep", "120"])
    yield sleeper.pid
    sleeper.kill()
    sleeper.wait()


def _registry(tmp_path: Path) -> Registry:
    reg = Registry(tmp_path / "agent")
    for name in ("m1", "m2"):
        reg.register(model_dir(tmp_path, name))
    reg.promote("v1")
    return reg


def _record(reg: Registry, pid: int, url: str, token: str = "the-server-that-died") -> None:
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    write_serving(reg.root, ServingState(name="agent", url=url, port=port, pid=pid, token=token,
                                         version="v1", path="/m1", mode="model"))


def test_a_reused_pid_with_nothing_listening_is_stale_not_a_restart(
        tmp_path: Path, other_pid: int) -> None:
    reg = _registry(tmp_path)
    url = f"http://127.0.0.1:{free_port('127.0.0.1')}/v1"  # the dead server's port: closed
    _record(reg, other_pid, url)
    reg.promote("v2")  # a merged model: a live server would restart for it
    message = sync_served(reg)
    assert "restart" not in message
    assert message.startswith("no server running (removed the stale serving.json: nothing "
                              f"answers at {url.removesuffix('/v1')}{IDENTITY_PATH}")
    assert f"pid {other_pid} is alive, so it now belongs to another process" in message
    assert read_serving(reg.root) is None
    # the same through the CLI: rollback reports it too, and never claims a restart
    _record(reg, other_pid, url)
    out = CliRunner().invoke(app, ["rollback", "--registry", str(reg.root)])
    assert out.exit_code == 0, out.output
    flat = " ".join(out.output.split())
    assert "serving: no server running (removed the stale serving.json" in flat
    assert "restart" not in flat.split("serving:")[1]


@pytest.mark.parametrize("identity", [{"token": "another registry's"}, None])
def test_a_port_that_answers_without_the_token_is_stale(tmp_path: Path, other_pid: int,
                                                        identity: dict[str, str] | None) -> None:
    """Another server took the port: another registry's front (another token) or one that has
    no identity route at all (a plain vLLM answers 404)."""
    reg = _registry(tmp_path)
    port = free_port("127.0.0.1")
    with FrontProxy("127.0.0.1", port, identity=(lambda: identity) if identity else None):
        _record(reg, other_pid, f"http://127.0.0.1:{port}/v1")
        state = read_serving(reg.root)
        assert state is not None
        check = check_server(state)
        assert check.verdict == "stale"
        status = 200 if identity else 404
        assert f"answers (HTTP {status}) but not with the token" in check.reason
        assert sync_served(reg).startswith("no server running (removed the stale serving.json")
    assert read_serving(reg.root) is None


def test_registry_clients_never_use_a_stale_record(tmp_path: Path, other_pid: int) -> None:
    reg = _registry(tmp_path)
    _record(reg, other_pid, f"http://127.0.0.1:{free_port('127.0.0.1')}/v1")
    with pytest.warns(StaleServingWarning, match="removed the stale .*serving.json: nothing "
                                                 "answers"):
        llm = load_chat_model(f"registry:{reg.root}")
    assert isinstance(llm, RegistryChatModel)  # in-process on current, not the dead server
    assert read_serving(reg.root) is None


def test_a_server_that_does_not_answer_is_reported_and_left_alone(
        tmp_path: Path, other_pid: int) -> None:
    """Listening but silent (a process stuck, or far too busy): neither trusted nor removed."""
    reg = _registry(tmp_path)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # connections complete; nobody ever reads them
        _record(reg, other_pid, f"http://127.0.0.1:{silent.getsockname()[1]}/v1")
        message = sync_served(reg, check_timeout=0.5)
        assert message.startswith("the server recorded in serving.json ('agent' at http://")
        assert "did not answer its identity check" in message and "nothing was changed" in message
        assert read_serving(reg.root) is not None  # not removed: it may be alive
        with pytest.raises(ServeError, match="did not answer its identity check"):
            live_server(reg.root, timeout=0.5)


def test_serve_replaces_a_stale_record_and_answers_its_identity(
        tmp_path: Path, other_pid: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAND_IN_RECORD", str(tmp_path / "record.json"))
    python = stand_in_python(tmp_path / "vllm")
    base = model_dir(tmp_path, "base")
    reg = Registry(tmp_path / "agent")
    for name in ("a1", "a2"):
        reg.register(adapter_dir(tmp_path, name, base))
    reg.promote("v1")
    _record(reg, other_pid, f"http://127.0.0.1:{free_port('127.0.0.1')}/v1")
    with serve_registered(reg, python=python, device="cpu", timeout=30, poll_s=3600) as server:
        state = read_serving(reg.root)
        assert state is not None and state.token == server.token != "the-server-that-died"
        identity = httpx.get(f"{server.base_url.removesuffix('/v1')}{IDENTITY_PATH}").json()
        assert (identity["token"], identity["version"], identity["name"]) == (
            server.token, "v1", "agent")
        reg.promote("v2")  # swapped in by this (the promoting) process, not the server's
        assert sync_served(reg) == "adapter v2 swapped in under 'agent'"
        check = check_server(state)
        assert (check.verdict, check.version) == ("ok", "v2")  # what it serves, from the server
        with pytest.raises(ServeError, match="already served as 'agent'"):
            serve_registered(reg, python=python, device="cpu", timeout=30)
    assert read_serving(reg.root) is None


def test_an_automatic_rollback_reports_a_stale_server_instead_of_a_restart(
        tmp_path: Path, other_pid: int) -> None:
    from agentic_loop.distill.release.monitor import monitor
    from agentic_loop.trajectories import Round, Trajectory

    reg = Registry(tmp_path / "agent")
    for name in ("m1", "m2"):
        reg.register(model_dir(tmp_path, name), name="tagline")
    reg.promote("v1")
    reg.promote("v2")
    _record(reg, other_pid, f"http://127.0.0.1:{free_port('127.0.0.1')}/v1")
    runs = [Trajectory(architecture="reflection", model_id=f"tagline-{version}", task=f"t{i}",
                       rounds=[] if failed else [Round(iteration=0, draft="x", score=8.0)],
                       final_output=None if failed else "x", final_score=None if failed else 8.0,
                       accepted=not failed, latency_s=1.0,
                       errors=["ModelCallError: 500"] if failed else [])
            for version, bad in (("v1", 1), ("v2", 20)) for i in range(50)
            for failed in [i < bad]]
    report = monitor(runs, reg)
    assert report.action == "rolled back" and reg.current is not None
    assert reg.current.version == "v1"
    assert report.sync is not None and "restart" not in report.sync
    assert report.sync.startswith("no server running (removed the stale serving.json")
