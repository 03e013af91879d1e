"""The improve loop's records: what a round reports and what a run returns, as pydantic models.

Why typed: a round's report is read by the stop rules, the curve, the CLI's
table, the demo, the model card and the audit log; as a ``dict[str, Any]``
each reader re-learned its keys (and a typo read ``None``). These models are
the one description of ``round-NNN/report.json`` and of each entry of
``improve.json``'s ``rounds``; their JSON (``model_dump(mode="json")``) is
the shape those files always had, so a file written by an earlier version
loads with ``model_validate``.

Names: an *improve round* (:class:`ImproveRound`, one pass of grow, hint,
data, train, gate, register) is not a critique round of a run
(:class:`agentic_loop.trajectories.Round`); the round's *data gate* is the
export's score threshold and PII gate, its *release gate* the
:func:`~agentic_loop.distill.eval.gate.gate` decision (PROMOTE, ROLLBACK,
MANUAL_REVIEW) recorded as ``decision``.

Example:
    >>> r = ImproveRound(round=1, decision="PROMOTE",
    ...                 golden=GoldenStats.of(baseline=(1, 4), candidate=(3, 4)))
    >>> r.golden.candidate.pass_rate, r.decision
    (0.75, <Decision.PROMOTE: 'PROMOTE'>)
    >>> ImproveRound.model_validate(r.model_dump(mode="json")) == r
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    InstanceOf,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from agentic_loop.distill.data.manifest import describe_drops
from agentic_loop.distill.eval.gate import Decision
from agentic_loop.distill.eval.stats import t_interval, wilson
from agentic_loop.distill.loop.settings import ImproveSettings

__all__ = ["AgentStats", "DataCounts", "GoldenRate", "GoldenStats", "HintCounts",
           "ImproveResult", "ImproveRound", "JudgedData", "MeanScore", "PoolRate", "Rate",
           "Registration", "StopCode", "ToolUse", "TrainSummary"]

#: Why an improve run stopped: the round budget, a plateau, a regression (the release
#: gate said ROLLBACK), a round with nothing to train on, no new task in the logs.
StopCode = Literal["rounds", "plateau", "regression", "no_data", "no_new_tasks"]


class Rate(BaseModel):
    """A pass rate with its counts and 95% Wilson interval.

    >>> Rate.of(3, 4).pass_rate, Rate.of(0, 0).pass_rate
    (0.75, None)
    """

    n: int
    passed: int
    pass_rate: float | None
    interval: list[float]

    @classmethod
    def of(cls, passed: int, total: int) -> Rate:
        """``passed`` of ``total`` (no rate for none)."""
        return cls(n=total, passed=passed, pass_rate=passed / total if total else None,
                   interval=list(wilson(passed, total)))


class MeanScore(BaseModel):
    """A mean score with its 95% Student-t interval (the mean itself when n < 2)."""

    n: int
    mean: float | None
    interval: list[float] | None

    @classmethod
    def of(cls, values: Sequence[float]) -> MeanScore:
        """The mean of ``values`` (none for no values)."""
        n = len(values)
        if n == 0:
            return cls(n=0, mean=None, interval=None)
        mean = sum(values) / n
        interval = t_interval(values)
        return cls(n=n, mean=mean, interval=list(interval) if interval else [mean, mean])


class PoolRate(Rate):
    """The round's samples over its pool: their pass rate, tasks solved, temperatures."""

    tasks: int
    tasks_solved: int
    temperatures: list[float]


class GoldenRate(Rate):
    """One model's pass rate on the golden set, and its mean score."""

    score: MeanScore

    @classmethod
    def of_scores(cls, passed: int, total: int, scores: Sequence[float] = ()) -> GoldenRate:
        """``passed`` of ``total`` golden tasks, with the mean of ``scores``."""
        return cls(**Rate.of(passed, total).model_dump(), score=MeanScore.of(scores))


class GoldenStats(BaseModel):
    """Both models on the golden set: what the release gate compared, as pass rates."""

    tasks: int
    baseline: GoldenRate
    candidate: GoldenRate

    @classmethod
    def of(cls, *, baseline: tuple[int, int], candidate: tuple[int, int]) -> GoldenStats:
        """From ``(passed, total)`` pairs (no scores): for examples and tests."""
        return cls(tasks=baseline[1], baseline=GoldenRate.of_scores(*baseline),
                   candidate=GoldenRate.of_scores(*candidate))


def _without(data: Any, **unrecorded: object) -> Any:
    """``data`` (a dumped record) without the keys whose value says "not recorded"."""
    if isinstance(data, dict):
        return {k: v for k, v in data.items()
                if not (k in unrecorded and v == unrecorded[k])}
    return data


