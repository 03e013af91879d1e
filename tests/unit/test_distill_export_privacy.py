"""Planted credentials and personal data never reach an exported file; the manifest audits counts.

Every kind of value in ``tests/pii_corpus.py`` (credentials of every provider,
street addresses, names of many origins in full, in part and in lowercase,
plain and spelled e-mails and phones, cards, IBANs, IPs) is planted in
tasks, drafts and final outputs; the export must leave no trace of any of
them in any file it writes, the manifest included.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from distill_helpers import make_run, write_log
from pii_corpus import RECORDS, leaks

from agentic_loop.distill import PiiGate, export_datasets
from agentic_loop.distill.data.redact import PROPAGATION, redact_runs
from agentic_loop.memory import HashingEmbedder
from agentic_loop.trajectories import Candidate, Round, Trajectory


@pytest.fixture(scope="module")
def regex_gate() -> PiiGate:
    return PiiGate("regex")


def strings(obj: object) -> list[str]:
    """Every string in a parsed JSON value, keys included (JSON escapes undone)."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in (*strings(k), *strings(v))]
    if isinstance(obj, list):
        return [s for item in obj for s in strings(item)]
    return []


def planted_runs() -> list[Trajectory]:
    runs = []
    for record in RECORDS:
        drafts = [(d, 4.0 + i) for i, d in enumerate(record["drafts"])]
        run = make_run(record["task"], drafts, final=record["final"], final_score=9.0)
        # the final output is a scored round too, so it reaches sft.jsonl and pairs.jsonl
        run.rounds.append(Round(iteration=len(run.rounds), draft=record["final"], score=9.0,
                                passed=True, critique=f"critique quoting {record['task']}"))
        # a guard reason quotes the text: counted in the manifest, never written out (a
        # flagged draft trains only as a rejected side, so it is on the first draft)
        run.rounds[0].guards = {"task_copy": f"copies {record['task'][:40]!r}"}
        runs.append(run)
    return runs


def test_no_planted_value_survives_in_any_exported_file(tmp_path: Path,
                                                        regex_gate: PiiGate) -> None:
    runs = planted_runs()
    logs = write_log(tmp_path / "logs", runs)
    planted = [(kind, value) for r in RECORDS for kind, value in r["planted"]]
    logged = "\n".join(strings([json.loads(line) for line in
                                (logs / "trajectories.jsonl").read_text().splitlines()]))
    assert [v for _, v in planted if v not in logged] == []  # the log really holds them all
    report = export_datasets([logs], tmp_path / "out", pii=regex_gate, min_score=0.8,
                             embedder=HashingEmbedder())
    assert report.sft_rows >= len(RECORDS) - 2 and report.pairs >= len(RECORDS) - 2
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == ["manifest.json", "pairs.jsonl", "sft.jsonl"]
    for file in (tmp_path / "out").iterdir():
        text = file.read_text()
        lines = text.splitlines() if file.suffix == ".jsonl" else [text]
        values = "\n".join([text, *strings([json.loads(line) for line in lines])])
        survivors = [(kind, value) for kind, value in planted if leaks(kind, value, values)]
        assert survivors == [], file.name

    manifest = report.manifest
    kinds = {"SECRET", "PERSON", "STREET_ADDRESS", "EMAIL_ADDRESS", "PHONE_NUMBER",
             "CREDIT_CARD", "IBAN_CODE", "IP_ADDRESS", "US_SSN"}
    assert kinds <= set(manifest["redactions"])
    by_recognizer = manifest["redactions_by_recognizer"]
    assert sum(by_recognizer.values()) == sum(manifest["redactions"].values())
    assert by_recognizer[PROPAGATION] > 0 and by_recognizer["SpelledPhoneRecognizer"] > 0
    assert any(name.startswith("detect-secrets:") for name in by_recognizer)
    secrets = manifest["pii"]["secrets"]
    assert secrets["source"].startswith("detect-secrets") and secrets["version"]
    assert manifest["pii"]["name_lists"].startswith("Faker ")
    assert manifest["guards"]["fired"] == {"task_copy": manifest["guards"]["rounds_flagged"]}
    assert manifest["pii"]["records_dropped_count"] == len(report.pii_dropped)


