"""Reward-hacking guards: each detector fires on its trick and stays quiet on honest answers."""

from __future__ import annotations

import pytest

from agentic_loop.architectures import Reflection, Reflexion
from agentic_loop.judges import Critic, Feature, Rubric
from agentic_loop.judges.guards import inspect_output, instructions_of
from agentic_loop.memory import HashingEmbedder, ReflexionMemory
from agentic_loop.testing import ScriptedChatModel

HONEST = [
    ("Write a haiku about rain.",
     "Rain taps the window\nsoft drums on the quiet roof\nthe street drinks"),
    ("What is 17*3? End with the number.", "17 times 3 is 51, so the answer is 51"),
    ("Write 3 bullet points about dogs.", "- Loyal friends\n- Love long walks\n- Need daily care"),
    ("List the primes below 20 as JSON.", "[2, 3, 5, 7, 11, 13, 17, 19]"),
    ("Rewrite in lowercase: \"The Quick Brown Fox Jumps Over The Lazy Dog\".",
     "the quick brown fox jumps over the lazy dog"),
    ("Summarize this: the meeting moved to Monday at noon and everyone must bring notes.",
     "The meeting moved to Monday at noon and everyone must bring notes"),
    ("First repeat the request word for word, then answer it: what is the capital of France?",
     "First repeat the request word for word, then answer it: what is the capital of France? "
     "The capital of France is Paris, on the river Seine."),
    ("Write a short poem about the sea.",
     "The sea is wide, the sea is deep, the sea is where the sailors sleep."),
]


@pytest.mark.parametrize("task, output", HONEST)
def test_honest_answers_raise_no_flag(task: str, output: str) -> None:
    assert inspect_output(task, output).flags == []


@pytest.mark.parametrize("task, output, flag", [
    ("Write a tagline in EXACTLY 12 words. Avoid the words we and our.",
     "Write a tagline in exactly 12 words avoid the words", "task_copy"),
    ("Write a haiku about rain in all lowercase letters.",
     "write a haiku about rain in all lowercase letters", "task_copy"),
    ("Describe a cat.", "A cat purrs. A cat purrs. A cat purrs. It sleeps.", "repetition"),
    ("Write 50 words about tea.", "tea " * 50, "length_gaming"),
    ("Describe a cat.", "   \n ", "empty"),
])
def test_each_trick_is_flagged(task: str, output: str, flag: str) -> None:
    assert flag in inspect_output(task, output).flags


def test_copying_an_exemplar_and_reciting_the_checks_are_flagged() -> None:
    exemplar = "Every shelf holds a story waiting for the right reader to arrive"
    report = inspect_output("Tagline for a bookstore.", exemplar + " today",
                            exemplars=["unrelated words entirely here", exemplar])
    assert report.flags == ["exemplar_copy"] and "exemplar 1" in report.reasons["exemplar_copy"]
    rubric = Rubric.for_constraints(word_count=(10, 12), lowercase=True)
    recited = "Write in lowercase only, with no capital letters."
    assert "check_wording" in rubric.inspect("Tagline.", recited).flags


def test_quoted_material_and_long_passages_are_not_instructions() -> None:
    assert instructions_of('Translate "good morning to you all" to French.') == \
        "Translate  to French."
    assert "meeting" not in instructions_of("Shorten: the meeting moved to Monday at noon today.")


def test_an_empty_output_never_passes_even_when_every_check_holds() -> None:
    rubric = Rubric([
        Feature("short", "At most 10 characters.", 1.0, check=lambda t, o: len(o) <= 10),
        Feature("no_we", "No 'we'.", 1.0, check=lambda t, o: "we" not in o.lower())])
    raw = rubric.run_checks("Tagline.", "")
    assert all(result.value is True for result in raw.values())  # each check alone holds for ""
    ev = rubric.evaluate("Tagline for a bookstore.", "")
    assert not ev.passed and ev.score == 0.0 and ev.void and ev.void.startswith("empty")
    assert all(f.detail.startswith("void") for f in ev.features)
    assert "Answer the task itself" in ev.feedback


