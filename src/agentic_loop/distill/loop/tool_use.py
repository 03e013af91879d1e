"""Agent rounds: the tools a pool or golden task gives the agent, how the agent is built, and
what its episodes show (tool-use rate, tool-call validity, model steps per task).

Why a module: an improve round on tool tasks runs the *agent* wherever a
plain round runs the model (grow, hint retry, the gate), and each of those
stages must find a task's tools the same way and build the agent the same
way; and the round report measures the same three things of the grown data
and of the gate's two agents, so the numbers compare.

* **A task's tools**: a :class:`~agentic_loop.tasks.tool_tasks.ToolTask`
  carries them (``tools``); a task read back from a file (the round's
  ``pool.jsonl``, a golden file) keeps only their names in
  ``metadata["tools"]``, resolved with :func:`~agentic_loop.tools.ready_tools`.
  A task with neither is a plain task and runs as it always did.
* **The agent**: the chat model with ``tools=`` (the package's tool loop),
  at most ``max_steps`` model calls an episode; with ``first_tool_call``, the
  episode's first model call must be a tool call (``tool_agent(...,
  first_tool_choice="any")``: a small model seldom opens with one by itself).
* **What the episodes show** (:func:`tool_use`): per task, the episode of its
  answer (the accepted run's, else the best run's final round); the share of
  tasks whose answer came from an episode that called a tool, the share of
  requested tool calls that ran without an error, and the mean model calls.

Example:
    >>> from agentic_loop.tasks.spec import TaskSpec
    >>> [t.name for t in task_tools(TaskSpec(task="2+2?", metadata={"tools": ["calculator"]}))]
    ['calculator']
    >>> task_tools(TaskSpec(task="Say hi.")), tool_names(TaskSpec(task="Say hi."))
    ((), ())
    >>> from agentic_loop.trajectories import Round, Trajectory
    >>> from agentic_loop.episodes import Episode, ModelStep, ToolCall, ToolStep
    >>> ep = Episode(steps=[ModelStep(tool_calls=[ToolCall(name="calculator", id="1")]),
    ...                     ToolStep(call_id="1", name="calculator", content="4"),
    ...                     ModelStep(text="4")], final="4")
    >>> run = Trajectory(architecture="reflection", model_id="m", task="2+2?", final_output="4",
    ...                  accepted=True, rounds=[Round(iteration=0, draft="4", score=10.0,
    ...                                               passed=True, episode=ep)])
    >>> stats = tool_use({"t1": [run]})
    >>> stats.tool_use.pass_rate, stats.validity.pass_rate, stats.steps.mean
    (1.0, 1.0, 2.0)
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool

from agentic_loop.agents import agent_options
from agentic_loop.architectures.results import RunResult, best_round
from agentic_loop.distill.loop.records import MeanScore, Rate, ToolUse
from agentic_loop.episodes import Episode
from agentic_loop.errors import ConfigError
from agentic_loop.tasks.spec import TaskSpec
from agentic_loop.trajectories import Trajectory

__all__ = ["AgentGate", "any_tools", "answer_episode", "task_tools",
           "tool_groups", "tool_names", "tool_use"]


def task_tools(spec: TaskSpec) -> tuple[BaseTool, ...]:
    """The tools ``spec`` gives the agent: its own (a ToolTask), else the ready tools its
    ``metadata["tools"]`` names; ``()`` for a plain task.

    >>> task_tools(TaskSpec(task="2+2?", id="p1", metadata={"tools": ["abacus"]}))
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: task 'p1' names tools the package cannot give ...
    """
    own = tuple(getattr(spec, "tools", ()) or ())
    if own:
        return own
    names = spec.metadata.get("tools")
    if not names:
        return ()
    from agentic_loop.tools import ready_tools

    try:
        return tuple(ready_tools(names if isinstance(names, (str, list, tuple)) else str(names)))
    except ConfigError as exc:
        raise ConfigError(
            f"task {spec.id or spec.task[:60]!r} names tools the package cannot give in "
            f'metadata["tools"] ({names!r}): {exc}; name ready tools there, or pass the task '
            "as a ToolTask that carries its tools") from None


def tool_names(spec: TaskSpec) -> tuple[str, ...]:
    """The names of :func:`task_tools` (the key that groups tasks run by one agent)."""
    return tuple(t.name for t in task_tools(spec))


def tool_groups(specs: Sequence[TaskSpec]) -> list[tuple[tuple[BaseTool, ...], list[int]]]:
    """The tasks (by index) that one agent runs: those giving the same tools, in first-seen order.

    Tasks naming ready tools share one set of them; a ToolTask's own tools are
    grouped by the objects themselves (two lookups over other tables differ).
    Plain tasks form the group with no tools.

    >>> specs = [TaskSpec(task="a", metadata={"tools": ["calculator"]}), TaskSpec(task="b"),
    ...          TaskSpec(task="c", metadata={"tools": "calculator"})]
    >>> [([t.name for t in tools], ix) for tools, ix in tool_groups(specs)]
    [(['calculator'], [0, 2]), ([], [1])]
    """
    groups: dict[tuple[Any, ...], tuple[tuple[BaseTool, ...], list[int]]] = {}
    for i, spec in enumerate(specs):
        own = tuple(getattr(spec, "tools", ()) or ())
        key: tuple[Any, ...] = (("own", *map(id, own)) if own else
                                ("named", *(t.name for t in task_tools(spec))))
        if key not in groups:
            groups[key] = (task_tools(spec), [])
        groups[key][1].append(i)
    return list(groups.values())


def any_tools(specs: Sequence[TaskSpec]) -> bool:
    """Whether any task gives the agent tools (the round is then an agent round)."""
    return any(task_tools(s) for s in specs)


def answer_episode(run: Trajectory) -> Episode | None:
    """The episode of a run's answer: its final round's (the best round), if it has one."""
    if run.final_output is None:
        return None
    final = best_round(run.rounds)
    return final.episode if final is not None else None


def _answer_run(runs: Sequence[Trajectory]) -> Trajectory | None:
    """A task's answer among its runs: the accepted one scoring best, else the best one."""
    scored = [r for r in runs if r.final_output is not None]
    if not scored:
        return None
    return max(scored, key=lambda r: (r.accepted, r.final_score or 0.0))


