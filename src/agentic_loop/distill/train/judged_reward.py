"""GRPO reward's judged part: a separate judge ranks each prompt's group, or the group votes.

Why: the checks' part (:mod:`.rewards`) rewards only what Python can count.
What it cannot (does the answer do what was asked, is it well written) is
the rubric's *judged* features; asking the policy to grade itself would
teach it to please itself, so here a **separate judge model** (``judge=``,
default the policy's *base* model, loaded once, frozen) ranks the
completions, and the rubric's checks stay Python. TRL hands a reward
function the batch's completions with each prompt's ``num_generations``
completions next to each other: that group is what the judge compares
(RULER-style relative scores are what GRPO needs: it only uses each
completion's reward *against its group's mean*).

``"rank"`` (column ``judge_rank``)
    :class:`~agentic_loop.judges.GroupRanker` scores the group 0-10 on the
    task's judged features (``PromptTask.judged``, exactly those: no check
    is shown to the judge), in two presentation orders against position
    bias; the judged part is ``score / 10`` on ``[0, 1]``. Logged each step:
    ``judge/consistency`` (agreement across orders), ``judge/failed_groups``.
``"vote"`` (column ``judge_vote``)
    test-time RL (TTRL): for a task with no check, 1.0 to each completion
    whose short answer (:func:`~agentic_loop.judges.short_answer`: its last
    number, else its last line) agrees with the group's majority, else 0.0;
    ``vote/agreement`` (the winner's share) is logged. It assumes the task
    has a short answer; a task with checks has no vote (the checks decide).

**The combination**: TRL sums the functions' rewards times their weights
(``reward_weights``): ``reward = 1 x rubric + judged_reward_weight x
judged`` (plus any per-check or format weights), each part on ``[0, 1]``,
and logs each part as its own column (``rewards/rubric/mean``,
``rewards/judge_rank/mean``), so the two parts are read apart.

**A failed ranking** (the judge gave no valid answer after its retries:
``GroupRanking.error``) never stops training: its group's judged part is
``None`` (TRL's NaN, left out of the sum and the logged mean), the
*neutral* value, since a value shared by the whole group moves no
advantage; each of its completions is counted in
``reward_errors/judge_rank`` and on the card, with the first error. A
group of one (nothing to compare, e.g. a prompt's completions split across
processes) and a task with no judged features are ``None`` too, not errors.

Example (a scripted judge that prefers the longer answer):
    >>> from agentic_loop.distill.train.prompt_set import PromptTask
    >>> from agentic_loop.judges import Feature, Rubric
    >>> from agentic_loop.judges.group_rank import candidates_shown
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> def longer(schema, messages):
    ...     shown = candidates_shown(messages[-1].content)
    ...     return {f"candidate_{k}": min(10, len(v)) for k, v in shown.items()}
    >>> judged = Rubric([Feature("on_task", "It answers the task.", kind="bool")])
    >>> task = PromptTask("Greet me.", Rubric.for_constraints(lowercase=True), judged=judged)
    >>> rank = RankReward([task], ScriptedChatModel(default_structured=longer), group_size=2)
    >>> done = [[{"role": "assistant", "content": t}] for t in ("hi", "hello there")]
    >>> rank(prompts=[None, None], completions=done, task_index=[0, 0])
    [0.2, 1.0]
    >>> vote = VoteReward([PromptTask("2 + 2?", None)], group_size=3)
    >>> vote(prompts=[None] * 3, completions=["4", "It is 4.", "5"], task_index=[0, 0, 0])
    [1.0, 1.0, 0.0]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentic_loop.distill.train.prompt_set import PromptTask, rubric_sha256
from agentic_loop.distill.train.rewards import RewardStats, completion_text
from agentic_loop.episodes import Episode
from agentic_loop.errors import ConfigError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from agentic_loop.judges import GroupRanker, GroupRanking

__all__ = ["RANK", "VOTE", "JudgedReward", "RankReward", "VoteReward", "check_judged",
           "group_spans", "judged_reward", "merge_summaries"]

RANK = "judge_rank"
VOTE = "judge_vote"
_MAX_ERROR = 300


def group_spans(task_index: Sequence[int], size: int) -> list[tuple[int, int]]:
    """Where each prompt's group lies in a TRL batch: runs of one task, at most ``size`` long.

    TRL repeats each prompt ``num_generations`` times in a row, so a group is a
    run of the same ``task_index``; a run longer than ``size`` (the same prompt
    drawn twice in a row) is split into groups of ``size``.

    >>> group_spans([3, 3, 3, 3, 1, 1, 3], 2)
    [(0, 2), (2, 4), (4, 6), (6, 7)]
    """
    spans: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(task_index) + 1):
        if i == len(task_index) or task_index[i] != task_index[start] or i - start == size:
            spans.append((start, i))
            start = i
    return spans



def _episode(raw: str | None) -> Episode | None:
    """The row's episode, or None when it has none or it does not parse (that completion is
    then judged by its text: a malformed column never stops training)."""
    if raw is None:
        return None
    try:
        return Episode.model_validate_json(raw)
    except ValueError:
        return None

class JudgedReward:
    """A reward function TRL calls on a batch and logs as ``__name__``: one value per
    completion, decided group by group (see the module doc).

    Subclasses say what one group gets (:meth:`score_group`).
    """

    def __init__(self, name: str, tasks: Sequence[PromptTask], *, weight: float,
                 group_size: int, description: str) -> None:
        if not tasks:
            raise ConfigError(f"{name} needs at least one task; pass a prompt set's tasks")
        if group_size < 2:
            raise ConfigError(f"{name} compares a prompt's completions: group_size "
                              f"(num_generations) must be at least 2, got {group_size}")
        self.__name__ = name
        self.tasks = list(tasks)
        self.weight = weight
        self.group_size = group_size
        self.description = description
        self.stats = RewardStats()
        #: groups judged, groups failed, and the sum of a per-group measure (see subclasses)
        self.groups = 0
        self.failed_groups = 0
        self.measure_sum = 0.0
        self.measured = 0

    def score_group(self, task: PromptTask, texts: list[str],
                    episodes: list[Episode | None]) -> tuple[list[float | None],
                                                              float | None, str | None]:
        """One group's values, its measure (consistency, agreement; None: none), its error."""
        raise NotImplementedError

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any],
                 task_index: Sequence[int], episode: Sequence[str | None] | None = None,
                 **kwargs: Any) -> list[float | None]:
        """One value per completion (None: not judged, see the module doc)."""
        found = list(episode) if episode is not None else [None] * len(completions)
        eps = [_episode(e) for e in found]
        texts = [e.final if e is not None else completion_text(c).strip()
                 for c, e in zip(completions, eps, strict=True)]
        index = [int(i) for i in task_index]
        values: list[float | None] = [None] * len(texts)
        errors = failed = 0
        measures: list[float] = []
        for start, stop in group_spans(index, self.group_size):
            if stop - start < 2:
                continue
            got, measure, error = self.score_group(self.tasks[index[start]], texts[start:stop],
                                                   eps[start:stop])
            values[start:stop] = got
            if error is not None:
                failed += 1
                errors += stop - start
                self.stats.first_error = self.stats.first_error or error[:_MAX_ERROR]
            elif any(v is not None for v in got):
                self.groups += 1
            if measure is not None:
                measures.append(measure)
        self.stats.calls += len(values)
        self.stats.errors += errors
        self.failed_groups += failed
        self.measure_sum += sum(measures)
        self.measured += len(measures)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            log_metric(f"reward_errors/{self.__name__}", float(errors))
            for key, value in self._metrics(failed, measures).items():
                log_metric(key, value)
        return values

    def _metrics(self, failed: int, measures: list[float]) -> dict[str, float]:
        return {}

    def summary(self) -> dict[str, Any]:
        """This process's counts, for the card (:func:`merge_summaries` adds processes up)."""
        return {"groups": self.groups, "failed_groups": self.failed_groups,
                "measure_sum": self.measure_sum, "measured": self.measured}

    def describe(self, summary: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """What the card says of the judged part: kind, weight, and the counts."""
        done = dict(summary or self.summary())
        measured = done.pop("measured")
        total = done.pop("measure_sum")
        return {"function": self.__name__, "weight": self.weight, **done,
                "mean_" + self._measure_name: round(total / measured, 4) if measured else None}

    _measure_name = "measure"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__name__!r}, weight={self.weight:g})"


