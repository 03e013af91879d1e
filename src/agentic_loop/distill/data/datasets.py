"""Training sets from scored samples: SFT by rejection sampling, DPO preference pairs.

Both are written in TRL's *conversational* format, which its trainers read
directly (``SFTTrainer``: a ``messages`` column; ``DPOTrainer``: ``prompt``,
``chosen`` and ``rejected`` message lists) and apply the model's chat
template to. A ``metadata`` column says where each row came from; the
trainers drop columns they do not use.

The prompt of a row is the chat the architectures send for a fresh draft
(system message, then the task and its requirements; see
:mod:`agentic_loop.distill.data.samples`): with a system message of its own,
a row gets no default system prompt from the model's chat template, so the
model is trained on exactly what it will be asked.

SFT (rejection sampling, as in RFT): every sample that passed every check
of its task's rubric, raised no reward-hacking guard flag (repetition,
recital of the task or its requirements, padding, a copied exemplar; see
:mod:`agentic_loop.judges.guards`) and whose reward reaches ``min_score``:
accepted finals, and the *distinct* accepted drafts of the same task
(several correct answers per task teach more than one), best first, exact
and near duplicates removed, at most ``max_per_task`` per task. A high score
is not acceptance: a draft that failed a check is never a row, whatever its
score. What each rule dropped is counted in the log's ``drops``.

The losing samples of a best-of-n round (``source="alternative"``) count like
drafts: an accepted one is one more distinct correct answer.

A draft an agent wrote (``Sample.episode``) is a row of its whole tool-calling
conversation (:mod:`~agentic_loop.distill.data.episode_rows`: model calls with
``tool_calls``, ``tool`` results, a simulated user's turns, the answer), with a
``tools`` column and ``metadata.episode`` counts. A broken episode never trains;
agent rows are duplicates when task, tool calls and answer are; a row longer than
``max_chars`` (the whole conversation) is dropped.

DPO pairs (same prompt, chosen = highest reward among the samples that may
train, rejected = lowest): the chosen response passed every check, raised
no guard flag and reaches ``min_score``; the rejected one failed a check
(and scores lower) or scores at least ``min_gap`` lower on the [0, 1]
scale. Failing samples are what rejected sides are made of. From three sources:

``"samples"``
    several runs of one task: the best final output against the worst.
``"refine"``
    one run's refine rounds: an early low-scoring draft against the
    accepted final, the improvement the critique loop found.
``"best_of_n"``
    one best-of-n round: the best of its samples against the worst, two
    answers to the same prompt from the same model at the same moment, told
    apart by the checks alone.
``"review"``
    a run a person rejected (``agentic-loop review``) against the best trainable
    final of another run of its task, whatever their scores
    (:mod:`~agentic_loop.distill.data.labels`).

Between two episodes the prompt goes on with the steps they share (same calls,
arguments and results) up to the first that differs; chosen and rejected are the
rest of each (a pair whose rests are the same is dropped: ``identical_sides``).

Example:
    >>> from agentic_loop.distill.data.curate import CurationLog
    >>> from agentic_loop.distill.data.samples import trajectory_samples
    >>> from agentic_loop.trajectories import Round, Trajectory
    >>> run = Trajectory(architecture="reflection", model_id="m", task="Say hi.",
    ...                  rounds=[Round(iteration=0, draft="yo", score=4.0),
    ...                          Round(iteration=1, draft="Hi!", score=9.0)],
    ...                  final_output="Hi!", final_score=9.0)
    >>> samples = trajectory_samples(run)
    >>> rows = sft_rows(samples, min_score=0.8, log=CurationLog())
    >>> [(m.role, m.content[:12]) for m in rows[0].messages]
    [('system', 'You are a pr'), ('user', 'Say hi.'), ('assistant', 'Hi!')]
    >>> pair = preference_pairs(samples, min_score=0.8, min_gap=0.2, log=CurationLog())[0]
    >>> pair.chosen[0].content, pair.rejected[0].content, pair.metadata.gap, pair.metadata.source
    ('Hi!', 'yo', 0.5, 'refine')
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from agentic_loop.distill.data.curate import (
    CurationLog,
    cap_per_task,
    drop_exact_duplicates,
    drop_near_duplicates,
    keep_sound_episodes,
    keep_trainable,
    score_threshold,
)
from agentic_loop.distill.data.episode_rows import (
    EpisodeMeta,
    Message,
    OmitsAbsent,
    answer_messages,
    answer_text,
    episode_meta_of,
    fits_within,
    is_sound,
    pair_problem,
    row_tools,
    same_row_key,
    side_key,
    split_shared,
)
from agentic_loop.distill.data.labels import review_candidates, sample_candidates
from agentic_loop.distill.data.samples import Sample, SampleSource
from agentic_loop.errors import ConfigError
from agentic_loop.memory.embeddings import TextEmbedder

__all__ = [
    "Message",
    "PairMeta",
    "PairRow",
    "PairSource",
    "SftMeta",
    "SftRow",
    "preference_pairs",
    "sft_rows",
]

PairSource = Literal["samples", "refine", "best_of_n", "review"]


def _messages(sample: Sample) -> list[Message]:
    """A sample's prompt as messages (system, user, assistant shots).

    A few-shot *episode* in the prompt (an exemplar shown with its tool calls) keeps its
    task and its accepted answer: its tool turns, and the assistant turns that called
    them, are left out, since the prompt recorded them as text (no call ids or arguments
    to make tool messages of).

    >>> from agentic_loop.distill.data.samples import Sample
    >>> s = Sample(prompt="q", response="a", reward=1.0, source="final", trajectory_id="t",
    ...            iteration=0, model_id="m", chat=(
    ...     ("user", "shot"), ("assistant", ""), ("tool", "2491"), ("assistant", "2491"),
    ...     ("user", "q")))
    >>> [m.role for m in _messages(s)]
    ['user', 'assistant', 'user']
    """
    turns = list(sample.messages)
    return [Message(role=m["role"], content=m["content"]) for i, m in enumerate(turns)
            if m["role"] != "tool"
            and not (m["role"] == "assistant" and i + 1 < len(turns)
                     and turns[i + 1]["role"] == "tool")]


class SftMeta(OmitsAbsent):
    """Where an SFT row came from (``task``: the bare task, for tools that want it alone)."""

    _omitted = frozenset({"episode"})

    task: str = ""
    source: SampleSource
    trajectory_id: str
    iteration: int | None
    reward: float
    model_id: str
    #: every check of the task held (None: the task has no checks)
    passed: bool | None = None
    #: what the row's episode did (absent: a plain answer)
    episode: EpisodeMeta | None = None


class SftRow(OmitsAbsent):
    """One SFT example: ``{"messages": [system, user, assistant], "metadata": {...}}``; an
    agent's row holds its tool calls and results between them, and ``tools``."""

    _omitted = frozenset({"tools"})

    messages: list[Message]
    #: the tools the agent was offered, as OpenAI function specs (absent: a plain answer)
    tools: list[dict[str, Any]] | None = None
    metadata: SftMeta


