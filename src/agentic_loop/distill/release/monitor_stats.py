"""Per-version health from trajectories: which registry version answered each run, and how well.

Why a module of its own: the monitor's verdict is only as good as two plain
facts, computed here without any threshold: *which version served a run*
and *what its runs look like* (error rate, latency p50/p99, mean score, pass
rate, thumbs-up ratio, output length) over a window.

Which version served a run (:class:`VersionMap`). A run's model is the model
that wrote most of its drafts (``Round.model``, from each answer's
``response_metadata["model_name"]``; a :class:`~.router.Router` stamps it),
else the trajectory's ``model_id`` (under a canary router, the model the run
was routed to: a candidate's run that failed before its first draft counts
against the candidate). That model id maps to a registry version
when it is, in this order:

1. the version's served id ``<name>-<version>`` (:func:`~.router.served_model_id`:
   how ``Router.from_registry`` loads a version and how ``serve_registered``
   names it on vLLM), or the version id itself (``v3``);
2. ``<registry>@<version>``, where ``<registry>`` is the registry folder's
   name or a name it is served under: what a ``load_chat_model("registry:<dir>")``
   model answers as in-process (:class:`~.live_model.RegistryChatModel`), so
   such a run carries the version that answered each draft;
3. the version's model folder name (what ``load_chat_model("local:<path>")``
   calls it), or, for a folder converted from the embedded model (the demo's
   base), the embedded model's id (what ``load_chat_model("local")`` calls
   it), when no other version has such a folder;
4. a name the registry is served under for every version (the live
   server's stable name, by default the registry folder's name, see
   :mod:`~.live`): then the version that was ``current`` in the registry's
   audit log when the run was logged.

Anything else (another model; a router's own id, on a run that failed before
its first draft when each call's prompt picked the model) is counted as
unattributed, never guessed.

Example:
    >>> from agentic_loop.trajectories import Trajectory
    >>> runs = [Trajectory(architecture="a", model_id="m", task="t", accepted=i % 2 == 0,
    ...                    final_score=8.0, latency_s=1.0 + i, final_output="x" * 10,
    ...                    errors=["boom"] if i == 0 else []) for i in range(4)]
    >>> s = version_stats("v1", "m", runs)
    >>> (s.runs, s.error_rate, s.pass_rate, s.mean_score, s.latency_p50, s.mean_output_chars)
    (4, 0.25, 0.5, 8.0, 2.5, 10.0)
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from agentic_loop.clock import utc_now
from agentic_loop.distill.release.registry import Registry
from agentic_loop.distill.release.router import served_model_id
from agentic_loop.trajectories import Trajectory

__all__ = ["VersionMap", "VersionStats", "Window", "answered_by", "group_by_version",
           "percentile", "version_stats"]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) by linear interpolation; None for no values.

    >>> percentile([1.0, 2.0, 3.0, 4.0], 50), percentile([5.0], 99), percentile([], 50)
    (2.5, 5.0, None)
    """
    if not values:
        return None
    import numpy as np

    return float(np.percentile(values, q))


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def answered_by(trajectory: Trajectory) -> str:
    """The model that wrote most of the run's drafts (the last one on a tie), else its model_id."""
    models = [m for m in (getattr(r, "model", None) for r in trajectory.rounds) if m]
    if not models:
        return trajectory.model_id
    counts = Counter(models)
    top = max(counts.values())
    return next(m for m in reversed(models) if counts[m] == top)


class VersionStats(BaseModel):
    """One version's runs in the window, summed up (None: nothing to measure).

    A record: ``model_dump(mode="json")`` is its entry in the monitor's JSON
    report, and ``model_validate`` reads it back (older reports included).
    """

    model_config = ConfigDict(frozen=True)

    version: str
    model: str
    runs: int
    errors: int
    error_rate: float
    latency_p50: float | None
    latency_p99: float | None
    mean_score: float | None
    pass_rate: float
    rated: int
    feedback_ratio: float | None
    mean_output_chars: float | None
    first_at: datetime | None = None
    last_at: datetime | None = None


def version_stats(version: str, model: str, runs: Sequence[Trajectory]) -> VersionStats:
    """The health of ``runs`` (all served by ``version``, whose model id is ``model``)."""
    n = len(runs)
    errors = sum(1 for t in runs if t.errors)
    latencies = [t.latency_s for t in runs if t.latency_s is not None]
    scores = [t.final_score for t in runs if t.final_score is not None]
    rated = [t.feedback for t in runs if t.feedback is not None]
    lengths = [float(len(t.final_output)) for t in runs if t.final_output is not None]
    times = [t.created_at for t in runs]
    return VersionStats(
        version=version, model=model, runs=n, errors=errors,
        error_rate=errors / n if n else 0.0,
        latency_p50=percentile(latencies, 50), latency_p99=percentile(latencies, 99),
        mean_score=_mean(scores), pass_rate=sum(t.accepted for t in runs) / n if n else 0.0,
        rated=len(rated), feedback_ratio=rated.count("up") / len(rated) if rated else None,
        mean_output_chars=_mean(lengths), first_at=min(times, default=None),
        last_at=max(times, default=None))


