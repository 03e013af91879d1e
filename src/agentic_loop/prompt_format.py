"""The chat a draft is asked with: the record a trajectory keeps, and the fresh-draft template.

Why a module of its own, below the graphs and the exporter: the architectures
send a fresh draft's prompt, every round records the prompt it was written
from (:class:`DraftPrompt`), and training rebuilds the same chat for runs
logged before prompts were recorded. Defined once here, the inference prompt
and the training prompt cannot drift apart, and ``distill`` needs no import
of the graphs to build it. The wording is literal and short: it must work on
a 135M model.

Retrieved exemplars are shown one of two ways. As *turns* (what
:class:`~agentic_loop.architectures.ArchiveRefine` sends): each exemplar is a
user turn (its task and requirements, in this same template) answered by an
assistant turn (its accepted output), before the real task: the few-shot form
a small instruction-tuned model follows as a pattern of task -> answer rather
than as text to copy. As *text*: one "Examples of accepted answers" block in
the user message. Either way the retrieved parts are named, so training (and
the erasure of a forgotten record) can leave them out or scrub them.

An exemplar an agent wrote carries its episode, and is shown as a few-shot
*episode*: as turns, user task -> assistant tool call -> tool result -> ...
-> assistant final answer, in the chat format a chat template and LangChain's
``convert_to_messages`` take (assistant messages with ``tool_calls``, ``tool``
messages; see :func:`episode_turns`), so the model sees how the accepted
answer was reached, not only the answer; as text, one compact line per tool
call in the example ("I called calculator(expression="53*47"); it returned:
2491"; see :func:`episode_transcript`).

Example:
    >>> p = fresh_draft_prompt("Name a color.", "- Use exactly 1 words.")
    >>> [m["role"] for m in p.messages()], p.template, p.version == PROMPT_VERSION
    (['system', 'user'], 'generate', True)
    >>> shots = fresh_draft_prompt("Name a color.", "- Use exactly 1 words.", exemplars=[
    ...     {"id": "e1", "task": "Name a fruit.", "output": "Pear",
    ...      "requirements": "- Use exactly 1 words."}], exemplars_as="turns")
    >>> [(m["role"], m["content"][:9]) for m in shots.messages()[1:]]
    [('user', 'Name a fr'), ('assistant', 'Pear'), ('user', 'Name a co')]
    >>> shots.messages(drop=("exemplars",)) == p.messages()
    True

    A few-shot episode (the exemplar's tool call and its result before its answer):

    >>> from agentic_loop.episodes import Episode, ModelStep, ToolCall, ToolStep
    >>> episode = Episode(steps=[
    ...     ModelStep(tool_calls=[ToolCall(name="calculator", args={"expression": "53*47"},
    ...                                    id="c1")]),
    ...     ToolStep(call_id="c1", name="calculator", args={"expression": "53*47"},
    ...              content="2491"),
    ...     ModelStep(text="2491")], final="2491")
    >>> shots = fresh_draft_prompt("What is 61 * 38?", exemplars=[
    ...     {"id": "e2", "task": "What is 53 * 47?", "output": "2491", "episode": episode}],
    ...     exemplars_as="turns")
    >>> [(m["role"], m.get("tool_calls") and m["tool_calls"][0]["function"]["name"],
    ...   m["content"]) for m in shots.messages()[1:]]   # doctest: +NORMALIZE_WHITESPACE
    [('user', None, 'What is 53 * 47?'), ('assistant', 'calculator', ''),
     ('tool', None, '2491'), ('assistant', None, '2491'), ('user', None, 'What is 61 * 38?')]
    >>> print(fresh_draft_prompt("What is 61 * 38?", exemplars=[
    ...     {"task": "What is 53 * 47?", "output": "2491", "episode": episode}]).parts["exemplars"])
    Examples of accepted answers to similar tasks:
    <BLANKLINE>
    Task: What is 53 * 47?
    Steps:
    - I called calculator(expression="53*47"); it returned: 2491
    Accepted answer: 2491
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from agentic_loop.episodes import Episode, ModelStep, ToolStep, UserStep

if TYPE_CHECKING:
    from agentic_loop.judges import Rubric

__all__ = ["PROMPT_VERSION", "SHOT_PREFIX", "SHOT_RESULT_CHARS", "SYSTEM", "DraftPrompt",
           "ExemplarStyle", "call_words", "episode_transcript", "episode_turns",
           "fresh_draft_prompt", "is_shot", "rubric_requirements"]

#: The version of the prompt templates; bump it when their wording or layout changes.
PROMPT_VERSION = 2
#: Parts named ``shot<i>.user`` / ``shot<i>.assistant`` are few-shot turns (retrieved exemplars).
SHOT_PREFIX = "shot"
ExemplarStyle = Literal["turns", "text"]
#: A tool result a few-shot episode shows is cut to this many characters (the archive keeps it
#: whole): an exemplar teaches the pattern call -> result -> answer, not the result's bulk.
SHOT_RESULT_CHARS = 600
#: The system message of every draft the architectures ask for. It names no format of its own
#: ("no quotation marks" once fought tasks that ask for quotes): the task's requirements decide.
SYSTEM = ("You are a precise writer. Follow every instruction in the task exactly. Reply with "
          "the requested text only: no preamble, no explanation.")


def rubric_requirements(rubric: Rubric) -> str:
    """A rubric's verifiable requirements (its check features) as the bullet list prompts show.

    Judged features are left out: "it is engaging" is the critic's business,
    and a small model tends to answer such lines instead of the task.

    >>> from agentic_loop.judges import Rubric
    >>> print(rubric_requirements(Rubric.for_constraints(exact_words=3, no_commas=True)))
    - Use exactly 3 words.
    - Do not use any commas.
    """
    return "\n".join(f"- {f.description}" for f in rubric.check_features)


class DraftPrompt(BaseModel):
    """The prompt one draft was written from: enough to rebuild the exact messages sent.

    The user message is the non-empty ``parts`` joined by a blank line, in
    order; a fresh draft's parts are ``task``, ``requirements``, ``exemplars``
    and ``lessons``, so :meth:`messages` can leave the retrieved ones out
    (what training does by default). Exemplars shown as few-shot turns are
    parts named ``shot<i>.user`` and ``shot<i>.assistant`` (see :func:`is_shot`):
    they become turns before the user message, and dropping ``"exemplars"``
    drops them too. An exemplar shown as a few-shot episode keeps the steps
    between its task and its answer in ``shot_steps`` (by shot, ``"shot1"``...:
    assistant messages with ``tool_calls`` and ``tool`` messages, as
    :func:`episode_turns` writes them). ``template`` names the template
    (``"generate"`` for a fresh draft, ``"refine"``, or ``"custom"`` for
    messages a subclass built itself, kept whole in ``turns``); ``version`` is
    :data:`PROMPT_VERSION` when it was rendered; ``rebuilt`` marks a prompt
    reconstructed for a run logged before prompts were recorded.

    >>> p = fresh_draft_prompt("Name a color.", "- Use exactly 1 words.",
    ...                        exemplars=[{"id": "e1", "task": "Name a fruit.", "output": "Pear"}])
    >>> [m["role"] for m in p.messages()], list(p.parts), p.exemplar_ids
    (['system', 'user'], ['task', 'requirements', 'exemplars'], ['e1'])
    >>> print(p.messages(drop=("exemplars",))[1]["content"])
    Name a color.
    <BLANKLINE>
    Requirements:
    - Use exactly 1 words.
    """

    template: str
    version: int = PROMPT_VERSION
    system: str | None = None
    parts: dict[str, str] = Field(default_factory=dict)
    turns: list[dict[str, Any]] | None = None
    exemplar_ids: list[str] = Field(default_factory=list)
    reflection_ids: list[str] = Field(default_factory=list)
    rebuilt: bool = False
    shot_steps: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)

    @model_serializer(mode="wrap")
    def _without_empty_steps(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a prompt without few-shot episodes is recorded exactly as before they existed
        data: dict[str, Any] = handler(self)
        return data if self.shot_steps else {k: v for k, v in data.items() if k != "shot_steps"}

    @classmethod
    def of_messages(cls, messages: Sequence[Any]) -> DraftPrompt:
        """The record of messages built outside the templates (``template="custom"``).

        Items are LangChain messages or ``{"role", "content"}`` dicts. An agent's
        earlier steps keep their ``tool_calls`` (assistant) and ``tool_call_id`` / ``name``
        (tool results), in the chat format :meth:`messages` gives for few-shot episodes.

        >>> from langchain_core.messages import AIMessage, ToolMessage
        >>> DraftPrompt.of_messages([AIMessage("", tool_calls=[
        ...     {"name": "f", "args": {"x": 1}, "id": "c1"}]), ToolMessage("2", tool_call_id="c1",
        ...     name="f")]).turns[1]
        {'role': 'tool', 'content': '2', 'tool_call_id': 'c1', 'name': 'f'}
        """
        roles = {"human": "user", "ai": "assistant"}
        turns: list[dict[str, Any]] = []
        for m in messages:
            if isinstance(m, Mapping):
                role, content = m["role"], m["content"]
                extra = {k: m[k] for k in ("tool_calls", "tool_call_id", "name") if k in m}
            else:
                role, content = roles.get(m.type, m.type), m.content
                extra = _tool_fields(m)
            turns.append({"role": str(role),
                          "content": content if isinstance(content, str) else str(content),
                          **extra})
        return cls(template="custom", turns=turns)

    def step_texts(self) -> list[tuple[str, str]]:
        """Every text in the few-shot episodes' steps (``shot_steps``), named by where it is:
        message contents and string tool arguments. What a PII gate or an erasure must see
        besides ``parts``; :meth:`with_step_texts` puts changed texts back, in this order.

        >>> from agentic_loop.episodes import Episode, ModelStep, ToolCall, ToolStep
        >>> p = fresh_draft_prompt("t", exemplars_as="turns", exemplars=[{"task": "u",
        ...     "output": "o", "episode": Episode(steps=[ModelStep(tool_calls=[ToolCall(
        ...         name="lookup", args={"who": "Ann"}, id="1")]),
        ...         ToolStep(call_id="1", name="lookup", content="Ann: 555")])}])
        >>> p.step_texts()
        [('shot1[0].tool_calls[0].who', 'Ann'), ('shot1[1].content', 'Ann: 555')]
        >>> p.with_step_texts(["<NAME>", "<NAME>: <PHONE>"]).messages()[3]["content"]
        '<NAME>: <PHONE>'
        """
        found: list[tuple[str, str]] = []

        def keep(where: str, text: str) -> str:
            found.append((where, text))
            return text

        for shot, steps in self.shot_steps.items():
            for i, step in enumerate(steps):
                if step.get("content"):
                    found.append((f"{shot}[{i}].content", str(step["content"])))
                for j, call in enumerate(step.get("tool_calls") or []):
                    _map_args(call["function"]["arguments"], f"{shot}[{i}].tool_calls[{j}]", keep)
        return found

    def with_step_texts(self, texts: Sequence[str]) -> DraftPrompt:
        """A copy with the texts :meth:`step_texts` lists replaced by ``texts``, in order."""
        steps = copy.deepcopy(self.shot_steps)
        remaining = iter(texts)
        for shot_steps in steps.values():
            for step in shot_steps:
                if step.get("content"):
                    step["content"] = next(remaining)
                for call in step.get("tool_calls") or []:
                    call["function"]["arguments"] = _map_args(
                        call["function"]["arguments"], "", lambda _w, _t: next(remaining))
        return self.model_copy(update={"shot_steps": steps})

    @property
    def user(self) -> str:
        """The user message: the non-empty parts (few-shot turns aside), joined by a blank line."""
        return "\n\n".join(text for name, text in self.parts.items()
                            if text and not is_shot(name))

    def messages(self, drop: Collection[str] = ()) -> list[dict[str, Any]]:
        """The chat messages as ``{"role", "content"}`` dicts, without the ``drop`` parts
        (dropping ``"exemplars"`` drops the few-shot turns too). A few-shot episode's steps
        come between its task and its answer, with their ``tool_calls`` / ``tool_call_id``."""
        if self.turns is not None:
            return copy.deepcopy(self.turns)
        shots: list[dict[str, Any]] = []
        for name, text in ([] if "exemplars" in drop else self.parts.items()):
            if is_shot(name):
                shot, role = name.rsplit(".", 1)
                if role == "assistant":
                    shots.extend(copy.deepcopy(self.shot_steps.get(shot, [])))
                shots.append({"role": role, "content": text})
        user = "\n\n".join(text for name, text in self.parts.items()
                            if text and name not in drop and not is_shot(name))
        system = [{"role": "system", "content": self.system}] if self.system else []
        return [*system, *shots, {"role": "user", "content": user}]


def _map_args(value: Any, where: str, swap: Callable[[str, str], str]) -> Any:
    """Tool arguments with each string (nested ones too) passed through ``swap(where, text)``."""
    if isinstance(value, str):
        return swap(where, value)
    if isinstance(value, dict):
        return {k: _map_args(v, f"{where}.{k}", swap) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_args(v, f"{where}[{i}]", swap) for i, v in enumerate(value)]
    return value


def _tool_fields(message: Any) -> dict[str, Any]:
    """The tool fields of a LangChain message as chat-dict keys (none for other messages)."""
    calls = getattr(message, "tool_calls", None)
    if message.type == "ai" and calls:
        return {"tool_calls": [{"id": c.get("id"), "type": "function", "function": {
            "name": c["name"], "arguments": dict(c.get("args") or {})}} for c in calls]}
    if message.type == "tool":
        return {"tool_call_id": message.tool_call_id,
                **({"name": message.name} if message.name else {})}
    return {}


def is_shot(part: str) -> bool:
    """Whether a prompt part is a few-shot turn (``shot<i>.user`` / ``shot<i>.assistant``).

    >>> is_shot("shot1.user"), is_shot("task")
    (True, False)
    """
    return part.startswith(SHOT_PREFIX) and part.rsplit(".", 1)[-1] in ("user", "assistant")


def call_words(name: str, args: Mapping[str, Any]) -> str:
    """A tool call in words, as the local models write earlier calls back.

    >>> call_words("multiply", {"a": 6, "b": 7})
    'multiply(a=6, b=7)'
    """
    shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    return f"{name}({shown})"


def _shown(text: str, limit: int = SHOT_RESULT_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + " ..."


def _error(step: ToolStep) -> str:
    """A tool step's error without the "Error:" a tool loop may have put before it."""
    error = (step.error or "").strip()
    return error[len("Error:"):].strip() if error.lower().startswith("error:") else error


