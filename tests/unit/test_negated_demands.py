"""A negated demand is never read as its opposite (issue 31, point 9).

A hinted task "Do not use the words 'we', 'our' or 'best'" once produced an
unchecked-constraints warning advising to *include* them. The phrasings
below are held out from the parser's own examples: each negates a word list
in a different way ("do not", "never", "avoid", "without", "no", "must not",
"forbidden"), alone, in a longer task and in a hinted task; none may give
``include_words`` with those words, and the warning may never advise them.
"""

from __future__ import annotations

import warnings

import pytest

from agentic_loop.architectures.settings import warn_unchecked_constraints
from agentic_loop.judges import Rubric
from agentic_loop.judges.checks.task_constraint_parser import constraints_from_task

NEGATED = [
    "Do not use the words 'we', 'our' or 'best'.",
    "Please don't mention the words 'cheap' and 'deal'.",
    "Never include the words 'cheap' or 'deal' anywhere.",
    "Avoid the terms: 'cheap', 'deal'.",
    "Write it without using the words 'cheap' or 'deal'.",
    "Your reply must not contain the words 'cheap' or 'deal'.",
    "It is forbidden to include the words 'cheap' or 'deal'.",
    "You should never, ever mention the words 'cheap' or 'deal'.",
    "Make sure you do not once say 'cheap' or 'deal'.",
    "Leave out the words 'cheap' and 'deal'.",
    "No use of the words 'cheap' or 'deal' is allowed.",
]


def _banned(task: str) -> set[str]:
    quoted = {w.strip("'") for w in task.split("'")[1::2]}
    return {w for w in quoted if w and w.isalpha()}


@pytest.mark.parametrize("demand", NEGATED)
@pytest.mark.parametrize("frame", [
    "{d}", "Write a tagline for a seaside bakery. {d} Keep it short.",
    "Write a tagline for a seaside bakery. {d}\n\nHint: an earlier answer was \"Our best "
    "deal\". Fix these requirements"])
def test_a_negated_word_list_is_never_a_demand_to_include(demand: str, frame: str):
    task = frame.format(d=demand)
    found = constraints_from_task(task)
    assert not _banned(demand) & set(found.get("include_words", [])), found


@pytest.mark.parametrize("demand", NEGATED)
def test_the_warning_never_advises_the_opposite(demand: str):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warn_unchecked_constraints(f"Write a tagline. {demand}",
                                   Rubric.for_constraints(word_count=(3, 12)))
    for warning in seen:
        assert "include_words" not in str(warning.message), str(warning.message)


@pytest.mark.parametrize("task, words", [
    ("Do not use the words 'we', 'our' or 'best'.", ["we", "our", "best"]),
    ("Don't say 'amazing'.", ["amazing"]),
    ("The answer must not mention the words 'tide' or 'moon'.", ["tide", "moon"]),
])
def test_common_negations_are_checked_as_exclusions(task: str, words: list[str]):
    assert constraints_from_task(task).get("exclude_words") == words


def test_a_positive_demand_next_to_a_negated_one_keeps_both():
    found = constraints_from_task("Mention the words 'tide' and 'salt', but do not use the "
                                  "word 'best'.")
    assert found["include_words"] == ["tide", "salt"] and found["exclude_words"] == ["best"]
