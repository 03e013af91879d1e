"""Control flow of the architectures with the scripted fake model: no weights loaded."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, StateGraph
from typing_extensions import TypedDict

from agentic_loop.architectures import (
    ARCHITECTURES,
    ArchiveRefine,
    Reflection,
    Reflexion,
    RunResult,
    TaskError,
    architecture_class,
    create_architecture,
    create_archive_refine_graph,
    create_reflection_graph,
    run_specs,
)
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Feature, Rubric, rubric_for_task
from agentic_loop.memory import Archive, HashingEmbedder, ReflexionMemory
from agentic_loop.models.retry import RetryPolicy
from agentic_loop.tasks.spec import TaskSpec
from agentic_loop.testing import ScriptedChatModel
from agentic_loop.trajectories import Round, TrajectoryLog

ONE_WORD = Rubric.for_constraints(exact_words=1)
NO_WE = Rubric.for_constraints(exclude_words=["we"])


def words(n: int) -> str:
    return " ".join(["word"] * n)


def test_reflection_stops_at_target_and_counts_rounds():
    llm = ScriptedChatModel(responses=["two words", "one"])
    result = Reflection(llm, rubric=ONE_WORD, max_iterations=5).run("Say one word.")
    assert result.output == "one" and result.score == 10.0 and result.passed
    assert result.stop_reason == "target" and result.iterations == 2
    assert [r.draft for r in result.trace] == ["two words", "one"]
    assert result.usage.llm_calls == 2  # checks-only rubric: the critic never calls the model


def test_refine_prompt_carries_the_failed_check():
    llm = ScriptedChatModel(responses=["We sell books", "Books for all"])
    Reflection(llm, rubric=NO_WE).run("A tagline for a bookstore.")
    refine_prompt = llm.calls[1].prompt
    assert "We sell books" in refine_prompt and 'Do not use the words "we"' in refine_prompt


def test_resample_refine_asks_the_first_prompt_again_without_the_failed_draft():
    llm = ScriptedChatModel(responses=["We sell books", "Stories on every shelf"])
    result = Reflection(llm, rubric=NO_WE, refine="resample").run("Tagline for a bookstore.")
    assert result.output == "Stories on every shelf" and result.iterations == 2
    first, second = (c.prompt for c in llm.calls)
    assert second == first and "We sell books" not in second


def test_unknown_refine_mode_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="feedback, resample.*'rewrite'"):
        Reflection(ScriptedChatModel(), refine="rewrite")


def test_create_architecture_gives_each_its_own_store(tmp_path):
    archive, lessons = str(tmp_path / "archive"), str(tmp_path / "lessons")
    llm = ScriptedChatModel()
    built = {name: create_architecture(name, llm, archive=archive, reflections=lessons,
                                       max_iterations=2) for name in ARCHITECTURES}
    assert type(built["archive_refine"]) is ArchiveRefine
    assert built["archive_refine"].archive.path == tmp_path / "archive"
    assert type(built["reflexion"]) is Reflexion
    assert built["reflexion"].memory.path == tmp_path / "lessons"
    assert all(a.max_iterations == 2 for a in built.values())
    with pytest.raises(ValueError, match="unknown architecture 'self_refine'"):
        create_architecture("self_refine", llm)


def test_max_iterations_bounds_the_loop_and_the_best_draft_wins():
    # exact_words=1: 3 words is closer than 6 words, so the first draft is the best
    llm = ScriptedChatModel(responses=[words(3), words(6), words(9)])
    result = Reflection(llm, rubric=ONE_WORD, max_iterations=3, plateau_patience=5).run("One word.")
    assert result.stop_reason == "max_iterations" and result.iterations == 3
    assert result.output == words(3)
    assert result.score == max(r.score for r in result.trace)
    assert len(llm.calls) == 3


def test_plateau_stops_early():
    llm = ScriptedChatModel(responses=[words(3), words(3) + "s", words(4), words(5)])
    result = Reflection(llm, rubric=ONE_WORD, max_iterations=10, plateau_patience=2).run("One.")
    assert result.stop_reason == "plateau" and result.iterations == 3


def test_llm_features_are_judged_and_checks_never_asked():
    rubric = Rubric([Feature("short", "At most 3 words.", 3.0,
                             check=lambda t, o: len(o.split()) <= 3),
                     Feature("warm", "It sounds warm.", 1.0, kind="bool")])
    llm = ScriptedChatModel(responses=["Hello dear friend of mine", "Hi friend"],
                            structured={"RubricJudgement": [{"warm": False, "overall_score": 9},
                                                            {"warm": True, "overall_score": 9}]})
    result = Reflection(llm, rubric=rubric, target_score=9.5).run("Greet me.")
    assert result.output == "Hi friend" and result.features == {"short": True, "warm": True}
    judged = [c for c in llm.calls if c.kind == "structured"]
    assert len(judged) == 2 and "short" not in judged[0].schema_name


def test_task_rubric_is_built_from_the_task_when_none_is_given():
    assert set(rubric_for_task("Write a slogan in exactly 4 words, all lowercase.").names) == {
        "exact_words", "lowercase", "on_task", "well_written"}
    llm = ScriptedChatModel(responses=["fresh bread every morning"],
                            default_structured={"on_task": True, "well_written": True,
                                                "overall_score": 9})
    result = Reflection(llm).run("Write a slogan in exactly 4 words, all lowercase.")
    assert result.score == 10.0 and result.features["exact_words"] == 4


def test_run_rubric_overrides_the_architecture_rubric():
    llm = ScriptedChatModel(responses=["We"])
    result = Reflection(llm, rubric=NO_WE, max_iterations=1).run("x", rubric=ONE_WORD)
    assert result.score == 10.0 and "exact_words" in result.features


@pytest.mark.parametrize("task", ["", "   \n", None, 42])
def test_bad_tasks_are_refused_with_a_clear_error(task):
    with pytest.raises(TaskError):
        Reflection(ScriptedChatModel(), rubric=ONE_WORD).run(task)  # type: ignore[arg-type]


def test_oversized_task_names_the_limit():
    arch = Reflection(ScriptedChatModel(), rubric=ONE_WORD, max_task_chars=100)
    with pytest.raises(TaskError, match="over the limit of 100"):
        arch.run("x" * 101)


def test_model_errors_are_retried_with_backoff_then_recorded(tmp_path):
    log = TrajectoryLog(tmp_path)
    flaky = ScriptedChatModel(responses=[RuntimeError("overloaded"), "one"])
    result = Reflection(flaky, rubric=ONE_WORD, retry_backoff_s=0.01, trajectories=log).run("x")
    assert result.ok and result.output == "one"

    down = ScriptedChatModel(responses=[RuntimeError("down")] * 3)
    result = Reflection(down, rubric=ONE_WORD, llm_retries=2, retry_backoff_s=0.01,
                        trajectories=log).run("y")
    assert not result.ok and result.output is None and result.stop_reason == "error"
    assert "RuntimeError: down" in result.errors[0] and len(down.calls) == 3
    logged = log.read()
    assert [t.ok for t in logged] == [True, False]
    assert logged[1].errors == result.errors and logged[1].id == result.trajectory_id


def test_batch_keeps_going_past_bad_tasks_and_failing_runs():
    llm = ScriptedChatModel(default="one")
    results = Reflection(llm, rubric=ONE_WORD).batch(["a", "", "b", "x" * 10_000],
                                                      max_concurrency=3)
    assert [r.ok for r in results] == [True, False, True, False]
    assert "empty" in results[1].errors[0] and "over the limit" in results[3].errors[0]
    assert all(isinstance(r, RunResult) for r in results)


def test_arun_and_abatch():
    arch = Reflection(ScriptedChatModel(default="one"), rubric=ONE_WORD)
    assert asyncio.run(arch.arun("a")).output == "one"
    results = asyncio.run(arch.abatch(["a", "b", ""], max_concurrency=2))
    assert [r.ok for r in results] == [True, True, False]


def test_stream_yields_each_node():
    llm = ScriptedChatModel(responses=["two words", "one"])
    nodes = [node for node, _ in Reflection(llm, rubric=ONE_WORD).stream("x")]
    assert nodes == ["generate", "critique", "refine", "critique", "finalize"]


def test_diagram_and_cached_build():
    arch = Reflection(ScriptedChatModel(), rubric=ONE_WORD)
    assert arch.build() is arch.build()
    text = arch.diagram()
    for node in ("generate", "critique", "refine", "finalize"):
        assert node in text
    assert "retrieve" in ArchiveRefine(ScriptedChatModel(), rubric=ONE_WORD,
                                       archive=Archive_tmp()).diagram()


def Archive_tmp() -> Archive:
    import tempfile

    return Archive(tempfile.mkdtemp(), embedder=HashingEmbedder())


def test_recursion_limit_follows_max_iterations():
    assert Reflection(ScriptedChatModel(), max_iterations=2).recursion_limit < \
        Reflection(ScriptedChatModel(), max_iterations=6).recursion_limit
    llm = ScriptedChatModel(default=words(4))
    result = Reflection(llm, rubric=ONE_WORD, max_iterations=6, plateau_patience=10).run("x")
    assert result.iterations == 6  # the derived limit leaves room for every allowed round


def test_trajectory_records_every_round(tmp_path):
    log = TrajectoryLog(tmp_path / "traj")
    llm = ScriptedChatModel(responses=["two words", "one"])
    result = Reflection(llm, rubric=ONE_WORD, trajectories=log).run(
        "Say one word.", user_id="alice", consent=True, metadata={"app": "demo"})
    (t,) = log.read()
    assert t.id == result.trajectory_id and t.architecture == "reflection"
    assert [r.draft for r in t.rounds] == ["two words", "one"]
    assert t.rounds[0].features == {"exact_words": 2} and t.rounds[1].score == 10.0
    assert t.final_output == "one" and t.accepted and t.stop_reason == "target"
    assert t.usage.llm_calls == 2 and t.usage.output_tokens == 3 and t.latency_s >= 0
    assert t.user_id_hash and "alice" not in t.model_dump_json()
    assert t.consent is True and t.metadata == {"app": "demo"}
    assert t.rubric["name"] == "constraints"


def test_archive_refine_archives_only_at_target_and_retrieves_similar(tmp_path):
    archive = Archive(tmp_path / "archive", embedder=HashingEmbedder())
    llm = ScriptedChatModel(responses=["two words", "still two", "one"] + ["single"] * 3)
    arch = ArchiveRefine(llm, rubric=ONE_WORD, archive=archive, max_iterations=2,
                         min_similarity=None)
    first = arch.run("Name a bookstore in one word.")
    assert not first.archived and len(archive) == 0  # best score below target: not archived
    second = arch.run("Name a bookstore in one word!")
    assert second.archived and len(archive) == 1 and second.exemplar_ids == []
    third = arch.run("Name a bookshop in one word.")
    assert third.exemplar_ids == [archive.entries()[0].id]
    sent = [c for c in llm.calls if c.kind == "text"][-1].messages
    # the exemplar is a few-shot exchange before the task: its task asked, its output answered
    assert [(m.type, m.content) for m in sent[1:3]] == [
        ("human", "Name a bookstore in one word!\n\nRequirements:\n- Use exactly 1 words."),
        ("ai", "one")]
    entry = archive.entries()[0]
    assert entry.score == 10.0 and entry.trajectory_id == second.trajectory_id
    assert third.archived and len(archive) == 2  # a different accepted output is kept too


def test_archive_refine_rejects_a_duplicate_output(tmp_path):
    archive = Archive(tmp_path / "a", embedder=HashingEmbedder())
    arch = ArchiveRefine(ScriptedChatModel(default="one"), rubric=ONE_WORD, archive=archive)
    assert arch.run("Say one word.").archived
    assert not arch.run("Say one word, please.").archived  # same output: rejected as duplicate
    assert len(archive) == 1


def test_reflexion_reflects_stores_and_retries(tmp_path):
    memory = ReflexionMemory(tmp_path / "mem", embedder=HashingEmbedder())
    note = {"root_cause": "used we", "correction": "drop it", "lesson": "Never write we."}
    llm = ScriptedChatModel(responses=["We sell books", "We love books", "Books for all"],
                            structured={"ReflectionNote": [note, {**note, "lesson": "No we."}]})
    result = Reflexion(llm, rubric=NO_WE, memory=memory, max_iterations=3).run("Bookstore tagline.")
    assert result.output == "Books for all" and result.iterations == 3
    assert len(memory) == 2
    third_attempt = [c for c in llm.calls if c.kind == "text"][2].prompt
    assert "No we." in third_attempt and "Never write we." in third_attempt
    # a later run on a similar task recalls the stored lessons before its first attempt
    llm2 = ScriptedChatModel(responses=["Books for all"])
    again = Reflexion(llm2, rubric=NO_WE, memory=memory, min_similarity=None).run(
        "Bookstore tagline!")
    assert len(again.reflection_ids) == 2 and "Never write we." in llm2.calls[0].prompt


def test_reflexion_skips_the_judge_when_a_check_fails(tmp_path):
    memory = ReflexionMemory(tmp_path / "m", embedder=HashingEmbedder())
    rubric = Rubric([*NO_WE.features, Feature("vivid", "Vivid.", 1.0, kind="bool")])
    note = {"root_cause": "a", "correction": "b", "lesson": "Keep it short."}
    llm = ScriptedChatModel(responses=["We sell", "Ink and paper"],
                            structured={"ReflectionNote": [note],
                                        "RubricJudgement": [{"vivid": True, "overall_score": 7}]})
    result = Reflexion(llm, rubric=rubric, memory=memory).run("Tagline.")
    assert result.score == 10.0
    judged = [c.schema_name for c in llm.calls if c.kind == "structured"]
    assert judged == ["ReflectionNote", "RubricJudgement"]  # no judge call for the failed attempt
    assert result.trace[0].features == {"exclude_words": False, "vivid": False}


def test_resume_from_checkpoint_after_a_crash():
    saver = InMemorySaver()
    crash = {"armed": True}

    def refine_or_crash(messages: Any) -> str:
        if crash["armed"]:
            crash["armed"] = False
            raise KeyboardInterrupt("process killed")  # not an Exception: escapes the node
        return "one"

    llm = ScriptedChatModel(responses=["two words"], default=refine_or_crash)
    arch = Reflection(llm, rubric=ONE_WORD, checkpointer=saver, llm_retries=0)
    with pytest.raises(KeyboardInterrupt):
        arch.run("Say one word.", thread_id="t1")
    state = arch.build().get_state({"configurable": {"thread_id": "t1"}})
    assert state.next == ("refine",) and len(state.values["rounds"]) == 1
    result = arch.resume("t1")
    assert result.ok and result.output == "one" and result.iterations == 2
    generates = [c for c in llm.calls if "Previous answer" not in c.prompt]
    assert len(generates) == 1  # generate was not run again: resumed at refine


def test_resume_without_checkpoint_is_a_clear_error():
    with pytest.raises(ValueError, match="checkpointer"):
        Reflection(ScriptedChatModel()).resume("t")
    with pytest.raises(ValueError, match="no checkpoint"):
        Reflection(ScriptedChatModel(), checkpointer=InMemorySaver()).resume("missing")


class AppState(TypedDict, total=False):
    task: str
    final: Round
    log: Annotated[list[str], operator.add]


def test_graphs_work_as_subgraphs_of_an_app(tmp_path):
    inner = create_reflection_graph(ScriptedChatModel(default="one"), rubric=ONE_WORD,
                                    name="writer")
    app = StateGraph(AppState)
    app.add_node("prepare", lambda s: {"log": ["prepared"]})
    app.add_node("writer", inner)
    app.add_node("publish", lambda s: {"log": [f"published {s['final'].draft}"]})
    app.add_edge("prepare", "writer")
    app.add_edge("writer", "publish")
    app.add_edge("publish", END)
    app.set_entry_point("prepare")
    out = app.compile(checkpointer=InMemorySaver()).invoke(
        {"task": "Say one word."}, {"configurable": {"thread_id": "app"}})
    assert out["log"] == ["prepared", "published one"] and out["final"].score == 10.0

    archived = create_archive_refine_graph(ScriptedChatModel(default="one"), rubric=ONE_WORD,
                                           archive=Archive(tmp_path, embedder=HashingEmbedder()))
    assert archived.invoke({"task": "Say one word."})["archived"] is True


def test_run_result_is_a_view_of_the_logged_trajectory(tmp_path):
    log = TrajectoryLog(tmp_path)
    result = Reflection(ScriptedChatModel(responses=["two words", "one"]), rubric=ONE_WORD,
                        trajectories=log).run("Say one word.")
    (logged,) = log.read()
    assert result.trajectory.model_dump() == logged.model_dump()
    assert (result.output, result.score, result.trace, result.errors) == (
        logged.final_output, logged.final_score, logged.rounds, logged.errors)
    assert result.features == logged.rounds[1].features and result.passed
    dumped = result.model_dump(mode="json", exclude={"trace"})
    assert list(dumped) == ["task", "output", "score", "features", "passed", "iterations",
                            "archived", "stop_reason", "trajectory_id", "exemplar_ids",
                            "reflection_ids", "usage", "latency_s", "errors"]
    refused = Reflection(ScriptedChatModel(), rubric=ONE_WORD).batch([""])[0]
    assert refused.trajectory_id is None and refused.output is None and not refused.ok


def test_batch_and_run_specs_take_task_specs_with_their_own_rubric():
    llm = ScriptedChatModel(default="one")
    arch = Reflection(llm, rubric=NO_WE, max_iterations=1)
    specs = [TaskSpec(task="Say one word.", constraints={"exact_words": 2}), "Say a word."]
    results = arch.batch(specs, max_concurrency=2)
    assert [sorted(r.features) for r in results] == [["exact_words"], ["exclude_words"]]
    assert [r.passed for r in results] == [False, True] and results[1].score == 10.0
    again = run_specs(arch, specs, max_concurrency=1, progress="specs")
    assert [r.score for r in again] == [r.score for r in results]
    assert [r.score for r in asyncio.run(arch.abatch(specs))] == [r.score for r in results]


def test_architecture_names_are_checked_in_one_place():
    assert architecture_class("reflexion") is Reflexion
    with pytest.raises(ConfigError, match="unknown architecture 'self_refine'; choose one of"):
        architecture_class("self_refine")


def test_one_retry_policy_for_generation_and_reflection(tmp_path):
    down = ScriptedChatModel(responses=[RuntimeError("down")] * 3)
    result = Reflection(down, rubric=ONE_WORD, retry=RetryPolicy(max_attempts=1)).run("x")
    assert len(down.calls) == 1 and "RuntimeError: down" in result.errors[0]
    with pytest.raises(ConfigError, match="not both"):
        Reflection(ScriptedChatModel(), retry=RetryPolicy(), llm_retries=1)
    with pytest.raises(ConfigError, match="llm_retries=-1"):
        Reflection(ScriptedChatModel(), llm_retries=-1)
    # the reflect step is retried too: an invalid note is fed back and asked again
    memory = ReflexionMemory(tmp_path / "m", embedder=HashingEmbedder())
    note = {"root_cause": "a", "correction": "b", "lesson": "Drop we."}
    llm = ScriptedChatModel(responses=["We sell", "Ink and paper"],
                            structured={"ReflectionNote": [{"lesson": 3}, note]})
    result = Reflexion(llm, rubric=NO_WE, memory=memory, retry_backoff_s=0.0).run("Tagline.")
    assert result.ok and result.output == "Ink and paper" and len(memory) == 1
    notes = [c for c in llm.calls if c.schema_name == "ReflectionNote"]
    assert len(notes) == 2 and "That answer was invalid" in notes[1].prompt


def test_rounds_survive_a_strict_checkpoint_serializer():
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    saver = InMemorySaver(serde=JsonPlusSerializer(allowed_msgpack_modules=None))
    arch = Reflection(ScriptedChatModel(responses=["two words", "one"]), rubric=ONE_WORD,
                      checkpointer=saver)
    result = arch.run("Say one word.", thread_id="strict")
    values = arch.build().get_state({"configurable": {"thread_id": "strict"}}).values
    assert all(isinstance(r, Round) for r in values["rounds"])
    assert isinstance(values["final"], Round) and values["final"].draft == "one"
    assert values["trajectory"].id == result.trajectory_id


def test_a_given_rubric_that_drops_stated_constraints_says_so() -> None:
    import warnings

    from agentic_loop.architectures.nodes import UncheckedConstraintsWarning

    llm = ScriptedChatModel(responses=["hello there"])
    arch = Reflection(llm, rubric=Rubric.for_constraints(lowercase=True), max_iterations=1)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        arch.run("Say hello in exactly 2 words.")
    assert any(issubclass(w.category, UncheckedConstraintsWarning)
               and "exact_words=2" in str(w.message) for w in seen)
    quiet = Reflection(ScriptedChatModel(responses=["hello there"]), max_iterations=1,
                       rubric=Rubric.for_constraints(exact_words=2))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        quiet.run("Say hello in exactly 2 words.")
    assert not any(issubclass(w.category, UncheckedConstraintsWarning) for w in seen)


def test_reflexion_stores_no_placeholder_lesson(tmp_path):
    memory = ReflexionMemory(tmp_path / "mem", embedder=HashingEmbedder())
    junk = {"root_cause": "x", "correction": "y", "lesson": "{{lesson}}}"}
    good = {**junk, "lesson": "Never write we."}
    llm = ScriptedChatModel(responses=["We sell books", "We love books", "Books for all"],
                            structured={"ReflectionNote": [junk, good]})
    Reflexion(llm, rubric=NO_WE, memory=memory, max_iterations=3).run("Bookstore tagline.")
    assert [e.reflection for e in memory.entries()] == ["Never write we."]
