"""Label-free votes: the majority answer across samples, as a signal with no checker.

Why: a task with a short answer and no checker (no ``answer=``, no tests) still
has a signal when the policy is sampled several times: the answer most samples
agree on is more often right than a single sample (self-consistency), and
test-time RL (TTRL) rewards each sample for agreeing with that majority. The
vote is deterministic: answers are normalized (:func:`short_answer` by default:
the last number, else the last line), the most frequent non-empty one wins,
ties go to the answer seen first, and an empty answer never wins. The
``agreement`` rate (winner's count / samples) says how much to trust the vote:
near ``1/n`` the samples scatter and the majority means little.

Example:
    >>> vote = majority_vote(["So it is 42.", "I get 41", "42.0", "The answer: 42"])
    >>> vote.answer, vote.count, vote.n, vote.agreement
    ('42', 3, 4, 0.75)
    >>> vote_rewards(["42", "41", "x = 42"])
    [1.0, 0.0, 1.0]
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict

from agentic_loop.judges.checks.text_measures import last_line, last_number

__all__ = ["Vote", "majority_vote", "short_answer", "vote_rewards", "voted"]

_PREFIX = re.compile(r"^(?:final answer|the answer is|answer)\s*[:=\-]?\s*", re.IGNORECASE)
_EDGES = " \t*`'\"_.,;:!?()[]{}"
_SPACES = re.compile(r"\s+")


class Vote(BaseModel):
    """The result of a majority vote: the winning (normalized) answer and how many agreed.

    ``answer`` is None when no sample had a non-empty answer; ``agreement`` is
    ``count / n`` (0.0 when ``n`` is 0).
    """

    model_config = ConfigDict(frozen=True)

    answer: str | None
    count: int
    n: int
    agreement: float
    #: a majority worth rewarding: the answer was given at least twice and no other as often
    clear: bool = False


def short_answer(text: str) -> str:
    """The normalized final short answer of a completion: its last number, else its last line.

    A number is written canonically (``1,250.00`` -> ``1250``, ``3.50`` -> ``3.5``);
    a line loses an "Answer:" prefix, surrounding markup and punctuation, and its case.

    >>> short_answer("3 + 4 = **7.0**."), short_answer("It is\\nAnswer: *Paris*."), short_answer("")
    ('7', 'paris', '')
    """
    number = last_number(text)
    if number is not None:
        return str(int(number)) if number.is_integer() else repr(number)
    line = _PREFIX.sub("", last_line(text).strip(_EDGES))
    return _SPACES.sub(" ", line.strip(_EDGES)).casefold()


def _normalized(answers: Sequence[str], normalize: Callable[[str], str] | None) -> list[str]:
    norm = short_answer if normalize is None else normalize
    return [norm(str(a)).strip() for a in answers]


def majority_vote(answers: Sequence[str], *,
                  normalize: Callable[[str], str] | None = None) -> Vote:
    """The majority of ``answers`` after ``normalize`` (default :func:`short_answer`).

    Ties go to the answer that occurs first; empty answers are counted in ``n``
    but never win.

    >>> majority_vote(["b", "a", "a", "b"], normalize=str.strip).answer
    'b'
    >>> majority_vote(["", "", "c"], normalize=str.strip).agreement  # doctest: +ELLIPSIS
    0.333...
    >>> majority_vote([]).answer is None
    True
    """
    normalized = _normalized(answers, normalize)
    counts = Counter(a for a in normalized if a)
    if not counts:
        return Vote(answer=None, count=0, n=len(normalized), agreement=0.0)
    # Counter keeps first-insertion order, and max() returns the first maximum: ties go first.
    answer = max(counts, key=lambda a: counts[a])
    top = counts[answer]
    return Vote(answer=answer, count=top, n=len(normalized), agreement=top / len(normalized),
                clear=top >= 2 and sum(c == top for c in counts.values()) == 1)


def vote_rewards(answers: Sequence[str], *,
                 normalize: Callable[[str], str] | None = None) -> list[float]:
    """TTRL's reward: 1.0 for each answer that agrees with the majority, else 0.0.

    An empty answer never agrees. With no clear majority (every answer different, a tie
    at the top, or all empty) every reward is 0.0: the group teaches nothing.

    >>> vote_rewards(["yes", "no", "Yes."], normalize=lambda a: a.strip(".").lower())
    [1.0, 0.0, 1.0]
    >>> vote_rewards(["4", "5", "4", "5"]), vote_rewards(["3", "5", "7"])
    ([0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    """
    return voted(answers, normalize=normalize)[1]


def voted(answers: Sequence[str], *, normalize: Callable[[str], str] | None = None
          ) -> tuple[Vote, list[float]]:
    """The vote and :func:`vote_rewards` of ``answers`` from one count: a caller that needs
    both (a GRPO group's rewards and its agreement) takes each answer and votes once.

    >>> vote, rewards = voted(["4", "5", "4"])
    >>> vote.answer, vote.agreement, rewards  # doctest: +ELLIPSIS
    ('4', 0.666..., [1.0, 0.0, 1.0])
    """
    normalized = _normalized(answers, normalize)
    vote = majority_vote(normalized, normalize=lambda a: a)
    if not vote.clear:
        # no clear majority (all different, or a tie at the top): rewarding whichever came
        # first would push the policy toward noise, so the group is neutral (all equal)
        return vote, [0.0] * len(normalized)
    return vote, [1.0 if a == vote.answer else 0.0 for a in normalized]