def test_a_name_found_anywhere_in_a_record_leaves_every_text_of_it(regex_gate: PiiGate) -> None:
    run = make_run("Send the refund note to femke.janssen@ziggo.nl today.",
                   [("Hi, your refund is on its way.", 6.0),
                    ("Dear Femke, your refund is on its way. FEMKE, call us!", 9.0)],
                   final="Thanks, Janssen family: the refund is on its way.", final_score=9.0)
    result = redact_runs([run], regex_gate)
    out = result.kept[0]
    texts = [out.task, *(r.draft for r in out.rounds), out.final_output or ""]
    assert not any("femke" in t.lower() or "janssen" in t.lower() for t in texts), texts
    assert result.report.recognizers[PROPAGATION] >= 1  # "FEMKE" is found by no rule but this


def test_a_credential_the_rescan_still_finds_drops_the_record(regex_gate: PiiGate) -> None:
    """Redaction can only see context that is there: the rescan of the redacted text is the net.

    Here the 40-character key has no AWS or secret word near it; once the token
    before it is replaced by ``<SECRET>``, the rescan reads that as context,
    finds an AWS-style secret key, and the record is dropped and counted.
    """
    task = ("Backup codes: ghp_Mn4Bv8Cx2Zl6Kj0Hg3Fd7Sa1Qw5Er9Ty2Ui6O then "
            "Vb3Nm8Qw2Er7Ty1Ui6Op0As5Df9Gh4Jk8Lz3Xc7V for the vault.")
    clean = make_run("Write a haiku about rain.", [("Soft rain on tin roofs.", 9.0)])
    result = redact_runs([make_run(task, [("Noted.", 9.0)]), clean], regex_gate)
    assert [r.id for r in result.kept] == [clean.id]
    assert result.dropped[0].endswith(": task: a credential was still found after redaction")
    assert result.report.dropped["secret_after_redaction"] == 1


@pytest.mark.slow
def test_spacy_mode_leaks_nothing_planted_and_few_benign_false_positives() -> None:
    """The spaCy gate on both corpora (slow: loads the spaCy pipeline).

    Bound on the benign set: at most 3 false positives outside ``LOCATION``
    (which removes every place name by design); 2 when this was written
    ("Jordan" in "Jordan 1 sneakers", "Busan" as a person).
    """
    from pii_corpus import BENIGN

    from agentic_loop.distill.data.redact import run_texts

    gate = PiiGate("spacy")
    runs = planted_runs()
    result = redact_runs(runs, gate)
    assert result.dropped == []
    for record, out in zip(RECORDS, result.kept, strict=True):
        joined = "\n".join(t for _, t in run_texts(out))
        assert [v for k, v in record["planted"] if leaks(k, v, joined)] == []
    texts = [t for group in BENIGN.values() for t in group]
    found = [e for r in gate.anonymize_many(texts)
             for e in r.entities if e != "LOCATION"]
    assert len(found) <= 3, found


def test_best_of_n_losers_pass_the_gate_like_drafts(regex_gate: PiiGate) -> None:
    """A best-of-n round's losers become DPO negatives: they are anonymized, a name in one
    leaves the record's other texts, and a credential in one is redacted."""
    loser = Candidate(draft="Dear Femke, write to femke.janssen@ziggo.nl for the refund.",
                      score=3.0, guards={"task_copy": "copies 'Dear Femke'"})
    run = make_run("Write a refund note.", [("Hi Femke, the refund is on its way.", 9.0)])
    run.rounds[0].alternatives.append(loser)
    [out] = redact_runs([run], regex_gate).kept
    texts = [out.rounds[0].draft, out.rounds[0].alternatives[0].draft, out.final_output or ""]
    assert not any("femke" in t.lower() or "janssen" in t.lower() for t in texts), texts
    assert out.rounds[0].alternatives[0].guards == {"task_copy": ""}

    keyed = make_run("Write a refund note.", [("Refund sent.", 9.0)])
    keyed.rounds[0].alternatives.append(
        Candidate(draft="Use key ghp_Mn4Bv8Cx2Zl6Kj0Hg3Fd7Sa1Qw5Er9Ty2Ui6O to log in.", score=2.0))
    [clean] = redact_runs([keyed], regex_gate).kept
    assert "Mn4Bv8Cx2Zl6" not in clean.rounds[0].alternatives[0].draft
