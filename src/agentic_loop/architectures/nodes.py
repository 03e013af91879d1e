"""The nodes every architecture shares: generate, critique, refine, the stop rule, finalize.

Why a module of its own: these are the loop's *steps*, the part a new
architecture reuses or overrides one at a time (Reflexion swaps refine for
reflect, ArchiveRefine adds retrieve and archives in finalize), apart from
the graph wiring (:mod:`.base`) and the ways to run a graph (:mod:`.runner`).
Every model call of a node goes through the architecture's one
:class:`~agentic_loop.models.retry.RetryPolicy`; every judgement becomes a
:class:`~agentic_loop.trajectories.Round`, the one round model from state to disk.

Example:
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> critic = Critic(ScriptedChatModel(), Rubric.for_constraints(exact_words=1),
    ...                 critique_text=False)
    >>> critique = critic.critique("One word.", "two words")
    >>> judged_round(0, "two words", critique, 0.01).model_dump(include={"score", "passed"})
    {'score': 0.0, 'passed': False}
    >>> task_rubric("Write a tagline in exactly 5 words.").names
    ('exact_words', 'on_task', 'well_written')
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any, ClassVar, Literal, get_args

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from agentic_loop.architectures.prompts import clean_output, generate_messages, refine_messages
from agentic_loop.architectures.results import best_round, trajectory_of
from agentic_loop.architectures.state import LoopState
from agentic_loop.judges import Critic, Critique, Feature, Rubric
from agentic_loop.judges.constraint_features import constraint_feature
from agentic_loop.judges.task_constraint_parser import constraints_from_task
from agentic_loop.models.retry import RetryPolicy
from agentic_loop.models.structured_output import message_text
from agentic_loop.trajectories import Round, Trajectory, TrajectoryLog

__all__ = ["REFINE_MODES", "TASK_CHECK_WEIGHT", "LoopNodes", "RefineMode", "judged_round",
           "node_metadata", "task_rubric"]

#: Check features outweigh judged ones: a 135M judge says "true" to nearly anything.
TASK_CHECK_WEIGHT = 4.0
RefineMode = Literal["feedback", "resample"]
REFINE_MODES: tuple[str, ...] = get_args(RefineMode)


def task_rubric(task: str) -> Rubric:
    """The default rubric: the task's own stated constraints as checks, plus two judged features."""
    checks = [constraint_feature(k, v, weight=TASK_CHECK_WEIGHT)
              for k, v in constraints_from_task(task).items()]
    judged = [
        Feature("on_task", "It does exactly what the task asks (right subject, form and purpose).",
                1.0, kind="bool"),
        Feature("well_written", "It is clear and fluent, with no filler, repetition or "
                "preamble.", 1.0, kind="bool"),
    ]
    return Rubric([*checks, *judged], name="task", version="1")


def judged_round(iteration: int, draft: str, critique: Critique, seconds: float) -> Round:
    """The round a critique makes of a draft."""
    return Round(iteration=iteration, draft=draft, score=critique.score, passed=critique.passed,
                 features=dict(critique.values), critique=critique.critique,
                 overall_score=critique.overall_score, feedback=critique.feedback,
                 latency_s=round(seconds, 4), guards=dict(critique.evaluation.guards))


def node_metadata(node: str, state: LoopState, update: dict[str, Any]) -> dict[str, Any]:
    """What a node's trace run is tagged with: iteration, and score/features/error if any."""
    meta: dict[str, Any] = {"iteration": update.get("iteration", state.get("iteration", 0))}
    rounds: list[Round] | None = update.get("rounds")
    if rounds:
        meta["score"] = rounds[-1].score
        meta["features"] = rounds[-1].features
    final: Round | None = update.get("final")
    if final is not None:
        meta["score"] = final.score
    if update.get("errors"):
        meta["error"] = update["errors"][-1]
    return meta


