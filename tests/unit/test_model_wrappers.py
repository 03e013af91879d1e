"""Any LangChain chat model: wrappers of a chat model run through architectures and judges,
and specs that are not ours go to LangChain's init_chat_model."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.runnables import ConfigurableField, Runnable, RunnableLambda
from pydantic import BaseModel

from agentic_loop.architectures import Reflection
from agentic_loop.judges import Critic, Feature, LLMJudge, Rubric
from agentic_loop.models import (
    ModelLoadError,
    ModelSpecError,
    chat_model_of,
    load_chat_model,
    model_id_of,
    with_structured_output,
)
from agentic_loop.testing import ScriptedChatModel

#: A check and an LLM feature, so every run makes a text call and a structured (judge) call.
RUBRIC = Rubric([Feature("short", "At most 3 words.", 3.0, check=lambda t, o: len(o.split()) <= 3),
                 Feature("warm", "It sounds warm.", 1.0, kind="bool")])
JUDGEMENT = {"warm": True, "overall_score": 9}


def fake(model_id: str = "fake-1", **kw: Any) -> ScriptedChatModel:
    kw.setdefault("default", "Hi friend")
    kw.setdefault("default_structured", JUDGEMENT)
    return ScriptedChatModel(model_id=model_id, **kw)


def down(model_id: str = "down") -> ScriptedChatModel:
    """A primary model that always fails, so fallbacks are used."""
    return ScriptedChatModel(model_id=model_id, default=ConnectionError("primary down"),
                             default_structured=ConnectionError("primary down"))


WRAPPERS: dict[str, Callable[[ScriptedChatModel], Runnable[Any, Any]]] = {
    "bind": lambda m: m.bind(temperature=0.1),
    "with_config": lambda m: m.with_config(tags=["mine"]),
    "with_retry": lambda m: m.with_retry(stop_after_attempt=2, wait_exponential_jitter=False),
    "with_fallbacks": lambda m: down().with_fallbacks([m]),
    "configurable_fields": lambda m: m.configurable_fields(
        default=ConfigurableField(id="reply")),
    "configurable_alternatives": lambda m: m.configurable_alternatives(
        ConfigurableField(id="which"), default_key="main", other=fake("other")),
    "nested": lambda m: down().with_fallbacks(
        [m.bind(temperature=0.1).with_retry(stop_after_attempt=2)]),
}


@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_a_wrapped_model_runs_through_an_architecture(name: str) -> None:
    model = fake()
    wrapped = WRAPPERS[name](model)
    assert load_chat_model(wrapped) is wrapped
    arch = Reflection(wrapped, rubric=RUBRIC, max_iterations=1)
    result = arch.run("Greet me.")
    assert result.errors == [] and result.output == "Hi friend"
    assert result.features == {"short": True, "warm": True}  # the judge's structured call worked
    assert [c.kind for c in model.calls] == ["text", "structured"]
    expected_id = "down" if name in {"with_fallbacks", "nested"} else "fake-1"
    assert arch.model_id == expected_id == model_id_of(wrapped)


@pytest.mark.parametrize("name", ["bind", "nested"])
def test_bound_kwargs_reach_both_the_text_and_the_structured_call(name: str) -> None:
    model = fake()
    Reflection(WRAPPERS[name](model), rubric=RUBRIC, max_iterations=1).run("Greet me.")
    text, judged = model.calls
    assert text.kwargs.get("temperature") == 0.1 and judged.kwargs.get("temperature") == 0.1


def test_tool_kwargs_are_not_sent_with_a_structured_call() -> None:
    class Verdict(BaseModel):
        ok: bool

    model = ScriptedChatModel(default_structured={"ok": True})
    bound = model.bind(tools=[{"type": "function"}], tool_choice="any", temperature=0.0)
    assert with_structured_output(bound, Verdict).invoke("x") == Verdict(ok=True)
    assert model.calls[-1].kwargs == {"temperature": 0.0}


def test_with_retry_retries_the_structured_call_too() -> None:
    model = fake(structured={"RubricJudgement": [ConnectionError("blip"), JUDGEMENT]},
                 responses=[ConnectionError("blip"), "Hi friend"])
    wrapped = model.with_retry(stop_after_attempt=2, wait_exponential_jitter=False)
    result = Reflection(wrapped, rubric=RUBRIC, max_iterations=1).run("Greet me.")
    assert result.errors == [] and result.features["warm"] is True
    assert [c.kind for c in model.calls] == ["text", "text", "structured", "structured"]


def test_configurable_fields_are_configured_per_call_for_structured_output() -> None:
    class Verdict(BaseModel):
        ok: bool

    model = ScriptedChatModel(default_structured={"ok": False})
    wrapped = model.configurable_fields(default_structured=ConfigurableField(id="verdict"))
    ask = with_structured_output(wrapped, Verdict)
    assert ask.invoke("x") == Verdict(ok=False)
    assert ask.invoke("x", {"configurable": {"verdict": {"ok": True}}}) == Verdict(ok=True)


def test_judges_accept_wrapped_models() -> None:
    judge = LLMJudge(fake(default_structured={"score": 7, "reason": "fine"}).with_retry())
    assert judge.judge("Greet me.", "Hi").score == 7
    critic = Critic(down().with_fallbacks([fake()]), RUBRIC, critique_text=False)
    assert critic.critique("Greet me.", "Hi friend").values["warm"] is True
    assert critic.batch([("Greet me.", "Hi friend")])[0].values["warm"] is True


def test_a_runnable_without_a_chat_model_is_refused_up_front() -> None:
    echo = RunnableLambda(lambda x: x)
    with pytest.raises(ModelSpecError, match="not a chat model and wraps none"):
        load_chat_model(echo)
    with pytest.raises(ModelSpecError, match="not a chat model"):
        Reflection(echo, rubric=RUBRIC)  # type: ignore[arg-type]
    odd = fake().with_fallbacks([echo])  # generates, but the fallback has no structured output
    assert chat_model_of(odd).model_id == "fake-1"
    with pytest.raises(ModelSpecError, match="not a chat model"):
        with_structured_output(odd, BaseModel)


# -- specs that are not ours: LangChain's init_chat_model --------------------------------------


def test_a_provider_model_spec_goes_to_init_chat_model() -> None:
    from langchain_openai import ChatOpenAI

    llm = load_chat_model("openai:gpt-4o-mini", api_key="sk-test", temperature=0.0,
                          max_tokens=None)
    assert isinstance(llm, ChatOpenAI) and model_id_of(llm) == "gpt-4o-mini"
    assert llm.temperature == 0.0
    bare = load_chat_model("gpt-4o", api_key="sk-test")  # provider inferred by LangChain
    assert isinstance(bare, ChatOpenAI) and model_id_of(bare) == "gpt-4o"


def test_our_specs_stay_ours() -> None:
    from agentic_loop.models.openai_compat import OpenAICompatibleChatModel

    llm = load_chat_model("openai:http://127.0.0.1:9/v1", model="smol", check=False)
    assert isinstance(llm, OpenAICompatibleChatModel)


def test_init_chat_model_errors_are_ours_and_name_the_fix() -> None:
    with pytest.raises(ModelSpecError, match=r"\(LangChain\) refused model spec .zzz-model."):
        load_chat_model("zzz-model")
    with pytest.raises(ModelSpecError, match="refused"):
        load_chat_model("no-such-provider:model-x")
    if importlib.util.find_spec("langchain_anthropic") is None:  # a provider not installed
        with pytest.raises(ModelLoadError, match="install the provider's package"):
            load_chat_model("anthropic:claude-3-5-haiku-latest", api_key="x")
