"""Benchmark the PII gate: recall per planted kind, precision per entity, false positives, speed.

Three corpora, shared with the tests. Two are hand-written (``tests/pii_corpus.py``):

* **planted**: runs (task, drafts, final output) carrying credentials of every
  provider, street addresses of several countries, names of many origins
  (whole, partial, lowercase), plain and spelled e-mails and phones, cards,
  IBANs, IPs and an SSN. They go through ``redact_runs`` (the gate plus
  record-level name propagation), as an export does.
* **benign**: instructions, greetings, code, dates and versions, ids, prices,
  product names, places and talk about passwords: nothing to redact.

One is generated (``tests/pii_corpus_world.py``): templates x values, in
several languages, 12 values per kind by default: national IDs of 11
countries made valid by their checksums, passport numbers of 12 formats,
names in 14 non-Latin locales (Faker's) and outside any list (transliterated
or composed), full names in a task's running text, Faker's addresses of 15
locales, e-mails and phones written with spaces or words; and a benign set
(places in many scripts, hashes, UUIDs, order numbers, versions, maths,
sentences in 14 languages, talk about IDs). ``world`` uses the seed the rules
were written against; ``world_held_out`` another seed, never inspected (same
generators and templates, so it is an optimistic estimate for unseen text).
Last, **prose**: real English sentences from installed docstrings
(``bench/corpus.py``), where every placeholder is counted (a few are real
author names).

Reported per mode (``regex``, ``spacy``):

* **recall** per planted kind: the share of planted values with no trace left
  in any text of their run (for a name: none of its parts, in any case);
* **precision** per entity: each placeholder written is aligned with the
  original text; it is a true positive when it covers part of a planted
  value, a false positive otherwise (benign texts have no planted value);
* **false positives on the benign sets**, per entity and per category
  (``LOCATION`` removes every place name by design: its benign hits are
  counted, and listed apart), and the share of benign word tokens (a Han,
  kana, Hangul or Thai character counts as one) left untouched;
* **speed**: load time and records/s on ~1 KB synthetic support tickets.

    python bench/pii.py             # writes bench/results/pii.json (a few minutes on 2 cores)
    python bench/pii.py --records 40 --per-kind 6 --out /tmp/pii.json
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

import pii_corpus_world as world  # noqa: E402
from corpus import sentences  # noqa: E402
from distill_helpers import make_run  # noqa: E402
from pii_corpus import BENIGN, HELD_OUT, RECORDS, leaks, name_words  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "pii.json"
HELD_OUT_SEED = 2029
WARM_UP = ("Dear Ana, write to Дмитрий Соколов and 王伟 about NIR 1 84 12 76 451 089 46 "
           "at 12 rue de la Paix, 75002 Paris; explain to Priyanka Ramaswamy why.")
PLACEHOLDER = re.compile(r"<([A-Z_]+)>")
KIND_ENTITY = {"secret": "SECRET", "name": "PERSON", "address": "STREET_ADDRESS",
               "email": "EMAIL_ADDRESS", "obfuscated_email": "EMAIL_ADDRESS",
               "phone": "PHONE_NUMBER", "spelled_phone": "PHONE_NUMBER", "card": "CREDIT_CARD",
               "iban": "IBAN_CODE", "ip": "IP_ADDRESS", "ssn": "US_SSN",
               **{k: k.removeprefix("id_").upper() for k in world.ID_KINDS},
               "id_de_tax": "DE_TAX_ID", "id_de_card": "DE_ID_CARD", "id_it_cf": "IT_FISCAL_CODE",
               "id_es_dni": "ES_NIF", "id_jp_my_number": "JP_MY_NUMBER", "passport": "PASSPORT",
               "name_script": "PERSON", "name_script_unlisted": "PERSON",
               "name_in_task": "PERSON", "address_world": "STREET_ADDRESS",
               "spaced_email": "EMAIL_ADDRESS", "spaced_phone": "PHONE_NUMBER"}
_UNSPACED_CHAR = re.compile(r"[\u0e00-\u0e7f\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]")
_TOKEN = re.compile(r"[\u0e00-\u0e7f\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af]|[^\W_]+")
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


def planted_spans(text: str, planted: list[tuple[str, str]],
                  name_kinds: tuple[str, ...] = ("name",),
                  words_of: Any = name_words) -> list[tuple[int, int]]:
    spans = []
    for kind, value in planted:
        is_name = kind in name_kinds
        for word in words_of(value) if is_name else [value]:
            if not is_name:
                pattern = re.escape(word)
            elif _UNSPACED_CHAR.search(word):
                pattern = re.escape(word)
            else:
                pattern = rf"(?<!\w){re.escape(word)}(?!\w)"
            spans += [m.span() for m in re.finditer(pattern, text,
                                                    re.IGNORECASE if is_name else 0)]
    return spans


def benign_quality(gate: Any, groups: dict[str, list[str]]) -> dict[str, Any]:
    """What the gate did to texts with no personal data: texts changed, tokens redacted, by
    entity and by category (``LOCATION`` removes place names by design; counted apart)."""
    texts = [(c, t) for c, group in groups.items() for t in group]
    fp: Counter[str] = Counter()
    by_category: dict[str, dict[str, int]] = {}
    changed = tokens = redacted_tokens = redacted_without_location = 0
    for (category, text), red in zip(texts, gate.anonymize_many([t for _, t in texts]),
                                     strict=True):
        out = red.text or ""
        entities = PLACEHOLDER.findall(out)
        changed += bool(entities)
        fp.update(entities)
        for e in entities:
            by_category.setdefault(category, {}).setdefault(e, 0)
            by_category[category][e] += 1
        spans = originals(text, out) if red.text is not None else [("DROPPED", 0, len(text))]
        for token in _TOKEN.finditer(text):
            tokens += 1
            hit = [e for e, s, t in spans if s < token.end() and token.start() < t]
            redacted_tokens += bool(hit)
            redacted_without_location += bool([e for e in hit if e != "LOCATION"])
    return {"texts": len(texts), "texts_changed": changed, "tokens": tokens,
            "tokens_redacted": redacted_tokens,
            "tokens_redacted_without_location": redacted_without_location,
            "token_precision": round(1 - redacted_without_location / max(tokens, 1), 4),
            "false_positives": dict(sorted(fp.items())),
            "false_positives_without_location": sum(n for e, n in fp.items() if e != "LOCATION"),
            "by_category": by_category}


def quality(mode: str, records: list[dict[str, Any]], *,
            benign: dict[str, list[str]] | None = None, leak: Any = leaks,
            name_kinds: tuple[str, ...] = ("name",), words_of: Any = name_words,
            gate: Any = None) -> dict[str, Any]:
    from agentic_loop.distill import PiiGate
    from agentic_loop.distill.data.redact import redact_runs, run_texts

    start = time.perf_counter()
    gate = gate or PiiGate(mode)  # type: ignore[arg-type]
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
            if out is not None and not leak(kind, value, joined):
                found[kind] += 1
            else:
                leaked.append(kind)
        for original, redacted in pairs:
            spans = planted_spans(original, record["planted"], name_kinds, words_of)
            for entity, s, e in originals(original, redacted):
                hit = any(s < pe and ps < e for ps, pe in spans)
                (tp if hit else fp)[entity] += 1
    benign_stats = benign_quality(gate, benign) if benign else None
    if benign_stats:
        fp.update(benign_stats["false_positives"])
    entities = sorted(set(tp) | set(fp))
    stats: dict[str, Any] = {
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
        "redactions_by_recognizer": dict(sorted(result.report.recognizers.items())),
    }
    if benign_stats:
        stats["benign"] = benign_stats
    return stats


def prose_quality(gate: Any, texts: list[str]) -> dict[str, Any]:
    """Placeholders written into real English prose, by entity and by recognizer."""
    entities: Counter[str] = Counter()
    recognizers: Counter[str] = Counter()
    changed = 0
    for text, red in zip(texts, gate.anonymize_many(texts), strict=True):
        if red.text != text:
            changed += 1
            entities.update(red.entities)
            recognizers.update(red.recognizers)
    without = sum(n for e, n in entities.items() if e != "LOCATION")
    return {"texts": len(texts), "texts_changed": changed,
            "texts_changed_share": round(changed / max(len(texts), 1), 4),
            "placeholders": dict(sorted(entities.items())),
            "placeholders_without_location": without,
            "by_recognizer": dict(sorted(recognizers.items()))}


def make_ticket(rng: random.Random) -> str:
    first = rng.choice(["Femke", "Chidi", "Ananya", "Ji-ho", "Mateus", "Aoife", "Kwame", "Lena"])
    last = rng.choice(["Visser", "Okafor", "Iyer", "Kang", "Souza", "Byrne", "Mensah", "Novak"])
    return (f"Ticket from {first} {last} ({first.lower()}.{last.lower()}@example.com), phone "
            f"010-{rng.randint(1000, 9999)}-{rng.randint(1000, 9999)}. " + FILLER
            + f"They paid with card 4111 1111 1111 1111; address {rng.randint(2, 999)} Elm "
            f"Street, Dayton, OH 4540{rng.randint(1, 9)}. IP 10.{rng.randint(0, 255)}.3.4. "
            + FILLER[: rng.randint(150, 300)])


def speed(mode: str, texts: list[str], gate: Any = None) -> dict[str, Any]:
    from agentic_loop.distill import PiiGate

    gate = gate or PiiGate(mode)  # type: ignore[arg-type]
    gate.anonymize_many(texts[:4])  # warm up
    start = time.perf_counter()
    gate.anonymize_many(texts)
    return {"batch_records_per_s": round(len(texts) / (time.perf_counter() - start), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=80,
                        help="synthetic ~1 KB tickets for the speed test (default 80)")
    parser.add_argument("--per-kind", type=int, default=12,
                        help="generated values per kind in the multilingual corpus (default 12)")
    parser.add_argument("--prose", type=int, default=2000,
                        help="docstring sentences for the prose false positives (default 2000)")
    parser.add_argument("--out", type=Path, default=RESULTS,
                        help=f"where to write the results (default {RESULTS.relative_to(ROOT)})")
    args = parser.parse_args()
    rng = random.Random(7)
    tickets = [make_ticket(rng) for _ in range(args.records)]
    world_records = world.planted_records(args.per_kind)
    world_benign = world.benign_texts()
    held_records = world.planted_records(args.per_kind, seed=HELD_OUT_SEED)
    held_benign = world.benign_texts(seed=HELD_OUT_SEED)
    prose = sentences(args.prose)
    modes: dict[str, dict[str, Any]] = {}
    for mode in ("regex", "spacy"):
        from agentic_loop.distill import PiiGate

        start = time.perf_counter()
        gate = PiiGate(mode)
        load_s = round(time.perf_counter() - start, 2)
        start = time.perf_counter()
        gate.anonymize(WARM_UP)  # name lists, places and checksum tables load on first use
        warm_up_s = round(time.perf_counter() - start, 2)
        modes[mode] = {**quality(mode, RECORDS, benign=BENIGN, gate=gate), "load_s": load_s,
                       "first_text_s": warm_up_s,
                       **speed(mode, tickets, gate),
                       "held_out": quality(mode, HELD_OUT, gate=gate),
                       "world": quality(mode, world_records, benign=world_benign,
                                        leak=world.leaks, name_kinds=world.NAME_KINDS,
                                        words_of=world.name_words, gate=gate),
                       "world_held_out": quality(mode, held_records, benign=held_benign,
                                                 leak=world.leaks, name_kinds=world.NAME_KINDS,
                                                 words_of=world.name_words, gate=gate),
                       "prose": prose_quality(gate, prose)}
    results = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": platform.platform(),
        "python": sys.version.split()[0],
        "planted_runs": len(RECORDS),
        "planted_values": sum(len(r["planted"]) for r in RECORDS),
        "held_out_runs": len(HELD_OUT),
        "held_out_values": sum(len(r["planted"]) for r in HELD_OUT),
        "benign_texts": sum(map(len, BENIGN.values())),
        "world_runs": len(world_records),
        "world_kinds": len(world.KINDS),
        "world_benign_texts": sum(map(len, world_benign.values())),
        "world_seed": world.SEED, "world_held_out_seed": HELD_OUT_SEED,
        "prose_sentences": len(prose),
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
            "first_text_s is the first text's extra time (name lists, places and checksum "
            "tables load lazily); the 2-core machine was shared with other jobs.",
            "world: tests/pii_corpus_world.py, generated (templates x values, seed 29); the "
            "rules of issue 29 (national IDs, passports, non-Latin names, names after 'to', "
            "world addresses, spaced e-mails and phones) were written while looking at its "
            "leaks. world_held_out: seed 2029, same generators and templates, never inspected "
            "before it was measured: optimistic for text written by others.",
            "before issue 29 (commit d264480), on these same corpora: world recall regex 13.3%, "
            "spacy 18.2%; world_held_out regex 19.3%, spacy 23.5%; world benign texts changed "
            "regex 4 of 58 (5 PHONE_NUMBER on order/tracking numbers), spacy 22 of 58 "
            "(LOCATION 16, PERSON 10, PHONE_NUMBER 5); prose (2,000 docstring sentences) "
            "regex 0 changed, spacy 72 (LOCATION 50, PERSON 31); the hand-written corpora "
            "were at 100% recall then as now.",
            "prose: placeholders in real English docstring sentences; some PERSON hits are "
            "real author names (\"written by ...\"), so not every one is a false positive.",
        ],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
