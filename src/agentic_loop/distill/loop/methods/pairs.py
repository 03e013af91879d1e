"""The data stage of the row-making methods: export, gate, the method's rows, the alarm, write.

Why this order: the export (:func:`~agentic_loop.distill.data.export.export_datasets`,
through the round runner) still runs first and writes the checks' rows:
what passed every check, PII-gated, curated. They are the round's
*checks-only* data, the fallback when the agreement alarm refuses judged
data. Then the method adds its rows, made from the round's grown samples
after the same PII gate:

* ``self-rewarding``: the judge's pairs (:mod:`.self_rewarding`), added to the
  checks' pairs; trains ``dpo``;
* ``spin``: reference-against-own pairs (:mod:`.spin`), the round's only pairs
  (a reference is a label, not a judgement: no alarm); trains ``dpo``;
* ``constitutional``: revisions as SFT rows and revised-against-original pairs
  (:mod:`.constitutional`), added to the checks' rows; trains ``sft+dpo``, or the
  half that has rows.

The folder is rewritten (``sft.jsonl``, ``pairs.jsonl``) and its
``manifest.json`` gains ``method``: the method, its judge, the alarm's answer
and the method's counts (the same record as the stage's ``judged``). A round
whose trainer finds nothing to train on ends, as any round with no data does.
Given runs (a one-shot round, no pool) have no task ids to group by: the
method adds nothing to the export's rows, and says so in its counts.

Example:
    >>> combined_train_method("constitutional", sft=3, pairs=0)
    'sft'
    >>> combined_train_method("constitutional", sft=3, pairs=2), combined_train_method("spin", 0, 4)
    ('sft+dpo', 'dpo')
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentic_loop.distill.loop.methods.common import (
    Judge,
    alarm,
    answers_by_task,
    gated_answers,
    gated_samples,
    load_judge,
    pii_gate,
    read_rows,
    round_runs,
)
from agentic_loop.distill.loop.settings import JUDGED, train_method
from agentic_loop.tasks.spec import TaskSpec

__all__ = ["combined_train_method", "pair_data", "write_rows"]


def combined_train_method(method: str, sft: int, pairs: int) -> str:
    """The trainer for the rows there are: constitutional trains the half it has rows for."""
    wanted = train_method(method)
    if wanted == "sft+dpo" and not (sft and pairs):
        return "sft" if sft else "dpo"
    return wanted


def _make(runner: Any, state: Any, pool: Sequence[TaskSpec], gate: Any,
          judge: Judge | None) -> tuple[Any, int]:
    """The method's rows from the round's grown runs, and how many runs the PII gate dropped."""
    method, runs = runner.settings.method, round_runs(state.dir, ("grown",))
    if method == "self-rewarding" and judge is not None:
        from agentic_loop.distill.loop.methods.self_rewarding import (
            sample_groups,
            self_rewarding_rows,
        )

        samples, dropped = gated_samples(runs, gate)
        return self_rewarding_rows(runner, state, sample_groups(samples, pool), judge), dropped
    answers, dropped = gated_answers(runs, gate)
    groups = answers_by_task(answers, pool)
    if method == "spin" or judge is None:
        from agentic_loop.distill.loop.methods.spin import spin_rows

        return spin_rows(groups, gate), dropped
    from agentic_loop.distill.loop.methods.constitutional import constitutional_rows

    return constitutional_rows(runner, state, groups, gate, judge), dropped


def pair_data(runner: Any, state: Any, pool: Sequence[TaskSpec]) -> dict[str, Any]:
    """Make, record and write the rows of ``self-rewarding``, ``spin`` and ``constitutional``."""
    from agentic_loop.distill.data.export import MANIFEST_FILE, PAIRS_FILE, SFT_FILE

    s = runner.settings
    base = runner.export(state, end_on_empty=False)
    out = state.dir / "data"
    keep_base = not base.get("empty") and s.method != "spin"
    sft = read_rows(out / SFT_FILE) if keep_base else []
    pairs = read_rows(out / PAIRS_FILE) if keep_base else []
    checks = {"sft_rows": len(sft), "pairs": len(pairs)}
    judged: dict[str, Any] = {"method": s.method, "judge": None, "judge_spec": None,
                              "allowed": True, "reason": "", "checks_rows": checks}
    judge = None
    if s.method in JUDGED:
        judge = load_judge(runner, state)
        judged.update(judge=judge.name, judge_spec=judge.spec)
        runner._start(state, f"agreement alarm ({judge.name})")
        judged["allowed"], judged["reason"] = alarm(runner, state, judge.name)
    else:
        judged["reason"] = "reference answers are labels, not judgements: no alarm"
    made = None
    if judged["allowed"]:
        made, dropped = _make(runner, state, pool, pii_gate(s.export_options), judge)
        judged["counts"] = {**made.counts, "pii_dropped": dropped}
        sft, pairs = sft + _new(made.sft, sft), pairs + _new(made.pairs, pairs)
    else:
        judged["counts"] = {}
    chosen = combined_train_method(s.method, len(sft), len(pairs))
    judged["train_method"] = chosen
    result: dict[str, Any] = {"sft_rows": len(sft), "pairs": len(pairs), "dir": str(out),
                              "dropped": base.get("dropped") or {}, "judged": judged,
                              "train_method": chosen}
    needs = {"sft": len(sft), "dpo": len(pairs)}
    missing = [k for k in ("sft", "dpo") if k in chosen and not needs[k]]
    if missing:
        what = " and ".join("SFT rows" if m == "sft" else "DPO pairs" for m in missing)
        why = "" if judged["allowed"] else f" (judged data refused: {judged['reason']})"
        return {**result, **runner._end(
            state, f"round {state.number}: no {what} for method {s.method}{why}; "
                   f"{_fix(s.method)}"), "judged": judged}
    write_rows(out, sft, pairs, judged, manifest=out / MANIFEST_FILE,
               files=(SFT_FILE, PAIRS_FILE))
    return result


def _new(rows: list[dict[str, Any]], have: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` that say what no row of ``have`` says already (metadata aside), each once."""
    seen = {_said(row) for row in have}
    out = []
    for row in rows:
        if _said(row) not in seen:
            seen.add(_said(row))
            out.append(row)
    return out


