"""Episodes: what an agent did between a prompt and its final answer, step by step, as data.

When the generator is an agent (a LangGraph graph, a messages Runnable, or a
chat model with tools), a draft is not one model call but an *episode*: model
calls that ask for tools, the tools' results, more model calls, and a final
answer. An :class:`Episode` keeps every step in order: each model call (the
text, the tool calls it asked for, tokens, latency, the model that answered)
and each tool result (content, error, latency), so a check can ask "did the
agent really run the verification?" of the record rather than of the answer's
claims, and training can replay the whole conversation.

Steps refer to the prompt by position: the prompt a model call saw is the
run's prompt plus every step before it (``sent`` counts the conversation's
messages at that call), so a long episode is stored once, not once per step.
Tool results are capped at :data:`MAX_TOOL_RESULT_CHARS` (the length they had
is kept in ``cut_from``), since one tool returning 9 MB must not make a run
unloggable.

Checks read the episode of the answer they judge through
:func:`current_episode`; the critic sets it around a check (see
:func:`judging_episode`), so a check keeps its ``(task, output)`` signature.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    >>> messages = [
    ...     HumanMessage("What is 53 * 47?"),
    ...     AIMessage("", tool_calls=[{"name": "calculator", "args": {"expression": "53*47"},
    ...                                "id": "c1"}]),
    ...     ToolMessage("2491", tool_call_id="c1", name="calculator"),
    ...     AIMessage("53 * 47 = 2491."),
    ... ]
    >>> episode = episode_from_messages(messages, start=1)
    >>> episode.final, episode.tools_called, episode.model_calls
    ('53 * 47 = 2491.', ['calculator'], 2)
    >>> episode.results_of("calculator")
    ['2491']
    >>> with judging_episode(episode):
    ...     current_episode() is episode
    True
    >>> current_episode() is None
    True
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Annotated, Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from pydantic import BaseModel, Field

from agentic_loop.clean_text import clean_text

__all__ = [
    "CUT_FROM_KEY",
    "EPISODE_STOPS",
    "MAX_TOOL_RESULT_CHARS",
    "Episode",
    "EpisodeStop",
    "ModelStep",
    "Step",
    "ToolCall",
    "ToolStep",
    "USER_STOPS",
    "UserStep",
    "UserStop",
    "cap_tool_output",
    "current_episode",
    "episode_from_messages",
    "judging_episode",
]

#: A tool result longer than this is cut to it in the record (and in what the agent sees, when
#: the package runs the tools); the step keeps the length it had in ``cut_from``.
MAX_TOOL_RESULT_CHARS = 20_000

#: The ``additional_kwargs`` key of a tool message a tool loop cut, holding the length it had.
CUT_FROM_KEY = "agentic_loop_cut_from"

EpisodeStop = Literal["final", "step_limit", "time_limit", "error"]
#: Why an episode ended: a final answer, the step or wall-clock limit, or an error it raised.
EPISODE_STOPS: tuple[EpisodeStop, ...] = ("final", "step_limit", "time_limit", "error")

UserStop = Literal["goal", "turn_limit"]
#: Why a simulated user ended a conversation: its goal was met (a done marker, a predicate),
#: or it had no turn left.
USER_STOPS: tuple[UserStop, ...] = ("goal", "turn_limit")


def cap_tool_output(content: Any, limit: int = MAX_TOOL_RESULT_CHARS) -> tuple[str, int | None]:
    """A tool result as recordable text at most ``limit`` characters, and the length it had.

    >>> cap_tool_output("x" * 10, limit=4)
    ('xxxx', 10)
    >>> cap_tool_output({"a": 1})
    ('{"a": 1}', None)
    """
    if isinstance(content, str):
        text = content
    elif isinstance(content, list) and all(isinstance(p, (str, dict)) for p in content):
        text = "".join(p if isinstance(p, str) else str(p.get("text", "")) for p in content)
    else:
        try:
            text = json.dumps(content, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = str(content)
    text = clean_text(text)
    return (text, None) if len(text) <= limit else (text[:limit], len(text))


class ToolCall(BaseModel):
    """A call the model asked for: the tool's name, its arguments and the call's id."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class ModelStep(BaseModel):
    """One model call of an episode: what it wrote and which tools it asked for."""

    kind: Literal["model"] = "model"
    #: messages of the conversation sent at this call (the prompt's plus the steps before it)
    sent: int | None = None
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_s: float | None = None
    #: the model that answered (its ``model_name``), when it said
    model: str | None = None


