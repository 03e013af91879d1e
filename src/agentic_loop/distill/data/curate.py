"""Curation: the filters between logged runs and training rows, each one counted.

Bad data teaches as well as good data, so every filter is explicit and its
effect recorded in a :class:`CurationLog` (written to the dataset manifest):
how many items came in, how many went on, and why. Filters on runs:

* :func:`drop_errored`: runs that raised (their rounds are incomplete).
* :func:`drop_invalid_scores`: runs holding a score outside 0-10 (a bug upstream).
* :func:`filter_consent`: when consent is tracked, only runs with ``consent=True``.
* :func:`drop_latency_outliers`: runs far slower than the rest (retries,
  stalls), by the modified z-score of Iglewicz and Hoaglin (median and MAD,
  so the outliers themselves do not hide the bound).
* :func:`filter_k_anonymity`: runs whose task *pattern* (anonymized text,
  digits generalized) fewer than ``k`` distinct users (or runs) share; a
  rare task can identify its author even with names removed.

Filters on samples: :func:`keep_trainable` (only samples whose checks all held
and on which no reward-hacking guard fired train; each drop is counted by
its rule in :attr:`CurationLog.drops`), :func:`keep_sound_episodes` (an agent's
broken episode, a call without a result, a tool error, no answer, never trains),
:func:`score_threshold`, :func:`drop_exact_duplicates`,
:func:`drop_near_duplicates` (embedding cosine on both prompt and response),
:func:`cap_per_task` (diversity: no task floods the set).

Example:
    >>> log = CurationLog()
    >>> kept = log.keep("even", "numbers", [1, 2, 3, 4], [n for n in [1, 2, 3, 4] if n % 2 == 0])
    >>> kept, [str(s) for s in log.steps]
    ([2, 4], ['even: 4 -> 2 numbers'])
    >>> task_pattern("Call <PERSON> at 10:30 about order 4471")
    'call <person> at #:# about order #'
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from agentic_loop.distill.data.episode_rows import episode_problem
from agentic_loop.distill.data.samples import Sample, invalid_scores, task_key
from agentic_loop.errors import ConfigError
from agentic_loop.memory.embeddings import TextEmbedder
from agentic_loop.trajectories import Trajectory

__all__ = [
    "MIN_LATENCY_RUNS",
    "CurationLog",
    "FilterStep",
    "cap_per_task",
    "drop_errored",
    "drop_exact_duplicates",
    "drop_invalid_scores",
    "drop_latency_outliers",
    "drop_near_duplicates",
    "filter_consent",
    "filter_k_anonymity",
    "keep_sound_episodes",
    "keep_trainable",
    "latency_bound",
    "score_threshold",
    "task_pattern",
]

T = TypeVar("T")

_DIGITS = re.compile(r"\d+")
#: Below this many runs with a latency, an outlier bound means nothing.
MIN_LATENCY_RUNS = 8


@dataclass(frozen=True)
class FilterStep:
    """One filter's effect: ``before`` items of ``unit`` in, ``after`` out, and a note on how."""

    name: str
    unit: str
    before: int
    after: int
    detail: str = ""

    @property
    def removed(self) -> int:
        """How many items the step removed."""
        return self.before - self.after

    def __str__(self) -> str:
        note = f" ({self.detail})" if self.detail else ""
        return f"{self.name}: {self.before} -> {self.after} {self.unit}{note}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form for manifests."""
        return {"step": self.name, "unit": self.unit, "before": self.before, "after": self.after,
                "removed": self.removed, "detail": self.detail}


