"""Training on the real embedded model, on CPU: SFT, DPO, LoRA (merged and not), resume, the CLI,
evaluation with KL drift, and the whole loop from trajectories to a registered version.

Runs are a few steps on a small dataset built here, with short sequences, so the
module finishes in a few minutes on two shared cores.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from safetensors import safe_open
from transformers import TrainerCallback
from typer.testing import CliRunner

from agentic_loop.distill.eval.gate import Decision
from agentic_loop.distill.train import TrainError, TrainResult, train
from agentic_loop.distill.train.model_card import read_card
from agentic_loop.models import load_chat_model
from agentic_loop.models.embedded import ensure_converted

pytestmark = pytest.mark.slow

FAST = {"batch_size": 2, "max_length": 64, "progress": False}
TASKS = [
    ("Write a tagline for a bookstore in 5 words.", "Stories waiting on every shelf.", "buy books"),
    ("Name a color of the clear sky.", "Blue.", "I do not know what you mean by that."),
    ("Say hello in French.", "Bonjour!", "Hello."),
    ("Give one synonym of happy.", "Joyful.", "Sad."),
    ("What is 2 + 3? Answer with a number.", "5", "The answer is probably seven or so."),
    ("Name a fruit that is yellow.", "Banana.", "Car."),
]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small export-shaped dataset in TRL's conversational format."""
    d = tmp_path_factory.mktemp("data")
    with (d / "sft.jsonl").open("w") as fh:
        for task, good, _ in TASKS:
            fh.write(json.dumps({"messages": [{"role": "user", "content": task},
                                              {"role": "assistant", "content": good}],
                                 "metadata": {"reward": 0.9}}) + "\n")
    with (d / "pairs.jsonl").open("w") as fh:
        for task, good, bad in TASKS:
            fh.write(json.dumps({"prompt": [{"role": "user", "content": task}],
                                 "chosen": [{"role": "assistant", "content": good}],
                                 "rejected": [{"role": "assistant", "content": bad}]}) + "\n")
    (d / "manifest.json").write_text(json.dumps({"schema_version": 1,
                                                 "format": "trl-conversational"}))
    return d