class ToolUse(BaseModel):
    """How an agent used its tools over a set of tasks, each task by the episode of its answer.

    ``tool_use``: tasks whose answer's episode called a tool (of the tasks
    answered by an episode); ``validity``: tool calls that ran without an
    error, of every call the model asked for; ``steps``: model calls per task.

    >>> ToolUse(tasks=4, tool_use=Rate.of(1, 4), validity=Rate.of(2, 3),
    ...         steps=MeanScore.of([1.0, 2.0, 1.0, 4.0])).describe()
    'tool use 25%, valid calls 67% (2/3), 2.0 model steps/task'
    """

    tasks: int
    tool_use: Rate
    validity: Rate
    steps: MeanScore

    def describe(self) -> str:
        """One line for people: the three numbers."""
        use = "n/a" if self.tool_use.pass_rate is None else f"{self.tool_use.pass_rate:.0%}"
        valid = ("no calls" if self.validity.pass_rate is None else
                 f"{self.validity.pass_rate:.0%} ({self.validity.passed}/{self.validity.n})")
        steps = "n/a" if self.steps.mean is None else f"{self.steps.mean:.1f}"
        return f"tool use {use}, valid calls {valid}, {steps} model steps/task"


class AgentStats(BaseModel):
    """An agent round's tool use: in the grown data and in the gate's two agents.

    Absent (``None``) where the stage did not run an agent: a plain round has
    no ``agent`` at all.

    >>> use = ToolUse(tasks=2, tool_use=Rate.of(1, 2), validity=Rate.of(1, 1),
    ...               steps=MeanScore.of([2.0, 1.0]))
    >>> print(AgentStats(grown=use, candidate=use).describe())
    grown: tool use 50%, valid calls 100% (1/1), 1.5 model steps/task; gate candidate: tool \
use 50%, valid calls 100% (1/1), 1.5 model steps/task
    """

    grown: ToolUse | None = None
    baseline: ToolUse | None = None
    candidate: ToolUse | None = None

    def describe(self) -> str:
        """One line for people: each measured side."""
        sides = (("grown", self.grown), ("gate baseline", self.baseline),
                 ("gate candidate", self.candidate))
        return "; ".join(f"{name}: {use.describe()}" for name, use in sides if use is not None)


