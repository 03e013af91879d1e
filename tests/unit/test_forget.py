"""Forgetting a user and enforcing retention: every store checked afterwards, byte by byte.

A small project is built on disk the way the package builds it (trajectory
logs with feedback and consent, an archive with a namespace, a Reflexion
memory, a real export, a registry with model cards), with values planted in
every place a user's text can land: tasks, drafts, outputs, critiques,
reflections, an archive entry's superseded version and a deleted one,
corrupt and torn log lines, a quarantine file, an orphan temporary, and a
retrieved exemplar inside another user's prompt. After the erasure, every
file under the project is grepped for every planted value.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

import agentic_loop
from agentic_loop.cli import app
from agentic_loop.distill import (
    enforce_retention,
    export_datasets,
    forget_user,
    withdraw_consent,
)
from agentic_loop.distill.forget.api import subject_digest
from agentic_loop.distill.release.registry import Registry
from agentic_loop.distill.train.model_card import DataRef, ModelCard, write_card
from agentic_loop.distill.train.training_data import read_pair_rows, read_sft_rows
from agentic_loop.errors import ConfigError
from agentic_loop.memory import Archive, HashingEmbedder, ReflexionMemory
from agentic_loop.trajectories import (
    Round,
    Trajectory,
    TrajectoryLog,
    fresh_draft_prompt,
    hash_user_id,
)

ALICE, BOB = "alice.quist@example.org", "bob"
# one value per place a user's text can land (all unique, so a grep is unambiguous)
ALICE_PLANTS = {
    "task": "Write a note for Zephyrine Quist about parcel QX-48213",
    "draft": "Dear Zephyrine, parcel QX-48213 is delayed",
    "final": "Dear Zephyrine Quist, parcel QX-48213 ships Monday from Vlissingen",
    "critique": "mentions Vlissingen depot correctly",
    "old_task": "Old request from Zephyrine about invoice INV-90417",
    "old_final": "Invoice INV-90417 was settled by Zephyrine last spring",
    "archive_superseded": "Zephyrine superseded tagline Marrowpeak Bakery",
    "archive_deleted": "Zephyrine deleted tagline Ostrander Lane",
    "archive_ns": "Zephyrine namespaced output Kestrelmoor Farm",
    "reflection": "Remember Zephyrine prefers parcel numbers like QX-48213 first",
    "corrupt": "Zephyrine corrupt line Halvorsen Street 17",
    "torn": "Zephyrine torn tail Brightwater Close",
    "quarantined": "Zephyrine quarantined Pellucid Avenue 9",
    "orphan": "Zephyrine orphan temporary Wexley Court",
}
BOB_PLANTS = {"task": "Write a tagline for Bob's kite shop Skyloft Kites",
              "final": "Skyloft Kites: lift your weekend higher and higher"}


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def _grep(root: Path, values: dict[str, str] | list[str]) -> dict[str, list[str]]:
    """Planted values found in any file under ``root`` (raw bytes, and as JSON escapes them)."""
    found: dict[str, list[str]] = {}
    wanted = list(values.values()) if isinstance(values, dict) else values
    for path in _files(root):
        data = path.read_bytes()
        for value in wanted:
            forms = {value.encode(), json.dumps(value)[1:-1].encode()}
            if any(form in data for form in forms):
                found.setdefault(value, []).append(str(path.relative_to(root)))
    return found


def _run(user: str | None, task: str, draft: str, final: str, *, critique: str = "",
         created_at: datetime | None = None, **extra: object) -> Trajectory:
    fields: dict[str, object] = dict(
        architecture="reflection", model_id="m", task=task,
        rounds=[Round(iteration=0, draft=draft, score=4.0, critique=critique or None),
                Round(iteration=1, draft=final, score=9.0)],
        final_output=final, final_score=9.0, accepted=True,
        user_id_hash=hash_user_id(user) if user else None, **extra)
    if created_at is not None:
        fields["created_at"] = created_at
    return Trajectory(**fields)  # type: ignore[arg-type]


class Project:
    """The project's folders, and the ids the checks need."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.trajectories = root / "data" / "trajectories"
        self.archive = root / "data" / "archive"
        self.reflections = root / "data" / "reflections"
        self.export = root / "runs" / "data"
        self.registry = root / "runs" / "registry"
        self.audit = root / "data" / "audit" / "erasures.jsonl"

    def stores(self) -> dict[str, object]:
        return {"data": self.root / "data", "trajectories": [self.trajectories],
                "memory": [self.archive, self.reflections],
                "exports": [self.root / "runs"], "registries": [self.registry],
                "audit_log": self.audit, "embedder": HashingEmbedder()}


