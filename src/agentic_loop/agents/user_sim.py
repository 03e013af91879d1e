"""A simulated user: who answers the agent after each final answer, until its goal is met.

Why: a support agent's work is a conversation, not one answer. It must ask
for what it lacks (an order number), look it up, answer, and answer again
when the user pushes back; a check of one reply cannot see any of that. A
task names a :class:`UserSimulator`, and the episode runner
(:mod:`.episode_run`) lets it answer the agent after each final answer,
on the same episode: the user's turns are :class:`~agentic_loop.episodes.UserStep`
steps, the step and wall-clock limits cover the whole conversation, and the
checks read the whole conversation through
:func:`~agentic_loop.episodes.current_episode`.

Two kinds, both plain data (a task file saves them):

* ``scripted``: a fixed list of replies, one per turn (deterministic: tests,
  the support task family);
* ``chat``: a chat model playing a ``persona`` with a ``goal``. It names its
  model by spec string (``model="local"``); **unnamed, it is the run's own
  model** (the chat model inside the agent), so a task file need not know
  which model a run uses. Its calls are traced under the run but are not the
  agent's steps: they do not count against ``max_steps``.

The conversation ends when the goal is met (the simulator's reply holds
:attr:`~UserSimulator.done_marker`, or the ``stop`` predicate holds: a
function ``stop(episode, **stop_args) -> bool`` over the conversation so far,
saved by reference like a rubric's check), or after ``max_turns`` replies
(a scripted user also stops when its replies run out). The episode's
``user_stop`` says which (``"goal"`` or ``"turn_limit"``).

Example:
    >>> from agentic_loop.episodes import Episode, ModelStep
    >>> user = UserSimulator.scripted(["It is order A1001.", "Thanks! [DONE]"])
    >>> asked = Episode(steps=[ModelStep(text="Which order?")], final="Which order?")
    >>> user.reply("Where is my order?", asked, turn=0).text
    'It is order A1001.'
    >>> user.reply("Where is my order?", asked, turn=1).stop
    'goal'
    >>> UserSimulator.model_validate_json(user.model_dump_json()) == user
    True
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_serializer,
    field_validator,
    model_validator,
)

from agentic_loop.clean_text import clean_text
from agentic_loop.episodes import Episode, ModelStep, UserStep, UserStop
from agentic_loop.errors import ConfigError
from agentic_loop.judges.check_refs import CheckReferenceError, check_reference, resolve_check
from agentic_loop.models import load_chat_model

__all__ = ["DEFAULT_DONE_MARKER", "MAX_USER_TURNS", "USER_SIM_KEY", "UserSimulator", "UserTurn",
           "current_user_sim", "simulating", "user_sim_of"]

#: What a simulated user says when its goal is met (compared case-insensitively).
DEFAULT_DONE_MARKER = "[DONE]"
#: The most replies a simulated user may give in one episode.
MAX_USER_TURNS = 20
#: The ``configurable`` key a run's user simulator travels under (see ``architectures.settings``).
USER_SIM_KEY = "agentic_loop_user_sim"

_SYSTEM = ("You play a customer writing to an assistant. You are: {persona}. Your goal: {goal}. "
           "Write only your next message to the assistant, short, in the first person; never "
           "answer for the assistant. When your goal is met, reply with {marker} alone.")


@dataclass(frozen=True)
class UserTurn:
    """The simulated user's move after an answer: a reply to send (``text``), or the end of
    the conversation (``stop``) with nothing more to send."""

    text: str | None = None
    stop: UserStop | None = None
    latency_s: float | None = None


class UserSimulator(BaseModel):
    """Who answers the agent after each final answer: scripted replies or a chat model."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    kind: Literal["scripted", "chat"] = "scripted"
    #: scripted: the replies, one per turn
    replies: list[str] = Field(default_factory=list)
    #: chat: who the user is and what they want
    persona: str = ""
    goal: str = ""
    #: chat: the model's spec string; None: the run's own model (the agent's chat model)
    model: str | None = None
    done_marker: str = Field(default=DEFAULT_DONE_MARKER, min_length=1)
    #: a predicate ``stop(episode, **stop_args) -> bool`` (a function, or its saved reference
    #: ``"module:function"`` / a registered name): True when the goal is met
    stop: str | Callable[..., Any] | None = None
    stop_args: dict[str, Any] = Field(default_factory=dict)
    max_turns: int = Field(default=3, ge=1, le=MAX_USER_TURNS)

    @model_validator(mode="after")
    def _complete(self) -> UserSimulator:
        if self.kind == "scripted" and not self.replies:
            raise ConfigError("a scripted user simulator needs replies=[...] (one per turn); "
                              "or make it kind='chat' with a persona and a goal")
        if self.kind == "chat" and not self.goal.strip():
            raise ConfigError("a chat user simulator needs a goal (what the user wants from the "
                              "conversation), e.g. goal='learn where order A1001 is'")
        return self

    @field_validator("stop")
    @classmethod
    def _stop_by_reference(cls, stop: Any) -> Any:
        """A saveable predicate is kept as its reference (so a task equals itself read back);
        a lambda stays a function: it works in this run, and refuses to be saved."""
        if stop is None or isinstance(stop, str):
            return stop
        if not callable(stop):
            raise ConfigError(f"stop must be a predicate stop(episode, **stop_args) -> bool or "
                              f"its reference 'module:function', got {stop!r:.80}")
        try:
            return check_reference(stop)
        except CheckReferenceError:
            return stop

    @field_serializer("stop")
    def _save_stop(self, stop: str | Callable[..., Any] | None) -> str | None:
        """A predicate is saved by reference; one without an importable name is refused."""
        return stop if stop is None or isinstance(stop, str) else check_reference(stop)

    @classmethod
    def scripted(cls, replies: list[str], **kwargs: Any) -> UserSimulator:
        """A user who gives these replies, one per turn (then stops)."""
        return cls(kind="scripted", replies=list(replies),
                   **{"max_turns": min(max(len(replies), 1), MAX_USER_TURNS), **kwargs})

    @classmethod
    def chat(cls, persona: str, goal: str, *, model: str | None = None,
             **kwargs: Any) -> UserSimulator:
        """A user played by a chat model (``model``: a spec; None: the run's model)."""
        return cls(kind="chat", persona=persona, goal=goal, model=model, **kwargs)

    def stop_test(self) -> Callable[..., Any] | None:
        """The stop predicate, resolved (a reference is imported or looked up)."""
        return resolve_check(self.stop) if isinstance(self.stop, str) else self.stop

    def reply(self, opening: str, episode: Episode, turn: int, *,
              model: BaseChatModel | None = None,
              config: RunnableConfig | None = None) -> UserTurn:
        """The user's move after the agent's answer (``episode``: the conversation so far,
        ``turn``: replies given before; ``opening``: the user's first message; ``model``: the
        run's model, for a chat simulator that names none).

        Raises:
            ConfigError: a chat simulator with no model named and none given.
        """
        test = self.stop_test()
        if test is not None and test(episode, **self.stop_args):
            return UserTurn(stop="goal")
        if turn >= self.max_turns or (self.kind == "scripted" and turn >= len(self.replies)):
            return UserTurn(stop="turn_limit")
        began = time.perf_counter()
        text = (self.replies[turn] if self.kind == "scripted"
                else self._chat(opening, episode, model, config))
        latency = round(time.perf_counter() - began, 4)
        if self.done_marker.casefold() in text.casefold():
            return UserTurn(stop="goal", latency_s=latency)
        return UserTurn(text=text, latency_s=latency)

    def _chat(self, opening: str, episode: Episode, model: BaseChatModel | None,
              config: RunnableConfig | None) -> str:
        llm = _loaded(self.model) if self.model is not None else model
        if llm is None:
            raise ConfigError("the chat user simulator names no model and the agent has no chat "
                              "model to lend it; give the simulator model='<spec>' (e.g. "
                              "model='local')")
        answer = llm.invoke(self.chat_messages(opening, episode), config)
        content = answer.content if isinstance(answer, BaseMessage) else answer
        return clean_text(content if isinstance(content, str) else str(content)).strip()

    def chat_messages(self, opening: str, episode: Episode) -> list[BaseMessage]:
        """The conversation as the simulating model sees it: roles swapped (its own words are
        the assistant's), the agent's tool calls and results hidden (a user sees answers).

        >>> from agentic_loop.episodes import ModelStep, UserStep
        >>> sim = UserSimulator.chat("a busy customer", "learn the order's status")
        >>> ep = Episode(steps=[ModelStep(text="Which order?"), UserStep(text="A1001"),
        ...                     ModelStep(text="It shipped.")])
        >>> [type(m).__name__ for m in sim.chat_messages("Where is my order?", ep)]
        ['SystemMessage', 'AIMessage', 'HumanMessage', 'AIMessage', 'HumanMessage']
        """
        out: list[BaseMessage] = [
            SystemMessage(_SYSTEM.format(persona=self.persona or "a customer",
                                         goal=self.goal, marker=self.done_marker)),
            AIMessage(opening)]
        for step in episode.steps:
            if isinstance(step, UserStep):
                out.append(AIMessage(step.text))
            elif isinstance(step, ModelStep) and step.text and not step.tool_calls:
                out.append(HumanMessage(step.text))
        return out


