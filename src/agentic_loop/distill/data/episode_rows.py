"""Agent episodes as training conversations: TRL's tool-calling messages, shared prefixes, checks.

Why here: a draft an agent wrote is a whole episode (model calls asking for
tools, the tools' results, maybe a simulated user's turns, the final answer),
and a trainer learns tool use only from that whole conversation. TRL's
conversational format holds it as it is: assistant messages with
``tool_calls`` (arguments as JSON objects), ``tool`` messages answering them
by ``tool_call_id``, and a row-level ``tools`` list of the schemas the model
was offered. :class:`Message` is that message; :func:`episode_messages` turns
an :class:`~agentic_loop.episodes.Episode` into those messages, ending with
the final answer; :func:`split_shared` cuts two episodes of one task into the
steps they share (a DPO prompt) and the rest of each (chosen and rejected).

Curation asks two more things of an episode: whether it is broken
(:func:`episode_problem`: it stopped before answering, a call got no result,
a result is an error or answers no call, a call names a tool the model was not
offered, the answer is empty), since a trainer must not learn a broken tool
path as a good one; and what makes two episodes the same row
(:func:`episode_signature`: the tool calls, by name and arguments).

Example:
    >>> from agentic_loop.episodes import Episode, ModelStep, ToolCall, ToolStep
    >>> ep = Episode(steps=[
    ...     ModelStep(tool_calls=[ToolCall(name="calculator", args={"expression": "53*47"})]),
    ...     ToolStep(name="calculator", args={"expression": "53*47"}, content="2491"),
    ...     ModelStep(text="53 * 47 = 2491.")], final="53 * 47 = 2491.",
    ...     tools=[{"type": "function", "function": {"name": "calculator"}}])
    >>> [m.model_dump(exclude_none=True) for m in episode_messages(ep, ep.final)]
    ... # doctest: +NORMALIZE_WHITESPACE
    [{'role': 'assistant', 'content': '',
      'tool_calls': [{'id': 'call_1', 'type': 'function',
                      'function': {'name': 'calculator', 'arguments': {'expression': '53*47'}}}]},
     {'role': 'tool', 'content': '2491', 'tool_call_id': 'call_1', 'name': 'calculator'},
     {'role': 'assistant', 'content': '53 * 47 = 2491.'}]
    >>> episode_meta(ep).model_dump(exclude_none=True)
    {'model_steps': 2, 'tool_calls': 1, 'tools_called': ['calculator']}
    >>> episode_problem(ep) is None, episode_signature(ep)
    (True, (('calculator', '{"expression": "53*47"}'),))
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from agentic_loop.distill.data.samples import Sample, task_key
from agentic_loop.episodes import Episode, ModelStep, ToolStep, UserStep

__all__ = [
    "EpisodeMeta",
    "Message",
    "OmitsAbsent",
    "ToolCallMessage",
    "ToolFunction",
    "answer_messages",
    "answer_text",
    "conversation_chars",
    "conversation_problem",
    "episode_messages",
    "episode_meta",
    "episode_meta_of",
    "episode_problem",
    "episode_signature",
    "fits_within",
    "is_sound",
    "offered_tools",
    "pair_problem",
    "row_tools",
    "same_row_key",
    "side_key",
    "split_shared",
]

#: The step kinds that are a user's turn (a simulated user answering the agent).


class OmitsAbsent(BaseModel):
    """A model whose fields named in ``_omitted`` are left out of its JSON when ``None``.

    Why: a row's optional parts (a message's ``tool_calls``, a row's ``tools``, its
    ``episode`` counts) exist only for agents; a plain row must be written exactly as before
    they existed, while its other ``None`` fields (``"passed": null``) keep being written.
    """

    _omitted: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _present_fields(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if v is not None or k not in self._omitted}


class ToolFunction(BaseModel):
    """The function a tool call names, with its arguments as a JSON object."""

    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any]


class ToolCallMessage(BaseModel):
    """One call in an assistant message's ``tool_calls`` (OpenAI's and TRL's shape)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    type: Literal["function"] = "function"
    function: ToolFunction


class Message(OmitsAbsent):
    """One chat message, as TRL's conversational format has it.

    Only the fields a message has are written (a plain ``{"role", "content"}``
    message stays exactly that), so rows of plain answers do not change.

    >>> Message(role="user", content="hi").model_dump_json()
    '{"role":"user","content":"hi"}'
    """

    model_config = ConfigDict(extra="forbid")

    _omitted = frozenset({"tool_calls", "tool_call_id", "name"})

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: list[ToolCallMessage] | None = None
    #: the call a ``tool`` message answers
    tool_call_id: str | None = None
    #: the tool a ``tool`` message is the result of
    name: str | None = None


