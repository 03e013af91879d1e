"""The model registry: versions, promote, rollback (a stack), history, audit, corruption, locks."""

from __future__ import annotations

import json
import multiprocessing
import shutil
from pathlib import Path

import pytest

from agentic_loop.distill.release.registry import IndexRebuiltWarning, Registry, RegistryError
from agentic_loop.distill.release.registry_audit import GateRecord
from agentic_loop.distill.train.model_card import DataRef, ModelCard, write_card


def _model(root: Path, name: str, *, card: bool = False, adapter: bool = False) -> Path:
    path = root / name
    path.mkdir(parents=True)
    if adapter:
        config = {"base_model_name_or_path": "/base", "r": 8}
        (path / "adapter_config.json").write_text(json.dumps(config))
    else:
        (path / "config.json").write_text("{}")
    (path / "model.safetensors").write_bytes(f"weights of {name}".encode())
    if card:
        write_card(path, ModelCard(name=name, base_model="local", method="sft",
                                   data=DataRef(dir="d", manifest_sha256="abc", sft_rows=5)))
    return path


def test_promote_and_rollback_follow_a_stack(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "reg")
    for n in "abc":
        reg.register(_model(tmp_path, n))
    assert reg.current is None
    for v in ("v1", "v2", "v3"):
        reg.promote(v)
    assert reg.rollback().version == "v2"
    assert reg.rollback().version == "v1"
    with pytest.raises(RegistryError, match="nothing to roll back to: v1 is the first version"):
        reg.rollback()
    assert reg.current.version == "v1"


def test_promoting_an_old_version_then_rolling_back_returns_to_the_replaced_one(
        tmp_path: Path) -> None:
    reg = Registry(tmp_path / "reg")
    for n in "abc":
        reg.register(_model(tmp_path, n))
    reg.promote("v3")
    reg.promote(1)            # ints and bare numbers are accepted
    assert reg.rollback().version == "v3"


def test_history_and_audit_log_record_every_change(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "reg")
    reg.register(_model(tmp_path, "a"), notes="first")
    reg.register(_model(tmp_path, "b"))
    gate = GateRecord(decision="PROMOTE", reasons=["better (p=0.01)"])
    reg.promote("v1", reason="initial", gate=gate)
    reg.promote("v2")
    reg.rollback(reason="complaints")
    history = reg.history()
    assert [(e.action, e.version, e.previous) for e in history] == [
        ("register", "v1", None), ("register", "v2", None), ("promote", "v1", None),
        ("promote", "v2", "v1"), ("rollback", "v1", "v2")]
    assert history[2].gate == gate
    assert history[4].reason == "complaints"
    lines = (tmp_path / "reg" / "audit.jsonl").read_text().splitlines()
    assert len(lines) == 5 and json.loads(lines[-1])["action"] == "rollback"
    # another Registry object (another process) sees the same state
    assert Registry(tmp_path / "reg").current.version == "v1"


def test_promoting_the_current_version_changes_nothing(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "reg")
    reg.register(_model(tmp_path, "a"))
    reg.promote("v1")
    reg.promote("v1")
    assert [e.action for e in reg.history()] == ["register", "promote"]
    with pytest.raises(RegistryError, match="first version promoted"):
        reg.rollback()


def test_register_keeps_the_card_and_recognizes_adapters(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "reg")
    full = reg.register(_model(tmp_path, "a", card=True), name="tagline")
    adapter = reg.register(_model(tmp_path, "b", adapter=True))
    assert full.name == "tagline" and full.card is not None and full.card.data.sft_rows == 5
    assert (adapter.adapter, adapter.base_model) == (True, "/base")
    assert reg.get("current" if reg.current else "v2").version == "v2"


