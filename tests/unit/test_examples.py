"""The shipped example files load, and each golden task can be passed (its checks are sound)."""

from __future__ import annotations

from pathlib import Path

from agentic_loop.judges import rubric_for_task
from agentic_loop.tasks.spec import load_tasks

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

PASSING = {
    "tagline-12": "Stories for every reader, shelves for every mood, pages for every day",
    "haiku-lower": "grey clouds gather low\nsoft rain taps the window\nthe street drinks it in",
    "bullets-3": "- Better heart health\n- A clearer mind\n- Stronger legs and bones",
    "json-city": '{"city": "Tokyo", "country": "Japan"}',
    "math-17x3": "17 times 3 is 51",
    "sentences-2": "A compiler translates source code into machine code. It also reports errors.",
    "upper-motto": "WIN TOGETHER LEARN ALWAYS",
    "stated": "the ocean breathes in silver light",
}


def test_the_example_golden_set_loads_and_every_task_can_pass() -> None:
    tasks = load_tasks(EXAMPLES / "golden.jsonl")
    assert [t.id for t in tasks] == list(PASSING)
    for spec in tasks:
        rubric = spec.rubric() if spec.constraints else rubric_for_task(spec.task)
        checks = {f.name: f.run_check(spec.task, PASSING[spec.id]) for f in rubric.check_features}
        failed = {n: r for n, r in checks.items() if rubric[n].credit(r.value) < 1.0}
        assert failed == {}, (spec.id, failed)
