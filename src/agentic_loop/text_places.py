"""Where the package put user text outside its known folders, so ``forget`` can reach every copy.

Why a registry: the trajectory logs, the archive and the reflections live
in known folders under the data folder (``$AGENTIC_LOOP_DATA``, default
``data``), where ``agentic-loop forget`` looks by default. Some writers put
user text wherever their caller says: a dataset export to any folder, a
shadow router's log to any file, memory to a Postgres store. Each of them
records the place here *before* its first write (write-ahead: a crash can
leave a recorded place with nothing in it, never text in an unrecorded
place), as one line of a ``places.jsonl``:

* in the data folder (:func:`data_root`), always;
* beside the data the copy was made from (an export also records itself in
  the folder of every trajectory log and archive it read), so ``forget``
  pointed at those logs finds it even from another working directory.

A place names a file or folder by its absolute path, or a store by its
connection string with the password left out (never a secret, never user
text). Recording never fails a writer: a place that cannot be recorded
(read-only data folder) is a :class:`PlaceWarning` saying what ``forget``
will then miss.

Example:
    >>> import tempfile, pathlib
    >>> data = pathlib.Path(tempfile.mkdtemp())
    >>> record_place("log", data.parent / "shadow.jsonl", what="shadow log", near=[data])
    True
    >>> record_place("log", data.parent / "shadow.jsonl", what="shadow log", near=[data])
    False
    >>> [(p.kind, p.what, pathlib.Path(p.path).name) for p in read_places([data])]
    [('log', 'shadow log', 'shadow.jsonl')]
    >>> store_location(object()) is None
    True
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from agentic_loop.clock import utc_stamp
from agentic_loop.jsonl_log import JsonlLog

__all__ = ["DATA_ENV", "DEFAULT_FOLDERS", "PLACES_FILE", "Place", "PlaceKind", "PlaceWarning",
           "data_root", "read_places", "record_place", "record_store", "record_unless_default",
           "store_location"]

#: The environment variable naming the data folder (``graphs.py`` logs served runs there too).
DATA_ENV = "AGENTIC_LOOP_DATA"
PLACES_FILE = "places.jsonl"

#: ``export``: a dataset folder; ``log``: a JSONL file of user text; ``store``: a LangGraph
#: store by connection string (Postgres); ``trajectories``: a trajectory log file outside the
#: data folder's ``trajectories/``; ``memory``: a memory root (archive, reflections) outside
#: its ``archive/`` and ``reflections/``; ``database``: a Postgres trajectory log by connection
#: string.
PlaceKind = Literal["export", "log", "store", "trajectories", "memory", "database"]

#: Where ``forget`` looks without being told, under each data folder, per kind.
DEFAULT_FOLDERS: dict[str, tuple[str, ...]] = {"trajectories": ("trajectories",),
                                               "memory": ("archive", "reflections")}

_seen: set[tuple[str, str, str]] = set()
_seen_lock = threading.Lock()


class PlaceWarning(UserWarning):
    """A place holding user text could not be recorded (``forget`` will not find it alone), or
    a recorded place could not be reached (it may be gone for good)."""


class Place(BaseModel):
    """One recorded place: what kind (a :data:`PlaceKind`; a kind a newer version wrote is
    still read, so ``forget`` can say it cannot handle it), where, what wrote it, since when."""

    at: str = Field(default_factory=utc_stamp)
    kind: str
    path: str
    what: str = ""


def data_root() -> Path:
    """The data folder: ``$AGENTIC_LOOP_DATA``, else ``data`` in the working directory."""
    return Path(os.environ.get(DATA_ENV, "").strip() or "data").expanduser()


def _location(kind: PlaceKind, path: str | os.PathLike[str]) -> str:
    if kind in ("store", "database"):  # a connection string, not a path
        return os.fspath(path)
    return str(Path(path).expanduser().absolute())


def record_place(kind: PlaceKind, path: str | os.PathLike[str], *, what: str,
                 near: Iterable[str | os.PathLike[str]]) -> bool:
    """Record that ``path`` holds user text in the ``places.jsonl`` of each folder of ``near``
    (writers pass :func:`data_root` and the folders of their sources).

    Returns whether a new line was written anywhere (a place already
    recorded there is not repeated). A folder that cannot be written is
    warned about (:class:`PlaceWarning`), never raised.
    """
    location = _location(kind, path)
    wrote = False
    for folder in dict.fromkeys(Path(f).expanduser().absolute() for f in near):
        key = (str(folder), kind, location)
        with _seen_lock:
            if key in _seen and (folder / PLACES_FILE).is_file():
                continue
        try:
            wrote |= _append_once(folder / PLACES_FILE, Place(kind=kind, path=location,
                                                             what=what))
        except Exception as exc:  # noqa: BLE001 - a writer never fails for want of a record
            warnings.warn(f"could not record {what} {location} in {folder / PLACES_FILE} "
                          f"({exc}); `agentic-loop forget` will not find it there: make the "
                          f"folder writable, or pass the place to forget yourself",
                          PlaceWarning, stacklevel=2)
            continue
        with _seen_lock:
            _seen.add(key)
    return wrote


def _append_once(file: Path, place: Place) -> bool:
    log: JsonlLog[Place] = JsonlLog(file, Place)
    with log.locked():  # (no catch_warnings here: a shadow worker thread records too)
        if any(p.kind == place.kind and p.path == place.path for p in log.read_all()):
            return False
        log.append(place)
    return True


def read_places(folders: Sequence[str | os.PathLike[str]]) -> list[Place]:
    """The places recorded in the ``places.jsonl`` of each folder (each place once)."""
    found: dict[tuple[str, str], Place] = {}
    for folder in folders:
        file = Path(folder).expanduser() / PLACES_FILE
        if not file.is_file():
            continue
        log: JsonlLog[Place] = JsonlLog(file, Place)
        for place in log.read_all():  # an unreadable line is warned about, naming file:line
            found.setdefault((place.kind, place.path), place)
    return list(found.values())


def store_location(store: Any) -> str | None:
    """The connection string of a LangGraph store that persists outside this process (a
    ``PostgresStore``), with any password left out; ``None`` for any other store."""
    conn = getattr(store, "conn", None)
    if conn is None:
        return None
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        raw = getattr(conn, "conninfo", None)  # a psycopg_pool pool
        # a psycopg connection: its dsn leaves the password out
        dsn = raw if isinstance(raw, str) else conn.info.dsn
        params = {k: v for k, v in conninfo_to_dict(dsn).items() if k != "password"}
        return make_conninfo(**{k: str(v) for k, v in params.items()}) if params else None
    except Exception:  # noqa: BLE001 - no psycopg, a closed connection: not a store we know
        return None


def record_unless_default(kind: Literal["trajectories", "memory"],
                          path: str | os.PathLike[str], *, what: str) -> bool:
    """Record ``path`` in the data folder unless it lies where ``forget`` looks anyway
    (``<data>/trajectories``, ``<data>/archive``...: :data:`DEFAULT_FOLDERS`).

    >>> import tempfile
    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {DATA_ENV: tempfile.mkdtemp()}):
    ...     default = data_root() / "trajectories" / "x.jsonl"
    ...     (record_unless_default("trajectories", default, what="trajectory log"),
    ...      record_unless_default("memory", tempfile.mkdtemp(), what="archive"))
    (False, True)
    """
    target = Path(path).expanduser().absolute()
    for root in dict.fromkeys((data_root(), Path("data"))):
        for name in DEFAULT_FOLDERS[kind]:
            base = (root / name).expanduser().absolute()
            if target == base or base in target.parents:
                return False
    return record_place(kind, target, what=what, near=[data_root()])


def record_store(store: Any, *, what: str) -> bool:
    """Record ``store`` when it persists outside this process (see :func:`store_location`)."""
    location = store_location(store)
    return location is not None and record_place("store", location, what=what,
                                                 near=[data_root()])
