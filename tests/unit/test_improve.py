"""``improve``'s control flow with scripted models: schedules, hint retry, gate, stop rules, resume.

The models are scripted (a "weak" one that writes one word unless the prompt
carries a hint, a "good" one that always meets the checks, a "worse" one that
never does) and training is a fake that writes a model folder and its card
and remembers which model it should behave like. Everything else is real:
the batch runner, the export (PII gate off, hashing embedder), the
evaluation and gate, the registry, the round state on disk.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentic_loop.distill.loop.improve import ImproveBackend, ImproveSettings, improve
from agentic_loop.distill.loop.records import HintCounts
from agentic_loop.distill.release import Registry
from agentic_loop.distill.train import TrainResult, TrainSettings
from agentic_loop.distill.train.model_card import DataRef, ModelCard, read_card, write_card
from agentic_loop.errors import ConfigError
from agentic_loop.memory import HashingEmbedder
from agentic_loop.prompt_format import fresh_draft_prompt, rubric_requirements
from agentic_loop.tasks.spec import TaskSpec
from agentic_loop.testing import ScriptedChatModel
from agentic_loop.trajectories import Round, Trajectory, TrajectoryLog

GOOD, BAD = "two words", "one"


def _answer(kind: str):  # type: ignore[no-untyped-def]
    def reply(messages: list[Any]) -> str:
        asked = "\n".join(str(m.content) for m in messages)
        if kind == "good" or (kind == "weak" and "Hint:" in asked):
            return GOOD
        return "seven words that are far too many here" if kind == "worse" else BAD
    return reply


class FakeModels:
    """Specs to scripted behaviours; ``train`` writes a model folder that behaves as told."""

    def __init__(self, base: str = "weak", trained: list[str] | None = None,
                 fail_train: int = 0) -> None:
        self.kinds = {"local": base}
        self.trained = list(trained or ["good"])
        self.fail_train = fail_train
        self.train_calls: list[dict[str, Any]] = []
        self.chat_calls = 0

    def kind(self, spec: str) -> str:
        return self.kinds[spec.removeprefix("local:") if spec != "local" else spec]

    def chat(self, spec: str, temperature: float, max_tokens: int) -> ScriptedChatModel:
        self.chat_calls += 1
        return ScriptedChatModel(default=_answer(self.kind(spec)))

    def train(self, data: Path, out: Path, **kwargs: Any) -> TrainResult:
        self.train_calls.append({"data": data, "out": out, **kwargs})
        if self.fail_train:
            self.fail_train -= 1
            raise KeyboardInterrupt("killed mid-round")
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text("{}")
        (out / "model.safetensors").write_bytes(f"weights trained into {out}".encode())
        card = ModelCard(name=out.name, base_model=kwargs["base"], method=kwargs["method"],
                         data=DataRef(dir=str(data), manifest_sha256="fake"))
        write_card(out, card)
        self.kinds[str(out.resolve())] = self.trained.pop(0) if len(self.trained) > 1 \
            else self.trained[0]
        self.kinds[str(out)] = self.kinds[str(out.resolve())]
        return TrainResult(out, TrainSettings(), [], card)

    def backend(self) -> ImproveBackend:
        return ImproveBackend(chat=self.chat, train=self.train,
                              gate_model=lambda spec: ScriptedChatModel(
                                  default=_answer(self.kind(spec))))


def _tasks(prefix: str, n: int) -> list[TaskSpec]:
    return [TaskSpec(task=f"{prefix} {i}: answer in exactly 2 words.",
                     constraints={"exact_words": 2}, id=f"{prefix}{i}") for i in range(n)]


POOL, GOLDEN = _tasks("pool task", 3), _tasks("golden task", 4)
FAST = dict(samples=2, rounds=1, export_options={"pii": "off", "embedder": HashingEmbedder()},
            eval_options={"min_tasks": 4, "kl": False, "diversity_check": False},
            max_concurrency=2)


def _run(tmp_path: Path, models: FakeModels, **options: Any):  # type: ignore[no-untyped-def]
    return improve(POOL, golden=GOLDEN, registry=tmp_path / "reg", work_dir=tmp_path / "work",
                   backend=models.backend(), **{**FAST, **options})


def test_hinted_answers_train_on_the_plain_prompt_and_a_better_model_is_promoted(
        tmp_path: Path) -> None:
    models = FakeModels(base="weak", trained=["good"])
    result = _run(tmp_path, models)
    report = result.reports[0]
    assert report.pool is not None and report.pool.passed == 0 and report.pool.n == 6
    assert report.hint == HintCounts(retried=3, accepted=3, rationalized=0, restated=0,
                                     echoed=0)
    assert report.data is not None and report.data.sft_rows == 3 and report.data.hinted == 3

    rows = [json.loads(line) for line in
            (tmp_path / "work" / "round-001" / "data" / "sft.jsonl").read_text().splitlines()]
    by_task = {spec.task: spec for spec in POOL}
    for row in rows:
        spec = by_task[row["metadata"]["task"]]
        plain = fresh_draft_prompt(spec.task, rubric_requirements(spec.rubric())).messages()
        assert row["messages"][:-1] == plain and row["messages"][-1]["content"] == GOOD
        assert "Hint" not in json.dumps(row)

    assert report.decision == "PROMOTE" and report.registration is not None
    assert report.registration.promoted
    assert isinstance(report.registration.live, str)  # what the live swap said
    reg = Registry(tmp_path / "reg")
    assert reg.current is not None and reg.current.version == "v1"
    promote = [e for e in reg.history() if e.action == "promote"][0]
    assert "improve round 1" in (promote.reason or "")
    assert promote.gate and promote.gate.improve and promote.gate.improve.round == 1
    assert promote.gate.decision == "PROMOTE" and promote.gate.single_shot is not None
    card = read_card(reg.current.path)
    assert card.evals[-1]["improve"]["golden"]["candidate"]["pass_rate"] == 1.0
    golden = report.golden
    assert golden is not None
    assert golden.baseline.pass_rate == 0.0 and golden.candidate.passed == 4
    assert 0 < golden.candidate.interval[0] < 1 == golden.candidate.interval[1]
    assert set(report.seconds) == {"grow", "hint", "data", "train", "gate", "register"}
    work = tmp_path / "work"
    assert (work / "round-001" / "report.json").is_file() and (work / "improve.png").is_file()
    assert json.loads((work / "improve.json").read_text())["stopped"] == "rounds"


def test_round_two_trains_from_the_promoted_model_with_a_higher_threshold(tmp_path: Path) -> None:
    models = FakeModels(base="weak", trained=["good", "good"])
    result = _run(tmp_path, models, rounds=2, thresholds=(7.0, 8.0), patience=5, min_gain=0.0)
    assert len(result.reports) == 2 and result.stopped == "rounds"
    first, second = models.train_calls
    assert first["base"] == "local" and first["lora"] is True
    v1 = Registry(tmp_path / "reg").get("v1")
    assert second["base"] == f"local:{v1.path}" and result.reports[1].from_version == "v1"
    manifests = [json.loads((tmp_path / "work" / f"round-00{n}" / "data" / "manifest.json")
                            .read_text()) for n in (1, 2)]
    assert [m["options"]["min_score"] for m in manifests] == [0.7, 0.8]
    # round 2 samples the promoted (good) model: every sample passes, nothing to hint
    assert result.reports[1].pool.pass_rate == 1.0  # type: ignore[union-attr]
    assert result.reports[1].hint == HintCounts(retried=0, accepted=0, rationalized=0,
                                                restated=0, echoed=0)


def test_a_worse_candidate_is_rolled_back_never_promoted_and_the_loop_stops(
        tmp_path: Path) -> None:
    models = FakeModels(base="good", trained=["worse"])
    result = _run(tmp_path, models, rounds=3)
    assert result.stopped == "regression" and len(result.reports) == 1
    assert result.reports[0].decision == "ROLLBACK"
    reg = Registry(tmp_path / "reg")
    assert reg.current is None and [v.version for v in reg.versions()] == ["v1"]
    assert [e.action for e in reg.history()] == ["register"]
    assert "ROLLBACK" in (reg.history()[0].reason or "")


def test_a_plateau_stops_the_loop(tmp_path: Path) -> None:
    models = FakeModels(base="weak", trained=["weak"])  # training changes nothing
    result = _run(tmp_path, models, rounds=5, patience=1)
    assert result.stopped == "plateau" and len(result.reports) == 1
    assert result.reports[0].decision == "MANUAL_REVIEW"


def test_a_killed_round_resumes_without_growing_again(tmp_path: Path) -> None:
    models = FakeModels(base="weak", trained=["good"], fail_train=1)
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, models)
    state = json.loads((tmp_path / "work" / "round-001" / "state.json").read_text())
    assert set(state["stages"]) == {"grow", "hint", "data"}
    grown = (tmp_path / "work" / "round-001" / "grown" / "trajectories.jsonl").read_bytes()
    calls = models.chat_calls
    result = _run(tmp_path, models)
    assert models.chat_calls == calls  # grow and hint were not redone: no model was made
    assert (tmp_path / "work" / "round-001" / "grown" / "trajectories.jsonl").read_bytes() == grown
    assert len(models.train_calls) == 2 and result.reports[0].registration.version == "v1"  # type: ignore[union-attr]
    again = _run(tmp_path, models)  # a finished run: nothing is redone or registered twice
    assert len(models.train_calls) == 2 and again.versions == ["v1"]
    assert [v.version for v in Registry(tmp_path / "reg").versions()] == ["v1"]


def test_other_settings_in_the_same_work_folder_are_refused(tmp_path: Path) -> None:
    _run(tmp_path, FakeModels(base="weak", trained=["weak"]), patience=1)
    with pytest.raises(ConfigError, match="holds an improve run with other settings"):
        _run(tmp_path, FakeModels(), samples=3)


def test_a_pool_that_shares_a_golden_task_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="shares 1 task with the golden set"):
        improve([*POOL, GOLDEN[0]], golden=GOLDEN, registry=tmp_path / "reg",
                work_dir=tmp_path / "work", backend=FakeModels().backend(), **FAST)
    assert not (tmp_path / "work").exists()


def _log_runs(log: TrajectoryLog, tasks: list[str]) -> None:
    for task in tasks:
        log.append(Trajectory(architecture="reflection", model_id="m", task=task,
                              rounds=[Round(iteration=0, draft="x", score=1.0)],
                              final_output="x", final_score=1.0))


def test_a_trajectory_pool_reads_only_runs_past_the_watermark(tmp_path: Path) -> None:
    log = TrajectoryLog(tmp_path / "traffic")
    _log_runs(log, ["Write a motto in exactly 2 words.", "Name a tool in exactly 2 words.",
                    "Name a color."])  # no stated check: not scorable, left out
    models = FakeModels(base="weak", trained=["weak"])
    options = {**FAST, "rounds": 3, "patience": 5}
    first = improve(trajectories=[tmp_path / "traffic"], golden=GOLDEN,
                    registry=tmp_path / "reg", work_dir=tmp_path / "work",
                    backend=models.backend(), **options)
    assert first.stopped == "no_new_tasks" and len(first.reports) == 1
    assert json.loads((tmp_path / "work" / "round-001" / "state.json").read_text())[
        "pool_tasks"] == 2
    _log_runs(log, ["Describe rain in exactly 2 words."])
    second = improve(trajectories=[tmp_path / "traffic"], golden=GOLDEN,
                     registry=tmp_path / "reg", work_dir=tmp_path / "work",
                     backend=models.backend(), **options)
    assert len(second.reports) == 2 and second.stopped == "no_new_tasks"
    pool = (tmp_path / "work" / "round-002" / "pool.jsonl").read_text().splitlines()
    assert [json.loads(line)["task"] for line in pool] == ["Describe rain in exactly 2 words."]


def test_settings_are_checked_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="must not fall"):
        ImproveSettings(thresholds=(8, 7))
    with pytest.raises(ConfigError, match="unknown architecture"):
        ImproveSettings(arch="nope")
    with pytest.raises(ConfigError, match="exactly one pool"):
        improve(golden=GOLDEN, registry=tmp_path / "r", work_dir=tmp_path / "w")
    s = ImproveSettings(temperatures=(0.5, 1.0), temperature_step=-0.25, samples=2)
    assert [s.temperature_for(2, k) for k in range(2)] == [0.25, 0.75]


def test_the_cli_refuses_an_overlapping_pool_in_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from agentic_loop.cli import app

    lines = "\n".join(json.dumps({"task": t.task, "constraints": t.constraints})
                      for t in GOLDEN) + "\n"
    (tmp_path / "g.jsonl").write_text(lines)
    (tmp_path / "p.jsonl").write_text(lines)
    result = CliRunner().invoke(app, ["improve", "--tasks", str(tmp_path / "p.jsonl"),
                                      "--golden", str(tmp_path / "g.jsonl"),
                                      "--work", str(tmp_path / "w"),
                                      "--registry", str(tmp_path / "r")])
    assert result.exit_code == 2 and "shares 4 tasks with the golden set" in result.stderr
    bad = CliRunner().invoke(app, ["improve", "--tasks", "p", "--golden", "g",
                                   "--thresholds", "7,x"])
    assert bad.exit_code == 2 and "--thresholds takes numbers" in bad.stderr


def test_grpo_rounds_train_on_the_pools_prompt_set_without_hints(tmp_path: Path) -> None:
    from agentic_loop.distill.train import load_prompt_set

    models = FakeModels(base="weak", trained=["good"])
    result = _run(tmp_path, models, method="grpo")
    call = models.train_calls[0]
    assert call["method"] == "grpo" and call["data"].name == "pool.jsonl"
    prompts = load_prompt_set(call["data"])
    assert [t.task for t in prompts.tasks] == [t.task for t in POOL]
    assert result.reports[0].hint == HintCounts(retried=0, accepted=0)
    assert not (tmp_path / "work" / "round-001" / "hinted").exists()


def test_a_deleted_round_state_does_not_register_the_round_twice(tmp_path: Path) -> None:
    models = FakeModels(base="weak", trained=["good"])
    first = _run(tmp_path, models)
    assert first.versions == ["v1"]
    (tmp_path / "work" / "round-001" / "state.json").unlink()
    again = _run(tmp_path, models)  # the round runs again from its first stage
    assert len(models.train_calls) == 2 and again.versions == ["v1"]
    reg = Registry(tmp_path / "reg")
    assert [v.version for v in reg.versions()] == ["v1"]
    assert [e.action for e in reg.history()].count("register") == 1


@pytest.mark.parametrize("text, problem", [
    ('["grow"]', "is not a JSON object"),
    ('{"round": 1, "stages": ["grow"]}', r"stages: Input should be a valid dictionary"),
    ('{"round": 1, "stages": {"grow": 8}}', r"stages.grow: Input should be a valid dictionary"),
    ('{"round": 1, "stages": {"train": {"result": {"model_dir": "m"}, "seconds": 1}}}',
     r"stages.train.result: spec, steps, loss missing"),
    ('{"round": 1, "stages": {"polish": {"result": {}, "seconds": 1}}}', "not a stage"),
    ('{"round": 2, "stages": {}}', "it says 2, but it is round 1's folder"),
    ('{"round": 1, "stages": {}, "threshold": "high"}', "threshold: Input should be a valid"),
])
def test_a_round_state_of_the_wrong_shape_is_a_clear_error(tmp_path: Path, text: str,
                                                           problem: str) -> None:
    from agentic_loop.distill.loop.state import ImproveStateError

    state = tmp_path / "work" / "round-001" / "state.json"
    state.parent.mkdir(parents=True)
    state.write_text(text)
    with pytest.raises(ImproveStateError, match=rf"round state {state}.*{problem}.*delete it"):
        _run(tmp_path, FakeModels())
    assert not (tmp_path / "reg").exists()  # refused before any stage ran


def test_the_cli_reports_a_wrong_shaped_round_state_in_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from agentic_loop.cli import app

    for name, tasks in (("p", POOL), ("g", GOLDEN)):
        (tmp_path / f"{name}.jsonl").write_text("".join(
            json.dumps({"task": t.task, "constraints": t.constraints}) + "\n" for t in tasks))
    state = tmp_path / "w" / "round-001" / "state.json"
    state.parent.mkdir(parents=True)
    state.write_text('{"round": 1, "stages": {"grow": []}}')
    result = CliRunner().invoke(app, ["improve", "--tasks", str(tmp_path / "p.jsonl"),
                                      "--golden", str(tmp_path / "g.jsonl"),
                                      "--work", str(tmp_path / "w"),
                                      "--registry", str(tmp_path / "r")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "does not have the shape improve writes" in " ".join(result.stderr.split())



# -- given runs: one round on logged runs (what distill_loop is) ------------------------

def _log_answers(log: TrajectoryLog, answer: str) -> None:
    good = answer == GOOD
    for spec in POOL:
        log.append(Trajectory(architecture="reflection", model_id="m", task=spec.task,
                              rounds=[Round(iteration=0, draft=BAD, score=3.0),
                                      Round(iteration=1, draft=answer, score=9.5 if good else 3.0,
                                            passed=good)],
                              final_output=answer, final_score=9.5 if good else 3.0,
                              accepted=good))


def test_logged_runs_are_one_rounds_data_and_nothing_is_sampled(tmp_path: Path) -> None:
    log = TrajectoryLog(tmp_path / "traffic")
    _log_answers(log, GOOD)
    models = FakeModels(base="weak", trained=["good"])
    given = dict(runs=[log.dir], golden=GOLDEN, registry=tmp_path / "reg",
                 work_dir=tmp_path / "work", **{**FAST, "samples": 4})
    result = improve(backend=models.backend(), **given)
    report, work = result.reports[0], tmp_path / "work" / "round-001"
    assert models.chat_calls == 0 and not (work / "pool.jsonl").exists()
    assert report.pool is not None and (report.pool.n, report.pool.passed) == (3, 3)
    assert report.hint == HintCounts(retried=0, accepted=0)
    assert report.data is not None and report.data.sft_rows == 3
    assert models.train_calls[0]["data"] == work / "data"
    options = json.loads((work / "data" / "manifest.json").read_text())["options"]
    assert options["min_score"] == 0.7 and options["latency_z"] == 3.5  # the export's default
    assert report.decision == "PROMOTE" and result.versions == ["v1"]
    promote = [e for e in Registry(tmp_path / "reg").history() if e.action == "promote"][0]
    assert promote.gate and promote.gate.improve and promote.gate.improve.round == 1
    state = json.loads((work / "state.json").read_text())
    assert state["given_runs"] == [str(log.dir)] and state["stages"]["hint"]["result"]["skipped"]
    assert improve(backend=models.backend(), **given).versions == ["v1"]
    assert len(models.train_calls) == 1  # finished: nothing redone
    _log_answers(log, GOOD)  # other runs: refused, never trained over the registered model
    with pytest.raises(ConfigError, match="holds an improve run with other settings"):
        improve(backend=models.backend(), **given)
    with pytest.raises(ConfigError, match="pass rounds=1"):
        improve(**{**given, "rounds": 2})
    with pytest.raises(ConfigError, match="exactly one pool"):
        improve(POOL, **given)


def test_distill_loop_is_one_improve_round_with_the_export_and_train_defaults(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentic_loop.distill.data.errors import EmptyExportError
    from agentic_loop.distill.loop import pipeline

    models = FakeModels(base="weak", trained=["good"])
    monkeypatch.setattr(pipeline, "improve",
                        lambda **kw: improve(**kw, backend=models.backend()))
    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join(json.dumps({"task": t.task, "constraints": t.constraints}) + "\n"
                              for t in GOLDEN))
    log = TrajectoryLog(tmp_path / "traffic")
    _log_answers(log, GOOD)
    export = {"pii": "off", "embedder": HashingEmbedder(), "min_score": 0.9}
    result = pipeline.distill_loop(log.dir, tmp_path / "work", golden=golden,
                                   registry=tmp_path / "reg", export_options=export,
                                   eval_options=dict(FAST["eval_options"]))
    report = result.reports[0]
    assert report.model == "local" and report.decision == "PROMOTE" and result.current == "v1"
    assert models.train_calls[0]["lora"] is False and report.threshold == 9.0
    manifest = tmp_path / "work" / "round-001" / "data" / "manifest.json"
    assert json.loads(manifest.read_text())["options"]["min_score"] == 0.9
    bad = TrajectoryLog(tmp_path / "bad")
    _log_answers(bad, BAD)  # every answer fails its check: nothing to train on
    with pytest.raises(EmptyExportError, match="nothing to train on"):
        pipeline.distill_loop(bad.dir, tmp_path / "work2", golden=golden,
                              registry=tmp_path / "reg", export_options=export)


# -- typed records read what the previous version wrote ---------------------------------

V1 = Path(__file__).parent / "fixtures" / "improve_v1"


def test_a_round_written_by_the_previous_version_loads_and_reports_the_same(
        tmp_path: Path) -> None:
    from agentic_loop.distill.loop.records import ImproveRound
    from agentic_loop.distill.loop.round import RESULT_KEYS, round_report
    from agentic_loop.distill.loop.state import RoundState

    old_report = json.loads((V1 / "report.json").read_text())
    (tmp_path / "round-001").mkdir()
    (tmp_path / "round-001" / "state.json").write_text((V1 / "state.json").read_text())
    state = RoundState.open(tmp_path, 1, required=RESULT_KEYS)
    assert state.complete
    report = round_report(state, ImproveSettings())
    assert report.model_dump(mode="json") == old_report  # the same report.json as before
    loaded = ImproveRound.model_validate(old_report)
    assert loaded == report and loaded.registration is not None
    assert loaded.registration.version == "v1" and loaded.decision == "PROMOTE"
    overall = json.loads((V1 / "improve.json").read_text())
    assert [ImproveRound.model_validate(r) for r in overall["rounds"]] == [report]
