"""Ready rubrics for the task families this library ships with.

Small judge models answer "true" to nearly every yes/no question about a
draft (measured with the embedded 135M model: "true, true, true" even for
"the capital of France is Berlin"). So in every ready rubric the Python
checks carry the decisive weight, and the LLM features can only break ties
between drafts that already satisfy the checks.

Example:
    >>> r = copywriting_rubric(word_range=(4, 10))
    >>> [(f.name, f.source, f.weight) for f in r]  # doctest: +NORMALIZE_WHITESPACE
    [('on_brief', 'llm', 1.0), ('word_count', 'check', 4.0), ('concrete_imagery', 'llm', 1.0),
     ('cliche_free', 'check', 4.0), ('engaging', 'llm', 1.0)]
    >>> math_rubric(42).evaluate("What is 6 x 7?", "6 x 7 = 42").score
    10.0
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentic_loop.judges.checks.constraint_features import constraint_feature
from agentic_loop.judges.checks.lexicon import CLICHES
from agentic_loop.judges.features import Feature
from agentic_loop.judges.rubric import Rubric

__all__ = ["code_rubric", "copywriting_rubric", "instruction_rubric", "math_rubric"]

#: Weight of each check in the copywriting rubric; each of the 3 LLM features weighs 1,
#: so one failed check costs more than every LLM feature can give back.
COPY_CHECK_WEIGHT = 4.0


def copywriting_rubric(word_range: tuple[int, int] = (4, 12), *,
                       cliches: Sequence[str] = CLICHES, version: str = "1") -> Rubric:
    """Short copy (taglines, headlines): on brief, word range, imagery, no clichés, engaging.

    The two checks (``word_count`` in ``word_range``, ``cliche_free`` against
    the shipped :data:`~agentic_loop.judges.checks.lexicon.CLICHES` or your list)
    weigh 4 each; the three LLM booleans weigh 1 each. A failed check thus
    costs more than all LLM features together: a draft failing a check
    never outscores one passing both, however the judge model answers.

    >>> copywriting_rubric((3, 6)).evaluate(
    ...     "Tagline for a bakery", "Warm rye at dawn, every day",
    ...     llm_values={"on_brief": True, "concrete_imagery": True, "engaging": False}).score
    9.090909
    """
    return Rubric(
        [
            Feature("on_brief", "It does what the task asks: the right product, audience and "
                    "purpose.", 1.0),
            constraint_feature("word_count", word_range, weight=COPY_CHECK_WEIGHT),
            Feature("concrete_imagery", "It uses a concrete, sensory image (something you can "
                    "see, hear, smell, taste or touch), not only abstract claims.", 1.0),
            constraint_feature(
                "exclude_words", list(cliches), name="cliche_free", weight=COPY_CHECK_WEIGHT,
                description='Avoid marketing clichés (such as "game-changer", "unleash", '
                '"next level", "cutting-edge").',
            ),
            Feature("engaging", "A reader would want to read on: it has a hook, a surprise or "
                    "a vivid benefit.", 1.0),
        ],
        name="copywriting",
        version=version,
    )


def instruction_rubric(*, features: Sequence[Feature] = (), version: str = "1",
                       **constraints: Any) -> Rubric:
    """Constrained instruction following: one check per constraint keyword (IFEval-style).

    >>> instruction_rubric(lowercase=True, exact_words=3).evaluate("t", "just three words").score
    10.0
    """
    return Rubric.for_constraints(features=features, name="instruction", version=version,
                                  **constraints)


def math_rubric(answer: float | str, *, tolerance: float | None = None,
                version: str = "1") -> Rubric:
    """A math answer: the last number of the reply must equal ``answer``.

    The score is all or nothing (0 or 10): a nearly right answer is wrong.

    >>> math_rubric(0.5, tolerance=0.01).evaluate("1/2 as decimal?", "about 0.499").score
    10.0
    """
    value: Any = answer if tolerance is None else {"value": answer, "tolerance": tolerance}
    return Rubric([constraint_feature("answer", value)], name="math", version=version)


def code_rubric(tests: str | Sequence[str], *, timeout_s: float = 5.0, memory_mb: int = 512,
                version: str = "1") -> Rubric:
    """Code with tests: credit is the share of ``tests`` that pass in the sandbox.

    The reply's first ```` ```python ```` block is run (or the whole reply
    when it has no fence); see :func:`~agentic_loop.judges.sandbox.run.run_python_tests`.

    >>> code_rubric(["assert sq(3) == 9", "assert sq(-2) == 4", "assert sq(0) == 1"]).evaluate(
    ...     "Write sq(x).", "```python\\ndef sq(x):\\n    return x * x\\n```").score
    6.666667
    """
    value: Any = {"tests": [tests] if isinstance(tests, str) else list(tests),
                  "timeout_s": timeout_s, "memory_mb": memory_mb}
    return Rubric([constraint_feature("python_tests", value)], name="code", version=version)
