"""What a graph takes, gives and lets a caller set per run: input, output and context schemas.

Why: a graph served by a LangGraph server (or dropped into a user's graph)
is described by its schemas alone. LangGraph Studio draws its input form from
:class:`RunInput`, the SDK's caller reads :class:`RunOutput`, and per-run
settings (the rubric's constraints, the target score, the number of drafts)
travel as the run's *context* (:class:`RunSettings`, LangGraph's
``context_schema``), so one served graph serves every setting with no
rebuild. Python callers keep ``Architecture.run(...)``; the schemas are what
the same graph shows to everyone else.

The first node of a run merges the context, the input fields and the
config (``run(rubric=..., user_id=...)``) over the architecture's defaults
into one settings object in the state
(:func:`~agentic_loop.architectures.settings.resolve_settings`), so no node
needs to know where a setting came from. ``Architecture.run(...)`` sends its
settings keywords as this same context.

Example:
    >>> settings = RunSettings(constraints={"exact_words": 3}, max_iterations=1)
    >>> settings.rubric().names
    ('exact_words',)
    >>> sorted(RunInput.__annotations__)
    ['consent', 'metadata', 'task', 'thread_id', 'user_id']
    >>> RunSettings(target_score=11)
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for RunSettings
    target_score
      Input should be less than or equal to 10 ...
"""

from __future__ import annotations

from typing import Any, NotRequired, Required

from pydantic import BaseModel, ConfigDict, Field, field_validator
from typing_extensions import TypedDict

from agentic_loop.architectures.results import RunResult
from agentic_loop.architectures.sampling import MAX_SAMPLES_PER_ROUND
from agentic_loop.architectures.state import LoopState
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Rubric
from agentic_loop.trajectories import Round, Trajectory

__all__ = ["CONTEXT_FIELDS", "MAX_RUN_EPISODE_S", "MAX_RUN_ITERATIONS", "MAX_RUN_STEPS",
           "OUTPUT_FIELDS", "GraphState", "RunInput", "RunOutput", "RunSettings", "output_fields"]

#: The most drafts a run's context may ask for: a served graph takes settings from anyone
#: who can reach the server, and each draft costs model calls.
MAX_RUN_ITERATIONS = 20

#: The settings a run's context may carry (``Architecture.run`` takes them as keywords).
CONTEXT_FIELDS = ("constraints", "target_score", "max_iterations", "samples_per_round",
                  "temperature", "max_steps", "episode_timeout_s", "user_sim")
#: The most model calls a run's context may give an agent's episode, and the longest wall clock.
MAX_RUN_STEPS = 100
MAX_RUN_EPISODE_S = 3_600.0
#: The result fields a run's output carries, as :class:`RunResult` names them.
OUTPUT_FIELDS = ("output", "score", "passed", "features", "stop_reason", "iterations")


class RunInput(TypedDict, total=False):
    """A run's input: the task, and optional fields recorded with its trajectory."""

    task: Required[str]
    #: Your conversation or session id; kept in the trajectory's metadata. On a LangGraph
    #: server, the server's thread id is kept when this is not given.
    thread_id: NotRequired[str]
    #: Who asked; only a salted hash reaches the trajectory (``AGENTIC_LOOP_USER_SALT``).
    user_id: NotRequired[str]
    #: Whether the user agreed that this run may be used for training.
    consent: NotRequired[bool]
    #: Anything else to keep with the trajectory (JSON values).
    metadata: NotRequired[dict[str, Any]]


class RunOutput(TypedDict, total=False):
    """A run's output: the result fields first, then the record behind them.

    ``output`` is the best draft (not merely the last), ``passed`` says every
    check of the rubric holds for it, ``iterations`` counts the drafts judged.
    ``final`` (the best round) and ``trajectory`` (the whole run, as logged)
    are there for parent graphs and callers that want more than the summary.
    """

    output: str | None
    score: float | None
    passed: bool
    features: dict[str, Any]
    stop_reason: str | None
    iterations: int
    archived: bool
    errors: list[str]
    trajectory_id: str
    final: Round | None
    trajectory: Trajectory


class GraphState(LoopState, total=False):
    """The graph's whole state: the loop's own keys plus the input and output fields."""

    thread_id: str
    user_id: str
    consent: bool
    metadata: dict[str, Any]
    output: str | None
    score: float | None
    passed: bool
    features: dict[str, Any]
    iterations: int


