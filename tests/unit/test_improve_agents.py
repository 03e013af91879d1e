"""``improve`` rounds on tool tasks: the agent grows the data, the hint keeps no trace, the gate
compares agents, and the report measures tool use.

The models are scripted agents (:class:`~agentic_loop.testing.ScriptedChatModel`
answering with tool calls): a "weak" one that never calls a tool and guesses,
unless the prompt carries a hint, a "good" one that calls the calculator and
answers with its result, a "parrot" that, hinted, quotes the hint. The tools
(the package's calculator), the architectures' tool loop, the batch runner,
the export, the gate and the registry are the real ones; training is
``test_improve``'s fake that makes the trained model behave as told.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from test_improve import FAST, FakeModels

from agentic_loop.distill.loop.grow import hint_task, plain_trajectory, quotes_hint
from agentic_loop.distill.loop.improve import ImproveBackend, improve
from agentic_loop.distill.loop.records import ImproveResult, ImproveRound
from agentic_loop.distill.loop.tool_use import task_tools, tool_groups, tool_use
from agentic_loop.distill.release import Registry
from agentic_loop.episodes import Episode, ModelStep, ToolCall, ToolStep
from agentic_loop.judges import Rubric
from agentic_loop.tasks.spec import TaskSpec
from agentic_loop.tasks.tool_tasks import tool_tasks
from agentic_loop.testing import ScriptedChatModel
from agentic_loop.trajectories import Round, Trajectory, TrajectoryLog

GUESS = "I think it is 5."
POOL = tool_tasks(3, split="train", families=["product"])
GOLDEN = tool_tasks(4, split="held_out", families=["product"])
PLAIN = TaskSpec(task="plain task: answer in exactly 2 words.", constraints={"exact_words": 2},
                 id="plain0")
_FACTORS = re.compile(r"\b\d{3,4}\b")


def _no_hint(text: str) -> bool:
    """No piece of a hint in ``text``: its marker, its sentences."""
    return "Hint:" not in text and "earlier answer" not in text and "Fix these" not in text


def _agent(kind: str) -> Callable[[list[Any]], AIMessage | str]:
    """A scripted agent's reply to the conversation so far."""
    def reply(messages: list[Any]) -> AIMessage | str:
        if isinstance(messages[-1], ToolMessage):  # the tool answered: say its result
            return f"The product is {messages[-1].content}."
        asked = "\n".join(str(m.content) for m in messages if isinstance(m, HumanMessage))
        hinted = "Hint:" in asked
        factors = _FACTORS.findall(asked.split("Hint:")[0])
        if len(factors) < 2:  # a plain task
            return "two words" if kind == "good" or hinted else "one"
        if kind == "parrot" and hinted:
            return "Hint: an earlier answer was \"I think it is 5.\" so I fix it."
        if kind == "good" or hinted:
            return AIMessage("", tool_calls=[{"name": "calculator", "id": "call_1", "args": {
                "expression": f"{factors[0]} * {factors[1]}"}}])
        return GUESS
    return reply


