"""GRPO reward's judged part: a separate judge ranks each group, or the group votes (TTRL).

The judge must be a model of its own that receives exactly the rubric's judged
features (never its checks), each prompt's group must be ranked apart from the
others, the judged part must be its own logged reward function beside the
checks' part, and a judge that fails must never stop training (None for its
group, counted).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agentic_loop.cli import app
from agentic_loop.distill.train import (
    Device,
    PromptTask,
    RubricRewards,
    TrainSettings,
    grpo_config_kwargs,
    load_prompt_set,
)
from agentic_loop.distill.train.grpo import judged_part
from agentic_loop.distill.train.judged_reward import (
    RANK,
    VOTE,
    RankReward,
    VoteReward,
    group_spans,
    judged_reward,
)
from agentic_loop.distill.train.prompt_set import judged_features
from agentic_loop.distill.train.training_data import TrainingDataError
from agentic_loop.episodes import Episode, ToolStep
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Feature, Rubric
from agentic_loop.judges.group_rank import candidates_shown
from agentic_loop.tasks.spec import TaskSpec
from agentic_loop.testing import ScriptedChatModel

JUDGED = [Feature("vivid", "It paints a concrete picture.", 1.0, kind="bool"),
          Feature("warm", "It sounds friendly to a customer.", 1.0, kind="bool")]
MIXED = Rubric.for_constraints(lowercase=True, exact_words=3, features=JUDGED)


def _longer(schema: Any, messages: Any) -> dict[str, int]:
    """A judge that gives each candidate its length in characters (capped at 10)."""
    shown = candidates_shown(messages[-1].content)
    return {f"candidate_{k}": min(10, len(v)) for k, v in shown.items()}


def _criteria(prompt: str) -> list[str]:
    return prompt.split("CRITERIA:\n", 1)[1].split("\n\nCANDIDATE", 1)[0].splitlines()


def _done(texts: list[str]) -> list[list[dict[str, str]]]:
    return [[{"role": "assistant", "content": t}] for t in texts]


def _task_file(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_separate_judge_receives_exactly_the_judged_features(tmp_path: Path) -> None:
    path = _task_file(tmp_path, [{"task": "Write a bakery tagline.", "rubric": MIXED.to_dict()}])
    settings = TrainSettings(method="grpo", judged_reward="rank", num_generations=3,
                             batch_size=3, judge="openai:judge-model")
    policy = ScriptedChatModel(model_id="policy", default="unused")
    judge = ScriptedChatModel(model_id="judge", default_structured=_longer)
    prompts, part = judged_part(load_prompt_set(path), settings, "/unused", judge=judge)
    task = prompts.tasks[0]
    # the checks' part keeps the checks, the judge gets the judged features, never the other way
    assert task.rubric is not None and set(task.rubric.names) == {"exact_words", "lowercase"}
    assert task.judged is not None and task.judged.names == ("vivid", "warm")
    assert isinstance(part, RankReward) and part.judge is judge and part.judge_id == "judge"
    texts = ["warm rye bread", "fresh", "hot buns"]
    got = part(prompts=[None] * 3, completions=_done(texts), task_index=[0, 0, 0])
    assert got == [1.0, 0.5, 0.8]
    assert not policy.calls  # the policy never judges
    assert len(judge.calls) == 2 and {c.kind for c in judge.calls} == {"structured"}
    for call in judge.calls:
        assert _criteria(call.prompt) == [f"- {f.name}: {f.description}" for f in JUDGED]
        for check in task.rubric.check_features:
            assert check.description not in call.prompt
        assert sorted(candidates_shown(call.prompt).values()) == sorted(texts)
    assert part.describe()["judge"] == "judge"


def test_each_prompts_group_is_ranked_apart() -> None:
    tasks = [PromptTask("Greet me.", None, judged=Rubric(JUDGED)),
             PromptTask("Say bye.", Rubric.for_constraints(lowercase=True),
                        judged=Rubric(JUDGED[:1]))]
    judge = ScriptedChatModel(model_id="judge", default_structured=_longer)
    rank = RankReward(tasks, judge, group_size=2)
    texts = ["hi", "hello there", "bye", "farewell"]
    got = rank(prompts=[None] * 4, completions=_done(texts), task_index=[0, 0, 1, 1])
    assert got == [0.2, 1.0, 0.3, 0.8]
    assert len(judge.calls) == 4
    shown = [set(candidates_shown(c.prompt).values()) for c in judge.calls]
    assert all(s in ({"hi", "hello there"}, {"bye", "farewell"}) for s in shown)
    bye_calls = [c for c in judge.calls if "Say bye." in c.prompt]
    assert bye_calls and all(_criteria(c.prompt) == ["- vivid: It paints a concrete picture."]
                             for c in bye_calls)
    assert group_spans([0, 0, 1, 1, 1, 1], 2) == [(0, 2), (2, 4), (4, 6)]


def test_the_checks_part_and_the_judged_part_are_separate_logged_functions() -> None:
    checks = Rubric.for_constraints(lowercase=True, exact_words=3)
    task = PromptTask("Write a bakery tagline in 3 words, lowercase.", checks,
                      judged=Rubric(JUDGED))
    judge = ScriptedChatModel(model_id="judge", default_structured=_longer)
    rank = RankReward([task], judge, weight=0.5, group_size=2)
    rewards = RubricRewards([task], extra=[rank])
    names = [f.__name__ for f in rewards.functions]
    assert names[0] == "rubric" and names[-1] == RANK
    assert set(names[1:3]) == {"exact_words", "lowercase"}
    assert rewards.weights == [1.0, 0.0, 0.0, 0.5]
    kwargs = grpo_config_kwargs(TrainSettings(method="grpo", num_generations=2, batch_size=2),
                                Device(), "ckpt", reward_weights=rewards.weights)
    assert kwargs["reward_weights"] == [1.0, 0.0, 0.0, 0.5]
    logged: dict[str, float] = {}
    texts = ["warm rye loaves", "Bread"]
    by_name = {f.__name__: f(prompts=[None] * 2, completions=_done(texts), task_index=[0, 0],
                             log_metric=logged.__setitem__) for f in rewards.functions}
    assert by_name["rubric"] == [1.0, pytest.approx(checks.evaluate(task.task,
                                                                    "Bread").score / 10)]
    assert by_name[RANK] == [1.0, 0.5]  # "Bread" is 5 characters: the judge's 5 of 10
    assert logged["judge/consistency"] == 1.0 and logged["judge/failed_groups"] == 0.0
    assert logged[f"reward_errors/{RANK}"] == 0.0
    assert rewards.stats()[RANK] == {"calls": 2, "errors": 0, "first_error": None}
    assert [d["name"] for d in rewards.describe()][-1] == RANK


def test_a_failed_ranking_is_neutral_for_its_group_counted_and_never_raises() -> None:
    def junk_for_bye(schema: Any, messages: Any) -> dict[str, int]:
        if "Say bye." in messages[-1].content:
            return {"candidate_a": 99}  # out of range and missing fields: invalid every time
        return _longer(schema, messages)

    tasks = [PromptTask("Greet me.", None, judged=Rubric(JUDGED)),
             PromptTask("Say bye.", None, judged=Rubric(JUDGED))]
    judge = ScriptedChatModel(model_id="judge", default_structured=junk_for_bye)
    rank = RankReward(tasks, judge, group_size=2)
    logged: dict[str, float] = {}
    got = rank(prompts=[None] * 4, completions=_done(["hi", "hello there", "bye", "ciao"]),
               task_index=[0, 0, 1, 1], log_metric=logged.__setitem__)
    assert got == [0.2, 1.0, None, None]
    assert rank.stats.errors == 2 and rank.stats.calls == 4
    assert rank.stats.first_error
    assert rank.failed_groups == 1 and rank.groups == 1
    assert logged[f"reward_errors/{RANK}"] == 2.0 and logged["judge/failed_groups"] == 1.0
    assert rank.describe()["failed_groups"] == 1


def test_a_judge_that_raises_is_a_failed_group_too() -> None:
    judge = ScriptedChatModel(model_id="judge", default_structured=RuntimeError("down"))
    rank = RankReward([PromptTask("Greet me.", None, judged=Rubric(JUDGED))], judge,
                      group_size=2)
    assert rank(prompts=[None] * 2, completions=["a", "b"], task_index=[0, 0]) == [None, None]
    assert rank.stats.errors == 2 and "down" in (rank.stats.first_error or "")


def test_a_tool_episode_is_judged_on_its_final_answer_with_its_calls() -> None:
    judge = ScriptedChatModel(model_id="judge", default_structured=_longer)
    rank = RankReward([PromptTask("What is 2+2?", None, judged=Rubric(JUDGED))], judge,
                      group_size=2)
    episodes = [Episode(steps=[ToolStep(name="calculator", args={"x": "2+2"}, content="4")],
                        final="It is 4."),
                Episode(final="5")]
    got = rank(prompts=[None] * 2, completions=["<raw tokens>", "<raw tokens>"],
               task_index=[0, 0], episode=[e.model_dump_json() for e in episodes])
    assert got[0] is not None and got[1] is not None and got[0] > got[1]
    assert all("calculator" in c.prompt and "<raw tokens>" not in c.prompt
               for c in judge.calls)


def test_vote_rewards_agreement_with_the_majority_on_tasks_without_a_check() -> None:
    tasks = [PromptTask("How many legs has a spider?", None),
             PromptTask("Whisper.", Rubric.for_constraints(lowercase=True))]
    vote = VoteReward(tasks, weight=0.7, group_size=3)
    logged: dict[str, float] = {}
    got = vote(prompts=[None] * 6, completions=_done(["8", "It has 8 legs.", "six", "a", "b",
                                                      "c"]),
               task_index=[0, 0, 0, 1, 1, 1], log_metric=logged.__setitem__)
    assert got == [1.0, 1.0, 0.0, None, None, None]  # the checked task: the checks decide
    assert logged["vote/agreement"] == pytest.approx(2 / 3)
    assert vote.describe() == {"kind": "vote", "judge": None, "function": VOTE, "weight": 0.7,
                               "groups": 1, "failed_groups": 0,
                               "mean_agreement": pytest.approx(0.6667)}


def test_the_vote_is_counted_once_per_group_and_enters_the_reward_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """TTRL's reward of a small batch, by hand: TRL's sum of weight x value per completion."""
    import sys

    import agentic_loop.judges as judges

    module = sys.modules["agentic_loop.judges.majority_vote"]
    real, counted = module.majority_vote, []

    def spy(*args: Any, **kwargs: Any) -> Any:  # the real vote, counted
        counted.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "majority_vote", spy)
    monkeypatch.setattr(judges, "majority_vote", spy)
    tasks = [PromptTask("What is 5 + 7?", None), PromptTask("Pick a prime under 9.", None),
             PromptTask("Say hi in lowercase.", Rubric.for_constraints(lowercase=True))]
    vote = VoteReward(tasks, weight=0.5, group_size=4)
    rewards = RubricRewards(tasks, extra=[vote])
    texts = ["x = 12", "12.0", "It is 13.", "Answer: 12",  # 12 wins 3 of 4
             "2", "3", "5", "7",  # no clear majority: a neutral group
             "hi", "Hi", "hi", "HI"]  # checked: the checks decide, no vote
    logged: dict[str, float] = {}
    values = {f.__name__: f(prompts=[None] * 12, completions=_done(texts),
                            task_index=[0] * 4 + [1] * 4 + [2] * 4, log_metric=logged.__setitem__)
              for f in rewards.functions}
    assert len(counted) == 2  # one vote per voted group (the old code counted each twice)
    assert values[VOTE] == [1.0, 1.0, 0.0, 1.0] + [0.0] * 4 + [None] * 4
    assert values["rubric"] == [None] * 8 + [1.0, 0.0, 1.0, 0.0]
    weights = dict(zip(values, rewards.weights, strict=True))
    total = [sum(weights[name] * v[i] for name, v in values.items() if v[i] is not None)
             for i in range(12)]
    assert total == [0.5, 0.5, 0.0, 0.5] + [0.0] * 4 + [1.0, 0.0, 1.0, 0.0]
    assert logged["vote/agreement"] == pytest.approx((3 / 4 + 1 / 4) / 2)
    assert vote.groups == 2 and vote.describe()["mean_agreement"] == 0.5


def test_vote_keeps_tasks_without_a_check_and_the_rubric_part_skips_them(tmp_path: Path) -> None:
    path = _task_file(tmp_path, [{"task": "How many legs has a spider?"},
                                 {"task": "Say hi.", "constraints": {"lowercase": True}}])
    (tmp_path / "open").mkdir()
    only_open = _task_file(tmp_path / "open", [{"task": "How many legs has a spider?"}])
    with pytest.raises(TrainingDataError, match="--judged-reward vote"):
        load_prompt_set(only_open)
    assert len(load_prompt_set(only_open, judged_reward="vote").tasks) == 1
    plain = load_prompt_set(path)
    assert [t.task for t in plain.tasks] == ["Say hi."] and plain.skipped == 1
    voted = load_prompt_set(path, judged_reward="vote")
    assert [t.rubric is None for t in voted.tasks] == [True, False] and voted.skipped == 0
    assert any("majority vote" in n for n in voted.notes)
    rewards = RubricRewards(voted.tasks)
    rubric = rewards.functions[0](prompts=[None] * 2, completions=_done(["8", "hi"]),
                                  task_index=[0, 1])
    assert rubric == [None, 1.0] and rewards.stats()["rubric"]["errors"] == 0
    ranked = load_prompt_set(path, judged_reward="rank")
    assert [t.judged.names if t.judged else None for t in ranked.tasks] == [
        ("on_task", "well_written"), None]
    assert judged_features(TaskSpec(task="Say hi.", constraints={"lowercase": True})) is None


def test_judged_reward_refuses_what_cannot_work() -> None:
    checked = [PromptTask("Whisper.", Rubric.for_constraints(lowercase=True))]
    with pytest.raises(ConfigError, match="every task here has one"):
        judged_reward("vote", checked, group_size=2)
    with pytest.raises(ConfigError, match="needs a judge model"):
        judged_reward("rank", [PromptTask("Greet.", None, judged=Rubric(JUDGED))], group_size=2)
    with pytest.raises(ConfigError, match="no task with judged features"):
        judged_reward("rank", checked, judge=ScriptedChatModel(), group_size=2)
    with pytest.raises(ConfigError, match="at least 2"):
        VoteReward([PromptTask("q", None)], group_size=1)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"judge": "local"}, r"only --judged-reward rank"),
    ({"judged_reward": "vote", "judge": "local"}, r"only --judged-reward rank"),
    ({"judged_reward": "best"}, r"judged_reward \(--judged-reward\) must be one of"),
    ({"judged_reward": "rank", "judge": " "}, r"chat model spec"),
    ({"judged_reward": "rank", "judged_reward_weight": 0.0}, r"must be positive"),
    ({"judged_reward": "rank", "llm_features": "refuse"}, r"llm_features 'refuse'"),
    ({"judged_reward": "rank", "num_generations": 28, "batch_size": 28}, r"at most 26"),
])
def test_settings_refuse_a_bad_judge_with_its_flag(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TrainSettings(method="grpo", **kwargs)


def test_the_card_says_which_judge_and_which_parts_and_defaults_leave_it_as_it_was() -> None:
    plain = TrainSettings(method="grpo")
    assert not {"judge", "judged_reward", "judged_reward_weight"} & set(plain.hyperparameters())
    ranked = TrainSettings(method="grpo", judged_reward="rank", judge="openai:gpt-4o-mini",
                           judged_reward_weight=0.5)
    card = ranked.hyperparameters()
    assert (card["judge"], card["judged_reward"], card["judged_reward_weight"]) == (
        "openai:gpt-4o-mini", "rank", 0.5)
    assert ranked.fingerprint("d") != plain.fingerprint("d")
    assert "judge" not in TrainSettings(method="sft").hyperparameters()


def test_cli_flags_reach_the_settings_and_the_dry_run(tmp_path: Path) -> None:
    path = _task_file(tmp_path, [{"task": "Write a motto in exactly 3 words."}])
    runner = CliRunner()
    refused = runner.invoke(app, ["train", "--data", str(path), "--out", str(tmp_path / "o"),
                                  "--judge", "local"])
    assert refused.exit_code == 2 and "--judge" in refused.stderr and "--method grpo" in \
        refused.stderr
    result = runner.invoke(app, ["train", "--data", str(path), "--out", str(tmp_path / "o"),
                                 "--method", "grpo", "--judged-reward", "rank", "--judge",
                                 "openai:judge-model", "--judged-reward-weight", "0.5",
                                 "--dry-run"])
    assert result.exit_code == 0, result.output
    out = re.sub(r"\s+", " ", result.output)
    assert "judge_rank (x0.5, judge: openai:judge-model)" in out
    assert "--judged-reward rank" in out and "--judge openai:judge-model" in out
    checked = _task_file(tmp_path, [{"task": "Say hi.", "constraints": {"lowercase": True}}])
    for kind, why in (("vote", "every task here has one"), ("rank", "no task with judged")):
        refused = runner.invoke(app, ["train", "--data", str(checked), "--out",
                                      str(tmp_path / "o"), "--method", "grpo",
                                      "--judged-reward", kind, "--dry-run"])
        assert refused.exit_code == 2 and why in refused.stderr, refused.output


def test_a_langchain_model_as_judge_is_used_as_is_and_named_by_its_id(tmp_path: Path) -> None:
    path = _task_file(tmp_path, [{"task": "Write a motto in exactly 3 words."}])
    judge = ScriptedChatModel(model_id="big-judge", default_structured=_longer)
    settings = TrainSettings(method="grpo", judged_reward="rank", judge=judge,
                             num_generations=2, batch_size=2)
    assert settings.hyperparameters()["judge"] == "big-judge"
    assert settings.fingerprint("d") != TrainSettings(
        method="grpo", judged_reward="rank", judge=ScriptedChatModel(model_id="other"),
        num_generations=2, batch_size=2).fingerprint("d")
    _, part = judged_part(load_prompt_set(path), settings, "/never-loaded")
    assert isinstance(part, RankReward) and part.judge is judge
    part(prompts=[None] * 2, completions=["free as birds", "go"], task_index=[0, 0])
    assert len(judge.calls) == 2
    with pytest.raises(ConfigError, match="LangChain chat model"):
        TrainSettings(method="grpo", judged_reward="rank", judge=42)
