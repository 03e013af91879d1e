"""The quality bench's dtype pairing (bench/quality_dtypes.py and its hooks in quality.py,
quality_report.py): names, paired verdicts, speed ratios, the CLI and the plot, on
hand-made per-task outcomes (no model)."""

from __future__ import annotations

import doctest
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from bench_helpers import load_bench

from agentic_loop.errors import ConfigError


@pytest.fixture(scope="module")
def qd() -> ModuleType:
    return load_bench("quality_dtypes")


@pytest.fixture(scope="module")
def report() -> ModuleType:
    return load_bench("quality_report")


@pytest.fixture(scope="module")
def quality() -> ModuleType:
    return load_bench("quality")


FIRST, LATER = "float32", "bfloat16"


def outcomes(n: int, flips: int) -> tuple[list[bool], list[bool]]:
    """fp32 passes every even task; bf16 the same except the first ``flips`` passes lost."""
    base = [i % 2 == 0 for i in range(n)]
    later = list(base)
    lost = 0
    for i in range(n):
        if later[i] and lost < flips:
            later[i], lost = False, lost + 1
    return base, later


def dtype_rows(qd: ModuleType, per_task: dict[str, Any]
               ) -> list[dict[str, Any]]:
    return [{"name": name, "model": "base", "dtype": qd.untagged(name)[1]} for name in per_task]


def test_doctests_of_the_dtype_and_engine_modules_pass(qd: ModuleType) -> None:
    for module in (qd, load_bench("quality_engine")):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_parse_dtypes_keeps_order_and_refuses_unknown_or_repeated(qd: ModuleType) -> None:
    assert qd.parse_dtypes(" bfloat16 ,float32") == ("bfloat16", "float32")
    assert qd.parse_dtypes("") == () and qd.parse_dtypes(None) == ()
    with pytest.raises(ConfigError, match="'int8'"):
        qd.parse_dtypes("float32,int8")
    with pytest.raises(ConfigError, match="once"):
        qd.parse_dtypes("float32,float32")
    with pytest.raises(ConfigError, match="once"):
        qd.parse_dtypes(" , ")


def test_tags_round_trip_and_leave_other_brackets_alone(qd: ModuleType) -> None:
    assert qd.tagged("best-of-4", None) == "best-of-4"
    assert qd.untagged(qd.tagged("Reflection (resample)", LATER)) == (
        "Reflection (resample)", LATER)
    assert qd.untagged("fixed reply '42'") == ("fixed reply '42'", None)
    assert qd.untagged("odd [name with spaces]") == ("odd [name with spaces]", None)


def test_check_rows_refuses_trained_rows_only_with_dtypes(qd: ModuleType) -> None:
    qd.check_rows(["single", "grpo", "distilled"], ())
    qd.check_rows(["single", "best_of", "reflexion"], (FIRST, LATER))
    with pytest.raises(ConfigError, match=r"\['ar_warm', 'distilled'\]"):
        qd.check_rows(["single", "distilled", "ar_warm"], (FIRST, LATER))


def test_each_later_dtype_row_is_paired_with_the_same_row_in_the_first(qd: ModuleType) -> None:
    base, later = outcomes(60, flips=14)  # bf16 loses 14 of the 30 passes: clearly worse
    same_base, same_later = outcomes(60, flips=0)
    per_task: dict[str, Any] = {
        f"single-shot [{FIRST}]": {"passed": base, "scores": [9.0 if p else 1.0 for p in base]},
        f"single-shot [{LATER}]": {"passed": later,
                                   "scores": [9.0 if p else 1.0 for p in later]},
        f"best-of-4 [{FIRST}]": {"passed": same_base, "scores": [5.0] * 60},
        f"best-of-4 [{LATER}]": {"passed": same_later, "scores": [5.0] * 60},
    }
    rows = dtype_rows(qd, per_task)
    out = qd.add_dtype_comparisons(rows, per_task, (FIRST, LATER), resamples=500)
    assert len(out) == 2
    assert "vs_first_dtype" not in rows[0] and "vs_first_dtype" not in rows[2]
    worse, same = rows[1]["vs_first_dtype"], rows[3]["vs_first_dtype"]
    assert worse["baseline"] == f"single-shot [{FIRST}]"
    assert same["baseline"] == f"best-of-4 [{FIRST}]"
    assert (worse["wins"], worse["losses"], worse["tasks"]) == (0, 14, 60)
    assert worse["pass_rate_diff"] == pytest.approx(-14 / 60)
    assert worse["score_diff"] == pytest.approx(-14 * 8 / 60)
    assert worse["holm_family"] == 2 and worse["mcnemar_p_holm"] >= worse["mcnemar_p"]
    assert worse["verdict"].startswith("worse, Holm p") and "14 of 60 tasks differ" in \
        worse["verdict"]
    assert same["verdict"].startswith("no detectable difference") and \
        "0 of 60 tasks differ" in same["verdict"]
    assert "equal" not in same["verdict"]


def test_a_single_dtype_or_a_missing_partner_compares_nothing(qd: ModuleType) -> None:
    per_task: dict[str, Any] = {f"single-shot [{LATER}]": {"passed": [True], "scores": [9.0]}}
    rows = dtype_rows(qd, per_task)
    assert qd.add_dtype_comparisons(rows, per_task, (FIRST,)) == []
    assert qd.add_dtype_comparisons(rows, per_task, (FIRST, LATER)) == []
    assert "vs_first_dtype" not in rows[0]


