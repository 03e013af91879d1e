"""The critic with a scripted model: schema, prompt, checks never asked, retries, errors."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from agentic_loop.judges import (
    Critic,
    CriticError,
    Critique,
    Feature,
    JudgeError,
    Judgement,
    LLMJudge,
    Rubric,
    copywriting_rubric,
)
from agentic_loop.testing import ScriptedChatModel

NAME = Critic.SCHEMA_NAME


def tagline_rubric() -> Rubric:
    return Rubric.for_constraints(
        word_count=(3, 6), exclude_words=["we", "our"],
        features=[
            Feature("vivid", "Uses concrete imagery.", 1.0),
            Feature("n_claims", "How many unsupported superlatives it makes.", 1.0, target=(0, 0)),
        ],
    )


def answer(**overrides: Any) -> dict[str, Any]:
    base = {"vivid": True, "n_claims": 0, "critique": "Add a smell.", "overall_score": 8}
    return {**base, **overrides}


def test_schema_has_exactly_the_llm_features_plus_critique_and_overall() -> None:
    critic = Critic(ScriptedChatModel(), tagline_rubric())
    schema = critic.schema
    assert schema is not None and schema.__name__ == NAME
    assert list(schema.model_fields) == ["vivid", "n_claims", "critique", "overall_score"]
    json_schema = schema.model_json_schema()
    assert json_schema["additionalProperties"] is False
    props = json_schema["properties"]
    assert props["vivid"]["type"] == "boolean"
    assert props["n_claims"]["type"] == "integer"
    assert (props["n_claims"]["minimum"], props["n_claims"]["maximum"]) == (0, 100)
    assert props["critique"]["maxLength"] == 300
    assert (props["overall_score"]["minimum"], props["overall_score"]["maximum"]) == (1, 10)
    assert props["vivid"]["description"] == "Uses concrete imagery."
    with pytest.raises(ValidationError):
        schema.model_validate({**answer(), "word_count": 4})  # extra="forbid"


def test_critique_composes_checks_and_llm_values() -> None:
    fake = ScriptedChatModel(structured={NAME: [answer(vivid=False, n_claims=1, overall_score=9)]})
    critique = Critic(fake, tagline_rubric()).critique("Tagline for a bakery.",
                                                       "We bake the best bread")
    assert isinstance(critique, Critique)
    assert critique.values == {"word_count": 5, "exclude_words": False, "vivid": False,
                               "n_claims": 1}
    assert critique.score == 2.5  # only word_count earns credit
    assert critique.overall_score == 9  # kept, never used in the score
    assert critique.critique == "Add a smell."
    assert critique.attempts == 1
    assert critique.passed is False
    assert "found \"we\"" in critique.feedback
    assert "Uses concrete imagery." in critique.feedback
    assert "Reviewer's advice: Add a smell." in critique.feedback


def test_overall_score_never_changes_the_composite() -> None:
    scores = set()
    for overall in (1, 5, 10):
        fake = ScriptedChatModel(structured={NAME: [answer(overall_score=overall)]})
        scores.add(Critic(fake, tagline_rubric()).critique("t", "Warm rye at dawn").score)
    assert scores == {10.0}


def test_checks_are_never_asked_of_the_llm() -> None:
    fake = ScriptedChatModel(structured={NAME: [answer()]})
    rubric = tagline_rubric()
    Critic(fake, rubric).critique("Tagline for a bakery.", "Warm rye at dawn")
    [call] = fake.calls
    assert call.kind == "structured" and call.schema_name == NAME
    prompt = call.prompt
    assert "Tagline for a bakery." in prompt and "Warm rye at dawn" in prompt
    assert "- vivid (true/false): Uses concrete imagery." in prompt
    assert "- n_claims (count, 0-100)" in prompt
    # the check facts are shown as decided facts, never as fields to answer
    assert "- word_count" not in prompt and "- exclude_words" not in prompt
    assert "Use between 3 and 6 words. -> OK (4 words)" in prompt


def test_retries_then_succeeds() -> None:
    fake = ScriptedChatModel(structured={NAME: [
        ValueError("model produced garbage"),
        {"vivid": "maybe", "n_claims": 0, "critique": "x", "overall_score": 5},  # invalid type
        answer(),
    ]})
    critique = Critic(fake, tagline_rubric(), max_retries=2).critique("t", "Warm rye at dawn")
    assert critique.attempts == 3
    assert len(fake.calls) == 3


def test_retries_are_bounded_then_critic_error() -> None:
    too_long = answer(critique="x" * 301)
    out_of_range = answer(overall_score=11)
    negative = answer(n_claims=-1)
    fake = ScriptedChatModel(structured={NAME: [too_long, out_of_range, negative, answer()]})
    with pytest.raises(CriticError,
                       match=r"no valid RubricJudgement from the model after 3 attempt") as info:
        Critic(fake, tagline_rubric(), max_retries=2).critique("t", "Warm rye at dawn")
    assert info.value.attempts == 3
    assert isinstance(info.value.last_error, ValidationError)
    assert isinstance(info.value, JudgeError)
    assert len(fake.calls) == 3  # the fourth (valid) answer was never requested


def test_zero_retries_means_one_attempt() -> None:
    fake = ScriptedChatModel(structured={NAME: [RuntimeError("server down")]})
    with pytest.raises(CriticError, match="after 1 attempt.*RuntimeError: server down"):
        Critic(fake, tagline_rubric(), max_retries=0).critique("t", "o p q")
    with pytest.raises(ValueError, match="max_retries"):
        Critic(fake, tagline_rubric(), max_retries=-1)


def test_checks_only_rubric_without_critique_text_makes_no_call() -> None:
    fake = ScriptedChatModel()  # any call would raise ScriptExhausted
    rubric = Rubric.for_constraints(word_count=(3, 6), no_commas=True)
    critique = Critic(fake, rubric, critique_text=False).critique("t", "Warm rye, at dawn")
    assert fake.calls == []
    assert critique.attempts == 0 and critique.critique is None and critique.overall_score is None
    assert critique.values == {"word_count": 4, "no_commas": False}
    assert critique.feedback == "Fix these requirements:\n- Do not use any commas. (has commas)"


def test_checks_only_rubric_with_critique_text_asks_only_for_text() -> None:
    fake = ScriptedChatModel(structured={NAME: [{"critique": "Drop the comma.",
                                                 "overall_score": 6}]})
    rubric = Rubric.for_constraints(no_commas=True)
    critic = Critic(fake, rubric)
    assert critic.schema is not None
    assert list(critic.schema.model_fields) == ["critique", "overall_score"]
    critique = critic.critique("t", "Warm rye, at dawn")
    assert critique.critique == "Drop the comma." and critique.score == 0.0


def test_critique_text_false_keeps_features_and_overall() -> None:
    critic = Critic(ScriptedChatModel(), tagline_rubric(), critique_text=False)
    assert critic.schema is not None
    assert list(critic.schema.model_fields) == ["vivid", "n_claims", "overall_score"]


def test_async_critique() -> None:
    fake = ScriptedChatModel(structured={NAME: [answer()]})
    critique = asyncio.run(Critic(fake, tagline_rubric()).acritique("t", "Warm rye at dawn"))
    assert critique.score == 10.0 and critique.attempts == 1


def test_async_retries_are_bounded() -> None:
    fake = ScriptedChatModel(structured={NAME: [ValueError("a"), ValueError("b")]})
    with pytest.raises(CriticError, match="after 2 attempt"):
        asyncio.run(Critic(fake, tagline_rubric(), max_retries=1).acritique("t", "o p q"))


def test_critic_accepts_models_returning_dicts() -> None:
    fake = ScriptedChatModel(structured={NAME: [answer()]})

    class DictModel(ScriptedChatModel):
        def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            inner = super().with_structured_output(schema, **kwargs)
            return inner | (lambda parsed: parsed.model_dump())

    dict_model = DictModel(structured=fake.structured)
    assert Critic(dict_model, tagline_rubric()).critique("t", "Warm rye at dawn").score == 10.0


def test_critic_on_copywriting_rubric_checks_decide() -> None:
    """A judge that says yes to everything cannot rescue a draft that fails the checks."""
    yes_man = ScriptedChatModel(default_structured=lambda schema, messages: {
        **{name: True for name in schema.model_fields if name not in ("critique", "overall_score")},
        "critique": "Perfect.", "overall_score": 10,
    })
    critic = Critic(yes_man, copywriting_rubric(word_range=(4, 10)))
    good = critic.critique("Tagline for a bakery.", "Warm rye waiting at dawn")
    bad = critic.critique("Tagline for a bakery.",
                          "Unleash a game-changer bakery experience that will take it to the next "
                          "level for absolutely everyone in town today")
    assert good.score == 10.0
    assert bad.score < 4.0
    assert {good.overall_score, bad.overall_score} == {10}


def test_critic_rejects_non_rubric() -> None:
    with pytest.raises(TypeError, match="Critic needs a Rubric"):
        Critic(ScriptedChatModel(), [Feature("a", "b")])  # type: ignore[arg-type]


# -- LLMJudge baseline ---------------------------------------------------------


def test_llm_judge_returns_score_and_retries() -> None:
    fake = ScriptedChatModel(structured={"OverallJudgement": [
        {"score": 0, "reason": "out of range"}, {"score": 9, "reason": "Nice."}]})
    judgement = LLMJudge(fake).judge("Write a tagline.", "Books.")
    assert judgement == Judgement(score=9, reason="Nice.", attempts=2)
    assert "Write a tagline." in fake.calls[0].prompt


def test_llm_judge_error_after_retries() -> None:
    fake = ScriptedChatModel(structured={"OverallJudgement": [ValueError("x")] * 3})
    with pytest.raises(JudgeError, match="LLMJudge: no valid OverallJudgement.*after 3 attempt"):
        LLMJudge(fake, max_retries=2).judge("t", "o")


def test_llm_judge_async() -> None:
    fake = ScriptedChatModel(structured={"OverallJudgement": [{"score": 7, "reason": "ok"}]})
    assert asyncio.run(LLMJudge(fake).ajudge("t", "o")).score == 7


def test_model_without_structured_output_fails_clearly() -> None:
    class NoStructured(ScriptedChatModel):
        def with_structured_output(self, schema: type[BaseModel], **kwargs: Any) -> Any:  # type: ignore[override]
            raise NotImplementedError

    with pytest.raises(JudgeError, match="does not support with_structured_output"):
        LLMJudge(NoStructured()).judge("t", "o")


# -- batches -------------------------------------------------------------------


def scripted_by_output() -> ScriptedChatModel:
    """Answers keyed on the output in the prompt, so batch order does not matter."""
    seen: dict[str, int] = {}

    def respond(schema: type[BaseModel], messages: list[Any]) -> dict[str, Any]:
        # the whole prompt: a retry appends the validation error after the judge's prompt
        prompt = "\n".join(str(m.content) for m in messages)
        key = "flaky" if "flaky draft" in prompt else "broken" if "broken draft" in prompt else "ok"
        seen[key] = seen.get(key, 0) + 1
        if key == "broken" or (key == "flaky" and seen[key] == 1):
            raise ValueError(f"{key} answer")
        return answer(vivid="warm" in prompt)

    return ScriptedChatModel(default_structured=respond)


def test_batch_retries_failed_items_only() -> None:
    fake = scripted_by_output()
    items = [("t", "warm rye at dawn"), ("t", "a flaky draft here"), ("t", "cold plain bread")]
    critiques = Critic(fake, tagline_rubric(), max_retries=1).batch(items)
    assert [c.attempts for c in critiques] == [1, 2, 1]
    assert [c.values["vivid"] for c in critiques] == [True, False, False]
    assert len(fake.calls) == 4


def test_batch_failures_raise_or_are_returned_in_place() -> None:
    items = [("t", "warm rye at dawn"), ("t", "a broken draft here")]
    with pytest.raises(CriticError, match=r"item 1.*after 2 attempt.*broken answer"):
        Critic(scripted_by_output(), tagline_rubric(), max_retries=1).batch(items)
    mixed = Critic(scripted_by_output(), tagline_rubric(), max_retries=1).batch(
        items, return_exceptions=True)
    assert isinstance(mixed[0], Critique) and isinstance(mixed[1], CriticError)


def test_batch_without_llm_makes_no_call() -> None:
    fake = ScriptedChatModel()
    rubric = Rubric.for_constraints(exact_words=2)
    critiques = Critic(fake, rubric, critique_text=False).batch([("t", "a b"), ("t", "a")])
    assert [c.score for c in critiques] == [10.0, 5.0] and fake.calls == []


def test_llm_judge_batch() -> None:
    fake = ScriptedChatModel(default_structured=lambda schema, messages: {
        "score": 9, "reason": "fine"})
    judgements = LLMJudge(fake).batch([("t", "a"), ("t", "b")])
    assert [j.score for j in judgements] == [9, 9]


# -- checks first ------------------------------------------------------------------


def bool_rubric() -> Rubric:
    """Yes/no LLM features only, as in the ready rubrics Reflexion runs with."""
    return Rubric.for_constraints(word_count=(3, 6), exclude_words=["we", "our"],
                                  features=[Feature("vivid", "Uses concrete imagery.", 1.0)])


def reflexion_evaluate(critic: Critic, task: str, draft: str) -> Critique:
    """What Reflexion's evaluate step built by hand before the critic had checks-first."""
    rubric = critic.rubric
    checks = rubric.run_checks(task, draft)
    verdict = rubric.compose(checks, {f.name: False for f in rubric.llm_features}) \
        if rubric.llm_features else rubric.compose(checks)
    if verdict.passed and (rubric.llm_features or critic.critique_text):
        return critic.critique(task, draft, checks_first=False)
    return Critique(evaluation=verdict)


