"""GRPO's prompt set: tasks, each with the locked rubric that rewards it, as the architectures ask.

Online RL learns from its own samples, so what it trains on is a set of
*tasks*, not answers: a task file (:func:`agentic_loop.tasks.spec.load_tasks`),
or the tasks of exported trajectories (the user prompts of an
``agentic-loop export`` folder, already through the PII gate).

Each task's rubric is **locked** before training starts: built once from
the task (its saved rubric or constraints, else the constraints the task
states, the checks the architectures' task rubric has), kept to its *check*
features (Python and sandbox, never a model), and never changed while the
policy learns. A policy judged by its own LLM features would learn to
please itself, so a saved rubric with LLM features is scored on its checks
only (``llm_features="checks"``, noted in the card) or refused
(``"refuse"``); for a task with no rubric of its own the architectures'
judged features are simply not part of the reward. A task with no check at
all cannot be rewarded and is left out (counted).

**A judged part** (``judged_reward``, :mod:`.judged_reward`) changes two
things. Each task keeps its rubric's judged features apart (``PromptTask.judged``:
the LLM features of the rubric the architectures would judge it by), for a
*separate* judge model to rank the group's completions on, never the policy.
And a task with no check is kept when the judged part can reward it:
``"rank"`` when it has judged features, ``"vote"`` always (TTRL: its
short answer is voted on); its ``rubric`` is then None and the checks' part
has no value for it.

The prompt is the one the architectures send for a fresh draft: their
system message, the task and its requirements (the check descriptions),
built by the same template (:func:`agentic_loop.prompt_format.fresh_draft_prompt`
with :func:`~agentic_loop.prompt_format.rubric_requirements`).

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "tasks.jsonl"
    >>> _ = path.write_text('{"task": "Say hi.", "constraints": {"exact_words": 1}}\\n'
    ...                     'Write a motto in exactly 4 words.\\nName a color.\\n')
    >>> prompts = load_prompt_set(path)
    >>> [(t.task, t.rubric.names, t.rubric.name) for t in prompts.tasks]
    [('Say hi.', ('exact_words',), 'constraints'), ('Write a motto in exactly 4 words.', \
('exact_words',), 'task')]
    >>> prompts.skipped, [m["role"] for m in prompts.rows()[0]["prompt"]]
    (1, ['system', 'user'])
    >>> print(prompts.rows()[0]["prompt"][1]["content"])
    Say hi.
    <BLANKLINE>
    Requirements:
    - Use exactly 1 words.
    >>> prompts.tasks[0].judged is None, prompts.tasks[1].judged.names
    (True, ('on_task', 'well_written'))
    >>> voted = load_prompt_set(path, judged_reward="vote")
    >>> [t.task for t in voted.tasks if t.rubric is None], voted.skipped
    (['Name a color.'], 0)
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agentic_loop.distill.data.export import PAIRS_FILE, SFT_FILE
from agentic_loop.distill.data.samples import task_key
from agentic_loop.distill.data.sources import sha256_file
from agentic_loop.distill.train.training_data import (
    TrainingDataError,
    read_pair_rows,
    read_sft_rows,
)
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Rubric, rubric_for_task
from agentic_loop.prompt_format import (
    PROMPT_VERSION,
    SYSTEM,
    fresh_draft_prompt,
    rubric_requirements,
)
from agentic_loop.tasks.spec import TaskSpec, load_tasks
from agentic_loop.tools import ready_tools

__all__ = ["PromptSet", "PromptTask", "judged_features", "load_prompt_set", "lock_rubric",
           "rubric_sha256", "stated_rubric"]

def rubric_sha256(rubric: Rubric) -> str:
    """A short hash of a rubric's saved form (names only when custom checks cannot be saved).

    >>> rubric_sha256(Rubric.for_constraints(lowercase=True)) == rubric_sha256(
    ...     Rubric.for_constraints(lowercase=True))
    True
    """
    try:
        saved: Any = rubric.to_dict()
    except ConfigError:  # a custom Python check: only its code knows what it does
        saved = {"name": rubric.name, "version": rubric.version, "features": list(rubric.names)}
    return hashlib.sha256(json.dumps(saved, sort_keys=True).encode()).hexdigest()[:16]


def lock_rubric(rubric: Rubric, policy: str = "checks",
                where: str = "a task") -> tuple[Rubric | None, tuple[str, ...]]:
    """The reward rubric of ``rubric``: its check features only, and the LLM features left out.

    ``None`` when it has no check. ``policy="refuse"`` raises on LLM features
    instead of leaving them out.

    >>> from agentic_loop.judges import Feature
    >>> locked, dropped = lock_rubric(Rubric.for_constraints(
    ...     lowercase=True, features=[Feature("vivid", "Vivid.", 1.0)]))
    >>> locked.names, dropped
    (('lowercase',), ('vivid',))
    """
    dropped = tuple(f.name for f in rubric.llm_features)
    if dropped and policy == "refuse":
        raise ConfigError(
            f"{where} has a rubric with LLM-judged features {list(dropped)}; a GRPO reward "
            "uses checks only (the policy must not grade itself); pass llm_features='checks' "
            "(--llm-features checks) to score on its checks, or give the task constraints")
    if not rubric.check_features:
        return None, dropped
    if not dropped:
        return rubric, ()
    return Rubric(rubric.check_features, name=rubric.name, version=rubric.version), dropped


def stated_rubric(task: str) -> Rubric | None:
    """The checks of the constraints ``task`` states (None when it states none).

    Deprecated (kept for one release): ``rubric_for_task(task, checks_only=True)``
    (:func:`agentic_loop.judges.rubric_for_task`), which this calls.

    >>> stated_rubric("Write a motto in exactly 4 words, all lowercase.").names
    ('exact_words', 'lowercase')
    >>> stated_rubric("Name a color.") is None
    True
    """
    warnings.warn("agentic_loop.distill.train.prompt_set.stated_rubric is deprecated; use "
                  "agentic_loop.judges.rubric_for_task(task, checks_only=True)",
                  DeprecationWarning, stacklevel=2)
    return rubric_for_task(task, checks_only=True)


@dataclass(frozen=True)
class PromptTask:
    """One task of the prompt set and its locked (checks-only) rubric.

    ``rubric`` is None only for a task kept for the judged part alone (it has
    no check); ``judged`` holds the judged (LLM) features a judge model ranks
    completions on (None: the task has none).
    """

    task: str
    rubric: Rubric | None
    dropped: tuple[str, ...] = ()
    #: the ready tools the policy may call (:func:`agentic_loop.tools.ready_tools` names,
    #: from the task's ``metadata["tools"]``); empty for a plain task
    tools: tuple[str, ...] = ()
    #: the rubric's judged features, for the judged reward's judge (never the policy)
    judged: Rubric | None = None

    def messages(self) -> list[dict[str, str]]:
        """The architectures' first-draft prompt: system, task, requirements (the checks)."""
        requirements = rubric_requirements(self.rubric) if self.rubric is not None else ""
        return fresh_draft_prompt(self.task, requirements).messages()