def _result(step: ToolStep) -> str:
    return step.content if step.error is None else f"Error: {_error(step)}"


def _one_line(text: str) -> str:
    return _shown(" ".join(text.split()))


def _before_answer(episode: Episode) -> list[ModelStep | ToolStep | UserStep]:
    """The steps before the final answer (the answer itself is the exemplar's output)."""
    last = episode.steps[-1] if episode.steps else None
    return list(episode.steps[:-1] if isinstance(last, ModelStep) and not last.tool_calls
                else episode.steps)


def episode_turns(episode: Episode, shot: str = f"{SHOT_PREFIX}1") -> list[dict[str, Any]]:
    """An episode's steps before its final answer as chat dicts: an assistant message with
    ``tool_calls`` per model call that asked for tools, a ``tool`` message per result, a
    ``user`` message per simulated user's turn. Call ids become ``<shot>_c<j>`` (an
    exemplar's ids must not collide with the live episode's); results are cut to
    :data:`SHOT_RESULT_CHARS`; an episode with no tool step gives no turns (a plain pair).

    >>> from agentic_loop.episodes import ToolCall
    >>> turns = episode_turns(Episode(steps=[
    ...     ModelStep(tool_calls=[ToolCall(name="f", args={"x": 1}, id="a")]),
    ...     ToolStep(call_id="a", name="f", error="boom"), ModelStep(text="done")]))
    >>> turns[0]["tool_calls"][0]["function"], turns[1]  # doctest: +NORMALIZE_WHITESPACE
    ({'name': 'f', 'arguments': {'x': 1}},
     {'role': 'tool', 'tool_call_id': 'shot1_c1', 'name': 'f', 'content': 'Error: boom'})
    """
    if not episode.tool_steps:
        return []
    ids: dict[str, str] = {}
    unanswered: list[tuple[str, str]] = []  # (name, new id): results without a call id match these
    turns: list[dict[str, Any]] = []
    made = 0
    for step in _before_answer(episode):
        if isinstance(step, ModelStep):
            calls = []
            for call in step.tool_calls:
                made += 1
                new = f"{shot}_c{made}"
                if call.id:
                    ids[call.id] = new
                else:
                    unanswered.append((call.name, new))
                calls.append({"id": new, "type": "function",
                              "function": {"name": call.name, "arguments": dict(call.args)}})
            if calls or step.text:
                turns.append({"role": "assistant", "content": step.text,
                              **({"tool_calls": calls} if calls else {})})
            continue
        if isinstance(step, UserStep):
            turns.append({"role": "user", "content": _shown(step.text)})
            continue
        call_id = ids.get(step.call_id or "")
        if call_id is None:
            match = next((c for c in unanswered if c[0] == step.name), None)
            if match is not None:
                unanswered.remove(match)
            call_id = match[1] if match else ""
        turns.append({"role": "tool", "tool_call_id": call_id, "name": step.name,
                      "content": _shown(_result(step))})
    return turns


