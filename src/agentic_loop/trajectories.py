"""Trajectories: one durable record per architecture run, the training loop's only input.

Every round's draft, features, score and critique are kept (the same
:class:`Round` objects the graph state held), along with what
the run saw (exemplar and reflection ids), what it cost (latency, tokens,
LLM calls) and what went wrong (errors as data). Distillation later turns
these into SFT sets (accepted finals and drafts) and DPO pairs (an early
low-scoring draft against the accepted final).

Each round also keeps the prompt its draft was written from (a
:class:`~agentic_loop.prompt_format.DraftPrompt`), so training can ask a
model exactly what the loop asked it. Model text is cleaned before it is
stored (:func:`clean_text`): a lone surrogate or a NUL must never make a run
unloggable.

The log is append-only JSONL with the archive's guarantees (fsync before
``append`` returns, cross-process lock, torn tails skipped): see
:mod:`agentic_loop.jsonl_log`. User feedback arrives later than the run, so it
is appended to its own ``feedback.jsonl`` and merged when reading.

Example:
    >>> import tempfile
    >>> log = TrajectoryLog(tempfile.mkdtemp())
    >>> t = Trajectory(architecture="reflection", model_id="m", task="Say hi.",
    ...                rounds=[Round(iteration=0, draft="hi", score=9.5, passed=True)],
    ...                final_output="hi", final_score=9.5, accepted=True)
    >>> log.append(t)
    >>> log.record_feedback(t.id, "up")
    >>> [(r.task, r.feedback) for r in log.read()]
    [('Say hi.', 'up')]
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentic_loop.clean_text import clean_text, fix_surrogates
from agentic_loop.clock import utc_now
from agentic_loop.episodes import Episode
from agentic_loop.errors import ConfigError, StorageError
from agentic_loop.jsonl_log import JsonlLog
from agentic_loop.prompt_format import (  # re-exported: the record's prompt, and its format
    PROMPT_VERSION,
    SYSTEM,
    DraftPrompt,
    fresh_draft_prompt,
    rubric_requirements,
)
from agentic_loop.text_places import record_unless_default

__all__ = [
    "PROMPT_VERSION", "SYSTEM", "Candidate", "ConsentEvent", "DraftPrompt", "FeedbackEvent",
    "ReviewLabel", "Round", "TokenUsage", "Trajectory", "TrajectoryLog", "TrajectoryPathError",
    "clean_text", "trajectory_files", "fresh_draft_prompt", "hash_user_id", "merge_side_records",
    "rubric_requirements"
]

#: 2: rounds record their prompt (``Round.prompt``) and an output cut (``Round.cut_from``).
#: 3: rounds record the model that answered (``Round.model``) and the other samples of a
#: best-of-n round (``Round.alternatives``); usage records ``llm_seconds``.
#: 4: a draft an agent wrote keeps its episode (``Round.episode``, ``Candidate.episode``):
#: every model call, tool call and tool result. Older records read with ``episode=None``.
SCHEMA_VERSION = 4
Feedback = Literal["up", "down"]

def _drop_surrogates(value: Any) -> Any:
    """``value`` (plain data) with lone surrogates dropped from every string in it."""
    if isinstance(value, str):
        return fix_surrogates(value)
    if isinstance(value, dict):
        return {_drop_surrogates(k): _drop_surrogates(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_drop_surrogates(v) for v in value]
    return value


class TrajectoryPathError(StorageError, NotADirectoryError):
    """A trajectory log path names a file that is not a ``.jsonl`` log."""


def hash_user_id(user_id: str, salt: str | None = None) -> str:
    """A salted SHA-256 of a user id, so trajectories never hold the raw id.

    The salt comes from ``$AGENTIC_LOOP_USER_SALT`` unless given.

    >>> hash_user_id("alice", salt="s") == hash_user_id("alice", salt="s")
    True
    >>> len(hash_user_id("alice", salt="s"))
    64
    """
    salt = salt if salt is not None else os.environ.get("AGENTIC_LOOP_USER_SALT", "agentic-loop")
    return hashlib.sha256(f"{salt}:{user_id}".encode()).hexdigest()


class TokenUsage(BaseModel):
    """Tokens and model calls a run consumed (all LLM calls, critiques included).

    A best-of-n round counts its n samples: n calls and their tokens.
    ``llm_seconds`` is the wall time during which at least one of the run's
    model calls was in flight (n samples decoded together count once), the
    cost a bench divides pass rates by.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    llm_calls: int = 0
    llm_seconds: float = 0.0