@dataclass(frozen=True)
class PromptSet:
    """The tasks GRPO samples from, where they came from, and what was left out and why."""

    path: Path
    kind: Literal["tasks", "export"]
    tasks: list[PromptTask]
    sha256: str
    skipped: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def has_tools(self) -> bool:
        """Whether any task carries tools (GRPO then runs multi-turn tool rollouts)."""
        return any(t.tools for t in self.tasks)

    def rows(self) -> list[dict[str, Any]]:
        """The training dataset: the prompt, and the index the reward functions look up."""
        return [{"prompt": t.messages(), "task_index": i} for i, t in enumerate(self.tasks)]

    def prompt_format(self) -> dict[str, Any]:
        """How the prompts are built (as an export's manifest says it), for the model card."""
        return {"template": "generate", "version": PROMPT_VERSION,
                "chat": ["system", "user", "assistant"], "system": SYSTEM,
                "parts": ["task", "requirements"], "include_exemplars": False}

    def rubrics(self) -> list[dict[str, Any]]:
        """Each distinct locked rubric once: name, version, checks, hash, how many tasks use it."""
        seen: dict[str, dict[str, Any]] = {}
        for t in self.tasks:
            if t.rubric is None:
                continue
            digest = rubric_sha256(t.rubric)
            entry = seen.setdefault(digest, {"name": t.rubric.name, "version": t.rubric.version,
                                             "checks": list(t.rubric.names), "sha256": digest,
                                             "tasks": 0})
            entry["tasks"] += 1
        return list(seen.values())


