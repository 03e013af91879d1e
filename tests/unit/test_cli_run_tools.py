"""``agentic-loop run --tools``: ready tools by name make the model an agent; mistakes in the
names are refused before the model loads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import agentic_loop.architectures  # noqa: F401 - bound to the real loader before a test patches it
import agentic_loop.models
from agentic_loop.cli import app
from agentic_loop.cli.run import build_architecture
from agentic_loop.testing import ScriptedChatModel


def build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> Any:
    model = ScriptedChatModel(responses=["x"])
    monkeypatch.setattr(agentic_loop.models, "load_chat_model", lambda spec, **_: model)
    return build_architecture("reflection", "local", archive=tmp_path / "a",
                              reflections=tmp_path / "r", trajectories=None, target_score=8.0,
                              max_iterations=1, max_tokens=16, **kw), model


def test_tools_by_name_make_the_model_an_agent(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    arch, model = build(tmp_path, monkeypatch, tools="calculator,lookup", max_steps=3)
    assert arch.agent is not None and arch.agent.kind == "tools"
    assert arch.max_steps == 3 and arch.judge_llm is model
    forced, model = build(tmp_path, monkeypatch, tools="calculator", first_tool_call=True)
    assert forced.agent is not None and forced.agent.kind == "graph"
    assert forced.judge_llm is model
    plain, _ = build(tmp_path, monkeypatch)
    assert plain.agent is None


@pytest.mark.parametrize(("args", "message"), [
    (["--tools", "abacus"], "unknown tool 'abacus'; the ready tools are calculator, lookup"),
    (["--first-tool-call"], "--first-tool-call needs --tools"),
])
def test_tool_mistakes_are_refused_before_the_model_loads(args: list[str], message: str,
                                                          tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["run", "Compute 53 * 47.", "--model", "local",
                                      "--trajectories", str(tmp_path / "t"), *args])
    assert result.exit_code == 2 and message in result.stderr