class PairMeta(OmitsAbsent):
    """Where a preference pair came from, its task, and its two rewards."""

    _omitted = frozenset({"chosen_episode", "rejected_episode", "shared_steps"})

    task: str = ""
    source: PairSource
    gap: float
    chosen_reward: float
    rejected_reward: float
    chosen_trajectory_id: str
    rejected_trajectory_id: str
    chosen_iteration: int | None
    rejected_iteration: int | None
    #: whether each side passed every check (None: the task has no checks)
    chosen_passed: bool | None = None
    rejected_passed: bool | None = None
    #: what each side's episode did (absent: that side is a plain answer)
    chosen_episode: EpisodeMeta | None = None
    rejected_episode: EpisodeMeta | None = None
    #: the episode steps both sides share, now at the end of the prompt (agents only)
    shared_steps: int | None = None


class PairRow(OmitsAbsent):
    """One DPO example: ``{"prompt": [system, user], "chosen": [assistant], "rejected": [...]}``.

    The prompt is the chosen response's (both answer the same task), followed, between two
    episodes, by the steps they share; ``tools`` as in :class:`SftRow`.
    """

    _omitted = frozenset({"tools"})

    prompt: list[Message]
    chosen: list[Message]
    rejected: list[Message]
    tools: list[dict[str, Any]] | None = None
    metadata: PairMeta


