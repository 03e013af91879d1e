"""Split what an architecture was given into its generator (a chat model or an agent) and the
chat model that judges, critiques and reflects.

Why: with a plain chat model one model does everything, as before. An agent
writes drafts, but the critic, the LLM-judged features and Reflexion's
reflections need a chat model: ``judge=`` when given, else the chat model
inside the agent (always known for a chat model plus ``tools=``, found in most
agent graphs). Only when none is found *and* one is needed (the rubric has
LLM-judged features, it is built from the task, or the architecture reflects)
is the agent refused, with the fix named; otherwise the judge is a stand-in
that refuses to be called (:class:`NoJudge`), so a checks-only rubric runs
an opaque agent with no judge at all.

Example:
    >>> from langchain_core.runnables import RunnableLambda
    >>> from agentic_loop.judges import Rubric
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> plain = split_generator(ScriptedChatModel(model_id="m"))
    >>> plain.agent is None, plain.model_id
    (True, 'm')
    >>> echo = RunnableLambda(lambda m: "hi", name="echo")
    >>> split_generator(echo, rubric=Rubric.for_constraints(exact_words=1)).model_id
    'echo'
    >>> split_generator(echo)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.models.errors.ModelSpecError: ... is not a chat model and wraps none, ... judge=...
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable, RunnableLambda

from agentic_loop.agents.adapt import AgentRunner, as_agent
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Rubric
from agentic_loop.models import load_chat_model
from agentic_loop.models.errors import ModelSpecError
from agentic_loop.models.wrappers import ChatModelLike, model_id_of

__all__ = ["Generator", "NoJudge", "split_generator"]


class NoJudge(BaseChatModel):
    """The judge of an agent that has no chat model: any call is a :class:`ConfigError`."""

    agent_name: str = "agent"

    @property
    def _llm_type(self) -> str:
        return "no-judge"

    @property
    def model_id(self) -> str:
        return self.agent_name

    def _refuse(self) -> ConfigError:
        return ConfigError(f"the agent {self.agent_name!r} has no chat model to judge with, and "
                           "this run needs one (LLM-judged features or reflection); pass "
                           "judge=<chat model or spec> to the architecture")

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None,
                  **kwargs: Any) -> ChatResult:
        raise self._refuse()

    def with_structured_output(self, schema: Any, *, include_raw: bool = False,
                               **kwargs: Any) -> Runnable[LanguageModelInput, Any]:
        def refuse(value: Any) -> Any:
            raise self._refuse()
        return RunnableLambda(refuse)


@dataclass(frozen=True)
class Generator:
    """The loop's models: ``llm`` generates when ``agent`` is None (else it is the agent's
    judge); ``judge`` critiques (``judge=``, else ``llm``)."""

    llm: ChatModelLike
    agent: AgentRunner | None
    model_id: str
    judge: ChatModelLike


def split_generator(llm: Any, tools: Sequence[Any] | None = None, judge: Any = None, *,
                    rubric: Rubric | None = None, reflects: bool = False) -> Generator:
    """The generator and judge of ``llm`` (a chat model, a spec, or an agent) and ``tools``.

    Raises :class:`~agentic_loop.models.errors.ModelSpecError` for an agent
    with no chat model to judge with when one is needed and ``judge`` is not given.
    """
    source = load_chat_model(llm) if isinstance(llm, str) else llm
    agent = as_agent(source, tools)
    judge_model = load_chat_model(judge) if judge is not None else None
    if agent is None:
        model = load_chat_model(source)
        return Generator(model, None, model_id_of(model), judge_model or model)
    found = judge_model or agent.chat_model
    if found is None:
        needs = reflects or rubric is None or bool(rubric.llm_features)
        if needs:
            why = ("the architecture reflects" if reflects else
                   "the rubric has LLM-judged features" if rubric is not None else
                   "the rubric is built from the task, with LLM-judged features")
            raise ModelSpecError(
                f"{repr(llm)[:120]} is not a chat model and wraps none, so it runs as an agent, "
                f"and {why}: pass judge=<chat model or spec> (e.g. judge='local') to judge its "
                "drafts, or a rubric of checks only")
        found = NoJudge(agent_name=agent.name)
    return Generator(found, agent, agent.name, found)
