"""Recorded places of user text: found, erased line by line, or named as out of reach.

Why: a writer that puts user text where its caller says (an export folder,
a shadow router's log, a Postgres store) records the place first
(:mod:`agentic_loop.text_places`). An erasure reads those records from the data
folder and from beside every trajectory log, memory root and registry it
was given, and then reaches each place:

* an ``export`` folder joins the dataset folders (:mod:`.exports`);
* a ``log`` (a JSONL file of prompts and answers) loses every line that
  names an erased run or record, or the user's hash (at a time the
  selection takes); in the lines it keeps (other users' calls that were
  shown an erased record in their prompt) the erased texts are replaced
  (:func:`~.references.scrub_copies`); its quarantine file, backups and
  orphan temporaries lose every such line;
* a ``store`` is handled by :mod:`.stores`, a ``database`` (a Postgres trajectory log) by
  :mod:`.trajectory_db`;
* a ``trajectories`` log and a ``memory`` root (written outside the data
  folder's own ``trajectories/``, ``archive/`` and ``reflections/``) join the
  trajectory logs and memory roots erased by default.

A place that cannot be reached (gone, not a file, unreadable, locked) is
not skipped silently: it comes back as a :class:`PlaceResult` with its
``problem``, which the report lists as a warning.

Example:
    >>> import json, tempfile, pathlib
    >>> from agentic_loop.distill.forget.selection import Selection
    >>> from agentic_loop.text_places import record_place
    >>> data = pathlib.Path(tempfile.mkdtemp())
    >>> log = data / "shadow.jsonl"
    >>> _ = log.write_text(json.dumps({"key": "h1", "prompt": "Ann's plan"}) + "\\n"
    ...                    + json.dumps({"key": "h2", "prompt": "Bob's plan"}) + "\\n")
    >>> _ = record_place("log", log, what="shadow log", near=[data])
    >>> _ = record_place("log", data / "gone.jsonl", what="shadow log", near=[data])
    >>> found = recorded_places([data])
    >>> kept, gone = erase_logs(found.logs, Selection(user_hash="h1"), ids=set(), texts={})
    >>> kept.removed, gone.warning()  # doctest: +ELLIPSIS
    (1, 'could not reach the shadow log .../gone.jsonl: no longer exists; if it was moved...')
    >>> "Bob" in log.read_text(), "Ann" in log.read_text()
    (True, False)
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agentic_loop.distill.forget.files import strings_in
from agentic_loop.distill.forget.logs import erase_lines
from agentic_loop.distill.forget.references import MIN_LOG_COPY_CHARS, scrub_copies
from agentic_loop.distill.forget.selection import Selection
from agentic_loop.errors import AgenticLoopError
from agentic_loop.paths import describe_path_error
from agentic_loop.text_places import Place, read_places

__all__ = ["GONE", "PlaceResult", "RecordedPlaces", "erase_logs", "recorded_places"]

GONE = "no longer exists; if it was moved or sits on a disk not mounted now, erase it there"


class PlaceResult(BaseModel):
    """One place an erasure reached (``removed``: records or lines) or could not (``problem``).

    A record (a place and counts; never a text): its ``model_dump(mode="json")``
    is an entry of the report's ``erased``.
    """

    kind: str
    path: str
    what: str
    removed: int = 0
    scrubbed: int = 0
    problem: str | None = None

    def warning(self) -> str:
        """The line the report and the CLI print for a place out of reach."""
        return f"could not reach the {self.what or self.kind} {self.path}: {self.problem}"


@dataclass
class RecordedPlaces:
    """The recorded places, by kind; export folders that are gone, and places of a kind this
    version does not know, are in ``missing``."""

    exports: list[Path] = field(default_factory=list)
    logs: list[Place] = field(default_factory=list)
    trajectories: list[Path] = field(default_factory=list)
    memories: list[Path] = field(default_factory=list)
    stores: list[Place] = field(default_factory=list)
    #: Postgres trajectory logs, by connection string
    databases: list[Place] = field(default_factory=list)
    missing: list[PlaceResult] = field(default_factory=list)


def recorded_places(folders: Sequence[str | os.PathLike[str]], *,
                    skip: Sequence[Path] = ()) -> RecordedPlaces:
    """The places recorded in the ``places.jsonl`` of ``folders``, less the files in ``skip``
    (logs an erasure already handles as trajectory logs)."""
    skipped = {p.absolute() for p in skip}
    found = RecordedPlaces()
    for place in read_places(folders):
        if place.kind == "store":
            found.stores.append(place)
        elif place.kind == "database":
            found.databases.append(place)
        elif place.kind in ("export", "trajectories", "memory"):
            where = Path(place.path)
            if where.exists() and (place.kind == "trajectories" or where.is_dir()):
                {"export": found.exports, "trajectories": found.trajectories,
                 "memory": found.memories}[place.kind].append(where)
            else:
                found.missing.append(PlaceResult(kind=place.kind, path=place.path,
                                                 what=place.what, problem=GONE if not where.exists()
                                                 else "is not a folder"))
        elif place.kind != "log":
            found.missing.append(PlaceResult(
                kind=place.kind, path=place.path, what=place.what, problem=(
                    f"a newer agentic-loop recorded it as a {place.kind!r} place, which this "
                    "version cannot erase; upgrade and run forget again")))
        elif Path(place.path).absolute() not in skipped:
            found.logs.append(place)
    return found


def _mtime(path: Path) -> datetime | None:
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except OSError:
        return None


def erase_logs(places: Sequence[Place], selection: Selection, *, ids: set[str],
               texts: Mapping[str, tuple[str, ...]], dry_run: bool = False) -> list[PlaceResult]:
    """Erase from each recorded log the lines of ``selection`` or naming ``ids`` (erased runs
    and records), and replace the erased ``texts`` in the lines kept; one result per log
    (``scrubbed``: lines kept with a text replaced)."""
    results = []
    erased_texts = {t for group in texts.values() for t in group if t}
    copied = {t for t in erased_texts if len(t) >= MIN_LOG_COPY_CHARS}
    for place in places:
        path = Path(place.path)
        result = PlaceResult(kind=place.kind, path=place.path, what=place.what)
        results.append(result)
        if not path.exists():
            result.problem = GONE
            continue
        if not path.is_file():
            result.problem = "is not a file"
            continue
        fallback = _mtime(path)  # a line with no time of its own is older than its file

        def drop_raw(raw: bytes, *, fallback: datetime | None = fallback) -> bool:
            return (selection.takes_line(raw, ids, fallback)
                    or any(t in s for s in strings_in(raw) for t in copied))

        def drop(record: dict[str, Any], *, fallback: datetime | None = fallback) -> bool:
            raw = json.dumps(record, ensure_ascii=False).encode()
            return selection.takes_line(raw, ids, fallback)

        def edit(record: dict[str, Any], *, result: PlaceResult = result) -> bool:
            changed = scrub_copies(record, erased_texts)
            result.scrubbed += changed
            return changed

        try:
            removed, _, leftovers = erase_lines(path, drop, drop_raw, dry_run=dry_run,
                                                edit=edit if erased_texts else None)
        except OSError as exc:
            result.problem = describe_path_error(path, exc)
            continue
        except AgenticLoopError as exc:  # a lock held too long, a log rewritten meanwhile
            result.problem = str(exc)
            continue
        result.removed = len(removed) + leftovers
    return results