class ToolStep(BaseModel):
    """One tool result: the call it answers, the content (capped) or the error it raised."""

    kind: Literal["tool"] = "tool"
    call_id: str | None = None
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    content: str = ""
    error: str | None = None
    latency_s: float | None = None
    #: the result had this many characters and was cut to :data:`MAX_TOOL_RESULT_CHARS`
    cut_from: int | None = None


class UserStep(BaseModel):
    """A user's turn inside the episode: a simulated user's reply to the agent's answer
    (:mod:`agentic_loop.agents.user_sim`), after which the agent goes on."""

    kind: Literal["user"] = "user"
    text: str = ""
    latency_s: float | None = None


Step = Annotated[ModelStep | ToolStep | UserStep, Field(discriminator="kind")]


class Episode(BaseModel):
    """An agent's whole attempt at one prompt: its steps in order and its final answer."""

    steps: list[Step] = Field(default_factory=list)
    final: str = ""
    stop_reason: EpisodeStop = "final"
    error: str | None = None
    latency_s: float | None = None
    #: the system prompt the agent ran under (tool descriptions included), when it had one
    system: str | None = None
    #: the tools the model was offered, as OpenAI function specs (``{"type": "function",
    #: "function": {"name", "description", "parameters"}}``), when the recorder saw them:
    #: what a training row's ``tools`` column holds
    tools: list[dict[str, Any]] | None = None
    #: how a simulated user ended the conversation (None: no simulated user; left out of the
    #: JSON then, so records of single-turn episodes are as before)
    user_stop: UserStop | None = Field(default=None, exclude_if=lambda value: value is None)

    @property
    def model_steps(self) -> list[ModelStep]:
        """The model calls, in order."""
        return [s for s in self.steps if isinstance(s, ModelStep)]

    @property
    def tool_steps(self) -> list[ToolStep]:
        """The tool results, in order."""
        return [s for s in self.steps if isinstance(s, ToolStep)]

    @property
    def user_steps(self) -> list[UserStep]:
        """The user's turns inside the episode (a simulated user's replies), in order."""
        return [s for s in self.steps if isinstance(s, UserStep)]

    @property
    def model_calls(self) -> int:
        """How many times the model was called (an episode's *steps* in a step limit)."""
        return len(self.model_steps)

    @property
    def tools_called(self) -> list[str]:
        """The names of the tools that ran, in order (repeats kept)."""
        return [s.name for s in self.tool_steps]

    @property
    def tool_errors(self) -> list[ToolStep]:
        """The tool results that were errors."""
        return [s for s in self.tool_steps if s.error is not None]

    def called(self, name: str, **args: Any) -> bool:
        """True when tool ``name`` ran (with these arguments, when given) without an error.

        >>> Episode(steps=[ToolStep(name="calc", args={"x": 1}, content="1")]).called("calc", x=1)
        True
        """
        return any(s.name == name and s.error is None
                   and all(s.args.get(k) == v for k, v in args.items())
                   for s in self.tool_steps)

    def results_of(self, name: str | None = None) -> list[str]:
        """The contents tool ``name`` (every tool when ``None``) returned without an error."""
        return [s.content for s in self.tool_steps
                if (name is None or s.name == name) and s.error is None]

    def messages(self) -> list[BaseMessage]:
        """The steps as LangChain messages (assistant calls with their tool calls, tool
        results, a simulated user's turns), to replay the episode after its prompt: few-shot
        episodes, training rows.

        >>> ep = Episode(steps=[ModelStep(tool_calls=[ToolCall(name="f", id="1")]),
        ...                     ToolStep(call_id="1", name="f", content="ok"),
        ...                     ModelStep(text="done?"), UserStep(text="Yes, thanks."),
        ...                     ModelStep(text="done")], final="done")
        >>> [type(m).__name__ for m in ep.messages()]
        ['AIMessage', 'ToolMessage', 'AIMessage', 'HumanMessage', 'AIMessage']
        """
        out: list[BaseMessage] = []
        for step in self.steps:
            if isinstance(step, UserStep):
                out.append(HumanMessage(step.text))
            elif isinstance(step, ModelStep):
                out.append(AIMessage(step.text, tool_calls=[
                    {"name": c.name, "args": c.args, "id": c.id, "type": "tool_call"}
                    for c in step.tool_calls]))
            else:
                body = step.content if step.error is None else f"Error: {step.error}"
                out.append(ToolMessage(body, tool_call_id=step.call_id or "", name=step.name,
                                       status="success" if step.error is None else "error"))
        return out


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return clean_text(content)
    return clean_text("".join(p if isinstance(p, str) else str(p.get("text", ""))
                              for p in content if isinstance(p, (str, dict))))


