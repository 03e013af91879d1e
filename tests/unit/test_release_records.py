"""The monitor's and the erasure's reports are pydantic records: their JSON keeps the shape
older versions wrote, and a file written by an older version loads; ``forget`` says when it
found nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from agentic_loop.cli import app
from agentic_loop.distill.forget import (
    AffectedModel,
    ErasureAudit,
    ForgetReport,
    PlaceResult,
    enforce_retention,
    forget_user,
)
from agentic_loop.distill.forget.exports import ExportErasure
from agentic_loop.distill.release.monitor import Breach, MonitorReport
from agentic_loop.distill.release.monitor_stats import VersionStats
from agentic_loop.trajectories import Trajectory, TrajectoryLog, hash_user_id

#: ``agentic-loop monitor --json`` as the hand-written ``to_dict`` wrote it
OLD_MONITOR: dict[str, Any] = {
    "version": "v2", "baseline": "v1", "verdict": "breach", "action": "rolled back",
    "rolled_back_to": "v1", "reason": "monitor: error_rate 0.400 of v2 > limit 0.045",
    "window": "last 200 runs per version", "sync": "no server running",
    "breaches": [{"metric": "error_rate", "value": 0.4, "baseline": 0.0167, "limit": 0.045}],
    "stats": [{"version": v, "model": f"tagline-{v}", "runs": n, "errors": e,
               "error_rate": e / n, "latency_p50": 1.2, "latency_p99": 1.5, "mean_score": 8.0,
               "pass_rate": 0.9, "rated": 0, "feedback_ratio": None,
               "mean_output_chars": 9.0, "first_at": "2026-01-01T00:00:00+00:00",
               "last_at": "2026-01-01T01:00:00.500000+00:00"}
              for v, n, e in (("v1", 60, 1), ("v2", 50, 20))],
    "unattributed": {"other-model": 4},
}

#: ``agentic-loop forget --json`` as the hand-written ``to_dict`` wrote it
OLD_FORGET: dict[str, Any] = {
    "kind": "user", "dry_run": False, "before": None,
    "counts": {"trajectories": 2, "feedback": 1, "consent": 0, "leftover_lines": 1,
               "archive_entries": 1, "reflections": 1, "store_records": 0, "runs_scrubbed": 1,
               "export_rows": 3, "export_rows_untraced": 0, "log_lines": 5,
               "log_lines_scrubbed": 2, "models_marked": 1},
    "exports": [{"dir": "/srv/runs/data", "rows_removed": 3, "rows_kept": 7, "rows_untraced": 0,
                 "leftover_lines": 0, "per_file": {"sft.jsonl": 3}}],
    "models": [{"registry": "/srv/runs/registry", "version": "v2", "name": "tagline",
                "reason": "trained on /srv/runs/data (3 rows erased from it)"}],
    "audit_log": "/srv/data/audit/erasures.jsonl",
    "stores": {"trajectories": ["/srv/data/trajectories/trajectories.jsonl"], "memory": []},
    "erased": [{"kind": "log", "path": "/srv/shadow.jsonl", "what": "shadow log", "removed": 5,
                "scrubbed": 2, "problem": None}],
    "warnings": [],
}


def test_an_old_monitor_report_loads_and_the_json_keeps_its_shape():
    report = MonitorReport.model_validate(OLD_MONITOR)
    assert report.breaches == [Breach(metric="error_rate", value=0.4, baseline=0.0167,
                                      limit=0.045)]
    v2 = report.stats_of("v2")
    assert isinstance(v2, VersionStats) and v2.runs == 50 and v2.last_at is not None
    assert v2.last_at.microsecond == 500000 and report.unattributed == {"other-model": 4}
    again = json.loads(report.model_dump_json())
    assert set(again) == set(OLD_MONITOR) and set(again["stats"][0]) == set(OLD_MONITOR["stats"][0])
    assert MonitorReport.model_validate(again) == report


def test_an_old_forget_report_loads_and_the_json_keeps_its_shape():
    report = ForgetReport.model_validate(OLD_FORGET)
    assert report.counts() == OLD_FORGET["counts"] and report.complete
    assert report.exports == [ExportErasure(dir=Path("/srv/runs/data"), rows_removed=3,
                                            rows_kept=7, per_file={"sft.jsonl": 3})]
    assert report.models[0] == AffectedModel(**OLD_FORGET["models"][0])
    assert report.erased() == [PlaceResult(kind="log", path="/srv/shadow.jsonl",
                                           what="shadow log", removed=5, scrubbed=2)]
    assert report.audit_path == Path("/srv/data/audit/erasures.jsonl")
    assert report.nothing_found is False
    again = json.loads(report.model_dump_json())
    assert set(again) == set(OLD_FORGET) | {"nothing_found"}
    assert {k: again[k] for k in OLD_FORGET} == OLD_FORGET
    assert ForgetReport.model_validate(again) == report


def test_an_old_audit_line_loads_with_typed_models():
    line = {"at": "2026-01-01T00:00:00+00:00", "action": "forget_user", "actor": "ops",
            "subject": "ab" * 32, "counts": {"trajectories": 2}, "models": OLD_FORGET["models"],
            "stores": {}, "unreached": []}
    entry = ErasureAudit.model_validate(line)
    assert entry.models[0].version == "v2"
    assert json.loads(entry.model_dump_json())["models"] == OLD_FORGET["models"]


def _data_with_bobs_run(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    TrajectoryLog(data / "trajectories").append(Trajectory(
        architecture="reflection", model_id="m", task="Bob's kite shop tagline",
        user_id_hash=hash_user_id("bob")))
    return data


def test_forget_says_when_it_found_nothing_for_a_user(tmp_path: Path):
    data = _data_with_bobs_run(tmp_path)
    options = {"data": data, "exports": [], "registries": []}
    nobody = forget_user("nobody", **options)  # type: ignore[arg-type]
    assert nobody.nothing_found and not any(nobody.counts().values())
    assert nobody.model_dump(mode="json")["nothing_found"] is True
    assert len(TrajectoryLog(data / "trajectories").read()) == 1  # Bob's run stays
    assert not forget_user("bob", dry_run=True, **options).nothing_found  # type: ignore[arg-type]
    assert enforce_retention("3650d", **options).nothing_found  # type: ignore[arg-type]

    args = ["forget", "--user", "nobody", "--data", str(data), "--exports", str(tmp_path),
            "--registry", str(tmp_path)]
    said = CliRunner().invoke(app, args)
    assert said.exit_code == 0, said.output
    text = " ".join(said.output.split())
    assert "nothing found for this user" in text and "searched 1 trajectory log" in text
    assert "nobody" not in text  # the id is not echoed
    as_json = CliRunner().invoke(app, [*args, "--json"])
    assert as_json.exit_code == 0 and json.loads(as_json.stdout)["nothing_found"] is True
    found = CliRunner().invoke(app, ["forget", "--user", "bob", "--data", str(data),
                                     "--exports", str(tmp_path), "--registry", str(tmp_path)])
    assert found.exit_code == 0 and "nothing found" not in found.output
    old = CliRunner().invoke(app, ["forget", "--older-than", "3650d", "--data", str(data),
                                   "--exports", str(tmp_path), "--registry", str(tmp_path)])
    assert old.exit_code == 0 and "nothing found for anyone older than 3650d" in " ".join(
        old.output.split())