@dataclass
class CurationLog:
    """The ordered record of every filter applied in one export.

    ``drops`` counts, per unit, what each training rule removed (``failed_check``,
    ``guard:<flag>``, ``below_threshold``, ...): the manifest's ``dropped`` field.
    """

    steps: list[FilterStep] = field(default_factory=list)
    drops: dict[str, dict[str, int]] = field(default_factory=dict)

    def count_drop(self, unit: str, rule: str, n: int = 1) -> None:
        """Count ``n`` items of ``unit`` that ``rule`` removed.

        >>> log = CurationLog(); log.count_drop("sft rows", "failed_check", 2)
        >>> log.count_drop("sft rows", "guard:recital"); log.count_drop("pairs", "x", 0)
        >>> log.drops
        {'sft rows': {'failed_check': 2, 'guard:recital': 1}}
        """
        if n:
            bucket = self.drops.setdefault(unit, {})
            bucket[rule] = bucket.get(rule, 0) + n

    def record(self, name: str, unit: str, before: int, after: int, detail: str = "") -> None:
        """Append a step's counts."""
        self.steps.append(FilterStep(name, unit, before, after, detail))

    def keep(self, name: str, unit: str, items: Sequence[Any], kept: list[T],
             detail: str = "") -> list[T]:
        """Record a step that turned ``items`` into ``kept``, and return ``kept``."""
        self.record(name, unit, len(items), len(kept), detail)
        return kept

    def emptied_by(self, final_unit: str, upstream: Sequence[str] = ()) -> FilterStep | None:
        """The step that left no ``final_unit`` items, looking into ``upstream`` units when the
        first ``final_unit`` step already received nothing.

        >>> log = CurationLog()
        >>> log.record("read", "runs", 3, 3); log.record("consent", "runs", 3, 0)
        >>> log.record("candidates", "rows", 0, 0)
        >>> log.emptied_by("rows", upstream=["runs"]).name
        'consent'
        """
        final = next((s for s in self.steps if s.unit == final_unit and s.after == 0), None)
        if final is None or final.before > 0:
            return final
        return next((s for s in self.steps if s.unit in upstream and s.after == 0), final)

    def to_list(self) -> list[dict[str, Any]]:
        """Every step, JSON-ready, in order."""
        return [s.to_dict() for s in self.steps]


# -- run filters -------------------------------------------------------------------------


def drop_errored(runs: Sequence[Trajectory]) -> list[Trajectory]:
    """Runs that finished without errors."""
    return [t for t in runs if t.ok]


def drop_invalid_scores(runs: Sequence[Trajectory]) -> tuple[list[Trajectory], list[str]]:
    """Runs whose scores are all in 0-10, and a note per dropped run naming the bad field."""
    kept, notes = [], []
    for t in runs:
        bad = invalid_scores(t)
        if bad:
            notes.append(f"trajectory {t.id}: {', '.join(bad)}")
        else:
            kept.append(t)
    return kept, notes


def filter_consent(runs: Sequence[Trajectory],
                   require: bool | None = None) -> tuple[list[Trajectory], bool]:
    """Runs with ``consent=True`` when consent is tracked; return them and whether it was on.

    ``require=None`` turns it on when any run records a consent value (a
    deployment that asks for consent treats a missing answer as no);
    ``True`` always, ``False`` never. A run whose consent is ``False``
    (refused, or withdrawn later: ``TrajectoryLog.record_consent``) is
    dropped even then.
    """
    active = any(t.consent is not None for t in runs) if require is None else require
    return ([t for t in runs if t.consent is True] if active
            else [t for t in runs if t.consent is not False]), active


def latency_bound(latencies: Sequence[float], z: float = 3.5) -> float | None:
    """The latency above which a run is an outlier (modified z-score > ``z``), or ``None``.

    ``None`` when there are too few values or no spread. The scale is the
    MAD (``0.6745 * (x - median) / MAD``), or the mean absolute deviation
    (``/ 1.253314``) when more than half the values are equal.

    >>> round(latency_bound([1.0, 1.1, 0.9, 1.0, 1.2, 0.8, 1.0, 1.1, 30.0]), 3)
    1.519
    """
    values = [v for v in latencies if v is not None and math.isfinite(v)]
    if len(values) < MIN_LATENCY_RUNS:
        return None
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values)
    if mad > 0:
        return median + z * mad / 0.6745
    mean_ad = statistics.fmean(abs(v - median) for v in values)
    return median + z * 1.253314 * mean_ad if mean_ad > 0 else None


def drop_latency_outliers(
    runs: Sequence[Trajectory], z: float | None = 3.5
) -> tuple[list[Trajectory], float | None]:
    """Runs no slower than :func:`latency_bound` (runs without a latency are kept); and the bound.

    Only the slow side is cut: a fast run that passed the rubric is a good
    sample, a very slow one usually hid retries, timeouts or a stalled server.
    """
    if z is None:
        return list(runs), None
    bound = latency_bound([t.latency_s for t in runs if t.latency_s is not None], z)
    if bound is None:
        return list(runs), None
    return [t for t in runs if t.latency_s is None or t.latency_s <= bound], bound


