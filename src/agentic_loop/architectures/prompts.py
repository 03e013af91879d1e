"""The prompts the architectures send. Short and literal: they must work on a 135M model.

Each prompt is built as a :class:`~agentic_loop.prompt_format.DraftPrompt`
first (the record a round keeps) and sent as that record's messages, so what
the trajectory says was asked is what was asked. The fresh-draft template
itself lives in :mod:`agentic_loop.prompt_format`, where the exporter rebuilds
it without importing the graphs.

The refine prompt's "What to fix" (:func:`refine_feedback`) lists only the
checks that failed, each with what the draft did ("- Use exactly 3 words.
(yours: 5 words)"): no passed checks, no judged qualities while a check
fails, and no free-text critique unless the architecture asks for one. A
small model answers the text it is shown, so every line must be an
instruction it can act on.

The reflection prompt (:func:`reflect_messages`) shows, when the failed
attempt was an agent's episode, what the agent did (:func:`attempt_summary`:
each tool call with its arguments and what it returned or the error it
raised, the step count, the tools the task asked for that it never called),
so the lesson can name a tool ("use the calculator for products of two-digit
numbers") rather than only restate the failed check.

Example:
    >>> print(generate_messages("Name a color.", "- Use exactly 1 words.")[1].content)
    Name a color.
    <BLANKLINE>
    Requirements:
    - Use exactly 1 words.
    >>> from agentic_loop.judges import Rubric
    >>> rubric = Rubric.for_constraints(exact_words=3, no_commas=True, lowercase=True)
    >>> print(refine_feedback(rubric.evaluate("t", "one two, three four")))
    - Use exactly 3 words. (yours: 4 words)
    - Do not use any commas. (yours: has commas)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    convert_to_messages,
)

from agentic_loop.clean_text import clean_text
from agentic_loop.episodes import Episode
from agentic_loop.judges import Evaluation, tool_matches
from agentic_loop.prompt_format import SYSTEM, DraftPrompt, episode_transcript, fresh_draft_prompt

__all__ = ["SYSTEM", "attempt_summary", "bound_output", "chat_messages", "clean_output",
           "fresh_draft_prompt", "generate_messages", "reflect_messages", "refine_feedback",
           "refine_messages", "refine_prompt", "tools_asked_for"]

_ROLES: dict[str, type[BaseMessage]] = {"system": SystemMessage, "user": HumanMessage,
                                        "assistant": AIMessage}


def chat_messages(prompt: DraftPrompt) -> list[BaseMessage]:
    """A prompt record as the LangChain messages a chat model is sent: a few-shot episode's
    steps as an ``AIMessage`` with ``tool_calls`` and ``ToolMessage`` results."""
    return [convert_to_messages([m])[0] if "tool_calls" in m or m["role"] == "tool"
            else _ROLES[m["role"]](m["content"]) for m in prompt.messages()]


def generate_messages(task: str, requirements: str = "", exemplars: Sequence[dict[str, Any]] = (),
                      reflections: Sequence[dict[str, Any]] = (),
                      vary_structure: bool = False) -> list[BaseMessage]:
    """First draft: the task, its requirements, similar accepted examples, past lessons."""
    return chat_messages(fresh_draft_prompt(task, requirements, exemplars, reflections,
                                            vary_structure=vary_structure))


#: What a voided draft is told, by the guard that voided it.
_VOIDED = {"empty": "Write an answer; yours was empty.",
           "task_copy": "Answer the task; do not repeat it.",
           "exemplar_copy": "Write a new answer; do not copy the example."}


def refine_feedback(evaluation: Evaluation, critique: str | None = None) -> str:
    """What to fix, literally: the failed checks with what the draft did, nothing else.

    A voided draft (empty, the task handed back, an exemplar copied) is told
    so, then the checks it must meet. When every check holds, the judged
    qualities that fell short are listed instead. ``critique``: the critic's
    advice, appended (the architectures pass it only with ``critique_text``).
    """
    failed = [f for f in evaluation.features if f.source == "check" and f.credit < 1.0]
    if evaluation.void:
        flag = evaluation.void.split(":", 1)[0]
        lines = [f"- {_VOIDED.get(flag, 'Answer the task itself.')}",
                 *(f"- {f.description}" for f in failed)]
    elif failed:
        lines = [f"- {f.description}" + (f" (yours: {f.detail})" if f.detail else "")
                 for f in failed]
    else:
        lines = [f"- {f.description}" for f in evaluation.features
                 if f.source == "llm" and f.credit < 1.0]
    if critique and critique.strip():
        lines.append(f"- {critique.strip()}")
    return "\n".join(lines)


def refine_prompt(task: str, draft: str, feedback: str, requirements: str = "") -> DraftPrompt:
    """Rewrite a draft to address the critique (the record; :func:`refine_messages` sends it)."""
    parts = {"task": f"Task: {task.strip()}",
             "requirements": f"Requirements:\n{requirements}" if requirements else "",
             "previous": f"Previous answer:\n{draft}",
             "fix": f"What to fix:\n{feedback.strip() or 'Make it better.'}",
             "instruction": "Write the improved answer now. Reply with the answer only."}
    return DraftPrompt(template="refine", system=SYSTEM,
                       parts={k: v for k, v in parts.items() if v})


def refine_messages(task: str, draft: str, feedback: str,
                    requirements: str = "") -> list[BaseMessage]:
    """Rewrite a draft to address the critique."""
    return chat_messages(refine_prompt(task, draft, feedback, requirements))


#: Verbs that ask for a tool in a task ("use the calculator", "run the tests").
_ASKS = re.compile(r"\b(?:use|using|call|run|try)\s+(?:the\s+|a\s+|an\s+|your\s+)?"
                   r"(?P<what>[A-Za-z][\w-]*)", re.IGNORECASE)
_STOPPED = {"step_limit": "it hit the step limit before answering",
            "time_limit": "it ran out of time before answering",
            "error": "it stopped on an error"}


def tools_asked_for(task: str, names: Iterable[str]) -> list[str]:
    """The tools among ``names`` that the task asks for ("use the calculator", "run the
    tests" for ``run_tests``): a word of the tool's name right after use/call/run/try.

    >>> tools_asked_for("What is 53 * 47? Use the calculator.", ["calculator", "python"])
    ['calculator']
    >>> tools_asked_for("Run the tests before answering.", ["run_tests"])
    ['run_tests']
    >>> tools_asked_for("Use exactly 3 words.", ["calculator"])
    []
    """
    asked = {m.group("what").lower() for m in _ASKS.finditer(task)}
    return [n for n in dict.fromkeys(names) if any(tool_matches(n, a) for a in asked)]


def attempt_summary(episode: Episode, asked: Iterable[str] = ()) -> str:
    """What an agent did in a failed attempt, as the reflection prompt shows it: the step
    count, each tool call with its result or error, and the ``asked`` tools it never called.

    >>> from agentic_loop.episodes import ModelStep, ToolStep
    >>> print(attempt_summary(Episode(steps=[
    ...     ToolStep(name="python", args={"code": "53*47"}, error="NameError: x"),
    ...     ModelStep(text="2500")], final="2500"), asked=["calculator"]))
    Steps: 1 model call, 1 tool call.
    - I called python(code="53*47"); it failed: NameError: x
    - The task asks for calculator; you never called it.
    """
    calls = len(episode.tool_steps)
    lines = [f"Steps: {episode.model_calls} model call{'s' * (episode.model_calls != 1)}, "
             f"{calls} tool call{'s' * (calls != 1)}."
             + (f" It stopped: {_STOPPED[episode.stop_reason]}."
                if episode.stop_reason in _STOPPED else "")]
    lines += [f"- {line}" for line in episode_transcript(episode)] or ["- You called no tool."]
    called = set(episode.tools_called)
    lines += [f"- The task asks for {name}; you never called it."
              for name in dict.fromkeys(asked) if name not in called]
    return "\n".join(lines)


def reflect_messages(task: str, attempt: str, failure: str, *, episode: Episode | None = None,
                     asked: Iterable[str] = ()) -> list[BaseMessage]:
    """Ask for a short lesson about why an attempt failed.

    ``episode``: the agent's episode behind the attempt, shown as "What you did"
    (:func:`attempt_summary`, with the ``asked`` tools it skipped), and the lesson is asked
    to name the tool that would have helped. Without one the prompt is as it always was.
    """
    did = (f"What you did:\n{attempt_summary(episode, asked)}\n\n"
           if episode is not None else "")
    ask = ("Give the root cause, the correction, and a one-sentence lesson for the next attempt"
           + (" (name the tool to use, and how, when a tool would have helped)."
              if episode is not None else "."))
    return [
        SystemMessage("You analyse failed attempts and write short, concrete lessons."),
        HumanMessage(f"Task: {task.strip()}\n\nFailed attempt:\n{attempt}\n\n{did}"
                     f"Why it failed:\n{failure.strip()}\n\n{ask}"),
    ]


_PREAMBLE = re.compile(r'^[^"\n]{0,100}:\s*\n*\s*(["“])(?P<body>[^"”\n]+)["”]\s*$')


def bound_output(text: str, max_chars: int | None) -> tuple[str, int | None]:
    """Model text as a draft may hold it: cleaned (:func:`~agentic_loop.clean_text.clean_text`)
    and cut to ``max_chars``; also the length before the cut (None when nothing was cut).

    >>> bound_output("ab\\x00cdef", 3)
    ('abc', 6)
    >>> bound_output("abc", None)
    ('abc', None)
    """
    text = clean_text(text)
    if max_chars is None or len(text) <= max_chars:
        return text, None
    return text[:max_chars], len(text)


def clean_output(text: str) -> str:
    """Strip whitespace, a "Here is the tagline:" preamble before a quoted answer, and one
    pair of wrapping quotes: habits of small models, not part of the answer.

    >>> clean_output('  "Stories on every shelf."  ')
    'Stories on every shelf.'
    >>> clean_output('Here is a 4-word tagline: "Stories on every shelf"')
    'Stories on every shelf'
    """
    text = text.strip()
    if match := _PREAMBLE.match(text):
        return match.group("body").strip()
    for left, right in (('"', '"'), ("'", "'"), ("“", "”")):
        if len(text) >= 2 and text.startswith(left) and text.endswith(right) \
                and text.count(left) + (text.count(right) if right != left else 0) <= 2:
            return text[1:-1].strip()
    return text