class EpisodeMeta(OmitsAbsent):
    """What a row's episode did: its model calls, tool calls and the tools they named."""

    _omitted = frozenset({"user_turns"})

    model_steps: int
    tool_calls: int
    #: the tools that ran, in order (repeats kept)
    tools_called: list[str]
    #: the simulated user's turns, when the episode had any
    user_turns: int | None = None


def episode_meta(episode: Episode) -> EpisodeMeta:
    """The counts a row's metadata and the manifest keep of ``episode``."""
    users = len(episode.user_steps)
    return EpisodeMeta(model_steps=episode.model_calls,
                       tool_calls=sum(len(s.tool_calls) for s in episode.model_steps),
                       tools_called=episode.tools_called, user_turns=users or None)


def offered_tools(episode: Episode) -> set[str] | None:
    """The names of the tools the model was offered, or ``None`` when they were not recorded."""
    if episode.tools is None:
        return None
    return {str((spec.get("function") or {}).get("name", spec.get("name", "")))
            for spec in episode.tools if isinstance(spec, dict)}


def _answer(pending: list[str], names: dict[str, str], step: ToolStep) -> str | None:
    """The id of the pending call ``step`` answers (removed from ``pending``), or ``None``."""
    given = step.call_id or None
    same = [cid for cid in pending if names[cid] == step.name]
    if given is not None and given in pending:
        match = given
    elif same:  # recorded without an id, or with another one: the first call of its tool
        match = same[0]
    elif given is None and pending:
        match = pending[0]
    else:
        return None
    pending.remove(match)
    return match


def _call_ids(episode: Episode) -> tuple[dict[int, list[str]], dict[int, str | None], list[str]]:
    """One walk matching calls and results: each model step's call ids (the recorded id, else
    ``call_<n>`` by the call's position in the episode), the id each tool step answers
    (``None``: no pending call), and the calls left without a result."""
    calls: dict[int, list[str]] = {}
    answers: dict[int, str | None] = {}
    pending: list[str] = []
    names: dict[str, str] = {}
    n = 0
    for i, step in enumerate(episode.steps):
        if isinstance(step, ModelStep):
            calls[i] = []
            for call in step.tool_calls:
                n += 1
                cid = call.id or f"call_{n}"
                names[cid] = call.name
                pending.append(cid)
                calls[i].append(cid)
        elif isinstance(step, ToolStep):
            answers[i] = _answer(pending, names, step)
    return calls, answers, pending


def episode_messages(episode: Episode, final: str) -> list[Message]:
    """``episode``'s steps as TRL messages, ending with the assistant answer ``final``.

    Model calls become assistant messages (their ``tool_calls`` with the
    recorded ids, ``call_<n>`` when a call has none), tool results ``tool``
    messages (an error as ``"Error: <error>"``), a simulated user's turns user
    messages. The episode's last text-only model call is its answer: it is
    replaced by ``final`` (the draft that was judged), so the row ends on the
    answer its reward is for.
    """
    calls, answers, _ = _call_ids(episode)
    messages: list[Message] = []
    for i, step in enumerate(episode.steps):
        if isinstance(step, ModelStep):
            made = [ToolCallMessage(id=cid, function=ToolFunction(name=c.name, arguments=c.args))
                    for cid, c in zip(calls[i], step.tool_calls, strict=True)]
            messages.append(Message(role="assistant", content=step.text, tool_calls=made or None))
        elif isinstance(step, ToolStep):
            cid = answers[i] or step.call_id or f"result_{i}"
            body = step.content if step.error is None else f"Error: {step.error}"
            messages.append(Message(role="tool", content=body, tool_call_id=cid, name=step.name))
        elif isinstance(step, UserStep):
            messages.append(Message(role="user", content=step.text))
    if messages and messages[-1].role == "assistant" and not messages[-1].tool_calls:
        messages.pop()
    return [*messages, Message(role="assistant", content=final)]