@pytest.fixture(scope="module")
def sft_full(dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> TrainResult:
    return train(dataset, tmp_path_factory.mktemp("sft") / "model", method="sft", max_steps=2,
                 **FAST)


def _tensor(model_dir: Path, name: str = "model.layers.0.mlp.down_proj.weight"):
    with safe_open(str(model_dir / "model.safetensors"), framework="pt") as f:
        return f.get_tensor(name)


def _generates(spec: str) -> str:
    text = load_chat_model(spec, temperature=0.0, max_tokens=8).invoke(
        "Say hello in French.").content
    assert isinstance(text, str) and text.strip()
    return text


def test_sft_writes_a_servable_model_and_its_card(sft_full: TrainResult, dataset: Path) -> None:
    out = sft_full.model_dir
    for name in ("config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja",
                 "generation_config.json", "model_card.yaml"):
        assert (out / name).is_file(), name
    assert not (out / "checkpoints").exists() and not (out / "run.json").exists()
    assert not (_tensor(out) == _tensor(ensure_converted())).all()  # the weights moved
    card = read_card(out)
    assert (card.method, card.adapter, card.precision, card.base_model) == (
        "sft", False, "fp32", "local")
    assert card.data.manifest_sha256 == hashlib.sha256(
        (dataset / "manifest.json").read_bytes()).hexdigest()
    assert (card.data.sft_rows, card.data.pairs) == (6, 0)
    assert card.stages[0]["steps"] == 2 and card.stages[0]["tokens"] > 0
    assert (card.hyperparameters["max_steps"] == 2
            and card.hyperparameters["learning_rates"] == {"sft": 2e-5})
    assert card.started_at and card.finished_at and card.versions["trl"]
    _generates(sft_full.spec)


def test_a_finished_run_is_reused_and_a_different_one_refused(sft_full: TrainResult,
                                                              dataset: Path) -> None:
    again = train(dataset, sft_full.model_dir, method="sft", max_steps=2, **FAST)
    assert again.skipped and again.card.config_fingerprint == sft_full.card.config_fingerprint
    with pytest.raises(TrainError, match="already holds a model trained with other settings"):
        train(dataset, sft_full.model_dir, method="sft", max_steps=3, **FAST)


def test_validation_split_and_tensorboard_in_a_real_run(dataset: Path, tmp_path: Path) -> None:
    """--validation-split scores a held-out share; --report-to tensorboard leaves event files."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    result = train(dataset, tmp_path / "tb", method="sft", lora=True, max_steps=2,
                   validation_split=0.34, report_to="tensorboard", save_steps=1, **FAST)
    metrics = result.stages[0].metrics
    assert metrics["eval_loss"] > 0  # the held-out share (2 of 6 rows) was scored
    logs = sorted((result.model_dir / "logs").rglob("events.out.tfevents.*"))
    assert logs, f"no TensorBoard event file under {result.model_dir / 'logs'}"
    events = EventAccumulator(str(logs[0].parent))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "eval/loss"} <= tags, tags


def test_dpo_with_lora_merged(dataset: Path, tmp_path: Path) -> None:
    result = train(dataset, tmp_path / "dpo", method="dpo", lora=True, max_steps=2, **FAST)
    assert not (result.model_dir / "adapter_config.json").exists()
    card = read_card(result.model_dir)
    assert card.lora == {"r": 16, "alpha": 32, "dropout": 0.05, "target_modules": "all-linear",
                         "merged": True}
    assert card.hyperparameters["beta"] == 0.1
    assert "rewards/accuracies" in card.stages[0]["metrics"]
    assert not (_tensor(result.model_dir) == _tensor(ensure_converted())).all()
    _generates(result.spec)


class _Interrupt(Exception):
    pass


class _StopAfterFirstSave(TrainerCallback):
    def on_save(self, args, state, control, **kwargs):
        raise _Interrupt(f"simulated crash after saving step {state.global_step}")


def test_an_interrupted_run_resumes_from_its_checkpoint(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "resumed"
    kw = dict(method="sft", lora=True, max_steps=2, save_steps=1, **FAST)
    with pytest.raises(_Interrupt):
        train(dataset, out, callbacks=[_StopAfterFirstSave()], **kw)
    assert (out / "checkpoints" / "sft" / "checkpoint-1").is_dir()
    assert not (out / "model_card.yaml").exists()
    result = train(dataset, out, **kw)
    assert result.stages[0].resumed_from == "checkpoint-1"
    assert result.stages[0].steps == 2
    assert not (out / "checkpoints").exists()
    _generates(result.spec)


def test_unmerged_lora_keeps_an_adapter(dataset: Path, tmp_path: Path) -> None:
    result = train(dataset, tmp_path / "adapter", method="sft", lora=True, merge_lora=False,
                   max_steps=1, **FAST)
    assert result.adapter and (result.model_dir / "adapter_config.json").is_file()
    assert (result.model_dir / "chat_template.jinja").is_file()
    config = json.loads((result.model_dir / "adapter_config.json").read_text())
    assert Path(config["base_model_name_or_path"]) == ensure_converted()
    _generates(result.spec)  # in-process too: merged onto its base at load


def test_evaluate_models_on_real_models(sft_full: TrainResult, tmp_path: Path) -> None:
    from agentic_loop.distill.eval.evaluate import evaluate_models

    golden = tmp_path / "golden.jsonl"
    golden.write_text("\n".join(json.dumps(r) for r in [
        {"task": "Say hello in French in one word.", "constraints": {"word_count": [1, 3]}},
        {"task": "Name a yellow fruit in lowercase.", "constraints": {"lowercase": True}},
        {"task": "What is 2 + 3?", "constraints": {"answer": 5}},
    ]) + "\n")
    report = evaluate_models("local", sft_full.spec, golden, max_tokens=16,
                             plot_path=tmp_path / "eval.png", progress=False)
    assert report.decision in set(Decision)
    assert len(report.tasks) == 3 and all(0 <= t.candidate <= 10 for t in report.tasks)
    assert report.kl is not None  # KL(candidate || base) over the templated golden prompts
    assert report.kl.mean_kl > 1e-5 and report.kl.max_prompt_kl >= report.kl.mean_kl
    assert report.kl.prompts == 3 and report.kl.tokens > 30
    assert set(report.diversity) == {"baseline", "candidate"}
    assert (tmp_path / "eval.png").stat().st_size > 1000


def test_cli_trains_sft_then_dpo(dataset: Path, tmp_path: Path) -> None:
    from agentic_loop.cli import app
    from agentic_loop.cli import distill as _  # noqa: F401  (registers the command)

    out = tmp_path / "cli"
    result = CliRunner().invoke(app, ["distill", "--data", str(dataset), "--method", "sft+dpo",
                                      "--lora", "--max-steps", "1", "--batch-size", "2",
                                      "--max-length", "64", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "sft" in result.output and "dpo" in result.output
    card = read_card(out)
    assert [s["method"] for s in card.stages] == ["sft", "dpo"]
    assert card.hyperparameters["learning_rates"] == {"sft": 2e-4, "dpo": 5e-5}
    assert not (out / "stages").exists()
    _generates(f"local:{out}")


def test_the_whole_loop_from_trajectories(tmp_path: Path) -> None:
    from agentic_loop.distill.loop.pipeline import distill_loop
    from agentic_loop.distill.release.registry import Registry
    from agentic_loop.memory import HashingEmbedder
    from agentic_loop.trajectories import Round, Trajectory, TrajectoryLog

    log = TrajectoryLog(tmp_path / "trajectories")
    for task, good, bad in TASKS:
        log.append(Trajectory(architecture="reflection", model_id="SmolLM2", task=task,
                              rounds=[Round(iteration=0, draft=bad, score=3.0),
                                      Round(iteration=1, draft=good, score=9.5, passed=True)],
                              final_output=good, final_score=9.5, accepted=True))
    golden = tmp_path / "golden.jsonl"
    golden.write_text("\n".join(json.dumps({"task": t, "constraints": {"word_count": [1, 6]}})
                                for t, _, _ in TASKS[:3]) + "\n")
    result = distill_loop(
        [tmp_path / "trajectories"], tmp_path / "work", golden=golden, registry=tmp_path / "reg",
        method="sft",
        export_options={"pii": "off", "embedder": HashingEmbedder()},
        train_options={"lora": True, "max_steps": 1, **FAST},
        eval_options={"max_tokens": 16, "progress": False, "embedder": HashingEmbedder()})
    report = result.reports[0]  # one improve round on the logged runs
    assert report.data is not None and report.train is not None and report.decision is not None
    assert report.registration is not None
    assert report.data.sft_rows == 6 and report.data.pairs >= 1
    assert report.model == "local" and result.versions == ["v1"]
    reg = Registry(tmp_path / "reg")
    card = read_card(report.train.model_dir)
    assert card.evals and card.evals[-1]["decision"] == report.decision.value
    assert reg.versions()[0].card is not None and reg.versions()[0].card.method == "sft"
    round_dir = tmp_path / "work" / "round-001"
    assert (round_dir / "eval.png").is_file() and (round_dir / "eval.json").is_file()
    actions = [e.action for e in reg.history()]
    if report.registration.promoted:
        assert reg.current.version == "v1" and actions == ["register", "promote"]
    else:
        assert reg.current is None and actions == ["register"]
