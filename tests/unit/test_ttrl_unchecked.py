"""TTRL on pool tasks with no check: the pool keeps them, the vote is their reward.

The policy is a scripted model and training a fake that records its call;
the pool, the round, the alarm, the gate and the registry are real, and the
prompt file the round hands the trainer is read back by the trainer's own
loader and reward builder, so what GRPO would see is what is checked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from distill_helpers import fake_trained, labelled_log

from agentic_loop.distill.loop.improve import ImproveBackend, improve
from agentic_loop.distill.loop.pool import trajectory_pool
from agentic_loop.distill.loop.state import Watermark
from agentic_loop.distill.train import TrainResult
from agentic_loop.distill.train.judged_reward import VOTE, judged_reward
from agentic_loop.distill.train.prompt_set import load_prompt_set
from agentic_loop.distill.train.training_data import TrainingDataError
from agentic_loop.errors import ConfigError
from agentic_loop.tasks.spec import TaskSpec
from agentic_loop.testing import ScriptedChatModel
from agentic_loop.trajectories import Trajectory, TrajectoryLog

SPIDER = "How many legs has a spider? Answer with the number."
HANDS = "How many fingers are on two hands? Answer with the number."
GOLDEN = [TaskSpec(task=f"golden task {i}: answer in exactly 2 words.",
                   constraints={"exact_words": 2}, id=f"g{i}") for i in range(4)]
FORMAT = TaskSpec(task="Greet a guest in 2 words.", constraints={"exact_words": 2}, id="greet")


class Models:
    def __init__(self) -> None:
        self.train_calls: list[dict[str, Any]] = []
        self.sampled: list[str] = []

    def chat(self, spec: str, temperature: float, max_tokens: int) -> ScriptedChatModel:
        def reply(messages: list[Any]) -> str:
            self.sampled.append(str(messages[-1].content))
            return "two words"
        return ScriptedChatModel(default=reply, model_id="policy")

    def train(self, data: Path, out: Path, **kwargs: Any) -> TrainResult:
        self.train_calls.append({"data": data, **kwargs})
        return fake_trained(data, out, **kwargs)

    def backend(self) -> ImproveBackend:
        return ImproveBackend(chat=self.chat, train=self.train,
                              gate_model=lambda spec: ScriptedChatModel(default="two words"))


def _run(tmp_path: Path, models: Models, pool: list[TaskSpec], **options: Any) -> Any:
    return improve(pool, golden=GOLDEN, registry=tmp_path / "reg", work_dir=tmp_path / "work",
                   backend=models.backend(), **{
                       "rounds": 1, "samples": 2, "temperatures": (0.7, 1.0),
                       "hint_retry": False, "max_concurrency": 1,
                       "export_options": {"pii": "off"},
                       "eval_options": {"min_tasks": 4, "kl": False, "diversity_check": False},
                       **options})


def _stage(tmp_path: Path, stage: str) -> dict[str, Any]:
    state = json.loads((tmp_path / "work" / "round-001" / "state.json").read_text())
    return dict(state["stages"][stage]["result"])


def test_check_less_tasks_reach_grpo_with_the_vote_as_their_reward(tmp_path: Path) -> None:
    models = Models()
    pool = [TaskSpec(task=SPIDER, id="spider"), TaskSpec(task=HANDS, id="hands")]
    result = _run(tmp_path, models, pool, method="ttrl")
    assert result.reports[0].decision is not None  # trained, gated on the golden set
    assert _stage(tmp_path, "data")["judged"]["counts"] == {
        "tasks": 2, "short_answer": 0, "unchecked": 2, "checked": 0}
    grown = _stage(tmp_path, "grow")
    assert (grown["samples"], grown["unchecked"]) == (0, 2)  # nothing could score them
    assert not any(SPIDER in text for text in models.sampled)
    [call] = models.train_calls
    assert call["method"] == "grpo" and call["judged_reward"] == "vote"
    # what the trainer loads: both tasks, no rubric, rewarded by the group's vote
    prompts = load_prompt_set(call["data"], judged_reward="vote")
    assert sorted(t.task for t in prompts.tasks) == sorted([SPIDER, HANDS])
    assert all(t.rubric is None for t in prompts.tasks) and prompts.skipped == 0
    with pytest.raises(TrainingDataError, match="--judged-reward vote"):
        load_prompt_set(call["data"])  # without the vote nothing could reward them
    vote = judged_reward("vote", prompts.tasks, group_size=3)
    assert vote is not None and vote.__name__ == VOTE
    assert vote(prompts=[None] * 3, completions=["8", "Eight legs: 8", "6"],
                task_index=[0, 0, 0]) == [1.0, 1.0, 0.0]


def test_a_mixed_pool_votes_where_no_check_decides_and_keeps_the_checks_elsewhere(
        tmp_path: Path) -> None:
    models = Models()
    _run(tmp_path, models, [TaskSpec(task=SPIDER, id="spider"), FORMAT], method="ttrl")
    assert _stage(tmp_path, "data")["judged"]["counts"] == {
        "tasks": 2, "short_answer": 0, "unchecked": 1, "checked": 1}
    assert _stage(tmp_path, "grow")["samples"] == 2  # the checked task is sampled
    prompts = load_prompt_set(models.train_calls[0]["data"], judged_reward="vote")
    rubrics = {t.task: t.rubric for t in prompts.tasks}
    assert rubrics[SPIDER] is None
    kept = rubrics[FORMAT.task]
    assert kept is not None and kept.names == ("exact_words",)


def test_judged_grpo_with_the_vote_keeps_check_less_tasks_too(tmp_path: Path) -> None:
    models = Models()
    _run(tmp_path, models, [TaskSpec(task=SPIDER, id="spider"), FORMAT], method="grpo",
         train_options={"judged_reward": "vote"})
    [call] = models.train_calls
    assert call["judged_reward"] == "vote" and Path(call["data"]).name == "pool.jsonl"
    tasks = load_prompt_set(call["data"], judged_reward="vote").tasks
    assert sorted(t.rubric is None for t in tasks) == [False, True]


def test_other_methods_still_refuse_a_pool_without_checks(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="has a check to score it"):
        _run(tmp_path, Models(), [TaskSpec(task=SPIDER)], method="grpo")


def test_only_formatted_tasks_leave_ttrl_nothing_to_vote_on(tmp_path: Path) -> None:
    result = _run(tmp_path, Models(), [FORMAT], method="ttrl")
    assert result.stopped == "no_data" and "nothing to vote on" in result.reason


def test_a_refused_vote_trains_the_checked_tasks_or_ends_the_round(tmp_path: Path) -> None:
    labels = str(labelled_log(tmp_path / "served", "some-judge", agree=False))
    refused = {"method": "ttrl", "review_logs": (labels,), "min_labels": 4}
    models = Models()
    _run(tmp_path / "mixed", models, [TaskSpec(task=SPIDER, id="spider"), FORMAT], **refused)
    [call] = models.train_calls
    assert call["judged_reward"] == "none"
    assert [t.task for t in load_prompt_set(call["data"]).tasks] == [FORMAT.task]
    ended = _run(tmp_path / "open", Models(), [TaskSpec(task=SPIDER)], **refused)
    assert ended.stopped == "no_data" and "no pool task has a check" in ended.reason


def test_a_trajectory_fed_pool_keeps_check_less_tasks_for_a_vote(tmp_path: Path) -> None:
    log = TrajectoryLog(tmp_path / "traj")
    log.append(Trajectory(architecture="reflection", model_id="m", task=SPIDER))
    log.append(Trajectory(architecture="reflection", model_id="m", task=FORMAT.task))
    plain = trajectory_pool([log.dir], Watermark(), GOLDEN)
    assert [t.task for t in plain.tasks] == [FORMAT.task] and plain.unscored == 1
    voted = trajectory_pool([log.dir], Watermark(), GOLDEN, unchecked=True)
    assert sorted(t.task for t in voted.tasks) == sorted([SPIDER, FORMAT.task])
    assert voted.unscored == 0