def episode_problem(episode: Episode, final: str | None = None) -> str | None:
    """Why ``episode`` must not train as a good tool path, or ``None`` when it is sound.

    The rule names are counted in the curation log: ``stopped_<reason>`` (it
    ended on the step or time limit, or an error, not an answer),
    ``unknown_tool`` (a call names a tool the model was not offered, when the
    offer was recorded), ``tool_error`` (a result is an error),
    ``orphan_result`` (a result answers no call), ``unanswered_call`` (a call
    got no result), ``no_tool_schemas`` (it called tools, but the schemas it
    was offered were not recorded: a trainer needs them), ``empty_final`` (no
    answer; ``final`` overrides the episode's own).

    >>> from agentic_loop.episodes import ToolCall
    >>> episode_problem(Episode(steps=[ModelStep(tool_calls=[ToolCall(name="f")])],
    ...                         stop_reason="step_limit"))
    'stopped_step_limit'
    >>> episode_problem(Episode(steps=[ModelStep(tool_calls=[ToolCall(name="f")]),
    ...                                ModelStep(text="ok")], final="ok"))
    'unanswered_call'
    """
    if episode.stop_reason != "final":
        return f"stopped_{episode.stop_reason}"
    offered = offered_tools(episode)
    if offered is not None and any(c.name not in offered
                                   for s in episode.model_steps for c in s.tool_calls):
        return "unknown_tool"
    if episode.tool_errors:
        return "tool_error"
    _, answers, pending = _call_ids(episode)
    if any(cid is None for cid in answers.values()):
        return "orphan_result"
    if pending:
        return "unanswered_call"
    if offered is None and episode_signature(episode):
        return "no_tool_schemas"
    if not (episode.final if final is None else final).strip():
        return "empty_final"
    return None


def episode_signature(episode: Episode | None) -> tuple[tuple[str, str], ...]:
    """The tool calls of ``episode`` in order, as ``(name, arguments as sorted JSON)``, and a
    simulated user's turns as ``("<user>", text)``: with the task and the answer, what makes
    two agent rows the same row (empty for a plain answer)."""
    if episode is None:
        return ()
    found: list[tuple[str, str]] = []
    for step in episode.steps:
        if isinstance(step, ModelStep):
            found += [(c.name, json.dumps(c.args, sort_keys=True, ensure_ascii=False,
                                          default=str)) for c in step.tool_calls]
        elif isinstance(step, UserStep):
            found.append(("<user>", step.text))
    return tuple(found)


def conversation_chars(messages: Sequence[Message]) -> int:
    """The characters of a conversation: every message's text and its calls' arguments (as
    JSON), what a row's length limit counts.

    >>> conversation_chars([Message(role="user", content="hi"), Message(role="assistant",
    ...     content="", tool_calls=[ToolCallMessage(id="c", function=ToolFunction(
    ...         name="f", arguments={"x": 1}))])])
    11
    """
    return sum(len(m.content) + sum(len(c.function.name) + len(json.dumps(c.function.arguments))
                                    for c in m.tool_calls or ())
               for m in messages)


def _calls(message: Message) -> tuple[tuple[str, str], ...]:
    return tuple((c.function.name, json.dumps(c.function.arguments, sort_keys=True, default=str))
                 for c in message.tool_calls or ())


def _same(a: Message, b: Message) -> bool:
    """Two messages say the same (call ids aside: a model makes new ones every time)."""
    return (a.role, a.content, a.name, _calls(a)) == (b.role, b.content, b.name, _calls(b))


def split_shared(chosen: Sequence[Message], rejected: Sequence[Message]
                 ) -> tuple[list[Message], list[Message], list[Message]]:
    """The messages two episodes of one task share from the start, and the rest of each.

    Compared step by step (same calls with the same arguments, same results)
    up to the first step where they differ; each side keeps at least its last
    message (its answer). The shared part takes the chosen side's call ids,
    and the rejected side's later results are renamed to match them.

    >>> a = [Message(role="assistant", content="", tool_calls=[ToolCallMessage(
    ...     id="c1", function=ToolFunction(name="f", arguments={}))]),
    ...      Message(role="tool", content="1", tool_call_id="c1", name="f"),
    ...      Message(role="assistant", content="It is 1.")]
    >>> b = [a[0].model_copy(update={"tool_calls": [ToolCallMessage(
    ...     id="x9", function=ToolFunction(name="f", arguments={}))]}),
    ...      Message(role="tool", content="2", tool_call_id="x9", name="f"),
    ...      Message(role="assistant", content="It is 2.")]
    >>> shared, mine, theirs = split_shared(a, b)
    >>> len(shared), [m.content for m in mine], theirs[0].tool_call_id
    (1, ['1', 'It is 1.'], 'c1')
    """
    limit = min(len(chosen), len(rejected)) - 1
    n = 0
    while n < limit and _same(chosen[n], rejected[n]):
        n += 1
    renamed = {theirs.id: mine.id
               for a, b in zip(chosen[:n], rejected[:n], strict=True)
               for mine, theirs in zip(a.tool_calls or (), b.tool_calls or (), strict=True)}
    rest = [m.model_copy(update={"tool_call_id": renamed[m.tool_call_id]})
            if m.tool_call_id in renamed else m for m in rejected[n:]]
    return list(chosen[:n]), list(chosen[n:]), rest