def test_an_index_written_with_cards_as_dicts_loads_typed_cards(tmp_path: Path) -> None:
    """index.json and audit.jsonl as the registry wrote them when a card was a plain dict
    (``read_card(...).model_dump(mode="json")``, extra keys included): they load into typed
    cards, and the next change writes every field of the card back."""
    folder = _model(tmp_path, "a")
    card = {"schema_version": 1, "name": "a", "base_model": "local", "base_model_path": None,
            "method": "sft", "adapter": False, "lora": {"r": 8},
            "data": {"dir": "runs/data", "manifest_sha256": "abc", "sft_rows": 5, "pairs": 0},
            "hyperparameters": {"learning_rate": 0.0002}, "stages": [], "metrics": {},
            "evals": [{"decision": "MANUAL_REVIEW", "reasons": ["within noise"],
                       "at": "2026-01-02T00:00:00+00:00"}], "a_newer_key": [1, 2]}
    model = {"version": "v1", "path": str(folder), "name": "a",
             "registered_at": "2026-01-01T00:00:00Z", "adapter": False, "base_model": None,
             "card": card, "notes": None, "content_sha256": None}
    root = tmp_path / "reg"
    root.mkdir()
    (root / "index.json").write_text(json.dumps(
        {"schema_version": 1, "versions": [model], "current": None, "previous": [], "seq": 1}))
    (root / "audit.jsonl").write_text(json.dumps(
        {"at": "2026-01-01T00:00:00Z", "action": "register", "version": "v1", "model": model,
         "seq": 1}) + "\n")
    reg = Registry(root)
    v1 = reg.get("v1")
    assert v1.card is not None and v1.card.method == "sft" and v1.card.data.sft_rows == 5
    assert v1.card.model_extra == {"a_newer_key": [1, 2]}
    assert reg.history()[0].model == v1
    with pytest.raises(RegistryError, match="MANUAL_REVIEW"):  # the gate in the old card counts
        reg.promote("v1")
    reg.promote("v1", force=True)
    written = json.loads((root / "index.json").read_text())["versions"][0]["card"]
    assert {k: written[k] for k in card if k != "data"} == {k: v for k, v in card.items()
                                                             if k != "data"}
    assert written["data"] == {**card["data"], "prompts": 0}  # a field added since, defaulted


def test_register_copy_survives_the_source_folder(tmp_path: Path) -> None:
    source = _model(tmp_path, "a")
    (source / "checkpoints" / "sft").mkdir(parents=True)
    (source / "checkpoints" / "sft" / "optimizer.pt").write_bytes(b"x" * 100)
    reg = Registry(tmp_path / "reg")
    entry = reg.register(source, copy=True)
    copied = Path(entry.path)
    assert copied == tmp_path / "reg" / "models" / "v1"
    assert (copied / "model.safetensors").read_bytes() == b"weights of a"
    assert not (copied / "checkpoints").exists()
    (source / "model.safetensors").unlink()
    assert reg.promote("v1").version == "v1"


def test_a_deleted_model_folder_cannot_be_promoted(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "reg")
    path = _model(tmp_path, "a")
    reg.register(path)
    (path / "config.json").unlink()
    (path / "model.safetensors").unlink()
    path.rmdir()
    with pytest.raises(RegistryError, match="no longer exists"):
        reg.promote("v1")
    assert reg.current is None


@pytest.mark.parametrize("version", ["v9", "latest"])
def test_unknown_versions_are_named(tmp_path: Path, version: str) -> None:
    reg = Registry(tmp_path / "reg")
    reg.register(_model(tmp_path, "a"))
    with pytest.raises(RegistryError, match=f"no version '{version}' \\(registered: v1\\)"):
        reg.promote(version)


def test_current_before_any_promotion(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "reg")
    reg.register(_model(tmp_path, "a"))
    with pytest.raises(RegistryError, match="no current version yet"):
        reg.get("current")
    with pytest.raises(RegistryError, match="nothing to roll back"):
        reg.rollback()


def test_not_a_model_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(RegistryError, match="not a model directory"):
        Registry(tmp_path / "reg").register(tmp_path / "empty")


def test_operations_on_a_missing_registry_create_nothing(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "nowhere")
    with pytest.raises(RegistryError, match="there is no registry"):
        reg.promote("v1")
    assert reg.versions() == [] and reg.history() == []
    assert not (tmp_path / "nowhere").exists()


