"""Benchmark the PII gate: recall per planted kind, precision per entity, false positives, speed.

Two hand-written corpora from ``tests/pii_corpus.py`` (shared with the tests):

* **planted**: runs (task, drafts, final output) carrying credentials of every
  provider, street addresses of several countries, names of many origins
  (whole, partial, lowercase), plain and spelled e-mails and phones, cards,
  IBANs, IPs and an SSN. They go through ``redact_runs`` (the gate plus
  record-level name propagation), as an export does.
* **benign**: instructions, greetings, code, dates and versions, ids, prices,
  product names, places and talk about passwords: nothing to redact.

Reported per mode (``regex``, ``spacy``):

* **recall** per planted kind: the share of planted values with no trace left
  in any text of their run (for a name: none of its parts, in any case);
* **precision** per entity: each placeholder written is aligned with the
  original text; it is a true positive when it covers part of a planted
  value, a false positive otherwise (benign texts have no planted value);
* **false positives on the benign set**, per entity and per category
  (``LOCATION`` removes every place name by design: its benign hits are
  counted, and listed apart);
* **speed**: load time and records/s on ~1 KB synthetic support tickets.

    python bench/pii.py             # writes bench/results/pii.json (a few minutes on 2 cores)
    python bench/pii.py --records 40
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import re
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the corpora live beside the tests that use them

from distill_helpers import make_run  # noqa: E402
from pii_corpus import BENIGN, HELD_OUT, RECORDS, leaks, name_words  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "pii.json"
PLACEHOLDER = re.compile(r"<([A-Z_]+)>")
KIND_ENTITY = {"secret": "SECRET", "name": "PERSON", "address": "STREET_ADDRESS",
               "email": "EMAIL_ADDRESS", "obfuscated_email": "EMAIL_ADDRESS",
               "phone": "PHONE_NUMBER", "spelled_phone": "PHONE_NUMBER", "card": "CREDIT_CARD",
               "iban": "IBAN_CODE", "ip": "IP_ADDRESS", "ssn": "US_SSN"}
FILLER = ("The customer explained that the order arrived late and that the packaging was damaged "
          "on one side. They asked whether a partial refund was possible and whether the "
          "replacement could ship this week. Please draft a short, friendly reply that "
          "apologizes, confirms the refund amount and gives a date. ")


def originals(original: str, redacted: str) -> list[tuple[str, int, int]]:
    """``(entity, start, end)`` in ``original`` of each placeholder written into ``redacted``."""
    parts = PLACEHOLDER.split(redacted)
    literals, entities = parts[0::2], parts[1::2]
    if not entities:
        return []
    pattern = re.escape(literals[0]) + "".join(
        "(.+?)" + re.escape(lit) for lit in literals[1:])
    match = re.fullmatch(pattern, original, re.DOTALL)
    if match is None:  # placeholders side by side: attribute the whole stretch to the first
        return [(entities[0], 0, len(original))]
    return [(e, match.start(i + 1), match.end(i + 1)) for i, e in enumerate(entities)]


def planted_spans(text: str, planted: list[tuple[str, str]]) -> list[tuple[int, int]]:
    spans = []
    for kind, value in planted:
        words = name_words(value) if kind == "name" else [value]
        for word in words:
            flags = re.IGNORECASE if kind == "name" else 0
            spans += [m.span() for m in re.finditer(
                rf"(?<!\w){re.escape(word)}(?!\w)" if kind == "name" else re.escape(word),
                text, flags)]
    return spans


def quality(mode: str, records: list[dict[str, Any]], *, benign: bool = True
            ) -> dict[str, Any]:
    from agentic_loop.distill import PiiGate
    from agentic_loop.distill.data.redact import redact_runs, run_texts

    start = time.perf_counter()
    gate = PiiGate(mode)  # type: ignore[arg-type]
    load_s = time.perf_counter() - start
    runs = [make_run(r["task"], [(d, 5.0) for d in r["drafts"]], final=r["final"],
                     final_score=9.0) for r in records]
    start = time.perf_counter()
    result = redact_runs(runs, gate)
    redact_s = time.perf_counter() - start
    kept = {run.id: run for run in result.kept}
    found: Counter[str] = Counter()
    total: Counter[str] = Counter()
    tp: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    leaked: list[str] = []
    for record, run in zip(records, runs, strict=True):
        out = kept.get(run.id)
        pairs = list(zip([t for _, t in run_texts(run)], [t for _, t in run_texts(out)],
                         strict=True)) if out else []
        joined = "\n".join(t for _, t in pairs)
        for kind, value in record["planted"]:
            total[kind] += 1
            if out is not None and not leaks(kind, value, joined):
                found[kind] += 1
            else:
                leaked.append(kind)
        for original, redacted in pairs:
            spans = planted_spans(original, record["planted"])
            for entity, s, e in originals(original, redacted):
                hit = any(s < pe and ps < e for ps, pe in spans)
                (tp if hit else fp)[entity] += 1
    benign_fp: Counter[str] = Counter()
    by_category: dict[str, dict[str, int]] = {}
    texts = [(c, t) for c, group in BENIGN.items() for t in group] if benign else []
    changed = 0
    for (category, text), red in zip(texts, gate.anonymize_many([t for _, t in texts]),
                                     strict=True):
        entities = PLACEHOLDER.findall(red.text or "")
        changed += bool(entities)
        benign_fp.update(entities)
        fp.update(entities)
        for e in entities:
            by_category.setdefault(category, {}).setdefault(e, 0)
            by_category[category][e] += 1
    entities = sorted(set(tp) | set(fp))
    return {
        "load_s": round(load_s, 2),
        "planted_runs_per_s": round(len(runs) / redact_s, 1),
        "runs": len(runs), "runs_dropped": len(result.dropped),
        "recall_by_kind": {k: {"found": found[k], "planted": total[k],
                               "recall": round(found[k] / total[k], 3),
                               "entity": KIND_ENTITY[k]} for k in sorted(total)},
        "recall_overall": round(sum(found.values()) / sum(total.values()), 3),
        "precision_by_entity": {e: {"tp": tp[e], "fp": fp[e],
                                    "precision": round(tp[e] / (tp[e] + fp[e]), 3)}
                                for e in entities},
        "leaked_kinds": dict(Counter(leaked)),
        "benign": {"texts": len(texts), "texts_changed": changed,
                   "false_positives": dict(sorted(benign_fp.items())),
                   "false_positives_without_location": sum(
                       n for e, n in benign_fp.items() if e != "LOCATION"),
                   "by_category": by_category},
        "redactions_by_recognizer": dict(sorted(result.report.recognizers.items())),
    }


def make_ticket(rng: random.Random) -> str:
    first = rng.choice(["Femke", "Chidi", "Ananya", "Ji-ho", "Mateus", "Aoife", "Kwame", "Lena"])
    last = rng.choice(["Visser", "Okafor", "Iyer", "Kang", "Souza", "Byrne", "Mensah", "Novak"])
    return (f"Ticket from {first} {last} ({first.lower()}.{last.lower()}@example.com), phone "
            f"010-{rng.randint(1000, 9999)}-{rng.randint(1000, 9999)}. " + FILLER
            + f"They paid with card 4111 1111 1111 1111; address {rng.randint(2, 999)} Elm "
            f"Street, Dayton, OH 4540{rng.randint(1, 9)}. IP 10.{rng.randint(0, 255)}.3.4. "
            + FILLER[: rng.randint(150, 300)])


def speed(mode: str, texts: list[str]) -> dict[str, Any]:
    from agentic_loop.distill import PiiGate

    gate = PiiGate(mode)  # type: ignore[arg-type]
    gate.anonymize_many(texts[:4])  # warm up
    start = time.perf_counter()
    gate.anonymize_many(texts)
    return {"batch_records_per_s": round(len(texts) / (time.perf_counter() - start), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=80,
                        help="synthetic ~1 KB tickets for the speed test (default 80)")
    args = parser.parse_args()
    rng = random.Random(7)
    tickets = [make_ticket(rng) for _ in range(args.records)]
    modes = {mode: {**quality(mode, RECORDS), **speed(mode, tickets),
                    "held_out": quality(mode, HELD_OUT, benign=False)}
             for mode in ("regex", "spacy")}
    results = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": platform.platform(),
        "python": sys.version.split()[0],
        "planted_runs": len(RECORDS),
        "planted_values": sum(len(r["planted"]) for r in RECORDS),
        "held_out_runs": len(HELD_OUT),
        "held_out_values": sum(len(r["planted"]) for r in HELD_OUT),
        "benign_texts": sum(map(len, BENIGN.values())),
        "speed_records": len(tickets),
        "mean_ticket_chars": round(sum(map(len, tickets)) / len(tickets)),
        "modes": modes,
        "notes": [
            "corpora: tests/pii_corpus.py, hand-written; names are checked part by part, "
            "case-insensitively, in every text of their run.",
            "RECORDS was used while writing the rules (two rules were added after it showed "
            "leaks: '_token' keywords and '+CC' phones that phonenumbers deems unallocated); "
            "HELD_OUT was written afterwards. Its first run found 24 of 26 values in both "
            "modes (missed: a password in 'redis://:pw@host' with an empty user, and 'Rahul' "
            "before the possessive \"Deshpande's\"); both rules were then fixed, so the "
            "numbers below for HELD_OUT are after one round of fixes: 92% is the estimate "
            "for unseen text.",
            "LOCATION (spacy mode only) removes every place name by design; its hits on the "
            "benign 'places' texts are counted as false positives.",
            "load_s of the first gate includes importing Presidio, spaCy and the name lists; "
            "the 2-core machine was shared with other jobs.",
        ],
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
