"""The canary ramp's statistics and stage machine (distill/flywheel/ramp*.py), on seeded samples."""

from __future__ import annotations

import random

import numpy as np
import pytest

from agentic_loop.distill.flywheel.ramp import (
    RampSettings,
    StageVerdict,
    judge_stage,
    look_alpha,
    planned_look,
    planned_tests,
)
from agentic_loop.distill.flywheel.ramp_stats import (
    ArmSample,
    TestResult,
    compare_errors,
    compare_p99,
    compare_pass,
    power_not_worse,
    runs_needed,
)
from agentic_loop.errors import ConfigError

DAY = 24 * 3600.0


def _arm(rng: random.Random, version: str, n: int, *, pass_rate: float = 0.9,
         error_rate: float = 0.01, latency_scale: float = 1.0) -> ArmSample:
    """``n`` runs: each passes, errs and takes a lognormal time, independently."""
    return ArmSample(version=version,
                     passed=[rng.random() < pass_rate for _ in range(n)],
                     errors=[rng.random() < error_rate for _ in range(n)],
                     latencies_s=[latency_scale * rng.lognormvariate(0.0, 0.4)
                                  for _ in range(n)])


def _grow(arm: ArmSample, more: ArmSample) -> ArmSample:
    return arm.model_copy(update={"passed": arm.passed + more.passed,
                                  "errors": arm.errors + more.errors,
                                  "latencies_s": arm.latencies_s + more.latencies_s})


def _run_stage(settings: RampSettings, stage: int, rng: random.Random, *, batch: int,
               **candidate: float) -> tuple[StageVerdict, int]:
    """Feed both arms ``batch`` runs at a time (one hour apart) until the verdict is not wait."""
    cur, cand = ArmSample(version="v1"), ArmSample(version="v2")
    max_batches = 40
    for i in range(1, max_batches + 1):
        cur = _grow(cur, _arm(rng, "v1", batch))
        cand = _grow(cand, _arm(rng, "v2", batch, **candidate))
        v = judge_stage(settings, stage, stage_started_at=0.0, now=i * 3600.0, current=cur,
                        candidate=cand)
        if v.action != "wait":
            return v, len(cand.passed)
    raise AssertionError(f"stage {stage} still waits after {max_batches * batch} runs per arm")


def test_a_healthy_candidate_advances_through_every_stage_and_is_promoted() -> None:
    settings = RampSettings()
    rng = random.Random(35)
    actions = []
    for stage in range(len(settings.stages)):
        v, runs = _run_stage(settings, stage, rng, batch=150)
        actions.append((v.action, v.next_fraction))
        assert runs >= settings.min_runs
        assert [t.verdict for t in v.tests] == ["not worse"] * 3
        assert "not worse" in v.reasons[0] and v.fraction == settings.stages[stage]
    assert actions == [("advance", 0.25), ("advance", 0.5), ("advance", 1.0), ("promote", None)]


@pytest.mark.parametrize(("candidate", "label"), [
    ({"pass_rate": 0.6}, "pass rate"),
    ({"error_rate": 0.2}, "error rate"),
    ({"latency_scale": 3.0}, "p99 latency"),
])
def test_a_worse_candidate_rolls_back_before_min_runs_and_names_the_metric(
        candidate: dict[str, float], label: str) -> None:
    settings = RampSettings()
    v, runs = _run_stage(settings, 0, random.Random(7), batch=20, **candidate)
    assert v.action == "rollback", v.reasons
    assert runs < settings.min_runs  # a clear breach needs no more runs
    assert runs >= (100 if label == "p99 latency" else settings.min_breach_runs)
    assert v.reasons[0].startswith(f"{label} is worse beyond its margin: candidate ")
    assert [t.verdict for t in v.tests].count("worse") >= 1
    worse = next(t for t in v.tests if t.verdict == "worse")
    assert worse.p_worse is not None and worse.p_worse < settings.alpha / 2


def test_a_small_ramp_rolls_a_slow_candidate_back_at_its_min_runs() -> None:
    settings = RampSettings(min_runs=40, min_breach_runs=10)  # the p99 floor drops to 40
    # 4x slower: harm is tested at alpha / 3 (three planned looks), and the p99 of 40
    # values is their maximum, so a 3x slowdown may need a few more runs to show
    v, runs = _run_stage(settings, 0, random.Random(5), batch=10, latency_scale=4.0)
    assert v.action == "rollback" and 40 <= runs < 100  # the floor of 100 would wait longer
    assert v.reasons[0].startswith("p99 latency is worse beyond its margin")


