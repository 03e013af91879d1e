"""Every table the CLI prints reads at 80 columns: no line wider, no column squeezed away.

Each printer gets realistic content (long model names and paths, long
reasons, wide pass rates with intervals) and prints on an 80-column console;
every table built is checked: its lines fit, every column kept is at least as
wide as its header's longest word (so a header is never cut to ``g…`` or to
nothing) and each header word appears whole in the output. The improve table
must still show its gate column.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console
from rich.table import Table

from agentic_loop.tables import Col, FitTable, percent

LONG_MODEL = "runs/improve/round-2/checkpoints/Qwen2.5-0.5B-Instruct-lora-r16-alpha32-merged"
LONG_REASON = ("single-shot: candidate passes 31% of 200 held-out tasks against the baseline's "
               "17% (McNemar exact p = 0.0004, 95% interval of the gain 7 to 21 points)")
LONG_TASK = ("Write a tagline for a small museum of maritime history in Lisbon; do not use the "
             "words 'we', 'our' or 'best', and keep it under 12 words.")


@pytest.fixture
def screen(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Console, list[Table]]]:
    """An 80-column console swapped into every CLI module, and the tables built on it."""
    import agentic_loop.cli.common as common
    from agentic_loop.cli import archive, export, forget, improve, monitor, registry, release, train

    console = Console(width=80, file=io.StringIO(), record=True, color_system=None)
    for module in (common, archive, export, forget, improve, monitor, registry, release, train):
        monkeypatch.setattr(module, "console", console, raising=False)
    built: list[Table] = []
    real_build = FitTable.build

    def spy(self: FitTable, width: int, console: Console | None = None) -> Table:
        table = real_build(self, width, console)
        built.append(table)
        return table

    monkeypatch.setattr(FitTable, "build", spy)
    yield console, built


def _check(console: Console, built: list[Table]) -> str:
    """Each table as printed at 80 columns (prose lines may soft-wrap: paths stay whole)."""
    assert built, "no table was printed"
    for table in built:
        alone = Console(width=80, file=io.StringIO(), record=True, color_system=None)
        alone.print(table)
        text = alone.export_text()
        wide = [line for line in text.splitlines() if len(line) > 80]
        assert not wide, "\n".join(wide)
        words = set(re.findall(r"[^\s│┃║|]+", text))
        for column in table.columns:
            header = str(column.header)
            longest = max((len(w) for w in header.split()), default=0)
            assert (column.width or 0) >= longest, (table.title, header, column.width)
            for word in header.split():
                assert word in words, (table.title, header)
    return console.export_text()


def _rate(rate: float, low: float, high: float) -> Any:
    return SimpleNamespace(pass_rate=rate, interval=[low, high])


def test_improve_rounds_fit_80_columns_and_keep_the_gate(screen: tuple[Console, list[Table]]):
    from agentic_loop.cli.improve import print_rounds

    rounds = [SimpleNamespace(
        round=n, model=LONG_MODEL, from_version=None if n == 1 else f"v{n}", threshold=7.5,
        pool=_rate(0.172, 0.121, 0.234), hint=SimpleNamespace(accepted=12),
        data=SimpleNamespace(sft_rows=57, pairs=23, dropped_samples=9),
        golden=SimpleNamespace(baseline=_rate(0.17, 0.125, 0.228),
                               candidate=_rate(0.31, 0.249, 0.377)),
        decision=SimpleNamespace(value="MANUAL_REVIEW" if n == 1 else "PROMOTE"),
        registration=SimpleNamespace(version=f"v{n + 1}", promoted=n == 2, live=None),
        seconds={"grow": 120.0, "train": 300.5}, details=lambda: "") for n in (1, 2)]
    result = SimpleNamespace(work_dir=Path("/home/someone/.local/share/agentic-loop/improve/x"),
                             reports=rounds, stopped="max_rounds", reason=LONG_REASON,
                             current="v3", plot=None)
    print_rounds(result)  # type: ignore[arg-type]
    console, built = screen
    text = _check(console, built)
    assert "gate" in [str(c.header) for c in built[0].columns]
    assert "MANUAL_REVIEW" in text and "31%" in text and "[25-38%]" in text


def test_golden_report_fits(screen: tuple[Console, list[Table]]):
    from agentic_loop.cli.release import _print_report

    tasks = [SimpleNamespace(task=LONG_TASK, baseline=6.25, candidate=8.5, baseline_arch=7.0,
                             candidate_arch=9.25, errors=[]) for _ in range(3)]
    report = SimpleNamespace(arch="archive_refine", tasks=tasks, reasons=[LONG_REASON], kl=None,
                             kl_note="", diversity={}, decision=SimpleNamespace(value="PROMOTE"),
                             plot=None)
    _print_report(report)  # type: ignore[arg-type]
    _check(*screen)


def test_monitor_table_fits(screen: tuple[Console, list[Table]]):
    from agentic_loop.cli.monitor import _table

    stats = [SimpleNamespace(version=f"v{n}", model=LONG_MODEL, runs=1234, error_rate=1 / 60,
                             latency_p50=1.25, latency_p99=12.5, mean_score=7.75, pass_rate=0.4,
                             feedback_ratio=0.83, rated=120, mean_output_chars=412.0)
             for n in (1, 2)]
    report = SimpleNamespace(version="v2", baseline="v1", window="last 7 days", stats=stats)
    console, built = screen
    console.print(_table(report))  # type: ignore[arg-type]
    assert "1.7%" in _check(console, built)


def test_export_summary_fits(screen: tuple[Console, list[Table]]):
    from agentic_loop.cli.export import _print_summary

    steps = [SimpleNamespace(name=name, unit="samples", before=1200, after=1100, removed=100,
                             detail=LONG_REASON)
             for name in ("near-duplicates", "latency outliers", "k-anonymity")]
    report = SimpleNamespace(
        steps=steps, dropped={"sft": {"failed_check": 9, "guard:recital": 2}},
        pii=SimpleNamespace(redactions={"EMAIL_ADDRESS": 3, "PHONE_NUMBER": 1},
                                         mode="redact"),
        problems=[], manifest_path=Path("/tmp/x/manifest.json"), sft_rows=57,
        sft_path=Path("/tmp/x/sft.jsonl"), pairs=12, pairs_path=Path("/tmp/x/pairs.jsonl"),
        manifest={"episodes": {"sft": {"rows": 9, "tool_calls": 14,
                                       "tools": {"calculator": 11, "lookup": 3}}}})
    _print_summary(report)  # type: ignore[arg-type]
    _check(*screen)


def test_registry_list_and_history_fit(screen: tuple[Console, list[Table]],
                                       monkeypatch: pytest.MonkeyPatch):
    from agentic_loop.cli import registry
    from agentic_loop.distill.train.model_card import DataRef, ModelCard

    versions = [SimpleNamespace(
        version=f"v{n}", name="tagline-" + LONG_MODEL.rsplit("/", 1)[-1], adapter=True,
        card=ModelCard(name="tagline", base_model="local", method="sft",
                       data=DataRef(dir="d", manifest_sha256="abc"),
                       evals=[{"decision": "MANUAL_REVIEW"}]),
        registered_at="2026-11-26T02:42:04.123456+00:00", path=LONG_MODEL) for n in (1, 2)]
    history = [SimpleNamespace(at="2026-11-26T02:42:04.123456+00:00", action="promote",
                               version="v2", previous="v1", user="someone@example.org",
                               reason=LONG_REASON, override=None)]
    fake = SimpleNamespace(root=Path("/home/someone/.local/share/agentic-loop/registry"),
                           current=versions[1], versions=lambda: versions,
                           history=lambda: history)
    monkeypatch.setattr(registry, "open_registry", lambda path: fake)
    registry.list_command(Path("x"))
    registry.history_command(Path("x"))
    _check(*screen)


def test_forget_report_fits(screen: tuple[Console, list[Table]]):
    from agentic_loop.cli.forget import _print

    places = [SimpleNamespace(what="trajectory log", path="/home/someone/.local/share/agentic-loop"
                              "/trajectories/2026-11-26/runs-000123.jsonl", removed=12,
                              scrubbed=3)]
    report = SimpleNamespace(dry_run=False, kind="user", counts=lambda: {"trajectories": 12,
                                                                        "archive_entries": 3},
                             erased=lambda: places, models=[], audit_path=None)
    _print(report)  # type: ignore[arg-type]
    _check(*screen)


def test_archive_tables_fit(screen: tuple[Console, list[Table]],
                            monkeypatch: pytest.MonkeyPatch):
    from agentic_loop.cli import archive

    entry = SimpleNamespace(id="0123456789abcdef", created_at=datetime(2026, 11, 26,
                                                                      tzinfo=UTC),
                            score=8.5, task=LONG_TASK, output=LONG_REASON)
    store: Any = SimpleNamespace(entries=lambda: [entry, entry], __len__=lambda: 2,
                                 search=lambda q, k: [SimpleNamespace(similarity=0.873,
                                                                      entry=entry)])

    class Store(SimpleNamespace):
        def __len__(self) -> int:
            return 2

    monkeypatch.setattr(archive, "open_archive",
                        lambda path, ns: Store(**{k: v for k, v in vars(store).items()
                                                  if k != "__len__"}))
    archive.show(Path("/home/someone/.local/share/agentic-loop/archive"), None, 5)
    archive.search("museum tagline", Path("x"), None, 3)
    _check(*screen)


def test_training_table_fits(screen: tuple[Console, list[Table]]):
    from agentic_loop.cli.train import print_training

    stages = [SimpleNamespace(method=m, steps=60, train_loss=1.2345, tokens_per_s=1234.5,
                              resumed_from=LONG_MODEL + "/checkpoint-40") for m in ("sft", "dpo")]
    result = SimpleNamespace(model_dir=Path(LONG_MODEL), skipped=False, stages=stages,
                             adapter=True, spec="local:" + LONG_MODEL)
    print_training(result)  # type: ignore[arg-type]
    _check(*screen)


def test_run_summary_table_fits(screen: tuple[Console, list[Table]]):
    from agentic_loop.architectures import summary_table

    results = [SimpleNamespace(task=LONG_TASK, output="a [not markup] answer", ok=n != 2,
                               errors=["model error: " + LONG_REASON], score=7.5, passed=n == 1,
                               iterations=3, archived=True, latency_s=12.25) for n in (1, 2)]
    console, built = screen
    console.print(summary_table(results, "archive_refine on " + LONG_MODEL))  # type: ignore[arg-type]
    text = _check(console, built)
    assert "pass rate 50%" in text and "[not markup]" in text


@pytest.mark.parametrize("width", [40, 60, 80, 120])
def test_a_table_too_wide_shortens_headers_then_drops_columns(width: int):
    table = FitTable("t", [Col("round"), Col("golden before", short="g<"),
                           Col("golden after", short="g>"), Col("seconds", drop=1),
                           Col("threshold", drop=2), Col("text", wrap=True, min_width=8)],
                     hidden_hint="see report.json")
    table.add_row("1", "17% [12-23%]", "31% [25-38%]", "412", "7.5", LONG_REASON)
    console = Console(width=width, file=io.StringIO(), record=True)
    console.print(table)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= width
    assert "17% [12-23%]" in text.replace("\n", "") or "17%" in text
    if width == 40:
        assert "g< = golden before" in text and "not shown at 40 columns" in text
    if width == 120:
        assert "golden before" in text and "not shown" not in text


def test_percent_is_the_one_rate_format():
    assert [percent(x) for x in (0.0, 0.004, 0.3125, 0.995, 1.0, None)] == [
        "0%", "0.4%", "31%", "99.5%", "100%", "-"]


def test_a_row_of_the_wrong_length_is_an_error():
    from agentic_loop.errors import ConfigError

    table = FitTable("rounds", [Col("a"), Col("b")])
    with pytest.raises(ConfigError, match="has 1 cells for 2 columns"):
        table.add_row("x")
