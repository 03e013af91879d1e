"""A run's settings, resolved once by its first node and read from the state by every node.

Why: a run's settings come from three places: the architecture's defaults,
the keywords of ``run(...)`` (``rubric=``, ``user_id=``...: the config) and
the run's LangGraph context (:class:`~.schemas.RunSettings`, what a LangGraph
server or ``run(target_score=...)`` sends). Each node used to merge them
again, copying the architecture for the target and budget and parsing the
task into a rubric on every node (7 parses for a 3-round run). Now the first
node of a run merges them into one :class:`ResolvedSettings`, kept in the
state as its JSON-ready dump (``state["settings"]``), so any checkpointer
stores it and a resumed run reads the settings it started with; every node
reads it, and the architecture is never copied.

The built rubric is the one part a checkpoint cannot hold (a check may be a
Python callable), so the state records where it came from (``rubric_from``,
with the context's constraints), and :class:`RubricCache` keeps the built
one per run (:meth:`~.nodes.LoopNodes.run_rubric`), rebuilding it from that
record only after a restart.

Example:
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> from agentic_loop.architectures import Reflection
    >>> from agentic_loop.architectures.schemas import RunSettings
    >>> arch = Reflection(ScriptedChatModel(), max_iterations=3)
    >>> settings = resolve_settings(arch, {"task": "Say hi.", "user_id": "u1"}, {},
    ...                             RunSettings(max_iterations=2, constraints={"lowercase": True}))
    >>> settings.max_iterations, settings.target_score, settings.rubric_from
    (2, 8.0, 'context')
    >>> ResolvedSettings.model_validate(settings.model_dump()) == settings
    True
"""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal, Protocol

from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, ConfigDict, Field

from agentic_loop.agents.user_sim import USER_SIM_KEY, simulating, user_sim_of
from agentic_loop.architectures.sampling import temperature_at
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Rubric
from agentic_loop.judges.checks.task_constraint_parser import constraints_from_task
from agentic_loop.trajectories import hash_user_id


class ArchitectureDefaults(Protocol):
    """What :func:`resolve_settings` reads of an architecture: its defaults, nothing else
    (so this module needs no import of the nodes that call it)."""

    rubric: Rubric | None
    temperature: Any
    plateau_patience: int
    min_improvement: float

__all__ = ["INPUT_FIELDS", "ResolvedSettings", "RubricCache", "RubricSource",
           "UncheckedConstraintsWarning", "active_settings", "current_run_id", "current_settings",
           "resolve_settings", "run_metadata", "warn_unchecked_constraints"]

#: The input fields a run records in its trajectory's run metadata.
INPUT_FIELDS = ("thread_id", "user_id", "consent", "metadata")
#: Where a run's rubric came from, most binding first.
RubricSource = Literal["run", "context", "architecture", "task"]


class UncheckedConstraintsWarning(UserWarning):
    """The task states constraints that the rubric given for it does not check."""


def warn_unchecked_constraints(task: str, rubric: Rubric) -> None:
    """Say loudly when ``rubric=`` replaces constraints the task itself states.

    A rubric passed by the user wins over the task's stated constraints (it is
    the user's definition of done), so "EXACTLY 12 words" in the task is not
    checked unless the rubric checks it; silently dropping it surprised users.

    >>> import warnings
    >>> from agentic_loop.judges import Rubric
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     warn_unchecked_constraints("Say hi in exactly 2 words.",
    ...                                Rubric.for_constraints(lowercase=True))
    >>> seen[0].category.__name__, "exact_words=2" in str(seen[0].message)
    ('UncheckedConstraintsWarning', True)
    """
    stated = constraints_from_task(task)
    missing = {k: v for k, v in stated.items() if k not in rubric.constraints}
    if missing:
        listed = ", ".join(f"{k}={v!r}" for k, v in missing.items())
        warnings.warn(UncheckedConstraintsWarning(
            f"the task states constraints the rubric {rubric.name!r} does not check: {listed}; "
            f"add them to the rubric (Rubric.for_constraints(..., {listed})) or leave rubric= "
            "out to check them"), stacklevel=3)


