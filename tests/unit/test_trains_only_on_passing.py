"""The loop trains on what its checks accept (issue 31, points 1 and 2).

Failing, recited and degenerate samples are planted with HIGH scores in
logged trajectories; the real export (no PII model, no LLM) must keep every
one of them out of ``sft.jsonl`` and off the chosen side of ``pairs.jsonl``,
and its manifest must count what each rule dropped. The STaR hint retry
gives a known answer and asks for the working; a rationalization that only
restates the answer is dropped and counted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from distill_helpers import write_log

from agentic_loop.distill.data.export import export_datasets
from agentic_loop.distill.data.samples import trajectory_samples
from agentic_loop.distill.loop.grow import RESTATED, hint_retry, hint_task, plain_trajectory
from agentic_loop.judges import Rubric
from agentic_loop.memory import HashingEmbedder
from agentic_loop.tasks.spec import TaskSpec
from agentic_loop.testing import ScriptedChatModel
from agentic_loop.trajectories import Candidate, Round, Trajectory

TASK = "Write a tagline for a bakery in all lowercase, as exactly 3 bullet points."
RUBRIC = Rubric.for_constraints(lowercase=True, bullet_count=(3, 3))

GOOD = "- warm loaves at dawn\n- crusts that crackle\n- come hungry, leave happy"
FAILED = "- Warm Loaves At Dawn\n- Crusts That Crackle\n- Come Hungry"  # logged as failing
UNCHECKED = "- WARM BREAD\n- FRESH ROLLS\n- HOT BUNS"  # no verdict logged: the export checks it
LOSER = "- Fresh Bread Daily\n- Open At Six\n- Come In"  # a best-of-n loser that failed
RECITED = "- write a tagline for a bakery in all lowercase\n- use exactly 3 bullet points\n" \
          "- lowercase only"
DEGENERATE = "- soooooo fresh\n- hahahahaha bread\n- yum yum"
REPEATED = "- fresh bread daily\n- fresh bread daily\n- fresh bread daily"
PLANTED = (FAILED, UNCHECKED, LOSER, RECITED, DEGENERATE, REPEATED)


def planted_runs() -> list[Trajectory]:
    """Two runs of TASK: every bad answer scores 9 or more; only GOOD may train."""
    rounds = [
        Round(iteration=0, draft=FAILED, score=9.0, passed=False),
        Round(iteration=1, draft=UNCHECKED, score=9.5),
        Round(iteration=2, draft=RECITED, score=10.0, passed=True),
        Round(iteration=3, draft=DEGENERATE, score=10.0, passed=True),
        Round(iteration=4, draft=REPEATED, score=10.0, passed=True),
        Round(iteration=5, draft=GOOD, score=9.5, passed=True, alternatives=[
            Candidate(draft=LOSER, score=9.0, passed=False, judged=True)]),
    ]
    run = Trajectory(architecture="reflection", model_id="m", task=TASK,
                     rubric=RUBRIC.to_dict(), rounds=rounds, final_output=GOOD,
                     final_score=9.5, accepted=True)
    # a second run whose accepted final is a recital that passes every check at 10/10
    recital = Trajectory(architecture="reflection", model_id="m", task=TASK,
                         rubric=RUBRIC.to_dict(), final_output=RECITED, final_score=10.0,
                         accepted=True,
                         rounds=[Round(iteration=0, draft=RECITED, score=10.0, passed=True)])
    return [run, recital]


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_planted_bad_samples_with_high_scores_never_train(tmp_path: Path) -> None:
    runs = planted_runs()
    for planted in (RECITED, DEGENERATE, REPEATED):  # the checks alone accept them
        assert RUBRIC.evaluate(TASK, planted).passed and RUBRIC.evaluate(TASK, planted).score == 10
    assert not RUBRIC.evaluate(TASK, UNCHECKED).passed
    logs = write_log(tmp_path / "logs", runs)
    for pii in ("off", "regex"):
        out = tmp_path / f"out-{pii}"
        report = export_datasets([logs], out, pii=pii, min_score=0.8, min_gap=0.2,
                                 embedder=HashingEmbedder())
        sft = [row["messages"][-1]["content"] for row in read_rows(out / "sft.jsonl")]
        assert sft == [GOOD]
        pairs = read_rows(out / "pairs.jsonl")
        assert pairs and {p["chosen"][0]["content"] for p in pairs} == {GOOD}
        assert all(p["metadata"]["chosen_passed"] is True for p in pairs)
        # a rejected side failed a check (any gap) or scores the min gap lower
        assert all(p["metadata"]["rejected_passed"] is False or p["metadata"]["gap"] >= 0.2
                   for p in pairs)
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["dropped"] == report.dropped == {
            "sft": {"failed_check": 3, "guard:degenerate": 1, "guard:recital": 2,
                    "guard:repetition": 1},
            # the cross-run pair GOOD vs the recital: the recital scores higher, not worse
            "pairs": {"rejected_not_worse": 1},
        }
        # the planted answers appear, if at all, only as rejected sides
        shown = [*sft, *(p["chosen"][0]["content"] for p in pairs)]
        assert not [text for text in PLANTED if text in shown]


def test_the_samples_carry_their_verdicts() -> None:
    run = planted_runs()[0]
    verdicts = {s.response: (s.passed, s.flags) for s in trajectory_samples(run)}
    assert verdicts[GOOD] == (True, ())
    assert verdicts[FAILED] == (False, ()) and verdicts[LOSER] == (False, ())
    assert verdicts[UNCHECKED][0] is False  # re-checked with the run's saved rubric
    assert verdicts[RECITED] == (True, ("recital",))
    assert verdicts[DEGENERATE] == (True, ("degenerate",))
    assert verdicts[REPEATED] == (True, ("repetition",))


def test_the_composite_reward_feeds_the_verifier_term() -> None:
    rubric = Rubric.for_constraints(answer=42, lowercase=True)
    run = Trajectory(architecture="reflection", model_id="m", task="what is 6*7?",
                     rubric=rubric.to_dict(), final_output="6 times 7 is 42", final_score=10.0,
                     accepted=True, rounds=[
                         Round(iteration=0, draft="it is 41", score=5.0, passed=False,
                               features={"answer": False, "lowercase": True}),
                         Round(iteration=1, draft="6 times 7 is 42", score=10.0, passed=True,
                               features={"answer": True, "lowercase": True})])
    plain = [s.reward for s in trajectory_samples(run)]
    composite = [s.reward for s in trajectory_samples(run, reward="composite")]
    assert plain == [0.5, 1.0]
    assert composite[0] < 0.5  # the answer check failed: the verifier term is 0
    assert composite[1] == 1.0  # verified, no feedback (neutral), no latency recorded


MATH = TaskSpec(task="Ann has 3 pens and buys 4 more. How many pens does she have?",
                constraints={"answer": 7}, id="m1")


def test_a_known_answer_hint_gives_the_answer_and_asks_for_the_working() -> None:
    hint = hint_task(MATH, "She has 5.")
    assert "the correct answer is 7" in hint and "working" in hint
    assert "She has 5" not in hint  # STaR's rationalization: the answer, not the failed try
    other = TaskSpec(task="Say hi in 2 words.", constraints={"exact_words": 2})
    assert "Fix these requirements" in hint_task(other, "hi")  # other tasks: the failed checks


def test_a_rationalization_is_trained_as_the_plain_task_and_restating_is_dropped(
        tmp_path: Path) -> None:
    from agentic_loop.architectures import Reflection

    replies = iter(["3 + 4 = 7, so she has 7 pens.", "The answer is 7."])

    def make(temperature: float) -> Reflection:
        return Reflection(ScriptedChatModel(responses=[next(replies)]), max_iterations=1)

    worked = hint_retry(make, [(MATH, "She has 5.")], tmp_path / "a", round_number=1,
                        temperature=0.7)[0]
    restated = hint_retry(make, [(MATH, "She has 5.")], tmp_path / "b", round_number=1,
                          temperature=0.7)[0]
    for run in (worked, restated):
        assert run.task == MATH.task and "Hint" not in json.dumps(run.model_dump(mode="json"))
        assert run.metadata["improve"]["rationalized"] is True
    assert worked.accepted and not worked.rounds[0].guards
    assert not restated.accepted and RESTATED in restated.rounds[0].guards
    report = export_datasets([tmp_path / "a", tmp_path / "b"], tmp_path / "out", pii="off",
                             dedup_threshold=None)
    sft = read_rows(tmp_path / "out" / "sft.jsonl")
    assert [row["messages"][-1]["content"] for row in sft] == ["3 + 4 = 7, so she has 7 pens."]
    assert sft[0]["messages"][1]["content"].startswith(MATH.task)  # the plain task, no hint
    assert "Hint" not in (tmp_path / "out" / "sft.jsonl").read_text()
    assert report.dropped["sft"] == {f"guard:{RESTATED}": 1}


def test_plain_trajectory_flags_only_with_a_known_answer() -> None:
    rubric = MATH.rubric()
    assert rubric is not None
    run = Trajectory(architecture="reflection", model_id="m", task="hinted",
                     rounds=[Round(iteration=0, draft="7", score=10.0, passed=True)])
    assert RESTATED in plain_trajectory(run, MATH, rubric, "7").rounds[0].guards
    assert not plain_trajectory(run, MATH, rubric).rounds[0].guards


def test_grpo_rewards_keep_failing_completions_as_negatives() -> None:
    from agentic_loop.distill.train.prompt_set import PromptTask
    from agentic_loop.distill.train.rewards import RubricRewards

    rewards = RubricRewards([PromptTask(TASK, RUBRIC)])
    done = [[{"role": "assistant", "content": text}] for text in (GOOD, FAILED, "")]
    good, failed, empty = rewards.functions[0](prompts=[None] * 3, completions=done,
                                               task_index=[0, 0, 0])
    assert good == 1.0 and failed is not None and empty is not None
    assert empty == 0.0 <= failed < good  # scored, never dropped: the group's contrast


def test_a_hint_retry_does_not_warn_that_its_own_hint_goes_unchecked(tmp_path: Path) -> None:
    """The hint restates the locked checks; the run is scored by them, so nothing is unchecked."""
    import warnings

    from agentic_loop.architectures import Reflection
    from agentic_loop.architectures.settings import UncheckedConstraintsWarning

    spec = TaskSpec(task="Describe a garden in one sentence.", id="g1",
                    constraints={"uppercase": True, "include_words": ["garden"]})

    def make(temperature: float) -> Reflection:
        return Reflection(ScriptedChatModel(responses=["A QUIET GARDEN FULL OF ROSES."]),
                          max_iterations=1)

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        run = hint_retry(make, [(spec, "a quiet place")], tmp_path, round_number=1,
                         temperature=0.7)[0]
    assert run.accepted and run.task == spec.task
    assert not [w for w in seen if issubclass(w.category, UncheckedConstraintsWarning)]
