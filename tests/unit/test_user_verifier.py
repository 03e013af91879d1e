"""Your own verifier: a check defined outside the package drives ``improve`` and the gate.

The pool and the golden set are task files whose only check is
``user_checks:valid_invoice`` (``tests/user_checks.py``, a business rule the
package knows nothing about), named by its import path. Models are scripted
(a "weak" one that answers a sentence unless the prompt carries a hint, a
trained one that answers an invoice number) and training is a fake, as in
``test_improve.py``; everything else is real: pool written and read back each
round, hint, export, gate, registry.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import user_checks

from agentic_loop.distill.loop.improve import ImproveBackend, improve
from agentic_loop.distill.release import Registry
from agentic_loop.distill.train import TrainResult, TrainSettings
from agentic_loop.distill.train.model_card import DataRef, ModelCard, read_card, write_card
from agentic_loop.memory import HashingEmbedder
from agentic_loop.testing import ScriptedChatModel

REF = "user_checks:valid_invoice"
GOOD, BAD = "INV-0042", "The invoice number is forty-two."


def _rubric_row(task: str, task_id: str) -> dict[str, Any]:
    return {"task": task, "id": task_id, "rubric": {"name": "invoices", "features": [
        {"name": "valid_invoice", "description": "Answer with one invoice number: INV- and "
         "four digits.", "check": REF}]}}


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


class Models:
    """Spec -> behaviour: the base writes a sentence unless hinted; trained models are "good"."""

    def __init__(self) -> None:
        self.good: set[str] = set()
        self.trained = 0

    def _reply(self, spec: str) -> Callable[[list[Any]], str]:
        good = spec.removeprefix("local:") in self.good

        def reply(messages: list[Any]) -> str:
            hinted = "Hint:" in "\n".join(str(m.content) for m in messages)
            return GOOD if good or hinted else BAD
        return reply

    def train(self, data: Path, out: Path, **kwargs: Any) -> TrainResult:
        self.trained += 1
        rows = (data / "sft.jsonl").read_text().splitlines()
        assert rows and all(json.loads(r)["messages"][-1]["content"] == GOOD for r in rows)
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text("{}")
        (out / "model.safetensors").write_bytes(f"weights of {out}".encode())
        write_card(out, ModelCard(name=out.name, base_model=kwargs["base"],
                                  method=kwargs["method"],
                                  data=DataRef(dir=str(data), manifest_sha256="fake")))
        self.good |= {str(out), str(out.resolve())}
        return TrainResult(out, TrainSettings(), [], read_card(out))

    def backend(self) -> ImproveBackend:
        return ImproveBackend(chat=lambda spec, t, n: ScriptedChatModel(default=self._reply(spec)),
                              train=self.train,
                              gate_model=lambda spec: ScriptedChatModel(default=self._reply(spec)))


class Stages:
    """The improve progress display, recording how many check calls were made before each stage."""

    def __init__(self) -> None:
        self.marks: list[tuple[str, int]] = []

    def start(self, label: str, total: int | None = None) -> None:
        self.marks.append((label, len(user_checks.CALLS)))

    def advance(self, n: int = 1) -> None:
        pass

    def calls(self, label: str) -> list[tuple[str, str]]:
        """The check's calls during the stage whose label starts with ``label`` (until the next
        stage started)."""
        at = [i for i, (name, _) in enumerate(self.marks) if name.startswith(label)][0]
        end = self.marks[at + 1][1] if at + 1 < len(self.marks) else len(user_checks.CALLS)
        return user_checks.CALLS[self.marks[at][1]:end]


def test_a_user_check_outside_the_package_drives_two_rounds_and_the_gate(tmp_path: Path) -> None:
    pool = _write(tmp_path / "pool.jsonl", [_rubric_row(f"Give the invoice number of pool "
                                                        f"order {i}.", f"p{i}") for i in range(3)])
    golden = _write(tmp_path / "golden.jsonl", [_rubric_row(f"Invoice number of golden order "
                                                            f"{i}?", f"g{i}") for i in range(4)])
    models, stages = Models(), Stages()
    user_checks.CALLS.clear()
    result = improve(pool, golden=golden, registry=tmp_path / "reg", work_dir=tmp_path / "work",
                     backend=models.backend(), progress=stages, samples=2, rounds=2,
                     thresholds=(7.0, 8.0), patience=5, min_gain=0.0, max_concurrency=2,
                     export_options={"pii": "off", "embedder": HashingEmbedder()},
                     eval_options={"min_tasks": 4, "kl": False, "diversity_check": False})

    assert len(result.reports) == 2 and models.trained == 2
    first, second = result.reports
    # round 1: the base model's sentences fail the user's rule, hinted answers pass it
    assert first.pool is not None and (first.pool.passed, first.pool.n) == (0, 6)
    assert first.hint is not None and first.hint.accepted == 3
    # the gate decided by the user's rule: 0 of 4 golden tasks before, 4 of 4 after
    assert first.golden is not None
    assert first.golden.baseline.passed == 0 and first.golden.candidate.passed == 4
    assert first.decision == "PROMOTE" and Registry(tmp_path / "reg").current is not None
    # round 2 samples the promoted model: every sample passes the user's rule
    assert second.pool is not None and second.pool.passed == second.pool.n == 6
    assert second.golden is not None and second.golden.baseline.passed == 4

    for number in (1, 2):
        saved = (tmp_path / "work" / f"round-00{number}" / "pool.jsonl").read_text()
        assert saved.count(f'"check": "{REF}"') == 3  # the pool file names the user's check
        grown = stages.calls(f"round {number}: grow")
        assert {task for task, _ in grown} >= {f"Give the invoice number of pool order {i}."
                                               for i in range(3)}
        gated = stages.calls(f"round {number}: gate")
        assert {task for task, _ in gated} >= {f"Invoice number of golden order {i}?"
                                               for i in range(4)}
        assert {out for _, out in gated} == ({BAD, GOOD} if number == 1 else {GOOD})