def test_one_bad_start_below_the_floor_only_waits() -> None:
    cur = ArmSample(version="v1", passed=[True] * 10, errors=[False] * 10,
                    latencies_s=[1.0] * 10)
    cand = ArmSample(version="v2", passed=[False] * 10, errors=[False] * 10,
                     latencies_s=[1.0] * 10)
    v = judge_stage(RampSettings(), 0, stage_started_at=0.0, now=1.0, current=cur,
                    candidate=cand)
    assert v.tests[0].verdict == "worse"  # the test sees it, the floor of 20 holds it
    assert v.action == "wait"


def test_too_few_runs_wait_and_say_what_is_missing() -> None:
    rng = random.Random(1)
    v = judge_stage(RampSettings(), 1, stage_started_at=0.0, now=600.0,
                    current=_arm(rng, "v1", 60), candidate=_arm(rng, "v2", 60))
    assert v.action == "wait" and v.next_fraction is None and v.fraction == 0.25
    assert any("n=60/60 of the 200 per arm" in r for r in v.reasons)
    assert any("power to detect a 5-point drop" in r and "runs per arm give 80%" in r
               for r in v.reasons), v.reasons


def test_a_stage_past_its_time_without_evidence_rolls_back() -> None:
    rng = random.Random(2)
    cur, cand = _arm(rng, "v1", 60), _arm(rng, "v2", 60)
    settings = RampSettings(max_stage_s=DAY)
    v = judge_stage(settings, 2, stage_started_at=0.0, now=DAY + 1, current=cur, candidate=cand)
    assert v.action == "rollback"
    assert v.reasons[0] == "stage 2 ran out of time without evidence the candidate is not worse"
    on_time = judge_stage(settings, 2, stage_started_at=0.0, now=DAY - 1, current=cur,
                          candidate=cand)
    assert on_time.action == "wait"


def test_evidence_in_hand_advances_even_past_the_time_limit() -> None:
    cur = ArmSample(version="v1", passed=[True] * 400, errors=[False] * 400,
                    latencies_s=[1.0 + i / 1000 for i in range(400)])
    cand = cur.model_copy(update={"version": "v2"})
    v = judge_stage(RampSettings(), 0, stage_started_at=0.0, now=10 * DAY, current=cur,
                    candidate=cand)
    assert (v.action, v.next_fraction) == ("advance", 0.25)


def test_missing_errors_never_promote() -> None:
    rng = random.Random(3)
    cur = _arm(rng, "v1", 800).model_copy(update={"errors": []})
    cand = _arm(rng, "v2", 800).model_copy(update={"errors": []})
    settings = RampSettings()
    v = judge_stage(settings, 3, stage_started_at=0.0, now=1.0, current=cur, candidate=cand)
    assert v.action == "wait" and v.tests[1].verdict == "undecided" and v.tests[1].n == (0, 0)
    late = judge_stage(settings, 3, stage_started_at=0.0, now=2 * DAY, current=cur,
                       candidate=cand)
    assert late.action == "rollback"


def test_runs_needed_matches_the_hand_computed_value_and_power() -> None:
    # (1.959964 + 0.841621)^2 * 2 * 0.9 * 0.1 / 0.05^2 = 565.12 -> 566 per arm
    assert runs_needed(0.9, 0.05, 0.05, 0.8) == 566
    assert runs_needed(0.5, 0.1, 0.05, 0.9) == 526  # (1.96 + 1.2816)^2 * 0.5 / 0.01 = 525.4
    assert power_not_worse(0.9, 0.05, 566, 566, 0.05) >= 0.8
    assert power_not_worse(0.9, 0.05, 560, 560, 0.05) < 0.8
    needs = [runs_needed(0.8, m, 0.05, 0.8) for m in (0.02, 0.05, 0.1, 0.2)]
    assert needs == sorted(needs, reverse=True) and len(set(needs)) == 4
    powers = [power_not_worse(0.8, 0.05, n, n, 0.05) for n in (50, 200, 800, 3200)]
    assert powers == sorted(powers) and powers[-1] > 0.99
    assert runs_needed(1.0, 0.05, 0.05, 0.8) == 1


def test_pass_interval_is_newcombes_published_example() -> None:
    # Newcombe (1998) Stat Med 17:873, example (a): 56/70 vs 48/80, method 10: 0.0524 to 0.3339
    cur = ArmSample(version="v1", passed=[True] * 48 + [False] * 32)
    cand = ArmSample(version="v2", passed=[True] * 56 + [False] * 14)
    r = compare_pass(cur, cand, margin=0.05, alpha=0.05)
    assert r.ci95 is not None
    assert (round(r.ci95[0], 4), round(r.ci95[1], 4)) == (0.0524, 0.3339)
    assert r.verdict == "not worse" and r.p_worse is not None and r.p_worse > 0.999