def test_a_corrupt_index_is_reported_and_left_untouched(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "reg")
    reg.register(_model(tmp_path, "a"))
    reg.register(_model(tmp_path, "b"))
    index = tmp_path / "reg" / "index.json"
    index.write_text('{"versions": [ {"version": "v1"')  # a hand edit gone wrong
    with pytest.raises(RegistryError,
                       match=r"index.json is corrupt .*nothing was changed.*cp .*index.json.bak"):
        reg.promote("v1")
    assert index.read_text() == '{"versions": [ {"version": "v1"'
    # the backup is the index before the last update; the audit log adds that update back
    (tmp_path / "reg" / "index.json.bak").replace(index)
    assert [v.version for v in reg.versions()] == ["v1", "v2"]


def test_a_deleted_index_is_rebuilt_from_the_audit_log(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "reg")
    reg.register(_model(tmp_path, "a", card=True), notes="first")
    reg.register(_model(tmp_path, "b"))
    reg.promote("v2")
    before = reg.versions()
    (tmp_path / "reg" / "index.json").unlink()
    with pytest.warns(IndexRebuiltWarning, match=r"index.json is missing; rebuilt from .*audit"):
        assert reg.versions() == before  # path, name, card and notes come back too
    with pytest.warns(IndexRebuiltWarning):
        assert reg.current is not None and reg.current.version == "v2"
    assert not (tmp_path / "reg" / "index.json").exists()  # a read writes nothing
    with pytest.warns(IndexRebuiltWarning):
        assert reg.register(_model(tmp_path, "c")).version == "v3"  # never v1 again
    assert [v.version for v in reg.versions()] == ["v1", "v2", "v3"]  # written back
    assert reg.current.version == "v2"


def test_the_rebuild_replays_the_rollback_stack(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "reg")
    for n in "abc":
        reg.register(_model(tmp_path, n))
    for v in ("v1", "v3", "v2"):
        reg.promote(v)
    reg.rollback()
    (tmp_path / "reg" / "index.json").unlink()
    with pytest.warns(IndexRebuiltWarning):
        assert reg.current.version == "v3"
        assert reg.rollback().version == "v1"


def _strip_models_from_audit(root: Path) -> None:
    """Make the audit log look like one an older agentic-loop wrote (no version details)."""
    audit = root / "audit.jsonl"
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    audit.write_text("".join(json.dumps({k: v for k, v in line.items() if k != "model"}) + "\n"
                             for line in lines))


def test_an_old_audit_log_is_rebuilt_with_the_backup_or_refused_by_name(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "reg")
    reg.register(_model(tmp_path, "a"))
    reg.register(_model(tmp_path, "b"))
    reg.promote("v1")  # index.json.bak now holds v1 and v2
    _strip_models_from_audit(tmp_path / "reg")
    (tmp_path / "reg" / "index.json").unlink()
    with pytest.warns(IndexRebuiltWarning):
        assert [v.version for v in reg.versions()] == ["v1", "v2"]
    (tmp_path / "reg" / "index.json.bak").unlink()
    with pytest.raises(RegistryError, match=r"cannot be rebuilt: .*audit.jsonl records register "
                                            r"v1 without its details.*index.json.bak"):
        reg.versions()
    with pytest.raises(RegistryError, match="cannot be rebuilt"):
        reg.register(_model(tmp_path, "c"))  # never a silent v1
    assert not (tmp_path / "reg" / "index.json").exists()


def test_a_missing_index_with_an_empty_audit_log_names_the_backup(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "reg")
    reg.register(_model(tmp_path, "a"))
    reg.register(_model(tmp_path, "b"))
    (tmp_path / "reg" / "index.json").unlink()
    (tmp_path / "reg" / "audit.jsonl").unlink()
    with pytest.raises(RegistryError, match=r"index.json is missing .*cp .*index.json.bak"):
        reg.versions()


def test_a_registry_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(RegistryError, match="is a file"):
        Registry(tmp_path / "file")