def _build(root: Path) -> Project:
    p = Project(root)
    log = TrajectoryLog(p.trajectories)
    old = datetime.now(UTC) - timedelta(days=200)
    a1 = _run(ALICE, ALICE_PLANTS["task"], ALICE_PLANTS["draft"], ALICE_PLANTS["final"],
              critique=ALICE_PLANTS["critique"], consent=True)
    a_old = _run(ALICE, ALICE_PLANTS["old_task"], "draft about the invoice",
                 ALICE_PLANTS["old_final"], created_at=old, consent=True)
    b1 = _run(BOB, BOB_PLANTS["task"], "Kites kites kites", BOB_PLANTS["final"], consent=True)
    for t in (a1, a_old, b1):
        log.append(t)
    log.record_feedback(a1.id, "up")
    log.record_feedback(b1.id, "down")
    log.record_consent(ALICE, True)

    with Archive(p.archive, embedder=HashingEmbedder()) as archive:
        entry = archive.add(ALICE_PLANTS["task"], ALICE_PLANTS["final"], score=9.0,
                            trajectory_id=a1.id).entry
        first = archive.add("Tagline for a bakery", ALICE_PLANTS["archive_superseded"],
                            trajectory_id=a1.id).entry
        archive.add("Tagline for a bakery", "A newer bakery tagline of Alice's run",
                    trajectory_id=a1.id, id=first.id)           # leaves a superseded version
        gone = archive.add("Tagline for a lane", ALICE_PLANTS["archive_deleted"],
                           trajectory_id=a1.id).entry
        archive.delete(gone.id)                                  # leaves a tombstoned line
        archive.add(BOB_PLANTS["task"], BOB_PLANTS["final"], score=9.0, trajectory_id=b1.id)
    with Archive(p.archive, namespace=("users", "eu"), embedder=HashingEmbedder()) as archive:
        archive.add("Tagline for a farm", ALICE_PLANTS["archive_ns"], trajectory_id=a1.id)
    with ReflexionMemory(p.reflections, embedder=HashingEmbedder()) as memory:
        memory.add(ALICE_PLANTS["task"], ALICE_PLANTS["reflection"],
                   metadata={"run_id": a1.id})
        memory.add(BOB_PLANTS["task"], "Bob's lesson: name the shop first")

    # Bob's later run was shown Alice's archive entry as an exemplar (recorded in its prompt)
    prompt = fresh_draft_prompt("Tagline for a kite festival", exemplars=[
        {"id": entry.id, "task": entry.task, "output": entry.output}])
    b2 = Trajectory(architecture="archive_refine", model_id="m",
                    task="Tagline for a kite festival", exemplar_ids=[entry.id],
                    rounds=[Round(iteration=0, draft="Festival of kites and sky", score=9.0,
                                  prompt=prompt)],
                    final_output="Festival of kites and sky", final_score=9.0, accepted=True,
                    user_id_hash=hash_user_id(BOB), consent=True)
    log.append(b2)

    export_datasets([p.trajectories], p.export, pii="off", archive=p.archive,
                    embedder=HashingEmbedder(), dedup_threshold=None)

    # damage of the kinds a crash or a disk leaves: a corrupt line, a quarantine file, an
    # orphan temporary, and a torn last line, all holding Alice's text
    traj_file = p.trajectories / "trajectories.jsonl"
    with traj_file.open("ab") as fh:
        fh.write(json.dumps({"id": a1.id, "task": ALICE_PLANTS["corrupt"]})[:-1].encode()
                 + b' oops}\n')
    (p.trajectories / "trajectories.jsonl.corrupt").write_text(
        json.dumps({"user_id_hash": hash_user_id(ALICE), "task": ALICE_PLANTS["quarantined"]})
        + "\n" + json.dumps({"task": "an unrelated corrupt line of Bob"}) + "\n")
    (p.trajectories / ".trajectories.jsonl.abc123.tmp").write_text(
        json.dumps({"id": a1.id, "task": ALICE_PLANTS["orphan"]}) + "\n")
    with traj_file.open("ab") as fh:
        fh.write(json.dumps({"id": a1.id, "user_id_hash": hash_user_id(ALICE),
                             "task": ALICE_PLANTS["torn"]})[:-2].encode())

    _register(p, "v-after", p.export, trained_at=None)
    _register(p, "v-before", p.root / "runs" / "older-data",
              trained_at=datetime.now(UTC) - timedelta(days=400))
    return p


