"""``manifest.json``: what a dataset export was made from, how, and what it holds.

A trained model is only as trustworthy as the record of its data. The
manifest written next to ``sft.jsonl`` and ``pairs.jsonl`` holds the input
files with their SHA-256 hashes, the count after every filter, the
redactions per entity type and per recognizer (counts only: a manifest
never holds a redacted value), how often each reward-hacking guard fired
in the exported rounds, what each training rule dropped (``dropped``: a
sample that failed a check, one a guard flagged, one below the score
threshold, a pair whose rejected side was not worse), the rubric versions
and trajectory schema versions of the runs used, what the agents' rows hold
(``episodes``: rows, model steps, tool calls and the tools that ran, for the
SFT set and the pairs), the options, and the hash of each output file.
It is written last, so a manifest always describes complete outputs.

Example:
    >>> from agentic_loop.trajectories import Trajectory
    >>> rubric = {"name": "tagline", "version": "2"}
    >>> runs = [Trajectory(architecture="a", model_id="m", task="t", rubric=rubric),
    ...         Trajectory(architecture="archive", model_id="m", task="t")]
    >>> rubric_versions(runs)
    {'tagline@2': 1, 'unknown': 1}
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentic_loop.atomic import atomic_write_bytes
from agentic_loop.clock import utc_now
from agentic_loop.distill.data.datasets import PairRow, SftRow
from agentic_loop.distill.data.episode_rows import EpisodeMeta
from agentic_loop.distill.data.samples import RETRIEVED_PARTS
from agentic_loop.prompt_format import PROMPT_VERSION, SYSTEM
from agentic_loop.trajectories import Trajectory

__all__ = ["MANIFEST_SCHEMA_VERSION", "describe_drops", "drop_counts", "episode_counts",
           "guard_counts", "prompt_format", "rubric_versions", "schema_versions",
           "write_manifest"]

#: Version of the export's file layout and manifest fields; bumped on incompatible changes.
MANIFEST_SCHEMA_VERSION = 1


def rubric_versions(runs: Sequence[Trajectory]) -> dict[str, int]:
    """How many runs each rubric (``name@version``) scored; ``"unknown"`` when a run kept none."""
    counts: Counter[str] = Counter()
    for t in runs:
        rubric = t.rubric or {}
        name, version = rubric.get("name"), rubric.get("version")
        counts[f"{name}@{version}" if name else "unknown"] += 1
    return dict(sorted(counts.items()))


def guard_counts(runs: Sequence[Trajectory]) -> dict[str, Any]:
    """How many exported rounds each reward-hacking guard fired on (flags only, never reasons).

    >>> from agentic_loop.trajectories import Round
    >>> run = Trajectory(architecture="a", model_id="m", task="t", rounds=[
    ...     Round(iteration=0, draft="x", guards={"repetition": "...", "empty": "..."}),
    ...     Round(iteration=1, draft="y", guards={"repetition": "..."}),
    ...     Round(iteration=2, draft="z")])
    >>> guard_counts([run])
    {'rounds': 3, 'rounds_flagged': 2, 'fired': {'empty': 1, 'repetition': 2}}
    """
    fired: Counter[str] = Counter()
    rounds = flagged = 0
    for t in runs:
        for r in t.rounds:
            rounds += 1
            flagged += bool(r.guards)
            fired.update(r.guards.keys())  # flags only: a reason quotes the draft
    return {"rounds": rounds, "rounds_flagged": flagged, "fired": dict(sorted(fired.items()))}


def _tally(episodes: Sequence[EpisodeMeta]) -> dict[str, Any]:
    tools: Counter[str] = Counter()
    for e in episodes:
        tools.update(e.tools_called)
    return {"model_steps": sum(e.model_steps for e in episodes),
            "tool_calls": sum(e.tool_calls for e in episodes),
            "user_turns": sum(e.user_turns or 0 for e in episodes),
            "tools": dict(sorted(tools.items()))}


def episode_counts(sft: Sequence[SftRow], pairs: Sequence[PairRow]) -> dict[str, Any]:
    """The manifest's ``episodes`` field: how many rows are agents' episodes, their model
    steps, tool calls, simulated user turns and the tools that ran (name -> times), for the SFT
    set and the pairs (both sides of a pair counted, ``episodes`` of them).

    >>> from agentic_loop.distill.data.datasets import SftMeta
    >>> meta = SftMeta(source="final", trajectory_id="t", iteration=0, reward=1.0, model_id="m",
    ...                episode=EpisodeMeta(model_steps=2, tool_calls=1, tools_called=["calc"]))
    >>> episode_counts([SftRow(messages=[], metadata=meta)], [])["sft"]
    {'rows': 1, 'model_steps': 2, 'tool_calls': 1, 'user_turns': 0, 'tools': {'calc': 1}}
    """
    sft_episodes = [r.metadata.episode for r in sft if r.metadata.episode is not None]
    sides = [[e for e in (p.metadata.chosen_episode, p.metadata.rejected_episode)
              if e is not None] for p in pairs]
    return {"sft": {"rows": len(sft_episodes), **_tally(sft_episodes)},
            "pairs": {"rows": sum(bool(s) for s in sides),
                      "episodes": sum(len(s) for s in sides),
                      **_tally([e for s in sides for e in s])}}


def drop_counts(drops: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """The manifest's ``dropped`` field: per output (``sft``, ``pairs``), what each rule removed.

    >>> drop_counts({"sft rows": {"guard:recital": 1, "failed_check": 3}})
    {'sft': {'failed_check': 3, 'guard:recital': 1}, 'pairs': {}}
    """
    return {name: dict(sorted(drops.get(unit, {}).items()))
            for name, unit in (("sft", "sft rows"), ("pairs", "pairs"))}


def describe_drops(dropped: dict[str, dict[str, int]]) -> str:
    """One line for people: what the training rules kept out ("" when nothing).

    >>> describe_drops({"sft": {"failed_check": 3, "guard:recital": 1}, "pairs": {}})
    'not trained on: SFT rows: 3 failed a check, 1 flagged recital'
    >>> describe_drops({"pairs": {"chosen_broken_episode:tool_error": 2}})
    'not trained on: pairs: 2 chosen broken episode (tool error)'
    """
    words = {"failed_check": "failed a check", "below_threshold": "below the score threshold",
             "rejected_not_worse": "rejected side not worse", "too_long": "too long",
             "identical_sides": "sides identical"}

    def say(rule: str) -> str:
        side, _, rest = rule.partition("_") if rule.startswith("chosen_") else ("", "", rule)
        kind, _, why = rest.partition(":")
        text = (f"flagged {why}" if kind == "guard"
                else f"broken episode ({why.replace('_', ' ')})" if kind == "broken_episode"
                else words.get(rest, rest.replace("_", " ")))
        return f"chosen {text}" if side else text

    parts = [f"{label}: " + ", ".join(f"{n} {say(rule)}" for rule, n in counts.items())
             for label, counts in (("SFT rows", dropped.get("sft", {})),
                                   ("pairs", dropped.get("pairs", {}))) if counts]
    return "not trained on: " + "; ".join(parts) if parts else ""


def write_manifest(path: Path, fields: dict[str, Any]) -> dict[str, Any]:
    """Write ``manifest.json`` atomically with the schema version and creation time; return it."""
    from agentic_loop import __version__

    manifest = {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "created_at": utc_now().isoformat(),
        "agentic_loop_version": __version__,
        **fields,
    }
    atomic_write_bytes(path, (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode())
    return manifest


def prompt_format(runs: Sequence[Trajectory], include_exemplars: bool) -> dict[str, Any]:
    """How the rows' prompts are built, for the manifest and the model card.

    >>> prompt_format([], False)["chat"]
    ['system', 'user', 'assistant']
    """
    recorded = [r.prompt for t in runs for r in t.rounds[:1] if r.prompt is not None]
    return {"template": "generate", "version": PROMPT_VERSION,
            "chat": ["system", "user", "assistant"], "system": SYSTEM,
            "parts": ["task", "requirements", *(RETRIEVED_PARTS if include_exemplars else ())],
            "include_exemplars": include_exemplars,
            "versions_seen": sorted({p.version for p in recorded}),
            "rebuilt_runs": sum(p.rebuilt for p in recorded)}


def schema_versions(runs: Sequence[Trajectory]) -> dict[str, int]:
    """How many exported runs each trajectory schema version wrote (archive entries aside)."""
    counts: dict[str, int] = {}
    for t in runs:
        if t.architecture != "archive":
            counts[str(t.schema_version)] = counts.get(str(t.schema_version), 0) + 1
    return dict(sorted(counts.items()))
