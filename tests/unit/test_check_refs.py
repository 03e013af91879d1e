"""Check functions saved by reference: round trips through JSON and task files, and clear errors."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import user_checks

from agentic_loop.distill.eval.golden import GoldenError, load_golden
from agentic_loop.distill.loop.pool import read_pool, write_pool
from agentic_loop.errors import ConfigError
from agentic_loop.judges import (
    CheckReferenceError,
    Feature,
    Rubric,
    check_reference,
    register_check,
    resolve_check,
    unregister_check,
)
from agentic_loop.tasks.spec import TaskFileError, TaskSpec, load_tasks

REF = "user_checks:valid_invoice"


@pytest.fixture(autouse=True)
def _isolated_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reference is also looked up in the current folder: keep that a fresh one, and undo it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))


@pytest.fixture
def registered() -> Iterator[str]:
    user_checks.register_invoice_check()
    yield "valid_invoice"
    unregister_check("valid_invoice")


def _rubric(check: object) -> Rubric:
    return Rubric([Feature("valid_invoice", "Answer with one invoice number, INV-dddd.", 2.0,
                           check=check),  # type: ignore[arg-type]
                   Feature("digits", "Exactly 4 digits.", check=user_checks.digit_count,
                           target=(4, 4))], name="invoices", version="3")


def test_a_rubric_with_an_imported_check_round_trips_through_json() -> None:
    rubric = _rubric(user_checks.valid_invoice)
    saved = json.loads(json.dumps(rubric.to_dict()))
    assert [f.get("check") for f in saved["features"]] == [REF, "user_checks:digit_count"]
    back = Rubric.from_dict(saved)
    assert back["valid_invoice"].check is user_checks.valid_invoice
    assert back.to_dict() == rubric.to_dict()
    assert back["digits"].target == (4, 4) and back.version == "3"
    ev = back.evaluate("Give the invoice number.", "INV-0042")
    assert ev.passed and ev.score == 10.0
    assert not back.evaluate("Give the invoice number.", "invoice 42").passed


def test_a_check_given_as_a_reference_is_resolved_and_saved_as_given() -> None:
    feature = Feature("valid_invoice", "One invoice number.", check=f"  {REF} ")
    assert feature.check is user_checks.valid_invoice and feature.source == "check"
    assert feature.to_dict()["check"] == REF
    assert feature.run_check("t", "INV-1234").value is True


def test_a_registered_name_round_trips(registered: str) -> None:
    assert check_reference(user_checks.valid_invoice) == registered  # the name wins over the path
    rubric = _rubric(user_checks.valid_invoice)
    saved = json.loads(json.dumps(rubric.to_dict()))
    assert saved["features"][0]["check"] == registered
    assert Rubric.from_dict(saved)["valid_invoice"].check is user_checks.valid_invoice
    by_name = Feature("v", "One invoice number.", check=registered)
    assert by_name.to_dict()["check"] == registered


def test_register_check_as_a_decorator_and_refusing_a_taken_name() -> None:
    @register_check("shout_free")
    def shout_free(task: str, output: str) -> bool:
        return not output.isupper()

    try:
        assert resolve_check("shout_free") is shout_free
        register_check("shout_free", shout_free)  # the same function again: fine
        with pytest.raises(CheckReferenceError, match="already registered"):
            register_check("shout_free", user_checks.valid_invoice)
    finally:
        unregister_check("shout_free")
    with pytest.raises(CheckReferenceError, match="not a registered check name"):
        resolve_check("shout_free")


def test_a_task_spec_carrying_the_rubric_round_trips_through_a_task_file(tmp_path: Path) -> None:
    spec = TaskSpec(task="Give the invoice number of order 7.", id="t1",
                    rubric=_rubric(user_checks.valid_invoice))
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(spec.model_dump(mode="json", by_alias=True, exclude_none=True))
                    + "\n")
    assert REF in path.read_text()
    loaded = load_tasks(path)[0]
    rubric = loaded.rubric()
    assert rubric is not None and rubric["valid_invoice"].check is user_checks.valid_invoice
    assert rubric.evaluate(loaded.task, "INV-0007").passed


def test_the_pool_and_the_golden_set_keep_the_user_check(tmp_path: Path) -> None:
    row = {"task": "Give the invoice number of order 1.",
           "rubric": {"name": "invoices", "features": [
               {"name": "valid_invoice", "description": "One invoice number.", "check": REF}]}}
    golden_file = tmp_path / "golden.jsonl"
    golden_file.write_text(json.dumps({**row, "task": "Invoice number of order 99?"}) + "\n")
    golden = load_golden(golden_file)
    assert golden[0].rubric()["valid_invoice"].check is user_checks.valid_invoice  # type: ignore[index]
    pool_file = tmp_path / "pool.jsonl"
    pool_file.write_text(json.dumps(row) + "\n")
    pool, skipped = read_pool(pool_file, golden)
    assert skipped == 0 and pool[0].rubric().names == ("valid_invoice",)  # type: ignore[union-attr]
    write_pool(tmp_path / "round" / "pool.jsonl", pool)
    again = load_tasks(tmp_path / "round" / "pool.jsonl")[0].rubric()
    assert again is not None and again["valid_invoice"].check is user_checks.valid_invoice


@pytest.mark.parametrize(("reference", "says"), [
    ("no_such_user_pkg.checks:valid", "module 'no_such_user_pkg.checks' cannot be imported"),
    ("user_checks:no_such_check", "module 'user_checks' has no attribute 'no_such_check'"),
    ("user_checks:NOT_A_FUNCTION", "names a int, not a function"),
    ("user_checks:valid invoice", "not a valid import path"),
    ("never_registered_check", "not a registered check name"),
])
def test_a_reference_that_does_not_resolve_is_a_clear_error(reference: str, says: str) -> None:
    with pytest.raises(CheckReferenceError, match=says) as caught:
        Feature.from_dict({"name": "v", "description": "Valid.", "check": reference})
    message = str(caught.value)
    assert message.startswith("feature 'v': check ") and repr(reference) in message
    assert isinstance(caught.value, ConfigError)


def test_a_module_whose_own_import_fails_is_named_with_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "broken_user_checks.py").write_text("import not_installed_dep\n")
    with pytest.raises(CheckReferenceError, match="its import of 'not_installed_dep' failed"):
        resolve_check("broken_user_checks:valid")


def test_a_module_in_the_current_folder_is_found_as_uvicorn_finds_an_app(tmp_path: Path) -> None:
    (tmp_path / "shop_rules.py").write_text(
        "def paid(task, output):\n    return output.startswith('PAID')\n")
    assert str(tmp_path) not in sys.path
    check = resolve_check("shop_rules:paid")
    assert check("t", "PAID 42") is True and sys.path[-1] == str(tmp_path)  # appended: no shadowing


def test_a_bad_reference_in_a_task_file_names_the_file_line_and_the_reference(
        tmp_path: Path) -> None:
    path = tmp_path / "golden.jsonl"
    path.write_text('{"task": "Invoice?", "rubric": {"features": [{"name": "v", '
                    '"description": "Valid.", "check": "user_checks:nope"}]}}\n')
    with pytest.raises(GoldenError, match=r"golden.jsonl:1: .*'user_checks:nope'.*has no attr"):
        load_golden(path)
    with pytest.raises(TaskFileError, match="user_checks:nope"):
        load_tasks(path)


def _closure() -> object:
    def inner(task: str, output: str) -> bool:
        return True
    return inner


@pytest.mark.parametrize(("check", "says"), [
    (lambda task, out: True, "is a lambda and cannot be saved by reference"),
    (_closure(), "is defined inside a function"),
])
def test_a_lambda_or_a_closure_still_runs_but_fails_to_save_with_the_fix(check: object,
                                                                          says: str) -> None:
    rubric = Rubric([Feature("ok", "Fine.", check=check)])  # type: ignore[arg-type]
    assert rubric.evaluate("t", "x").passed  # works in a single run
    with pytest.raises(CheckReferenceError, match=says) as caught:
        rubric.to_dict()
    assert "feature 'ok'" in str(caught.value)
    assert "module level" in str(caught.value) and "register_check" in str(caught.value)


@pytest.mark.parametrize("by_name", [False, True])
def test_grpo_reward_workers_run_the_user_check_by_reference(by_name: bool) -> None:
    from agentic_loop.distill.train.prompt_set import PromptTask
    from agentic_loop.distill.train.rewards import RubricRewards

    if by_name:
        user_checks.register_invoice_check()
    try:
        rubric = _rubric(user_checks.valid_invoice)
        assert rubric.to_dict()["features"][0]["check"] == ("valid_invoice" if by_name else REF)
        texts = ["INV-0042", "invoice 42", "INV-42"]
        inline = RubricRewards([PromptTask("Invoice number?", rubric)])
        pooled = RubricRewards([PromptTask("Invoice number?", rubric)], workers=1)
        try:
            def call(rewards: RubricRewards) -> list[float]:
                done = [[{"role": "assistant", "content": t}] for t in texts]
                got = rewards.functions[0](prompts=[None] * 3, completions=done,
                                           task_index=[0] * 3)
                return [float(score or 0.0) for score in got]
            scores = call(inline)
            assert call(pooled) == scores and scores[0] == 1.0 and max(scores[1:]) < 0.2
            assert pooled.stats()["rubric"]["errors"] == 0
        finally:
            pooled.close()
    finally:
        unregister_check("valid_invoice")


def test_the_check_constraint_is_the_short_form_of_a_task_file(tmp_path: Path) -> None:
    path = tmp_path / "pool.jsonl"
    path.write_text(json.dumps({"task": "Invoice number of order 3?",
                                "constraints": {"check": REF}}) + "\n"
                    + json.dumps({"task": "Digits of order 4?", "constraints": {
                        "check": {"ref": "user_checks:digit_count", "target": [4, 4]}}}) + "\n")
    first, second = load_tasks(path)
    rubric = first.rubric()
    assert rubric is not None and rubric.constraints == {"check": REF}
    feature = rubric["check"]
    assert feature.check is user_checks.valid_invoice and feature.kind == "bool"
    # the docstring's first line is the instruction shown to the model and the failure hint
    assert feature.description == user_checks.valid_invoice.__doc__.splitlines()[0]  # type: ignore[union-attr]
    assert rubric.evaluate(first.task, "INV-0003").passed
    counted = second.rubric()
    assert counted is not None and counted["check"].target == (4, 4)
    assert counted.evaluate(second.task, "INV-1234").passed
    assert not counted.evaluate(second.task, "INV-12").passed
    saved = json.loads(json.dumps(rubric.to_dict()))
    assert saved["features"][0] == {"name": "check", "weight": 1.0, "constraint": "check",
                                    "value": REF}
    assert Rubric.from_dict(saved)["check"].check is user_checks.valid_invoice
    with pytest.raises(ConfigError, match=r"constraint check=\{'ref': 'x:y', 'tgt': 1\}"):
        Rubric.for_constraints(check={"ref": "x:y", "tgt": 1})
    with pytest.raises(CheckReferenceError, match="'user_checks:gone'"):
        Rubric.for_constraints(check="user_checks:gone")


def test_a_served_graph_runs_a_registered_check_named_in_its_context(registered: str) -> None:
    from pydantic import ValidationError

    from agentic_loop.architectures import Reflection
    from agentic_loop.architectures.schemas import RunSettings
    from agentic_loop.testing import ScriptedChatModel

    graph = Reflection(ScriptedChatModel(default="INV-0042"), max_iterations=2).build()
    user_checks.CALLS.clear()
    out = graph.invoke({"task": "Invoice number of order 42?"},
                       context=RunSettings(constraints={"check": registered}))
    assert out["passed"] and out["features"] == {"check": True}
    assert user_checks.CALLS and user_checks.CALLS[0][1] == "INV-0042"
    # an import path from a caller would import the caller's choice on the server: refused
    # before anything is imported
    with pytest.raises(ValidationError, match="may name only a registered check"):
        RunSettings(constraints={"check": "os:rename"})
    with pytest.raises(ValidationError, match="may name only a registered check"):
        RunSettings(constraints={"check": {"ref": "shutil:copy", "target": [0, 1]}})


def test_the_readme_example_runs_and_its_task_row_loads(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Your own verifier", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    try:
        exec(compile(code, "README.md (Your own verifier)", "exec"),  # noqa: S102
             {"__name__": "readme_example"})
    finally:
        unregister_check("valid_invoice")
    row = section.split("```json\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "pool.jsonl"
    path.write_text(row)
    with pytest.raises(TaskFileError, match="'mypkg.checks:valid_invoice'.*cannot be imported"):
        load_tasks(path)  # the README's placeholder module: the error names it
    path.write_text(row.replace("mypkg.checks:valid_invoice", REF))
    rubric = load_tasks(path)[0].rubric()
    assert rubric is not None and rubric.evaluate("t", "INV-0042").passed


def test_logged_runs_naming_a_lost_check_stop_the_export_and_the_pool(tmp_path: Path) -> None:
    from agentic_loop.distill.data.verdicts import saved_rubric
    from agentic_loop.distill.loop.pool import trajectory_pool
    from agentic_loop.distill.loop.state import Watermark
    from agentic_loop.trajectories import Trajectory, TrajectoryLog

    lost = {"name": "r", "version": "1", "features": [
        {"name": "v", "description": "Valid.", "kind": "bool", "check": "user_checks:gone"}]}
    run = Trajectory(task="Invoice number of order 5?", architecture="reflection",
                     model_id="m", rubric=lost)
    with pytest.raises(CheckReferenceError, match=f"run {run.id}: .*'user_checks:gone'"):
        saved_rubric(run)  # the export re-scores by it: never silently without the user's check
    TrajectoryLog(tmp_path / "runs" / "trajectories.jsonl").append(run)
    with pytest.raises(CheckReferenceError, match="of the trajectory logs: .*user_checks:gone"):
        trajectory_pool([tmp_path / "runs"], Watermark(), [])
    kept = run.model_copy(update={"rubric": {**lost, "features": [
        {**lost["features"][0], "check": REF}]}})
    rubric = saved_rubric(kept)
    assert rubric is not None and rubric["v"].check is user_checks.valid_invoice