def _register(p: Project, name: str, data_dir: Path, *, trained_at: datetime | None) -> None:
    model = p.root / "runs" / name
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"_name_or_path": name}))  # distinct models
    manifest = data_dir / "manifest.json"
    sha = (__import__("hashlib").sha256(manifest.read_bytes()).hexdigest()
           if manifest.is_file() else "0" * 64)
    card = ModelCard(name=name, base_model="local", method="sft",
                     data=DataRef(dir=str(data_dir), manifest_sha256=sha, sft_rows=1),
                     finished_at=trained_at.isoformat() if trained_at else None)
    write_card(model, card)
    Registry(p.registry).register(model, name=name)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return _build(tmp_path / "project")


def test_the_fixture_plants_alice_everywhere_before_anything_is_erased(project: Project) -> None:
    found = _grep(project.root, ALICE_PLANTS)
    assert set(found) == set(ALICE_PLANTS.values())
    assert any(f.startswith("runs/data/sft.jsonl") for f in found[ALICE_PLANTS["final"]])
    assert any(f.startswith("runs/data/pairs.jsonl") for f in found[ALICE_PLANTS["draft"]])


def test_forget_user_leaves_no_planted_value_in_any_file(project: Project) -> None:
    report = forget_user(ALICE, **project.stores())  # type: ignore[arg-type]

    assert _grep(project.root, ALICE_PLANTS) == {}
    assert _grep(project.root, [ALICE, hash_user_id(ALICE)]) == {}
    counts = report.counts()
    assert counts["trajectories"] == 2 and counts["feedback"] == 1 and counts["consent"] == 1
    assert counts["archive_entries"] == 3 and counts["reflections"] == 1
    assert counts["runs_scrubbed"] == 1 and counts["export_rows"] >= 3
    assert counts["leftover_lines"] >= 4            # corrupt, torn, quarantined, orphan


def test_other_users_data_survives_and_every_store_still_opens(project: Project) -> None:
    forget_user(ALICE, **project.stores())  # type: ignore[arg-type]

    assert set(_grep(project.root, BOB_PLANTS)) == set(BOB_PLANTS.values())
    runs = TrajectoryLog(project.trajectories).read()
    assert {t.user_id_hash for t in runs} == {hash_user_id(BOB)}
    assert [t.feedback for t in runs if t.task == BOB_PLANTS["task"]] == ["down"]
    with Archive(project.archive, embedder=HashingEmbedder()) as archive:
        assert [e.output for e in archive.entries()] == [BOB_PLANTS["final"]]
        assert archive.search("kite shop tagline", k=1)[0].entry.output == BOB_PLANTS["final"]
    with Archive(project.archive, namespace=("users", "eu"), embedder=HashingEmbedder()) as ns:
        assert len(ns) == 0
    with ReflexionMemory(project.reflections, embedder=HashingEmbedder()) as memory:
        assert [r.reflection for r in memory.entries()] == ["Bob's lesson: name the shop first"]
    # Bob's run keeps its own text; only the exemplar it was shown is erased
    festival = next(t for t in runs if t.task == "Tagline for a kite festival")
    exemplars = festival.rounds[0].prompt.parts["exemplars"]  # type: ignore[union-attr]
    assert "[erased]" in exemplars and festival.final_output == "Festival of kites and sky"


def test_the_export_stays_trainable_and_its_manifest_tells_the_truth(project: Project) -> None:
    before = json.loads((project.export / "manifest.json").read_text())
    forget_user(ALICE, **project.stores())  # type: ignore[arg-type]

    manifest = json.loads((project.export / "manifest.json").read_text())
    sft = read_sft_rows(project.export / "sft.jsonl")
    assert manifest["outputs"]["sft.jsonl"]["rows"] == len(sft) > 0
    assert manifest["outputs"]["sft.jsonl"]["rows"] < before["outputs"]["sft.jsonl"]["rows"]
    sha = __import__("hashlib").sha256((project.export / "sft.jsonl").read_bytes()).hexdigest()
    assert manifest["outputs"]["sft.jsonl"]["sha256"] == sha
    assert manifest["erasures"][0]["reason"] == "user"
    if (project.export / "pairs.jsonl").exists():
        read_pair_rows(project.export / "pairs.jsonl")