class Candidate(BaseModel):
    """A sample of a best-of-n round that lost to the round's draft: a ready DPO negative.

    ``score`` and ``passed`` are by the checks alone (judged features count as
    unmet) unless ``judged`` says the LLM judge scored it too (a rubric with no
    checks judges every sample).
    """

    draft: str
    score: float | None = None
    passed: bool | None = None
    features: dict[str, Any] = Field(default_factory=dict)
    guards: dict[str, str] = Field(default_factory=dict)
    judged: bool = False
    model: str | None = None
    cut_from: int | None = None
    #: the agent's episode that produced the draft (None for a plain model's answer)
    episode: Episode | None = None


class Round(BaseModel):
    """One draft and its judgement: the only round model of the package.

    The architectures' graph state accumulates these, a trajectory stores
    them, and ``RunResult.trace`` shows them; one shape from node to disk.
    """

    iteration: int
    draft: str
    score: float | None = None
    passed: bool | None = None
    features: dict[str, Any] = Field(default_factory=dict)
    critique: str | None = None
    overall_score: int | None = None
    feedback: str | None = None
    latency_s: float | None = None
    #: reward-hacking guards that fired on the draft (flag -> reason); counted by exports
    guards: dict[str, str] = Field(default_factory=dict)
    #: the prompt the draft was written from (None in runs logged before schema 2)
    prompt: DraftPrompt | None = None
    #: the model's answer had this many characters and was cut to the output limit
    cut_from: int | None = None
    #: the model that wrote the draft (its answer's ``model_name``; else the architecture's)
    model: str | None = None
    #: the other samples of a best-of-n round (``samples_per_round``), best first
    alternatives: list[Candidate] = Field(default_factory=list)
    #: the agent's episode that produced the draft: every model call, tool call and tool
    #: result in order (None for a plain model's answer, and in runs logged before schema 4)
    episode: Episode | None = None
    #: the model that judged the draft's LLM features (None: no model was asked, the
    #: checks decided; and in runs logged before this field existed)
    judge: str | None = None
    #: how a best-of-n tie on the checks was broken by a group ranker (``rank_ties=True``);
    #: None (left out of the JSON): no tie, or no ranker
    tie_break: str | None = Field(default=None, exclude_if=lambda value: value is None)