# -- samples: what the datasets ask of a sample's answer ---------------------------------


def answer_messages(sample: Sample) -> list[Message]:
    """What a sample answers its prompt with: its episode's whole conversation
    (:func:`episode_messages`), else its text as one assistant message."""
    if sample.episode is not None:
        return episode_messages(sample.episode, sample.response)
    return [Message(role="assistant", content=sample.response)]


def is_sound(sample: Sample) -> bool:
    """Whether the sample is a plain answer or an unbroken episode (:func:`episode_problem`)."""
    return sample.episode is None or episode_problem(sample.episode, sample.response) is None


def row_tools(*samples: Sample) -> list[dict[str, Any]] | None:
    """A row's ``tools``: the schemas ``samples`` were offered, each tool once (by name, in the
    order first seen); ``None`` when none recorded any."""
    found = [s.episode.tools for s in samples
             if s.episode is not None and s.episode.tools is not None]
    if not found:
        return None
    by_name: dict[str, dict[str, Any]] = {}
    for spec in (spec for specs in found for spec in specs):
        by_name.setdefault(str((spec.get("function") or {}).get("name", "")), spec)
    return list(by_name.values())


def conversation_problem(messages: Sequence[Message],
                         tools: list[dict[str, Any]] | None) -> str | None:
    """Why a trainer would refuse ``messages`` with the row's ``tools``, or ``None``: a
    ``tool`` message that answers no earlier call (``orphan_result``), calls without schemas
    (``no_tool_schemas``), a call to a tool the schemas do not hold (``unknown_tool``).

    Why: a pair's rejected side may be a broken episode (a good negative), but its row must
    still be one a trainer reads.

    >>> conversation_problem([Message(role="tool", content="1", tool_call_id="c")], None)
    'orphan_result'
    """
    ids: set[str] = set()
    names: set[str] = set()
    for m in messages:
        ids.update(c.id for c in m.tool_calls or ())
        names.update(c.function.name for c in m.tool_calls or ())
        if m.role == "tool" and m.tool_call_id not in ids:
            return "orphan_result"
    if names and tools is None:
        return "no_tool_schemas"
    offered = {str((t.get("function") or {}).get("name", "")) for t in tools or ()}
    return "unknown_tool" if names - offered else None


def pair_problem(prompt: Sequence[Message], chosen: Sequence[Message],
                 rejected: Sequence[Message], tools: list[dict[str, Any]] | None) -> str | None:
    """:func:`conversation_problem` of a pair's prompt with either side, named by the side
    (``"rejected_orphan_result"``), or ``None`` when a trainer reads both."""
    return next((f"{side}_{problem}" for side, rest in (("chosen", chosen), ("rejected", rejected))
                 if (problem := conversation_problem([*prompt, *rest], tools))), None)


def episode_meta_of(sample: Sample) -> EpisodeMeta | None:
    """The sample's :func:`episode_meta`, or ``None`` for a plain answer."""
    return episode_meta(sample.episode) if sample.episode is not None else None


def same_row_key(sample: Sample) -> tuple[str, tuple[tuple[str, str], ...], str]:
    """Two samples giving this key are one row: the task, the tool calls (name and arguments,
    in order) and the answer, case and spacing aside."""
    return (sample.key, episode_signature(sample.episode), task_key(sample.response))


def answer_text(sample: Sample) -> str:
    """The text near-duplicate removal compares: the calls made, one a line, then the answer
    (two answers alike after different tool paths are different rows)."""
    calls = "".join(f"{name}({args})\n" for name, args in episode_signature(sample.episode))
    return calls + sample.response


def side_key(messages: Sequence[Message]) -> tuple[Any, ...]:
    """What makes two sides of a pair the same: each message's role, text (case and spacing
    aside), tool and calls (ids aside)."""
    return tuple((m.role, task_key(m.content), m.name, _calls(m)) for m in messages)


def fits_within(max_chars: int | None) -> Callable[[Sequence[Message]], bool]:
    """A test that a conversation has at most ``max_chars`` characters (``None``: any)."""
    return lambda messages: max_chars is None or conversation_chars(messages) <= max_chars