def test_models_trained_on_the_erased_rows_are_named_and_marked(project: Project) -> None:
    report = forget_user(ALICE, **project.stores())  # type: ignore[arg-type]

    assert [m.name for m in report.models] == ["v-after"]
    history = Registry(project.registry).history()
    marks = [e for e in history if e.action == "data_removed"]
    assert [e.version for e in marks] == ["v1"] and "runs/data" in (marks[0].reason or "")


def test_the_audit_entry_says_who_when_and_how_much_never_what(project: Project) -> None:
    report = forget_user(ALICE, actor="dpo@example.org", **project.stores())  # type: ignore[arg-type]

    [line] = project.audit.read_text().splitlines()
    entry = json.loads(line)
    assert entry["action"] == "forget_user" and entry["actor"] == "dpo@example.org"
    assert entry["counts"] == report.counts() and entry["at"]
    assert entry["subject"] == subject_digest(hash_user_id(ALICE))
    assert hash_user_id(ALICE) not in line and ALICE not in line
    assert "Zephyrine" not in line and "Zephyrine" not in report.model_dump_json()


def test_a_dry_run_counts_the_same_and_changes_nothing(project: Project) -> None:
    snapshot = {p: p.read_bytes() for p in _files(project.root)}
    dry = forget_user(ALICE, dry_run=True, **project.stores())  # type: ignore[arg-type]
    assert {p: p.read_bytes() for p in _files(project.root)} == snapshot
    real = forget_user(ALICE, **project.stores())  # type: ignore[arg-type]
    for key in ("trajectories", "feedback", "consent", "archive_entries", "reflections",
                "runs_scrubbed", "export_rows", "models_marked"):
        assert dry.counts()[key] == real.counts()[key], key


def test_forgetting_twice_finds_nothing_more(project: Project) -> None:
    forget_user(ALICE, **project.stores())  # type: ignore[arg-type]
    again = forget_user(ALICE, **project.stores())  # type: ignore[arg-type]
    assert all(v == 0 for k, v in again.counts().items() if k != "export_rows_untraced")


def test_retention_erases_everything_older_and_nothing_newer(project: Project) -> None:
    old = datetime.now(UTC) - timedelta(days=120)
    with Archive(project.archive, embedder=HashingEmbedder()) as archive:
        archive.add_many([{"task": "Old tagline task", "created_at": old,
                           "output": "Ancient tagline of Grimsworth Mill"}])
    report = enforce_retention("90d", **project.stores())  # type: ignore[arg-type]

    assert _grep(project.root, [ALICE_PLANTS["old_task"], ALICE_PLANTS["old_final"],
                                "Grimsworth Mill"]) == {}
    assert ALICE_PLANTS["final"] in _grep(project.root, [ALICE_PLANTS["final"]])
    assert report.counts()["trajectories"] == 1 and report.counts()["archive_entries"] == 1
    assert json.loads(project.audit.read_text())["action"] == "retention"


def test_forget_with_an_age_takes_only_that_users_older_data(project: Project) -> None:
    report = forget_user(ALICE, older_than="90d", **project.stores())  # type: ignore[arg-type]
    assert report.counts()["trajectories"] == 1
    assert _grep(project.root, [ALICE_PLANTS["old_final"]]) == {}
    assert ALICE_PLANTS["final"] in _grep(project.root, [ALICE_PLANTS["final"]])


def test_an_export_older_than_the_cutoff_loses_every_row(project: Project) -> None:
    manifest = project.export / "manifest.json"
    data = json.loads(manifest.read_text())
    data["created_at"] = (datetime.now(UTC) - timedelta(days=100)).isoformat()
    manifest.write_text(json.dumps(data))
    enforce_retention("90d", **project.stores())  # type: ignore[arg-type]
    assert not (project.export / "sft.jsonl").exists()
    assert json.loads(manifest.read_text())["outputs"]["sft.jsonl"]["rows"] == 0