def _export_specs(root: Path) -> list[TaskSpec]:
    """The distinct tasks of an export folder, in file order.

    Rows keep the bare task in ``metadata.task``; their user message is the
    task *plus* its requirements (the fresh-draft chat), which would state the
    requirements twice once the prompt is rebuilt. Rows written before the task
    was kept fall back to the user message.
    """
    prompts: list[str] = []
    for name, read in ((SFT_FILE, read_sft_rows), (PAIRS_FILE, read_pair_rows)):
        path = root / name
        if not path.is_file():
            continue
        read(path)  # validates every row and names file:line on a bad one
        with path.open(encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
        for row in rows:
            task = (row.get("metadata") or {}).get("task")
            messages = row.get("messages") or row.get("prompt") or []
            user = [m["content"] for m in messages if m.get("role") == "user"]
            prompts.append(task or (user[-1] if user else ""))
    unique: dict[str, str] = {}
    for prompt in prompts:
        if prompt.strip():
            unique.setdefault(task_key(prompt), prompt)
    return [TaskSpec(task=p) for p in unique.values()]


def judged_features(spec: TaskSpec) -> Rubric | None:
    """The judged (LLM) features of the rubric the architectures would score ``spec`` by.

    >>> judged_features(TaskSpec(task="Name a color.")).names
    ('on_task', 'well_written')
    >>> judged_features(TaskSpec(task="Hi.", constraints={"lowercase": True})) is None
    True
    """
    full = rubric_for_task(spec)
    if not full.llm_features:
        return None
    return Rubric(full.llm_features, name=full.name, version=full.version)


def load_prompt_set(source: str | os.PathLike[str], *, llm_features: str = "checks",
                    judged_reward: str = "none") -> PromptSet:
    """Read ``source`` (a task file, or an export folder) and lock every task's rubric.

    ``judged_reward`` (``"none"``, ``"rank"``, ``"vote"``) also keeps the tasks
    with no check that the judged part rewards (see the module doc).

    Raises :class:`~agentic_loop.distill.train.training_data.TrainingDataError`
    when the source is missing or leaves no task to reward.
    """
    path = Path(source).expanduser()
    kind: Literal["tasks", "export"]
    if path.is_file():
        specs, kind, digest = load_tasks(path), "tasks", sha256_file(path)
    elif path.is_dir() and any((path / n).is_file() for n in (SFT_FILE, PAIRS_FILE)):
        files = [path / n for n in (SFT_FILE, PAIRS_FILE) if (path / n).is_file()]
        specs, kind = _export_specs(path), "export"
        digest = hashlib.sha256(b"".join(sha256_file(f).encode() for f in files)).hexdigest()
    else:
        state = "is a folder without sft.jsonl or pairs.jsonl" if path.is_dir() else \
            "does not exist"
        raise TrainingDataError(
            f"GRPO prompt source {path} {state}; pass a task file (JSONL of "
            '{"task": ..., "constraints": {...}} rows, or plain lines) or a folder written by '
            "`agentic-loop export`")
    tasks: list[PromptTask] = []
    skipped = 0
    seen: set[tuple[str, str]] = set()
    for number, spec in enumerate(specs, 1):
        where = f"task {number} of {path} ({spec.task[:60]!r})"
        rubric = rubric_for_task(spec, checks_only=True)
        locked, dropped = lock_rubric(rubric, llm_features, where) if rubric else (None, ())
        judged = judged_features(spec)
        if locked is None and not (judged_reward == "vote" or
                                   judged_reward == "rank" and judged is not None):
            skipped += 1
            continue
        key = (task_key(spec.task), rubric_sha256(locked) if locked else "")
        if key not in seen:
            seen.add(key)
            tasks.append(PromptTask(spec.task, locked, dropped, _tool_names(spec, where), judged))
    if not tasks:
        raise TrainingDataError(
            f"no task in {path} has a check to reward ({skipped} without one); GRPO needs "
            "verifiable tasks: give each task constraints (e.g. \"constraints\": "
            '{"word_count": [5, 9]}) or state them in the task ("in exactly 6 words"), or '
            "reward them by a judge (--judged-reward rank) or a majority vote on their short "
            "answers (--judged-reward vote)")
    return PromptSet(path, kind, tasks, digest, skipped,
                     _notes(kind, tasks, skipped, judged_reward))


def _tool_names(spec: TaskSpec, where: str) -> tuple[str, ...]:
    """The ready tools ``spec`` names in ``metadata["tools"]`` (checked now, not mid-run).

    >>> _tool_names(TaskSpec(task="t", metadata={"tools": ["calculator", "lookup"]}), "t")
    ('calculator', 'lookup')
    """
    names = spec.metadata.get("tools") or []
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f'{where}: metadata "tools" must be a list of tool names, got '
                          f"{names!r:.100}")
    try:
        return tuple(t.name for t in ready_tools(list(names)))
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}; name ready tools in its metadata \"tools\"") from None


