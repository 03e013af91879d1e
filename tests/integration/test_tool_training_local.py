"""Training on tool-calling episodes in the shared export format, on the real embedded model (CPU).

Three things are checked on a fresh ``export_datasets`` of logged agent runs, each with one
optimizer step:

* the raw exported files train as a TRL user would load them (``load_dataset("json")``
  straight into ``SFTTrainer`` and ``DPOTrainer``);
* the package's own ``train`` (SFT, DPO) renders them in the engine's format
  and says so on the model card;
* that format is the engine's own: the prompt of every assistant turn is
  token for token what ``LocalChatModel`` builds for the same conversation,
  and a call is the text its grammar decodes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from agentic_loop.distill import PiiGate, export_datasets
from agentic_loop.distill.train import train
from agentic_loop.distill.train.model_card import read_card
from agentic_loop.distill.train.tool_format import engine_sft_rows
from agentic_loop.distill.train.training_data import TrainingDataError, read_sft_rows
from agentic_loop.episodes import Episode, ModelStep, ToolCall, ToolStep
from agentic_loop.models import load_chat_model
from agentic_loop.models.embedded import ensure_converted
from agentic_loop.models.tools import ToolPlan
from agentic_loop.trajectories import Round, Trajectory, TrajectoryLog

pytestmark = pytest.mark.slow

CALC = {"type": "function", "function": {
    "name": "calculator", "description": "Evaluate an arithmetic expression.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                   "required": ["expression"]}}}


def _run(a: int, b: int) -> Trajectory:
    """A logged agent run: a guess without the tool fails, then the calculator's answer passes."""
    answer, guess = f"{a} * {b} = {a * b}.", f"It is about {a * b + 9}."
    call = ToolCall(name="calculator", args={"expression": f"{a}*{b}"}, id="call_1")
    used = Episode(steps=[ModelStep(tool_calls=[call]),
                          ToolStep(call_id="call_1", name="calculator", args=call.args,
                                   content=str(a * b)),
                          ModelStep(text=answer)], final=answer, tools=[CALC])
    return Trajectory(
        architecture="reflection", model_id="agent", task=f"What is {a} * {b}?", latency_s=1.0,
        rounds=[Round(iteration=0, draft=guess, score=2.0, passed=False,
                      episode=Episode(steps=[ModelStep(text=guess)], final=guess, tools=[CALC])),
                Round(iteration=1, draft=answer, score=10.0, passed=True, episode=used)],
        final_output=answer, final_score=10.0, accepted=True)


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh export of logged agent runs: two tool episodes (SFT rows, refine pairs against the
    guesses) and one plain run, through the real ``export_datasets`` and its PII gate."""
    d = tmp_path_factory.mktemp("export")
    plain = Trajectory(architecture="reflection", model_id="plain", task="Say hi.", latency_s=1.0,
                       rounds=[Round(iteration=0, draft="Hi!", score=9.0, passed=True)],
                       final_output="Hi!", final_score=9.0, accepted=True)
    log = TrajectoryLog(d / "logs")
    for run in (_run(53, 47), _run(12, 11), plain):
        log.append(run)
    report = export_datasets([d / "logs"], d / "out", pii=PiiGate("regex"), dedup_threshold=None)
    assert (report.sft_rows, report.pairs) == (3, 2)
    return d / "out"


def _trl_args(config_class: Any, out: Path) -> Any:
    return config_class(output_dir=str(out), max_steps=1, per_device_train_batch_size=1,
                        max_length=192, use_cpu=True, report_to="none", logging_steps=1,
                        save_strategy="no", disable_tqdm=True)


def test_raw_trl_trains_a_step_on_the_exported_files(export: Path, tmp_path: Path) -> None:
    from datasets import load_dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer

    model_dir = str(ensure_converted())
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    sft = load_dataset("json", data_files=str(export / "sft.jsonl"), split="train")
    trainer = SFTTrainer(model=AutoModelForCausalLM.from_pretrained(model_dir),
                         args=_trl_args(SFTConfig, tmp_path / "sft"), train_dataset=sft,
                         processing_class=tokenizer)
    assert trainer.train().global_step == 1

    pairs = load_dataset("json", data_files=str(export / "pairs.jsonl"), split="train")
    dpo = DPOTrainer(model=AutoModelForCausalLM.from_pretrained(model_dir),
                     args=_trl_args(DPOConfig, tmp_path / "dpo"), train_dataset=pairs,
                     processing_class=tokenizer)
    assert dpo.train().global_step == 1


def test_the_package_trains_sft_and_dpo_in_the_engine_format(export: Path,
                                                            tmp_path: Path) -> None:
    fast = {"max_steps": 1, "batch_size": 1, "max_length": 192, "progress": False}
    sft = train(export, tmp_path / "sft", method="sft", lora=True, **fast)
    stage = read_card(sft.model_dir).stages[0]
    assert stage["steps"] == 1 and stage["train_loss"] > 0
    assert stage["metrics"]["tool_format"] == "engine"
    assert (stage["metrics"]["tool_rows"], stage["metrics"]["tool_turns"]) == (2, 4)

    with pytest.raises(TrainingDataError, match="raise --max-length"):  # before any weights load
        train(export, tmp_path / "short", method="sft", lora=True, **{**fast, "max_length": 32})

    dpo = train(export, tmp_path / "dpo", method="dpo", lora=True, **fast)
    metrics = read_card(dpo.model_dir).stages[0]["metrics"]
    assert metrics["tool_format"] == "engine" and metrics["tool_turns"] == 2


def test_training_prompts_are_the_engines_token_for_token(export: Path) -> None:
    model = load_chat_model("local", temperature=0.0, max_tokens=48)
    plan = ToolPlan.of([CALC])
    row = read_sft_rows(export / "sft.jsonl")[0]
    system, user = (m["content"] for m in row["messages"][:2])
    tokenizer = model.engine.tokenizer  # type: ignore[attr-defined]
    call_turn, answer_turn = engine_sft_rows(row, tokenizer.chat_template)
    ai = AIMessage("", tool_calls=[{"name": "calculator", "args": {"expression": "53*47"},
                                    "id": "call_1", "type": "tool_call"}])
    state = [SystemMessage(system), HumanMessage(user), ai,
             ToolMessage("2491", tool_call_id="call_1", name="calculator")]

    def trained_on(turn: dict[str, Any]) -> list[int]:
        text = tokenizer.apply_chat_template(turn["prompt"], tokenize=False,
                                             add_generation_prompt=True)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    assert trained_on(call_turn) == model.prompt_ids(state[:2], plan)  # type: ignore[attr-defined]
    assert trained_on(answer_turn) == model.prompt_ids(state, plan)  # type: ignore[attr-defined]

    # a forced call, decoded under the grammar: its raw text is what training writes for it
    forced = ToolPlan.of([CALC], "calculator")
    request, _ = model._request(state[:2], None, {"tools": [CALC],  # type: ignore[attr-defined]
                                                  "tool_choice": "calculator"})
    raw = model._submit(request).result().text  # type: ignore[attr-defined]
    decoded = forced.message(raw).tool_calls[0]
    assert raw == forced.call_json(decoded["name"], decoded["args"])