@pytest.mark.filterwarnings("ignore::agentic_loop.jsonl_log.LogCorruptionWarning")
def test_withdrawn_consent_is_honoured_by_the_next_export(project: Project) -> None:
    assert withdraw_consent(ALICE, trajectories=[project.trajectories],
                            audit_log=project.audit) == 1
    assert len(TrajectoryLog(project.trajectories).read()) == 4      # the runs stay
    for require in (None, False):
        out = project.root / f"again-{require}"
        export_datasets([project.trajectories], out, pii="off", embedder=HashingEmbedder(),
                        dedup_threshold=None, require_consent=require)
        assert _grep(out, [ALICE_PLANTS["final"], ALICE_PLANTS["old_final"]]) == {}
        assert BOB_PLANTS["final"] in _grep(out, [BOB_PLANTS["final"]])
    assert json.loads(project.audit.read_text())["action"] == "withdraw_consent"


def test_the_cli_forgets_and_reports_as_json(project: Project) -> None:
    args = ["forget", "--user", ALICE, "-t", str(project.trajectories), "--memory",
            str(project.archive), "--memory", str(project.reflections), "--exports",
            str(project.root / "runs"), "--registry", str(project.registry), "--audit-log",
            str(project.audit), "--json"]
    # the reflections were built with the hashing embedder, which the CLI recreates by name
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["counts"]["trajectories"] == 2 and report["models"][0]["name"] == "v-after"
    assert _grep(project.root, ALICE_PLANTS) == {}


def test_the_cli_refuses_unclear_requests() -> None:
    runner = CliRunner()
    for args, message in ((["forget"], "pass --user ID"),
                          (["forget", "--older-than", "ninety"], "is not an age"),
                          (["forget", "--user", "a", "--consent-only", "--dry-run"],
                           "--consent-only takes --user alone"),
                          (["forget", "--user", "a", "-t", "/no/such/log"], "does not exist"),
                          (["forget", "--user", "a", "--data", "/no/such/data"],
                           "data folder /no/such/data does not exist")):
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and message in result.stderr, (args, result.stderr)


def test_a_collection_built_with_an_unknown_embedder_asks_for_it(tmp_path: Path) -> None:
    class Named(HashingEmbedder):
        @property
        def name(self) -> str:
            return "my-embedder"

    log = TrajectoryLog(tmp_path / "t")
    run = _run(ALICE, "task", "d", "f")
    log.append(run)
    with Archive(tmp_path / "a", embedder=Named()) as archive:
        archive.add("task", "output of the run", trajectory_id=run.id)
    kwargs = {"trajectories": [tmp_path / "t"], "memory": [tmp_path / "a"], "exports": [],
              "registries": [], "audit_log": None}
    with pytest.raises(ConfigError, match="built with the embedder 'my-embedder'"):
        forget_user(ALICE, **kwargs)  # type: ignore[arg-type]
    assert forget_user(ALICE, embedder=Named(), **kwargs).counts()[  # type: ignore[arg-type]
        "archive_entries"] == 1


def test_the_api_is_public_and_checks_its_arguments() -> None:
    assert agentic_loop.forget_user is forget_user
    assert agentic_loop.enforce_retention is enforce_retention
    with pytest.raises(ConfigError, match="pass the id"):
        forget_user("  ")
    with pytest.raises(ConfigError, match="positive age"):
        enforce_retention(timedelta(0))


def test_a_recorded_database_out_of_reach_warns_and_a_given_one_raises(tmp_path: Path) -> None:
    """A recorded place can be gone for good (a throwaway database): consent withdrawal is
    still recorded everywhere else, with a warning; a database the caller names must be
    reached, so it is an error."""
    from agentic_loop.errors import StorageError
    from agentic_loop.text_places import PlaceWarning, record_place

    gone = "postgresql://nobody@127.0.0.1:1/none"  # nothing listens on port 1
    assert record_place("database", gone, what="trajectory database", near=[tmp_path])
    logs = tmp_path / "trajectories"
    TrajectoryLog(logs).append(Trajectory(architecture="a", model_id="m", task="t",
                                          user_id_hash=hash_user_id(ALICE)))
    with pytest.warns(PlaceWarning, match="127.0.0.1"):
        assert withdraw_consent(ALICE, data=tmp_path, audit_log=None) == 1
    assert TrajectoryLog(logs).read()[0].consent is False
    with pytest.raises(StorageError, match="not in"):
        withdraw_consent(ALICE, data=tmp_path, trajectories=[logs, gone], audit_log=None)