@dataclass(frozen=True)
class _Pair:
    chosen: Sample
    rejected: Sample
    source: PairSource

    @property
    def gap(self) -> float:
        # Rounded so that 0.6 - 0.4 counts as the 0.2 it is, not 0.19999999999999996.
        return round(self.chosen.reward - self.rejected.reward, 6)

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.chosen.key, same_row_key(self.chosen)[1:], same_row_key(self.rejected)[1:])

    @cached_property
    def split(self) -> tuple[list[Message], list[Message], list[Message], int | None]:
        """The row's prompt, chosen and rejected messages, and how many steps the prompt took
        from the episodes (None when neither side is one)."""
        prompt = _messages(self.chosen)
        chosen, rejected = answer_messages(self.chosen), answer_messages(self.rejected)
        if self.chosen.episode is None and self.rejected.episode is None:
            return prompt, chosen, rejected, None
        shared: list[Message] = []
        if self.chosen.episode is not None and self.rejected.episode is not None:
            shared, chosen, rejected = split_shared(chosen, rejected)
        return [*prompt, *shared], chosen, rejected, len(shared)

    @cached_property
    def tools(self) -> list[dict[str, Any]] | None:
        return row_tools(self.chosen, self.rejected)

    @cached_property
    def problem(self) -> str | None:
        """Why a trainer would refuse the row (see :func:`pair_problem`), or ``None``."""
        return pair_problem(*self.split[:3], self.tools)


def _best_first(samples: Sequence[Sample]) -> list[Sample]:
    """Highest reward first; on ties finals, then archive entries, drafts, best-of-n losers,
    in input order."""
    rank = {"final": 0, "archive": 1, "round": 2, "alternative": 3}
    order = sorted(range(len(samples)),
                   key=lambda i: (-samples[i].reward, rank[samples[i].source], i))
    return [samples[i] for i in order]


def _task_order(samples: Sequence[Sample]) -> dict[str, int]:
    """Each task's position of first appearance: output rows follow the input's task order."""
    first: dict[str, int] = {}
    for i, s in enumerate(samples):
        first.setdefault(s.key, i)
    return first


