"""The state the architectures' graphs pass between nodes.

A ``TypedDict`` with reducers, as LangGraph expects, so the graphs work as
subgraphs of a user's graph and under a checkpointer: ``rounds`` and
``errors`` accumulate, ``usage`` sums, everything else is last-write-wins.

A thread is a conversation, not a run: the first node of every run applies
:func:`fresh_run` (a new ``run_id``; rounds, errors, usage, drafts, memory
and results reset with LangGraph's ``Overwrite``), so a second task on a
thread never inherits the first one's rounds or output, while the thread's
checkpoint history keeps both runs. (A resumed run does not pass its first
node again, so it keeps what it had, its settings included.) That first node
also resolves the run's settings into ``settings`` (:mod:`.settings`).

Rounds are :class:`~agentic_loop.trajectories.Round` models, the same objects
the trajectory stores and ``RunResult.trace`` shows; ``finalize`` leaves the
run's :class:`~agentic_loop.trajectories.Trajectory` in ``trajectory``.
LangGraph's checkpoint serializer round-trips pydantic models; a strict
serializer (``allowed_msgpack_modules``, ``LANGGRAPH_STRICT_MSGPACK=true``)
gets these models allow-listed by :func:`allow_state_types` when the graph is
compiled. (A default, permissive serializer logs a one-time notice per type
the first time it reads one back.)

Example:
    >>> add_usage({"llm_calls": 1, "input_tokens": 5}, {"llm_calls": 2})
    {'llm_calls': 3, 'input_tokens': 5}
    >>> print(*sorted(name for _, name in STATE_MODELS))
    Candidate DraftPrompt Episode ModelStep Round TokenUsage ToolCall ToolStep Trajectory UserStep
    >>> start = fresh_run()
    >>> start["rounds"].value, start["final"], len(start["run_id"])
    ([], None, 32)
"""

from __future__ import annotations

import operator
import time
import uuid
from typing import Annotated, Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Overwrite
from typing_extensions import TypedDict

from agentic_loop.episodes import Episode, ModelStep, ToolCall, ToolStep, UserStep
from agentic_loop.prompt_format import DraftPrompt
from agentic_loop.trajectories import Candidate, Round, TokenUsage, Trajectory

__all__ = ["STATE_MODELS", "LoopState", "add_usage", "allow_state_types", "fresh_run",
           "merge_updates", "plain_values", "with_error"]

#: The pydantic models a checkpoint of the state holds, as (module, name).
STATE_MODELS: frozenset[tuple[str, str]] = frozenset(
    (model.__module__, model.__name__)
    for model in (Round, Trajectory, TokenUsage, DraftPrompt, Candidate, Episode, ModelStep,
                  ToolStep, ToolCall, UserStep))


def allow_state_types(checkpointer: Any) -> Any:
    """``checkpointer`` able to read back the state's models under a strict serializer.

    A permissive serializer (LangGraph's default) is returned as is; anything
    that is not a checkpoint saver (None, True, False) too.
    """
    allow = getattr(checkpointer, "with_allowlist", None)  # langgraph-checkpoint >= 3
    if isinstance(checkpointer, BaseCheckpointSaver) and allow is not None:
        return allow(STATE_MODELS)
    return checkpointer


def add_usage(left: dict[str, float] | None,
              right: dict[str, float] | None) -> dict[str, float]:
    """Sum two usage dicts key by key (counts stay integers, seconds are rounded sums)."""
    out = dict(left or {})
    for key, value in (right or {}).items():
        total = out.get(key, 0) + value
        out[key] = round(total, 4) if isinstance(total, float) else int(total)
    return out


def fresh_run() -> dict[str, Any]:
    """The state update that starts a new run; the first node of every run applies it.

    Every field a run writes is reset (the run's input fields are left as
    given), the accumulating ones (``rounds``, ``errors``, ``usage``) with
    ``Overwrite`` so their reducers do not add the thread's previous run to
    the new one.
    """
    return {
        "run_id": uuid.uuid4().hex, "started_at": time.time(), "exemplars": [],
        "reflections": [], "draft": "", "draft_prompt": None, "draft_cut_from": None,
        "draft_model": None, "draft_samples": [], "draft_episode": None,
        "iteration": 0, "rounds": Overwrite([]), "usage": Overwrite({}),
        "errors": Overwrite([]), "stop_reason": None, "final": None, "archived": False,
        "trajectory_id": None, "trajectory": None, "settings": None,
        # the output fields a served graph adds (schemas.GraphState): no output yet
        "output": None, "score": None, "passed": False, "features": {}, "iterations": 0}


def plain_values(update: dict[str, Any]) -> dict[str, Any]:
    """``update`` as the state will read after it: ``Overwrite`` wrappers unwrapped."""
    return {k: v.value if isinstance(v, Overwrite) else v for k, v in update.items()}


def merge_updates(first: dict[str, Any], then: dict[str, Any]) -> dict[str, Any]:
    """One update doing ``first`` then ``then`` (a field ``first`` overwrites stays overwritten).

    >>> merged = merge_updates({"errors": Overwrite([]), "draft": ""},
    ...                        {"errors": ["boom"], "draft": "x"})
    >>> plain_values(merged)
    {'errors': ['boom'], 'draft': 'x'}
    """
    merged = dict(first)
    for key, value in then.items():
        before = merged.get(key)
        if isinstance(before, Overwrite) and not isinstance(value, Overwrite):
            if isinstance(before.value, dict):
                value = Overwrite({**before.value, **value})
            else:
                value = Overwrite([*before.value, *value])
        merged[key] = value
    return merged


def with_error(update: dict[str, Any], error: str) -> dict[str, Any]:
    """``update`` with one more error.

    >>> with_error({"errors": Overwrite([])}, "boom")["errors"].value
    ['boom']
    """
    return merge_updates(update, {"errors": [error]})


class LoopState(TypedDict, total=False):
    """Input: ``task``. Output: ``final`` (best round), ``trajectory`` and the whole history."""

    task: str
    run_id: str
    #: the run's settings, resolved once by its first node: a dumped
    #: :class:`~agentic_loop.architectures.settings.ResolvedSettings` (JSON, for any checkpointer)
    settings: dict[str, Any] | None
    started_at: float
    exemplars: list[dict[str, Any]]
    reflections: list[dict[str, Any]]
    draft: str
    #: the prompt ``draft`` was written from, and its length when it was cut (else None)
    draft_prompt: DraftPrompt | None
    draft_cut_from: int | None
    #: the model that wrote ``draft``; all samples of a best-of-n call (empty for one)
    draft_model: str | None
    draft_samples: list[dict[str, Any]]
    #: the agent's episode that wrote ``draft`` (None for a plain model's draft)
    draft_episode: Episode | None
    iteration: int
    rounds: Annotated[list[Round], operator.add]
    usage: Annotated[dict[str, float], add_usage]
    errors: Annotated[list[str], operator.add]
    stop_reason: str | None
    final: Round | None
    archived: bool
    trajectory_id: str | None
    trajectory: Trajectory | None