def test_p_worse_agrees_with_the_verdict() -> None:
    cur = ArmSample(version="v1", passed=[True] * 180 + [False] * 20)
    for passes in range(100, 201, 5):
        cand = ArmSample(version="v2", passed=[True] * passes + [False] * (200 - passes))
        r = compare_pass(cur, cand, margin=0.05, alpha=0.05)
        assert r.p_worse is not None
        assert (r.p_worse < 0.025) == (r.verdict == "worse"), (passes, r)


def test_no_errors_on_both_arms_shows_not_worse_only_with_enough_requests() -> None:
    few, many = (ArmSample(version="v", errors=[False] * n) for n in (100, 300))
    assert compare_errors(few, few, margin=0.02, alpha=0.05).verdict == "undecided"
    r = compare_errors(many, many, margin=0.02, alpha=0.05)
    assert r.verdict == "not worse" and r.current == 0.0 and r.ci95 is not None
    assert r.ci95[1] > 0  # Wilson: 0 of 300 is not a certainty of none


def test_p99_is_repeatable_and_a_result_round_trips_as_json() -> None:
    rng = random.Random(4)
    cur, cand = _arm(rng, "v1", 300), _arm(rng, "v2", 300)
    a = compare_p99(cur, cand, ratio=1.5, alpha=0.05, seed=9)
    assert a == compare_p99(cur, cand, ratio=1.5, alpha=0.05, seed=9)
    assert a.ci95 is not None and a.ci95[0] < 1 < a.ci95[1] and a.power is not None
    assert TestResult.model_validate(a.model_dump(mode="json")) == a
    empty = compare_p99(ArmSample(version="v1"), cand, ratio=1.5, alpha=0.05)
    assert (empty.verdict, empty.current, empty.ci95) == ("undecided", None, None)


@pytest.mark.parametrize(("field", "value"), [
    ("stages", (0.5, 0.25, 1.0)),
    ("stages", (0.05, 0.5)),
    ("stages", (0.0, 1.0)),
    ("stages", ()),
    ("min_runs", 0),
    ("max_stage_s", -1.0),
    ("alpha", 1.5),
    ("power", 0.0),
    ("pass_margin", 0.0),
    ("error_margin", 2.0),
    ("latency_ratio", 0.9),
    ("min_breach_runs", 500),
    ("looks", ()),
    ("looks", (2, 1)),
    ("looks", (0, 1)),
    ("unknown_setting", 1),
])
def test_bad_settings_raise_config_error_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=field):
        RampSettings(**{field: value})


def test_bad_inputs_raise_config_error() -> None:
    arm = ArmSample(version="v1", passed=[True])
    with pytest.raises(ConfigError, match="stage=4"):
        judge_stage(RampSettings(), 4, stage_started_at=0.0, now=0.0, current=arm,
                    candidate=arm)
    with pytest.raises(ConfigError, match="latencies_s"):
        ArmSample(version="v1", latencies_s=[1.0, -2.0])
    with pytest.raises(ConfigError, match="margin"):
        compare_pass(arm, arm, margin=0.0, alpha=0.05)
    with pytest.raises(ConfigError, match="ratio"):
        compare_p99(arm, arm, ratio=float("nan"), alpha=0.05)
    with pytest.raises(ConfigError, match="p="):
        runs_needed(1.2, 0.05, 0.05, 0.8)


def _passes(rng: np.random.Generator, rate: float, n: int) -> list[bool]:
    return [bool(x) for x in rng.random(n) < rate]


