"""Runs through the PII gate: every text that can reach a dataset, or the whole run is dropped.

A run's task, its drafts (best-of-n alternatives too) and its final output
become prompts and responses of training rows, so each passes
:class:`~agentic_loop.distill.data.pii.gate.PiiGate`.
Texts repeat a lot (the final output is one of the drafts, a task is run
many times), so each distinct text is anonymized once.

Then, per run, **record-level propagation**: a name found in any of the
run's texts (the task names "Femke Janssen", a draft says "Dear Femke") is
removed, whole and part by part, from all of them; so are the name parts of
an e-mail address found in the run ("femke.janssen@..." takes "Femke" and
"Janssen" with it). A part that is also an English word ("Grace") is
removed only as written, capitalized. Any other value found in the run (an
ID number after "Aadhaar:", a phone, an address) is removed wherever it is
repeated, with its digits spaced or not, although no context word stands
beside the repetition ("I updated your file with 2345 6789 0124").

A run with any text the gate could not anonymize safely, or in which the
secret scanner still finds a credential after redaction, is dropped whole:
half a run would make wrong pairs. Fields that never reach a dataset
(critiques, per-round feedback, guard reasons, metadata) are blanked in the
returned copies, so no later step can leak them by accident.

Example:
    >>> from agentic_loop.distill.data.pii.gate import PiiGate
    >>> from agentic_loop.trajectories import Round, Trajectory
    >>> run = Trajectory(architecture="reflection", model_id="m", task="Greet me",
    ...                  rounds=[Round(iteration=0, draft="Hello there", score=9.0, critique="ok")],
    ...                  final_output="Hello there", final_score=9.0)
    >>> result = redact_runs([run], PiiGate("off", max_chars=10))
    >>> len(result.kept), result.dropped[0].split(": ", 1)[1]
    (0, 'rounds[0].draft: 11 characters, over max_chars=10')
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from agentic_loop.distill.data.pii.gate import PiiGate, PiiReport, Redaction
from agentic_loop.distill.data.pii.secrets import SecretScanner
from agentic_loop.distill.data.pii.spans import replace_values, replace_words
from agentic_loop.distill.data.samples import (
    prompt_texts,
    redacted_episodes,
    redacted_prompts,
    run_episode_texts,
)
from agentic_loop.trajectories import Trajectory

__all__ = ["PROPAGATION", "RedactedRuns", "email_name_parts", "redact_runs", "run_texts"]

#: The recognizer name under which record-level propagation counts its replacements.
PROPAGATION = "record_propagation"
#: Mailbox names that name no person ("info@", "support@").
ROLE_MAILBOXES = frozenset("""
info support sales admin contact hello hi team office mail noreply no reply billing jobs careers
help service customer customers orders order accounts account hr press marketing news newsletter
webmaster postmaster test user example me inbox enquiries inquiries booking bookings
reservations returns shop store firstname lastname name
""".split())
_LOCAL_SPLIT = re.compile(r"(?i)\s+dot\s+|\[dot\]|\(dot\)|[._+\-\d\s]+")
_EMAIL_AT = re.compile(r"(?i)@|\s+at\s+|\s*[\[(]at[\])]\s*")


@dataclass(frozen=True)
class RedactedRuns:
    """The runs that passed the gate (anonymized copies), why others were dropped, the report."""

    kept: list[Trajectory]
    dropped: list[str]
    report: PiiReport


def run_texts(run: Trajectory) -> list[tuple[str, str]]:
    """Every ``(field, text)`` of ``run`` that can reach a dataset: task, drafts, best-of-n
    alternatives, the parts of its fresh-draft prompts and their few-shot episodes
    (:func:`~agentic_loop.distill.data.samples.prompt_texts`), its agents' episodes (model
    texts, tool arguments, results and errors:
    :func:`~agentic_loop.distill.data.samples.run_episode_texts`), final."""
    drafts = [(f"rounds[{i}].draft", r.draft) for i, r in enumerate(run.rounds)]
    others = [(f"rounds[{i}].alternatives[{j}].draft", c.draft)
              for i, r in enumerate(run.rounds) for j, c in enumerate(r.alternatives)]
    texts = [("task", run.task), *drafts, *others, *prompt_texts(run), *run_episode_texts(run)]
    if run.final_output is not None:
        texts.append(("final_output", run.final_output))
    return texts


def email_name_parts(address: str) -> list[str]:
    """The words of an e-mail's mailbox name that can be a person's name.

    >>> email_name_parts("femke.janssen82@example.nl"), email_name_parts("info@shop.com")
    (['femke', 'janssen'], [])
    >>> email_name_parts("firstname dot lastname at gmail dot com")
    []
    """
    local = _EMAIL_AT.split(address, maxsplit=1)[0]
    return [p.lower() for p in _LOCAL_SPLIT.split(local)
            if len(p) >= 3 and p.isalpha() and p.lower() not in ROLE_MAILBOXES]


def _record_names(redactions: Iterable[Redaction]) -> tuple[list[str], list[str]]:
    """Words to remove everywhere in one record: ``(any case, exact case)``."""
    from agentic_loop.distill.data.pii.names import is_english_word, name_parts

    anycase: set[str] = set()
    exact: set[str] = set()
    for redaction in redactions:
        for entity, value in redaction.names:
            if entity == "PERSON":
                parts, cased = name_parts(value)
                anycase.update(parts)
                exact.update(cased)
            elif entity == "EMAIL_ADDRESS":
                for part in email_name_parts(value):
                    if is_english_word(part):
                        exact.add(part.capitalize())
                    else:
                        anycase.add(part)
    return sorted(anycase), sorted(exact)


#: Entities whose values are not propagated: places and dates repeat innocently ("Paris").
_LOCAL_ONLY = frozenset({"PERSON", "LOCATION", "DATE_TIME", "URL"})


def _record_values(redactions: Iterable[Redaction]) -> dict[str, str]:
    """Value -> entity of the other findings of one record, six characters or longer."""
    return {value.strip(): entity for redaction in redactions
            for entity, value in redaction.names
            if entity not in _LOCAL_ONLY and len(value.strip()) >= 6}


def redact_runs(
    runs: Sequence[Trajectory], gate: PiiGate, *, progress: Callable[[int], None] | None = None
) -> RedactedRuns:
    """Anonymize every dataset-bound text of ``runs`` (each distinct text once), then propagate.

    ``progress`` receives the number of distinct texts finished, batch by
    batch. Drop notes name the run id, the field and the reason, never the text.
    """
    distinct = list(dict.fromkeys(text for run in runs for _, text in run_texts(run)))
    done = dict(zip(distinct, gate.anonymize_many(distinct, progress=progress), strict=True))
    report = gate.report(done.values())
    scanner = SecretScanner()
    kept, dropped = [], []
    for run in runs:
        fields = run_texts(run)
        failed = next(((name, done[text]) for name, text in fields if not done[text].ok), None)
        if failed is not None:
            name, redaction = failed
            dropped.append(f"run {run.id}: {name}: {redaction.error or redaction.dropped}")
            continue
        anycase, exact = _record_names(done[text] for _, text in fields)
        values = _record_values(done[text] for _, text in fields)
        texts = []
        for _, text in fields:
            clean, n = replace_words(done[text].text or "", anycase, exact_case=exact)
            report.redactions["PERSON"] += n
            clean, by_entity = replace_values(clean, values)
            report.redactions.update(by_entity)
            report.recognizers[PROPAGATION] += n + sum(by_entity.values())
            texts.append(clean)
        leak = next((name for (name, _), t in zip(fields, texts, strict=True)
                     if scanner.find(t)), None)
        if leak is not None:
            report.dropped["secret_after_redaction"] += 1
            dropped.append(f"run {run.id}: {leak}: a credential was still found after redaction")
            continue
        kept.append(_rebuild(run, texts))
    report.redactions = +report.redactions
    report.recognizers = +report.recognizers
    return RedactedRuns(kept, dropped, report)


def _rebuild(run: Trajectory, texts: list[str]) -> Trajectory:
    """``run`` with its :func:`run_texts` replaced by ``texts`` (same order)."""
    remaining = iter(texts[1:len(texts) - (run.final_output is not None)])
    drafts = [next(remaining) for _ in run.rounds]
    others = [[c.model_copy(update={"draft": next(remaining),
                                    "guards": dict.fromkeys(c.guards, "")})
               for c in r.alternatives] for r in run.rounds]
    prompts = redacted_prompts(run.rounds, remaining)
    with_episodes = redacted_episodes(run.rounds, remaining)
    rounds = [
        r.model_copy(update={"draft": d, "critique": None, "feedback": None, "prompt": p,
                             "episode": e.episode, "alternatives": [c.model_copy(update={
                                 "episode": ce.episode}) for c, ce in zip(a, e.alternatives,
                                                                          strict=True)],
                             # the flags are counted by the export; the reasons quote the draft
                             "guards": dict.fromkeys(r.guards, "")})
        for r, d, a, p, e in zip(run.rounds, drafts, others, prompts, with_episodes,
                                 strict=True)
    ]
    task = texts[0]
    final = texts[-1] if run.final_output is not None else None
    return run.model_copy(update={"task": task, "rounds": rounds, "final_output": final,
                                  "metadata": {}})