def episode_transcript(episode: Episode) -> list[str]:
    """An episode's tool calls as compact lines, one per call with what it returned (or the
    error it raised), on one line and cut to :data:`SHOT_RESULT_CHARS`.

    >>> episode_transcript(Episode(steps=[ToolStep(name="lookup", args={"key": "oslo"},
    ...                                            content="59.9 N")]))
    ['I called lookup(key="oslo"); it returned: 59.9 N']
    """
    return [f"I called {call_words(s.name, s.args)}; "
            + (f"it returned: {_one_line(s.content)}" if s.error is None
               else f"it failed: {_one_line(_error(s))}")
            for s in episode.tool_steps]


def _episode_of(exemplar: Mapping[str, Any]) -> Episode | None:
    value = exemplar.get("episode")
    if value is None or isinstance(value, Episode):
        return value
    return Episode.model_validate(value)


def _block(title: str, lines: Sequence[str]) -> str:
    return f"{title}:\n" + "\n".join(lines) if lines else ""


def _task_text(task: str, requirements: str) -> str:
    """A task and its requirements as the user message shows them."""
    shown = _block("Requirements", [requirements]) if requirements else ""
    return "\n\n".join(t for t in (task.strip(), shown) if t)


def fresh_draft_prompt(task: str, requirements: str = "",
                       exemplars: Sequence[Mapping[str, Any]] = (),
                       reflections: Sequence[Mapping[str, Any]] = (), *,
                       vary_structure: bool = False, rebuilt: bool = False,
                       exemplars_as: ExemplarStyle = "text") -> DraftPrompt:
    """The prompt of a fresh draft: the task, its requirements, accepted examples, past lessons.

    The one chat format the architectures send for a first draft and the
    exporter trains on; exemplars are ``{"id", "task", "output"}`` mappings
    (with ``"requirements"``, the exemplar's own bullet list, shown in its
    turn, and ``"episode"``, the :class:`~agentic_loop.episodes.Episode` or its
    JSON when an agent wrote it: shown as a few-shot episode) and reflections
    ``{"id", "reflection"}`` mappings. ``exemplars_as``:
    ``"turns"`` (few-shot chat turns before the task) or ``"text"`` (one block
    in the user message; ``vary_structure`` adds a note against copying).
    """
    shots: dict[str, str] = {}
    steps: dict[str, list[dict[str, Any]]] = {}
    examples = ""
    if exemplars_as == "turns":
        for i, e in enumerate(exemplars, 1):
            shots[f"{SHOT_PREFIX}{i}.user"] = _task_text(str(e["task"]),
                                                         str(e.get("requirements") or ""))
            shots[f"{SHOT_PREFIX}{i}.assistant"] = str(e["output"])
            episode = _episode_of(e)
            if episode is not None and (turns := episode_turns(episode, f"{SHOT_PREFIX}{i}")):
                steps[f"{SHOT_PREFIX}{i}"] = turns
    elif exemplars:
        shown = []
        for e in exemplars:
            episode = _episode_of(e)
            lines = episode_transcript(episode) if episode is not None else []
            shown.append(f"Task: {e['task']}\n" + (_block("Steps", [f"- {x}" for x in lines])
                                                   + "\n" if lines else "")
                         + f"Accepted answer: {e['output']}")
        note = ("Learn from what makes them good, but vary the structure and wording: "
                "do not copy them." if vary_structure else "")
        examples = ("Examples of accepted answers to similar tasks:\n\n" + "\n\n".join(shown)
                    + ("\n\n" + note if note else ""))
    lessons = _block("Lessons from earlier failed attempts at similar tasks",
                     [f"- {r['reflection']}" for r in reflections])
    parts = {**shots, "task": task.strip(), "requirements": _block("Requirements", [requirements])
             if requirements else "", "exemplars": examples, "lessons": lessons}
    return DraftPrompt(template="generate", system=SYSTEM,
                       parts={k: v for k, v in parts.items() if v}, shot_steps=steps,
                       exemplar_ids=[str(e.get("id", "")) for e in exemplars if e.get("id")],
                       reflection_ids=[str(r.get("id", "")) for r in reflections if r.get("id")],
                       rebuilt=rebuilt)
