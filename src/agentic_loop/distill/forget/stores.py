"""Erasing memory records from LangGraph stores: a ``PostgresStore`` shared by workers, or any.

Why through the store's API: the architectures keep their archive and
reflections in the graph's store when one is given (a ``PostgresStore``
for many workers), as plain JSON values (:mod:`agentic_loop.memory.store.values`).
Every namespace is listed and every item read; an item goes when its value
names an erased run (``trajectory_id``, or ``run_id``/``trajectory_id`` in
its metadata) or the selection takes it by the user's hash (in its
metadata) and its time. The texts of the items erased are returned, so
their copies in other runs' prompts and in dataset rows go too.

A store is given as an object, or as a connection string (opened as a
``PostgresStore``; the recorded ones of :mod:`agentic_loop.text_places` carry no
password, which libpq then takes from ``PGPASSWORD`` or ``~/.pgpass``). One
that cannot be opened is reported with the reason, never skipped silently.
Postgres keeps a deleted row's bytes until ``VACUUM`` reuses the space and
in its write-ahead log until it is recycled: run ``VACUUM FULL`` on the
store's tables when the bytes on disk must go too.

Example:
    >>> from langgraph.store.memory import InMemoryStore
    >>> from agentic_loop.distill.forget.selection import Selection
    >>> store = InMemoryStore()
    >>> store.put(("archive", "x"), "e1", {"task": "Ann's task", "output": "Ann's answer",
    ...                                    "trajectory_id": "run1"})
    >>> store.put(("archive", "x"), "e2", {"task": "Bob's task", "output": "Bob's answer"})
    >>> with open_stores([store]) as opened:
    ...     found = erase_stores(opened, Selection(user_hash="h"), run_ids={"run1"})
    >>> found.records, found.erased, [i.key for i in store.search(("archive",))]
    (1, {'e1': ("Ann's task", "Ann's answer")}, ['e2'])
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph.store.base import BaseStore, PutOp, SearchItem

from agentic_loop.distill.forget.recorded import PlaceResult
from agentic_loop.distill.forget.references import episode_copies, scrub_episode
from agentic_loop.distill.forget.selection import Selection
from agentic_loop.memory.store.policy import META_PREFIX
from agentic_loop.text_places import store_location

__all__ = ["OpenedStore", "StoreErasure", "erase_stores", "open_stores", "scrub_store_entries"]

_PAGE = 500
_TEXT_FIELDS = ("task", "output", "reflection")


@dataclass
class OpenedStore:
    """A store an erasure reaches: where it is (for the report), and the store."""

    label: str
    store: BaseStore


@dataclass
class StoreErasure:
    """What went from the stores: records, per store, and the texts of the records."""

    records: int = 0
    per_store: dict[str, int] = field(default_factory=dict)
    erased: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: other archive items per store whose episodes lost an erased text
    scrubbed: dict[str, int] = field(default_factory=dict)

    def merge(self, other: StoreErasure) -> None:
        """Add what a later pass erased."""
        self.records += other.records
        self.erased.update(other.erased)
        for label, count in other.scrubbed.items():
            self.scrubbed[label] = self.scrubbed.get(label, 0) + count
        for label, count in other.per_store.items():
            self.per_store[label] = self.per_store.get(label, 0) + count


def _open(spec: str, stack: contextlib.ExitStack) -> BaseStore:
    from langgraph.store.postgres import PostgresStore
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(spec)
    dsn = make_conninfo(spec, **({} if "connect_timeout" in params else {"connect_timeout": 5}))
    return stack.enter_context(PostgresStore.from_conn_string(dsn))


@contextlib.contextmanager
def open_stores(specs: Sequence[BaseStore | str], problems: list[PlaceResult] | None = None,
                ) -> Iterator[list[OpenedStore]]:
    """Open each store (a connection string as a ``PostgresStore``), closing them after; one
    that cannot be opened goes to ``problems`` with why."""
    with contextlib.ExitStack() as stack:
        opened: list[OpenedStore] = []
        seen: set[str] = set()
        for spec in specs:
            label = spec if isinstance(spec, str) else (store_location(spec)
                                                         or type(spec).__name__)
            key = _key(label)
            if key in seen:
                continue
            seen.add(key)
            if not isinstance(spec, str):
                opened.append(OpenedStore(label, spec))
                continue
            try:
                opened.append(OpenedStore(_safe(label), _open(spec, stack)))
            except ImportError as exc:
                _problem(problems, label, f"the Postgres packages are missing ({exc}); install "
                                          "agentic-loop[postgres]")
            except Exception as exc:  # noqa: BLE001 - any failure to connect is reported
                _problem(problems, label, f"could not connect ({type(exc).__name__}: "
                                          f"{str(exc).strip()[:300]}); start the server, or "
                                          "pass its address with credentials (--store)")
        yield opened


def _safe(spec: str) -> str:
    """A connection string without its password (for reports and audit lines)."""
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
    except ImportError:
        return spec.split("@")[-1]
    try:
        params = conninfo_to_dict(spec)
    except Exception:  # noqa: BLE001 - not a connection string: show no part that may be secret
        return "<unparsable connection string>"
    return make_conninfo(**{k: str(v) for k, v in params.items() if k != "password"})


def _key(label: str) -> str:
    """Two spellings of one database compare equal (password and timeout aside)."""
    try:
        from psycopg.conninfo import conninfo_to_dict
        params = conninfo_to_dict(label)
    except Exception:  # noqa: BLE001 - an object's class name, or not a connection string
        return label
    return json.dumps({k: str(v) for k, v in params.items()
                       if k not in ("password", "connect_timeout")}, sort_keys=True)


def _problem(problems: list[PlaceResult] | None, label: str, why: str) -> None:
    if problems is not None:
        problems.append(PlaceResult(kind="store", path=_safe(label), what="memory store",
                                    problem=why))


def _namespaces(store: BaseStore) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    while True:
        page = store.list_namespaces(limit=_PAGE, offset=len(found))
        found += page
        if len(page) < _PAGE:
            return [ns for ns in found if not ns or ns[0] != META_PREFIX]


def _items(store: BaseStore, namespace: tuple[str, ...]) -> list[SearchItem]:
    items: list[SearchItem] = []
    while True:
        page = store.search(namespace, limit=_PAGE, offset=len(items))
        items += page
        if len(page) < _PAGE:  # a prefix search also returns deeper namespaces' items
            return [i for i in items if tuple(i.namespace) == namespace]


def _origins(value: dict[str, Any]) -> set[str]:
    meta = value.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    found = {value.get("trajectory_id"), meta.get("run_id"), meta.get("trajectory_id")}
    return {str(o) for o in found if o}


def _takes(item: SearchItem, selection: Selection, run_ids: set[str]) -> bool:
    value = item.value if isinstance(item.value, dict) else {}
    if not run_ids.isdisjoint(_origins(value)):
        return True
    raw = json.dumps(value, ensure_ascii=False, default=str).encode()
    return selection.takes_line(raw, set(), item.created_at)


def _is_entry(item: SearchItem) -> bool:
    """Whether a store item is an archive entry (a task and its output), not a reflection."""
    value = item.value if isinstance(item.value, dict) else {}
    return isinstance(value.get("output"), str) and "reflection" not in value


def erase_stores(stores: Sequence[OpenedStore], selection: Selection, *, run_ids: set[str],
                 dry_run: bool = False, archive_only: bool = False) -> StoreErasure:
    """Erase the items of ``run_ids`` and those ``selection`` takes from every namespace of
    each store (``archive_only``: archive entries only, the items with an ``output``);
    return what went."""
    result = StoreErasure()
    for opened in stores:
        taken = [item for ns in _namespaces(opened.store) for item in _items(opened.store, ns)
                 if _takes(item, selection, run_ids)
                 and (not archive_only or _is_entry(item))]
        if not taken:
            continue
        result.records += len(taken)
        result.per_store[opened.label] = result.per_store.get(opened.label, 0) + len(taken)
        result.erased.update({i.key: (*(str(i.value[k]) for k in _TEXT_FIELDS
                                        if isinstance(i.value.get(k), str)),
                                      *episode_copies(i.value.get("episode")))
                              for i in taken})
        if not dry_run:
            opened.store.batch([PutOp(tuple(i.namespace), i.key, None) for i in taken])
    return result


def scrub_store_entries(stores: Sequence[OpenedStore], erased: Mapping[str, tuple[str, ...]], *,
                        runs: set[str], dry_run: bool = False) -> StoreErasure:
    """Erase the texts of erased records from the episodes of the items that runs shown them
    (``runs``) made (see :func:`~.memories.scrub_entries`); each such item is put back
    without them, under its key."""
    result = StoreErasure()
    texts = {t for group in erased.values() for t in group if t}
    if not texts or not runs:
        return result
    for opened in stores:
        for ns in _namespaces(opened.store):
            for item in _items(opened.store, ns):
                value = item.value if isinstance(item.value, dict) else {}
                episode = value.get("episode")
                if not isinstance(episode, dict) or runs.isdisjoint(_origins(value)):
                    continue
                after = scrub_episode(episode, texts)
                if after == episode:
                    continue
                result.scrubbed[opened.label] = result.scrubbed.get(opened.label, 0) + 1
                if not dry_run:
                    opened.store.put(tuple(item.namespace), item.key, {**value, "episode": after})
    return result
