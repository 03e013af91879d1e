"""Judge quality on a labelled pair set: does the judge prefer the answer people know is better?

A judge's score spread says nothing about whether it is right. Each row of
``bench/data/judge_pairs.jsonl`` (written for this project, see its README) holds
a task and two answers, the better one known (a forbidden word, an arithmetic
slip, a bug, a deflecting reply, a broken business rule, a guessed tool result).
Per judge: **pairwise accuracy** over the pairs it decided (better scored above
worse; a tie counts half) with a Wilson 95% interval on those pairs
(:func:`agentic_loop.distill.eval.stats.wilson`; with half ties, spanning the
credit rounded down and up). A judgement that **failed** (the model gave no valid
answer: no score) is not a tie: it is counted in ``failed`` and left out of the
accuracy, and ``coverage`` (decided / pairs) shows how much the accuracy rests on,
so a judge failing half the time reads as broken, not as a coin. Also: the accuracy
on the pairs the checks leave open (no check, or a tie: the judge's own worth), and
for judges that see both answers at once, **position consistency** (same preference
with the order swapped, over the pairs decided in both orders) and how often the
answer shown first won (0.5: no bias). A pointwise judge has no order to swap.

Judges: the same-model :class:`~agentic_loop.judges.Critic` (the pair's rubric:
:func:`~agentic_loop.judges.rubric_for_task` plus the row's judged features;
composite score, and the model's own 1-10 grade from the same calls), the same
with a separate judge model (``--judge``), :class:`~agentic_loop.judges.GroupRanker`
(both answers, both orders), majority vote of sampled answers on short-answer rows
(coverage: the vote matched one of the two), and the checks alone (the task's stated
constraints plus the row's answer key or tests) as a reference.

Example:
    >>> preference(7.0, 3.0), preference(5.0, 5.0), preference(None, 2.0)
    (1.0, 0.5, None)
    >>> row = summarize("demo", "m", [1.0, 1.0, 0.5, 0.0], kinds=["a", "a", "b", "b"])
    >>> row["accuracy"], row["ties"], row["by_kind"]
    (0.625, 1, {'a': 1.0, 'b': 0.25})
    >>> broken = summarize("demo", "m", [1.0, None, 1.0, None], kinds=["a"] * 4, failed=2)
    >>> broken["accuracy"], broken["failed"], broken["coverage"]
    (1.0, 2, 0.5)
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from pydantic import BaseModel, ConfigDict, Field

from agentic_loop.distill.eval.stats import wilson
from agentic_loop.episodes import Episode, episode_from_messages
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Critic, Feature, Rubric, constraint_feature, rubric_for_task

DATA = Path(__file__).parent / "data" / "judge_pairs.jsonl"
KINDS = ("constrained_writing", "math", "code", "support", "tone", "business_rule", "tool_use")
Tick = Callable[[int], None]


class EpisodeRow(BaseModel):
    """An agent's tool calls (tool, args, result) and its final answer, as a row stores them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    steps: list[dict[str, Any]] = Field(default_factory=list)
    final: str