def test_speed_reports_token_rate_and_llm_seconds_ratios(qd: ModuleType) -> None:
    rows = [
        {"name": f"best-of-4 [{FIRST}]", "output_tokens_per_llm_s": 50.0,
         "llm_s_per_task": 3.0},
        {"name": f"best-of-4 [{LATER}]", "output_tokens_per_llm_s": 80.0,
         "llm_s_per_task": 2.0},
        {"name": "fixed reply '42'", "output_tokens_per_llm_s": None, "llm_s_per_task": None},
        {"name": f"single-shot [{LATER}]", "output_tokens_per_llm_s": 70.0,
         "llm_s_per_task": 1.0},  # no fp32 partner: no ratio
    ]
    speeds = qd.speed(rows, (FIRST, LATER))
    assert speeds == [{"row": "best-of-4", "dtype": LATER, "vs": FIRST,
                       "tokens_per_llm_s": 80.0, "tokens_per_llm_s_first": 50.0,
                       "tokens_per_llm_s_ratio": 1.6, "llm_s_per_task_speedup": 1.5}]
    section = qd.summary(rows, (FIRST, LATER))
    assert section["speed"] == speeds and section["baseline_dtype"] == FIRST
    assert any("1.6x" in line for line in qd.headlines(section))


def test_single_shot_comparisons_use_the_first_dtypes_single_shot(
        qd: ModuleType, report: ModuleType) -> None:
    base, later = outcomes(40, flips=3)
    per_task: dict[str, Any] = {f"single-shot [{FIRST}]": {"passed": base, "scores": [1.0] * 40},
                f"single-shot [{LATER}]": {"passed": later, "scores": [1.0] * 40}}
    rows = dtype_rows(qd, per_task)
    report.add_comparisons(rows, per_task, resamples=200, baseline=f"single-shot [{FIRST}]")
    assert "vs_single_shot" not in rows[0]
    assert rows[1]["vs_single_shot"]["losses"] == 3
    untouched = dtype_rows(qd, per_task)
    report.add_comparisons(untouched, per_task, resamples=200)  # no row named "single-shot"
    assert not any("vs_single_shot" in r for r in untouched)


def test_rows_record_output_tokens_per_llm_second(report: ModuleType) -> None:
    row = report.summarize("x", "base", [True, False], [9.0, 1.0],
                           {"llm_calls": 2, "input_tokens": 100, "output_tokens": 60},
                           llm_s=1.5, wall_s=2.0)
    assert row["output_tokens_per_llm_s"] == 40.0
    idle = report.summarize("x", "base", [True], [9.0], {}, llm_s=0.0, wall_s=0.0)
    assert idle["output_tokens_per_llm_s"] is None


def test_cli_keeps_the_mode_and_best_of_4_with_dtypes(quality: ModuleType) -> None:
    mode, opts = quality.options_from(quality.parse(
        ["--quick", "--dtypes", "float32,bfloat16"]))
    assert mode == "quick" and opts.dtypes == (FIRST, LATER) and opts.best_of == 4
    assert opts.held_out_tasks == quality.MODES["quick"].held_out_tasks
    mode, opts = quality.options_from(quality.parse(["--tasks", "8", "--dtypes", "bfloat16"]))
    assert mode == "full+custom" and opts.dtypes == (LATER,) and opts.held_out_tasks == 8
    mode, opts = quality.options_from(quality.parse(
        ["--quick", "--dtypes", "float32,bfloat16", "--sample-seed", "7"]))
    assert mode == "quick" and opts.sample_seed == 7
    mode, opts = quality.options_from(quality.parse(["--quick"]))
    assert mode == "quick" and opts == quality.MODES["quick"]  # no flag, no change
    assert opts.dtypes == () and opts.sample_seed is None


def test_cli_refuses_trained_rows_and_unknown_dtypes_before_loading(
        quality: ModuleType) -> None:
    with pytest.raises(SystemExit, match="grpo"):
        quality.main(["--tasks", "2", "--rows", "single-shot,grpo", "--dtypes",
                      "float32,bfloat16"])
    with pytest.raises(SystemExit, match="'fp8'"):
        quality.main(["--tasks", "2", "--dtypes", "float32,fp8"])


def test_plot_shows_both_dtypes(qd: ModuleType, report: ModuleType, tmp_path: Path) -> None:
    base, later = outcomes(30, flips=2)
    per_task: dict[str, Any] = {f"single-shot [{FIRST}]": {"passed": base, "scores": [5.0] * 30},
                f"single-shot [{LATER}]": {"passed": later, "scores": [5.0] * 30}}
    rows = []
    for name, res in per_task.items():
        row = report.summarize(name, "base", res["passed"], res["scores"],
                               {"llm_calls": 30, "output_tokens": 900}, llm_s=20.0, wall_s=25.0)
        row.update(dtype=qd.untagged(name)[1], engine_dtype=qd.untagged(name)[1])
        rows.append(row)
    report.add_comparisons(rows, per_task, resamples=200, baseline=f"single-shot [{FIRST}]")
    qd.add_dtype_comparisons(rows, per_task, (FIRST, LATER), resamples=200)
    data = {"phases": rows, "baseline": f"single-shot [{FIRST}]", "mode": "quick",
            "model": "m", "dev_set": {"held_out": 30}, "dtypes": qd.summary(rows, (FIRST, LATER))}
    path = tmp_path / "q.png"
    report.plot(data, path)
    assert path.stat().st_size > 10_000
