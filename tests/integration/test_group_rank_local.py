"""Group ranking on the real embedded model (SmolLM2-135M): junk in, valid scores out.

Sampled at temperature 2.0 with no nucleus cut, the tiny model writes junk; its
structured-output grammar still makes every ranking a valid, in-range answer on
the first attempt, so a group of n candidates always gets n scores from 0 to 10.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentic_loop.judges import GroupRanker, Rubric
from agentic_loop.judges.features import Feature
from agentic_loop.judges.group_rank import answer_schema
from agentic_loop.models import load_chat_model
from agentic_loop.models.wrappers import model_id_of

pytestmark = pytest.mark.slow

TASK = "Write a tagline for a bakery in at most 6 words."
CANDIDATES = ["Warm bread every single morning", "}}{{ null ,,, 7 7 7 ]]",
              "Bakery bakery bakery bakery bakery bakery bakery bakery"]


@pytest.fixture(scope="module")
def junk_judge():
    """The embedded model sampling at temperature 2.0 with top_p 1.0: it writes junk."""
    return load_chat_model("local", temperature=2.0, top_p=1.0, max_tokens=32)


def test_a_junk_emitting_model_still_gives_n_in_range_scores(junk_judge) -> None:
    rubric = Rubric([Feature("appealing", "The tagline makes you want to visit.", 1.0,
                             kind="bool")])
    ranker = GroupRanker(junk_judge, rubric, orders=2, seed=1)
    rankings = [ranker.rank(TASK, CANDIDATES),
                *ranker.rank_many([(TASK, CANDIDATES[::-1]), ("Say hi.", ["hi", "hello"])])]
    # unconstrained, the same model does not even write the schema's JSON
    raw = junk_judge.invoke(ranker.messages(TASK, CANDIDATES)).content
    with pytest.raises(ValidationError):
        answer_schema(3).model_validate_json(str(raw))
    for ranking, n in zip(rankings, (3, 3, 2), strict=True):
        assert ranking.ok, ranking.error
        assert ranking.attempts == 2  # one valid answer per order, no retry needed
        assert ranking.scores is not None and len(ranking.scores) == n
        assert all(0.0 <= s <= 10.0 for s in ranking.scores)
        for scores in ranking.per_order:
            assert len(scores) == n and all(s in set(map(float, range(11))) for s in scores)
        assert ranking.consistency is not None and 0.0 <= ranking.consistency <= 1.0
        assert ranking.judge == model_id_of(junk_judge) and ranking.best() in range(n)
