"""A lookup tool over a small local table: facts a small model does not know reliably.

Why a table and not the model's memory: a 135M model misremembers conversion
factors and atomic weights, and a check cannot tell a remembered number from a
looked-up one unless the lookup is a tool call in the episode. Keys are
forgiving, since a model writes them: case, spacing and punctuation do not
matter, and a plural finds its singular (``Miles`` finds ``mile``). An
unknown key is an error result that lists the closest keys, so the agent can
try again.

Example:
    >>> capitals = lookup_tool({"France": "Paris", "Japan": "Tokyo"}, name="capital",
    ...                        description="The capital city of a country.")
    >>> call = {"type": "tool_call", "name": "capital", "id": "1"}
    >>> capitals.invoke({**call, "args": {"key": " france "}}).content
    'Paris'
    >>> missing = capitals.invoke({**call, "args": {"key": "Japn"}})
    >>> missing.status, missing.content
    ('error', 'no entry "Japn" in capital; closest keys: Japan')
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping

from langchain_core.tools import StructuredTool

from agentic_loop.errors import ConfigError
from agentic_loop.tools.safe import SafeTool, ToolFailed, safe_tool

__all__ = ["lookup_key", "lookup_tool"]

_DROPPED = re.compile(r"[.'\u2019]+")  # U.S. -> us, o'clock -> oclock
_PUNCTUATION = re.compile(r"[^\w\s]+")
_SPACES = re.compile(r"\s+")


def lookup_key(text: str) -> str:
    """The form keys are compared in: case-folded, punctuation dropped, spaces collapsed.

    >>> lookup_key("  U.S. Gallon "), lookup_key("nautical-mile")
    ('us gallon', 'nautical mile')
    """
    return _SPACES.sub(" ", _PUNCTUATION.sub(" ", _DROPPED.sub("", text.casefold()))).strip()


def _singulars(key: str) -> list[str]:
    """What a plural key may stand for: ``inches`` -> ``inch``, ``feet`` -> ``foot``."""
    head, _, last = key.rpartition(" ")
    forms = []
    if last.endswith("ies"):
        forms.append(last[:-3] + "y")
    if last.endswith("es"):
        forms.append(last[:-2])
    if last.endswith("s"):
        forms.append(last[:-1])
    forms += [last.replace("ee", "oo")] if "ee" in last else []
    return [f"{head} {form}".strip() for form in forms]


def lookup_tool(table: Mapping[str, str], *, name: str = "lookup",
                description: str | None = None, timeout_s: float = 5.0) -> SafeTool:
    """A tool (one argument, ``key``) that returns ``table[key]``, keys matched forgivingly.

    Two keys that compare equal (``"Mile"`` and ``"mile"``) are an error, as is
    an empty table. ``description`` defaults to one naming a few keys.

    Raises:
        ConfigError: for an empty table, a key or value that is not a string, or
            two keys that compare equal.
    """
    if not isinstance(table, Mapping) or not table:
        raise ConfigError(f"table must be a non-empty mapping of str keys to str values, "
                          f"got {table!r:.80}")
    entries: dict[str, str] = {}
    for key, value in table.items():
        if not isinstance(key, str) or not isinstance(value, str) or not lookup_key(key):
            raise ConfigError(f"table entries must be non-empty str keys with str values, got "
                              f"{key!r:.40}: {value!r:.40}")
        folded = lookup_key(key)
        if folded in entries:
            raise ConfigError(f"table keys {key!r} and another key both read {folded!r}; "
                              f"keep one of them")
        entries[folded] = value
    shown = ", ".join(list(table)[:5])
    text = description or (f"Look a key up in a table and return its entry. Keys such as: "
                           f"{shown}.")

    def find(key: str) -> str:
        folded = lookup_key(key) if isinstance(key, str) else ""
        for candidate in [folded, *_singulars(folded)]:
            if candidate in entries:
                return entries[candidate]
        close = difflib.get_close_matches(folded, list(entries), n=3, cutoff=0.6)
        names = {lookup_key(k): k for k in table}
        hint = f"closest keys: {', '.join(names[c] for c in close)}" if close else \
            f"keys are such as: {shown}"
        raise ToolFailed(f'no entry "{key}" in {name}; {hint}')

    inner = StructuredTool.from_function(find, name=name, description=text)
    return safe_tool(inner, timeout_s=timeout_s)
