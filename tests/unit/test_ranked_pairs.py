"""DPO pairs from a judge's group ranking: only pairs the judge is sure of, in TRL's format.

A pair must put the best answer that may train against the worst, need a
judge score gap, need every presentation order to agree (a position-biased
judge gives none), survive a judge that emits junk (counted, never a crash),
and be a row the DPO trainer reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentic_loop.distill.data.curate import CurationLog
from agentic_loop.distill.data.ranked_pairs import (
    RankedPairRow,
    ranked_pairs,
    round_groups,
    task_groups,
)
from agentic_loop.distill.data.samples import Sample
from agentic_loop.distill.train.training_data import read_pair_rows
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Feature, GroupRanker, Rubric
from agentic_loop.judges.group_rank import candidates_shown
from agentic_loop.testing import ScriptedChatModel
from agentic_loop.trajectories import Candidate, Round, Trajectory

JUDGED = Rubric([Feature("vivid", "It paints a concrete picture.", 1.0, kind="bool")])


def _longer(schema: Any, messages: Any) -> dict[str, int]:
    shown = candidates_shown(messages[-1].content)
    return {f"candidate_{k}": min(10, len(v)) for k, v in shown.items()}


def _first_shown(schema: Any, messages: Any) -> dict[str, int]:
    """A position-biased judge: whatever is shown first wins."""
    shown = candidates_shown(messages[-1].content)
    return {f"candidate_{k}": 10 if k == "a" else 0 for k in shown}


def _sample(text: str, *, passed: bool | None = True, source: str = "round",
            run: str = "t1", flags: tuple[str, ...] = ()) -> Sample:
    return Sample(prompt="Describe a bakery.", response=text, reward=1.0, source=source,  # type: ignore[arg-type]
                  trajectory_id=run, iteration=0, model_id="m", passed=passed, flags=flags)


def _ranker(answer: Any, model_id: str = "judge") -> GroupRanker:
    return GroupRanker(ScriptedChatModel(default_structured=answer, model_id=model_id), JUDGED)


def test_the_best_trainable_answer_is_chosen_against_the_worst() -> None:
    group = [_sample("Warm loaves and cinnamon air."),  # 10 (29 chars, capped)
             _sample("Bread.", source="alternative"),  # 6
             _sample("Ovens hum all night long!", passed=False, source="alternative"),  # 10, failed
             _sample("Ok", source="alternative")]  # 2
    log = CurationLog()
    rows = ranked_pairs([group], _ranker(_longer), log=log)
    assert len(rows) == 1
    meta = rows[0].metadata
    assert rows[0].chosen[0].content == "Warm loaves and cinnamon air."
    assert rows[0].rejected[0].content == "Ok"
    assert (meta.judge, meta.chosen_judge_score, meta.rejected_judge_score, meta.gap) == (
        "judge", 10.0, 2.0, 0.8)
    assert meta.source == "best_of_n" and meta.group_size == 4 and meta.consistency is not None


def test_a_failed_check_never_becomes_the_chosen_side() -> None:
    group = [_sample("Ovens hum all night long!", passed=False),
             _sample("Rye and honey.", source="alternative"),
             _sample("Hi", source="alternative", flags=("repetition",))]
    rows = ranked_pairs([group], _ranker(_longer))
    assert rows[0].chosen[0].content == "Rye and honey."
    assert rows[0].rejected[0].content == "Hi"
    log = CurationLog()
    assert ranked_pairs([[_sample("aaaaaaaa", passed=False), _sample("b", passed=False,
                                                                     source="alternative")]],
                        _ranker(_longer), log=log) == []
    assert log.drops["ranked pairs"]["no_trainable_answer"] == 1


def test_a_small_gap_and_disagreeing_orders_give_no_pair() -> None:
    log = CurationLog()
    close = [_sample("Fresh rye."), _sample("Fresh buns", source="alternative")]
    assert ranked_pairs([close], _ranker(_longer), min_gap=0.2, log=log) == []
    biased = [_sample("Fresh rye bread."), _sample("Buns!", source="alternative"),
              _sample("Scones and jam.", source="alternative")]
    assert ranked_pairs([biased], _ranker(_first_shown), log=log) == []
    assert log.drops["ranked pairs"] == {"judge_gap_below_min": 1, "orders_disagree": 1}


def test_a_judge_that_emits_junk_is_counted_never_a_crash() -> None:
    log = CurationLog()
    junk = _ranker(lambda schema, messages: {"candidate_a": 42, "candidate_z": "x"})
    groups = [[_sample("Warm bread."), _sample("Ok", source="alternative")]]
    assert ranked_pairs(groups, junk, log=log) == []
    assert log.drops["ranked pairs"]["ranking_failed"] == 1
    assert log.steps[-1].before == 1 and log.steps[-1].after == 0


def test_rows_are_trl_preference_rows_the_trainer_reads(tmp_path: Path) -> None:
    groups = [[_sample("Warm loaves and cinnamon air.", run="a"), _sample("Ok", run="b")]]
    rows = ranked_pairs(groups, _ranker(_longer))
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(r.model_dump_json() + "\n" for r in rows))
    read = read_pair_rows(path)
    assert [m["role"] for m in read[0]["prompt"]] == ["user"]
    assert read[0]["chosen"] == [{"role": "assistant", "content": "Warm loaves and cinnamon air."}]
    saved = json.loads(path.read_text())["metadata"]
    assert saved["judge"] == "judge" and saved["source"] == "samples"
    assert RankedPairRow.model_validate_json(path.read_text().strip()).metadata.gap == 0.8


def test_groups_from_best_of_n_rounds_and_from_several_runs() -> None:
    run = Trajectory(architecture="reflection", model_id="m", task="Describe a bakery.",
                     rounds=[Round(iteration=0, draft="Warm loaves and cinnamon air.", score=9.0,
                                   passed=True, alternatives=[
                                       Candidate(draft="Ok", score=5.0, passed=True),
                                       Candidate(draft="", score=5.0, passed=True)])],
                     final_output="Warm loaves and cinnamon air.", final_score=9.0,
                     accepted=True)
    groups = round_groups([run])
    assert [[s.response for s in g] for g in groups] == [["Warm loaves and cinnamon air.", "Ok"]]
    rows = ranked_pairs(groups, _ranker(_longer))
    assert rows[0].metadata.source == "best_of_n"
    assert rows[0].metadata.chosen_trajectory_id == run.id
    finals = [_sample(t, source="final", run=r) for t, r in (("A", "x"), ("BB", "y"), ("A", "z"))]
    assert [[s.trajectory_id for s in g] for g in task_groups(finals)] == [["x", "y"]]


def test_bad_thresholds_are_refused() -> None:
    with pytest.raises(ConfigError, match="min_gap"):
        ranked_pairs([], _ranker(_longer), min_gap=0.0)
    with pytest.raises(ConfigError, match="min_consistency"):
        ranked_pairs([], _ranker(_longer), min_consistency=1.5)
