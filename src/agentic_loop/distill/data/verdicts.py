"""What the checks say of one sample: did every check hold, which guards fired, what verified.

Why: the loop trains on what its checks accept, and a high score is not
acceptance. A draft can score 8/10 with a check failed (the other
features carried it), and a recital of the requirements can satisfy
"do not use the word we". So every sample carries its verdict:

``passed``
    every check of the task's rubric held: the run's recorded verdict
    (``Round.passed``, ``Candidate.passed``; an accepted final or archive
    entry passed), else the checks of the run's saved rubric run again on
    the text (no model: checks only). ``None`` when neither is known (a run
    without checks logged no verdict and saved no rubric): there is no
    check to fail.
``flags``
    the reward-hacking guards that fired (:mod:`agentic_loop.judges.guards`):
    those the run recorded (an ``exemplar_copy`` needs the exemplars it was
    shown; the improve loop adds ``restated_answer``), and those found again
    on the text, so a log written before a detector existed is judged by it too.
``verifier``
    the mean credit of the rubric's verifier checks (:data:`VERIFIER_CONSTRAINTS`:
    an exact answer, unit tests' pass rate) from the recorded values, the
    composite reward's verifier term; ``None`` when the task has none.

Example:
    >>> from agentic_loop.judges import Rubric
    >>> from agentic_loop.trajectories import Trajectory
    >>> rubric = Rubric.for_constraints(answer=42)
    >>> run = Trajectory(architecture="a", model_id="m", task="What is 6*7?",
    ...                  rubric=rubric.to_dict())
    >>> judge = SampleJudge(run)
    >>> judge.verdict("6 times 7 is 42.", None, {}, {"answer": True})
    Verdict(passed=True, flags=(), verifier=1.0)
    >>> judge.verdict("It is 41.", None, {}, {}).passed
    False
    >>> judge.verdict("soooooooooo 42", True, {"exemplar_copy": "..."}, {}).flags
    ('exemplar_copy', 'degenerate')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentic_loop.episodes import Episode, judging_episode
from agentic_loop.errors import AgenticLoopError
from agentic_loop.judges.guards import GUARD_NAMES, inspect_output
from agentic_loop.trajectories import Trajectory

if TYPE_CHECKING:
    from agentic_loop.judges import Rubric

__all__ = ["VERIFIER_CONSTRAINTS", "SampleJudge", "Verdict", "ordered_flags", "saved_rubric"]

#: Constraint keywords whose check is a verifier (a known answer, unit tests), not a style rule.
VERIFIER_CONSTRAINTS = ("answer", "python_tests")


@dataclass(frozen=True)
class Verdict:
    """One sample's verdict (see the module docstring)."""

    passed: bool | None
    flags: tuple[str, ...]
    verifier: float | None


def saved_rubric(trajectory: Trajectory) -> Rubric | None:
    """The run's rubric rebuilt from its log; ``None`` when none was saved or it cannot be
    rebuilt (names only: a rubric of custom checks)."""
    if not trajectory.rubric:
        return None
    from agentic_loop.judges import CheckReferenceError, Rubric

    try:
        return Rubric.from_dict(trajectory.rubric)
    except CheckReferenceError as exc:  # a user's check named but not found: never skip it
        raise CheckReferenceError(f"run {trajectory.id}: {exc}") from None
    except (AgenticLoopError, TypeError, ValueError, KeyError, ImportError):
        return None


def ordered_flags(flags: Any) -> tuple[str, ...]:
    """Flags without repeats, in :data:`~agentic_loop.judges.guards.GUARD_NAMES` order, others
    after them by name (the first one is the flag a dropped sample is counted under).

    >>> ordered_flags(["restated_answer", "recital", "empty", "recital"])
    ('empty', 'recital', 'restated_answer')
    """
    known = {name: i for i, name in enumerate(GUARD_NAMES)}
    return tuple(sorted(set(flags), key=lambda f: (known.get(f, len(known)), f)))


class SampleJudge:
    """Judges the samples of one run by its saved rubric (built once per run)."""

    def __init__(self, trajectory: Trajectory) -> None:
        self.task = trajectory.task
        self.rubric = saved_rubric(trajectory)

    def verdict(self, text: str, passed: bool | None, guards: Mapping[str, str],
                features: Mapping[str, Any], episode: Episode | None = None) -> Verdict:
        """The verdict on ``text``, given what the run recorded of it.

        ``episode``: the agent's episode behind ``text`` (``Round.episode``), so a
        re-check or guard that reads the episode (a tool that had to run, a claimed
        tool result) judges what the agent did, as the run's critic did.
        """
        values = dict(features)
        inspect = self.rubric.inspect if self.rubric is not None else (
            lambda task, output: inspect_output(task, output))
        with judging_episode(episode):
            if passed is None:
                passed, values = self._recheck(text, values)
            try:
                found = inspect(self.task, text).flags
            except Exception:  # noqa: BLE001 - a guard that fails leaves the recorded flags
                found = []
        return Verdict(passed, ordered_flags([*guards, *found]), self._verifier(values))

    def _recheck(self, text: str, values: dict[str, Any]) -> tuple[bool | None, dict[str, Any]]:
        """The saved rubric's checks on ``text``: whether all held, and the values they found."""
        if self.rubric is None or not self.rubric.check_features:
            return None, values
        try:
            results = self.rubric.run_checks(self.task, text)
        except Exception:  # noqa: BLE001 - a custom check that raises gives no verdict
            return None, values
        guards = getattr(results, "guards", None)
        holds = not (guards is not None and guards.voids) and all(
            f.credit(results[f.name].value) >= 1.0 for f in self.rubric.check_features)
        return holds, {**values, **{name: r.value for name, r in results.items()}}

    def _verifier(self, values: Mapping[str, Any]) -> float | None:
        if self.rubric is None:
            return None
        credits = []
        for f in self.rubric.check_features:
            if f.constraint is None or f.constraint[0] not in VERIFIER_CONSTRAINTS:
                continue
            if f.name in values:
                try:
                    credits.append(min(1.0, max(0.0, float(f.credit(values[f.name])))))
                except (AgenticLoopError, TypeError, ValueError):
                    continue
        return round(sum(credits) / len(credits), 6) if credits else None
