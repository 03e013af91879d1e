"""Group ranking (RULER-style): one judge call scores n candidates of one task against each other.

Why: a judge asked for an absolute grade of one answer comes back flat (most
answers get a 7); asked to compare several answers to the *same* task, it only
has to say which is better, and that relative signal is what best-of-n
tie-breaks, a GRPO group's judged reward and preference pairs need. The scores
are **relative to the group**: a 9 means "best of these", not "good"; never
compare scores across groups.

How it stays robust where hosted-judge rankers break (scores out of range,
malformed JSON): the judge answers a schema with one bounded integer field per
candidate (``candidate_a`` ... 0-10, ``Field(ge=0, le=10)``), so the embedded
engine's structured-output grammar makes every answer valid and in range, and a
served model (vLLM's guided decoding, or any OpenAI-compatible server) is
validated and retried by the one :class:`~agentic_loop.models.retry.RetryPolicy`.
A judge that stays invalid gives a :class:`GroupRanking` with ``error`` set and
``scores`` None: a recorded failure, never an exception.

Position bias (small judges favour the first candidate) is measured and
countered: the group is shown in ``orders`` presentations, the first shuffled
with ``seed`` and the second its reverse (further ones shuffled again); each
order's scores are mapped back to the caller's order and averaged, and
``consistency`` says how often the orders agreed on which of two candidates is
better.

Example (a scripted judge that likes the longest answer):
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> def longest(schema, msgs):
    ...     shown = candidates_shown(msgs[-1].content)
    ...     return {f"candidate_{k}": min(10, len(t)) for k, t in shown.items()}
    >>> ranker = GroupRanker(ScriptedChatModel(default_structured=longest))
    >>> ranking = ranker.rank("Name a colour.", ["red", "blue", "teal green"])
    >>> ranking.scores, ranking.best(), ranking.consistency, ranking.attempts
    ([3.0, 4.0, 10.0], 2, 1.0, 2)
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from itertools import combinations
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, ConfigDict, Field, create_model

from agentic_loop.episodes import Episode
from agentic_loop.errors import ConfigError
from agentic_loop.judges.judge_calls import JudgeCallError, batch_structured, judge_retry
from agentic_loop.judges.rubric import Rubric
from agentic_loop.models.retry import RetryPolicy
from agentic_loop.models.wrappers import model_id_of

__all__ = ["MAX_GROUP", "SCHEMA_NAME", "GroupRanker", "GroupRanking", "answer_schema",
           "candidates_shown", "consistency_of"]

#: The most candidates one group may have: one letter each (A-Z).
MAX_GROUP = 26
#: The name of the judge's answer schema (a ScriptedChatModel script is keyed by it).
SCHEMA_NAME = "GroupScores"
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_TOOL_LINE_CHARS = 200

_SYSTEM = (
    "You compare several candidate answers to the same task. Score every candidate from 0 "
    "(worst) to 10 (best) relative to the others: the best candidate gets the highest score, "
    "equally good candidates get equal scores. Judge only by the criteria given; the order in "
    "which the candidates are listed means nothing. Answer with one integer per candidate."
)


#: One group to rank: the task, its candidates, and each candidate's episode (or None).
_Group = tuple[str, Sequence[str], Sequence[Episode | None] | None]


class GroupRanking(BaseModel):
    """One group's ranking: a 0-10 score per candidate, relative to the group.

    ``scores`` are in the caller's order, averaged over the presentation
    ``orders`` (each a permutation: ``orders[o][k]`` is the caller's index of
    the candidate shown at position ``k``); ``per_order[o]`` holds order ``o``'s
    scores in the caller's order. ``consistency`` is the fraction of candidate
    pairs the orders ranked the same way (ties count half; None with one order
    or one candidate). On failure ``scores`` is None, ``per_order`` empty and
    ``error`` says why. ``attempts`` counts the model calls made, ``judge`` names
    the model.
    """

    model_config = ConfigDict(frozen=True)

    scores: list[float] | None
    per_order: list[list[float]] = Field(default_factory=list)
    orders: list[list[int]] = Field(default_factory=list)
    consistency: float | None = None
    attempts: int = 0
    error: str | None = None
    judge: str = ""

    @property
    def ok(self) -> bool:
        """True when the judge answered (every order), so ``scores`` holds a score each."""
        return self.error is None and self.scores is not None

    def best(self) -> int | None:
        """The caller's index of the top score (ties: the earlier candidate); None on failure.

        >>> GroupRanking(scores=[4.0, 9.0, 9.0]).best(), GroupRanking(scores=None).best()
        (1, None)
        """
        scores = self.scores
        if not scores:
            return None
        return max(range(len(scores)), key=lambda i: (scores[i], -i))


def answer_schema(n: int) -> type[BaseModel]:
    """The answer schema for ``n`` candidates: ``candidate_a`` ... each an int in 0-10.

    >>> field = answer_schema(2).model_json_schema()["properties"]["candidate_b"]
    >>> field["type"], field["minimum"], field["maximum"]
    ('integer', 0, 10)
    """
    fields: dict[str, Any] = {
        f"candidate_{_LETTERS[k]}": (int, Field(
            ge=0, le=10, description=f"Score of candidate {_LETTERS[k].upper()}, 0-10, "
                                     "relative to the other candidates."))
        for k in range(n)}
    return create_model(SCHEMA_NAME, __config__=ConfigDict(extra="forbid"),
                        __doc__=f"Scores of {n} candidates, one per letter.", **fields)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:max(0, limit - 1)] + "…"


def _shown(answer: str, episode: Episode | None, max_chars: int) -> str:
    """A candidate as the judge sees it: its episode's tool calls and results, then its answer.

    >>> from agentic_loop.episodes import ToolStep
    >>> print(_shown("It is 4.", Episode(steps=[ToolStep(name="calc", args={"x": "2+2"},
    ...                                                  content="4")]), 200))
    Tool calls:
    - calc({"x": "2+2"}) -> 4
    Answer:
    It is 4.
    """
    if episode is None or not episode.tool_steps:
        return _cut(answer, max_chars)
    lines = []
    for step in episode.tool_steps:
        result = step.content if step.error is None else f"Error: {step.error}"
        args = json.dumps(step.args, ensure_ascii=False, default=str)
        lines.append(_cut(f"- {step.name}({args}) -> {' '.join(result.split())}",
                          _TOOL_LINE_CHARS))
    trace = _cut("Tool calls:\n" + "\n".join(lines), max_chars // 2)
    head = f"{trace}\nAnswer:\n"
    return head + _cut(answer, max_chars - len(head))


_CANDIDATE = re.compile(r"^CANDIDATE ([A-Z]):\n(.*?)(?=\n\nCANDIDATE [A-Z]:\n|\n\nScore every |\Z)",
                        re.MULTILINE | re.DOTALL)


def candidates_shown(prompt: str) -> dict[str, str]:
    """The candidates of a ranking prompt by lowercase letter (for scripted judges in tests).

    >>> candidates_shown("CANDIDATE A:\\nred\\n\\nCANDIDATE B:\\nblue\\n\\nScore every one.")
    {'a': 'red', 'b': 'blue'}
    """
    return {m.group(1).lower(): m.group(2) for m in _CANDIDATE.finditer(prompt)}


def _agreement(a: Sequence[float], b: Sequence[float]) -> float:
    """The fraction of candidate pairs ``a`` and ``b`` order the same (a tie against an order
    counts half)."""
    total = 0.0
    pairs = list(combinations(range(len(a)), 2))
    for i, j in pairs:
        sa, sb = (a[i] > a[j]) - (a[i] < a[j]), (b[i] > b[j]) - (b[i] < b[j])
        total += 1.0 if sa == sb else 0.5 if 0 in (sa, sb) else 0.0
    return total / len(pairs)


def consistency_of(per_order: Sequence[Sequence[float]]) -> float | None:
    """Mean pairwise agreement between every two orders' scores (None: under 2 orders or
    under 2 candidates).

    >>> consistency_of([[10, 0, 0], [0, 0, 10]])  # doctest: +ELLIPSIS
    0.333...
    """
    if len(per_order) < 2 or len(per_order[0]) < 2:
        return None
    pairs = list(combinations(per_order, 2))
    return sum(_agreement(a, b) for a, b in pairs) / len(pairs)


class GroupRanker:
    """Scores a group of candidates for one task relative to each other (see the module).

    ``rubric``: its LLM-judged features are the criteria (a rubric with none, or
    no rubric: "overall quality"); checks stay Python's and are not asked.
    ``orders``: presentations per group (2: shuffled, then reversed). ``seed``
    fixes the shuffles. ``max_chars``: the most characters shown per candidate.
    """

    def __init__(self, llm: BaseChatModel, rubric: Rubric | None = None, *, orders: int = 2,
                 seed: int = 0, max_retries: int = 2, retry: RetryPolicy | None = None,
                 max_chars: int = 1500) -> None:
        if isinstance(orders, bool) or not isinstance(orders, int) or orders < 1:
            raise ConfigError(f"GroupRanker orders={orders!r}: pass an int >= 1 (2 measures and "
                              "counters position bias)")
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 50:
            raise ConfigError(f"GroupRanker max_chars={max_chars!r}: pass an int >= 50")
        if rubric is not None and not isinstance(rubric, Rubric):
            raise ConfigError(f"GroupRanker rubric: expected a Rubric or None, got "
                              f"{type(rubric).__name__}")
        self.llm = llm
        self.rubric = rubric
        self.orders = orders
        self.seed = seed
        self.retry = judge_retry(max_retries, retry)
        self.max_chars = max_chars
        self.judge = model_id_of(llm)

    def criteria(self) -> list[str]:
        """The criteria lines the judge is given: the rubric's judged features.

        >>> from agentic_loop.testing import ScriptedChatModel
        >>> GroupRanker(ScriptedChatModel()).criteria()
        ['- overall quality: how well the answer does the task']
        """
        features = self.rubric.llm_features if self.rubric is not None else ()
        if not features:
            return ["- overall quality: how well the answer does the task"]
        return [f"- {f.name}: {f.description}" for f in features]

    def messages(self, task: str, shown: Sequence[str]) -> list[BaseMessage]:
        """The judge prompt for candidates ``shown`` (already rendered) in this order."""
        blocks = [f"CANDIDATE {_LETTERS[k].upper()}:\n{text}" for k, text in enumerate(shown)]
        letters = ", ".join(_LETTERS[k].upper() for k in range(len(shown)))
        body = "\n\n".join([f"TASK:\n{task}", "CRITERIA:\n" + "\n".join(self.criteria()),
                            *blocks,
                            f"Score every candidate ({letters}) from 0 to 10, relative to "
                            "each other."])
        return [SystemMessage(_SYSTEM), HumanMessage(body)]

    def _permutations(self, n: int, group: int) -> list[list[int]]:
        rng = random.Random(self.seed * 1_000_003 + group)
        first = list(range(n))
        rng.shuffle(first)
        perms = [first]
        for o in range(1, self.orders):
            if o == 1:
                perms.append(first[::-1])
            else:
                perm = list(range(n))
                rng.shuffle(perm)
                perms.append(perm)
        return perms

    def rank(self, task: str, candidates: Sequence[str], *,
             episodes: Sequence[Episode | None] | None = None) -> GroupRanking:
        """Score ``candidates`` (answers to ``task``) relative to each other.

        ``episodes``: each candidate's agent episode (or None), shown compactly
        before its answer. One candidate scores 10 with no model call; none is a
        :class:`ConfigError`.
        """
        return self._rank_groups([(task, candidates, episodes)])[0]

    def rank_many(self, groups: Sequence[tuple[str, Sequence[str]] | _Group]
                  ) -> list[GroupRanking]:
        """:meth:`rank` for many ``(task, candidates)`` groups (or ``(task, candidates,
        episodes)``), batched: one batch per group size and retry round (every order of
        every group of that size together). Group ``g``'s shuffles are seeded by ``seed``
        and ``g``."""
        return self._rank_groups([(g[0], g[1], g[2] if len(g) > 2 else None)
                                  for g in groups])

    def _rank_groups(self, groups: Sequence[_Group]) -> list[GroupRanking]:
        plans: list[tuple[list[str], list[list[int]]]] = []
        for g, (task, candidates, episodes) in enumerate(groups):
            n = len(candidates)
            if not 1 <= n <= MAX_GROUP:
                raise ConfigError(f"GroupRanker got {n} candidates for task {task[:60]!r}; "
                                  f"pass 1 to {MAX_GROUP}")
            eps = list(episodes) if episodes is not None else [None] * n
            if len(eps) != n:
                raise ConfigError(f"GroupRanker got {n} candidates but {len(eps)} episodes for "
                                  f"task {task[:60]!r}; pass one episode (or None) per candidate")
            shown = [_shown(str(c), e, self.max_chars) for c, e in zip(candidates, eps,
                                                                          strict=True)]
            plans.append((shown, self._permutations(n, g) if n > 1 else [[0]]))
        answers: dict[tuple[int, int], tuple[BaseModel, int] | JudgeCallError] = {}
        for size in sorted({len(shown) for shown, _ in plans if len(shown) > 1}):
            keys = [(g, o) for g, (shown, perms) in enumerate(plans) if len(shown) == size
                    for o in range(len(perms))]
            prompts = [self.messages(groups[g][0], [plans[g][0][i] for i in plans[g][1][o]])
                       for g, o in keys]
            try:
                got: list[Any] = batch_structured(
                    self.llm, answer_schema(size), prompts, retry=self.retry,
                    what=f"GroupRanker[{size}]")
            except JudgeCallError as err:  # the model cannot answer structured at all
                got = [err] * len(keys)
            answers.update(zip(keys, got, strict=True))
        return [self._ranking(plans[g][1], [answers.get((g, o)) for o in range(len(perms))])
                for g, (_, perms) in enumerate(plans)]

    def _ranking(self, perms: list[list[int]],
                 got: list[tuple[BaseModel, int] | JudgeCallError | None]) -> GroupRanking:
        if len(perms[0]) == 1:
            return GroupRanking(scores=[10.0], per_order=[[10.0]], orders=perms, judge=self.judge)
        attempts = sum(a.attempts if isinstance(a, JudgeCallError) else a[1]
                       for a in got if a is not None)
        failed = [a for a in got if not isinstance(a, tuple)]
        if failed:
            first = failed[0]
            return GroupRanking(scores=None, orders=perms, attempts=attempts, judge=self.judge,
                                error=f"{len(failed)} of {len(perms)} orders got no valid "
                                      f"ranking: {first}")
        per_order: list[list[float]] = []
        for perm, answer in zip(perms, got, strict=True):
            assert isinstance(answer, tuple)
            data = answer[0].model_dump()
            scores = [0.0] * len(perm)
            for k, caller_index in enumerate(perm):
                scores[caller_index] = float(data[f"candidate_{_LETTERS[k]}"])
            per_order.append(scores)
        mean = [sum(col) / len(col) for col in zip(*per_order, strict=True)]
        return GroupRanking(scores=mean, per_order=per_order, orders=perms,
                            consistency=consistency_of(per_order), attempts=attempts,
                            judge=self.judge)
