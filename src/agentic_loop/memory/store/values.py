"""Store values <-> memory records, and LangGraph-style filters over values.

Why apart from the stores: both stores that hold memory (the local
:class:`~agentic_loop.memory.store.archive_store.ArchiveStore` and the policy view
:class:`~agentic_loop.memory.store.policy.StoreMemory` over any LangGraph
store) speak the same value format. A value is a record's fields less the
ones the store manages (the key is the record's ``id``; times are set on
write), so a record written through one store reads back the same through
the other, and a user reading a ``PostgresStore`` sees plain JSON.

Example:
    >>> from agentic_loop.memory.records import ArchiveEntry
    >>> entry = ArchiveEntry(id="t1", task="Tagline for a bookstore", output="Stories.", score=9)
    >>> value = value_of(entry)
    >>> value["task"], value["score"], "id" in value
    ('Tagline for a bookstore', 9.0, False)
    >>> kind_of_value({"task": "t", "reflection": "r"}), kind_of_value(value)
    ('reflexion', 'archive')
    >>> matches(value, {"score": {"$gte": 8}}), matches(value, {"score": {"$lt": 8}})
    (True, False)
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypeVar

from langgraph.store.base import MatchCondition, SearchItem
from pydantic import ValidationError

from agentic_loop.errors import ConfigError
from agentic_loop.memory.records import MemoryRecord

__all__ = [
    "MANAGED_FIELDS",
    "item_of",
    "kind_of_value",
    "match_condition",
    "matches",
    "record_of",
    "value_of",
]

R = TypeVar("R", bound=MemoryRecord)

MANAGED_FIELDS = frozenset({"id", "created_at", "updated_at"})
"""Record fields a store manages: never part of a value."""


def value_of(record: MemoryRecord) -> dict[str, Any]:
    """The store value of ``record``: its fields as JSON, less the managed ones."""
    return record.model_dump(mode="json", exclude=set(MANAGED_FIELDS))


def kind_of_value(value: Mapping[str, Any]) -> str:
    """The collection kind a new value belongs to: ``"reflexion"`` when it holds a
    ``reflection`` and no ``output``, else ``"archive"``."""
    return "reflexion" if "reflection" in value and "output" not in value else "archive"


def record_of(
    record_type: type[R],
    namespace: tuple[str, ...],
    key: str,
    value: Mapping[str, Any] | None,
    *,
    created_at: datetime | None = None,
    updated_at: datetime | None = None,
) -> R:
    """The record a store value stands for; :class:`ConfigError` naming the fields when it is
    not one (or when it sets a field the store manages)."""
    fields = dict(value or {})
    managed = MANAGED_FIELDS & fields.keys()
    if managed:
        raise ConfigError(
            f"value for key {key!r} in {namespace} sets {sorted(managed)}, which the store "
            "manages (the key is the id; times are set on write); remove them"
        )
    fields["id"] = key
    if created_at is not None:
        fields["created_at"] = created_at
        if updated_at is not None and updated_at != created_at:
            fields["updated_at"] = updated_at
    try:
        return record_type.model_validate(fields)
    except ValidationError as exc:
        kind = record_type.collection_kind
        model_fields = record_type.model_fields
        needed = [n for n, f in model_fields.items() if f.is_required()]
        optional = [n for n, f in model_fields.items() if not f.is_required()]
        optional = [n for n in optional if n not in MANAGED_FIELDS]
        raise ConfigError(
            f"value for key {key!r} in {namespace} is not {_article(kind)} {kind} entry; values "
            f"need {' and '.join(repr(n) for n in needed)} strings and may have "
            f"{', '.join(optional)}; problem: {exc}"
        ) from exc


def item_of(namespace: tuple[str, ...], record: MemoryRecord, score: float | None = None
            ) -> SearchItem:
    """``record`` as the item a LangGraph store returns (``score``: its similarity, if searched)."""
    return SearchItem(
        namespace=namespace,
        key=record.id,
        value=value_of(record),
        created_at=record.created_at,
        updated_at=record.stamp,
        score=score,
    )


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


# -- filters and namespace matching -----------------------------------------------------

_OPERATORS = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: a is not None and a > b,
    "$gte": lambda a, b: a is not None and a >= b,
    "$lt": lambda a, b: a is not None and a < b,
    "$lte": lambda a, b: a is not None and a <= b,
}


def matches(value: Any, condition: Any) -> bool:
    """Whether ``value`` satisfies a LangGraph-style filter (nested dicts, ``$`` operators)."""
    if isinstance(condition, Mapping):
        if condition and all(isinstance(k, str) and k.startswith("$") for k in condition):
            for operator, operand in condition.items():
                test = _OPERATORS.get(operator)
                if test is None:
                    raise ConfigError(
                        f"unsupported filter operator {operator!r}; use one of "
                        f"{', '.join(_OPERATORS)}"
                    )
                try:
                    if not test(value, operand):
                        return False
                except TypeError:
                    return False
            return True
        return isinstance(value, Mapping) and all(
            matches(value.get(k), v) for k, v in condition.items()
        )
    return bool(value == condition)


def match_condition(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """Whether ``namespace`` satisfies a ``list_namespaces`` prefix or suffix condition."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        part = namespace[: len(path)]
    elif condition.match_type == "suffix":
        part = namespace[len(namespace) - len(path) :]
    else:
        raise ConfigError(
            f"unsupported namespace match type {condition.match_type!r}; use 'prefix' or 'suffix'"
        )
    return all(p == "*" or p == n for p, n in zip(path, part))