def task_pattern(task: str) -> str:
    """A task with digits generalized, case and spacing normalized: what k-anonymity counts.

    Run it on anonymized text, so entity values are already placeholders.
    """
    return task_key(_DIGITS.sub("#", task))


def filter_k_anonymity(runs: Sequence[Trajectory], k: int | None) -> list[Trajectory]:
    """Runs whose :func:`task_pattern` at least ``k`` distinct contributors share.

    A contributor is the run's hashed user id, or the run itself when it
    has none. ``k=None`` (or 1) keeps everything.
    """
    if k is None or k <= 1:
        return list(runs)
    contributors: dict[str, set[str]] = defaultdict(set)
    for t in runs:
        contributors[task_pattern(t.task)].add(t.user_id_hash or f"run:{t.id}")
    return [t for t in runs if len(contributors[task_pattern(t.task)]) >= k]


# -- sample filters ----------------------------------------------------------------------


def keep_trainable(items: Sequence[T], sample_of: Callable[[T], Sample], log: CurationLog,
                   unit: str, side: str = "") -> list[T]:
    """The items whose sample passed every check, raised no guard flag and whose run no person
    rejected, in logged steps (the last only when some run carries a review label).

    The loop trains on what its checks accept: a sample that failed a check
    (``passed is False``) is dropped whatever its score (step ``"failed
    check"``, rule ``failed_check``), then one a guard flagged (step ``"guard
    flags"``, rule ``guard:<its first flag>``), then one of a run a person rejected (step
    ``"review rejected"``, rule ``rejected_by_review``). ``side`` prefixes the names
    (``"chosen"`` for DPO pairs). A sample with no check verdict (``passed is
    None``: its task has no checks) is kept.

    >>> from agentic_loop.distill.data.samples import Sample
    >>> def sample(passed, flags=()):
    ...     return Sample("t", "r", 0.9, "round", "run", 0, "m", passed=passed, flags=flags)
    >>> log = CurationLog()
    >>> kept = keep_trainable([sample(True), sample(False), sample(None, ("recital",))],
    ...                       lambda s: s, log, "sft rows")
    >>> len(kept), log.drops
    (1, {'sft rows': {'failed_check': 1, 'guard:recital': 1}})
    """
    prefix = f"{side} " if side else ""
    rule = f"{side}_" if side else ""
    passing = [item for item in items if sample_of(item).passed is not False]
    log.count_drop(unit, f"{rule}failed_check", len(items) - len(passing))
    passing = log.keep(f"{prefix}failed check", unit, items, passing,
                       "every check held")
    clean = []
    for item in passing:
        flags = sample_of(item).flags
        if flags:
            log.count_drop(unit, f"{rule}guard:{flags[0]}")
        else:
            clean.append(item)
    clean = log.keep(f"{prefix}guard flags", unit, passing, clean,
                     "no guard flag")
    if not any(sample_of(item).review for item in clean):
        return clean  # no label: no step (the manifest of an unreviewed export is unchanged)
    kept = [item for item in clean if sample_of(item).review != "reject"]
    log.count_drop(unit, f"{rule}rejected_by_review", len(clean) - len(kept))
    return log.keep(f"{prefix}review rejected", unit, clean, kept,
                    "no person rejected the run (`agentic-loop review`)")


