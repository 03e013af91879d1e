"""The quality bench in several dtypes: each row once per dtype, paired with itself in the first.

Why: a cheaper dtype (bf16 on a CPU with native bf16 math) is a speed-up only
if quality holds, and "holds" is a statistical statement. ``quality.py
--dtypes float32,bfloat16`` runs every selected row in each dtype on the same
held-out tasks in one process; this module names those rows, pairs each row
in a later dtype with the SAME row in the first dtype task by task (exact
McNemar, paired bootstrap on pass rate and score, Holm over the dtype
comparisons, the tasks a 10-point difference needs) and puts the speed ratio
(output tokens per LLM-second) beside the verdict. It never claims equality:
"no detectable difference" comes with how many tasks a 10-point difference
would need.

Example:
    >>> parse_dtypes("float32, bfloat16")
    ('float32', 'bfloat16')
    >>> tagged("single-shot", "bfloat16"), untagged("single-shot [bfloat16]")
    ('single-shot [bfloat16]', ('single-shot', 'bfloat16'))
    >>> rows = [{"name": "single-shot [float32]", "dtype": "float32"},
    ...         {"name": "single-shot [bfloat16]", "dtype": "bfloat16"}]
    >>> per_task = {"single-shot [float32]": {"passed": [True, False] * 20,
    ...                                       "scores": [9.0, 2.0] * 20},
    ...             "single-shot [bfloat16]": {"passed": [True, False] * 20,
    ...                                        "scores": [9.0, 2.0] * 20}}
    >>> out = add_dtype_comparisons(rows, per_task, ("float32", "bfloat16"), resamples=200)
    >>> out[0]["baseline"], out[0]["verdict"]
    ('single-shot [float32]', 'no detectable difference (Holm p=1); 0 of 40 tasks differ')
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from agentic_loop.distill.eval.stats import compare, holm, verdict
from agentic_loop.errors import ConfigError

#: The dtypes the embedded engine runs in (``agentic_loop.models.local.DTYPES``' names).
KNOWN = ("float32", "bfloat16", "float16")
#: Rows that run once per dtype; the trained rows (a train pass, SFT, GRPO) do not.
DTYPE_ROWS = frozenset({"fixed", "single", "best_of", "reflection", "resample", "reflexion",
                        "ar_cold"})
DELTA = 0.10  # the pass-rate difference the power note is about
_TAG = re.compile(r"^(?P<name>.*) \[(?P<dtype>[a-z0-9]+)\]$")

NOTE = ("dtype rows: every row named 'X [dtype]' ran with the embedded engine's weights in that "
        "dtype (engine_dtype: the loaded parameters' dtype, checked against the request), on "
        "the same held-out tasks in one process. vs_first_dtype pairs each row in a later "
        "dtype with the same row in the first dtype (exact McNemar, Holm over those "
        "comparisons, paired bootstrap on pass rate and score); vs_single_shot compares with "
        "single-shot in the first dtype. 'no detectable difference' is not equality: "
        "tasks_needed is the tasks a 10-point difference would need at the observed "
        "discordance. speed: output tokens per LLM-second, later dtype / first dtype.")


def parse_dtypes(text: str | None) -> tuple[str, ...]:
    """The ``--dtypes`` list, in order (the first is the baseline); () when not given.

    >>> parse_dtypes(None), parse_dtypes("bfloat16")
    ((), ('bfloat16',))
    >>> parse_dtypes("float32,fp8")
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: --dtypes names 'fp8', not a dtype the engine runs in; use ...
    """
    if not text:
        return ()
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    for name in names:
        if name not in KNOWN:
            raise ConfigError(f"--dtypes names {name!r}, not a dtype the engine runs in; use "
                              f"a comma-separated list of {', '.join(KNOWN)}")
    if len(set(names)) != len(names) or not names:
        raise ConfigError(f"--dtypes={text!r}: name each dtype once, e.g. float32,bfloat16")
    return names


def check_rows(rows: Sequence[str], dtypes: Sequence[str]) -> None:
    """Refuse rows that cannot run once per dtype (they train or need the train pass).

    >>> check_rows(["single", "best_of"], ["float32", "bfloat16"])
    >>> check_rows(["single", "grpo"], ["float32", "bfloat16"])
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: --dtypes runs only rows ...; drop ['grpo'] from --rows
    """
    if not dtypes:
        return
    other = sorted(set(rows) - DTYPE_ROWS)
    if other:
        raise ConfigError(f"--dtypes runs only rows {', '.join(sorted(DTYPE_ROWS))} (the "
                          f"trained rows train in one dtype); drop {other} from --rows")


def tagged(name: str, dtype: str | None) -> str:
    """A row's name carrying its dtype; unchanged when the run names no dtypes."""
    return f"{name} [{dtype}]" if dtype else name


def untagged(name: str) -> tuple[str, str | None]:
    """``(row name, dtype)`` of a tagged name; ``(name, None)`` for an untagged one.

    >>> untagged("best-of-4")
    ('best-of-4', None)
    """
    match = _TAG.match(name)
    return (match["name"], match["dtype"]) if match else (name, None)


def dtype_verdict(diff: float, p_holm: float, needed: int | None, differ: int, tasks: int
                  ) -> str:
    """The verdict the statistics allow, with how many tasks came out differently.

    >>> dtype_verdict(-0.02, 0.7, 250, 30, 200)
    'no detectable difference (Holm p=0.7); needs ~250 tasks for 10 points; 30 of 200 tasks differ'
    """
    return (verdict(diff, p_holm, needed, delta=DELTA, label="Holm p")
            + f"; {differ} of {tasks} tasks differ")


