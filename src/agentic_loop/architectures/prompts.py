"""The prompts the architectures send. Short and literal: they must work on a 135M model.

Example:
    >>> print(generate_messages("Name a color.", "- Use exactly 1 words.")[1].content)
    Name a color.
    <BLANKLINE>
    Requirements:
    - Use exactly 1 words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

__all__ = ["SYSTEM", "clean_output", "generate_messages", "reflect_messages", "refine_messages"]

SYSTEM = ("You are a precise writer. Reply with the requested text only: no preamble, "
          "no explanation, no quotation marks.")


def _block(title: str, lines: Sequence[str]) -> str:
    return f"{title}:\n" + "\n".join(lines) if lines else ""


def generate_messages(task: str, requirements: str = "", exemplars: Sequence[dict[str, Any]] = (),
                      reflections: Sequence[dict[str, Any]] = (),
                      vary_structure: bool = False) -> list[BaseMessage]:
    """First draft: the task, its requirements, similar accepted examples, past lessons."""
    parts = [task.strip()]
    if requirements:
        parts.append(_block("Requirements", [requirements]))
    if exemplars:
        shown = [f"Task: {e['task']}\nAccepted answer: {e['output']}" for e in exemplars]
        note = ("Learn from what makes them good, but vary the structure and wording: "
                "do not copy them." if vary_structure else "")
        parts.append("Examples of accepted answers to similar tasks:\n\n" + "\n\n".join(shown)
                     + ("\n\n" + note if note else ""))
    if reflections:
        parts.append(_block("Lessons from earlier failed attempts at similar tasks",
                            [f"- {r['reflection']}" for r in reflections]))
    return [SystemMessage(SYSTEM), HumanMessage("\n\n".join(p for p in parts if p))]


def refine_messages(task: str, draft: str, feedback: str,
                    requirements: str = "") -> list[BaseMessage]:
    """Rewrite a draft to address the critique."""
    parts = [f"Task: {task.strip()}"]
    if requirements:
        parts.append(_block("Requirements", [requirements]))
    parts.append(f"Previous answer:\n{draft}")
    parts.append(f"What to fix:\n{feedback.strip() or 'Make it better.'}")
    parts.append("Write the improved answer now. Reply with the answer only.")
    return [SystemMessage(SYSTEM), HumanMessage("\n\n".join(parts))]


def reflect_messages(task: str, attempt: str, failure: str) -> list[BaseMessage]:
    """Ask for a short lesson about why an attempt failed."""
    return [
        SystemMessage("You analyse failed attempts and write short, concrete lessons."),
        HumanMessage(f"Task: {task.strip()}\n\nFailed attempt:\n{attempt}\n\n"
                     f"Why it failed:\n{failure.strip()}\n\nGive the root cause, the correction, "
                     "and a one-sentence lesson for the next attempt."),
    ]


_PREAMBLE = re.compile(r'^[^"\n]{0,100}:\s*\n*\s*(["“])(?P<body>[^"”\n]+)["”]\s*$')


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
