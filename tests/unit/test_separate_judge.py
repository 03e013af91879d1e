"""A judge model of its own: the judged features go to it, the checks stay Python (issue 34).

The generator writes; a *different* model answers the rubric's judged features, and
nothing else: the check is computed in Python and never asked of either model. The
round records which model judged, and a verdict the checks decided alone names none.
"""

from __future__ import annotations

from typing import Any

from agentic_loop.architectures import Reflection
from agentic_loop.judges import Feature, Rubric
from agentic_loop.testing import ScriptedChatModel


def _rubric() -> Rubric:
    return Rubric.for_constraints(exact_words=3, features=[
        Feature("vivid", "Uses concrete imagery."),
        Feature("on_brand", "Sounds like a bookshop."),
    ])


def test_a_separate_judge_receives_exactly_the_judged_features() -> None:
    seen: list[set[str]] = []

    def judged(schema: Any, messages: Any) -> dict[str, Any]:
        seen.append(set(schema.model_fields))
        return {"vivid": True, "on_brand": True, "overall_score": 9}

    writer = ScriptedChatModel(responses=["Books for you"], model_id="writer-m")
    judge = ScriptedChatModel(default_structured=judged, model_id="judge-m")
    result = Reflection(writer, _rubric(), judge=judge, max_iterations=1,
                        critique_text=False).run("Tagline for a bookshop, 3 words.")

    assert result.passed and result.score == 10.0
    assert seen == [{"vivid", "on_brand", "overall_score"}]  # the check never goes to a model
    assert [c.kind for c in writer.calls] == ["text"]  # the writer is never asked to judge
    assert [c.kind for c in judge.calls] == ["structured"]
    (round_,) = result.trajectory.rounds
    assert round_.judge == "judge-m" and round_.features["exact_words"] == 3


def test_a_verdict_the_checks_decided_names_no_judge() -> None:
    writer = ScriptedChatModel(responses=["far too many words here"], model_id="writer-m")
    judge = ScriptedChatModel(model_id="judge-m")  # would raise if it were asked
    arch = Reflection(writer, Rubric.for_constraints(exact_words=3), judge=judge,
                      max_iterations=1, critique_text=False)
    result = arch.run("Tagline for a bookshop, 3 words.")
    assert not result.passed and judge.calls == []
    assert result.trajectory.rounds[0].judge is None