def test_checks_first_skips_the_model_when_a_check_fails() -> None:
    fake = ScriptedChatModel()  # any call would raise ScriptExhausted
    critic = Critic(fake, bool_rubric(), checks_first=True)
    critique = critic.critique("Tagline for a bakery.", "We bake the best bread")
    assert fake.calls == []
    assert critique.values == {"word_count": 5, "exclude_words": False, "vivid": False}
    assert critique.attempts == 0 and critique.critique is None and critique.overall_score is None
    assert critique.passed is False and critique.score == 3.333333
    assert 'found "we"' in critique.feedback and "Uses concrete imagery." in critique.feedback
    assert critique == reflexion_evaluate(Critic(fake, bool_rubric()), "Tagline for a bakery.",
                                          "We bake the best bread")


def test_checks_first_gives_count_features_no_credit() -> None:
    """A count the judge was not asked earns nothing (0 would satisfy 'exactly 0 claims')."""
    critique = Critic(ScriptedChatModel(), tagline_rubric(), checks_first=True).critique(
        "Tagline for a bakery.", "We bake the best bread")
    assert critique.values == {"word_count": 5, "exclude_words": False, "vivid": False,
                               "n_claims": 1}
    assert critique.score == 2.5


def test_checks_first_asks_the_model_when_every_check_passes() -> None:
    bool_answer = {"vivid": True, "critique": "Add a smell.", "overall_score": 8}
    fake = ScriptedChatModel(structured={NAME: [bool_answer, bool_answer]})
    critic = Critic(fake, bool_rubric(), checks_first=True)
    critique = critic.critique("Tagline for a bakery.", "Warm rye at dawn")
    assert critique.attempts == 1 and critique.score == 10.0 and len(fake.calls) == 1
    assert critique == reflexion_evaluate(critic, "Tagline for a bakery.", "Warm rye at dawn")


