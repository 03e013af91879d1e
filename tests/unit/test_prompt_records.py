"""Train on what inference sends (issue #14, item 2).

Every round records the prompt its draft was written from, exactly as sent;
SFT rows and DPO prompts are the chat of a fresh draft (system message, task,
requirements), exemplars kept only on request; runs logged before prompts
were recorded still export; the model card names the prompt format.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from typer.testing import CliRunner

from agentic_loop.architectures import ArchiveRefine, Reflection, Reflexion
from agentic_loop.architectures.prompts import generate_messages
from agentic_loop.cli import app
from agentic_loop.distill.data import export_datasets
from agentic_loop.distill.train.model_card import DataRef, ModelCard, read_card, write_card
from agentic_loop.distill.train.training_data import load_training_data
from agentic_loop.judges import Rubric
from agentic_loop.memory import Archive, HashingEmbedder, ReflexionMemory
from agentic_loop.prompt_format import PROMPT_VERSION, DraftPrompt
from agentic_loop.testing import ScriptedCall, ScriptedChatModel
from agentic_loop.trajectories import Round, Trajectory, TrajectoryLog

THREE_WORDS = Rubric.for_constraints(exact_words=3)
TASK = "Write a tagline for a bakery."
NOTE = {"root_cause": "wrong length", "correction": "three words",
        "lesson": "Count the words before answering."}


def sent(call: ScriptedCall) -> list[dict[str, str]]:
    """The messages of one model call as role/content dicts."""
    turns = DraftPrompt.of_messages(call.messages).turns
    assert turns is not None
    return turns


def text_calls(llm: ScriptedChatModel) -> list[ScriptedCall]:
    return [c for c in llm.calls if c.kind == "text"]


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def export(logs: Path, out: Path, **kwargs: Any) -> Any:
    kwargs.setdefault("pii", "off")
    return export_datasets([logs], out, embedder=HashingEmbedder(), latency_z=None, **kwargs)


@pytest.mark.parametrize("refine", ["feedback", "resample"])
def test_every_round_records_the_exact_messages_its_draft_was_written_from(refine):
    llm = ScriptedChatModel(responses=["far too many words here", "Fresh bread daily"])
    result = Reflection(llm, rubric=THREE_WORDS, refine=refine).run(TASK)
    calls = text_calls(llm)
    assert len(calls) == result.iterations == 2
    for call, round_ in zip(calls, result.trace, strict=True):
        assert round_.prompt is not None and round_.prompt.messages() == sent(call)
    first, second = (r.prompt for r in result.trace)
    assert first is not None and second is not None
    assert (first.template, first.version) == ("generate", PROMPT_VERSION)
    assert second.template == ("refine" if refine == "feedback" else "generate")
    assert first.parts["requirements"] == "Requirements:\n- Use exactly 3 words."


def test_exemplars_and_lessons_are_recorded_with_their_ids(tmp_path):
    archive = Archive(tmp_path / "archive", embedder=HashingEmbedder())
    llm = ScriptedChatModel(default="Fresh bread daily")
    arch = ArchiveRefine(llm, rubric=THREE_WORDS, archive=archive, min_similarity=0.0)
    arch.run(TASK)
    calls_before = len(text_calls(llm))
    second = arch.run("Write a tagline for a bakery shop.")
    prompt = second.trace[0].prompt
    assert prompt is not None and prompt.exemplar_ids == second.exemplar_ids != []
    # shown as a few-shot exchange: the exemplar's task, then its accepted output
    assert prompt.parts["shot1.assistant"] == "Fresh bread daily"
    assert prompt.messages() == sent(text_calls(llm)[calls_before])

    memory = ReflexionMemory(tmp_path / "lessons", embedder=HashingEmbedder())
    llm = ScriptedChatModel(responses=["two words", "Fresh bread daily"],
                            structured={"ReflectionNote": [NOTE]})
    result = Reflexion(llm, rubric=THREE_WORDS, memory=memory).run(TASK)
    retry = result.trace[1].prompt
    assert retry is not None and retry.reflection_ids == [memory.entries()[0].id]
    assert "- Count the words before answering." in retry.parts["lessons"]
    assert [r.prompt.messages() for r in result.trace if r.prompt] == [
        sent(c) for c in text_calls(llm)]


def test_a_node_that_builds_its_own_messages_is_recorded_as_custom():
    class Terse(Reflection):
        def _first_messages(self, state: Any, config: Any) -> list[BaseMessage]:  # type: ignore[override]
            from langchain_core.messages import HumanMessage
            return [HumanMessage(f"Three words: {state['task']}")]

    llm = ScriptedChatModel(default="Fresh bread daily")
    prompt = Terse(llm, rubric=THREE_WORDS).run(TASK).trace[0].prompt
    assert prompt is not None and prompt.template == "custom"
    assert prompt.messages() == sent(text_calls(llm)[0])


def test_training_rows_are_the_chat_of_a_fresh_draft(tmp_path):
    archive = Archive(tmp_path / "archive", embedder=HashingEmbedder())
    log = TrajectoryLog(tmp_path / "runs")
    llm = ScriptedChatModel(responses=["one two", "Fresh bread daily", "Warm loaves waiting"])
    arch = ArchiveRefine(llm, rubric=THREE_WORDS, archive=archive, min_similarity=0.0,
                         trajectories=log)
    arch.run(TASK)
    with_memory = arch.run(TASK)  # its prompt holds the first run's answer as an exemplar
    assert with_memory.exemplar_ids

    fresh_llm = ScriptedChatModel(default="Fresh bread daily")
    Reflection(fresh_llm, rubric=THREE_WORDS).run(TASK)
    fresh_chat = sent(text_calls(fresh_llm)[0])  # what a fresh draft is asked, no memory

    report = export(tmp_path / "runs", tmp_path / "out")
    sft, pairs = rows(tmp_path / "out" / "sft.jsonl"), rows(tmp_path / "out" / "pairs.jsonl")
    assert sft and pairs
    assert all(r["messages"][:-1] == fresh_chat for r in sft)
    assert all(r["prompt"] == fresh_chat for r in pairs)
    assert report.manifest["prompt_format"]["include_exemplars"] is False
    assert report.manifest["prompt_format"]["version"] == PROMPT_VERSION

    export(tmp_path / "runs", tmp_path / "kept", include_exemplars=True)
    kept = rows(tmp_path / "kept" / "sft.jsonl")
    by_run = {r["metadata"]["trajectory_id"]: r["messages"][:-1] for r in kept}
    assert by_run[with_memory.trajectory_id] == sent(text_calls(llm)[-1])  # as it was sent
    assert by_run[with_memory.trajectory_id][2] == {"role": "assistant",
                                                    "content": "Fresh bread daily"}


def test_trajectories_logged_before_prompts_were_recorded_still_export(tmp_path):
    rubric = Rubric.for_constraints(exact_words=3)
    old = Trajectory(architecture="reflection", model_id="m", task=TASK, schema_version=1,
                     rubric=rubric.to_dict(),
                     rounds=[Round(iteration=0, draft="Bread", score=2.0, passed=False),
                             Round(iteration=1, draft="Fresh bread daily", score=10.0,
                                   passed=True)],
                     final_output="Fresh bread daily", final_score=10.0, accepted=True,
                     latency_s=1.0)
    TrajectoryLog(tmp_path / "runs").append(old)
    report = export(tmp_path / "runs", tmp_path / "out")
    [row] = rows(tmp_path / "out" / "sft.jsonl")
    expected = [{"role": m.type.replace("human", "user"), "content": m.content}
                for m in generate_messages(TASK, "- Use exactly 3 words.")]
    assert row["messages"][:-1] == expected
    [pair] = rows(tmp_path / "out" / "pairs.jsonl")
    assert pair["prompt"] == expected
    assert report.manifest["prompt_format"]["rebuilt_runs"] == 1


def test_prompt_texts_pass_the_pii_gate(tmp_path):
    archive = Archive(tmp_path / "archive", embedder=HashingEmbedder())
    archive.add(TASK, "Mail ana@example.com now", score=10.0,
                metadata={"constraint_kinds": ["exact_words"]})  # the checks it passed
    arch = ArchiveRefine(ScriptedChatModel(default="Fresh bread daily"), rubric=THREE_WORDS,
                         archive=archive, min_similarity=0.0,
                         trajectories=TrajectoryLog(tmp_path / "runs"))
    sent_prompt = arch.run(TASK).trace[0].prompt
    assert sent_prompt is not None and "ana@example.com" in sent_prompt.parts["shot1.assistant"]
    export(tmp_path / "runs", tmp_path / "out", pii="regex", include_exemplars=True)
    [row] = rows(tmp_path / "out" / "sft.jsonl")
    assert "ana@example.com" not in json.dumps(row)
    assert row["messages"][2] == {"role": "assistant", "content": "Mail <EMAIL_ADDRESS> now"}


def test_the_model_card_records_the_prompt_format(tmp_path):
    log = TrajectoryLog(tmp_path / "runs")
    Reflection(ScriptedChatModel(default="Fresh bread daily"), rubric=THREE_WORDS,
               trajectories=log).run(TASK)
    export(tmp_path / "runs", tmp_path / "data")
    data = load_training_data(tmp_path / "data", need_sft=True, need_pairs=False)
    assert data.prompt_format is not None
    assert data.prompt_format["chat"] == ["system", "user", "assistant"]
    card = ModelCard(name="m1", base_model="local", method="sft",
                     data=DataRef(dir=str(data.data_dir), manifest_sha256=data.manifest_sha256,
                                  **data.counts()),
                     prompt_format=data.prompt_format)
    (tmp_path / "model").mkdir()
    write_card(tmp_path / "model", card)
    assert read_card(tmp_path / "model").prompt_format == data.prompt_format


def test_the_cli_export_keeps_exemplars_on_request(tmp_path):
    log = TrajectoryLog(tmp_path / "runs")
    Reflection(ScriptedChatModel(default="Fresh bread daily"), rubric=THREE_WORDS,
               trajectories=log).run(TASK)
    result = CliRunner().invoke(app, ["export", "-t", str(tmp_path / "runs"), "-o",
                                      str(tmp_path / "out"), "--pii", "off",
                                      "--dedup-threshold", "0", "--with-exemplars"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["options"]["include_exemplars"] is True
