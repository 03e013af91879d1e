"""``export_datasets``: trajectory logs (and an archive) in, SFT and DPO files and a manifest out.

The training loop's first step. Runs are read (bad lines reported by
``file:line`` and skipped), filtered (errors, invalid scores, consent,
latency outliers), passed through the PII gate, filtered for k-anonymity,
and turned into an SFT set and DPO pairs (see
:mod:`agentic_loop.distill.data.datasets`). The output folder gets:

``sft.jsonl``
    ``{"messages": [system, user, assistant], "metadata": {...}}`` rows; an agent's row
    holds its episode (``tool_calls``, ``tool`` results) and ``tools``, as TRL reads them.
``pairs.jsonl``
    ``{"prompt": [system, user], "chosen": [assistant], "rejected": [assistant],
    "metadata": {...}}`` rows (left out when there are no pairs: an empty file
    cannot be loaded); between two episodes the prompt holds the steps they share.
``manifest.json``
    sources and hashes, counts after each filter, redactions per entity type and
    per recognizer (never a value), records dropped as unsafe, how often each
    reward-hacking guard fired, what each training rule dropped (``dropped``:
    only samples that passed every check, raised no guard flag, reach the
    threshold and, for agents, hold an unbroken episode train), what the agents'
    rows hold (``episodes``), people's review labels and what they did (``review``: a
    rejected run never trains and is a DPO negative, :mod:`.labels`), versions (the secret
    rule set's included), options.

Agents' rows come from the gated copy of each run (tool arguments and results pass the PII
gate), no longer than the gate's ``max_chars`` (the whole conversation counts). An episode
whose recorder saw no tool schemas gets the package's schemas of the ready tools it called
(a trainer needs them); one calling any other tool cannot train.

Everything is computed before anything is written; each file is replaced
atomically. Before the first file is written, the folder is recorded as a
place holding user text (:func:`~agentic_loop.text_places.record_place`) in the
data folder and beside every trajectory log and archive it was read from,
so ``agentic-loop forget`` finds an export wherever it was written. If
every candidate is filtered out, :class:`EmptyExportError` names the
filter that removed the last ones and the folder is left as it was.

Example:
    >>> import tempfile
    >>> from agentic_loop.memory import HashingEmbedder
    >>> from agentic_loop.trajectories import Round, Trajectory, TrajectoryLog
    >>> logs, out = tempfile.mkdtemp(), tempfile.mkdtemp()
    >>> TrajectoryLog(logs).append(Trajectory(
    ...     architecture="reflection", model_id="m", task="Say hi.",
    ...     rounds=[Round(iteration=0, draft="yo", score=4.0),
    ...             Round(iteration=1, draft="Hi!", score=9.0)],
    ...     final_output="Hi!", final_score=9.0, accepted=True))
    >>> report = export_datasets([logs], out, pii="off", embedder=HashingEmbedder())
    >>> report.sft_rows, report.pairs
    (1, 1)
    >>> sorted(p.name for p in report.out_dir.iterdir())
    ['manifest.json', 'pairs.jsonl', 'sft.jsonl']
    >>> export_datasets([logs], out, pii="off", min_score=0.95, min_gap=0.9)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.distill.data.errors.EmptyExportError: nothing to export, ... 'score threshold' ...
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agentic_loop.distill.data.curate import (
    MIN_LATENCY_RUNS,
    CurationLog,
    FilterStep,
    drop_errored,
    drop_invalid_scores,
    drop_latency_outliers,
    filter_consent,
    filter_k_anonymity,
)
from agentic_loop.distill.data.datasets import PairRow, SftRow, preference_pairs, sft_rows
from agentic_loop.distill.data.errors import EmptyExportError, ExportError
from agentic_loop.distill.data.labels import inherit_reviews, review_counts
from agentic_loop.distill.data.manifest import (
    drop_counts,
    episode_counts,
    guard_counts,
    prompt_format,
    rubric_versions,
    schema_versions,
    write_manifest,
)
from agentic_loop.distill.data.pii.gate import PiiGate, PiiMode, PiiReport
from agentic_loop.distill.data.redact import redact_runs, run_texts
from agentic_loop.distill.data.samples import (
    RewardKind,
    trajectory_samples,
    with_fresh_prompt,
)
from agentic_loop.distill.data.sources import (
    SourceFile,
    inherit_consent,
    read_archive,
    read_runs,
    sha256_file,
)
from agentic_loop.episodes import Episode
from agentic_loop.jsonl_log import write_jsonl
from agentic_loop.memory.embeddings import TextEmbedder
from agentic_loop.paths import make_dir
from agentic_loop.text_places import data_root, record_place
from agentic_loop.trajectories import Trajectory

__all__ = [
    "MANIFEST_FILE",
    "PAIRS_FILE",
    "SFT_FILE",
    "ExportProgress",
    "ExportReport",
    "export_datasets",
    "prompt_format",
]

SFT_FILE = "sft.jsonl"
PAIRS_FILE = "pairs.jsonl"
MANIFEST_FILE = "manifest.json"

# Which option loosens a filter, for the message of an empty export.
_HINTS = {
    "read": "export more runs",
    "errored runs": "fix the runs' errors and export again",
    "invalid scores": "fix the scores upstream",
    "consent": "pass require_consent=False (--no-require-consent) only if consent is not needed",
    "latency outliers": "raise --latency-z",
    "PII gate": "see the PII report for why texts could not be anonymized",
    "k-anonymity": "lower --k-anonymity",
    "failed check": "only samples whose checks all hold train; sample more (improve --samples)",
    "guard flags": "flagged samples (repetition, recital, padding, copies) never train",
    "review rejected": "runs a person rejected never train (agentic-loop review list --all)",
    "chosen review rejected": "a run a person rejected is never chosen",
    "broken episodes": "a broken tool path never trains (the manifest's dropped field: why)",
    "chosen broken episodes": "a chosen episode must be unbroken",
    "conversation length": "a row is at most the PII gate's max_chars long",
    "trainer format": "a side whose results answer no call or tools lack schemas cannot train",
    "score threshold": "lower --min-score",
    "chosen failed check": "a chosen response must pass every check",
    "chosen guard flags": "a flagged response is never chosen",
    "chosen meets min_score": "lower --min-score",
    "min gap": "lower --min-gap",
    "pair candidates": "log refine rounds or run tasks several times",
    "sft candidates": "export runs with scored drafts",
}


class ExportProgress(Protocol):
    """Receives progress: a stage starts (with its size, if known), then advances."""

    def start(self, stage: str, total: int | None = None) -> None: ...

    def advance(self, n: int = 1) -> None: ...


@dataclass
class ExportReport:
    """What an export wrote and how it got there."""

    out_dir: Path
    sft_rows: int
    pairs: int
    steps: list[FilterStep]
    pii: PiiReport
    pii_dropped: list[str]
    problems: list[str]
    sources: list[SourceFile]
    manifest: dict[str, Any] = field(repr=False)
    #: what each training rule dropped, per output (the manifest's ``dropped``)
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def sft_path(self) -> Path | None:
        """``sft.jsonl``, or ``None`` when there were no SFT rows to write."""
        return self.out_dir / SFT_FILE if self.sft_rows else None

    @property
    def pairs_path(self) -> Path | None:
        """``pairs.jsonl``, or ``None`` when there were no pairs to write."""
        return self.out_dir / PAIRS_FILE if self.pairs else None

    @property
    def manifest_path(self) -> Path:
        """``manifest.json`` in the output folder."""
        return self.out_dir / MANIFEST_FILE


def _check_options(min_score: float, min_gap: float, k_anonymity: int | None,
                   max_per_task: int | None, dedup_threshold: float | None,
                   latency_z: float | None) -> None:
    """Messages name the argument and its CLI flag, so both kinds of caller know what to fix."""
    if not 0.0 <= min_score <= 1.0:
        hint = f"; did you mean {min_score / 10:g}?" if 1 < min_score <= 10 else ""
        raise ExportError("min_score (--min-score) is on the [0, 1] reward scale "
                          f"(rubric score / 10), got {min_score:g}{hint}")
    if not 0.0 < min_gap <= 1.0:
        raise ExportError(f"min_gap (--min-gap) is a reward difference in (0, 1], got {min_gap:g}")
    for name, flag, value in (("k_anonymity", "--k-anonymity", k_anonymity),
                              ("max_per_task", "--max-per-task", max_per_task)):
        if value is not None and value < 1:
            raise ExportError(f"{name} ({flag}) must be at least 1, got {value}")
    if dedup_threshold is not None and not 0.0 < dedup_threshold <= 1.0:
        raise ExportError("dedup_threshold (--dedup-threshold) is a cosine in (0, 1], "
                          f"got {dedup_threshold:g}")
    if latency_z is not None and latency_z <= 0:
        raise ExportError(f"latency_z (--latency-z) must be positive, got {latency_z:g}")


def _out_dir(path: str | os.PathLike[str]) -> Path:
    out = Path(path).expanduser()
    if out.exists() and not out.is_dir():
        raise ExportError(f"output path {out} is a file; pass a folder (created if missing)")
    return out


def _empty_message(log: CurationLog, problems: list[str]) -> str:
    parts = []
    for label, unit in (("SFT rows", "sft rows"), ("DPO pairs", "pairs")):
        step = log.emptied_by(unit, upstream=["records"])
        if step is None:
            continue
        notes = "; ".join(n for n in (step.detail, _HINTS.get(step.name, "")) if n)
        note = f" ({notes})" if notes else ""
        parts.append(f"{label}: {step.name!r} removed the last {step.before}{note}")
    message = "nothing to export, and nothing was written: " + "; ".join(parts)
    if problems:  # the first few, so a wrong input file shows itself (file:line: why)
        first = "the first 3" if len(problems) > 3 else "they are"
        shown = " | ".join(p.split("; ")[0][:200] for p in problems[:3])
        message += f"; {len(problems)} input problems, {first}: {shown}"
    return message


def _filter_records(
    runs: list[Trajectory], entries: list[Trajectory], log: CurationLog, problems: list[str], *,
    require_consent: bool | None, latency_z: float | None,
) -> tuple[list[Trajectory], bool]:
    """The record filters before the PII gate, each recorded in ``log`` (notes go to ``problems``).

    Returns the records kept and whether the consent filter was on.
    """
    pool = runs + entries
    log.record("read", "records", len(pool), len(pool),
               f"{len(runs)} trajectories + {len(entries)} archive entries; "
               f"{len(problems)} input problems")
    pool = log.keep("errored runs", "records", pool, drop_errored(pool))
    kept, notes = drop_invalid_scores(pool)
    problems += notes
    pool = log.keep("invalid scores", "records", pool, kept, "a score outside 0-10")
    # consent tracking is a property of the deployment: judge it on everything read
    tracked = any(t.consent is not None for t in runs + entries)
    kept, active = filter_consent(pool, tracked if require_consent is None else require_consent)
    pool = log.keep("consent", "records", pool, kept,
                    "consent=True required" if active else "not tracked: off")
    kept, bound = drop_latency_outliers(pool, latency_z)
    if latency_z is None:
        note = "off"
    elif bound is None:
        note = f"not applied: under {MIN_LATENCY_RUNS} runs with a latency, or no spread"
    else:
        note = f"latency <= {bound:.3g}s (modified z <= {latency_z:g})"
    return log.keep("latency outliers", "records", pool, kept, note), active


def export_datasets(
    trajectories: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    min_score: float = 0.8,
    pii: PiiGate | PiiMode = "spacy",
    min_gap: float = 0.2,
    archive: str | os.PathLike[str] | None = None,
    reward: RewardKind = "rubric",
    require_consent: bool | None = None,
    latency_z: float | None = 3.5,
    k_anonymity: int | None = None,
    max_per_task: int | None = None,
    dedup_threshold: float | None = 0.95,
    embedder: TextEmbedder | None = None,
    progress: ExportProgress | None = None,
    include_exemplars: bool = False,
) -> ExportReport:
    """Export SFT and DPO datasets and a manifest from trajectory logs (see the module docstring).

    Args:
        trajectories: TrajectoryLog folders or ``.jsonl`` files (one or a list).
        out_dir: the folder to write to (created if missing).
        min_score: reward (on [0, 1], rubric score / 10) an SFT row or a chosen response needs.
        pii: a :class:`PiiGate`, or its mode (``"spacy"``, ``"regex"``, ``"off"``).
        min_gap: smallest chosen-minus-rejected reward of a DPO pair.
        archive: an Archive folder whose accepted outputs become extra SFT rows.
        reward: ``"rubric"`` or ``"composite"`` (see :mod:`agentic_loop.distill.data.samples`).
        require_consent: ``None``: only consenting runs when any run records consent;
            ``True``/``False``: always / never filter.
        latency_z: modified z-score above which a run's latency is an outlier (``None``: off).
        k_anonymity: drop runs whose task pattern fewer than k users share (``None``: off).
        max_per_task: most SFT rows, and most pairs, per task (``None``: no cap).
        dedup_threshold: cosine for near-duplicate SFT rows (``None``: exact duplicates only).
        embedder: for near duplicates; the bundled all-MiniLM-L6-v2 by default.
        progress: receives stage and progress updates (the CLI's progress bar).
        include_exemplars: keep the exemplars and lessons a run's prompt was sent with
            (``--with-exemplars``); by default prompts are the system message, the task
            and its requirements, as a fresh draft without memory is asked.
    """
    _check_options(min_score, min_gap, k_anonymity, max_per_task, dedup_threshold, latency_z)
    out = _out_dir(out_dir)
    paths = [trajectories] if isinstance(trajectories, (str, os.PathLike)) else list(trajectories)
    stage = progress.start if progress is not None else (lambda name, total=None: None)

    stage("reading inputs")
    runs, sources, problems = read_runs(paths)
    runs = [with_fresh_prompt(t) for t in runs]  # older runs: rebuilt, before the PII gate
    entries: list[Trajectory] = []
    if archive is not None:
        entries, archive_sources, archive_problems = read_archive(archive)
        sources += archive_sources
        problems += archive_problems
        entries = inherit_reviews(inherit_consent(entries, runs), runs)
    if isinstance(pii, PiiGate):
        gate = pii
    else:
        stage(f"loading the PII gate ({pii})")
        gate = PiiGate(pii)
    if dedup_threshold is not None and embedder is None:
        from agentic_loop.memory import Embedder

        embedder = Embedder()
    log = CurationLog()
    pool, consent_active = _filter_records(runs, entries, log, problems,
                                           require_consent=require_consent, latency_z=latency_z)

    texts = len({text for t in pool for _, text in run_texts(t)})
    stage(f"PII gate ({gate.mode})", texts)
    redacted = redact_runs(pool, gate, progress=progress.advance if progress is not None else None)
    unsafe = f"{len(redacted.dropped)} could not be anonymized safely"
    pool = log.keep("PII gate", "records", pool, redacted.kept,
                    unsafe if gate.mode != "off" else "off")
    pool = log.keep("k-anonymity", "records", pool, filter_k_anonymity(pool, k_anonymity),
                    f"task pattern shared by >= {k_anonymity} users" if k_anonymity else "off")

    stage("building datasets")
    pool = [with_package_tools(t) for t in pool]
    samples = [s for t in pool
               for s in trajectory_samples(t, reward, include_exemplars=include_exemplars)]
    sft = sft_rows(samples, min_score=min_score, log=log, embedder=embedder,
                   dedup_threshold=dedup_threshold, max_per_task=max_per_task,
                   max_chars=gate.max_chars)
    pairs = preference_pairs(samples, min_score=min_score, min_gap=min_gap, log=log,
                             max_per_task=max_per_task, max_chars=gate.max_chars)
    if not sft and not pairs:
        raise EmptyExportError(_empty_message(log, problems))

    stage("writing")
    make_dir(out, what="export folder", error=ExportError)
    # before the first row lands: `forget` must find this folder wherever it is
    record_place("export", out, what="dataset export", near=[
        data_root(), *(Path(s.path).parent for s in sources if s.kind != "archive"),
        *([archive] if archive is not None else [])])
    outputs = {SFT_FILE: _write(out / SFT_FILE, sft, SftRow),
               PAIRS_FILE: _write(out / PAIRS_FILE, pairs, PairRow)}
    embedder_name = embedder.name if embedder is not None and dedup_threshold is not None else None
    options = {"min_score": min_score, "min_gap": min_gap, "reward": reward,
               "require_consent": require_consent, "consent_filter_active": consent_active,
               "latency_z": latency_z, "k_anonymity": k_anonymity, "max_per_task": max_per_task,
               "dedup_threshold": dedup_threshold, "embedder": embedder_name,
               "archive": str(archive) if archive is not None else None,
               "include_exemplars": include_exemplars}
    manifest = write_manifest(out / MANIFEST_FILE, {
        "format": "trl-conversational",
        "outputs": outputs,
        "sources": [s.to_dict() for s in sources],
        "problems": problems,
        "counts": log.to_list(),
        "pii": {**gate.describe(), "report": redacted.report.to_dict(),
                "records_dropped": redacted.dropped,
                "records_dropped_count": len(redacted.dropped)},
        "redactions": dict(sorted(redacted.report.redactions.items())),
        "redactions_by_recognizer": dict(sorted(redacted.report.recognizers.items())),
        "guards": guard_counts(pool),
        "dropped": drop_counts(log.drops),
        "episodes": episode_counts(sft, pairs),
        "prompt_format": prompt_format(pool, include_exemplars),
        "rubric_versions": rubric_versions(pool),
        "trajectory_schema_versions": schema_versions(pool),
        "review": review_counts(pool, samples, [(p.metadata.source,
                                                 p.metadata.rejected_trajectory_id)
                                                for p in pairs], log.drops),
        "options": options,
    })
    return ExportReport(out, len(sft), len(pairs), list(log.steps), redacted.report,
                        redacted.dropped, problems, sources, manifest, manifest["dropped"])


@functools.cache
def _ready_schemas() -> dict[str, dict[str, Any]]:
    """The package's ready tools' schemas by tool name (built once: the same for every run)."""
    from agentic_loop.models.tools import tool_specs
    from agentic_loop.tools import READY_TOOLS

    tools = [make() for make in READY_TOOLS.values()]
    return {tool.name: spec for tool, spec in zip(tools, tool_specs(tools), strict=True)}


def with_package_tools(run: Trajectory) -> Trajectory:
    """``run`` with each episode that called tools but recorded no schemas given the package's
    schemas of the ready tools it called (unchanged when it called any other tool)."""
    def filled(episode: Episode | None) -> Episode | None:
        if episode is None or episode.tools is not None:
            return episode
        names = dict.fromkeys(c.name for s in episode.model_steps for c in s.tool_calls)
        known = _ready_schemas() if names else {}
        if not names or not set(names) <= set(known):
            return episode
        return episode.model_copy(update={"tools": [known[n] for n in names]})

    return run.model_copy(update={"rounds": [r.model_copy(update={
        "episode": filled(r.episode), "alternatives": [
            c.model_copy(update={"episode": filled(c.episode)}) for c in r.alternatives]})
        for r in run.rounds]})


def _write(path: Path, rows: Sequence[SftRow] | Sequence[PairRow],
           row_type: type) -> dict[str, Any]:
    """Write rows atomically; with none, remove a stale file (an empty JSONL cannot be loaded)."""
    if not rows:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return {"rows": 0, "written": False, "sha256": None}
    write_jsonl(path, rows, row_type)
    return {"rows": len(rows), "written": True, "sha256": sha256_file(path)}
