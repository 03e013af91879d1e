"""export_datasets end to end: files, manifest, bad input, empty results, archive, planted PII."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import pytest
from distill_helpers import corpus, make_run, write_log

from agentic_loop.architectures import Reflection
from agentic_loop.distill import EmptyExportError, ExportError, PiiGate, export_datasets
from agentic_loop.judges import Rubric
from agentic_loop.memory import Archive, HashingEmbedder
from agentic_loop.testing import ScriptedChatModel
from agentic_loop.trajectories import SCHEMA_VERSION, TrajectoryLog


@pytest.fixture(scope="module")
def regex_gate() -> PiiGate:
    return PiiGate("regex")


def export(logs: Path | list[Path], out: Path, **kwargs):  # type: ignore[no-untyped-def]
    kwargs.setdefault("pii", "off")
    kwargs.setdefault("embedder", HashingEmbedder())
    return export_datasets(logs if isinstance(logs, list) else [logs], out, **kwargs)


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_export_writes_trl_files_and_a_manifest(tmp_path: Path, regex_gate: PiiGate) -> None:
    email = make_run("Email bo@example.com a thank-you note.",
                     [("Thanks!", 3.0), ("Thank you, Bo, for everything.", 9.0)])
    logs = write_log(tmp_path / "logs", [*corpus(), email])
    report = export(logs, tmp_path / "out", pii=regex_gate)
    sft, pairs = rows(tmp_path / "out" / "sft.jsonl"), rows(tmp_path / "out" / "pairs.jsonl")
    assert (report.sft_rows, report.pairs) == (len(sft), len(pairs)) == (5, 4)
    assert {tuple(m["role"] for m in r["messages"]) for r in sft} == {
        ("system", "user", "assistant")}
    roles = {(*(m["role"] for m in r["prompt"]), r["chosen"][0]["role"], r["rejected"][0]["role"])
             for r in pairs}
    assert roles == {("system", "user", "assistant", "assistant")}
    assert "Email <EMAIL_ADDRESS> a thank-you note." in {r["messages"][1]["content"] for r in sft}

    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest == report.manifest
    assert manifest["schema_version"] == 1 and manifest["format"] == "trl-conversational"
    source = manifest["sources"][0]
    log_file = logs / "trajectories.jsonl"
    assert source == {"path": str(log_file), "kind": "trajectories", "records": 6,
                      "bytes": log_file.stat().st_size,
                      "sha256": hashlib.sha256(log_file.read_bytes()).hexdigest()}
    sft_hash = hashlib.sha256((tmp_path / "out" / "sft.jsonl").read_bytes()).hexdigest()
    assert manifest["outputs"]["sft.jsonl"] == {"rows": 5, "written": True, "sha256": sft_hash}
    assert manifest["redactions"] == {"EMAIL_ADDRESS": 1, "PERSON": 1}  # "Thank you, Bo"
    assert manifest["pii"]["mode"] == "regex" and "KR" in manifest["pii"]["phone_regions"]
    assert manifest["rubric_versions"] == {"tagline@1": 5}
    assert manifest["trajectory_schema_versions"] == {str(SCHEMA_VERSION): 5}
    options = manifest["options"]
    assert options["min_gap"] == 0.2 and options["embedder"] == HashingEmbedder().name


def test_manifest_counts_add_up(tmp_path: Path) -> None:
    report = export(write_log(tmp_path / "logs", corpus()), tmp_path / "out")
    counts = report.manifest["counts"]
    by_unit: dict[str, list[dict]] = {}
    for step in counts:
        by_unit.setdefault(step["unit"], []).append(step)
    for steps in by_unit.values():  # each step starts where the previous one of its unit ended
        assert all(a["after"] == b["before"] for a, b in itertools.pairwise(steps))
        assert all(s["before"] - s["after"] == s["removed"] >= 0 for s in steps)
    assert [s["step"] for s in by_unit["records"]] == [
        "read", "errored runs", "invalid scores", "consent", "latency outliers", "PII gate",
        "k-anonymity"]
    assert by_unit["records"][0]["before"] == 5 and by_unit["records"][-1]["after"] == 4
    assert by_unit["sft rows"][-1]["after"] == report.sft_rows
    assert by_unit["pairs"][-1]["after"] == report.pairs


def test_a_corrupt_line_is_reported_with_file_and_line(tmp_path: Path) -> None:
    logs = write_log(tmp_path / "logs", corpus()[:2])
    with open(logs / "trajectories.jsonl", "a") as fh:
        fh.write('{"architecture": "reflection", "task": 5}\n')
    TrajectoryLog(logs).append(corpus()[3])
    report = export(logs, tmp_path / "out")
    assert len(report.problems) == 1
    assert report.problems[0].startswith(f"{logs / 'trajectories.jsonl'}:3: ")
    assert report.manifest["problems"] == report.problems
    assert report.manifest["counts"][0]["before"] == 3  # the lines around it were all read


def test_an_empty_result_names_the_filter_and_writes_nothing(tmp_path: Path) -> None:
    logs = write_log(tmp_path / "logs", corpus())
    out = tmp_path / "out"
    export(logs, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(EmptyExportError,
                       match=r"SFT rows: 'score threshold' removed the last 5 .*lower --min-score"):
        export(logs, out, min_score=1.0)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    consenting = write_log(tmp_path / "consent", [make_run("t", [("a", 9.0)], consent=False)])
    with pytest.raises(EmptyExportError, match="SFT rows: 'consent' removed the last 1"):
        export(consenting, tmp_path / "out2")
    assert not (tmp_path / "out2").exists()


def test_no_pairs_removes_a_stale_pairs_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    export(write_log(tmp_path / "a", corpus()), out)
    assert (out / "pairs.jsonl").exists()
    report = export(write_log(tmp_path / "b", [make_run("t", [("fine answer", 9.0)])]), out)
    assert (report.sft_rows, report.pairs, report.pairs_path) == (1, 0, None)
    assert not (out / "pairs.jsonl").exists()
    assert report.manifest["outputs"]["pairs.jsonl"] == {"rows": 0, "written": False,
                                                          "sha256": None}


@pytest.mark.parametrize(("make", "message"), [
    (lambda d: d / "missing", "does not exist"),
    (lambda d: d, "has no trajectories.jsonl"),
    (lambda d: (d / "notes.txt").write_text("x") and d / "notes.txt", "is not a .jsonl file"),
])
def test_bad_input_paths_are_named(tmp_path: Path, make, message: str) -> None:  # type: ignore[no-untyped-def]
    path = make(tmp_path)
    with pytest.raises(ExportError, match=message) as caught:
        export(path, tmp_path / "out")
    assert str(path) in str(caught.value)


def test_bad_options_and_output_paths(tmp_path: Path) -> None:
    logs = write_log(tmp_path / "logs", corpus())
    with pytest.raises(ExportError, match=r"--min-score.*got 8; did you mean 0.8\?"):
        export(logs, tmp_path / "out", min_score=8)
    with pytest.raises(ExportError, match="--min-gap"):
        export(logs, tmp_path / "out", min_gap=0)
    with pytest.raises(ExportError, match="--k-anonymity"):
        export(logs, tmp_path / "out", k_anonymity=0)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ExportError, match="is a file"):
        export(logs, tmp_path / "file")
    with pytest.raises(ExportError, match="no trajectories given"):
        export([], tmp_path / "out")


def test_archive_entries_become_sft_rows_and_inherit_consent(tmp_path: Path) -> None:
    consented = make_run("Write a slogan for a bakery.", [("Warm bread, every morning.", 9.0)],
                         consent=True)
    refused = make_run("Write a slogan for a gym.", [("Lift more.", 9.0)], consent=False)
    logs = write_log(tmp_path / "logs", [consented, refused])
    archive = Archive(tmp_path / "archive", namespace="slogans", embedder=HashingEmbedder())
    archive.add("Write a slogan for a bakery.", "Crusts worth waking up for.", score=9.5,
                trajectory_id=consented.id)
    archive.add("Write a slogan for a gym.", "Stronger every visit.", score=9.0,
                trajectory_id=refused.id)
    gone = archive.add("Write a slogan for a bakery.", "Deleted later.", score=9.0,
                       trajectory_id=consented.id)
    archive.delete(gone.entry.id)
    archive.add("Write a slogan for a bakery.", "Too weak.", score=5.0, trajectory_id=consented.id)
    archive.close()

    report = export(logs, tmp_path / "out", archive=tmp_path / "archive")
    sft = rows(tmp_path / "out" / "sft.jsonl")
    assert [(r["messages"][-1]["content"], r["metadata"]["source"]) for r in sft] == [
        ("Crusts worth waking up for.", "archive"), ("Warm bread, every morning.", "final")]
    assert [s.kind for s in report.sources] == ["trajectories", "archive"]
    assert report.manifest["counts"][0]["detail"].startswith("2 trajectories + 3 archive entries")
    with pytest.raises(ExportError, match="holds no archive"):
        export(logs, tmp_path / "out", archive=tmp_path / "logs")


def test_records_the_gate_cannot_anonymize_are_dropped_and_counted(tmp_path: Path) -> None:
    long_task = "Summarize: " + "word " * 60
    logs = write_log(tmp_path / "logs", [*corpus(), make_run(long_task, [("short", 9.0)])])
    report = export(logs, tmp_path / "out", pii=PiiGate("off", max_chars=200))
    step = next(s for s in report.steps if s.name == "PII gate")
    assert step.removed == 1
    run_id = report.pii_dropped[0].split()[1]
    assert report.pii_dropped == [f"run {run_id} task: 311 characters, over max_chars=200"]
    # two texts: the task, and the task in the run's rebuilt prompt (stripped: another text)
    assert report.manifest["pii"]["report"]["dropped"] == {"too_long": 2}


def test_progress_is_reported_per_stage(tmp_path: Path) -> None:
    class Recorder:
        def __init__(self) -> None:
            self.stages: list[tuple[str, int | None]] = []
            self.advanced = 0

        def start(self, stage: str, total: int | None = None) -> None:
            self.stages.append((stage, total))

        def advance(self, n: int = 1) -> None:
            self.advanced += n

    recorder = Recorder()
    export(write_log(tmp_path / "logs", corpus()), tmp_path / "out", progress=recorder)
    names = [s for s, _ in recorder.stages]
    assert names == ["reading inputs", "loading the PII gate (off)", "PII gate (off)",
                     "building datasets", "writing"]
    assert recorder.advanced == dict(recorder.stages)["PII gate (off)"] > 0


PLANTED = {
    "ana.kim@example.co.kr", "bo@mail.example.com", "010-1234-5678", "+82 10 9876 5432",
    "(212) 555-0175",
    "4111 1111 1111 1111", "DE89370400440532013000", "GB82WEST12345698765432", "192.168.10.20",
    "110-23-456789", "900101-1234567",
}


def test_planted_pii_run_through_an_architecture_never_reaches_an_exported_file(
        tmp_path: Path, regex_gate: PiiGate) -> None:
    tasks = [
        "Reply to ana.kim@example.co.kr, who called from 010-1234-5678, about the refund.",
        "Confirm the wire from account 110-23-456789 (IBAN DE89370400440532013000) "
        "to bo@mail.example.com.",
        "Tell the customer at +82 10 9876 5432 that card 4111 1111 1111 1111 was charged twice.",
        "Write to the admin of 192.168.10.20 and (212) 555-0175; "
        "the RRN on file is 900101-1234567.",
        "Note that payment went to GB82WEST12345698765432.",
    ]
    rubric = Rubric.for_constraints(exclude_words=["draft"])
    log = TrajectoryLog(tmp_path / "logs")
    for task in tasks:
        # the model echoes the task's personal data in both drafts; the first one fails the rubric
        # (the second says something of its own: an answer that is only the task restated is
        # a recital, which never trains)
        llm = ScriptedChatModel(responses=[f"draft: {task}", "All handled, and a confirmation "
                                           f"goes out by tomorrow morning at the latest. {task}"])
        arch = Reflection(llm, rubric=rubric, max_iterations=2, target_score=9.5, trajectories=log)
        result = arch.run(task)
        assert result.iterations == 2
    raw = (tmp_path / "logs" / "trajectories.jsonl").read_text()
    assert all(value in raw for value in PLANTED)  # the log really holds them

    report = export(tmp_path / "logs", tmp_path / "out", pii=regex_gate)
    assert report.sft_rows == 5 and report.pairs == 5
    for file in (tmp_path / "out").iterdir():
        text = file.read_text()
        assert not [value for value in PLANTED if value in text], file.name
    assert set(report.manifest["redactions"]) >= {"EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD",
                                                  "IBAN_CODE", "IP_ADDRESS", "BANK_ACCOUNT",
                                                  "KR_RRN"}


def test_the_same_log_twice_is_read_once_and_feedback_is_hashed_and_used(tmp_path: Path) -> None:
    liked = make_run("t", [("first answer", 8.0)])
    disliked = make_run("t", [("second answer", 8.0)])
    logs = write_log(tmp_path / "logs", [liked, disliked])
    log = TrajectoryLog(logs)
    log.record_feedback(liked.id, "up")
    log.record_feedback(disliked.id, "down")
    report = export([logs, logs / "trajectories.jsonl"], tmp_path / "out", reward="composite",
                    min_score=0.5, min_gap=0.1)
    assert report.manifest["counts"][0]["before"] == 2
    assert report.problems == [
        "2 trajectories appeared in more than one input (same id); each was read once."]
    feedback = [s for s in report.sources if s.kind == "feedback"]
    assert feedback[0].records == 2
    assert feedback[0].sha256 == hashlib.sha256((logs / "feedback.jsonl").read_bytes()).hexdigest()
    pair = rows(tmp_path / "out" / "pairs.jsonl")[0]  # same rubric score: the user's verdict
    chosen, rejected = pair["chosen"][0]["content"], pair["rejected"][0]["content"]
    assert (chosen, rejected) == ("first answer", "second answer")