def _said(row: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in row.items() if k != "metadata"}, sort_keys=True)


def _fix(method: str) -> str:
    return {"spin": "give pool tasks a reference answer (an exact answer check, or "
                    "metadata.reference) or raise --samples",
            "self-rewarding": "raise --samples (the judge ranks each task's distinct samples) "
                              "or lower --min-rank-gap",
            }.get(method, "lower --thresholds or raise --samples")


def write_rows(out: Path, sft: list[dict[str, Any]], pairs: list[dict[str, Any]],
               judged: dict[str, Any], *, manifest: Path,
               files: tuple[str, str] = ("sft.jsonl", "pairs.jsonl")) -> None:
    """Write the round's rows (a file with no rows removed) and add ``method`` to the manifest.

    The folder is recorded as a place holding user text (``agentic-loop forget``
    finds it), as the export records its own.
    """
    from agentic_loop.atomic import atomic_write_bytes
    from agentic_loop.distill.data.manifest import write_manifest
    from agentic_loop.distill.data.sources import sha256_file
    from agentic_loop.text_places import data_root, record_place

    out.mkdir(parents=True, exist_ok=True)
    record_place("export", out, what="dataset export", near=[data_root(), out.parent])
    outputs: dict[str, Any] = {}
    for name, rows in zip(files, (sft, pairs), strict=True):
        path = out / name
        if not rows:
            path.unlink(missing_ok=True)
            outputs[name] = {"rows": 0, "written": False, "sha256": None}
            continue
        text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        atomic_write_bytes(path, text.encode("utf-8"))
        outputs[name] = {"rows": len(rows), "written": True, "sha256": sha256_file(path)}
    found: dict[str, Any] = {}
    if manifest.is_file():
        found = json.loads(manifest.read_text(encoding="utf-8"))
        for key in ("schema_version", "created_at", "agentic_loop_version"):
            found.pop(key, None)
    write_manifest(manifest, {**found, "format": "trl-conversational", "outputs": outputs,
                              "method": judged})