class Pair(BaseModel):
    """One labelled row: a task, a known better and a plausibly close worse answer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    kind: str
    task: str
    better: str
    worse: str
    why: str
    features: list[dict[str, str]] = Field(default_factory=list)
    checks: dict[str, Any] = Field(default_factory=dict)
    answer: str | None = None
    episodes: dict[str, EpisodeRow] | None = None

    def shown(self, which: str) -> str:
        """``better`` or ``worse`` as a judge that reads episodes itself gets it: the final
        answer of a tool row (its transcript is the episode), else the text."""
        if self.episodes is None:
            return str(getattr(self, which))
        return self.episodes[which].final

    def episode(self, which: str) -> Episode | None:
        """The :class:`Episode` behind ``better`` or ``worse`` (tool rows), else None."""
        if self.episodes is None:
            return None
        return episode_of(self.task, self.episodes[which])


def transcript(episode: EpisodeRow | Mapping[str, Any]) -> str:
    """The text a judge reads for a tool episode: each call with its result, then the answer.

    >>> print(transcript({"steps": [{"tool": "calc", "args": {"x": "2+2"}, "result": "4"}],
    ...                   "final": "It is 4."}))
    CALL calc {"x": "2+2"}
    RESULT 4
    ANSWER It is 4.
    """
    ep = episode if isinstance(episode, EpisodeRow) else EpisodeRow.model_validate(episode)
    lines = []
    for step in ep.steps:
        lines += [f"CALL {step['tool']} {json.dumps(step['args'])}", f"RESULT {step['result']}"]
    return "\n".join([*lines, f"ANSWER {ep.final}"])


def episode_of(task: str, ep: EpisodeRow) -> Episode:
    """The row's episode as the package records one (so episode checks and guards read it)."""
    messages: list[Any] = [HumanMessage(task)]
    for n, step in enumerate(ep.steps):
        call_id = f"call{n}"
        messages += [AIMessage("", tool_calls=[{"name": step["tool"], "args": step["args"],
                                                "id": call_id}]),
                     ToolMessage(str(step["result"]), tool_call_id=call_id, name=step["tool"])]
    messages.append(AIMessage(ep.final))
    return episode_from_messages(messages, start=1)


def load_pairs(path: Path = DATA) -> list[Pair]:
    """Read and validate the pair set: unique ids, known kinds, better differs from worse."""
    if not path.exists():
        raise ConfigError(f"judge pair set {path} not found; it ships in bench/data/")
    pairs: list[Pair] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                pairs.append(Pair.model_validate_json(line))
            except ValueError as exc:
                raise ConfigError(f"{path}:{n}: not a valid pair row ({exc}); "
                                  "see bench/data/README.md for the fields") from exc
    seen: set[str] = set()
    for pair in pairs:
        if pair.id in seen:
            raise ConfigError(f"{path}: id {pair.id!r} appears twice; give each row its own id")
        seen.add(pair.id)
        if pair.kind not in KINDS:
            raise ConfigError(f"{path}: row {pair.id} has kind {pair.kind!r}; use one of {KINDS}")
        if pair.better.strip() == pair.worse.strip():
            raise ConfigError(f"{path}: row {pair.id} has the same better and worse answer")
    return pairs


def quick_subset(pairs: Sequence[Pair], per_kind: int = 3) -> list[Pair]:
    """The first ``per_kind`` rows of each kind (``--quick``)."""
    taken: dict[str, int] = defaultdict(int)
    out = []
    for pair in pairs:
        if taken[pair.kind] < per_kind:
            taken[pair.kind] += 1
            out.append(pair)
    return out


def pair_rubric(pair: Pair) -> Rubric:
    """What a run would judge the task by: its stated checks and judged features, plus the row's.

    The row's answer key and tests are not in it: a judge in production has no answer key.
    """
    base = rubric_for_task(pair.task)
    extra = [Feature(f["name"], f["description"], 1.0, kind="bool") for f in pair.features]
    return Rubric([*base.features, *extra], name="pair", version="1")


def checks_rubric(pair: Pair) -> Rubric | None:
    """The checks alone: the task's stated constraints plus the row's answer key or tests."""
    stated = rubric_for_task(pair.task, checks_only=True)
    features = list(stated.features) if stated is not None else []
    features += [constraint_feature(k, v) for k, v in pair.checks.items()]
    return Rubric(features, name="checks", version="1") if features else None


def preference(better: float | None, worse: float | None) -> float | None:
    """1.0 when the better answer scored higher, 0.5 on a tie, 0.0 when lower; None if unscored."""
    if better is None or worse is None:
        return None
    return 1.0 if better > worse else 0.5 if better == worse else 0.0


