"""Copies of an erased memory record inside other runs: retrieved exemplars and lessons.

Why: a run records the prompt its drafts were written from
(``Round.prompt``), and that prompt shows the archive entries and
reflections retrieved for it, which may be another user's. Erasing a user's
archive entry therefore also means erasing its text from every other run
that was shown it, or ``grep`` would still find it. A run names what it was
shown by id (``exemplar_ids``, ``reflection_ids``, at the top and in each
prompt), so the runs to rewrite are found exactly; the text is then
replaced by :data:`ERASED`:

* in the retrieved blocks of the prompt (every part but the task itself)
  and in custom chat turns, every text of the erased record;
* anywhere else in the run (drafts, final output, critiques: a model may
  have copied its exemplar), only texts long enough not to be common words
  (:data:`MIN_COPY_CHARS`).

The run's own task is never rewritten. :func:`names_long_text` is the same
test for a dataset row built from such a run.

Example:
    >>> run = {"task": "Tagline for a cafe", "exemplar_ids": ["e1"], "rounds": [
    ...     {"draft": "Ann Lee's secret: coffee that remembers you",
    ...      "prompt": {"parts": {"task": "Tagline for a cafe",
    ...                           "exemplars": "Task: Tagline for Ann Lee's bakery\\n"
    ...                                        "Accepted answer: Ann Lee's secret: bread"}}}]}
    >>> erased = {"e1": ("Tagline for Ann Lee's bakery", "Ann Lee's secret: bread")}
    >>> scrub_references(run, erased)
    True
    >>> run["rounds"][0]["prompt"]["parts"]["exemplars"]
    'Task: [erased]\\nAccepted answer: [erased]'
    >>> run["rounds"][0]["draft"], run["task"]
    ("Ann Lee's secret: coffee that remembers you", 'Tagline for a cafe')
    >>> scrub_references(run, {"e9": ("other",)})
    False
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["ERASED", "MIN_COPY_CHARS", "MIN_LOG_COPY_CHARS", "names_long_text", "referenced_ids",
           "scrub_copies", "scrub_references"]

ERASED = "[erased]"
#: Shorter texts are replaced only inside the retrieved blocks, never in the run's own text.
MIN_COPY_CHARS = 20

#: In another user's log line (a shadow router's prompt), texts this long are replaced wherever
#: they appear, shorter ones only where a whole string is one: such a line holds an erased text
#: only because it was retrieved into the prompt, so a wider net costs a comparison log little.
MIN_LOG_COPY_CHARS = 8

_ID_KEYS = ("exemplar_ids", "reflection_ids")


def referenced_ids(run: Mapping[str, Any]) -> set[str]:
    """The memory record ids a run (a trajectory as a JSON object) says it was shown."""
    found: set[str] = set()
    holders: list[Any] = [run]
    for rnd in run.get("rounds") or []:
        if isinstance(rnd, Mapping) and isinstance(rnd.get("prompt"), Mapping):
            holders.append(rnd["prompt"])
    for holder in holders:
        for key in _ID_KEYS:
            values = holder.get(key)
            if isinstance(values, list):
                found |= {str(v) for v in values}
    return found


def _replace(text: str, needles: Iterable[str]) -> str:
    for needle in sorted(needles, key=len, reverse=True):
        if needle and needle in text:
            text = text.replace(needle, ERASED)
    return text


def _scrub(value: Any, needles: set[str]) -> Any:
    if isinstance(value, str):
        return _replace(value, needles)
    if isinstance(value, list):
        return [_scrub(v, needles) for v in value]
    if isinstance(value, dict):
        return {k: _scrub(v, needles) for k, v in value.items()}
    return value


def scrub_references(run: dict[str, Any], erased: Mapping[str, tuple[str, ...]]) -> bool:
    """Replace the texts of erased records (by id) that ``run`` was shown; return whether it
    changed. ``run`` is modified in place."""
    shown = referenced_ids(run) & erased.keys()
    if not shown:
        return False
    own_task = run.get("task")
    texts = {t for rid in shown for t in erased[rid] if t and t != own_task}
    long_texts = {t for t in texts if len(t) >= MIN_COPY_CHARS}
    before = repr(run)
    for rnd in run.get("rounds") or []:
        prompt = rnd.get("prompt") if isinstance(rnd, dict) else None
        if not isinstance(prompt, dict):
            continue
        parts = prompt.get("parts")
        if isinstance(parts, dict):
            prompt["parts"] = {k: v if k == "task" else _scrub(v, texts) for k, v in parts.items()}
        if isinstance(prompt.get("turns"), list):
            prompt["turns"] = _scrub(prompt["turns"], texts)
    for key, value in list(run.items()):
        if key != "task":
            run[key] = _scrub(value, long_texts)
    return repr(run) != before


def scrub_copies(record: dict[str, Any], texts: Iterable[str]) -> bool:
    """Replace, in every string of ``record`` (in place), the erased ``texts`` it copies (see
    :data:`MIN_LOG_COPY_CHARS`); return whether it changed.

    >>> line = {"prompt": [{"content": "Tagline for Ann's bakery"}, {"content": "Ann bakes"}],
    ...         "answer": "Bob's own answer"}
    >>> scrub_copies(line, ["Tagline for Ann's bakery", "Ann bakes"]), line["prompt"]
    (True, [{'content': '[erased]'}, {'content': '[erased]'}])
    """
    whole = {t for t in texts if t}
    needles = {t for t in whole if len(t) >= MIN_LOG_COPY_CHARS}

    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            return ERASED if value in whole else _replace(value, needles)
        if isinstance(value, list):
            return [scrub(v) for v in value]
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items()}
        return value

    before = repr(record)
    for key, value in list(record.items()):
        record[key] = scrub(value)
    return repr(record) != before


def names_long_text(strings: Iterable[str], erased: Mapping[str, tuple[str, ...]]) -> bool:
    """Whether any of ``strings`` (a dataset row's texts) holds a long text of an erased
    record verbatim."""
    long_texts = [t for texts in erased.values() for t in texts if len(t) >= MIN_COPY_CHARS]
    return any(t in s for s in strings for t in long_texts)
