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
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from agentic_loop.judges import Rubric

__all__ = ["PROMPT_VERSION", "SHOT_PREFIX", "SYSTEM", "DraftPrompt", "ExemplarStyle",
           "fresh_draft_prompt", "is_shot", "rubric_requirements"]

#: The version of the prompt templates; bump it when their wording or layout changes.
PROMPT_VERSION = 2
#: Parts named ``shot<i>.user`` / ``shot<i>.assistant`` are few-shot turns (retrieved exemplars).
SHOT_PREFIX = "shot"
ExemplarStyle = Literal["turns", "text"]
#: The system message of every draft the architectures ask for.
#: It names no format of its own ("no quotation marks" once fought tasks that ask for quotes):
#: the task's requirements decide the form.
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
    drops them too. ``template`` names the template
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
        """The user message: the non-empty parts (few-shot turns aside), joined by a blank line."""
        return "\n\n".join(text for name, text in self.parts.items()
                            if text and not is_shot(name))

    def messages(self, drop: Collection[str] = ()) -> list[dict[str, str]]:
        """The chat messages as ``{"role", "content"}`` dicts, without the ``drop`` parts
        (dropping ``"exemplars"`` drops the few-shot turns too)."""
        if self.turns is not None:
            return [dict(t) for t in self.turns]
        shots = [] if "exemplars" in drop else [
            {"role": name.rsplit(".", 1)[1], "content": text}
            for name, text in self.parts.items() if is_shot(name)]
        user = "\n\n".join(text for name, text in self.parts.items()
                            if text and name not in drop and not is_shot(name))
        system = [{"role": "system", "content": self.system}] if self.system else []
        return [*system, *shots, {"role": "user", "content": user}]


def is_shot(part: str) -> bool:
    """Whether a prompt part is a few-shot turn (``shot<i>.user`` / ``shot<i>.assistant``).

    >>> is_shot("shot1.user"), is_shot("task")
    (True, False)
    """
    return part.startswith(SHOT_PREFIX) and part.rsplit(".", 1)[-1] in ("user", "assistant")


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
    turn) and reflections ``{"id", "reflection"}`` mappings. ``exemplars_as``:
    ``"turns"`` (few-shot chat turns before the task) or ``"text"`` (one block
    in the user message; ``vary_structure`` adds a note against copying).
    """
    shots: dict[str, str] = {}
    examples = ""
    if exemplars_as == "turns":
        for i, e in enumerate(exemplars, 1):
            shots[f"{SHOT_PREFIX}{i}.user"] = _task_text(str(e["task"]),
                                                         str(e.get("requirements") or ""))
            shots[f"{SHOT_PREFIX}{i}.assistant"] = str(e["output"])
    elif exemplars:
        shown = [f"Task: {e['task']}\nAccepted answer: {e['output']}" for e in exemplars]
        note = ("Learn from what makes them good, but vary the structure and wording: "
                "do not copy them." if vary_structure else "")
        examples = ("Examples of accepted answers to similar tasks:\n\n" + "\n\n".join(shown)
                    + ("\n\n" + note if note else ""))
    lessons = _block("Lessons from earlier failed attempts at similar tasks",
                     [f"- {r['reflection']}" for r in reflections])
    parts = {**shots, "task": task.strip(), "requirements": _block("Requirements", [requirements])
             if requirements else "", "exemplars": examples, "lessons": lessons}
    return DraftPrompt(template="generate", system=SYSTEM,
                       parts={k: v for k, v in parts.items() if v},
                       exemplar_ids=[str(e.get("id", "")) for e in exemplars if e.get("id")],
                       reflection_ids=[str(r.get("id", "")) for r in reflections if r.get("id")],
                       rebuilt=rebuilt)