def tool_use(runs_by_task: Mapping[str, Sequence[Trajectory]]) -> ToolUse:
    """Tool-use rate, tool-call validity and model steps per task over each task's answer.

    A task counts when its answer came from an episode (an agent's run); a
    tool call is valid when it ran without an error (a call the model asked
    for that never ran, e.g. cut by the step limit, counts as not valid).
    """
    episodes = [e for e in (answer_episode(r) if r is not None else None
                            for r in map(_answer_run, runs_by_task.values())) if e is not None]
    asked = sum(max(sum(len(s.tool_calls) for s in e.model_steps), len(e.tool_steps))
                for e in episodes)
    ran = sum(len(e.tool_steps) - len(e.tool_errors) for e in episodes)
    return ToolUse(tasks=len(runs_by_task),
                   tool_use=Rate.of(sum(bool(e.tool_steps) for e in episodes), len(episodes)),
                   validity=Rate.of(ran, asked),
                   steps=MeanScore.of([float(e.model_calls) for e in episodes]))


class AgentGate:
    """The gate's runner factory on agent golden sets: each model runs as the agent.

    Called with a chat model (``evaluate_models`` calls it once per side, the
    baseline's first), it gives a runner that builds ``arch`` per golden task
    with that task's tools and locked rubric, in a fresh folder of its own
    (archive, reflections), and keeps every run, so the round can measure
    both agents (:func:`tool_use`) and score their answers. The first call
    is never forced here: the gate measures what each model does by itself.
    """

    runner_name: str

    def __init__(self, arch: str, *, max_iterations: int, max_steps: int,
                 arch_kwargs: Mapping[str, Any] | None = None) -> None:
        from agentic_loop.architectures import architecture_class

        architecture_class(arch)  # the one name check, before any model loads
        self.arch, self.max_iterations, self.max_steps = arch, max_iterations, max_steps
        self.arch_kwargs = dict(arch_kwargs or {})
        self.runner_name = f"{arch} agent"
        self.sides: list[_AgentRunner] = []

    def __call__(self, llm: Any) -> _AgentRunner:
        runner = _AgentRunner(self, llm)
        self.sides.append(runner)
        return runner

    def runs(self, side: str) -> dict[str, Trajectory]:
        """The ``baseline``'s or ``candidate``'s runs by golden task id (empty before the gate)."""
        index = {"baseline": 0, "candidate": 1}[side]
        return dict(self.sides[index].runs) if len(self.sides) > index else {}


class _AgentRunner:
    """One model's agent on the golden tasks (see :class:`AgentGate`)."""

    def __init__(self, gate: AgentGate, llm: Any) -> None:
        self.gate, self.llm = gate, llm
        self.name = gate.runner_name
        self.workdir = Path(tempfile.mkdtemp(prefix="gate-agent-"))
        self.runs: dict[str, Trajectory] = {}

    def __call__(self, task: TaskSpec) -> RunResult:
        from agentic_loop.architectures import create_architecture

        g = self.gate
        kwargs: dict[str, Any] = {"max_iterations": g.max_iterations, **g.arch_kwargs,
                                  **agent_options(self.llm, task_tools(task),
                                                  max_steps=g.max_steps)}
        kwargs.setdefault("archive", str(self.workdir / "archive"))
        kwargs.setdefault("reflections", str(self.workdir / "reflections"))
        arch = create_architecture(g.arch, kwargs.pop("llm"), rubric=task.rubric(), **kwargs)
        result = arch.run(task.task)
        self.runs[str(task.id)] = result.trajectory
        return result

    def close(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)