def sft_rows(
    samples: Sequence[Sample],
    *,
    min_score: float,
    log: CurationLog,
    embedder: TextEmbedder | None = None,
    dedup_threshold: float | None = 0.95,
    max_per_task: int | None = None,
    max_chars: int | None = None,
) -> list[SftRow]:
    """The SFT set: accepted samples, deduplicated and capped, each step recorded in ``log``.

    Near-duplicate removal needs an ``embedder``; without one (or with
    ``dedup_threshold=None``) only exact duplicates are removed. ``max_chars``
    bounds a row's whole conversation
    (:func:`~agentic_loop.distill.data.episode_rows.conversation_chars`; ``None``: off).
    """
    unit = "sft rows"
    log.record("sft candidates", unit, len(samples), len(samples), "scored drafts and finals")
    items = keep_trainable(samples, lambda s: s, log, unit)
    items = keep_sound_episodes(items, lambda s: s, log, unit)
    above = score_threshold(items, min_score)
    log.count_drop(unit, "below_threshold", len(items) - len(above))
    items = log.keep("score threshold", unit, items, above, f"reward >= {min_score:g}")
    fits = fits_within(max_chars)
    short = [s for s in items if fits([*_messages(s), *answer_messages(s)])]
    log.count_drop(unit, "too_long", len(items) - len(short))
    items = log.keep("conversation length", unit, items, short,
                     f"at most {max_chars:,} characters" if max_chars is not None else "off")
    items = _best_first(items)
    items = log.keep("exact duplicates", unit, items, drop_exact_duplicates(items, same_row_key),
                     "same task, tool calls and answer")
    if embedder is not None and dedup_threshold is not None:
        items = log.keep("near duplicates", unit, items,
                         drop_near_duplicates(items, embedder, dedup_threshold, answer_text),
                         f"prompt and response cosine >= {dedup_threshold:g} ({embedder.name})")
    else:
        log.record("near duplicates", unit, len(items), len(items), "off")
    items = log.keep("per-task cap", unit, items,
                     cap_per_task(items, max_per_task, lambda s: s.key),
                     f"at most {max_per_task} per task" if max_per_task else "off")
    order = _task_order(samples)
    return [
        SftRow(
            messages=[*_messages(s), *answer_messages(s)],
            tools=row_tools(s),
            metadata=SftMeta(task=s.prompt, source=s.source, trajectory_id=s.trajectory_id,
                             iteration=s.iteration, reward=s.reward, model_id=s.model_id,
                             passed=s.passed, episode=episode_meta_of(s)),
        )
        for s in sorted(items, key=lambda s: order[s.key])  # stable: best first within a task
    ]


def _refine_candidates(samples: Sequence[Sample]) -> list[_Pair]:
    """Per run: its best round draft or final against its worst *earlier* draft."""
    by_run: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        if s.source in ("round", "final"):
            by_run[s.trajectory_id].append(s)
    pairs = []
    for run in by_run.values():
        # best reward; on ties the final output, then the later draft (the end of a plateau)
        chosen = max(run, key=lambda s: (s.trainable and is_sound(s), s.reward,
                                         s.source == "final",
                                         -1 if s.iteration is None else s.iteration))
        earlier = [s for s in run if s is not chosen and s.source == "round"
                   and (chosen.iteration is None
                        or (s.iteration is not None and s.iteration < chosen.iteration))]
        if earlier:
            worst = min(earlier, key=lambda s: (s.reward, s.iteration or 0))
            pairs.append(_Pair(chosen, worst, "refine"))
    return pairs


def _best_of_n_candidates(samples: Sequence[Sample]) -> list[_Pair]:
    """Per best-of-n round: its best sample against its worst (an alternative)."""
    rounds: dict[tuple[str, int | None], list[Sample]] = defaultdict(list)
    for s in samples:
        if s.source != "archive":
            rounds[(s.trajectory_id, s.iteration)].append(s)
    pairs = []
    for group in rounds.values():
        losers = [s for s in group if s.source == "alternative"]
        if not losers:
            continue
        chosen = max(group, key=lambda s: (s.trainable and is_sound(s), s.reward,
                                           s.source != "alternative"))
        rejected = min((s for s in losers if s is not chosen), key=lambda s: s.reward,
                       default=None)
        if rejected is not None:
            pairs.append(_Pair(chosen, rejected, "best_of_n"))
    return pairs


