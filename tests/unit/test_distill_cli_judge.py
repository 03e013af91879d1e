"""``distill --judge``: the flags reach the trainer and the loop, and the judge judges the gate.

The CLI half parses the real command (the loop itself is replaced only where
a test checks what the command hands it). The loop half runs a real improve
round with scripted models: the policy, the judge (spec ``"judge"``) and a fake
trainer; the gate (``evaluate_models``), the export and the registry are real.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from distill_helpers import fake_trained
from typer.testing import CliRunner

from agentic_loop.cli import app
from agentic_loop.distill.loop.improve import ImproveBackend, improve
from agentic_loop.distill.train import TrainResult
from agentic_loop.judges import Feature, Rubric
from agentic_loop.memory import HashingEmbedder
from agentic_loop.tasks.spec import TaskSpec
from agentic_loop.testing import ScriptedChatModel

runner = CliRunner()
GOLDEN_FEATURES = [Feature("kind", "It is kind to the reader.", 1.0, kind="bool")]


def test_help_lists_the_judge_flags() -> None:
    import agentic_loop.cli.distill  # noqa: F401 - registers the command

    text = runner.invoke(app, ["distill", "--help"], env={"COLUMNS": "240"}).output
    for flag in ("--judge", "--judged-reward", "--judged-reward-weight"):
        assert flag in text


def _prompts(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"task": "Write a motto in exactly 3 words."}) + "\n")
    return path


def test_data_form_gives_the_trainer_its_judge_and_refuses_it_outside_grpo(
        tmp_path: Path) -> None:
    data = _prompts(tmp_path)
    result = runner.invoke(app, ["distill", "--data", str(data), "--out", str(tmp_path / "o"),
                                 "--method", "grpo", "--judged-reward", "rank", "--judge",
                                 "openai:judge-model", "--judged-reward-weight", "0.5",
                                 "--dry-run"])
    assert result.exit_code == 0, result.output
    out = re.sub(r"\s+", " ", result.output)
    assert "judge_rank (x0.5, judge: openai:judge-model)" in out
    refused = runner.invoke(app, ["distill", "--data", str(data), "--out", str(tmp_path / "o"),
                                  "--judged-reward", "vote"])
    assert refused.exit_code == 2
    assert "--judged-reward apply to --method grpo only" in " ".join(refused.output.split())
    assert not (tmp_path / "o").exists()


def test_loop_form_hands_the_judge_and_the_judged_reward_to_the_round(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentic_loop.distill.loop import pipeline
    from agentic_loop.distill.loop.records import ImproveResult, ImproveRound, Registration

    seen: dict[str, Any] = {}

    def one_round(**kwargs: Any) -> ImproveResult:
        seen.update(kwargs)
        report = ImproveRound(round=1, model="local", decision="MANUAL_REVIEW", reasons=[],
                              registration=Registration(version="v1", promoted=False))
        return ImproveResult(work_dir=tmp_path / "w", reports=[report], stopped="rounds",
                             reason="the round budget (1) is spent", current=None)

    monkeypatch.setattr(pipeline, "improve", one_round)
    base = ["distill", "--from-trajectories", "logs", "--golden", "g.jsonl", "--out",
            str(tmp_path / "w")]
    result = runner.invoke(app, [*base, "--method", "grpo", "--judged-reward", "rank",
                                 "--judge", "openai:judge-model"])
    assert result.exit_code == 0, result.output
    settings = seen["settings"]
    assert settings.judge == "openai:judge-model"
    assert settings.train_options["judged_reward"] == "rank"
    assert "judge" not in settings.train_options  # the round gives the trainer its judge
    seen.clear()
    plain = runner.invoke(app, [*base, "--judge", "openai:judge-model"])  # sft: the gate's judge
    assert plain.exit_code == 0, plain.output
    assert seen["settings"].judge == "openai:judge-model"
    assert "judged_reward" not in seen["settings"].train_options


# -- the loop: the judge judges the gate ------------------------------------------------------

def _judgement(schema: Any, messages: Any) -> dict[str, Any]:
    fields = getattr(schema, "model_fields", None) or {}
    return {name: True for name in fields}


class Models:
    """Specs to scripted models; ``"judge"`` is the judge, anything else a policy."""

    def __init__(self) -> None:
        self.judge = ScriptedChatModel(default_structured=_judgement, model_id="judge-m",
                                       default="ok")
        self.gate_models: list[ScriptedChatModel] = []

    def chat(self, spec: str, temperature: float, max_tokens: int) -> ScriptedChatModel:
        if spec == "judge":
            return self.judge
        return ScriptedChatModel(default="two words", default_structured=_judgement,
                                 model_id="policy")

    def gate_model(self, spec: str) -> ScriptedChatModel:
        model = ScriptedChatModel(default="two words", default_structured=_judgement,
                                  model_id="policy")
        self.gate_models.append(model)
        return model

    def train(self, data: Path, out: Path, **kwargs: Any) -> TrainResult:
        return fake_trained(data, out, **kwargs)

    def backend(self) -> ImproveBackend:
        return ImproveBackend(chat=self.chat, train=self.train, gate_model=self.gate_model)


def _run(tmp_path: Path, models: Models, **options: Any) -> Any:
    pool = [TaskSpec(task=f"pool task {i}: answer in exactly 2 words.",
                     constraints={"exact_words": 2}, id=f"p{i}") for i in range(2)]
    golden = [TaskSpec(task=f"Greet reader {i} warmly.", rubric=Rubric(GOLDEN_FEATURES),
                       id=f"g{i}") for i in range(3)]
    return improve(pool, golden=golden, registry=tmp_path / "reg", work_dir=tmp_path / "work",
                   backend=models.backend(), rounds=1, samples=1, temperatures=(0.7,),
                   hint_retry=False, max_concurrency=1, thresholds=(5.0,),
                   export_options={"pii": "off", "embedder": HashingEmbedder()},
                   eval_options={"min_tasks": 3, "kl": False, "diversity_check": False},
                   **options)


def _judged_golden(model: ScriptedChatModel) -> set[str]:
    """The golden tasks ``model`` was asked to judge (structured calls naming the task)."""
    asked = {str(m.content) for c in model.calls if c.kind != "text" for m in c.messages}
    return {f"g{i}" for i in range(3) if any(f"Greet reader {i} warmly." in a for a in asked)}


def test_the_judge_judges_the_gate_for_both_models(tmp_path: Path) -> None:
    models = Models()
    result = _run(tmp_path, models, judge="judge")
    assert result.reports[0].decision is not None
    assert _judged_golden(models.judge) == {"g0", "g1", "g2"}
    assert all(not _judged_golden(m) for m in models.gate_models)  # neither grades itself
    # without a judge the baseline judges, as before
    plain = Models()
    _run(tmp_path / "plain", plain)
    assert not plain.judge.calls
    assert _judged_golden(plain.gate_models[0]) == {"g0", "g1", "g2"}
