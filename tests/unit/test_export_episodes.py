"""A real export of logged agent runs: TRL tool-calling rows, episode counts, and no planted secret.

The runs are written with the real :class:`TrajectoryLog` (agents' rounds hold hand-built
:class:`Episode` objects, as an agent records them) and exported by ``export_datasets``
through the regex PII gate, as ``agentic-loop export --pii regex`` does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from distill_helpers import write_log

from agentic_loop.distill import PiiGate, export_datasets
from agentic_loop.episodes import Episode, ModelStep, ToolCall, ToolStep, UserStep
from agentic_loop.memory import HashingEmbedder
from agentic_loop.trajectories import Round, Trajectory

EMAIL = "marguerite.okonkwo@example.org"
LOCAL_PART = "marguerite.okonkwo"
OPENAI_KEY = "sk-proj-4fQ9xT2mZr8LwP1vKd7sYb3NcHe6UjAq0GiRo5Tz"
AWS_KEY_ID = "AKIAQX7RZ2M4KD9WB3TN"
PLANTED = (EMAIL, LOCAL_PART, OPENAI_KEY, AWS_KEY_ID)

LOOKUP = {"type": "function", "function": {
    "name": "crm_lookup", "description": "Finds a customer's order by e-mail.",
    "parameters": {"type": "object", "properties": {"email": {"type": "string"},
                                                    "api_key": {"type": "string"}},
                   "required": ["email"]}}}
#: a tool offered to the agent whose own description names a person's mailbox
ESCALATE = {"type": "function", "function": {
    "name": "escalate", "description": f"Hands the ticket to {EMAIL}.",
    "parameters": {"type": "object", "properties": {}}}}
TASK = "When does the order of the customer in ticket 12 ship?"


def lookup_episode(result: str, answer: str, *, stop: str = "final") -> Episode:
    """The agent looks the customer up: the key and the e-mail are in the call's arguments and
    in the tool's result, a customer record."""
    args = {"email": EMAIL, "api_key": OPENAI_KEY}
    return Episode(steps=[
        ModelStep(text="Looking the customer up.",
                  tool_calls=[ToolCall(name="crm_lookup", args=args, id="call_1")]),
        ToolStep(call_id="call_1", name="crm_lookup", args=args,
                 content=f"customer: {EMAIL}; aws_key_id: {AWS_KEY_ID}; {result}"),
        ModelStep(text=answer)], final=answer, tools=[LOOKUP], stop_reason=stop)  # type: ignore


def runs() -> list[Trajectory]:
    good = "The order ships on Monday."
    refine = Trajectory(
        architecture="reflection", model_id="agent", task=TASK, latency_s=1.0,
        rounds=[Round(iteration=0, draft="It shipped last week.", score=3.0, passed=False,
                      episode=lookup_episode("ships: Monday", "It shipped last week.")),
                Round(iteration=1, draft=good, score=9.0, passed=True,
                      episode=lookup_episode("ships: Monday", good))],
        final_output=good, final_score=9.0, accepted=True)
    # a support conversation with a simulated user's turn, accepted
    chat = Episode(steps=[ModelStep(text="Which order do you mean?"),
                          UserStep(text=f"The one for {EMAIL}."),
                          *lookup_episode("ships: Monday", good).steps], final=good,
                   tools=[LOOKUP, ESCALATE])
    talk = Trajectory(architecture="reflexion", model_id="agent", task=TASK, latency_s=1.0,
                      rounds=[Round(iteration=0, draft=good, score=9.5, passed=True,
                                    episode=chat)],
                      final_output=good, final_score=9.5, accepted=True)
    # accepted by its checks, but the episode hit the step limit: never trains
    stopped = Trajectory(
        architecture="reflection", model_id="agent", task=TASK, latency_s=1.0,
        rounds=[Round(iteration=0, draft="Monday.", score=9.0, passed=True,
                      episode=lookup_episode("ships: Monday", "Monday.", stop="step_limit"))],
        final_output="Monday.", final_score=9.0, accepted=True)
    plain = Trajectory(architecture="reflection", model_id="plain", task="Say hi.",
                       latency_s=1.0, rounds=[Round(iteration=0, draft="Hi!", score=9.0,
                                                    passed=True)],
                       final_output="Hi!", final_score=9.0, accepted=True)
    return [refine, talk, stopped, plain]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("export")
    export_datasets([write_log(tmp / "logs", runs())], tmp / "out", pii=PiiGate("regex"),
                    embedder=HashingEmbedder(), dedup_threshold=None)
    return tmp / "out"


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_no_planted_value_reaches_any_exported_file(exported: Path) -> None:
    files = [p for p in exported.rglob("*") if p.is_file()]
    assert {p.name for p in files} == {"sft.jsonl", "pairs.jsonl", "manifest.json"}
    for file in files:
        data = file.read_bytes().lower()
        for value in PLANTED:
            assert value.lower().encode() not in data, (file.name, value)
    rows = (exported / "sft.jsonl").read_text()
    assert "<EMAIL_ADDRESS>" in rows and "<SECRET>" in rows  # redacted, not dropped


