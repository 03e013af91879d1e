"""Serving: finding vLLM, the command line, and the server's life cycle (start, ready, stop, crash).

The life-cycle tests run a stand-in server executable (tests/serve_helpers.py)
that speaks the endpoints we use (``GET /v1/models``, the LoRA load/unload
calls), so they test our process handling in milliseconds;
tests/integration/test_vllm_serve.py runs real vLLM. Following a registry
(serving.json, promote, rollback) is tested in test_distill_live.py.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from serve_helpers import model_dir, stand_in_python

from agentic_loop.distill.release.registry import Registry
from agentic_loop.distill.release.serve import (
    ServeError,
    VLLMNotInstalledError,
    cpu_dtype,
    find_vllm_python,
    serve,
    vllm_command,
)
from agentic_loop.distill.release.serve_watch import serve_registered


@pytest.fixture()
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    python = stand_in_python(tmp_path)
    record = tmp_path / "record.json"
    monkeypatch.setenv("STAND_IN_RECORD", str(record))
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    monkeypatch.delenv("VLLM_USE_AOT_COMPILE", raising=False)
    return python, record


_model = model_dir


def test_serve_waits_until_ready_and_stops_cleanly(tmp_path: Path,
                                                   stand_in: tuple[Path, Path]) -> None:
    python, record = stand_in
    with serve(_model(tmp_path), name="tagline", python=python, device="cpu", timeout=30) as server:
        assert server.running
        assert server.spec == f"openai:{server.base_url}" and server.base_url.startswith("http://127.0.0.1:")
        assert server.model == "tagline" and server.served_models() == ["tagline"]
        seen = json.loads(record.read_text())
        log = server.log_path
        assert log.is_file()
    assert not server.running and server.process.returncode is not None
    assert not log.exists()  # a temporary log is removed after a clean stop
    argv = seen["argv"]
    assert argv[:2] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert argv[argv.index("--model") + 1] == str((tmp_path / "m").resolve())
    assert "--enforce-eager" not in argv and argv[argv.index("--dtype") + 1] == cpu_dtype()
    assert (seen["kv"], seen["offline"], seen["aot"]) == ("1", "1", "0")


def test_cpu_defaults_yield_to_the_callers_environment(tmp_path: Path,
                                                       stand_in: tuple[Path, Path],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    python, record = stand_in
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "3")
    with serve(_model(tmp_path), name="tagline", python=python, device="cpu", timeout=30,
               env={"VLLM_USE_AOT_COMPILE": "1"}):
        seen = json.loads(record.read_text())
    assert (seen["kv"], seen["aot"]) == ("3", "1")


def test_an_adapter_is_served_by_name_on_its_base(tmp_path: Path,
                                                  stand_in: tuple[Path, Path]) -> None:
    python, record = stand_in
    base = _model(tmp_path, "base")
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    config = {"base_model_name_or_path": str(base), "r": 32}
    (adapter / "adapter_config.json").write_text(json.dumps(config))
    with serve(adapter, name="tagline-v2", python=python, device="cpu", timeout=30) as server:
        assert server.model == "tagline-v2"
        assert server.served_models() == ["tagline-v2-base", "tagline-v2"]
    seen = json.loads(record.read_text())
    argv = seen["argv"]
    assert argv[argv.index("--model") + 1] == str(base.resolve())
    assert argv[argv.index("--lora-modules") + 1] == f"tagline-v2={adapter.resolve()}"
    assert argv[argv.index("--max-lora-rank") + 1] == "32"
    assert seen["runtime_lora"] == "True"


def test_a_crash_before_ready_reports_the_log(tmp_path: Path, stand_in: tuple[Path, Path],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    python, _ = stand_in
    monkeypatch.setenv("STAND_IN_MODE", "crash")
    with pytest.raises(ServeError,
                       match=r"(?s)exited with code 3 before it was ready.*no CPU backend") as err:
        serve(_model(tmp_path), python=python, device="cpu", timeout=30)
    _kept_log(err.value).unlink()


def test_a_server_that_never_answers_times_out_and_is_stopped(
        tmp_path: Path, stand_in: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    python, _ = stand_in
    monkeypatch.setenv("STAND_IN_MODE", "hang")
    with pytest.raises(ServeError,
                       match=r"(?s)did not become ready within 2s.*starting the stand-in") as err:
        serve(_model(tmp_path), python=python, device="cpu", timeout=2)
    _kept_log(err.value).unlink()


def _kept_log(error: BaseException) -> Path:
    """The log a failed start points to: it must still be there for the reader."""
    log = Path(str(error).split("its log (")[1].split(")")[0])
    assert log.is_file()
    return log


def test_serve_registered_uses_the_current_version(tmp_path: Path,
                                                    stand_in: tuple[Path, Path]) -> None:
    python, record = stand_in
    reg = Registry(tmp_path / "reg")
    reg.register(_model(tmp_path, "tagline"))
    reg.promote("v1")
    with serve_registered(reg, python=python, device="cpu", timeout=30) as server:
        assert server.model == "reg" and server.version == "v1"  # the stable name
    argv = json.loads(record.read_text())["argv"]
    assert argv[argv.index("--model") + 1] == str((tmp_path / "tagline").resolve())


def test_find_vllm_python_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTIC_LOOP_VLLM_PYTHON", raising=False)
    monkeypatch.chdir(tmp_path)
    if importlib.util.find_spec("vllm") is None:  # this interpreter has no vLLM of its own
        with pytest.raises(VLLMNotInstalledError, match="make vllm"):
            find_vllm_python()
    venv_python = tmp_path / ".venv-vllm" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text("#!/bin/sh\n")
    venv_python.chmod(0o755)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")  # found in a parent folder too
    assert find_vllm_python() == str(venv_python)
    monkeypatch.setenv("AGENTIC_LOOP_VLLM_PYTHON", str(tmp_path / "missing"))
    with pytest.raises(VLLMNotInstalledError,
                       match="does not exist or is not executable.*make vllm"):
        find_vllm_python()
    assert find_vllm_python(venv_python) == str(venv_python)


def test_gpu_command_has_no_cpu_only_flags() -> None:
    cmd = vllm_command("py", "/m", served_name="m", port=1, device="cuda",
                       extra_args=["--seed", "1"])
    assert "--enforce-eager" not in cmd and cmd[cmd.index("--dtype") + 1] == "auto"
    assert cmd[-2:] == ["--seed", "1"] and "--enable-lora" not in cmd
    assert "--enable-lora" in vllm_command("py", "/m", served_name="m", port=1, enable_lora=True)
    assert "--enforce-eager" in vllm_command("py", "/m", served_name="m", port=1, eager=True)


def test_serving_a_spec_with_no_weights_is_refused(stand_in: tuple[Path, Path]) -> None:
    python, _ = stand_in
    from agentic_loop.models.model_dirs import ModelDirError

    with pytest.raises(ModelDirError, match="served model"):
        serve("openai:http://127.0.0.1:1/v1", python=python)
