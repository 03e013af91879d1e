"""The improve methods that rest on judges: self-rewarding, spin, ttrl, constitutional, the alarm.

The policy and the judge are two different scripted models (the judge's
spec is ``"judge"``); training is a fake that writes a model folder and
remembers what it was asked. Everything else is real: sampling, the export
(PII gate off), the group ranker, the critic, the agreement alarm over
labelled logs, the gate, the registry, the round state on disk.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from distill_helpers import fake_trained, labelled_log

from agentic_loop.distill.loop.improve import ImproveBackend, improve
from agentic_loop.distill.loop.records import ImproveRound
from agentic_loop.distill.loop.settings import ImproveSettings, read_principles
from agentic_loop.distill.train import TrainResult
from agentic_loop.errors import ConfigError
from agentic_loop.judges.group_rank import candidates_shown
from agentic_loop.memory import HashingEmbedder
from agentic_loop.tasks.spec import TaskSpec
from agentic_loop.testing import ScriptedChatModel

#: what the policy writes at each sampling temperature (both first pass "exactly 2 words")
BY_TEMPERATURE = {0.7: "two words", 1.0: "good answer", 1.3: "one"}
JUDGE_LIKES = {"good answer": 9, "two words": 5, "one": 0}


def _policy(temperature: float) -> ScriptedChatModel:
    def reply(messages: list[Any]) -> str:
        asked = "\n".join(str(m.content) for m in messages)
        if "A reviewer checked your answer" in asked:
            return "Kind words."
        if "How many" in asked:  # arithmetic: right at 0.7, wrong otherwise
            return "The answer is 12." if temperature == 0.7 else "The answer is 99."
        return BY_TEMPERATURE.get(temperature, "two words")
    return ScriptedChatModel(default=reply, model_id="policy")


def _likes(schema: Any, messages: list[Any]) -> dict[str, int]:
    shown = candidates_shown(str(messages[-1].content))
    return {f"candidate_{k}": JUDGE_LIKES.get(text, 1) for k, text in shown.items()}


def _first_position(schema: Any, messages: list[Any]) -> dict[str, int]:
    shown = candidates_shown(str(messages[-1].content))
    return {f"candidate_{k}": 9 if k == "a" else 1 for k in shown}


class Models:
    """Specs to scripted models: the policy (any local spec) and the judge (``"judge"``)."""

    def __init__(self, judge: ScriptedChatModel | None = None) -> None:
        self.judge = judge or ScriptedChatModel(default_structured=_likes, model_id="judge-m")
        self.policies: list[ScriptedChatModel] = []
        self.train_calls: list[dict[str, Any]] = []

    def chat(self, spec: str, temperature: float, max_tokens: int) -> ScriptedChatModel:
        if spec == "judge":
            return self.judge
        model = _policy(temperature)
        self.policies.append(model)
        return model

    def train(self, data: Path, out: Path, **kwargs: Any) -> TrainResult:
        self.train_calls.append({"data": data, **kwargs})
        return fake_trained(data, out, **kwargs)

    def backend(self) -> ImproveBackend:
        return ImproveBackend(chat=self.chat, train=self.train,
                              gate_model=lambda spec: _policy(0.7))


def _tasks(prefix: str, n: int) -> list[TaskSpec]:
    return [TaskSpec(task=f"{prefix} {i}: answer in exactly 2 words.",
                     constraints={"exact_words": 2}, id=f"{prefix}{i}") for i in range(n)]


GOLDEN = _tasks("golden task", 4)
FAST: dict[str, Any] = dict(
    rounds=1, samples=3, temperatures=(0.7, 1.0, 1.3), hint_retry=False, max_concurrency=2,
    export_options={"pii": "off", "embedder": HashingEmbedder()},
    eval_options={"min_tasks": 4, "kl": False, "diversity_check": False})


def _run(tmp_path: Path, models: Models, pool: list[TaskSpec], **options: Any) -> Any:
    return improve(pool, golden=GOLDEN, registry=tmp_path / "reg", work_dir=tmp_path / "work",
                   backend=models.backend(), **{**FAST, **options})


def _round(tmp_path: Path) -> Path:
    return tmp_path / "work" / "round-001"


def _data_result(tmp_path: Path) -> dict[str, Any]:
    state = json.loads((_round(tmp_path) / "state.json").read_text())
    return dict(state["stages"]["data"]["result"])


def _rows(tmp_path: Path, name: str) -> list[dict[str, Any]]:
    path = _round(tmp_path) / "data" / name
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def _judged_pairs(tmp_path: Path) -> list[dict[str, Any]]:
    return [r for r in _rows(tmp_path, "pairs.jsonl")
            if r["metadata"].get("method") == "self-rewarding"]


# -- settings -----------------------------------------------------------------------------

@pytest.mark.parametrize(("options", "message"), [
    ({"method": "rlhf"}, "method (--method) must be one of sft, dpo, sft+dpo, grpo, "
                         "self-rewarding, spin, ttrl, constitutional"),
    ({"judge": " ", "method": "self-rewarding"}, "judge (--judge) is a chat model spec"),
    ({"principles": "p.txt"}, "principles (--principles) are the constitutional method's"),
    ({"method": "constitutional", "principles": "/no/such/file"},
     "principles file /no/such/file cannot be read"),
    ({"min_rank_gap": 0}, "min_rank_gap (--min-rank-gap) is a judge-score gap in (0, 10]"),
    ({"agreement_threshold": 1.5}, "agreement_threshold (--agreement-threshold)"),
    ({"min_labels": 0}, "min_labels (--min-labels) must be at least 1"),
    ({"review_logs": ("/no/such/log",)}, "review_logs (--review-logs): ['/no/such/log'] not "
                                          "found"),
])
def test_settings_name_the_flag_and_the_fix(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]").replace("+", r"\+")):
        ImproveSettings(**options)


def test_new_settings_at_their_defaults_keep_an_older_runs_fingerprint() -> None:
    plain = ImproveSettings(method="dpo")
    assert plain.fingerprint("x") == ImproveSettings(method="dpo", judge=None).fingerprint("x")
    assert (ImproveSettings(method="self-rewarding", judge="judge").fingerprint("x")
            != ImproveSettings(method="self-rewarding").fingerprint("x"))


def test_one_review_log_given_as_a_path_is_one_log(tmp_path: Path) -> None:
    one: Any = str(tmp_path)  # the Python API takes one path as well as a tuple of them
    assert ImproveSettings(review_logs=one).review_logs == (str(tmp_path),)
    assert ImproveSettings(review_logs=Path(one)).to_dict()["review_logs"] == [  # type: ignore[arg-type]
        str(tmp_path)]


def test_a_principles_file_is_read_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    good = tmp_path / "p.txt"
    good.write_text("# ours\nkind: Is kind to the reader.\nUses no jargon.\n")
    assert read_principles(good) == (("kind", "Is kind to the reader."),
                                     ("principle_2", "Uses no jargon."))
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n\n")
    with pytest.raises(ConfigError, match="holds no principle"):
        ImproveSettings(method="constitutional", principles=str(empty))
    twice = tmp_path / "twice.txt"
    twice.write_text("kind: a\nkind: b\n")
    with pytest.raises(ConfigError, match="names a principle twice"):
        read_principles(twice)


# -- self-rewarding -----------------------------------------------------------------------

def test_the_judge_never_makes_a_failing_answer_the_chosen_side(tmp_path: Path) -> None:
    def loves_failing(schema: Any, messages: list[Any]) -> dict[str, int]:
        shown = candidates_shown(str(messages[-1].content))
        likes = {"one": 10, "good answer": 6, "two words": 1}
        return {f"candidate_{k}": likes.get(text, 1) for k, text in shown.items()}

    judge = ScriptedChatModel(default_structured=loves_failing, model_id="judge-m")
    _run(tmp_path, Models(judge=judge), _tasks("pool task", 2), method="self-rewarding",
         judge="judge")
    judged = _judged_pairs(tmp_path)
    assert [(r["chosen"][0]["content"], r["rejected"][0]["content"]) for r in judged] \
        == [("good answer", "two words")] * 2


def test_self_rewarding_ranks_the_policys_samples_with_a_separate_judge(tmp_path: Path) -> None:
    models = Models()
    result = _run(tmp_path, models, _tasks("pool task", 2), method="self-rewarding",
                  judge="judge")
    data = _data_result(tmp_path)
    judged = data["judged"]
    assert judged["method"] == "self-rewarding" and judged["judge"] == "judge-m"
    assert judged["judge_spec"] == "judge" and judged["allowed"] is True
    assert judged["counts"]["ranked"] == 2 and judged["counts"]["pairs"] == 2
    judged_pairs = _judged_pairs(tmp_path)
    # the judge's favourite of the two passing answers against the worst, both orders agreeing
    assert [(r["chosen"][0]["content"], r["rejected"][0]["content"]) for r in judged_pairs] \
        == [("good answer", "one")] * 2
    assert all(r["metadata"]["judge"] == "judge-m" and r["metadata"]["consistency"] == 1.0
               and r["metadata"]["chosen_judge_score"] == 9.0 for r in judged_pairs)
    assert judged_pairs[0]["prompt"][-1]["content"].startswith("pool task 0")
    # the judge saw every group, twice (two orders); the policy was never asked to judge
    assert sum(c.kind == "structured" for c in models.judge.calls) == 4
    assert all(c.kind == "text" for p in models.policies for c in p.calls)
    assert models.train_calls[0]["method"] == "dpo"
    assert result.reports[0].method == "self-rewarding"
    manifest = json.loads((_round(tmp_path) / "data" / "manifest.json").read_text())
    assert manifest["method"]["judge"] == "judge-m"
    assert manifest["outputs"]["pairs.jsonl"]["rows"] == data["pairs"] == len(
        _rows(tmp_path, "pairs.jsonl"))


def test_a_judge_that_only_likes_the_first_position_gives_no_pairs(tmp_path: Path) -> None:
    biased = ScriptedChatModel(default_structured=_first_position, model_id="biased")
    _run(tmp_path, Models(judge=biased), _tasks("pool task", 2), method="self-rewarding",
         judge="judge")
    counts = _data_result(tmp_path)["judged"]["counts"]
    assert counts["pairs"] == 0 and counts["orders_disagree"] == 2
    assert not _judged_pairs(tmp_path)


def test_the_alarm_refuses_judged_pairs_and_the_round_trains_on_the_checks_pairs(
        tmp_path: Path) -> None:
    models = Models()
    labels = labelled_log(tmp_path / "served", "judge-m", agree=False)
    result = _run(tmp_path, models, _tasks("pool task", 2), method="self-rewarding",
                  judge="judge", review_logs=(str(labels),), min_labels=4)
    judged = _data_result(tmp_path)["judged"]
    assert judged["allowed"] is False and "agreement alarm raised" in judged["reason"]
    assert "judge-m" in judged["reason"]
    assert not [c for c in models.judge.calls if c.kind == "structured"]  # never ranked
    pairs = _rows(tmp_path, "pairs.jsonl")
    assert pairs and not _judged_pairs(tmp_path)
    assert models.train_calls[0]["method"] == "dpo" and result.reports[0].ended is None


def test_an_agreeing_judge_keeps_its_pairs(tmp_path: Path) -> None:
    labels = labelled_log(tmp_path / "served", "judge-m", agree=True)
    _run(tmp_path, Models(), _tasks("pool task", 2), method="self-rewarding", judge="judge",
         review_logs=(str(labels),), min_labels=4)
    judged = _data_result(tmp_path)["judged"]
    assert judged["allowed"] is True and judged["counts"]["pairs"] == 2


# -- spin ---------------------------------------------------------------------------------

def _spin_pool() -> list[TaskSpec]:
    sums = [TaskSpec(task=f"Ann has {a} pens and buys {b}. How many pens? Answer with the "
                     "number.", constraints={"answer": a + b}, id=f"sum{a}")
            for a, b in ((5, 7), (4, 8))]
    written = TaskSpec(task="Greet a guest in 2 words.", constraints={"exact_words": 2},
                       metadata={"reference": "Welcome, friend."}, id="greet")
    return [*sums, written, *_tasks("plain task", 1)]


def test_spin_pairs_the_reference_against_the_policys_own_answers(tmp_path: Path) -> None:
    models = Models()
    _run(tmp_path, models, _spin_pool(), method="spin")
    data = _data_result(tmp_path)
    counts = data["judged"]["counts"]
    assert counts["with_reference"] == 3 and counts["skipped_no_reference"] == 1
    assert data["judged"]["judge"] is None  # a reference is a label: no judge, no alarm
    pairs = _rows(tmp_path, "pairs.jsonl")
    assert pairs and all(r["metadata"]["source"] == "spin" for r in pairs)
    sums = [r for r in pairs if "pens" in r["prompt"][-1]["content"]]
    # a bare answer: only the wrong answers are rejected, the right one with working is kept
    assert sorted({r["rejected"][0]["content"] for r in sums}) == ["The answer is 99."]
    assert {r["chosen"][0]["content"] for r in sums} == {"12"}
    assert counts["correct_kept"] == 2
    greet = [r for r in pairs if "Greet" in r["prompt"][-1]["content"]]
    assert {r["chosen"][0]["content"] for r in greet} == {"Welcome, friend."}
    assert len(greet) == 3  # every distinct own answer differs from the written reference
    assert not (_round(tmp_path) / "data" / "sft.jsonl").exists()
    assert models.train_calls[0]["method"] == "dpo" and not models.judge.calls


def test_spin_with_no_reference_anywhere_ends_the_round_saying_how_to_fix_it(
        tmp_path: Path) -> None:
    result = _run(tmp_path, Models(), _tasks("pool task", 2), method="spin")
    assert result.stopped == "no_data"
    assert "no DPO pairs for method spin" in result.reason
    assert "reference answer" in result.reason


# -- ttrl ---------------------------------------------------------------------------------

def test_ttrl_trains_grpo_with_the_vote_on_the_short_answer_tasks(tmp_path: Path) -> None:
    models = Models()
    _run(tmp_path, models, _spin_pool(), method="ttrl", hint_retry=True)
    data = _data_result(tmp_path)
    assert data["judged"]["counts"] == {"tasks": 4, "short_answer": 2, "unchecked": 0,
                                        "checked": 2}
    call = models.train_calls[0]
    assert call["method"] == "grpo" and call["judged_reward"] == "vote"
    assert call["judge"] is None and Path(call["data"]).name == "ttrl_prompts.jsonl"
    prompts = {p["id"]: p for p in map(json.loads, Path(call["data"]).read_text().splitlines())}
    assert sorted(prompts) == ["greet", "plain task0", "sum4", "sum5"]
    # label-free: the short answers' checks are left out, so the trainer's vote is their whole
    # reward; the other tasks keep their checks (the checks' reward)
    voted = [prompts["sum4"], prompts["sum5"]]
    assert all("constraints" not in p and "rubric" not in p for p in voted)
    assert all(p["metadata"]["short_answer"] is True for p in voted)
    assert all("rubric" in prompts[i] for i in ("greet", "plain task0"))
    state = json.loads((_round(tmp_path) / "state.json").read_text())
    assert state["stages"]["hint"]["result"]["skipped"] is True  # GRPO samples for itself


def test_a_refused_vote_trains_grpo_on_the_checks_alone(tmp_path: Path) -> None:
    models = Models()
    labels = labelled_log(tmp_path / "served", "some-judge", agree=False)
    _run(tmp_path, models, _spin_pool(), method="ttrl", review_logs=(str(labels),),
         min_labels=4)
    judged = _data_result(tmp_path)["judged"]
    assert judged["allowed"] is False
    call = models.train_calls[0]
    assert call["judged_reward"] == "none" and Path(call["data"]).name == "pool.jsonl"


def test_judged_grpo_asks_the_alarm_too(tmp_path: Path) -> None:
    models = Models()
    labels = labelled_log(tmp_path / "served", "some-judge", agree=False)
    _run(tmp_path, models, _tasks("pool task", 2), method="grpo", judge="judge",
         train_options={"judged_reward": "rank"}, review_logs=(str(labels),), min_labels=4)
    assert models.train_calls[0]["judged_reward"] == "none"
    assert models.train_calls[0]["judge"] is None
    models = Models()
    _run(tmp_path / "ok", models, _tasks("pool task", 2), method="grpo", judge="judge",
         train_options={"judged_reward": "rank"})
    assert models.train_calls[0]["judged_reward"] == "rank"
    assert models.train_calls[0]["judge"] == "judge"


# -- constitutional -----------------------------------------------------------------------

def _principled(schema: Any, messages: list[Any]) -> dict[str, Any]:
    output = str(messages[-1].content).split("OUTPUT:\n", 1)[1].split("\n\n", 1)[0]
    kind = output == "Kind words."
    return {"kind": kind, "brief": True, "critique": "Be kind to the reader.",
            "overall_score": 9 if kind else 4}


def test_constitutional_revisions_that_meet_more_principles_become_rows(tmp_path: Path) -> None:
    principles = tmp_path / "principles.txt"
    principles.write_text("kind: Is kind to the reader.\nbrief: Is brief.\n")
    judge = ScriptedChatModel(structured={}, default_structured=_principled, model_id="judge-m")
    models = Models(judge=judge)
    _run(tmp_path, models, _tasks("pool task", 2), method="constitutional", judge="judge",
         principles=str(principles))
    data = _data_result(tmp_path)
    counts = data["judged"]["counts"]
    assert counts["critiqued"] == 2 and counts["revised"] == 2 and counts["improved"] == 2
    assert counts["principles"] == ["kind", "brief"]
    revised = [r for r in _rows(tmp_path, "sft.jsonl")
               if r["metadata"]["source"] == "constitutional"]
    assert [r["messages"][-1]["content"] for r in revised] == ["Kind words."] * 2
    assert "reviewer" not in json.dumps(revised[0]["messages"][:-1])  # the plain prompt
    pairs = [r for r in _rows(tmp_path, "pairs.jsonl")
             if r["metadata"]["source"] == "constitutional"]
    assert {(r["chosen"][0]["content"], r["metadata"]["met_before"], r["metadata"]["met_after"])
            for r in pairs} == {("Kind words.", 1, 2)}
    assert models.train_calls[0]["method"] == "sft+dpo"
    # the revision prompt showed the policy the judge's critique
    revise = [c for p in models.policies for c in p.calls if "A reviewer" in c.prompt]
    assert len(revise) == 2 and "Be kind to the reader." in revise[0].prompt


def test_a_revision_that_breaks_a_check_is_not_kept(tmp_path: Path) -> None:
    def too_long(schema: Any, messages: list[Any]) -> dict[str, Any]:
        return _principled(schema, messages)

    judge = ScriptedChatModel(default_structured=too_long, model_id="judge-m")
    models = Models(judge=judge)
    principles = tmp_path / "p.txt"
    principles.write_text("kind: Is kind.\nbrief: Is brief.\n")
    pool = [TaskSpec(task=f"task {i}: answer in exactly 3 words.",
                     constraints={"exact_words": 3}, id=f"t{i}") for i in range(2)]
    result = _run(tmp_path, models, pool, method="constitutional", judge="judge",
                  principles=str(principles), thresholds=(0.0,))
    counts = _data_result(tmp_path)["judged"]["counts"]
    assert counts["improved"] == 0 and counts["failed_checks"] == 2
    assert result.stopped == "no_data" and "method constitutional" in result.reason


# -- the round's report -------------------------------------------------------------------

def test_the_round_report_says_which_judge_and_method_made_the_data(tmp_path: Path) -> None:
    from agentic_loop.cli.common import console
    from agentic_loop.cli.improve import print_rounds

    labels = labelled_log(tmp_path / "served", "judge-m", agree=False)
    result = _run(tmp_path, Models(), _tasks("pool task", 2), method="self-rewarding",
                  judge="judge", review_logs=(str(labels),), min_labels=4)
    judged = result.reports[0].judged
    assert judged is not None and judged.method == "self-rewarding" and judged.judge == "judge-m"
    assert judged.allowed is False and judged.train_method == "dpo"
    saved = json.loads((_round(tmp_path) / "report.json").read_text())
    assert saved["judged"]["judge"] == "judge-m" and saved["method"] == "self-rewarding"
    assert ImproveRound.model_validate(saved) == result.reports[0]
    with console.capture() as shown:
        print_rounds(result)
    assert "REFUSED by the agreement alarm" in shown.get() and "judge judge-m" in shown.get()
    plain = _run(tmp_path / "plain", Models(), _tasks("pool task", 2), method="sft")
    assert plain.reports[0].judged is None
    assert "judged" not in json.loads((tmp_path / "plain" / "work" / "round-001" /
                                       "report.json").read_text())


def test_the_cli_takes_the_new_methods_and_refuses_a_misplaced_flag_in_one_line(
        tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from agentic_loop.cli import app

    help_text = CliRunner().invoke(app, ["improve", "--help"], terminal_width=200).output
    for flag in ("self-rewarding", "--judge", "--judged-reward", "--principles", "--min-rank-gap",
                 "--review-logs", "--agreement-threshold", "--min-labels"):
        assert flag in help_text
    bad = CliRunner().invoke(app, ["improve", "--tasks", "p", "--golden", "g",
                                   "--principles", str(tmp_path / "p.txt")])
    assert bad.exit_code == 2
    assert "principles (--principles) are the constitutional method's" in bad.stderr
    judge = CliRunner().invoke(app, ["improve", "--tasks", "p", "--golden", "g",
                                     "--judge", " "])
    assert judge.exit_code == 2 and "judge (--judge) is a chat model spec" in judge.stderr