def test_sft_rows_are_trl_tool_calling_conversations(exported: Path) -> None:
    rows = lines(exported / "sft.jsonl")
    agents = [r for r in rows if "tools" in r]
    plain = [r for r in rows if "tools" not in r]
    assert len(agents) == 2 and len(plain) == 1
    assert all(set(m) == {"role", "content"} for m in plain[0]["messages"])
    refine = next(r for r in agents if r["metadata"]["source"] == "final"
                  and r["metadata"]["episode"].get("user_turns") is None)
    messages = refine["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    [call] = messages[2]["tool_calls"]
    assert call["type"] == "function" and call["function"]["name"] == "crm_lookup"
    assert call["function"]["arguments"] == {"email": "<EMAIL_ADDRESS>", "api_key": "<SECRET>"}
    assert messages[3]["tool_call_id"] == call["id"] and messages[3]["name"] == "crm_lookup"
    assert messages[-1] == {"role": "assistant", "content": "The order ships on Monday."}
    assert refine["tools"] == [LOOKUP]
    assert refine["metadata"]["episode"] == {"model_steps": 2, "tool_calls": 1,
                                             "tools_called": ["crm_lookup"]}
    talk = next(r for r in agents if r is not refine)
    assert [m["role"] for m in talk["messages"]][2:5] == ["assistant", "user", "assistant"]
    assert talk["metadata"]["episode"]["user_turns"] == 1
    assert talk["tools"][0] == LOOKUP  # the schemas pass the gate too, unchanged when clean
    assert talk["tools"][1]["function"]["description"] == "Hands the ticket to <EMAIL_ADDRESS>."


def test_pairs_share_the_steps_both_episodes_took(exported: Path) -> None:
    rows = lines(exported / "pairs.jsonl")
    refine = next(r for r in rows if r["metadata"]["source"] == "refine")
    assert [m["role"] for m in refine["prompt"]] == ["system", "user", "assistant", "tool"]
    assert refine["chosen"] == [{"role": "assistant", "content": "The order ships on Monday."}]
    assert refine["rejected"] == [{"role": "assistant", "content": "It shipped last week."}]
    assert refine["metadata"]["shared_steps"] == 2 and refine["tools"] == [LOOKUP]


def test_the_manifest_counts_episodes_and_broken_ones(exported: Path) -> None:
    manifest = json.loads((exported / "manifest.json").read_text())
    assert manifest["episodes"]["sft"] == {"rows": 2, "model_steps": 5, "tool_calls": 2,
                                           "user_turns": 1, "tools": {"crm_lookup": 2}}
    assert manifest["episodes"]["pairs"]["rows"] >= 1
    assert manifest["episodes"]["pairs"]["tools"]["crm_lookup"] >= 2
    assert manifest["dropped"]["sft"]["broken_episode:stopped_step_limit"] == 1
    steps = {(s["unit"], s["step"]) for s in manifest["counts"]}
    assert {("sft rows", "broken episodes"), ("sft rows", "conversation length"),
            ("pairs", "chosen broken episodes")} <= steps


def test_the_files_load_as_hugging_face_datasets(exported: Path) -> None:
    datasets = pytest.importorskip("datasets")
    sft = datasets.load_dataset("json", data_files=str(exported / "sft.jsonl"), split="train")
    pairs = datasets.load_dataset("json", data_files=str(exported / "pairs.jsonl"),
                                  split="train")
    assert len(sft) == 3 and {"messages", "tools", "metadata"} <= set(sft.column_names)
    assert {"prompt", "chosen", "rejected", "tools"} <= set(pairs.column_names)
    roles = [[m["role"] for m in row] for row in sft["messages"]]
    assert ["system", "user", "assistant", "tool", "assistant"] in roles


def test_the_cli_export_with_its_default_gate_writes_no_planted_value(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from agentic_loop.cli import app

    logs = write_log(tmp_path / "logs", runs())
    result = CliRunner().invoke(app, ["export", "-t", str(logs), "-o", str(tmp_path / "out"),
                                      "--dedup-threshold", "0"])  # --pii spacy: the default
    assert result.exit_code == 0, result.output
    assert "1 broken episode (stopped step limit)" in " ".join(result.stdout.split())
    files = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert len(files) == 3
    for file in files:
        data = file.read_bytes().lower()
        assert [v for v in PLANTED if v.lower().encode() in data] == [], file.name
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["pii"]["mode"] == "spacy"


def test_episodes_without_recorded_schemas_get_the_package_ones_or_do_not_train(
        tmp_path: Path) -> None:
    def run(tool: str) -> Trajectory:
        episode = Episode(steps=[
            ModelStep(tool_calls=[ToolCall(name=tool, args={"expression": "53*47"}, id="c")]),
            ToolStep(call_id="c", name=tool, content="2491"),
            ModelStep(text="2491")], final="2491")  # logged before episodes kept their tools
        return Trajectory(architecture="reflection", model_id="m", task=f"53*47 with {tool}?",
                          rounds=[Round(iteration=0, draft="2491", score=9.0, passed=True,
                                        episode=episode)],
                          final_output="2491", final_score=9.0, accepted=True)

    report = export_datasets([write_log(tmp_path / "logs", [run("calculator"), run("abacus")])],
                             tmp_path / "out", pii="off", dedup_threshold=None)
    [row] = lines(tmp_path / "out" / "sft.jsonl")
    assert [t["function"]["name"] for t in row["tools"]] == ["calculator"]  # the package's tool
    assert row["tools"][0]["function"]["parameters"]["properties"]
    assert report.dropped["sft"] == {"broken_episode:no_tool_schemas": 1}  # an unknown tool
