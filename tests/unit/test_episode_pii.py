"""A secret or an e-mail a tool returned (or a tool was called with) never reaches a dataset.

Agents leave tool calls and results in three places: an archive entry's episode, shown to a
later run as a few-shot episode (``DraftPrompt.shot_steps``, kept by ``include_exemplars``),
and a trajectory round's episode (and each best-of-n sample's). The PII gate sees every text
of them (:func:`~agentic_loop.distill.data.redact.run_texts`) and puts the redacted texts
back; a run with no episode is gated exactly as before.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from distill_helpers import write_log

from agentic_loop.distill import PiiGate, export_datasets
from agentic_loop.distill.data.redact import redact_runs, run_texts
from agentic_loop.distill.data.samples import (
    episode_texts,
    run_episode_texts,
    trajectory_samples,
    with_episode_texts,
)
from agentic_loop.episodes import Episode, ModelStep, ToolCall, ToolStep
from agentic_loop.memory import HashingEmbedder
from agentic_loop.prompt_format import fresh_draft_prompt
from agentic_loop.trajectories import Candidate, Round, Trajectory

EMAIL = "zephyrine.quist@example.org"
KEY = "sk-2Hkd9Gf2leMeR3pzh84KpLMcNfAQLKHu7qnQTupqziQPtDu7"
GITHUB = "ghp_G6g3Ot1OGMmjxWkI9X7H6aMuFbh7x41Ztpdp"
PLANTED = (EMAIL, KEY, GITHUB)


@pytest.fixture(scope="module")
def gate() -> PiiGate:
    return PiiGate("regex")


def crm_episode(answer: str = "The parcel ships Monday.", *, refused: bool = True) -> Episode:
    """An agent looked a customer up by e-mail; the tool returned the e-mail and two keys (the
    deploy tool refused the token in an error, unless ``refused`` is False)."""
    return Episode(steps=[
        ModelStep(text="Looking the customer up.", tool_calls=[
            ToolCall(name="crm_lookup", args={"email": EMAIL, "fields": ["parcel", EMAIL]},
                     id="c1")]),
        ToolStep(call_id="c1", name="crm_lookup",
                 args={"email": EMAIL, "fields": ["parcel", EMAIL]},
                 content=f"customer {EMAIL}; parcel ships Monday; api_key={KEY}"),
        ModelStep(tool_calls=[ToolCall(name="deploy", args={"token": GITHUB}, id="c2")]),
        ToolStep(call_id="c2", name="deploy", args={"token": GITHUB},
                 **({"error": f"refused token {GITHUB} for {EMAIL}"} if refused
                    else {"content": f"deployed with {GITHUB} for {EMAIL}"})),
        ModelStep(text=answer)], final=answer, system=f"Tools: crm_lookup. Admin {EMAIL}",
        tools=[{"type": "function", "function": {"name": name, "parameters": {}}}
               for name in ("crm_lookup", "deploy")])


def strings(obj: object) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in (k, *strings(v))]
    if isinstance(obj, list):
        return [s for v in obj for s in strings(v)]
    return []


def leaked(text: str) -> list[str]:
    return [v for v in PLANTED if v in text or json.dumps(v)[1:-1] in text]


def exemplar_run(style: str) -> Trajectory:
    """A later run shown the archived agent answer as a few-shot episode (``style``)."""
    prompt = fresh_draft_prompt("When does my parcel ship?", "- Use at most 8 words.", exemplars=[
        {"id": "e1", "task": "Where is the parcel?", "output": "The parcel ships Monday.",
         "episode": crm_episode()}], exemplars_as=style)  # type: ignore[arg-type]
    return Trajectory(architecture="archive_refine", model_id="m", task="When does my parcel ship?",
                      rounds=[Round(iteration=0, draft="It ships on Monday.", score=9.0,
                                    passed=True, prompt=prompt)],
                      final_output="It ships on Monday.", final_score=9.0, accepted=True,
                      latency_s=1.0, exemplar_ids=["e1"])


def episode_run() -> Trajectory:
    """A run whose rounds (and a best-of-n loser) were written by the CRM agent."""
    return Trajectory(
        architecture="reflection", model_id="m", task="Write the shipping note.",
        rounds=[Round(iteration=0, draft="Ships Monday.", score=5.0, episode=crm_episode(
                    "Ships Monday."), alternatives=[Candidate(
                        draft="Monday.", score=3.0, episode=crm_episode("Monday."))]),
                Round(iteration=1, draft="The parcel ships Monday.", score=9.0, passed=True,
                      episode=crm_episode(refused=False))],
        final_output="The parcel ships Monday.", final_score=9.0, accepted=True, latency_s=1.0)


@pytest.mark.parametrize("style", ["turns", "text"])
def test_a_few_shot_episode_reaches_a_dataset_chat_only_redacted(gate: PiiGate,
                                                                 style: str) -> None:
    run = exemplar_run(style)
    raw = "\n".join(c for s in trajectory_samples(run, include_exemplars=True) for _, c in s.chat)
    assert EMAIL in raw and KEY in raw  # the tool's result is in the chat a dataset keeps
    result = redact_runs([run], gate)
    assert result.dropped == []
    [sample] = trajectory_samples(result.kept[0], include_exemplars=True)
    shown = "\n".join(c for _, c in sample.chat)
    assert leaked(shown) == []
    assert "parcel ships Monday" in shown and "<EMAIL_ADDRESS>" in shown
    if style == "turns":
        assert [role for role, _ in sample.chat].count("tool") == 2


def test_an_export_with_exemplars_writes_no_planted_value(tmp_path: Path, gate: PiiGate) -> None:
    run = exemplar_run("text")
    report = export_datasets([write_log(tmp_path / "logs", [run])], tmp_path / "out", pii=gate,
                             include_exemplars=True, embedder=HashingEmbedder(),
                             dedup_threshold=None)
    assert report.sft_rows == 1 and report.pii_dropped == []
    for file in (tmp_path / "out").iterdir():
        assert leaked(file.read_text()) == [], file.name
    row = json.loads((tmp_path / "out" / "sft.jsonl").read_text().splitlines()[0])
    shown = "\n".join(m["content"] for m in row["messages"])
    assert "I called crm_lookup(" in shown and "<EMAIL_ADDRESS>" in shown


def test_the_gate_sees_every_text_of_a_few_shot_episode(gate: PiiGate) -> None:
    run = exemplar_run("turns")
    fields = dict(run_texts(run))
    assert fields["rounds[0].prompt.shot1[0].tool_calls[0].email"] == EMAIL
    assert KEY in fields["rounds[0].prompt.shot1[1].content"]
    [out] = redact_runs([run], gate).kept
    prompt = out.rounds[0].prompt
    assert prompt is not None and leaked(prompt.model_dump_json()) == []
    assert [name for name, _ in prompt.step_texts()] == [
        name for name, _ in run.rounds[0].prompt.step_texts()]  # type: ignore[union-attr]


def test_a_rounds_episode_is_redacted_wherever_the_run_goes(tmp_path: Path,
                                                            gate: PiiGate) -> None:
    run = episode_run()
    fields = [name for name, _ in run_episode_texts(run) if ".tools[" not in name]
    assert len(fields) == 3 * len(episode_texts(crm_episode()))  # and the tools' schemas
    result = redact_runs([run], gate)
    assert result.dropped == []
    [out] = result.kept
    assert leaked(out.model_dump_json()) == []
    episode = out.rounds[1].episode
    assert episode is not None and episode.system is None
    assert episode.tools_called == ["crm_lookup", "deploy"] and episode.final == run.final_output
    assert episode.steps[1].args["email"] == "<EMAIL_ADDRESS>"  # type: ignore[union-attr]
    assert out.rounds[0].alternatives[0].episode is not None
    report = export_datasets([write_log(tmp_path / "logs", [run])], tmp_path / "out", pii=gate,
                             embedder=HashingEmbedder(), dedup_threshold=None)
    # the accepted round's episode is an SFT row; the refused deploy is the pair's rejected side
    assert (report.sft_rows, report.pairs) == (1, 1)
    for file in (tmp_path / "out").iterdir():
        assert leaked(file.read_text()) == [], file.name


def test_with_the_gate_off_credentials_still_leave_episodes_and_a_long_result_drops_the_run(
        ) -> None:
    [out] = redact_runs([episode_run()], PiiGate("off")).kept
    dumped = out.model_dump_json()
    assert KEY not in dumped and GITHUB not in dumped and "<SECRET>" in dumped
    result = redact_runs([episode_run()], PiiGate("off", max_chars=100))
    assert result.kept == []
    assert result.dropped[0].split(": ")[1] == "rounds[0].episode.steps[1].content"
    assert KEY not in result.dropped[0] and EMAIL not in result.dropped[0]


def test_runs_without_episodes_are_gated_as_before(gate: PiiGate) -> None:
    plain = exemplar_run("turns")
    plain = fresh = plain.model_copy(update={"rounds": [plain.rounds[0].model_copy(update={
        "prompt": fresh_draft_prompt("When does my parcel ship?", exemplars=[
            {"id": "e1", "task": "Where is it?", "output": "Monday."}], exemplars_as="turns")})]})
    assert run_episode_texts(plain) == []
    assert [n for n, _ in run_texts(plain)] == [
        "task", "rounds[0].draft", *(f"rounds[0].prompt.{p}" for p in fresh.rounds[0].prompt.parts),  # type: ignore[union-attr]
        "final_output"]
    [out] = redact_runs([plain], gate).kept
    assert out.rounds[0].episode is None
    assert "shot_steps" not in out.rounds[0].prompt.model_dump()  # type: ignore[union-attr]


def test_episode_texts_round_trip() -> None:
    episode = crm_episode()
    texts = episode_texts(episode)
    assert ("episode.steps[0].tool_calls[0].crm_lookup.fields[1]", EMAIL) in texts
    assert with_episode_texts(episode, [t for _, t in texts]) == episode
    blank = with_episode_texts(episode, ["x"] * len(texts))
    assert leaked(blank.model_dump_json(exclude={"system"})) == []
    assert blank.steps[3].error == "x" and blank.tools_called == episode.tools_called


def test_an_export_with_few_shot_episode_turns(tmp_path: Path, gate: PiiGate) -> None:
    run = exemplar_run("turns")
    report = export_datasets([write_log(tmp_path / "logs", [run])], tmp_path / "out", pii=gate,
                             include_exemplars=True, embedder=HashingEmbedder(),
                             dedup_threshold=None)
    assert report.sft_rows == 1
    for file in (tmp_path / "out").iterdir():
        assert leaked(file.read_text()) == [], file.name


def test_an_agent_round_with_no_recorded_verdict_is_rechecked_with_its_episode() -> None:
    """The export re-checks a round that recorded no verdict by the run's saved rubric; a check
    over the episode (the calculator really ran) must see the round's episode, as the critic did."""
    from agentic_loop.episodes import Episode, ModelStep, ToolCall, ToolStep
    from agentic_loop.judges import Rubric
    from agentic_loop.trajectories import Round, Trajectory

    rubric = Rubric.for_constraints(tool_called="calculator", include_words=["2491"])
    ran = Episode(steps=[ModelStep(tool_calls=[ToolCall(name="calculator", id="c1",
                                                        args={"expression": "53*47"})]),
                         ToolStep(call_id="c1", name="calculator", content="2491"),
                         ModelStep(text="It is 2491.")], final="It is 2491.")
    skipped = Episode(steps=[ModelStep(text="It is 2491.")], final="It is 2491.")

    def verdict(episode: Episode) -> bool | None:
        run = Trajectory(architecture="reflection", model_id="m", task="Use the calculator: 53*47?",
                         rubric=rubric.to_dict(), rounds=[Round(iteration=0, draft="It is 2491.",
                                                               score=10.0, episode=episode)])
        [sample] = trajectory_samples(run)
        return sample.passed

    assert verdict(ran) is True
    assert verdict(skipped) is False