def preference_pairs(
    samples: Sequence[Sample],
    *,
    min_score: float,
    min_gap: float = 0.2,
    log: CurationLog,
    max_per_task: int | None = None,
    max_chars: int | None = None,
) -> list[PairRow]:
    """The DPO set: refine-round, best-of-n and cross-sample pairs, filtered, each step
    recorded in ``log`` (``max_chars`` bounds the prompt with either side, as in sft_rows)."""
    if not 0.0 < min_gap <= 1.0:
        raise ConfigError(f"min_gap is a reward difference in (0, 1], got {min_gap!r}")
    unit = "pairs"
    refine, best_of = _refine_candidates(samples), _best_of_n_candidates(samples)
    across = [_Pair(c, r, "samples") for c, r in sample_candidates(samples)]
    reviewed = [_Pair(c, r, "review") for c, r in review_candidates(samples)]
    pairs = reviewed + refine + best_of + across
    log.record("pair candidates", unit, len(pairs), len(pairs),
               f"{len(refine)} from refine rounds, {len(best_of)} from best-of-n rounds, "
               f"{len(across)} across samples of a task"
               + (f", {len(reviewed)} against runs a person rejected" if reviewed else ""))
    pairs = keep_trainable(pairs, lambda p: p.chosen, log, unit, side="chosen")
    pairs = keep_sound_episodes(pairs, lambda p: p.chosen, log, unit, side="chosen")
    above = [p for p in pairs if p.chosen.reward >= min_score]
    log.count_drop(unit, "chosen_below_threshold", len(pairs) - len(above))
    pairs = log.keep("chosen meets min_score", unit, pairs, above,
                     f"chosen reward >= {min_score:g}")
    worse = [p for p in pairs if p.source == "review" or p.gap >= min_gap
             or (p.rejected.passed is False and p.gap > 0)]
    log.count_drop(unit, "rejected_not_worse", len(pairs) - len(worse))
    pairs = log.keep("min gap", unit, pairs, worse,
                     f"chosen - rejected >= {min_gap:g}, or rejected failed a check "
                     "and scores lower, or a person rejected it")
    distinct = [p for p in pairs if side_key(p.split[1]) != side_key(p.split[2])]
    log.count_drop(unit, "identical_sides", len(pairs) - len(distinct))
    pairs = log.keep("duplicate pairs", unit, pairs,
                     drop_exact_duplicates(distinct, lambda p: p.key),
                     "same prompt, chosen and rejected; or chosen equal to rejected "
                     "(after the steps they share)")
    for why in (p.problem for p in pairs if p.problem is not None):
        log.count_drop(unit, why)
    pairs = log.keep("trainer format", unit, pairs, [p for p in pairs if p.problem is None],
                     "every result answers a call, every call's tool has a schema")
    fits = fits_within(max_chars)
    short = [p for p in pairs if fits(p.split[0] + p.split[1]) and fits(p.split[0] + p.split[2])]
    log.count_drop(unit, "too_long", len(pairs) - len(short))
    pairs = log.keep("conversation length", unit, pairs, short,
                     f"at most {max_chars:,} characters" if max_chars is not None else "off")
    pairs = sorted(pairs, key=lambda p: (p.source != "review", -p.gap))  # people's first
    capped = cap_per_task(pairs, max_per_task, lambda p: p.chosen.key)
    note = f"at most {max_per_task} per task, widest gaps first" if max_per_task else "off"
    pairs = log.keep("per-task cap", unit, pairs, capped, note)
    order = _task_order(samples)
    pairs.sort(key=lambda p: (order[p.chosen.key], -p.gap))
    return [
        PairRow(
            prompt=p.split[0],
            chosen=p.split[1],
            rejected=p.split[2],
            tools=p.tools,
            metadata=PairMeta(
                task=p.chosen.prompt, source=p.source, gap=p.gap, chosen_reward=p.chosen.reward,
                rejected_reward=p.rejected.reward, chosen_trajectory_id=p.chosen.trajectory_id,
                rejected_trajectory_id=p.rejected.trajectory_id,
                chosen_iteration=p.chosen.iteration, rejected_iteration=p.rejected.iteration,
                chosen_passed=p.chosen.passed, rejected_passed=p.rejected.passed,
                chosen_episode=episode_meta_of(p.chosen),
                rejected_episode=episode_meta_of(p.rejected),
                shared_steps=p.split[3],
            ),
        )
        for p in pairs
    ]