class RankReward(JudgedReward):
    """``judge_rank``: a judge model ranks each group on the task's judged features.

    Args:
        tasks: the prompt set's tasks (``PromptTask.judged``: the features the judge sees).
        judge: the judge's chat model (not the policy).
        weight: the judged part's weight (the checks' part weighs 1).
        group_size: completions per prompt (``num_generations``).
        orders: presentations per group (2 measures and counters position bias).
        seed: fixes the presentation shuffles.
    """

    _measure_name = "consistency"

    def __init__(self, tasks: Sequence[PromptTask], judge: BaseChatModel, *,
                 weight: float = 1.0, group_size: int, orders: int = 2, seed: int = 0) -> None:
        from agentic_loop.judges import GroupRanker

        super().__init__(RANK, tasks, weight=weight, group_size=group_size, description=(
            "the judge's 0-10 score of the completion relative to its group, / 10 on [0, 1], "
            "on the task's judged features only (checks stay Python); no value when the "
            "ranking failed (counted) or the task has no judged features"))
        self.judge = judge
        self._rankers: dict[str, GroupRanker] = {}
        for task in self.tasks:
            if task.judged is not None:
                self._rankers.setdefault(rubric_sha256(task.judged), GroupRanker(
                    judge, task.judged, orders=orders, seed=seed))
        check_judged("rank", self.tasks)
        self.judge_id = next(iter(self._rankers.values())).judge

    def score_group(self, task: PromptTask, texts: list[str],
                    episodes: list[Episode | None]) -> tuple[list[float | None],
                                                              float | None, str | None]:
        """The group's scores / 10, its consistency across orders, or the ranking's error."""
        if task.judged is None:
            return [None] * len(texts), None, None
        ranker = self._rankers[rubric_sha256(task.judged)]
        shown = episodes if any(e is not None for e in episodes) else None
        try:
            ranking: GroupRanking = ranker.rank(task.task, texts, episodes=shown)
        except Exception as exc:  # a ranker that raises is a failed group, never a crash
            return [None] * len(texts), None, f"{type(exc).__name__}: {exc}"
        if not ranking.ok or ranking.scores is None:
            return [None] * len(texts), None, ranking.error or "no scores"
        return [round(s / 10, 6) for s in ranking.scores], ranking.consistency, None

    def _metrics(self, failed: int, measures: list[float]) -> dict[str, float]:
        out = {"judge/failed_groups": float(failed)}
        if measures:
            out["judge/consistency"] = sum(measures) / len(measures)
        return out

    def describe(self, summary: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The card's entry, with the judge model's id."""
        return {"kind": "rank", "judge": self.judge_id, **super().describe(summary)}


class VoteReward(JudgedReward):
    """``judge_vote``: agreement with the group's majority short answer (TTRL), for tasks
    with no check; no model is asked."""

    _measure_name = "agreement"

    def __init__(self, tasks: Sequence[PromptTask], *, weight: float = 1.0,
                 group_size: int) -> None:
        super().__init__(VOTE, tasks, weight=weight, group_size=group_size, description=(
            "1.0 when the completion's short answer (last number, else last line) agrees with "
            "its group's majority, else 0.0 (TTRL); tasks without a check only"))

    def score_group(self, task: PromptTask, texts: list[str],
                    episodes: list[Episode | None]) -> tuple[list[float | None],
                                                              float | None, str | None]:
        """The group's agreement with its majority, and the winner's share: one vote per group
        (:func:`~agentic_loop.judges.majority_vote.voted`: each completion's short answer
        taken once and counted once; no clear majority: a neutral group, every reward 0.0).
        """
        from agentic_loop.judges.majority_vote import voted

        if task.rubric is not None:  # the checks decide this task
            return [None] * len(texts), None, None
        vote, rewards = voted(texts)
        return list[float | None](rewards), vote.agreement, None

    def _metrics(self, failed: int, measures: list[float]) -> dict[str, float]:
        return {"vote/agreement": sum(measures) / len(measures)} if measures else {}

    def describe(self, summary: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The card's entry (no judge model: the group votes)."""
        return {"kind": "vote", "judge": None, **super().describe(summary)}


def judged_reward(kind: str, tasks: Sequence[PromptTask], *, judge: BaseChatModel | None = None,
                  weight: float = 1.0, group_size: int, seed: int = 0) -> JudgedReward | None:
    """The judged part for ``kind`` (``"none"``: None); ``"rank"`` needs ``judge``.

    >>> judged_reward("none", [], group_size=2) is None
    True
    """
    check_judged(kind, tasks)
    if kind == "none":
        return None
    if kind == "vote":
        return VoteReward(tasks, weight=weight, group_size=group_size)
    if kind == "rank":
        if judge is None:
            raise ConfigError("judged_reward 'rank' needs a judge model; pass judge= (a chat "
                              "model spec or model)")
        return RankReward(tasks, judge, weight=weight, group_size=group_size, seed=seed)
    raise ConfigError(f"judged_reward must be none, rank or vote, got {kind!r}")


def check_judged(kind: str, tasks: Sequence[PromptTask]) -> None:
    """Refuse a judged part that would reward nothing, before any model loads.

    >>> check_judged("vote", [PromptTask("Whisper.", None)])
    >>> check_judged("rank", [PromptTask("Whisper.", None)])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: judged_reward 'rank' found no task with judged features ...
    """
    if kind == "vote" and not any(t.rubric is None for t in tasks):
        raise ConfigError("judged_reward 'vote' rewards tasks without a check, and every "
                          "task here has one (the checks decide them); add tasks with a "
                          "short answer and no check, or use judged_reward 'none' or 'rank'")
    if kind == "rank" and not any(t.judged is not None for t in tasks):
        raise ConfigError("judged_reward 'rank' found no task with judged features to rank "
                          "on; give the tasks rubrics with LLM features, or use "
                          "judged_reward 'vote' or 'none'")


def merge_summaries(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Add up :meth:`JudgedReward.summary` of several processes.

    >>> merge_summaries([{"groups": 2, "failed_groups": 1, "measure_sum": 1.5, "measured": 2},
    ...                  {"groups": 1, "failed_groups": 0, "measure_sum": 1.0, "measured": 1}])
    {'groups': 3, 'failed_groups': 1, 'measure_sum': 2.5, 'measured': 3}
    """
    keys = ("groups", "failed_groups", "measure_sum", "measured")
    return {k: sum(p[k] for p in parts) for k in keys}
