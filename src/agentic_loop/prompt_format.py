"""The chat a draft is asked with: the record a trajectory keeps, and the fresh-draft template.

Why a module of its own, below the graphs and the exporter: the architectures
send a fresh draft's prompt, every round records the prompt it was written
from (:class:`DraftPrompt`), and training rebuilds the same chat for runs
logged before prompts were recorded. Defined once here, the inference prompt
and the training prompt cannot drift apart, and ``distill`` needs no import
of the graphs to build it. The wording is literal and short: it must work on
a 135M model.

Example:
    >>> p = fresh_draft_prompt("Name a color.", "- Use exactly 1 words.")
    >>> [m["role"] for m in p.messages()], p.template, p.version == PROMPT_VERSION
    (['system', 'user'], 'generate', True)
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from agentic_loop.judges import Rubric

__all__ = ["PROMPT_VERSION", "SYSTEM", "DraftPrompt", "fresh_draft_prompt",
           "rubric_requirements"]

#: The version of the prompt templates; bump it when their wording or layout changes.
PROMPT_VERSION = 1
#: The system message of every draft the architectures ask for.
SYSTEM = ("You are a precise writer. Reply with the requested text only: no preamble, "
          "no explanation, no quotation marks.")


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
    (what training does by default). ``template`` names the template
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
    turns: list[dict[str, str]] | None = None
    exemplar_ids: list[str] = Field(default_factory=list)
    reflection_ids: list[str] = Field(default_factory=list)
    rebuilt: bool = False

    @classmethod
    def of_messages(cls, messages: Sequence[Any]) -> DraftPrompt:
        """The record of messages built outside the templates (``template="custom"``).

        Items are LangChain messages or ``{"role", "content"}`` dicts.
        """
        roles = {"human": "user", "ai": "assistant"}
        turns = []
        for m in messages:
            role, content = ((m["role"], m["content"]) if isinstance(m, Mapping)
                             else (roles.get(m.type, m.type), m.content))
            turns.append({"role": str(role),
                          "content": content if isinstance(content, str) else str(content)})
        return cls(template="custom", turns=turns)

    @property
    def user(self) -> str:
        """The user message: the non-empty parts, joined by a blank line."""
        return "\n\n".join(text for text in self.parts.values() if text)

    def messages(self, drop: Collection[str] = ()) -> list[dict[str, str]]:
        """The chat messages as ``{"role", "content"}`` dicts, without the ``drop`` parts."""
        if self.turns is not None:
            return [dict(t) for t in self.turns]
        user = "\n\n".join(text for name, text in self.parts.items()
                            if text and name not in drop)
        system = [{"role": "system", "content": self.system}] if self.system else []
        return [*system, {"role": "user", "content": user}]


def _block(title: str, lines: Sequence[str]) -> str:
    return f"{title}:\n" + "\n".join(lines) if lines else ""


def fresh_draft_prompt(task: str, requirements: str = "",
                       exemplars: Sequence[Mapping[str, Any]] = (),
                       reflections: Sequence[Mapping[str, Any]] = (), *,
                       vary_structure: bool = False, rebuilt: bool = False) -> DraftPrompt:
    """The prompt of a fresh draft: the task, its requirements, accepted examples, past lessons.

    The one chat format the architectures send for a first draft and the
    exporter trains on; exemplars are ``{"id", "task", "output"}`` and
    reflections ``{"id", "reflection"}`` mappings.
    """
    shown = [f"Task: {e['task']}\nAccepted answer: {e['output']}" for e in exemplars]
    note = ("Learn from what makes them good, but vary the structure and wording: "
            "do not copy them." if vary_structure else "")
    examples = ("Examples of accepted answers to similar tasks:\n\n" + "\n\n".join(shown)
                + ("\n\n" + note if note else "")) if shown else ""
    lessons = _block("Lessons from earlier failed attempts at similar tasks",
                     [f"- {r['reflection']}" for r in reflections])
    parts = {"task": task.strip(), "requirements": _block("Requirements", [requirements])
             if requirements else "", "exemplars": examples, "lessons": lessons}
    return DraftPrompt(template="generate", system=SYSTEM,
                       parts={k: v for k, v in parts.items() if v},
                       exemplar_ids=[str(e.get("id", "")) for e in exemplars if e.get("id")],
                       reflection_ids=[str(r.get("id", "")) for r in reflections if r.get("id")],
                       rebuilt=rebuilt)