_models: dict[str, BaseChatModel] = {}
_models_lock = threading.Lock()


def _loaded(spec: str) -> BaseChatModel:
    """The simulator's model by spec, loaded once per process."""
    with _models_lock:
        if spec not in _models:
            _models[spec] = load_chat_model(spec)
        return _models[spec]


def user_sim_of(value: Any) -> UserSimulator | None:
    """``value`` (a simulator, its JSON dict, or None) as a :class:`UserSimulator`.

    >>> user_sim_of({"replies": ["hi"]}).kind
    'scripted'
    >>> user_sim_of(None) is None
    True
    """
    if value is None or isinstance(value, UserSimulator):
        return value
    if isinstance(value, Mapping):
        return UserSimulator.model_validate(dict(value))
    raise ConfigError(f"a user simulator is a UserSimulator or its JSON object, got "
                      f"{type(value).__name__}: {value!r:.80}")


_active: ContextVar[UserSimulator | None] = ContextVar("agentic_loop_user_sim", default=None)


def current_user_sim() -> UserSimulator | None:
    """The user simulator of the running episode's task (None: a single-turn task)."""
    return _active.get()


@contextmanager
def simulating(user: UserSimulator | None) -> Iterator[UserSimulator | None]:
    """Make ``user`` answer the agent in episodes run inside the block (the run's settings
    bind it per node; :func:`~.episode_run.run_episodes` reads it when given no ``user=``)."""
    token = _active.set(user)
    try:
        yield user
    finally:
        _active.reset(token)