def _notes(kind: str, tasks: Sequence[PromptTask], skipped: int,
           judged_reward: str = "none") -> list[str]:
    notes = []
    unchecked = sum(t.rubric is None for t in tasks)
    if unchecked:
        how = ("a judge's ranking of each group" if judged_reward == "rank" else
               "majority vote on each group's short answers (TTRL)")
        notes.append(f"{unchecked} tasks without a check are rewarded by {how} alone")
    if judged_reward == "rank":
        ranked = sorted({n for t in tasks if t.judged is not None for n in t.judged.names})
        if ranked:
            notes.append(f"judged features {ranked} go to the judge model, which ranks each "
                         "prompt's group; the checks' part stays Python")
        unjudged = sum(t.judged is None for t in tasks)
        if unjudged:
            notes.append(f"{unjudged} tasks' rubrics have no judged feature (checks only): the "
                         "judge does not rank them, their checks alone reward them")
    with_tools = sum(bool(t.tools) for t in tasks)
    if with_tools:
        notes.append(f"{with_tools} tasks carry tools: their rollouts are episodes (the policy "
                     "calls the tools, results appended as tokens), rewarded on the whole episode")
    dropped = sorted({name for t in tasks for name in t.dropped})
    if dropped:
        count = sum(bool(t.dropped) for t in tasks)
        notes.append(f"LLM-judged features {dropped} in {count} tasks' rubrics were left out of "
                     "the checks' part: it uses their checks only (the policy never grades "
                     "itself)")
    if skipped:
        notes.append(f"{skipped} tasks without a check (nothing verifiable stated) were left out")
    stated = sum(t.rubric is not None and t.rubric.name == "task" for t in tasks)
    if stated:
        judged = ("go to the judge" if judged_reward == "rank" else "are never a reward")
        notes.append(f"{stated} tasks have no rubric of their own: each is rewarded on the checks "
                     f"of the constraints it states (the architectures' judged features {judged})")
    if kind == "export":
        notes.append("an export keeps no rubric: its tasks are rewarded on what they state")
    return notes
