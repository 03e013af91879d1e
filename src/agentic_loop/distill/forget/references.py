"""Copies of an erased memory record inside other runs: retrieved exemplars and lessons.

Why: a run records the prompt its drafts were written from
(``Round.prompt``), and that prompt shows the archive entries and
reflections retrieved for it, which may be another user's. Erasing a user's
archive entry therefore also means erasing its text from every other run
that was shown it, or ``grep`` would still find it. A run names what it was
shown by id (``exemplar_ids``, ``reflection_ids``, at the top and in each
prompt), so the runs to rewrite are found exactly; the text is then
replaced by :data:`ERASED`:

* in the retrieved blocks of the prompt (every part but the task itself),
  in custom chat turns and in the steps of few-shot episodes
  (``shot_steps``: the erased record's own shot loses every text, tool
  arguments and results included), every text of the erased record;
* anywhere else in the run (drafts, final output, critiques: a model may
  have copied its exemplar), only texts long enough not to be common words
  (:data:`MIN_COPY_CHARS`); in the run's own agent episodes also a string that
  is an erased text whole (an agent that called a tool with the exemplar's
  argument).

An erased archive entry's texts are its task, its output and, when an agent
wrote it, its episode's texts as copies show them (:func:`episode_copies`).

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

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from agentic_loop.distill.data.samples import episode_texts
from agentic_loop.episodes import Episode
from agentic_loop.prompt_format import SHOT_PREFIX, SHOT_RESULT_CHARS

__all__ = ["ERASED", "MIN_COPY_CHARS", "MIN_EPISODE_CHARS", "MIN_LOG_COPY_CHARS",
           "episode_copies", "names_long_text", "referenced_ids", "scrub_copies",
           "scrub_episode", "scrub_references"]

ERASED = "[erased]"
#: Shorter texts are replaced only inside the retrieved blocks, never in the run's own text.
MIN_COPY_CHARS = 20

#: In another user's log line (a shadow router's prompt), texts this long are replaced wherever
#: they appear, shorter ones only where a whole string is one: such a line holds an erased text
#: only because it was retrieved into the prompt, so a wider net costs a comparison log little.
MIN_LOG_COPY_CHARS = 8

#: An episode's shorter texts ("4", "ok") are not searched for elsewhere: they would take
#: innocent text with them. The erased record's own few-shot shot loses them all the same.
MIN_EPISODE_CHARS = 3

_ID_KEYS = ("exemplar_ids", "reflection_ids")


def episode_copies(episode: Episode | Mapping[str, Any] | None) -> tuple[str, ...]:
    """The texts of an episode (an :class:`~agentic_loop.episodes.Episode` or its JSON) as a
    copy of it can hold them: whole, on one line, with JSON's escapes (a tool argument in a
    transcript), and cut where a few-shot episode cuts a result (:data:`SHOT_RESULT_CHARS`).
    An unreadable episode gives nothing.

    >>> episode_copies({"steps": [{"kind": "tool", "name": "crm", "args": {"who": "Ann Lee"},
    ...                            "content": "Ann Lee:  ann@lee.io"}]})
    ('Ann Lee', 'Ann Lee:  ann@lee.io', 'Ann Lee: ann@lee.io')
    """
    if episode is None:
        return ()
    try:
        read = episode if isinstance(episode, Episode) else Episode.model_validate(episode)
    except ValidationError:
        return ()
    forms: dict[str, None] = {}
    for _, text in episode_texts(read):
        one_line = " ".join(text.split())
        for form in (text, one_line, json.dumps(text, ensure_ascii=False)[1:-1]):
            forms[form] = None
            if len(form) > SHOT_RESULT_CHARS:
                forms[form[:SHOT_RESULT_CHARS]] = None
    return tuple(f for f in forms if len(f.strip()) >= MIN_EPISODE_CHARS)


def _shot_ids(prompt: Mapping[str, Any]) -> dict[str, str]:
    """Few-shot shot -> the exemplar id it showed, when the prompt says it exactly (every
    exemplar had an id, so ``exemplar_ids`` lists them in shot order)."""
    ids = prompt.get("exemplar_ids")
    parts = prompt.get("parts")
    if not isinstance(ids, list) or not isinstance(parts, Mapping):
        return {}
    numbers = sorted(int(n) for k in parts if k.startswith(SHOT_PREFIX) and k.endswith(".user")
                     and (n := k[len(SHOT_PREFIX):-len(".user")]).isdigit())
    if len(numbers) != len(ids):
        return {}
    return {f"{SHOT_PREFIX}{n}": str(i) for n, i in zip(numbers, ids, strict=True)}


#: Keys of an episode or a chat turn whose values are structure, not text (outside tool
#: arguments, where every key is the tool's own).
_STRUCTURE = frozenset({"role", "type", "kind", "id", "name", "tool_call_id", "call_id",
                        "stop_reason", "model"})
_ARGUMENTS = frozenset({"args", "arguments"})


def _walk(value: Any, swap: Callable[[str], str], free: bool = False) -> Any:
    """``value`` with ``swap`` applied to every string that is text (see :data:`_STRUCTURE`)."""
    if isinstance(value, str):
        return swap(value)
    if isinstance(value, list):
        return [_walk(v, swap, free) for v in value]
    if isinstance(value, dict):
        return {k: v if not free and k in _STRUCTURE
                else _walk(v, swap, free or k in _ARGUMENTS) for k, v in value.items()}
    return value


def _blank(value: Any) -> Any:
    """``value`` (chat turns) with every text erased: contents and tool arguments."""
    return _walk(value, lambda text: ERASED if text else text)


def _scrub_steps(prompt: dict[str, Any], shown: set[str], texts: set[str]) -> None:
    """Erase from a prompt's few-shot episodes the erased records' texts; a shot that showed an
    erased record loses every text."""
    steps = prompt.get("shot_steps")
    if not isinstance(steps, dict):
        return
    owner = _shot_ids(prompt)
    prompt["shot_steps"] = {shot: _blank(turns) if owner.get(shot) in shown
                            else _scrub_whole(turns, texts) for shot, turns in steps.items()}


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


def _scrub_whole(value: Any, texts: set[str], needles: set[str] | None = None) -> Any:
    """``value`` with each text that is one of ``texts`` whole erased, and ``needles`` (all
    of ``texts`` by default) replaced inside the others."""
    inside = texts if needles is None else needles
    return _walk(value, lambda text: ERASED if text in texts else _replace(text, inside))


def scrub_episode(episode: Any, texts: set[str]) -> Any:
    """An episode's JSON with the erased ``texts`` gone: a text that is one of them whole
    (an argument copied from a few-shot episode), and the long ones (:data:`MIN_COPY_CHARS`)
    inside the others. Tool names and call ids stay.

    >>> scrub_episode({"steps": [{"kind": "tool", "name": "crm", "args": {"who": "Ann Lee"},
    ...                           "content": "ok"}]}, {"Ann Lee", "crm"})["steps"][0]
    {'kind': 'tool', 'name': 'crm', 'args': {'who': '[erased]'}, 'content': 'ok'}
    """
    return _scrub_whole(episode, texts, {t for t in texts if len(t) >= MIN_COPY_CHARS})


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
        _scrub_steps(prompt, shown, texts)
    for rnd in run.get("rounds") or []:  # the run's own agent episodes: whole copies too
        if isinstance(rnd, dict):
            for holder in [rnd, *[c for c in rnd.get("alternatives") or []
                                  if isinstance(c, dict)]]:
                if isinstance(holder.get("episode"), dict):
                    holder["episode"] = scrub_episode(holder["episode"], texts)
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
