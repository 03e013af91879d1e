"""Promote honours the release gate: a version whose last gate decision was ROLLBACK or
MANUAL_REVIEW is refused unless forced, and a forced promote is recorded in the audit log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agentic_loop.cli import app
from agentic_loop.distill.eval.gate import GateDecision, gate
from agentic_loop.distill.loop.gating import register_evaluated
from agentic_loop.distill.release.registry import Registry, RegistryError
from agentic_loop.distill.release.registry_audit import (
    AuditEntry,
    GateRecord,
    RoundRef,
    last_gate,
    version_gate,
)
from agentic_loop.distill.train.model_card import DataRef, ModelCard, add_eval, write_card

runner = CliRunner()


def _model(root: Path, name: str, *evals: dict[str, Any]) -> Path:
    """A model folder with a card whose ``evals`` are ``evals`` (no card when none given)."""
    path = root / name
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"name": name}))
    (path / "model.safetensors").write_bytes(f"weights of {name}".encode())
    if evals:
        write_card(path, ModelCard(name=name, base_model="local", method="sft",
                                   data=DataRef(dir="d", manifest_sha256="abc", sft_rows=5),
                                   evals=list(evals)))
    return path


REVIEW = {"decision": "MANUAL_REVIEW", "reasons": ["gain of 2 points is within noise (p=0.41)"],
          "at": "2026-01-02T00:00:00+00:00"}
ROLLBACK = {"decision": "ROLLBACK", "reasons": ["pass rate fell 12 points"],
            "at": "2026-01-03T00:00:00+00:00"}
PROMOTE = {"decision": "PROMOTE", "reasons": ["pass rate rose 15 points (p=0.001)"],
           "at": "2026-01-01T00:00:00+00:00"}


def _registry(tmp_path: Path, *evals: dict[str, Any]) -> Registry:
    """v1 (no card) current; v2 registered with ``evals`` on its card."""
    reg = Registry(tmp_path / "reg")
    reg.promote(reg.register(_model(tmp_path, "base")).version)
    reg.register(_model(tmp_path, "candidate", *evals))
    return reg


@pytest.mark.parametrize("verdict", [REVIEW, ROLLBACK])
def test_a_version_the_gate_did_not_promote_is_refused_naming_why(tmp_path: Path,
                                                                 verdict: dict[str, Any]):
    reg = _registry(tmp_path, PROMOTE, verdict)  # the last decision counts
    with pytest.raises(RegistryError) as caught:
        reg.promote("v2")
    message = str(caught.value)
    assert "refusing to promote v2" in message and verdict["decision"] in message
    assert verdict["reasons"][0] in message and verdict["at"] in message
    assert "force=True" in message and "--force" in message
    assert reg.current is not None and reg.current.version == "v1"
    assert [e.action for e in reg.history()] == ["register", "promote", "register"]


def test_a_forced_promote_records_the_override_in_the_audit_log(tmp_path: Path):
    reg = _registry(tmp_path, REVIEW)
    assert reg.promote("v2", force=True).version == "v2"
    assert reg.current is not None and reg.current.version == "v2"
    line = reg.history()[-1]
    assert line.action == "promote" and line.previous == "v1" and line.user and line.at
    assert line.override is not None and line.override.decision == "MANUAL_REVIEW"
    assert line.override.reasons == REVIEW["reasons"] and line.override.at == REVIEW["at"]
    assert line.reason == "forced past the gate's MANUAL_REVIEW"
    raw = json.loads((reg.root / "audit.jsonl").read_text().splitlines()[-1])
    assert raw["override"]["decision"] == "MANUAL_REVIEW"
    reg.rollback()
    reg.promote("v2", force=True, reason="reviewed by Ann")
    assert reg.history()[-1].reason == "reviewed by Ann"
    assert reg.history()[-1].override is not None


def test_versions_without_a_gate_record_and_promoted_ones_promote_as_before(tmp_path: Path):
    reg = _registry(tmp_path)  # v2 has no card at all
    assert reg.promote("v2").version == "v2" and reg.history()[-1].override is None
    reg.register(_model(tmp_path, "carded", {"note": "no decision"}))  # a card, no gate
    assert reg.promote("v3").version == "v3"
    reg.register(_model(tmp_path, "good", REVIEW, {**PROMOTE, "at": "2026-02-01T00:00:00+00:00"}))
    assert reg.promote("v4").version == "v4" and reg.history()[-1].override is None


def test_an_evaluation_recorded_after_registering_is_the_last_word(tmp_path: Path):
    reg = _registry(tmp_path, REVIEW)
    folder = Path(reg.get("v2").path)
    add_eval(folder, {"decision": "PROMOTE", "reasons": ["re-evaluated on 200 tasks"]})
    gate = version_gate(reg.get("v2"))
    assert gate is not None and gate.decision == "PROMOTE"
    assert reg.promote("v2").version == "v2"


def test_a_gate_that_just_decided_promote_is_the_last_decision(tmp_path: Path):
    reg = _registry(tmp_path, REVIEW)
    assert reg.promote("v2", gate=GateRecord(decision="PROMOTE")).version == "v2"
    reg.rollback()
    with pytest.raises(RegistryError, match="ROLLBACK"):
        reg.promote("v2", gate=GateRecord(decision="ROLLBACK"))


def test_the_improve_loop_promotes_on_promote_only(tmp_path: Path):
    """``register_evaluated`` (a round's register step): PROMOTE promotes, MANUAL_REVIEW keeps
    the version registered but not served, and promoting it by hand then needs --force."""
    reg = Registry(tmp_path / "reg")
    reg.promote(reg.register(_model(tmp_path, "base")).version)
    single = gate([5, 6] * 10, [8, 9] * 10).model_dump(mode="json")
    summary = {"decision": "PROMOTE", "reasons": ["better"], "single_shot": single}
    good = register_evaluated(reg, _model(tmp_path, "good", {"note": "trained"}), summary,
                              baseline="local")
    assert reg.current is not None and reg.current.version == good.version == "v2"
    assert reg.history()[-1].gate is not None and reg.history()[-1].override is None
    review = {**summary, "decision": "MANUAL_REVIEW", "reasons": ["within noise"]}
    held = register_evaluated(reg, _model(tmp_path, "held", {"note": "trained"}), review,
                              baseline="local")
    assert held.version == "v3" and reg.current.version == "v2"
    with pytest.raises(RegistryError, match="MANUAL_REVIEW .*within noise"):
        reg.promote("v3")


def test_last_gate_reads_cards_and_skips_what_is_no_decision():
    assert last_gate(None, {}, {"evals": "x"}, {"evals": [{"decision": "MAYBE"}, 3]}) is None
    newest = last_gate({"evals": [REVIEW]}, {"evals": [PROMOTE, ROLLBACK]})
    assert newest is not None and newest.decision == "ROLLBACK"
    untimed = last_gate({"evals": [{"decision": "PROMOTE"}, {"decision": "ROLLBACK"}]})
    assert untimed is not None and untimed.decision == "ROLLBACK" and untimed.reasons == []


def test_an_audit_line_written_before_overrides_existed_still_reads():
    old = {"at": "2025-06-01T00:00:00+00:00", "action": "promote", "version": "v2",
           "previous": "v1", "reason": "gate PROMOTE vs local", "user": "ann",
           "gate": {"decision": "PROMOTE"}, "seq": 4}
    entry = AuditEntry.model_validate(old)
    assert entry.override is None and entry.gate == GateRecord(decision="PROMOTE")


def test_the_loop_hands_the_registry_a_typed_gate_record_the_audit_log_keeps(tmp_path: Path):
    reg = Registry(tmp_path / "reg")
    reg.promote(reg.register(_model(tmp_path, "base")).version)
    single = gate([5, 6] * 10, [8, 9] * 10)
    summary = {"decision": "PROMOTE", "reasons": ["better"],
               "single_shot": single.model_dump(mode="json"), "architecture": None}
    round_ref = RoundRef(round=2, work_dir=str(tmp_path / "work"), summary="improve round 2")
    register_evaluated(reg, _model(tmp_path, "good", {"note": "trained"}), summary,
                       baseline="local", improve=round_ref)
    line = reg.history()[-1]
    assert isinstance(line.gate, GateRecord) and line.gate.decision == "PROMOTE"
    assert line.gate.single_shot == single and line.gate.architecture is None
    assert line.gate.reasons == ["better"] and line.gate.improve == round_ref
    raw = json.loads((reg.root / "audit.jsonl").read_text().splitlines()[-1])
    assert raw["gate"]["improve"]["round"] == 2 and raw["gate"]["single_shot"]["n"] == 20
    assert AuditEntry.model_validate(raw) == line


def test_an_audit_line_whose_gate_was_a_dict_still_loads():
    """What the loop wrote before the gate record was typed: the gate's fields and the round's
    report parts as plain dicts (``mean_diff`` included, ``improve`` with its report)."""
    single = gate([5, 6] * 10, [8, 9] * 10).model_dump(mode="json")
    improve = {"round": 1, "work_dir": "runs/improve", "summary": "improve round 1 from local",
               "pool": {"n": 8, "passed": 3}, "golden": {"tasks": 20}, "threshold": 7.0}
    old = {"at": "2026-01-01T00:00:00Z", "action": "promote", "version": "v2", "previous": "v1",
           "reason": "gate PROMOTE vs local", "user": "ann", "seq": 3,
           "gate": {"decision": "PROMOTE", "single_shot": single, "architecture": None,
                    "improve": improve}}
    entry = AuditEntry.model_validate_json(json.dumps(old))
    assert entry.gate is not None and entry.gate.decision == "PROMOTE"
    assert isinstance(entry.gate.single_shot, GateDecision) and entry.gate.single_shot.n == 20
    assert entry.gate.improve == RoundRef(round=1, work_dir="runs/improve",
                                          summary="improve round 1 from local")
    by_hand = {**old, "gate": {"p_value": 0.01}}  # a hand-made gate with no decision
    entry = AuditEntry.model_validate(by_hand)
    assert entry.action == "promote" and entry.gate is None


@pytest.mark.parametrize("spelling", [["registry", "promote"], ["promote"]])
def test_the_cli_refuses_without_force_and_says_so_when_forced(tmp_path: Path,
                                                              spelling: list[str]):
    reg = _registry(tmp_path, REVIEW)
    where = ["--registry", str(reg.root)]
    refused = runner.invoke(app, [*spelling, "v2", *where])
    assert refused.exit_code != 0
    said = " ".join(refused.stderr.split())
    assert "refusing to promote v2" in said and "MANUAL_REVIEW" in said and "--force" in said
    forced = runner.invoke(app, [*spelling, "v2", "--force", *where])
    assert forced.exit_code == 0, forced.output
    out = " ".join(forced.output.split())
    assert "current: v2 (was v1)" in out and "forced past the gate's MANUAL_REVIEW" in out
    history = runner.invoke(app, ["registry", "history", *where])
    assert history.exit_code == 0 and "forced" in history.output
    line = reg.history()[-1]
    assert line.override is not None and line.override.decision == "MANUAL_REVIEW"
    listing = runner.invoke(app, ["registry", "list", *where]).output
    assert "MANUAL_REVIEW" in listing or "MANUAL_REV" in listing


def test_the_history_says_when_a_promote_was_forced():
    from agentic_loop.cli.registry import _reason
    review = GateRecord(decision="MANUAL_REVIEW")
    assert _reason("reviewed by Ann", review) == ("reviewed by Ann (forced past the gate's "
                                                  "MANUAL_REVIEW)")
    assert _reason("forced past the gate's MANUAL_REVIEW", review).count("forced") == 1
    assert _reason(None, review) == "forced past the gate's MANUAL_REVIEW"
    assert _reason("why", None) == "why" and _reason(None, None) == ""
