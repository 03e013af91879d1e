"""What training checks before loading a model: dataset rows, settings, cards, model dirs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentic_loop.distill.train import TrainError, train
from agentic_loop.distill.train.model_card import ModelCardError, read_card
from agentic_loop.distill.train.settings import TrainSettings
from agentic_loop.distill.train.training_data import TrainingDataError, load_training_data
from agentic_loop.models.model_dirs import ModelDirError, resolve_model_dir

USER = {"role": "user", "content": "Name a fruit."}
GOOD = {"role": "assistant", "content": "Apple."}
BAD = {"role": "assistant", "content": "I cannot."}


def _write(path: Path, rows: list) -> None:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))


def _dataset(tmp_path: Path, *, sft: list | None = None, pairs: list | None = None,
             manifest: bool = True) -> Path:
    d = tmp_path / "data"
    d.mkdir(exist_ok=True)
    if sft is not None:
        _write(d / "sft.jsonl", sft)
    if pairs is not None:
        _write(d / "pairs.jsonl", pairs)
    if manifest:
        (d / "manifest.json").write_text(json.dumps({"schema_version": 1}))
    return d


def test_rows_become_trl_prompt_completion_and_preference_rows(tmp_path: Path) -> None:
    system = {"role": "system", "content": "Be brief."}
    d = _dataset(tmp_path, sft=[{"messages": [system, USER, GOOD], "metadata": {"a": 1}}, ""],
                 pairs=[{"prompt": [USER], "chosen": [GOOD], "rejected": [BAD], "metadata": {}}])
    data = load_training_data(d, need_sft=True, need_pairs=True)
    assert data.sft == [{"prompt": [system, USER], "completion": [GOOD]}]
    assert data.pairs == [{"prompt": [USER], "chosen": [GOOD], "rejected": [BAD]}]
    assert data.counts() == {"sft_rows": 1, "pairs": 1}
    assert len(data.manifest_sha256) == 64 and data.manifest == {"schema_version": 1}


def test_the_data_hash_changes_with_the_data_when_there_is_no_manifest(tmp_path: Path) -> None:
    d = _dataset(tmp_path, sft=[{"messages": [USER, GOOD]}], manifest=False)
    first = load_training_data(d, need_sft=True, need_pairs=False).manifest_sha256
    _write(d / "sft.jsonl", [{"messages": [USER, BAD]}])
    assert load_training_data(d, need_sft=True, need_pairs=False).manifest_sha256 != first


@pytest.mark.parametrize(("row", "message"), [
    ("{not json", "not valid JSON"),
    ([1, 2], "expected a JSON object"),
    ({"prompt": [USER]}, 'needs "messages"'),
    ({"messages": []}, "non-empty list"),
    ({"messages": [USER, {"role": "robot", "content": "x"}]}, r"messages\[1\] has role 'robot'"),
    ({"messages": [USER, {"role": "assistant", "content": 3}]}, "content must be a string"),
    ({"messages": [USER]}, "last message must be the assistant's answer"),
    ({"messages": [USER, {"role": "assistant", "content": "  "}]}, "answer in 'messages' is empty"),
    ({"messages": [GOOD]}, "needs a prompt before the answer"),
])
def test_bad_sft_rows_name_file_and_line(tmp_path: Path, row: object, message: str) -> None:
    d = _dataset(tmp_path, sft=[{"messages": [USER, GOOD]}, row])
    with pytest.raises(TrainingDataError, match=f"sft.jsonl:2: .*{message}"):
        load_training_data(d, need_sft=True, need_pairs=False)


@pytest.mark.parametrize(("row", "message"), [
    ({"prompt": [USER], "chosen": [GOOD]}, r"missing \['rejected'\]"),
    ({"prompt": [USER], "chosen": [GOOD], "rejected": [GOOD]}, "identical"),
    ({"prompt": [USER], "chosen": [USER], "rejected": [BAD]}, "last message must be the assistant"),
])
def test_bad_pairs_name_file_and_line(tmp_path: Path, row: dict, message: str) -> None:
    d = _dataset(tmp_path, pairs=[row])
    with pytest.raises(TrainingDataError, match=f"pairs.jsonl:1: .*{message}"):
        load_training_data(d, need_sft=False, need_pairs=True)


def test_a_method_without_its_file_is_refused(tmp_path: Path) -> None:
    d = _dataset(tmp_path, sft=[{"messages": [USER, GOOD]}])
    with pytest.raises(TrainingDataError,
                       match="pairs.jsonl is missing, and method 'dpo' trains on it"):
        load_training_data(d, need_sft=True, need_pairs=True)
    _write(d / "pairs.jsonl", [""])
    with pytest.raises(TrainingDataError, match="pairs.jsonl is empty"):
        load_training_data(d, need_sft=False, need_pairs=True)
    with pytest.raises(TrainingDataError, match="does not exist"):
        load_training_data(tmp_path / "missing", need_sft=True, need_pairs=False)


def test_a_corrupt_manifest_is_refused(tmp_path: Path) -> None:
    d = _dataset(tmp_path, sft=[{"messages": [USER, GOOD]}], manifest=False)
    (d / "manifest.json").write_text("{")
    with pytest.raises(TrainingDataError, match="manifest.json is not valid JSON"):
        load_training_data(d, need_sft=True, need_pairs=False)


@pytest.mark.parametrize(("kw", "message"), [
    ({"method": "ppo"}, "method"), ({"max_steps": 0}, "max_steps"), ({"epochs": -1}, "epochs"),
    ({"beta": 0}, "beta"), ({"learning_rate": 0}, "learning_rate"),
    ({"batch_size": 0}, "batch_size"),
    ({"max_length": 8}, "max_length"), ({"lora_dropout": 1.0}, "lora_dropout"),
    ({"method": "sft+dpo", "lora": True, "merge_lora": False}, "unmerged LoRA"),
])
def test_bad_settings_fail_before_anything_loads(kw: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TrainSettings(**kw)


def test_learning_rate_defaults_and_fingerprints() -> None:
    assert TrainSettings(method="sft").learning_rate_for("sft") == 2e-5
    assert TrainSettings(method="sft", lora=True).learning_rate_for("sft") == 2e-4
    both = TrainSettings(method="sft+dpo")
    assert both.hyperparameters()["learning_rates"] == {"sft": 2e-5, "dpo": 5e-6}
    assert "lora_r" not in both.hyperparameters()
    assert "beta" not in TrainSettings(method="sft").hyperparameters()
    base = TrainSettings().fingerprint("data", "base")
    assert TrainSettings().fingerprint("data", "base") == base
    assert TrainSettings(max_steps=3).fingerprint("data", "base") != base
    assert TrainSettings().fingerprint("other", "base") != base
    assert TrainSettings().fingerprint("data", "other") != base


def test_train_refuses_bad_paths_before_loading(tmp_path: Path) -> None:
    d = _dataset(tmp_path, sft=[{"messages": [USER, GOOD]}])
    (tmp_path / "file").write_text("x")
    with pytest.raises(TrainError, match="is a file"):
        train(d, tmp_path / "file")
    with pytest.raises(ModelDirError, match="served model"):
        train(d, tmp_path / "out", base="openai:http://127.0.0.1:1/v1")
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    with pytest.raises(TrainError, match="is a LoRA adapter"):
        train(d, tmp_path / "out", base=str(adapter))


def test_resolve_model_dir_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelDirError, match="does not exist"):
        resolve_model_dir(f"local:{tmp_path / 'missing'}")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelDirError, match="not a Hugging Face model directory"):
        resolve_model_dir(tmp_path / "empty")
    with pytest.raises(ModelDirError, match="neither a model directory nor a model spec"):
        resolve_model_dir("gpt-17")


def test_unreadable_model_cards(tmp_path: Path) -> None:
    with pytest.raises(ModelCardError, match="no model card"):
        read_card(tmp_path)
    (tmp_path / "model_card.yaml").write_text("name: [unclosed")
    with pytest.raises(ModelCardError, match="unreadable"):
        read_card(tmp_path)
    (tmp_path / "model_card.yaml").write_text("name: x\n")
    with pytest.raises(ModelCardError, match="unreadable"):
        read_card(tmp_path)


def test_checkpoints_of_another_run_are_not_resumed(tmp_path: Path) -> None:
    d = _dataset(tmp_path, sft=[{"messages": [USER, GOOD]}])
    base = tmp_path / "base"
    base.mkdir()
    (base / "config.json").write_text("{}")
    out = tmp_path / "out"
    (out / "checkpoints" / "sft" / "checkpoint-5").mkdir(parents=True)
    (out / "run.json").write_text(json.dumps({"fingerprint": "someone-else"}))
    with pytest.raises(TrainError, match="checkpoints of a run with other settings.*--no-resume"):
        train(d, out, base=str(base))
    assert (out / "checkpoints" / "sft" / "checkpoint-5").is_dir()  # nothing was discarded