class HintCounts(BaseModel):
    """Tasks retried with the verifier's hint, the hinted answers accepted, and how hints went.

    ``rationalized``: retried tasks whose hint gave the known answer and asked
    for the working (STaR's rationalization); ``restated``: retried tasks with
    a draft whose working only restated that answer (flagged, never trained
    on). None: a report written before they were counted.

    >>> HintCounts(retried=5, accepted=3, rationalized=2, restated=1).describe()
    'hint: 5 retried (2 given the answer, 1 only restated it), 3 accepted'
    >>> HintCounts(retried=4, accepted=1).describe()
    'hint: 4 retried, 1 accepted'
    """

    retried: int
    accepted: int
    rationalized: int | None = None
    restated: int | None = None
    echoed: int | None = None

    @model_serializer(mode="wrap")
    def _recorded(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Counts not recorded stay out of the JSON: an old round's report reads back the same."""
        return _without(handler(self), rationalized=None, restated=None, echoed=None)

    def describe(self) -> str:
        """One line for people: what the hint stage did."""
        how = [f"{n} {what}" for n, what in ((self.rationalized, "given the answer"),
                                             (self.restated, "only restated it"),
                                             (self.echoed or None, "quoted the hint"))
               if n is not None]
        return (f"hint: {self.retried} retried" + (f" ({', '.join(how)})" if how else "")
                + f", {self.accepted} accepted")


class DataCounts(BaseModel):
    """What the round's data gate let through: accepted and hinted runs, rows and pairs.

    ``dropped`` is what each training rule kept out, per output (the export
    manifest's ``dropped``: ``{"sft": {"failed_check": 3, "guard:recital": 1},
    "pairs": {...}}``); empty when nothing was dropped or the report predates it.

    >>> counts = DataCounts(sft_rows=4, dropped={"sft": {"failed_check": 3,
    ...                                                  "guard:recital": 1}, "pairs": {}})
    >>> counts.dropped_samples, counts.describe_drops()
    (4, 'not trained on: SFT rows: 3 failed a check, 1 flagged recital')
    """

    accepted: int = 0
    hinted: int = 0
    sft_rows: int = 0
    pairs: int = 0
    prompts: int | None = None
    dropped: dict[str, dict[str, int]] = Field(default_factory=dict)

    @model_serializer(mode="wrap")
    def _recorded(self, handler: SerializerFunctionWrapHandler) -> Any:
        """No drops recorded stay out of the JSON: an old round's report reads back the same."""
        return _without(handler(self), dropped={})

    @property
    def dropped_samples(self) -> int:
        """Samples kept out of the SFT rows (each counted under one rule)."""
        return sum(self.dropped.get("sft", {}).values())

    def describe_drops(self) -> str:
        """One line for people: what the training rules kept out ("" when nothing)."""
        return describe_drops(self.dropped)


class JudgedData(BaseModel):
    """Which method and judge made a round's data, and what the agreement alarm said.

    Written by the methods resting on a judge (:mod:`~agentic_loop.distill.loop.methods`):
    ``judge`` is the judge's model id (None: no judge model, as SPIN's references or
    TTRL's vote), ``allowed`` False when the alarm refused judged data (the round
    trained on the checks' data, ``reason`` says why), ``counts`` the method's own.

    >>> JudgedData(method="self-rewarding", judge="m", allowed=False,
    ...            reason="kappa 0.1 < 0.7").describe()
    'self-rewarding, judge m: judged data refused by the agreement alarm (kappa 0.1 < 0.7)'
    >>> JudgedData(method="spin", counts={"pairs": 3, "skipped_no_reference": 1}).describe()
    'spin: pairs 3, skipped_no_reference 1'
    """

    method: str
    judge: str | None = None
    judge_spec: str | None = None
    judged_reward: str | None = None
    allowed: bool = True
    reason: str = ""
    train_method: str | None = None
    counts: dict[str, Any] = Field(default_factory=dict)
    checks_rows: dict[str, int] | None = None

    def describe(self) -> str:
        """One line for people: the method, its judge, the alarm's refusal or the counts."""
        head = self.method + (f", judge {self.judge}" if self.judge else "")
        if not self.allowed:
            return f"{head}: judged data refused by the agreement alarm ({self.reason})"
        shown = ", ".join(f"{k} {v}" for k, v in self.counts.items()
                          if isinstance(v, (int, float)) and not isinstance(v, bool))
        return head + (f": {shown}" if shown else "")


class TrainSummary(BaseModel):
    """Where the candidate went, and how training went."""

    model_dir: str
    steps: int
    loss: float | None = None
    #: the accelerate launch line, or why the stage trained in-process (left out when unknown:
    #: a round written before launches were recorded reports as it did)
    launch: str | None = Field(default=None, exclude_if=lambda v: v is None)


class Registration(BaseModel):
    """The registered version, whether the release gate promoted it, what the live swap said."""

    version: str
    promoted: bool
    live: str | None = None


class ImproveRound(BaseModel):
    """One improve round (``round-NNN/report.json``): rates with intervals, counts, time.

    ``registration`` is ``register`` in the JSON (a pydantic model's own
    ``register`` is taken).
    """

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    round: int
    model: str | None = None
    from_version: str | None = None
    threshold: float | None = None
    method: str | None = None
    arch: str | None = None
    pool: PoolRate | None = None
    hint: HintCounts | None = None
    data: DataCounts | None = None
    train: TrainSummary | None = None
    golden: GoldenStats | None = None
    decision: Decision | None = None
    reasons: list[str] = Field(default_factory=list)
    registration: Registration | None = Field(
        default=None, validation_alias=AliasChoices("registration", "register"),
        serialization_alias="register")
    seconds: dict[str, float] = Field(default_factory=dict)
    ended: str | None = None
    #: an agent round's tool use (grown data, the gate's agents); None: a plain round
    agent: AgentStats | None = None
    #: which method and judge made the data, the alarm's answer; None: a checks-only method
    judged: JudgedData | None = None

    @model_serializer(mode="wrap")
    def _recorded(self, handler: SerializerFunctionWrapHandler) -> Any:
        """A plain round has no ``agent`` or ``judged`` in its JSON: it reads as it always did."""
        return _without(handler(self), agent=None, judged=None)

    def details(self) -> str:
        """The hint and data counts the rounds table has no room for ("" when none).

        >>> r = ImproveRound(round=1, hint=HintCounts(retried=2, accepted=1, rationalized=2),
        ...                  data=DataCounts(dropped={"sft": {"failed_check": 5}}))
        >>> print(r.details().replace("; ", "\\n"))
        hint: 2 retried (2 given the answer), 1 accepted
        not trained on: SFT rows: 5 failed a check
        """
        parts = [self.hint.describe() if self.hint else "",
                 self.data.describe_drops() if self.data else "",
                 self.agent.describe() if self.agent else ""]
        return "; ".join(part for part in parts if part)


class ImproveResult(BaseModel):
    """What an improve run did: each round's report, why it stopped, what serves now."""

    model_config = ConfigDict(frozen=True)

    work_dir: Path
    reports: list[ImproveRound]
    stopped: StopCode
    reason: str
    current: str | None
    plot: Path | None = None
    settings: InstanceOf[ImproveSettings] = Field(default_factory=ImproveSettings)

    @property
    def versions(self) -> list[str]:
        """The versions the rounds registered, in order."""
        return [r.registration.version for r in self.reports if r.registration is not None]
