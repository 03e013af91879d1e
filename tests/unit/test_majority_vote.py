"""Majority vote, TTRL's label-free signal: deterministic, first-seen ties, empty never wins."""

from __future__ import annotations

import random

import pytest

from agentic_loop.judges import Vote, majority_vote, short_answer, vote_rewards


@pytest.mark.parametrize(("text", "expected"), [
    ("3 + 4 = **7**.", "7"),
    ("The total is $1,250.00", "1250"),
    ("so x = 3.50", "3.5"),
    ("-2", "-2"),
    ("Let me think.\nFinal answer: Paris.", "paris"),
    ("Answer:   `New   York`", "new york"),
    ("the answer is TRUE!", "true"),
    ("", ""),
    ("   \n  ", ""),
])
def test_short_answer_is_the_normalized_last_number_or_line(text: str, expected: str) -> None:
    assert short_answer(text) == expected


def test_majority_counts_normalized_answers_and_records_agreement() -> None:
    vote = majority_vote(["I think 12", "12.0", "It is 13.", "Answer: 12"])
    assert vote == Vote(answer="12", count=3, n=4, agreement=0.75, clear=True)


def test_ties_go_to_the_answer_seen_first_whatever_the_order_of_the_rest() -> None:
    assert majority_vote(["5", "6", "6", "5"]).answer == "5"
    assert majority_vote(["6", "5", "5", "6"]).answer == "6"
    answers = ["a", "b", "c", "b", "a", "c"]
    assert {majority_vote(answers, normalize=str.strip).answer for _ in range(20)} == {"a"}


def test_empty_answers_never_win_but_count_in_n() -> None:
    vote = majority_vote(["", "", "", "paris"], normalize=str.strip)
    assert vote.answer == "paris" and vote.count == 1 and vote.agreement == 0.25
    nothing = majority_vote(["", "  "], normalize=str.strip)
    assert nothing == Vote(answer=None, count=0, n=2, agreement=0.0)
    assert vote_rewards(["", "  "], normalize=str.strip) == [0.0, 0.0]
    assert majority_vote([]) == Vote(answer=None, count=0, n=0, agreement=0.0)


def test_vote_rewards_mark_agreement_with_the_majority() -> None:
    answers = ["The answer is 4", "4", "5", "", "four"]
    assert vote_rewards(answers) == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert vote_rewards(answers, normalize=lambda a: a[-1:]) == [1.0, 1.0, 0.0, 0.0, 0.0]


def test_the_vote_is_deterministic_and_the_majority_is_right_when_most_agree() -> None:
    rng = random.Random(0)
    for _ in range(50):
        answers = [str(rng.choice([7, 7, 7, 3, 9])) for _ in range(9)]
        first = majority_vote(answers)
        assert first == majority_vote(list(answers))
        counts = {a: answers.count(a) for a in answers}
        assert first.count == max(counts.values()) and counts[str(first.answer)] == first.count
        tied = sum(c == first.count for c in counts.values()) > 1
        assert sum(vote_rewards(answers)) == (0 if tied else first.count)  # a tie is neutral