@dataclass(frozen=True)
class Window:
    """Which runs of each version count: the last ``last_runs``, within ``hours`` of ``now``."""

    last_runs: int | None = 200
    hours: float | None = None
    now: datetime | None = None

    def describe(self) -> str:
        """``last 200 runs per version within 24h`` and the like."""
        parts = [f"last {self.last_runs} runs per version" if self.last_runs else
                 "all runs per version"]
        if self.hours is not None:
            parts.append(f"within {self.hours:g}h")
        return " ".join(parts)

    def apply(self, runs: Sequence[Trajectory]) -> list[Trajectory]:
        """``runs`` cut to the window, oldest first."""
        ordered = sorted(runs, key=lambda t: t.created_at)
        if self.hours is not None:
            since = (self.now or utc_now()) - timedelta(hours=self.hours)
            ordered = [t for t in ordered if t.created_at >= since]
        return ordered[-self.last_runs:] if self.last_runs else ordered


class VersionMap:
    """Model ids (and log times) to registry versions, in the order the module doc gives."""

    def __init__(self, ids: Mapping[str, str], timeline: Sequence[tuple[datetime, str]],
                 served_names: Iterable[str] = (), registry_names: Iterable[str] = ()) -> None:
        self.ids = dict(ids)
        self.timeline = sorted(timeline)
        self.served_names = set(served_names)
        #: what ``<name>@<version>`` may start with: the registry folder's and served names
        self.registry_names = set(registry_names) | self.served_names

    @classmethod
    def from_registry(cls, registry: Registry, served_names: Iterable[str] | None = None
                      ) -> VersionMap:
        """The map of ``registry``; ``served_names`` default to its live server's stable name."""
        ids: dict[str, str] = {}
        versions = registry.versions()
        local_ids = {v.version: _local_ids(Path(v.path)) for v in versions}
        seen = Counter(name for names in local_ids.values() for name in names)
        for v in versions:
            for name in local_ids[v.version]:
                if seen[name] == 1:
                    ids.setdefault(name, v.version)
        for v in versions:  # exact ids win over folder names
            ids[served_model_id(v)] = v.version
            ids[v.version] = v.version
        timeline = [(datetime.fromisoformat(e.at), e.version) for e in registry.history()
                    if e.action in ("promote", "rollback")]
        names = {registry.root.name, registry.root.absolute().name, registry.root.resolve().name}
        return cls(ids, timeline, _stable_names(registry) if served_names is None
                   else served_names, registry_names=names - {""})

    def version_of(self, model: str, at: datetime) -> str | None:
        """The version that answered as ``model`` at ``at``; None when it is not the registry's."""
        if model in self.ids:
            return self.ids[model]
        name, at_sign, version = model.rpartition("@")
        if at_sign and name in self.registry_names and self.ids.get(version) == version:
            return version
        if model in self.served_names and self.timeline:
            # stamps have whole seconds: a run logged in the second of a promote counts as after
            i = bisect.bisect_right([t for t, _ in self.timeline],
                                    at.replace(microsecond=0)) - 1
            return self.timeline[i][1] if i >= 0 else None
        return None


def _local_ids(folder: Path) -> list[str]:
    """What ``load_chat_model`` calls the model in ``folder``: ``local:<folder>`` its name,
    and plain ``local`` the embedded model's id when ``folder`` is its conversion."""
    from agentic_loop.models.embedded import EMBEDDED_MODEL_ID, is_embedded_conversion

    return [folder.name, *([EMBEDDED_MODEL_ID] if is_embedded_conversion(folder) else [])]


def _stable_names(registry: Registry) -> set[str]:
    """The names ``registry`` is served under: the running server's (``serving.json``) and the
    default stable name (none when the live-serving module is missing)."""
    try:
        from agentic_loop.distill.release.live import read_serving, stable_name
    except ImportError:
        return set()
    names = {stable_name(registry)}
    try:
        state = read_serving(registry)
    except Exception:  # noqa: BLE001 - an unreadable serving.json only loses this hint
        state = None
    return names | ({state.name} if state is not None else set())


def group_by_version(trajectories: Iterable[Trajectory], vmap: VersionMap
                     ) -> tuple[dict[str, list[Trajectory]], dict[str, str], Counter[str]]:
    """Runs per version, each version's model id as seen, and unattributed runs per model id."""
    runs: dict[str, list[Trajectory]] = {}
    models: dict[str, str] = {}
    unattributed: Counter[str] = Counter()
    for t in trajectories:
        model = answered_by(t)
        version = vmap.version_of(model, t.created_at)
        if version is None:
            unattributed[model] += 1
            continue
        runs.setdefault(version, []).append(t)
        models.setdefault(version, model)
    return runs, models, unattributed
