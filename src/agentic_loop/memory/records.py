"""The records memory stores, and what its operations return.

Every record has an ``id``, timestamps and free ``metadata``, plus the text
it is retrieved by (``task``). An :class:`ArchiveEntry` is an accepted
output with its score and features (and, when an agent wrote it, its
:class:`~agentic_loop.episodes.Episode`: the tool calls and results that led
to it, shown to later runs as a few-shot episode); a :class:`ReflectionEntry` is a verbal
lesson drawn from a failed attempt. Records are immutable: a change is a
new version with the same ``id`` (see ``Archive.add(..., id=...)``).

Example:
    >>> entry = ArchiveEntry(task="Tagline for a bookstore", output="Stories wait on every shelf.",
    ...                      score=8.5, features={"word_count": 5})
    >>> entry.search_text(), entry.dedup_text()
    ('Tagline for a bookstore', 'Stories wait on every shelf.')
    >>> "episode" in entry.model_dump()   # a plain model's output: stored as before
    False
    >>> ArchiveEntry(task="t", output="\x1b[2J\x1b[31mcleared screen\x1b[0m").output  # stored clean
    'cleared screen'
    >>> ArchiveEntry(task="  ", output="x")            # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for ArchiveEntry
    task
      Value error, must not be empty or only whitespace ...
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    Tag,
    field_validator,
    model_serializer,
)

from agentic_loop.clean_text import clean_text
from agentic_loop.clock import utc_now
from agentic_loop.episodes import Episode
from agentic_loop.errors import ConfigError

__all__ = [
    "AddResult",
    "ArchiveEntry",
    "RECORD_TYPES",
    "MemoryRecord",
    "ReflectionEntry",
    "SearchHit",
    "Tombstone",
    "log_record_type",
    "new_id",
]


def new_id() -> str:
    """A fresh random record id (32 hex characters)."""
    return uuid.uuid4().hex


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ConfigError("must not be empty or only whitespace")
    return value


def _finite(value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise ConfigError(f"must be a finite number, got {value}")
    return value


# Stored text is printed on terminals and trained on: escape sequences and controls go first.
Text = Annotated[str, AfterValidator(clean_text), AfterValidator(_not_blank)]


class MemoryRecord(BaseModel):
    """Fields every stored record has; subclasses add their content.

    ``search_field`` names the text retrieval compares (the task);
    ``dedup_field`` names the text compared to reject near-duplicates
    (``None``: no duplicate check). ``collection_kind`` is the ``kind`` a
    collection of these records writes in its ``meta.json``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    collection_kind: ClassVar[str]
    search_field: ClassVar[str] = "task"
    dedup_field: ClassVar[str | None] = None

    id: Annotated[str, Field(min_length=1, max_length=256)] = Field(default_factory=new_id)
    created_at: datetime = Field(default_factory=utc_now)
    updated_at: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("created_at", "updated_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        # A naive time is taken as UTC, so every stored time compares with every other.
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value

    @property
    def stamp(self) -> datetime:
        """When this version was written: ``updated_at`` if set, else ``created_at``."""
        return self.updated_at or self.created_at

    def search_text(self) -> str:
        """The text this record is retrieved by."""
        return str(getattr(self, self.search_field))

    def dedup_text(self) -> str | None:
        """The text compared for near-duplicates, or ``None`` when the kind has no check."""
        return None if self.dedup_field is None else str(getattr(self, self.dedup_field))


class ArchiveEntry(MemoryRecord):
    """An accepted output, kept as an exemplar for similar tasks and as training data."""

    collection_kind: ClassVar[str] = "archive"
    dedup_field: ClassVar[str | None] = "output"

    task: Text
    output: Text
    score: Annotated[float | None, AfterValidator(_finite)] = None
    features: dict[str, Any] = Field(default_factory=dict)
    iterations: Annotated[int, Field(ge=0)] | None = None
    model_id: str | None = None
    trajectory_id: str | None = None
    #: the agent's episode that wrote ``output`` (tool calls and results in order); ``None`` for
    #: a plain model's output and for entries archived before episodes were kept
    episode: Episode | None = None

    @model_serializer(mode="wrap")
    def _without_missing_episode(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A plain model's entry is written byte for byte as before episodes existed, so a log
        # line (or a store value) of such an entry still reads in an older version.
        data: dict[str, Any] = handler(self)
        if self.episode is None:
            data.pop("episode", None)
        return data


class ReflectionEntry(MemoryRecord):
    """A verbal lesson from a failed attempt (Reflexion), retrieved for similar tasks."""

    collection_kind: ClassVar[str] = "reflexion"

    task: Text
    reflection: Text
    failure_summary: Annotated[str, AfterValidator(clean_text)] = ""
    outcome: str | None = None
    trial: Annotated[int, Field(ge=0)] = 0


RECORD_TYPES: dict[str, type[MemoryRecord]] = {
    t.collection_kind: t for t in (ArchiveEntry, ReflectionEntry)
}
"""The record type each collection kind stores, by the kind ``meta.json`` names."""


class Tombstone(BaseModel):
    """A log line that deletes the record with ``id`` (the log is append-only)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    deleted: Literal[True] = True
    deleted_at: datetime = Field(default_factory=utc_now)


def _kind(value: Any) -> str:
    if isinstance(value, Tombstone):
        return "tombstone"
    if isinstance(value, dict):
        return "tombstone" if value.get("deleted") is True else "record"
    return "record"


def log_record_type(record_type: type[MemoryRecord]) -> Any:
    """The type of one log line for ``record_type``: a record version or a :class:`Tombstone`."""
    return Annotated[
        Annotated[record_type, Tag("record")] | Annotated[Tombstone, Tag("tombstone")],
        Discriminator(_kind),
    ]


R = TypeVar("R", bound=MemoryRecord)


@dataclass(frozen=True)
class SearchHit(Generic[R]):
    """One search result: the stored record and its cosine similarity to the query (-1..1)."""

    entry: R
    similarity: float


@dataclass(frozen=True)
class AddResult(Generic[R]):
    """The outcome of one ``add``.

    ``status`` is ``"added"`` (new id), ``"replaced"`` (a new version of an
    existing id) or ``"duplicate"`` (rejected: ``duplicate_of`` is the
    stored record whose text is this close, ``similarity`` how close).
    ``entry`` is the record as stored, or the rejected candidate.
    """

    status: Literal["added", "replaced", "duplicate"]
    entry: R
    duplicate_of: R | None = None
    similarity: float | None = None

    @property
    def added(self) -> bool:
        """True when the record was stored (added or replaced)."""
        return self.status != "duplicate"