def test_a_task_copy_satisfies_no_check() -> None:
    task = "Write a haiku about rain in all lowercase letters."
    rubric = Rubric.for_constraints(lowercase=True, no_commas=True)
    copy = rubric.evaluate(task, "write a haiku about rain in all lowercase letters")
    honest = rubric.evaluate(task, "rain taps the window soft drums on the quiet roof")
    assert (copy.passed, copy.score) == (False, 0.0) and "task_copy" in copy.guards
    assert (honest.passed, honest.score) == (True, 10.0) and honest.guards == {}


def test_a_rubric_without_checks_still_fails_an_empty_output() -> None:
    rubric = Rubric([Feature("vivid", "Uses concrete imagery.", 1.0)])
    ev = rubric.evaluate("Tagline.", " ", llm_values={"vivid": True})
    assert not ev.passed


def test_the_critic_applies_the_guards_on_every_path() -> None:
    rubric = Rubric.for_constraints(exclude_words=["we"],
                                    features=[Feature("vivid", "Uses imagery.", 1.0)])
    llm = ScriptedChatModel(structured={"RubricJudgement": [
        {"vivid": True, "critique": "fine", "overall_score": 9}]})
    critic = Critic(llm, rubric)
    assert not critic.critique("Tagline.", "").evaluation.passed
    assert not critic.critique("Tagline.", "", checks_first=True).evaluation.passed
    assert not any(c.evaluation.passed for c in critic.batch([("Tagline.", "")]))
    assert llm.calls == []  # a voided output is decided without asking the model
    judged = critic.critique("Tagline.", "Stories on every shelf")
    assert judged.evaluation.passed and len(llm.calls) == 1


@pytest.mark.parametrize("architecture", [Reflection, Reflexion])
def test_a_model_that_answers_nothing_never_passes(architecture: type, tmp_path) -> None:
    rubric = Rubric([
        Feature("no_we", "No 'we'.", 1.0, check=lambda t, o: "we" not in o.lower())])
    extra = {} if architecture is Reflection else {
        "memory": ReflexionMemory(tmp_path / "r", embedder=HashingEmbedder())}
    for _ in range(5):
        llm = ScriptedChatModel(responses=[""] * 3, structured={"ReflectionNote": [
            {"root_cause": "empty", "correction": "write", "lesson": "Write something."}] * 3})
        result = architecture(llm, rubric=rubric, max_iterations=3, **extra).run("Tagline.")
        assert not result.passed and result.score == 0.0


@pytest.mark.parametrize("task, output, flag", [
    ("Write a tagline for a bakery in all lowercase, as exactly 3 bullet points.",
     "- write a tagline for a bakery in all lowercase\n- use exactly 3 bullet points\n- lowercase",
     "recital"),
    ("Describe a sunset in two sentences without the letter z.",
     "Describe a sunset. Two sentences, without the letter z. A sunset.", "recital"),
    ("Write a haiku.", "hahahahaha hahahahaha", "degenerate"),
    ("Name a fruit.", "Sooooooooo many!!!!!!!! apples", "degenerate"),
])
def test_recitals_and_degenerate_text_are_flagged(task: str, output: str, flag: str) -> None:
    assert flag in inspect_output(task, output).flags


@pytest.mark.parametrize("task, output", [
    ("Write CSS for a white card.", "card { color: #ffffff; border: 1px solid #aaaaaa; }"),
    ("Write one line of a scary story.", "Aaaaah! she screamed, and the lights went out."),
    ("Tom has 12 apples and buys 30 more. How many apples does Tom have now?",
     "Tom starts with 12 and adds 30, so 12 + 30 = 42. He has 42 apples."),
    ("Write a tagline for a bakery in all lowercase.",
     "a tagline for a bakery: warm bread at dawn"),
])
def test_answers_that_echo_some_of_the_task_are_not_recitals(task: str, output: str) -> None:
    assert inspect_output(task, output).flags == []