class ResolvedSettings(BaseModel):
    """Everything a run's nodes need to know about its settings, merged once.

    JSON-ready (the state keeps ``model_dump()``), so a checkpoint holds it
    under any serializer. ``temperature`` is the run's schedule when it is a
    number or a list; a callable schedule of the architecture cannot be
    stored, so ``own_temperature`` says to use the architecture's.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    rubric_from: RubricSource
    #: the context's constraints (``rubric_from == "context"``): the rubric is rebuilt from them
    constraints: dict[str, Any] | None = None
    target_score: float
    max_iterations: int
    plateau_patience: int
    min_improvement: float
    samples_per_round: int
    temperature: float | list[float] | None = None
    own_temperature: bool = False
    run_metadata: dict[str, Any]
    #: an agent's episode limits: model calls, wall-clock seconds (None: no limit). Defaults
    #: for settings a checkpoint stored before they existed.
    max_steps: int = 8
    episode_timeout_s: float | None = None
    #: the task's simulated user (a ``UserSimulator``'s JSON), answering an agent's final
    #: answers; left out of the dump when none, so the settings of other runs are as before
    user_sim: dict[str, Any] | None = Field(default=None, exclude_if=lambda value: value is None)

    def temperature_at(self, iteration: int, own: Any = None) -> float | None:
        """The temperature of round ``iteration`` (``own``: the architecture's callable)."""
        return temperature_at(own if self.own_temperature else self.temperature, iteration)


def resolve_settings(arch: ArchitectureDefaults, state: Mapping[str, Any], config: RunnableConfig,
                     context: Any = None) -> ResolvedSettings:
    """Merge a run's context, config and input fields over ``arch``'s defaults.

    The context counts only when it is :class:`~.schemas.RunSettings` (a
    parent graph's own context is left alone); a ``rubric=`` in the config
    wins over the context's constraints, which win over the architecture's
    rubric, which wins over the task's stated constraints. A rubric given by
    the caller that leaves out constraints the task states is warned about
    here, once per run.
    """
    from agentic_loop.architectures.schemas import RunSettings

    ctx = context if isinstance(context, RunSettings) else None
    configurable = (config or {}).get("configurable") or {}
    source: RubricSource
    if configurable.get("rubric") is not None:
        source = "run"
    elif ctx is not None and ctx.constraints is not None:
        source = "context"
    else:
        source = "architecture" if arch.rubric is not None else "task"
    own = callable(arch.temperature)
    schedule = ctx.temperature if ctx is not None and ctx.temperature is not None else (
        None if own else arch.temperature)

    def pick(name: str) -> Any:
        value = getattr(ctx, name, None) if ctx is not None else None
        return getattr(arch, name) if value is None else value

    return ResolvedSettings(
        rubric_from=source, constraints=ctx.constraints if source == "context" and ctx else None,
        target_score=float(pick("target_score")), max_iterations=int(pick("max_iterations")),
        plateau_patience=arch.plateau_patience, min_improvement=arch.min_improvement,
        samples_per_round=int(pick("samples_per_round")),
        temperature=list(schedule) if isinstance(schedule, (list, tuple)) else schedule,
        own_temperature=own and (ctx is None or ctx.temperature is None),
        max_steps=int(getattr(ctx, "max_steps", None) or getattr(arch, "max_steps", 8) or 8),
        episode_timeout_s=(getattr(ctx, "episode_timeout_s", None)
                           or getattr(arch, "episode_timeout_s", None)),
        user_sim=_user_sim(ctx, configurable),
        run_metadata=run_metadata(configurable, {k: state[k] for k in INPUT_FIELDS
                                                 if state.get(k) is not None}))


def _user_sim(context: Any, configurable: Mapping[str, Any]) -> dict[str, Any] | None:
    """A run's simulated user, as JSON: the context's ``user_sim``, else the config's
    (``configurable[USER_SIM_KEY]``: a ``UserSimulator`` or its JSON); checked here, when the
    run starts.

    >>> _user_sim(None, {USER_SIM_KEY: {"replies": ["It is A1001."]}})["replies"]
    ['It is A1001.']
    """
    given = getattr(context, "user_sim", None)
    user = user_sim_of(given if given is not None else configurable.get(USER_SIM_KEY))
    return None if user is None else user.model_dump(mode="json")


def run_metadata(configurable: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The run metadata of the config (``Runner.config`` sets it), updated from input fields.

    >>> run_metadata({}, {"thread_id": "t1", "consent": True})
    {'user_id_hash': None, 'consent': True, 'metadata': {'thread_id': 't1'}}
    """
    meta = dict(configurable.get("run_metadata") or {"user_id_hash": None, "consent": None,
                                                      "metadata": {}})
    extra = dict(meta.get("metadata") or {})
    given = inputs.get("metadata")
    if given is not None:
        if not isinstance(given, dict):
            raise ConfigError(f"metadata={given!r:.80} is a {type(given).__name__}; pass a "
                              "JSON object (a dict)")
        extra.update(given)
    thread = inputs.get("thread_id") or configurable.get("thread_id")
    if thread is not None and ("thread_id" in inputs or "run_metadata" not in configurable):
        extra["thread_id"] = str(thread)
    if "user_id" in inputs:
        meta["user_id_hash"] = hash_user_id(str(inputs["user_id"]))
    if "consent" in inputs:
        meta["consent"] = bool(inputs["consent"])
    meta["metadata"] = extra
    return meta


class RubricCache:
    """The built rubric of each live run, by run id: built once, rebuilt only after a restart.

    Bounded (the oldest runs go first), and thread-safe: a batch runs many
    runs of one architecture at once.
    """

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._built: OrderedDict[str, Rubric] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, run_id: str | None, build: Callable[[], Rubric]) -> Rubric:
        """The rubric of run ``run_id``: cached, else ``build()`` (then cached)."""
        with self._lock:
            if run_id and run_id in self._built:
                self._built.move_to_end(run_id)
                return self._built[run_id]
        rubric = build()
        if run_id:
            with self._lock:
                self._built[run_id] = rubric
                while len(self._built) > self._size:
                    self._built.popitem(last=False)
        return rubric

    def __len__(self) -> int:
        return len(self._built)

    def forget(self, run_id: str | None) -> None:
        """Drop a finished run's rubric."""
        with self._lock:
            self._built.pop(run_id or "", None)


_active: ContextVar[ResolvedSettings | None] = ContextVar("agentic_loop_settings", default=None)
_run_id: ContextVar[str | None] = ContextVar("agentic_loop_run_id", default=None)


@contextmanager
def active_settings(settings: ResolvedSettings,
                    run_id: str | None = None) -> Iterator[ResolvedSettings]:
    """Bind a run's settings (read from its state) for one node's model calls.

    ``LoopNodes._call`` samples with them (:func:`current_settings`), so a
    subclass node that only calls ``self._call(...)`` runs with the run's
    sampling settings too; ``run_id`` names an agent's episode threads
    (:func:`current_run_id`); a run whose task names a simulated user binds it for the
    node's episodes (:func:`~agentic_loop.agents.user_sim.simulating`).
    """
    token, run = _active.set(settings), _run_id.set(run_id)
    try:
        if settings.user_sim is None:
            yield settings
        else:
            with simulating(user_sim_of(settings.user_sim)):
                yield settings
    finally:
        _run_id.reset(run)
        _active.reset(token)


def current_run_id() -> str | None:
    """The run id :func:`active_settings` bound for the running node (None outside one)."""
    return _run_id.get()


def current_settings() -> ResolvedSettings | None:
    """The settings :func:`active_settings` bound for the running node (None outside one)."""
    return _active.get()