class Trajectory(BaseModel):
    """Everything one architecture run did, as data."""

    model_config = ConfigDict(extra="ignore")

    schema_version: int = SCHEMA_VERSION
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    created_at: datetime = Field(default_factory=utc_now)
    architecture: str
    model_id: str
    task: str
    rubric: dict[str, Any] | None = None
    exemplar_ids: list[str] = Field(default_factory=list)
    reflection_ids: list[str] = Field(default_factory=list)
    rounds: list[Round] = Field(default_factory=list)
    final_output: str | None = None
    final_score: float | None = None
    accepted: bool = False
    archived: bool = False
    stop_reason: str | None = None
    latency_s: float | None = None
    usage: TokenUsage = Field(default_factory=TokenUsage)
    errors: list[str] = Field(default_factory=list)
    user_id_hash: str | None = None
    consent: bool | None = None
    feedback: Feedback | None = None
    #: a person's latest review of the run (``agentic-loop review``), merged in on read
    review: ReviewLabel | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the run finished without errors."""
        return not self.errors

    def output_round(self) -> Round | None:
        """The round whose draft is the run's output (the last such), else the last round.

        The best draft wins, not the last, so the round that judged the output may be an
        earlier one (its ``judge``, ``overall_score`` and guards are the output's).

        >>> t = Trajectory(architecture="a", model_id="m", task="t", final_output="b",
        ...                rounds=[Round(iteration=0, draft="b"), Round(iteration=1, draft="c")])
        >>> t.output_round().iteration
        0
        """
        matches = [r for r in self.rounds if r.draft == self.final_output]
        return matches[-1] if matches else (self.rounds[-1] if self.rounds else None)

    def storable(self) -> Trajectory:
        """This trajectory, or a copy without the lone surrogates that UTF-8 cannot store.

        Drafts are cleaned when the model returns them; a critique, an error
        message or metadata can still carry one, and one such character must
        not make the whole run unloggable.

        >>> t = Trajectory(architecture="a", model_id="m", task="t", errors=["bad \\udc80\\x00"])
        >>> clean = t.storable()
        >>> clean.errors
        ['bad \\x00']
        >>> clean.storable() is clean
        True
        """
        dumped = self.model_dump()
        cleaned = _drop_surrogates(dumped)
        return self if cleaned == dumped else Trajectory.model_validate(cleaned)


class FeedbackEvent(BaseModel):
    """A user's verdict on a finished run, logged when it arrives."""

    trajectory_id: str
    feedback: Feedback
    created_at: datetime = Field(default_factory=utc_now)


class ReviewLabel(BaseModel):
    """A person's label on a logged run: accept/reject, a 1-5 rating, a comment (any of them).

    Written to ``reviews.jsonl`` beside the trajectories (the local review
    queue, or labels pulled from a LangSmith annotation queue); the latest
    label of a run joins it on :meth:`TrajectoryLog.read`. A rejected run
    leaves the SFT set and becomes a DPO negative; the monitor compares the
    labels with the judge's scores.

    >>> ReviewLabel(trajectory_id="t1", verdict="reject", rating=2).verdict
    'reject'
    >>> ReviewLabel(trajectory_id="t1")
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for ReviewLabel
      Value error, a review label needs a verdict, a rating or a comment (trajectory t1) ...
    """

    model_config = ConfigDict(frozen=True)

    trajectory_id: str = Field(min_length=1)
    verdict: Literal["accept", "reject"] | None = None
    rating: int | None = Field(default=None, ge=1, le=5)
    comment: str | None = Field(default=None, max_length=4000)
    reviewer: str | None = None
    #: where the label was given: the local queue, or a LangSmith annotation queue
    source: Literal["local", "langsmith"] = "local"
    #: how the run reached the person: the review sample's random draw, or as an edge case
    #: (a restricted score range: the agreement alarm never decides on those); None: no queue
    drawn: Literal["random", "edge"] | None = None
    created_at: datetime = Field(default_factory=utc_now)

    @model_validator(mode="after")
    def _says_something(self) -> ReviewLabel:
        if self.verdict is None and self.rating is None and not (self.comment or "").strip():
            raise ConfigError("a review label needs a verdict, a rating or a comment "
                              f"(trajectory {self.trajectory_id})")
        return self


class ConsentEvent(BaseModel):
    """A user's consent to training on their runs, given or withdrawn after the runs."""

    user_id_hash: str
    consent: bool
    created_at: datetime = Field(default_factory=utc_now)


class TrajectoryLog:
    """Append-only, crash-safe log of trajectories in a directory.

    ``path`` is a directory (created on first write) holding
    ``trajectories.jsonl``, ``feedback.jsonl`` and ``consent.jsonl``; a path
    ending in ``.jsonl`` names the trajectories file itself.
    """

    FILE = "trajectories.jsonl"
    FEEDBACK_FILE = "feedback.jsonl"
    CONSENT_FILE = "consent.jsonl"
    REVIEW_FILE = "reviews.jsonl"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        path = Path(path).expanduser()
        if path.suffix == ".jsonl":
            self.dir, file = path.parent, path
        else:
            if os.path.exists(path) and not os.path.isdir(path):  # these never raise
                raise TrajectoryPathError(
                    f"TrajectoryLog path {path} is a file; pass a directory or a .jsonl file")
            self.dir, file = path, path / self.FILE
        self._log: JsonlLog[Trajectory] = JsonlLog(file, Trajectory)
        self._place_recorded = False
        self._feedback: JsonlLog[FeedbackEvent] = JsonlLog(self.dir / self.FEEDBACK_FILE,
                                                           FeedbackEvent)
        self._consent: JsonlLog[ConsentEvent] = JsonlLog(self.dir / self.CONSENT_FILE,
                                                         ConsentEvent)
        self._reviews: JsonlLog[ReviewLabel] = JsonlLog(self.dir / self.REVIEW_FILE, ReviewLabel)

    @property
    def path(self) -> Path:
        """The trajectories file."""
        return self._log.path

    def append(self, trajectory: Trajectory) -> None:
        """Store one trajectory durably (fsync'd before returning).

        A log outside the data folder's ``trajectories/`` records its place
        first (:func:`~agentic_loop.text_places.record_unless_default`), so
        ``forget`` finds the user's runs in it without being told.
        """
        if not self._place_recorded:
            record_unless_default("trajectories", self._log.path, what="trajectory log")
            self._place_recorded = True
        self._log.append(trajectory)

    def record_feedback(self, trajectory_id: str, feedback: Feedback) -> None:
        """Attach a user's thumbs up/down to a logged run."""
        if feedback not in ("up", "down"):
            raise ConfigError(f"feedback={feedback!r}: pass 'up' or 'down'")
        self._feedback.append(FeedbackEvent(trajectory_id=trajectory_id, feedback=feedback))

    def record_consent(self, user_id: str, consent: bool, *, salt: str | None = None) -> None:
        """Record a user's consent given or withdrawn later; :meth:`read` applies the latest
        to all their runs, so the next export honours it."""
        self._consent.append(ConsentEvent(user_id_hash=hash_user_id(user_id, salt),
                                          consent=bool(consent)))

    def record_review(self, label: ReviewLabel) -> None:
        """Store a person's label on a logged run; :meth:`read` merges the latest one in.

        >>> import tempfile
        >>> log = TrajectoryLog(tempfile.mkdtemp())
        >>> log.append(Trajectory(architecture="a", model_id="m", task="t", id="r1"))
        >>> log.record_review(ReviewLabel(trajectory_id="r1", verdict="reject", rating=1))
        >>> log.record_review(ReviewLabel(trajectory_id="r1", comment="also too long"))
        >>> review = log.read()[0].review      # the latest of each field
        >>> review.verdict, review.rating, review.comment, len(log.reviews())
        ('reject', 1, 'also too long', 2)
        """
        if not isinstance(label, ReviewLabel):
            raise ConfigError(f"record_review takes a ReviewLabel, got {type(label).__name__}")
        self._reviews.append(label)

    def reviews(self) -> list[ReviewLabel]:
        """Every stored review label, oldest first (a run labelled twice appears twice);
        :meth:`read` merges a run's labels field by field, the latest value of each winning."""
        return self._reviews.read_all()

    def read(self) -> list[Trajectory]:
        """Every valid trajectory, oldest first, with the latest feedback, review and consent
        merged in.

        Corrupt lines are skipped with a warning naming ``file:line``.
        """
        consent = self._consent.read_all() if self._consent.path.is_file() else []
        feedback = [(e.trajectory_id, e.feedback) for e in self._feedback.read_all()]
        return merge_side_records(self._log.read_all(), feedback, self.reviews(),
                                  [(e.user_id_hash, e.consent) for e in consent])

    def read_since(self, watermark: int) -> tuple[list[Trajectory], int]:
        """The runs after the first ``watermark`` (merged as by :meth:`read`), and the new
        watermark (the log's length; clamped to it when a ``forget`` rewrite shrank the log:
        runs logged then within the old watermark are missed, so read it whole after forget)."""
        runs = self.read()
        return runs[min(max(int(watermark), 0), len(runs)):], len(runs)

    def __iter__(self) -> Iterator[Trajectory]:
        return iter(self.read())

    def __len__(self) -> int:
        return len(self._log.read_all())

    def __repr__(self) -> str:
        return f"TrajectoryLog({str(self.dir)!r})"


def merge_side_records(runs: Sequence[Trajectory], feedback: Iterable[tuple[str, Feedback]],
                       reviews: Iterable[ReviewLabel],
                       consent: Iterable[tuple[str, bool]]) -> list[Trajectory]:
    """The runs with the latest feedback, review (field by field) and consent merged in, as
    every log's ``read`` returns them (file or Postgres); side records come oldest first.

    >>> run = Trajectory(architecture="a", model_id="m", task="t", id="r1", user_id_hash="h")
    >>> [merged] = merge_side_records(
    ...     [run], [("r1", "down"), ("r1", "up")],
    ...     [ReviewLabel(trajectory_id="r1", verdict="reject"),
    ...      ReviewLabel(trajectory_id="r1", comment="long")], [("h", False)])
    >>> merged.feedback, merged.review.verdict, merged.review.comment, merged.consent
    ('up', 'reject', 'long', False)
    """
    latest, agreed = dict(feedback), dict(consent)
    reviewed: dict[str, ReviewLabel] = {}
    for label in reviews:  # field by field: a later comment keeps the verdict
        old = reviewed.get(label.trajectory_id)
        reviewed[label.trajectory_id] = label if old is None else label.model_copy(update={
            k: getattr(old, k) for k in ("verdict", "rating", "comment", "reviewer", "drawn")
            if getattr(label, k) is None})

    def update(t: Trajectory) -> dict[str, Any]:
        found = {"feedback": latest.get(t.id), "review": reviewed.get(t.id),
                 "consent": agreed.get(t.user_id_hash) if t.user_id_hash else None}
        return {k: v for k, v in found.items() if v is not None}

    return [t.model_copy(update=u) if (u := update(t)) else t for t in runs]


def trajectory_files(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The trajectory logs under ``paths``: ``.jsonl`` files as given, folders searched for
    ``trajectories.jsonl`` at any depth (a demo's ``trajectories/train`` and ``held_out``)."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_file() and path.suffix == ".jsonl":
            found.append(path)
        elif path.is_dir():
            found += sorted(path.rglob(TrajectoryLog.FILE))
    return list(dict.fromkeys(found))