def add_dtype_comparisons(rows: Sequence[dict[str, Any]],
                          per_task: Mapping[str, Mapping[str, list[Any]]],
                          dtypes: Sequence[str], *, resamples: int = 10_000
                          ) -> list[dict[str, Any]]:
    """Attach ``vs_first_dtype`` to every row in a later dtype (Holm over them); return them.

    Each row is paired with the same row in ``dtypes[0]``, task by task.
    """
    if len(dtypes) < 2:
        return []
    pairs = []
    for row in rows:
        name, dtype = untagged(row["name"])
        ref = tagged(name, dtypes[0])
        if dtype in dtypes[1:] and ref in per_task:
            pairs.append((row, ref))
    raw = [compare(per_task[ref]["passed"], per_task[row["name"]]["passed"],
                   per_task[ref]["scores"], per_task[row["name"]]["scores"], delta=DELTA,
                   resamples=resamples) for row, ref in pairs]
    out = []
    for (row, ref), c, p_holm in zip(pairs, raw, holm([c.mcnemar_p for c in raw])):
        row["vs_first_dtype"] = {
            **c.to_dict(), "baseline": ref, "mcnemar_p_holm": p_holm, "holm_family": len(raw),
            "verdict": dtype_verdict(c.pass_rate_diff, p_holm, c.tasks_needed,
                                     c.wins + c.losses, c.tasks)}
        out.append(row["vs_first_dtype"])
    return out


def ratio(num: float | None, den: float | None) -> float | None:
    """``num / den`` to 3 places; None when either is missing or the divisor is 0."""
    return round(num / den, 3) if num and den else None


def speed(rows: Sequence[Mapping[str, Any]], dtypes: Sequence[str]) -> list[dict[str, Any]]:
    """Per row in a later dtype: tokens per LLM-second and LLM-seconds per task vs the first.

    >>> rows = [{"name": "a [float32]", "output_tokens_per_llm_s": 40.0, "llm_s_per_task": 2.0},
    ...         {"name": "a [bfloat16]", "output_tokens_per_llm_s": 90.0, "llm_s_per_task": 1.0}]
    >>> speed(rows, ["float32", "bfloat16"])[0]["tokens_per_llm_s_ratio"]
    2.25
    """
    by_name = {r["name"]: r for r in rows}
    out = []
    for row in rows:
        name, dtype = untagged(row["name"])
        ref = by_name.get(tagged(name, dtypes[0])) if dtypes else None
        if ref is None or dtype not in dtypes[1:]:
            continue
        out.append({
            "row": name, "dtype": dtype, "vs": dtypes[0],
            "tokens_per_llm_s": row.get("output_tokens_per_llm_s"),
            "tokens_per_llm_s_first": ref.get("output_tokens_per_llm_s"),
            "tokens_per_llm_s_ratio": ratio(row.get("output_tokens_per_llm_s"),
                                            ref.get("output_tokens_per_llm_s")),
            # > 1: the later dtype needs fewer LLM-seconds per task
            "llm_s_per_task_speedup": ratio(ref.get("llm_s_per_task"),
                                            row.get("llm_s_per_task"))})
    return out


def summary(rows: Sequence[Mapping[str, Any]], dtypes: Sequence[str]) -> dict[str, Any]:
    """The report's ``dtypes`` section: what ran, each verdict vs the first dtype, the speed.

    >>> summary([], ["float32", "bfloat16"])["baseline_dtype"]
    'float32'
    """
    verdicts = {r["name"]: {k: r["vs_first_dtype"][k] for k in
                            ("baseline", "pass_rate_diff", "pass_rate_diff_ci95", "score_diff",
                             "score_diff_ci95", "mcnemar_p_holm", "tasks_needed", "verdict")}
                for r in rows if "vs_first_dtype" in r}
    return {"dtypes": list(dtypes), "baseline_dtype": dtypes[0] if dtypes else None,
            "engine_dtypes": {r["name"]: r.get("engine_dtype") for r in rows
                              if r.get("engine_dtype")},
            "vs_first_dtype": verdicts, "speed": speed(rows, dtypes)}


def headlines(section: Mapping[str, Any]) -> list[str]:
    """Console lines: each dtype verdict and speed ratio.

    >>> section = {"vs_first_dtype": {"a [bfloat16]": {"pass_rate_diff": -0.01,
    ...            "verdict": "no detectable difference (Holm p=1)"}},
    ...            "speed": [{"row": "a", "dtype": "bfloat16", "vs": "float32",
    ...                       "tokens_per_llm_s_ratio": 2.1, "llm_s_per_task_speedup": 1.9}]}
    >>> headlines(section)[1]
    'a: bfloat16 decodes 2.1x the tokens per LLM-second of float32; LLM-s per task / 1.9'
    """
    lines = [f"{name} vs {untagged(name)[0]} in the first dtype: "
             f"{100 * v['pass_rate_diff']:+.1f} pts, {v['verdict']}"
             for name, v in section["vs_first_dtype"].items()]
    lines += [f"{s['row']}: {s['dtype']} decodes {s['tokens_per_llm_s_ratio']}x the tokens per "
              f"LLM-second of {s['vs']}; LLM-s per task / {s['llm_s_per_task_speedup']}"
              for s in section["speed"]]
    return lines