def summarize(judge: str, model: str | None, prefs: Sequence[float | None], *,
              kinds: Sequence[str], ids: Sequence[str] = (), failed: int = 0,
              consistent: Sequence[bool] = (), first_wins: Sequence[float] = (),
              note: str = "") -> dict[str, Any]:
    """One judge's row: accuracy over the pairs it decided (Wilson 95% on those), ties, by kind.

    ``prefs`` holds None for a pair the judge did not decide: no check applies, the
    vote matched neither answer, or the judgement failed (``failed`` counts those).
    ``coverage`` is decided / pairs.
    """
    if failed > sum(p is None for p in prefs):
        raise ConfigError(f"summarize({judge!r}): failed={failed} but only "
                          f"{sum(p is None for p in prefs)} pairs are undecided; a failed "
                          "judgement must be a None preference, never a tie")
    decided = [(p, k) for p, k in zip(prefs, kinds, strict=True) if p is not None]
    credit = sum(p for p, _ in decided)
    n = len(decided)
    by_kind: dict[str, list[float]] = defaultdict(list)
    for p, k in decided:
        by_kind[k].append(p)
    return {
        "judge": judge, "model": model, "pairs": len(prefs), "decided": n,
        "coverage": n / len(prefs) if prefs else None,
        "accuracy": credit / n if n else None,
        "wilson95": [wilson(math.floor(credit), n)[0], wilson(math.ceil(credit), n)[1]],
        "ties": sum(p == 0.5 for p, _ in decided), "failed": failed,
        "position_consistency": (sum(consistent) / len(consistent)) if consistent else None,
        "first_shown_wins": (sum(first_wins) / len(first_wins)) if first_wins else None,
        "by_kind": {k: sum(v) / len(v) for k, v in sorted(by_kind.items())},
        "per_pair": dict(zip(ids, prefs, strict=True)) if ids else {},
        "note": note,
    }


def judge_critic(llm: BaseChatModel, pairs: Sequence[Pair], tick: Tick) -> tuple[
        list[float | None], int, list[float | None]]:
    """Each answer scored alone by the Critic (composite score), and how many pairs failed.

    A failed judgement (either answer got no valid critique) leaves the pair
    undecided (None), counted as failed, never as a tie. Also returns the preferences
    of the model's own 1-10 ``overall_score`` from the same calls (it never enters the
    composite): is the grade better than the booleans?
    """
    prefs: list[float | None] = []
    grades: list[float | None] = []
    errors = 0
    for pair in pairs:
        critic = Critic(llm, pair_rubric(pair), critique_text=False)
        got = critic.batch([(pair.task, pair.better), (pair.task, pair.worse)],
                           return_exceptions=True,
                           episodes=[pair.episode("better"), pair.episode("worse")])
        scores = [None if isinstance(c, Exception) else c.score for c in got]
        errors += None in scores
        prefs.append(preference(scores[0], scores[1]))  # None when either failed
        own = [None if isinstance(c, Exception) or c.overall_score is None
               else float(c.overall_score) for c in got]
        grades.append(preference(own[0], own[1]))  # None: decided by the checks, no call
        tick(1)
    return prefs, errors, grades


def judge_group(llm: BaseChatModel, pairs: Sequence[Pair], tick: Tick) -> tuple[
        list[float | None], int, list[bool], list[float]]:
    """Both answers ranked together in both orders (GroupRanker, n=2).

    A tool row's candidate is its final answer with its episode: the ranker shows
    the tool calls itself. A failed ranking (an order with no valid answer) leaves
    the pair undecided and counted as failed; consistency and first-shown wins come
    only from pairs decided in both orders.
    """
    from agentic_loop.judges import GroupRanker  # helper A's; absent on older checkouts

    prefs: list[float | None] = []
    consistent: list[bool] = []
    first_wins: list[float] = []
    errors = 0
    for pair in pairs:
        ranker = GroupRanker(llm, pair_rubric(pair), orders=2)
        ranking = ranker.rank(pair.task, [pair.shown("better"), pair.shown("worse")],
                              episodes=[pair.episode("better"), pair.episode("worse")])
        if not ranking.ok or ranking.scores is None:
            errors += 1
            prefs.append(None)
        else:
            prefs.append(preference(ranking.scores[0], ranking.scores[1]))
            per_order = [preference(s[0], s[1]) for s in ranking.per_order]
            if len(per_order) >= 2 and None not in per_order:
                consistent.append(len(set(per_order)) == 1)
            for scores, order in zip(ranking.per_order, ranking.orders, strict=False):
                first, second = order[0], order[1]
                won = preference(scores[first], scores[second])
                if won is not None:
                    first_wins.append(won)
        tick(1)
    return prefs, errors, consistent, first_wins