def _declared_cut(message: ToolMessage) -> int | None:
    """The length a result had before it was cut on its way to the agent: a tool's
    ``{"cut_from": n}`` artifact (as :func:`agentic_loop.tools.safe_tool` writes), or the
    :data:`CUT_FROM_KEY` a tool loop put in ``additional_kwargs`` (``agents.tool_agent``)."""
    artifact = getattr(message, "artifact", None)
    had = artifact.get("cut_from") if isinstance(artifact, dict) else None
    if had is None:
        had = message.additional_kwargs.get(CUT_FROM_KEY)
    return had if isinstance(had, int) and not isinstance(had, bool) else None


def _tokens(message: AIMessage) -> tuple[int | None, int | None]:
    usage = message.usage_metadata
    if not usage:
        return None, None
    return usage.get("input_tokens"), usage.get("output_tokens")


def episode_from_messages(messages: Sequence[BaseMessage], *, start: int = 0,
                          stop_reason: EpisodeStop = "final", error: str | None = None,
                          latency_s: float | None = None,
                          timings: Sequence[float | None] = ()) -> Episode:
    """The episode in a conversation's messages from index ``start`` on (the prompt before it).

    ``timings`` gives each step's latency in order (from a callback recorder)
    when known. Tool results are capped; an error result (``status="error"``)
    is recorded as the step's ``error``; a user message after ``start`` (a simulated
    user's turn) is a :class:`UserStep`. The final answer is the last
    step's text when that step is a model call asking for no tool (else empty: the
    episode stopped before answering).
    """
    steps: list[ModelStep | ToolStep | UserStep] = []
    args_of: dict[str, tuple[str, dict[str, Any]]] = {}
    for index, message in enumerate(messages[start:]):
        latency = timings[len(steps)] if len(steps) < len(timings) else None
        if isinstance(message, AIMessage):
            calls = [ToolCall(name=c["name"], args=dict(c.get("args") or {}), id=c.get("id"))
                     for c in message.tool_calls]
            for call in calls:
                if call.id:
                    args_of[call.id] = (call.name, call.args)
            input_tokens, output_tokens = _tokens(message)
            steps.append(ModelStep(sent=start + index, text=_text(message), tool_calls=calls,
                                   input_tokens=input_tokens, output_tokens=output_tokens,
                                   latency_s=latency,
                                   model=(message.response_metadata or {}).get("model_name")))
        elif isinstance(message, ToolMessage):
            name, args = args_of.get(message.tool_call_id, (message.name or "", {}))
            content, cut_from = cap_tool_output(message.content)
            cut_from = cut_from if cut_from is not None else _declared_cut(message)
            failed = getattr(message, "status", "success") == "error"
            steps.append(ToolStep(call_id=message.tool_call_id, name=message.name or name,
                                  args=args, content="" if failed else content,
                                  error=(content or "the tool failed") if failed else None,
                                  latency_s=latency, cut_from=cut_from))
        elif isinstance(message, HumanMessage):
            steps.append(UserStep(text=_text(message), latency_s=latency))
    last = steps[-1] if steps else None
    final = last.text if isinstance(last, ModelStep) and not last.tool_calls else ""
    return Episode(steps=steps, final=final, stop_reason=stop_reason, error=error,
                   latency_s=latency_s)


_judged: ContextVar[Episode | None] = ContextVar("agentic_loop_judged_episode", default=None)


def current_episode() -> Episode | None:
    """The episode of the answer being checked, or ``None`` (a plain model's answer).

    A check that needs the episode (``lambda task, out: ...``) reads it here.
    """
    return _judged.get()


@contextmanager
def judging_episode(episode: Episode | None) -> Iterator[Episode | None]:
    """Make ``episode`` the :func:`current_episode` of checks run inside the block."""
    token = _judged.set(episode)
    try:
        yield episode
    finally:
        _judged.reset(token)
