# mypy: disable-error-code="prop-decorator"
# (pydantic's @computed_field over @property is the documented idiom; mypy cannot type it)
"""What a run leaves behind: the :class:`Trajectory` it logs, and :class:`RunResult`, its view.

Why one record: a run used to be described three times (a state dict, a
trajectory, a result object repeating most of the trajectory), and the copies
could drift. Now the graph's ``finalize`` node builds the one
:class:`~agentic_loop.trajectories.Trajectory` (logged when a log is set), and
the :class:`RunResult` a caller gets back holds that trajectory and derives
every attribute from it: ``output`` is the final output, ``trace`` the rounds,
``features`` and ``passed`` those of the final (best) round.

Example:
    >>> from agentic_loop.trajectories import Round, Trajectory
    >>> t = Trajectory(architecture="reflection", model_id="m", task="Say hi in one word.",
    ...     rounds=[Round(iteration=0, draft="hello there", score=4.0, passed=False),
    ...             Round(iteration=1, draft="hi", score=10.0, passed=True,
    ...                   features={"exact_words": 1})],
    ...     final_output="hi", final_score=10.0, accepted=True, stop_reason="target")
    >>> result = RunResult(trajectory=t)
    >>> result.output, result.score, result.iterations, result.passed, result.features
    ('hi', 10.0, 2, True, {'exact_words': 1})
    >>> result.trajectory_id == t.id, result.ok
    (True, True)
    >>> RunResult.refused("", ValueError("the task is empty")).errors
    ['ValueError: the task is empty']
    >>> summary_table([result], "demo").caption
    'pass rate 100% | mean score 10.00 | archived 0'
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, computed_field

from agentic_loop.judges import Rubric
from agentic_loop.trajectories import Round, TokenUsage, Trajectory

if TYPE_CHECKING:
    from agentic_loop.tables import FitTable

__all__ = ["MAX_ERROR_CHARS", "RunResult", "best_round", "rubric_record", "summary_table",
           "trajectory_of"]


def best_round(rounds: Sequence[Round]) -> Round | None:
    """Passing checks first, then the highest score, then the earliest (fewest edits).

    The same order a best-of-n round ranks its samples by
    (:func:`~agentic_loop.architectures.sampling.pick_best`): the checks are
    computed, the score's LLM features are the model's word, so a draft whose
    checks all hold is never traded for a failing one the judge liked more.
    (On 200 held-out tasks, Reflection and resample runs of the 135M model
    picked the same drafts under both orders: there a passing draft also
    scored highest.)

    >>> best_round([Round(iteration=0, draft="a", score=9.0),
    ...             Round(iteration=1, draft="b", score=7.0, passed=True)]).draft
    'b'
    >>> best_round([Round(iteration=0, draft="a", score=6.0, passed=True),
    ...             Round(iteration=1, draft="b", score=6.0, passed=True)]).draft
    'a'
    """
    if not rounds:
        return None
    return max(rounds, key=lambda r: (bool(r.passed), r.score or 0.0, -r.iteration))


def rubric_record(rubric: Rubric) -> dict[str, Any]:
    """The rubric as a trajectory stores it (names only when custom checks cannot serialize)."""
    try:
        return rubric.to_dict()
    except Exception:  # a rubric with custom Python checks cannot be serialized
        return {"name": rubric.name, "version": rubric.version, "features": list(rubric.names)}


#: An error message is kept to this many characters (an exception can quote a whole draft).
MAX_ERROR_CHARS = 2_000


def trajectory_of(state: Mapping[str, Any], *, architecture: str, model_id: str,
                  rubric: Rubric, accepted: bool,
                  run_metadata: Mapping[str, Any] | None = None) -> Trajectory:
    """The trajectory of a finished (or failed) graph state; ``accepted`` is the stop rule's.

    Always storable: error messages are cut to :data:`MAX_ERROR_CHARS` and no
    text holds a character UTF-8 cannot write (:meth:`Trajectory.storable`).
    """
    meta = run_metadata or {}
    usage = state.get("usage") or {}
    final: Round | None = state.get("final")
    started = state.get("started_at", time.time())
    return Trajectory(
        id=state.get("run_id") or uuid.uuid4().hex,
        architecture=architecture, model_id=model_id, task=state["task"],
        rubric=rubric_record(rubric),
        exemplar_ids=[e["id"] for e in state.get("exemplars") or []],
        reflection_ids=[r["id"] for r in state.get("reflections") or []],
        rounds=list(state.get("rounds", [])),
        final_output=final.draft if final else None,
        final_score=final.score if final else None,
        accepted=accepted, archived=bool(state.get("archived")),
        stop_reason=state.get("stop_reason"),
        latency_s=round(time.time() - started, 4),
        usage=TokenUsage(**{k: usage.get(k, 0) for k in TokenUsage.model_fields}),
        errors=[e[:MAX_ERROR_CHARS] for e in state.get("errors") or []],
        user_id_hash=meta.get("user_id_hash"), consent=meta.get("consent"),
        metadata=dict(meta.get("metadata") or {}),
    ).storable()


class RunResult(BaseModel):
    """What one run produced: a read-only view of its :class:`Trajectory`.

    ``output`` is the best draft, not merely the last. ``trajectory_id`` is
    None when the run never reached ``finalize`` (a refused task, a crash
    caught by a batch): no trajectory of it exists. ``model_dump()`` gives the
    view's attributes, not the trajectory (``result.trajectory`` has it all).
    """

    trajectory: Trajectory = Field(exclude=True, repr=False)

    @classmethod
    def refused(cls, task: Any, error: BaseException, *, architecture: str = "",
                model_id: str = "") -> RunResult:
        """The result of a task that did not run: the error as data, nothing else."""
        text = task if isinstance(task, str) else repr(task)
        return cls(trajectory=Trajectory(architecture=architecture, model_id=model_id, task=text,
                                         errors=[f"{type(error).__name__}: {error}"]))

    @property
    def final_round(self) -> Round | None:
        """The round whose draft is the output (None without an output)."""
        if self.trajectory.final_output is None:
            return None
        return best_round(self.trajectory.rounds)

    @computed_field
    @property
    def task(self) -> str:
        return self.trajectory.task

    @computed_field
    @property
    def output(self) -> str | None:
        return self.trajectory.final_output

    @computed_field
    @property
    def score(self) -> float | None:
        return self.trajectory.final_score

    @computed_field
    @property
    def features(self) -> dict[str, Any]:
        final = self.final_round
        return dict(final.features) if final else {}

    @computed_field
    @property
    def passed(self) -> bool:
        final = self.final_round
        return bool(final and final.passed)

    @computed_field
    @property
    def iterations(self) -> int:
        return len(self.trajectory.rounds)

    @computed_field
    @property
    def archived(self) -> bool:
        return self.trajectory.archived

    @computed_field
    @property
    def stop_reason(self) -> str | None:
        return self.trajectory.stop_reason

    @computed_field
    @property
    def trace(self) -> list[Round]:
        return self.trajectory.rounds

    @computed_field
    @property
    def trajectory_id(self) -> str | None:
        return self.trajectory.id if self.trajectory.stop_reason is not None else None

    @computed_field
    @property
    def exemplar_ids(self) -> list[str]:
        return self.trajectory.exemplar_ids

    @computed_field
    @property
    def reflection_ids(self) -> list[str]:
        return self.trajectory.reflection_ids

    @computed_field
    @property
    def usage(self) -> TokenUsage:
        return self.trajectory.usage

    @computed_field
    @property
    def latency_s(self) -> float | None:
        return self.trajectory.latency_s

    @computed_field
    @property
    def errors(self) -> list[str]:
        return self.trajectory.errors

    @property
    def ok(self) -> bool:
        """True when the run finished without errors."""
        return not self.trajectory.errors


def summary_table(results: Sequence[RunResult], title: str) -> FitTable:
    """Many results as a table (task, output, score, ...) with pass rate in the caption.

    A :class:`~agentic_loop.tables.FitTable`: at 80 columns the task and
    output wrap and the rounds, archived and seconds columns go first.
    """
    from rich.markup import escape

    from agentic_loop.tables import Col, FitTable, percent

    table = FitTable(title, [Col("task", wrap=True, min_width=16),
                             Col("output", wrap=True, min_width=16),
                             Col("score", justify="right"), Col("passed"),
                             Col("rounds", justify="right", drop=1),
                             Col("archived", drop=2), Col("s", justify="right", drop=3)],
                     show_lines=False)
    for r in results:
        output = (escape((r.output or "")[:120]) if r.ok
                  else f"[red]{escape('; '.join(r.errors)[:120])}[/]")
        table.add_row(escape(r.task[:60]), output,
                      "-" if r.score is None else f"{r.score:.1f}", "yes" if r.passed else "no",
                      str(r.iterations), "yes" if r.archived else "", f"{r.latency_s or 0:.1f}")
    scored = [r.score for r in results if r.score is not None]
    if scored:
        table.caption = (f"pass rate {percent(sum(r.passed for r in results) / len(results))} | "
                         f"mean score {sum(scored) / len(scored):.2f} | "
                         f"archived {sum(r.archived for r in results)}")
    return table