def judge_vote(llm: BaseChatModel, pairs: Sequence[Pair], samples: int,
               tick: Tick) -> tuple[list[float | None], float | None]:
    """Majority vote of ``samples`` sampled answers on short-answer rows (those with ``answer``).

    The answer agreeing with the vote is preferred; a vote matching neither leaves
    the pair undecided (None: outside the coverage). Rows with no short answer: None.
    """
    from agentic_loop.judges import majority_vote, short_answer  # helper A's

    prefs: list[float | None] = []
    agreement: list[float] = []
    for pair in pairs:
        if pair.answer is None:
            prefs.append(None)
            continue
        drafts = llm.batch([pair.task] * samples, temperature=1.0, max_tokens=96)
        vote = majority_vote([str(d.content) for d in drafts], normalize=short_answer)
        agreement.append(vote.agreement)
        if vote.answer is not None and vote.answer == short_answer(pair.better):
            prefs.append(1.0)
        elif vote.answer is not None and vote.answer == short_answer(pair.worse):
            prefs.append(0.0)
        else:
            prefs.append(None)
        tick(1)
    return prefs, (sum(agreement) / len(agreement)) if agreement else None


def judge_checks(pairs: Sequence[Pair]) -> list[float | None]:
    """The checks alone (no model); None where a row has no check."""
    prefs: list[float | None] = []
    for pair in pairs:
        rubric = checks_rubric(pair)
        if rubric is None:
            prefs.append(None)
            continue
        better = rubric.evaluate(pair.task, pair.better, episode=pair.episode("better")).score
        worse = rubric.evaluate(pair.task, pair.worse, episode=pair.episode("worse")).score
        prefs.append(preference(better, worse))
    return prefs


def pct(x: float | None) -> str:
    """A share as a whole percent; ``-`` for none."""
    return "-" if x is None else f"{100 * x:.0f}%"


def open_accuracy(row: Mapping[str, Any], open_ids: set[str]) -> float | None:
    """A judge's accuracy on the pairs the checks leave open (no check, or a tie): its own worth.

    >>> open_accuracy({"per_pair": {"a": 1.0, "b": 0.5, "c": 0.0}}, {"b", "c"})
    0.25
    """
    got = [p for k, p in row["per_pair"].items() if k in open_ids and p is not None]
    return sum(got) / len(got) if got else None


def _save(out: Path, section: dict[str, Any]) -> None:
    """Merge ``section`` into ``out`` under ``"quality"`` (after each judge: deadline-safe)."""
    open_ids = {k for k, p in section["rows"]["checks"]["per_pair"].items() if p in (None, 0.5)}
    for name, row in section["rows"].items():
        if "per_pair" in row and name != "checks":
            row["accuracy_where_checks_tie"] = open_accuracy(row, open_ids)
    results = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}
    results["quality"] = section
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


