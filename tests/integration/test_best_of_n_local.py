"""Best-of-n and few-shot exemplars on the real embedded model and embedder (issue #20)."""

from __future__ import annotations

import pytest

from agentic_loop.architectures import ArchiveRefine, Reflection
from agentic_loop.judges import Rubric
from agentic_loop.memory import Archive
from agentic_loop.models.wrappers import chat_model_of, model_id_of

pytestmark = pytest.mark.slow

TASK = "Write a tagline for a bakery in exactly 4 words."


def test_best_of_n_decodes_its_samples_together(local_llm):
    engine = chat_model_of(local_llm).engine
    before = dict(engine.stats)
    result = Reflection(local_llm, rubric=Rubric.for_constraints(exact_words=4),
                        samples_per_round=4, max_iterations=1).run(TASK)
    assert result.ok and result.usage.llm_calls == 4
    requests = engine.stats["requests"] - before["requests"]
    batches = engine.stats["batches"] - before["batches"]
    assert requests == 4 and batches < 4  # the samples shared decoding batches
    [round_] = result.trace
    assert round_.model == model_id_of(local_llm) and len(round_.alternatives) == 3
    assert result.usage.llm_seconds > 0
    best = (round_.passed, round_.score)
    assert all((c.passed, c.score) <= best for c in round_.alternatives)


def test_a_warm_archive_shows_similar_exemplars_as_turns(local_llm, real_embedder, tmp_path):
    archive = Archive(tmp_path / "archive", embedder=real_embedder)
    archive.add("Write a tagline for a bakery shop in exactly 4 words.", "Warm bread every morning",
                metadata={"constraint_kinds": ["exact_words"]})
    archive.add("Describe the ocean in at most 8 words, all in lowercase.",
                "blue waves under a quiet sky", metadata={"constraint_kinds": ["lowercase"]})
    result = ArchiveRefine(local_llm, rubric=Rubric.for_constraints(exact_words=4),
                           archive=archive, max_iterations=1).run(TASK)
    assert result.ok and len(result.exemplar_ids) == 1  # the ocean is neither similar nor kin
    prompt = result.trace[0].prompt
    assert prompt is not None
    assert [m["role"] for m in prompt.messages()] == ["system", "user", "assistant", "user"]
    if result.trace[0].draft.lower().rstrip(".!") == "warm bread every morning":
        assert "exemplar_copy" in result.trace[0].guards and not result.passed
