"""The distill, eval, serve and registry commands: help, one-line errors, and the registry flow."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentic_loop.cli import app

for _module in ("distill", "release", "serve"):  # they register their commands on `app`
    importlib.import_module(f"agentic_loop.cli.{_module}")

runner = CliRunner()


@pytest.mark.parametrize("command", ["distill", "eval", "serve", "register", "promote", "rollback",
                                     "registry"])
def test_every_command_has_help_with_an_example(command: str) -> None:
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0
    assert "Example" in result.output and "agentic-loop " in result.output


def _data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    row = {"messages": [{"role": "user", "content": "Hi?"},
                        {"role": "assistant", "content": "Hello."}]}
    (d / "sft.jsonl").write_text(json.dumps(row) + "\n")
    return d


@pytest.mark.parametrize(("args", "message"), [
    (["distill", "--out", "o"], "exactly one of --data"),
    (["distill", "--data", "d", "--from-trajectories", "t", "--out", "o"], "exactly one of --data"),
    (["distill", "--from-trajectories", "t", "--out", "o"], "needs --golden"),
    (["distill", "--data", "DATA", "--out", "o", "--method", "rlhf"],
     "method (--method) must be one of"),
    (["distill", "--data", "DATA", "--out", "o", "--epochs", "0"],
     "epochs (--epochs) must be positive"),
    (["distill", "--data", "DATA", "--out", "o", "--method", "dpo"], "pairs.jsonl is missing"),
    (["distill", "--data", "missing", "--out", "o"], "does not exist"),
    (["distill", "--data", "DATA", "--out", "o", "--method", "sft+dpo", "--lora", "--no-merge"],
     "unmerged LoRA"),
    (["eval", "--baseline", "local", "--candidate", "local", "--golden", "missing.jsonl"],
     "golden set missing.jsonl does not exist"),
    (["eval", "--baseline", "local", "--candidate", "x", "--golden", "g", "--arch", "cot"],
     "--arch must be one of"),
    (["promote", "v1"], "there is no registry"),
    (["rollback"], "there is no registry"),
    (["register", "nowhere"], "not a model directory"),
    (["serve", "--model", "openai:http://127.0.0.1:1/v1"], "served model"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          args: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    data = _data(tmp_path)
    result = runner.invoke(app, [str(data) if a == "DATA" else a for a in args])
    assert result.exit_code == 2, result.output
    assert "error:" in result.output and message in " ".join(result.output.split())
    assert "Traceback" not in result.output
    assert not (tmp_path / "o").exists()  # nothing half-made


def test_serve_without_vllm_says_how_to_install_it(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("this interpreter has vLLM")
    monkeypatch.chdir(tmp_path)  # no .venv-vllm here or above
    monkeypatch.delenv("AGENTIC_LOOP_VLLM_PYTHON", raising=False)
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    result = runner.invoke(app, ["serve", "--model", str(model)])
    assert result.exit_code == 2
    assert "make vllm" in " ".join(result.output.split())


def test_register_promote_rollback_and_list(tmp_path: Path) -> None:
    reg = str(tmp_path / "reg")
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(f'{{"name": "{name}"}}')
        registered = runner.invoke(app, ["register", str(tmp_path / name), "--registry", reg])
        assert registered.exit_code == 0
    promoted = runner.invoke(app, ["promote", "v1", "--registry", reg])
    assert "current: v1 (was none)" in promoted.output
    assert "current: v2 (was v1)" in runner.invoke(app, ["promote", "2", "--registry", reg]).output
    result = runner.invoke(app, ["rollback", "--registry", reg, "--reason", "worse"])
    assert result.exit_code == 0 and "current: v1 (rolled back from v2)" in result.output
    listing = runner.invoke(app, ["registry", "--registry", reg]).output
    assert "v1" in listing and "v2" in listing and "*" in listing
    history = runner.invoke(app, ["registry", "--registry", reg, "--history"]).output
    assert history.count("│ promote") == 2 and "│ rollback" in history and "worse" in history
    failed = runner.invoke(app, ["rollback", "--registry", reg])
    assert failed.exit_code == 2 and "nothing to roll back to" in failed.output


def test_the_whole_loop_is_one_improve_round_on_the_logged_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentic_loop.distill.loop import pipeline
    from agentic_loop.distill.loop.records import ImproveResult, ImproveRound, Registration

    seen: dict[str, object] = {}

    def one_round(**kwargs: object) -> ImproveResult:
        seen.update(kwargs)
        report = ImproveRound(round=1, model="local", decision="MANUAL_REVIEW",
                              reasons=["too few golden tasks"],
                              registration=Registration(version="v1", promoted=False))
        return ImproveResult(work_dir=tmp_path / "w", reports=[report], stopped="rounds",
                             reason="the round budget (1) is spent", current=None)

    monkeypatch.setattr(pipeline, "improve", one_round)
    result = runner.invoke(app, ["distill", "--from-trajectories", "logs", "--golden", "g.jsonl",
                                 "--out", str(tmp_path / "w"), "--min-score", "0.9",
                                 "--pii", "regex"])
    assert result.exit_code == 0, result.output
    settings = seen["settings"]
    assert seen["runs"] == [Path("logs")] and seen["work_dir"] == tmp_path / "w"
    assert settings.rounds == 1 and settings.thresholds == (9.0,)  # type: ignore[attr-defined]
    assert settings.export_options == {"pii": "regex"}  # type: ignore[attr-defined]
    assert settings.train_options["lora"] is False  # type: ignore[attr-defined]
    said = " ".join(result.output.split())
    assert "gate: MANUAL_REVIEW vs local; registered v1 (not promoted" in said
    assert "registry promote v1 --force" in said and "too few golden tasks" in said