def bench_quality(out: Path, *, generator: str = "local", judge: str = "local",
                  quick: bool = False, votes: int = 5, pairs: Sequence[Pair] | None = None,
                  load: Callable[..., BaseChatModel] | None = None) -> dict[str, Any]:
    """Run every judge on the pair set, writing ``out`` after each; returns the ``quality`` part.

    ``generator``: the model whose own critic is measured (and that samples the
    votes); ``judge``: the separate judge's spec. ``load`` defaults to
    :func:`agentic_loop.models.load_chat_model` (tests pass a fake).
    """
    import platform
    import time
    from datetime import UTC, datetime

    from agentic_loop.models import load_chat_model, model_id_of
    from agentic_loop.progress import progress_bar

    started = time.perf_counter()
    load = load or load_chat_model
    chosen = list(pairs) if pairs is not None else load_pairs()
    if quick and pairs is None:
        chosen = quick_subset(chosen)
    kinds, ids = [p.kind for p in chosen], [p.id for p in chosen]
    own = load(generator, temperature=0.0, max_tokens=256)
    other = own if judge == generator else load(judge, temperature=0.0, max_tokens=256)
    own_id, other_id = model_id_of(own), model_id_of(other)
    same = own_id == other_id
    section: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": platform.platform(), "generator": generator,
        "judge": judge, "pairs": len(chosen), "quick": quick, "votes": votes,
        "data": str(DATA.name), "rows": {}}
    rows: dict[str, Any] = section["rows"]
    n_math = sum(p.answer is not None for p in chosen)
    with progress_bar() as bar:
        def tick_of(name: str, total: int) -> Tick:
            task = bar.add_task(name, total=total, unit="pairs")
            return lambda k: bar.advance(task, k)

        prefs = judge_checks(chosen)
        rows["checks"] = summarize("checks alone", "python", prefs, kinds=kinds, ids=ids,
                                   note="reference: stated constraints, answer keys, tests")
        _save(out, section)
        prefs, errors, grades = judge_critic(own, chosen,
                                             tick_of("same-model critic", len(chosen)))
        rows["critic"] = summarize("same-model critic", own_id, prefs, kinds=kinds, ids=ids,
                                   failed=errors, note="pointwise: each answer scored alone "
                                   "(composite of the pair's rubric)")
        rows["critic_grade"] = summarize(
            "critic's own 1-10 grade", own_id, grades, kinds=kinds, ids=ids, failed=errors,
            note="the overall_score of the same calls (never in the composite); undecided "
            "where a guard voided an answer")
        _save(out, section)
        if same:
            rows["separate"] = {**rows["critic"], "judge": "separate judge", "note": (
                f"--judge {judge} is the generator's own model (the only model on this "
                "machine): greedy decoding makes it identical to the critic row")}
        else:
            prefs, errors, _ = judge_critic(other, chosen,
                                            tick_of("separate judge", len(chosen)))
            rows["separate"] = summarize("separate judge", other_id, prefs, kinds=kinds,
                                         ids=ids, failed=errors,
                                         note="pointwise: each answer scored alone")
        _save(out, section)
        try:
            prefs, errors, consistent, first = judge_group(
                other, chosen, tick_of("group ranker", len(chosen)))
            rows["group"] = summarize("group ranker", other_id, prefs,
                                      kinds=kinds, ids=ids, failed=errors,
                                      consistent=consistent, first_wins=first,
                                      note="n=2: both answers shown together, in both "
                                      "orders; scores averaged over the orders")
        except ImportError as exc:
            rows["group"] = {"judge": "group ranker", "skipped": f"not available: {exc}"}
        _save(out, section)
        try:
            short = [p for p in chosen if p.answer is not None]
            prefs, agreement = judge_vote(own, short, votes, tick_of("majority vote", n_math))
            rows["vote"] = summarize(
                f"majority vote (k={votes})", own_id, prefs, kinds=[p.kind for p in short],
                ids=[p.id for p in short],
                note=f"short-answer rows only; mean agreement {pct(agreement)}")
            rows["vote"]["agreement"] = agreement
        except ImportError as exc:
            rows["vote"] = {"judge": "majority vote", "skipped": f"not available: {exc}"}
        section["seconds"] = round(time.perf_counter() - started, 1)
        _save(out, section)
    return section