class AgentModels(FakeModels):
    """``test_improve``'s fake models and training, answering as scripted agents."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.made: list[ScriptedChatModel] = []
        self.gated: list[ScriptedChatModel] = []

    def chat(self, spec: str, temperature: float, max_tokens: int) -> ScriptedChatModel:
        self.chat_calls += 1
        self.made.append(ScriptedChatModel(default=_agent(self.kind(spec))))
        return self.made[-1]

    def backend(self) -> ImproveBackend:
        def gate_model(spec: str) -> ScriptedChatModel:
            self.gated.append(ScriptedChatModel(default=_agent(self.kind(spec))))
            return self.gated[-1]
        return ImproveBackend(chat=self.chat, train=self.train, gate_model=gate_model)


def _run(tmp_path: Path, models: FakeModels, pool: list[TaskSpec] | None = None,
         **options: Any) -> ImproveResult:
    return improve(pool or POOL, golden=GOLDEN, registry=tmp_path / "reg",
                   work_dir=tmp_path / "work", backend=models.backend(), max_steps=3,
                   **{**FAST, **options})


def test_grow_runs_tool_tasks_through_the_agent_and_the_gate_compares_agents(
        tmp_path: Path) -> None:
    models = AgentModels(base="weak", trained=["good"])
    result = _run(tmp_path, models, pool=[*POOL, PLAIN])
    report = result.reports[0]
    round_dir = tmp_path / "work" / "round-001"

    grown = TrajectoryLog(round_dir / "grown").read()
    assert len(grown) == 8  # 4 tasks x 2 samples
    for run in grown:
        tag = run.metadata["improve"]
        if tag["task_id"] == PLAIN.id:  # a plain task in the pool runs as before
            assert "tools" not in tag and run.rounds[0].episode is None
        else:
            episode = run.rounds[0].episode
            assert tag["tools"] == ["calculator", "lookup"] and episode is not None
            assert episode.final == GUESS and episode.model_calls == 1
            assert {t["function"]["name"] for t in episode.tools or []} >= {"calculator"}

    # every task failed, so every one was hinted; the tool tasks were never told the answer
    assert report.hint is not None and report.hint.retried == 4 and report.hint.accepted == 4
    assert report.hint.rationalized == 0 and report.hint.echoed == 0
    asked = ["\n".join(str(x.content) for x in c.messages if isinstance(x, HumanMessage))
             for m in models.made for c in m.calls]
    hinted_prompts = [p for p in asked if "Hint:" in p]
    assert len(hinted_prompts) >= 3
    for task in POOL:
        assert not any(task.metadata["answer_text"] in p for p in hinted_prompts)
    hinted = TrajectoryLog(round_dir / "hinted").read()
    for run in hinted:
        assert _no_hint(run.model_dump_json()) and run.accepted
        if run.metadata["improve"]["task_id"] != PLAIN.id:
            episode = run.rounds[0].episode
            assert episode is not None and episode.tools_called == ["calculator"]
            assert run.task in {t.task for t in POOL}
    assert _no_hint((round_dir / "data" / "sft.jsonl").read_text())

    agent = report.agent
    assert agent is not None and agent.grown is not None
    assert agent.grown.tasks == 3 and agent.grown.tool_use.pass_rate == 0.0  # the weak guess
    assert agent.grown.validity.n == 0 and agent.grown.steps.mean == 1.0
    assert agent.baseline is not None and agent.candidate is not None
    assert agent.baseline.tool_use.pass_rate == 0.0 and agent.candidate.tool_use.pass_rate == 1.0
    assert agent.candidate.validity.pass_rate == 1.0 and agent.candidate.steps.mean == 2.0

    # agent against agent: the good agent passes every golden task, the weak one none; the
    # single-shot answers (no tools: the good model only asks for a call) decide nothing
    golden = report.golden
    assert golden is not None and golden.candidate.pass_rate == 1.0
    assert golden.baseline.pass_rate == 0.0
    assert report.decision == "PROMOTE"
    assert any("single-shot without tools" in r for r in report.reasons)
    evaluation = json.loads((round_dir / "eval.json").read_text())
    assert evaluation["architecture"]["decision"] == "PROMOTE"
    assert evaluation["single_shot"]["decision"] != "PROMOTE"

    saved = json.loads((tmp_path / "work" / "improve.json").read_text())["rounds"][0]
    assert saved["agent"]["candidate"]["tool_use"]["pass_rate"] == 1.0
    assert ImproveRound.model_validate(saved) == report
    assert "tool use 100%" in report.details()
    promote = [e for e in Registry(tmp_path / "reg").history() if e.action == "promote"][0]
    assert "agent tool use 0% [0-49%] -> 100% [51-100%]" in (promote.reason or "")


def test_first_tool_call_forces_the_grown_episodes_but_never_the_gate(tmp_path: Path) -> None:
    models = AgentModels(base="good", trained=["good"])
    report = _run(tmp_path, models, first_tool_call=True).reports[0]
    calls = [c for m in models.made for c in m.calls]
    forced = [c for c in calls if c.kwargs.get("tool_choice") == "any"]
    assert len(calls) == 12 and len(forced) == 6  # each grown episode's first call of two
    assert all(isinstance(c.messages[-1], HumanMessage) for c in forced)
    gate = [c for m in models.gated for c in m.calls if c.kwargs.get("tools")]
    assert len(gate) == 16 and all(c.kwargs.get("tool_choice") is None for c in gate)
    assert report.agent is not None and report.agent.grown is not None
    assert report.agent.grown.tool_use.pass_rate == 1.0


def test_a_hinted_draft_that_quotes_the_hint_is_dropped_from_the_record(tmp_path: Path) -> None:
    models = AgentModels(base="parrot", trained=["good"])
    result = _run(tmp_path, models)
    report = result.reports[0]
    assert report.hint is not None and report.hint.echoed == 3 and report.hint.accepted == 0
    assert "3 quoted the hint" in report.details()
    for run in TrajectoryLog(tmp_path / "work" / "round-001" / "hinted").read():
        assert run.rounds == [] and run.final_output is None
        assert run.metadata["improve"]["hint_echo"] == 1
        assert _no_hint(run.model_dump_json())


def test_a_plain_round_reports_no_agent(tmp_path: Path) -> None:
    plain = [PLAIN.model_copy(update={"task": f"plain task {i}: answer in exactly 2 words.",
                                      "id": f"p{i}"}) for i in range(3)]
    golden = [t.model_copy(update={"task": t.task.replace("plain", "gold"), "id": f"g{i}"})
              for i, t in enumerate(plain + [PLAIN])]
    models = AgentModels(base="weak", trained=["good"])
    result = improve(plain, golden=golden, registry=tmp_path / "reg", work_dir=tmp_path / "w",
                     backend=models.backend(), **dict[str, Any](FAST))
    report = json.loads((tmp_path / "w" / "round-001" / "report.json").read_text())
    assert result.reports[0].agent is None and "agent" not in report
    assert "echoed" in report["hint"] and report["decision"] == "PROMOTE"


def test_an_echo_in_an_episode_step_or_tool_argument_is_found() -> None:
    spec = POOL[0]
    hinted = hint_task(spec, GUESS, give_answer=False)
    assert spec.metadata["answer_text"] not in hinted
    quoted = "An earlier answer was 'I think it is 5'"
    rubric = spec.rubric()
    assert rubric is not None
    for episode in (
            Episode(steps=[ModelStep(text=f"They said: {quoted}.")], final="12"),
            Episode(steps=[ModelStep(tool_calls=[ToolCall(name="python", id="1",
                                                          args={"code": f"print('{quoted}')"})]),
                           ToolStep(call_id="1", name="python", content=quoted)], final="12")):
        run = Trajectory(architecture="reflection", model_id="m", task=hinted, final_output="12",
                         rounds=[Round(iteration=0, draft="12", episode=episode)])
        plain = plain_trajectory(run, spec, rubric, hinted_task=hinted)
        assert plain.rounds == [] and plain.metadata["improve"]["hint_echo"] == 1
    clean = Episode(steps=[ModelStep(text="Let me multiply.")], final="12")
    assert quotes_hint([clean.final, "Let me multiply."], hinted, spec.task) is None
    # what the plain prompt says too (a requirement the hint repeats) is no echo
    said = "I give the final answer as the last number in your reply: 12"
    assert quotes_hint([said], hinted, spec.task) is not None
    assert quotes_hint([said], hinted, spec.task, plain=spec.task + "\n- " + said[2:-4]) is None
    # a task that itself says "hint" does not make every answer an echo
    task = "Give a hint for the word apple in 2 words."
    hinted = hint_task(TaskSpec(task=task, rubric=Rubric.for_constraints(exact_words=2)), "x")
    assert quotes_hint(["A hint: fruit."], hinted, task) is None


def test_tool_use_counts_failed_and_unrun_calls_as_invalid() -> None:
    calls = [ToolCall(name="calculator", id="1"), ToolCall(name="calculator", id="2")]
    episode = Episode(steps=[ModelStep(tool_calls=calls),
                             ToolStep(call_id="1", name="calculator", content="4"),
                             ToolStep(call_id="2", name="calculator", error="bad expression"),
                             ModelStep(tool_calls=[ToolCall(name="lookup", id="3")])],
                      stop_reason="step_limit")

    def run(ep: Episode | None, accepted: bool, output: str | None = "x") -> Trajectory:
        return Trajectory(architecture="a", model_id="m", task="t", final_output=output,
                          accepted=accepted, final_score=10.0 if accepted else 1.0,
                          rounds=[Round(iteration=0, draft=output or "", episode=ep,
                                        score=10.0 if accepted else 1.0, passed=accepted)])

    stats = tool_use({"a": [run(None, False), run(episode, True)],  # the accepted one counts
                      "b": [run(Episode(steps=[ModelStep(text="x")], final="x"), False)],
                      "c": [run(None, False, None)]})  # no answer: not counted
    assert stats.tasks == 3 and stats.tool_use.n == 2 and stats.tool_use.passed == 1
    assert (stats.validity.passed, stats.validity.n) == (1, 3)
    assert stats.steps.mean == 1.5


def test_tasks_read_back_from_a_file_get_their_tools_by_name(tmp_path: Path) -> None:
    from agentic_loop.distill.loop.pool import write_pool
    from agentic_loop.tasks.spec import load_tasks

    write_pool(tmp_path / "pool.jsonl", [*POOL[:2], PLAIN])
    read = load_tasks(tmp_path / "pool.jsonl")
    assert [[t.name for t in task_tools(s)] for s in read] == [["calculator", "lookup"]] * 2 + [[]]
    assert [ix for _, ix in tool_groups(read)] == [[0, 1], [2]]
    assert [ix for _, ix in tool_groups([*POOL[:2], PLAIN])] == [[0, 1], [2]]


def test_the_cli_passes_the_agent_flags_and_prints_the_tool_use(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    from typer.testing import CliRunner

    from agentic_loop.cli import app
    from agentic_loop.distill.loop.records import AgentStats, MeanScore, Rate, ToolUse

    seen: dict[str, Any] = {}
    use = ToolUse(tasks=4, tool_use=Rate.of(3, 4), validity=Rate.of(3, 3),
                  steps=MeanScore.of([2.0, 2.0, 2.0, 1.0]))

    def one_round(*args: Any, **kwargs: Any) -> ImproveResult:
        seen.update(kwargs)
        report = ImproveRound(round=1, model="local", agent=AgentStats(candidate=use))
        return ImproveResult(work_dir=tmp_path, reports=[report], stopped="rounds",
                             reason="the round budget (1) is spent", current=None)

    loop = importlib.import_module("agentic_loop.distill.loop.improve")  # the package's name
    monkeypatch.setattr(loop, "improve", one_round)  # is the function: patch the module
    result = CliRunner().invoke(app, ["improve", "--tasks", "pool.jsonl", "--golden", "g.jsonl",
                                      "--max-steps", "3", "--first-tool-call"])
    assert result.exit_code == 0, result.output
    assert seen["settings"].max_steps == 3 and seen["settings"].first_tool_call is True
    said = " ".join(result.output.split())
    assert "gate candidate: tool use 75%, valid calls 100% (3/3), 1.8 model steps/task" in said


def test_logged_agent_runs_give_a_pool_of_tool_tasks(tmp_path: Path) -> None:
    from agentic_loop.distill.loop.pool import trajectory_pool
    from agentic_loop.distill.loop.state import Watermark

    def logged(task: str, *tools: str) -> Trajectory:
        offered = [{"type": "function", "function": {"name": n}} for n in tools]
        episode = Episode(steps=[ModelStep(text="x")], final="x", tools=offered) if tools else None
        return Trajectory(architecture="reflection", model_id="m", task=task, final_output="x",
                          rounds=[Round(iteration=0, draft="x", episode=episode)])

    log = TrajectoryLog(tmp_path / "logs")
    for run in (logged("What is 123 * 456? Answer in exactly 1 word.", "calculator", "lookup"),
                logged("Say hi in exactly 2 words."),
                logged("Look up order 7 in exactly 3 words.", "orders_db")):
        log.append(run)
    found = trajectory_pool([log.dir], Watermark(), [])
    assert [s.metadata.get("tools") for s in found.tasks] == [["calculator", "lookup"], None, None]
    assert [[t.name for t in task_tools(s)] for s in found.tasks] == [["calculator", "lookup"],
                                                                       [], []]
