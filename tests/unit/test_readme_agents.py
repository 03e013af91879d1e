"""The README's agents example runs as written: LangChain's ``create_agent`` with two ready
tools inside ArchiveRefine, the episode read back from the result (a scripted model stands in
for the embedded one, which ``notebooks/06_agents.ipynb`` runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage

import agentic_loop
from agentic_loop.testing import ScriptedChatModel

README = Path(__file__).resolve().parents[2] / "README.md"


def agents_block() -> str:
    section = README.read_text(encoding="utf-8").split("## Agents:", 1)[1].split("\n## ", 1)[0]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_agents_example_runs_as_written(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("langchain.agents")
    calls = AIMessage("", tool_calls=[{"name": "calculator", "args": {"expression": "53 * 47"},
                                       "id": "c1"}])
    model = ScriptedChatModel(responses=[calls, "53 * 47 = 2491."], default_structured={
        "on_task": True, "well_written": True, "overall_score": 9})

    def scripted(spec: Any, **kw: Any) -> ScriptedChatModel:
        assert spec == "local"
        return model

    monkeypatch.setattr(agentic_loop, "load_chat_model", scripted)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "readme_agents"}
    exec(compile(agents_block(), "README.md (Agents)", "exec"), namespace)  # noqa: S102
    assert namespace["result"].errors == []
    episode = namespace["episode"]
    assert namespace["result"].features["tool_called"] is True
    assert episode.tools_called == ["calculator"] and episode.model_calls == 2
    assert episode.results_of("calculator") == ["2491"]
    assert (tmp_path / "data" / "trajectories" / "trajectories.jsonl").is_file()