def _register_many(args: tuple[str, str, int]) -> list[str]:
    root, model, count = args
    reg = Registry(root)
    return [reg.register(model, force=True).version for _ in range(count)]


def test_concurrent_processes_get_distinct_versions(tmp_path: Path) -> None:
    model = _model(tmp_path, "a")
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        results = pool.map(_register_many, [(str(tmp_path / "reg"), str(model), 5)] * 2)
    versions = sorted(v for chunk in results for v in chunk)
    assert len(set(versions)) == 10
    assert sorted(v.version for v in Registry(tmp_path / "reg").versions()) == versions
    assert len(Registry(tmp_path / "reg").history()) == 10


def test_the_same_model_twice_is_refused_by_content(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "reg")
    first = reg.register(_model(tmp_path, "a", card=True))
    again = tmp_path / "elsewhere"
    shutil.copytree(tmp_path / "a", again)  # the same weights in another folder
    (again / "model_card.yaml").write_text((again / "model_card.yaml").read_text()
                                           + "# an evaluation appended later\n")
    with pytest.raises(RegistryError, match=r"the model in .*elsewhere is already registered in "
                                            r".* as v1 \(.*same weights and config, sha256 "
                                            r"[0-9a-f]{12}\); promote v1 .*--force"):
        reg.register(again)
    assert [e.action for e in reg.history()] == ["register"]  # nothing was written
    assert reg.registered(again) == first and reg.registered(tmp_path / "a") == first
    (again / "model.safetensors").write_bytes(b"retrained")
    assert reg.registered(again) is None
    assert reg.register(again).version == "v2"
    assert reg.register(tmp_path / "a", force=True).version == "v3"  # asked for by name


def test_versions_registered_before_digests_are_matched_by_folder_or_content(
        tmp_path: Path) -> None:
    reg = Registry(tmp_path / "reg")
    reg.register(_model(tmp_path, "a"))
    reg.register(_model(tmp_path, "b"))
    index = json.loads(reg.index_path.read_text())
    for version in index["versions"]:  # what an older agentic-loop wrote
        del version["content_sha256"]
    reg.index_path.write_text(json.dumps(index))
    with pytest.raises(RegistryError, match="already registered .* as v1"):
        reg.register(tmp_path / "a")  # the same folder
    shutil.copytree(tmp_path / "b", tmp_path / "b-copy")
    with pytest.raises(RegistryError, match="already registered .* as v2"):
        reg.register(tmp_path / "b-copy")  # the same content elsewhere: read and compared
    assert reg.register(_model(tmp_path, "c")).version == "v3"


def test_the_cli_refuses_a_second_registration_in_one_line_and_force_adds_it(
        tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from agentic_loop.cli import app

    model, reg = _model(tmp_path, "a"), str(tmp_path / "reg")
    runner = CliRunner()
    assert runner.invoke(app, ["register", str(model), "--registry", reg]).exit_code == 0
    refused = runner.invoke(app, ["register", str(model), "--registry", reg])
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    assert "already registered" in " ".join(refused.stderr.split())
    forced = runner.invoke(app, ["register", str(model), "--registry", reg, "--force"])
    assert forced.exit_code == 0 and "registered v2" in forced.output


def test_a_change_whose_index_write_was_lost_is_applied_on_read(tmp_path: Path) -> None:
    """The audit line is written first: an index that missed it (a kill) is caught up."""
    reg = Registry(tmp_path / "reg")
    for n in "ab":
        reg.register(_model(tmp_path, n))
    reg.promote("v1")
    before = reg.index_path.read_bytes()
    reg.promote("v2")
    reg.index_path.write_bytes(before)  # as if killed between the audit line and the index
    assert reg.current.version == "v2" and reg.previous == ["v1"]
    assert reg.rollback().version == "v1"  # and the next change starts from the caught-up state
    on_disk = json.loads(reg.index_path.read_text())
    assert (on_disk["current"], on_disk["previous"], on_disk["seq"]) == ("v1", [], 5)