class LoopNodes:
    """The shared nodes and stop rule; :class:`~agentic_loop.architectures.Architecture` uses them.

    Subclasses override single nodes (``_generate``, ``_refine``, ...), the stop
    rule (:meth:`stop_reason`) or the finalize hook (:meth:`_on_finalize`).
    """

    name: ClassVar[str] = "architecture"
    #: Judge the checks first and skip the LLM judge when one fails (see ``Critic``).
    checks_first: ClassVar[bool] = False

    # set by Architecture.__init__
    llm: BaseChatModel
    model_id: str
    rubric: Rubric | None
    target_score: float
    max_iterations: int
    plateau_patience: int
    min_improvement: float
    refine: RefineMode
    trajectories: TrajectoryLog | None
    critique_text: bool
    critic_retries: int
    retry: RetryPolicy

    # -- configuration shared by nodes --------------------------------------
    def rubric_for(self, task: str, config: RunnableConfig | None = None) -> Rubric:
        """The rubric of this run: ``run(rubric=...)``, else the architecture's, else the task's."""
        given = ((config or {}).get("configurable") or {}).get("rubric")
        return given or self.rubric or task_rubric(task)

    def requirements(self, task: str, config: RunnableConfig | None = None) -> str:
        """The verifiable requirements (check features) as a bullet list for prompts.

        Judged features are left out: "it is engaging" is the critic's business,
        and a small model tends to answer such lines instead of the task.
        """
        return "\n".join(f"- {f.description}"
                         for f in self.rubric_for(task, config).check_features)

    def critic_for(self, rubric: Rubric) -> Critic:
        """The critic of a rubric, with this architecture's judging options."""
        return Critic(self.llm, rubric, max_retries=self.critic_retries,
                      critique_text=self.critique_text, checks_first=self.checks_first)

    def _call(self, messages: Sequence[BaseMessage], config: RunnableConfig,
              iteration: int) -> str:
        """One generation call, through the retry policy; the cleaned text."""
        cfg: RunnableConfig = {"metadata": {"iteration": iteration}}
        answer = self.retry.invoke(self.llm, list(messages), cfg, what="generation")
        return clean_output(message_text(answer))

    @staticmethod
    def _start(state: LoopState) -> dict[str, Any]:
        """Fields the first node sets once per run (kept on resume)."""
        if state.get("run_id"):
            return {}
        return {"run_id": uuid.uuid4().hex, "started_at": time.time()}

    # -- nodes ----------------------------------------------------------------
    def _first_messages(self, state: LoopState, config: RunnableConfig) -> list[BaseMessage]:
        """The prompt of a fresh draft: task, requirements, exemplars, lessons."""
        task = state["task"]
        return generate_messages(task, self.requirements(task, config),
                                 state.get("exemplars", ()), state.get("reflections", ()),
                                 vary_structure=bool(state.get("exemplars")))

    def _generate(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        update = self._start(state)
        update.update(draft=self._call(self._first_messages(state, config), config, 0),
                      iteration=0)
        return update

    def _judge(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        """Critique the current draft into one more round."""
        task, draft = state["task"], state["draft"]
        started = time.perf_counter()
        critique = self.critic_for(self.rubric_for(task, config)).critique(task, draft)
        return {"rounds": [judged_round(state.get("iteration", 0), draft, critique,
                                        time.perf_counter() - started)]}

    def _critique(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        return {} if state.get("errors") else self._judge(state, config)

    def _refine(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        task, last = state["task"], state["rounds"][-1]
        iteration = state.get("iteration", 0) + 1
        messages = (self._first_messages(state, config) if self.refine == "resample" else
                    refine_messages(task, last.draft, last.feedback or "",
                                    self.requirements(task, config)))
        return {"draft": self._call(messages, config, iteration), "iteration": iteration}

    def _route(self, state: LoopState) -> str:
        return "finalize" if self.stop_reason(state) else "refine"

    # -- the stop rule ----------------------------------------------------------
    def accepts(self, round_: Round) -> bool:
        """A draft is accepted when it reaches ``target_score`` and every check holds.

        The checks are what the task demands verifiably ("EXACTLY 12 words"); a
        draft that misses one is not accepted however well it scores otherwise.
        """
        return (round_.score or 0.0) >= self.target_score and bool(round_.passed)

    def stop_reason(self, state: LoopState) -> str | None:
        """Why the loop should stop now, or None to go on. Always bounded by max_iterations."""
        if state.get("errors"):
            return "error"
        rounds = state.get("rounds", [])
        if not rounds:
            return None
        if self.accepts(rounds[-1]):
            return "target"
        if len(rounds) >= self.max_iterations:
            return "max_iterations"
        k = self.plateau_patience
        if len(rounds) > k:
            before = max(r.score or 0.0 for r in rounds[:-k])
            recent = max(r.score or 0.0 for r in rounds[-k:])
            if recent < before + self.min_improvement:
                return "plateau"
        return None

    # -- finalize -----------------------------------------------------------------
    def _finalize(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        """Pick the best round, run the hook, and log the run's one trajectory."""
        update = self._start(state)
        best = best_round(state.get("rounds", []))
        update["final"] = best
        update["stop_reason"] = self.stop_reason(state) or "max_iterations"
        merged: dict[str, Any] = {**state, **update}
        extra = self._on_finalize(merged, config) if best and not state.get("errors") else {}
        update.update(extra)
        merged.update(extra)
        trajectory = self.trajectory_for(merged, config)
        if self.trajectories is not None:
            self.trajectories.append(trajectory)
        update.update(trajectory=trajectory, trajectory_id=trajectory.id)
        return update

    def _on_finalize(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Hook for subclasses (e.g. archive the accepted output)."""
        return {}

    def trajectory_for(self, state: LoopState | dict[str, Any],
                       config: RunnableConfig | None = None) -> Trajectory:
        """The trajectory of a graph state: what ``finalize`` logs and a RunResult shows."""
        final: Round | None = state.get("final")
        meta = ((config or {}).get("configurable") or {}).get("run_metadata")
        return trajectory_of(state, architecture=self.name, model_id=self.model_id,
                             rubric=self.rubric_for(state["task"], config),
                             accepted=final is not None and self.accepts(final),
                             run_metadata=meta)