@pytest.mark.parametrize("critique_text", [True, False])
@pytest.mark.parametrize("draft", ["Warm rye at dawn", "We bake, we sell", "Bread"])
def test_checks_first_matches_reflexions_evaluate(critique_text: bool, draft: str) -> None:
    """Every branch (checks fail / pass, with and without LLM features and critique text)."""
    def scripted() -> ScriptedChatModel:
        return ScriptedChatModel(default_structured=lambda schema, messages: {
            **{n: True for n in schema.model_fields if n not in ("critique", "overall_score")},
            **({"critique": "Fine."} if "critique" in schema.model_fields else {}),
            "overall_score": 7})

    for rubric in (bool_rubric(), Rubric.for_constraints(word_count=(3, 6), no_commas=True)):
        first, second = scripted(), scripted()
        ours = Critic(first, rubric, critique_text=critique_text, checks_first=True)
        theirs = Critic(second, rubric, critique_text=critique_text)
        assert ours.critique("t", draft) == reflexion_evaluate(theirs, "t", draft)
        assert len(first.calls) == len(second.calls)


def test_checks_first_per_call_and_async_and_batch() -> None:
    fake = ScriptedChatModel(structured={NAME: [answer(), answer()]})
    critic = Critic(fake, tagline_rubric())
    assert critic.critique("t", "We bake", checks_first=True).attempts == 0
    assert fake.calls == []
    async_one = asyncio.run(Critic(fake, tagline_rubric(), checks_first=True).acritique(
        "t", "We bake the bread"))
    assert async_one.attempts == 0 and fake.calls == []
    batch = Critic(fake, tagline_rubric(), checks_first=True).batch(
        [("t", "We bake the bread"), ("t", "Warm rye at dawn"), ("t", "Bread")])
    assert [c.attempts for c in batch] == [0, 1, 0] and len(fake.calls) == 1
    assert batch[1].score == 10.0


def test_checks_first_batch_names_failed_items_by_their_own_position() -> None:
    items = [("t", "We bake the bread"), ("t", "a broken draft here")]
    with pytest.raises(CriticError, match=r"item 1.*after 2 attempt"):
        Critic(scripted_by_output(), tagline_rubric(), max_retries=1, checks_first=True).batch(
            items)


def test_a_retry_policy_overrides_max_retries() -> None:
    from agentic_loop.models.retry import RetryPolicy

    fake = ScriptedChatModel(structured={NAME: [ValueError("a")] * 4 + [answer()]})
    critic = Critic(fake, tagline_rubric(), retry=RetryPolicy(max_attempts=5, backoff_s=0.0))
    assert critic.max_retries == 4
    assert critic.critique("t", "Warm rye at dawn").attempts == 5
    assert "That answer was invalid: a" in fake.calls[1].prompt
