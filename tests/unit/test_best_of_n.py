"""Turning a verifier's signal into passes (issue #20, point 2): best-of-n inside a round, a
temperature schedule across rounds, literal feedback, the model of each round, LLM-seconds.

Scripted models stand in for the LLM: what is tested is the control flow (which
sample wins, what each call was asked with, what the round records).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from pydantic import ValidationError

from agentic_loop.architectures import Reflection, Reflexion
from agentic_loop.architectures.schemas import RunSettings
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Feature, Rubric
from agentic_loop.testing import ScriptedChatModel

THREE_WORDS = Rubric.for_constraints(exact_words=3)


def text_calls(llm: ScriptedChatModel) -> list[Any]:
    return [c for c in llm.calls if c.kind == "text"]


def test_best_of_n_keeps_the_sample_the_checks_prefer_and_records_the_others():
    llm = ScriptedChatModel(responses=["one two", "one two three four", "Fresh bread daily",
                                       "x"])
    result = Reflection(llm, rubric=THREE_WORDS, samples_per_round=4, max_iterations=1).run(
        "Tagline for a bakery in three words.")
    assert (result.output, result.passed, result.iterations) == ("Fresh bread daily", True, 1)
    [round_] = result.trace
    assert len(text_calls(llm)) == 4 and result.usage.llm_calls == 4  # n samples, n calls
    others = round_.alternatives
    assert {c.draft for c in others} == {"one two", "one two three four", "x"}
    assert all(not c.passed and not c.judged for c in others)
    assert [c.score for c in others] == sorted((c.score for c in others), reverse=True)
    # every sample was asked the same prompt, the one the round records
    assert round_.prompt is not None
    assert all([m.content for m in c.messages] == [m["content"] for m in round_.prompt.messages()]
               for c in text_calls(llm))


def test_only_the_best_sample_is_judged_when_the_rubric_has_checks():
    rubric = Rubric.for_constraints(exact_words=3, features=[Feature("vivid", "Vivid.")])
    llm = ScriptedChatModel(responses=["a b", "Fresh bread daily", "a b c d"],
                            default_structured={"vivid": True, "overall_score": 9})
    result = Reflection(llm, rubric=rubric, samples_per_round=3, max_iterations=1).run("t")
    judged = [c for c in llm.calls if c.kind == "structured"]
    assert len(judged) == 1 and "Fresh bread daily" in judged[0].prompt
    assert result.output == "Fresh bread daily" and result.features["vivid"] is True


def test_without_checks_every_sample_is_judged_and_the_best_judged_wins():
    rubric = Rubric([Feature("vivid", "Vivid.")])
    llm = ScriptedChatModel(responses=["dull", "golden crust at dawn", "plain"],
                            default_structured=lambda schema, msgs: {
                                "vivid": "golden" in msgs[-1].content, "overall_score": 5})
    result = Reflection(llm, rubric=rubric, samples_per_round=3, max_iterations=1).run("t")
    assert len([c for c in llm.calls if c.kind == "structured"]) == 3
    assert result.output == "golden crust at dawn"
    assert all(c.judged and c.score == 0.0 for c in result.trace[0].alternatives)


def test_a_seeded_model_gets_one_seed_per_sample():
    class Seeded(ScriptedChatModel):
        seed: int | None = 5

    llm = Seeded(default="one two")
    Reflection(llm, rubric=THREE_WORDS, samples_per_round=3, max_iterations=1).run("t")
    assert sorted(c.kwargs["seed"] for c in text_calls(llm)) == [5, 6, 7]


def test_the_temperature_schedule_sets_each_rounds_temperature():
    llm = ScriptedChatModel(default="too few")
    Reflection(llm, rubric=THREE_WORDS, refine="resample", max_iterations=4, plateau_patience=9,
               temperature=(0.3, 0.7, 1.0)).run("t")
    assert [c.kwargs.get("temperature") for c in text_calls(llm)] == [0.3, 0.7, 1.0, 1.0]

    plain = ScriptedChatModel(default="too few")
    Reflection(plain, rubric=THREE_WORDS, max_iterations=2, plateau_patience=9).run("t")
    assert all("temperature" not in c.kwargs for c in plain.calls)  # the model's own

    by_round = ScriptedChatModel(default="too few")
    Reflection(by_round, rubric=THREE_WORDS, max_iterations=2, plateau_patience=9,
               temperature=lambda i: None if i == 0 else 1.2).run("t")
    assert [c.kwargs.get("temperature") for c in text_calls(by_round)] == [None, 1.2]


def test_a_run_sets_samples_and_temperature_in_its_context():
    llm = ScriptedChatModel(default="Fresh bread daily")
    graph = Reflection(llm, rubric=THREE_WORDS).build()
    out = graph.invoke({"task": "t"}, context=RunSettings(samples_per_round=2, temperature=0.4))
    assert out["passed"] and len(text_calls(llm)) == 2
    assert {c.kwargs["temperature"] for c in text_calls(llm)} == {0.4}
    with pytest.raises(ValidationError, match="temperature"):
        RunSettings(temperature=[-1.0])


@pytest.mark.parametrize("bad", [{"samples_per_round": 0}, {"samples_per_round": 99},
                                 {"temperature": -0.5}, {"temperature": []},
                                 {"temperature": "hot"}])
def test_bad_sampling_settings_are_refused(bad):
    with pytest.raises(ConfigError, match=next(iter(bad))):
        Reflection(ScriptedChatModel(default="x"), **bad)


def test_feedback_lists_only_the_failed_checks_literally():
    rubric = Rubric.for_constraints(exact_words=3, lowercase=True,
                                    features=[Feature("vivid", "Vivid.")])
    llm = ScriptedChatModel(responses=["fresh bread every day", "fresh bread daily"],
                            default_structured={"vivid": False, "overall_score": 3})
    result = Reflection(llm, rubric=rubric, max_iterations=2).run("t")
    fix = text_calls(llm)[1].prompt.split("What to fix:\n", 1)[1].split("\n\n")[0]
    assert fix == "- Use exactly 3 words. (yours: 4 words)"  # no passed check, no judge text
    assert result.trace[1].feedback == "- Vivid."  # checks hold: the weak quality is named

    chatty = ScriptedChatModel(responses=["fresh bread every day", "fresh bread daily"],
                               default_structured={"vivid": False, "overall_score": 3,
                                                   "critique": "Mention the smell."})
    Reflection(chatty, rubric=rubric, max_iterations=2, critique_text=True).run("t")
    assert "- Mention the smell." in text_calls(chatty)[1].prompt


def test_each_round_records_the_model_that_answered_it():
    class Routed(ScriptedChatModel):
        """Answers the second call from a canary, as a router would say in its metadata."""

        def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                      run_manager: Any = None, **kwargs: Any) -> ChatResult:
            result = super()._generate(messages, stop, run_manager, **kwargs)
            if len(self.calls) == 2:
                result.generations[0].message.response_metadata = {"model_name": "canary-2",
                                                                   "route": "canary"}
            elif len(self.calls) == 3:
                result.generations[0].message.response_metadata = {}
            return result

    llm = Routed(responses=["a b", "a b c d", "a b c d e"], model_id="stable-1")
    result = Reflection(llm, rubric=THREE_WORDS, max_iterations=3, plateau_patience=9).run("t")
    assert [r.model for r in result.trace] == ["stable-1", "canary-2", "stable-1"]


def test_llm_seconds_count_concurrent_samples_once():
    def slow(messages: list[BaseMessage]) -> str:
        time.sleep(0.2)
        return "a b"

    llm = ScriptedChatModel(responses=[slow] * 4)
    result = Reflection(llm, rubric=THREE_WORDS, samples_per_round=4, max_iterations=1).run("t")
    assert result.usage.llm_calls == 4
    assert 0.2 <= result.usage.llm_seconds < 0.6  # four 0.2 s calls in flight together


def test_reflexion_draws_n_attempts_per_trial(tmp_path):
    from agentic_loop.memory import HashingEmbedder, ReflexionMemory

    memory = ReflexionMemory(tmp_path / "m", embedder=HashingEmbedder())
    llm = ScriptedChatModel(responses=["a", "Fresh bread daily"])
    result = Reflexion(llm, rubric=THREE_WORDS, memory=memory, samples_per_round=2).run("t")
    assert result.passed and result.iterations == 1 and len(memory) == 0