class RunSettings(BaseModel):
    """Settings of one run, given as its LangGraph context; unset fields keep the graph's own.

    From the SDK: ``client.runs.wait(thread, "reflection", input={"task": ...},
    context={"constraints": {"exact_words": 12}, "max_iterations": 2})``; from
    Python: ``arch.run(task, constraints={"exact_words": 12}, max_iterations=2)``
    (which sends this context) or ``graph.invoke({"task": ...}, context=RunSettings(...))``.
    """

    model_config = ConfigDict(extra="forbid")

    constraints: dict[str, Any] | None = Field(
        default=None,
        description="The rubric's checks as Rubric.for_constraints keywords, e.g. "
                    '{"word_count": [10, 12], "exclude_words": ["we"]}. Replaces the '
                    "graph's rubric (and the constraints parsed from the task) for this run.")
    target_score: float | None = Field(
        default=None, ge=0.0, le=10.0,
        description="Stop once a draft scores at least this (0-10) and passes every check.")
    max_iterations: int | None = Field(
        default=None, ge=1, le=MAX_RUN_ITERATIONS,
        description="At most this many drafts are written and judged.")
    samples_per_round: int | None = Field(
        default=None, ge=1, le=MAX_SAMPLES_PER_ROUND,
        description="Best-of-n: answers drawn together per round; the checks keep the best.")
    temperature: float | list[float] | None = Field(
        default=None,
        description="Sampling temperature (>= 0), or one per round (the last repeats).")
    max_steps: int | None = Field(
        default=None, ge=1, le=MAX_RUN_STEPS,
        description="An agent's episode ends after this many model calls (step_limit).")
    episode_timeout_s: float | None = Field(
        default=None, gt=0, le=MAX_RUN_EPISODE_S,
        description="An agent's episode ends after this many seconds (time_limit).")
    user_sim: dict[str, Any] | None = Field(
        default=None,
        description='A simulated user who answers the agent, as UserSimulator JSON: {"kind": '
                    '"scripted", "replies": [...]} or {"kind": "chat", "persona": ..., "goal": '
                    "...} (the run's own model plays it); its stop check by registered name.")

    @field_validator("user_sim", mode="before")
    @classmethod
    def _served_user_sim(cls, value: Any) -> dict[str, Any] | None:
        """A run's simulated user as JSON, refused when it would import or load what the
        sender names: a served graph takes context from anyone who can reach it. (From Python,
        pass any simulator in ``config["configurable"][USER_SIM_KEY]``.)"""
        from agentic_loop.agents.user_sim import user_sim_of

        user = user_sim_of(value)
        if user is None:
            return None
        if isinstance(user.stop, str) and ":" in user.stop:
            raise ConfigError(f"user_sim.stop={user.stop!r}: a run's context may name only a "
                              "registered stop check, never an import path; register it on the "
                              "server, or pass the simulator in the run's config")
        if user.model is not None:
            raise ConfigError(f"user_sim.model={user.model!r}: a run's context may not name a "
                              "model to load; leave it out (the run's model plays the user), "
                              "or pass the simulator in the run's config")
        return user.model_dump(mode="json")

    @field_validator("temperature")
    @classmethod
    def _temperatures(cls, value: float | list[float] | None) -> float | list[float] | None:
        """Refuse a negative temperature or an empty schedule when the run starts."""
        values = [value] if isinstance(value, (int, float)) else value
        if values is not None and (not values or any(v < 0 for v in values)):
            raise ConfigError(f"temperature={value!r}: pass a number >= 0 or a non-empty list "
                              "of them (one per round)")
        return value

    @field_validator("constraints")
    @classmethod
    def _known_constraints(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        """Refuse a constraint ``Rubric.for_constraints`` does not know, when the run starts.

        A user's check comes only by a name the server registered: a served graph takes
        context from anyone who can reach it, and an import path would import their choice.
        """
        if value is not None:
            if not value:
                raise ConfigError("constraints={} names no check; leave it out to keep the "
                                  "graph's rubric, or name at least one constraint")
            check = value.get("check")
            ref = check.get("ref") if isinstance(check, dict) else check
            if isinstance(ref, str) and ":" in ref:
                raise ConfigError(
                    f"constraints check={ref!r}: a run's context may name only a registered "
                    "check (register_check('name', fn) in the served code), never an import "
                    "path; pass the name, or give the graph a rubric in code")
            Rubric.for_constraints(**value)
        return value

    def rubric(self) -> Rubric | None:
        """The rubric these settings ask for (None: the graph's own)."""
        return None if self.constraints is None else Rubric.for_constraints(**self.constraints)


def output_fields(trajectory: Trajectory) -> dict[str, Any]:
    """The result fields of :class:`RunOutput` for a finished run's trajectory."""
    view = RunResult(trajectory=trajectory)
    return {name: getattr(view, name) for name in OUTPUT_FIELDS}