def keep_sound_episodes(items: Sequence[T], sample_of: Callable[[T], Sample], log: CurationLog,
                        unit: str, side: str = "") -> list[T]:
    """The items whose sample is a plain answer or an unbroken agent episode, in one logged
    step (``"broken episodes"``, ``side`` prefixing it as in :func:`keep_trainable`).

    A trainer would learn a broken tool path (a call left unanswered, a tool error, a tool
    the model was not offered, an episode stopped by its step limit) as a good one, so each
    is dropped, counted by why (``broken_episode:<rule>``, the rules of
    :func:`~agentic_loop.distill.data.episode_rows.episode_problem`).

    >>> from agentic_loop.episodes import Episode
    >>> broken = Sample("t", "r", 0.9, "round", "run", 0, "m",
    ...                 episode=Episode(final="r", stop_reason="step_limit"))
    >>> log = CurationLog()
    >>> kept = keep_sound_episodes([broken, Sample("t", "r", 0.9, "round", "run", 0, "m")],
    ...                            lambda s: s, log, "sft rows")
    >>> len(kept), log.drops
    (1, {'sft rows': {'broken_episode:stopped_step_limit': 1}})
    """
    prefix = f"{side} " if side else ""
    rule = f"{side}_" if side else ""
    sound = []
    for item in items:
        sample = sample_of(item)
        why = episode_problem(sample.episode, sample.response) if sample.episode else None
        if why is None:
            sound.append(item)
        else:
            log.count_drop(unit, f"{rule}broken_episode:{why}")
    return log.keep(f"{prefix}broken episodes", unit, items, sound,
                    "every call answered, no tool error, an answer")


def score_threshold(samples: Sequence[Sample], min_score: float) -> list[Sample]:
    """Samples whose reward reaches ``min_score`` (on the [0, 1] scale)."""
    return [s for s in samples if s.reward >= min_score]


def drop_exact_duplicates(items: Sequence[T], key: Callable[[T], Hashable]) -> list[T]:
    """The first item of each ``key`` (order matters: sort best first)."""
    seen: set[Hashable] = set()
    kept = []
    for item in items:
        k = key(item)
        if k not in seen:
            seen.add(k)
            kept.append(item)
    return kept


def drop_near_duplicates(
    samples: Sequence[Sample], embedder: TextEmbedder, threshold: float = 0.95,
    answer: Callable[[Sample], str] = lambda s: s.response,
) -> list[Sample]:
    """Greedy near-duplicate removal, in the given order (sort best first).

    A sample is dropped when a sample kept before it has a prompt *and* a
    response whose cosine similarities to its own both reach ``threshold``:
    two different good answers to one task both stay (distinct drafts are
    what rejection sampling wants), and so do two similar answers to
    different tasks. ``answer`` gives the response text compared (an agent's: its tool
    calls and its answer).
    """
    if not 0.0 < threshold <= 1.0:
        raise ConfigError(f"the near-duplicate threshold is a cosine in (0, 1], got {threshold!r}")
    if len(samples) < 2:
        return list(samples)
    prompts = list(dict.fromkeys(s.prompt for s in samples))
    responses = list(dict.fromkeys(answer(s) for s in samples))
    p_row = {p: i for i, p in enumerate(prompts)}
    r_row = {r: i for i, r in enumerate(responses)}
    p_vec = embedder.embed(prompts)
    r_vec = embedder.embed(responses)
    neighbours = _similar_rows(p_vec, threshold)
    kept_by_prompt: dict[int, list[int]] = defaultdict(list)  # prompt row -> kept response rows
    kept = []
    for s in samples:
        p, r = p_row[s.prompt], r_row[answer(s)]
        near = [row for q in neighbours[p] for row in kept_by_prompt.get(q, ())]
        if near and float(np.max(r_vec[near] @ r_vec[r])) >= threshold:
            continue
        kept_by_prompt[p].append(r)
        kept.append(s)
    return kept


def _similar_rows(vectors: np.ndarray, threshold: float, block: int = 2048) -> list[np.ndarray]:
    """For each row, the rows whose cosine to it reaches ``threshold`` (itself included)."""
    out: list[np.ndarray] = []
    for start in range(0, len(vectors), block):
        sims = vectors[start:start + block] @ vectors.T
        out.extend(np.flatnonzero(row >= threshold) for row in sims)
    return out


def cap_per_task(items: Sequence[T], limit: int | None, key: Callable[[T], str]) -> list[T]:
    """At most ``limit`` items per task ``key``, the first ones in the given order (best first)."""
    if limit is None:
        return list(items)
    if limit < 1:
        raise ConfigError(f"the per-task cap must be at least 1, got {limit!r}")
    counts: Counter[str] = Counter()
    kept = []
    for item in items:
        k = key(item)
        if counts[k] < limit:
            counts[k] += 1
            kept.append(item)
    return kept