def _first_not_worse(settings: RampSettings, p_candidate: float, *, sims: int, planned: bool,
                     seed: int, step: int = 20, top: int = 1000) -> float:
    """Share of stages in which a tick every ``step`` runs (200..``top`` per arm) shows the
    pass rate "not worse": with the planned looks, or with the old rule (all runs, ``alpha``)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(sims):
        cur, cand = _passes(rng, 0.9, top), _passes(rng, p_candidate, top)
        for n in range(settings.min_runs, top + 1, step):
            a, b = ArmSample(version="v1", passed=cur[:n]), ArmSample(version="v2",
                                                                         passed=cand[:n])
            t = (planned_tests(settings, a, b)[0] if planned
                 else compare_pass(a, b, margin=settings.pass_margin, alpha=settings.alpha))
            if t.verdict == "not worse":
                hits += 1
                break
    return hits / sims


@pytest.mark.slow
def test_repeated_ticks_keep_the_false_not_worse_rate_at_alpha_and_a_healthy_candidate_advances(
        ) -> None:
    settings = RampSettings()  # looks at 200, 400 and 800 runs per arm, each at alpha / 3
    sims = 300
    slack = 2.5 * (settings.alpha / 2 * (1 - settings.alpha / 2) / sims) ** 0.5
    # the candidate is exactly at the margin (90% vs 85%): "not worse" is a false claim
    planned = _first_not_worse(settings, 0.85, sims=sims, planned=True, seed=6)
    assert planned <= settings.alpha / 2 + slack, planned
    every_tick = _first_not_worse(settings, 0.85, sims=sims, planned=False, seed=6)
    assert every_tick > settings.alpha / 2 + slack, every_tick  # what re-testing did
    healthy = _first_not_worse(settings, 0.9, sims=200, planned=True, seed=7)
    assert healthy >= 0.75, healthy  # equal pass rates still show "not worse" by 800 runs


def test_between_planned_looks_the_verdict_reads_the_same_runs() -> None:
    settings = RampSettings(error_margin=0.05)
    cur_passed = [True] * 180 + [False] * 20 + [True] * 180 + [False] * 20
    cand_passed = [True] * 165 + [False] * 35 + [True] * 200  # a bad start, then all pass

    def arms(n: int) -> tuple[ArmSample, ArmSample]:
        return tuple(ArmSample(version=v, passed=passed[:n], errors=[False] * n,  # type: ignore
                               latencies_s=[1.0] * n)
                     for v, passed in (("v1", cur_passed), ("v2", cand_passed)))

    cur, cand = arms(399)
    everything = compare_pass(cur, cand, margin=settings.pass_margin,
                              alpha=look_alpha(settings))
    assert everything.verdict == "not worse"  # a test of every tick would advance here
    v = judge_stage(settings, 0, stage_started_at=0.0, now=60.0, current=cur, candidate=cand)
    assert v.action == "wait", v.reasons
    assert v.tests[0].n == (200, 200) and v.tests[0].verdict == "undecided"
    assert any("next planned look is at 400 runs per arm" in r for r in v.reasons), v.reasons
    cur, cand = arms(400)
    v = judge_stage(settings, 0, stage_started_at=0.0, now=60.0, current=cur, candidate=cand)
    assert (v.action, v.tests[0].n) == ("advance", (400, 400)), v.reasons
    assert "alpha 0.0167 per look, 3 planned looks" in v.reasons[0]


def test_after_the_last_look_more_runs_are_not_tested_again() -> None:
    settings = RampSettings(min_runs=50, error_margin=0.05, looks=(1, 2))
    cur = ArmSample(version="v1", passed=[True] * 90 + [False] * 10 + [True] * 300,
                    errors=[False] * 400, latencies_s=[1.0] * 400)
    cand = cur.model_copy(update={"version": "v2",
                                  "passed": [True] * 80 + [False] * 20 + [True] * 300})
    assert planned_look(settings, 400) == 100
    v = judge_stage(settings, 0, stage_started_at=0.0, now=60.0, current=cur, candidate=cand)
    assert v.action == "wait" and v.tests[0].n == (100, 100), v.reasons
    assert any("last planned look (100 runs per arm)" in r for r in v.reasons), v.reasons
    late = judge_stage(settings, 0, stage_started_at=0.0, now=2 * DAY, current=cur,
                       candidate=cand)
    assert late.action == "rollback"


def test_harm_is_checked_on_every_run_at_the_split_level() -> None:
    settings = RampSettings()
    cur = ArmSample(version="v1", passed=[True] * 250, errors=[False] * 250,
                    latencies_s=[1.0] * 250)
    # fine at the 200-run look, then 50 failures in a row: harm reads all 250 runs
    cand = cur.model_copy(update={"version": "v2", "passed": [True] * 200 + [False] * 50})
    v = judge_stage(settings, 0, stage_started_at=0.0, now=60.0, current=cur, candidate=cand)
    assert v.action == "rollback" and v.tests[0].n == (250, 250), v.reasons
    p = v.tests[0].p_worse
    assert p is not None and p < look_alpha(settings) / 2


def test_bad_settings_name_the_field_in_one_line() -> None:
    with pytest.raises(ConfigError) as info:
        RampSettings(stages=(0.5, 0.25, 1.0), alpha=2.0)
    assert str(info.value).startswith("RampSettings: ") and "(+1 more)" in str(info.value)


def test_the_status_server_serves_prometheus_with_the_fronts_content_type() -> None:
    from agentic_loop.distill.flywheel.status_server import PROMETHEUS_TYPE
    from agentic_loop.distill.release.canary.metrics import CONTENT_TYPE

    assert PROMETHEUS_TYPE is CONTENT_TYPE
