"""Constraints declared as data, turned into check features.

A task file can say ``{"task": "...", "constraints": {"word_count": [10, 12],
"exclude_words": ["we"]}}``; :func:`constraint_feature` turns each keyword
into a :class:`~agentic_loop.judges.features.Feature` whose check is pure
Python (see :mod:`agentic_loop.judges.checks.text_measures`; each keyword's builder
is in :mod:`agentic_loop.judges.checks.constraint_builders`), whose description is the
instruction to give the model, and which remembers its ``(keyword, value)``
so a rubric built from constraints saves and loads as plain JSON.

Keywords (:data:`CONSTRAINT_KEYWORDS`): ``word_count=(min, max)``,
``exact_words=n``, ``sentence_count=(min, max)``, ``include_words=[...]``,
``exclude_words=[...]`` (whole words, case-insensitive), ``regex=pattern``
(``re.search``), ``json=True`` or a JSON schema, ``lowercase=True``,
``uppercase=True``, ``no_commas=True``, ``bullet_count=(min, max)``,
``starts_with=text``, ``ends_with=text``, ``answer=number | text |
{"value": v, "tolerance": t}`` and ``python_tests=[...] | {"tests": [...],
"timeout_s": s, "memory_mb": m}``. Layout, frequency and language keywords
(built in :mod:`agentic_loop.judges.checks.constraint_builders_ifeval`):
``paragraph_count=(min, max) | {"count": (min, max), "separator": "***"}``,
``paragraph_first_word={"index": i, "word": w}``, ``title=True`` (a
``<<title>>``), ``postscript="P.S."``, ``quoted=True``,
``highlight_count=(min, max)`` (``*highlights*``), ``section_count=(min, max) |
{"count": (min, max), "marker": "SECTION"}``, ``capital_word_count=(min,
max)``, ``word_frequency={"word": w, "count": (min, max)}``,
``letter_frequency={"letter": c, "count": (min, max)}``,
``placeholder_count=(min, max)`` (``[placeholders]``), ``first_word=w``,
``repeat_request=text``, ``two_responses=True`` and ``language="de"`` (a code
or name). Any ``max`` may be ``None`` (no upper bound). Your own verifier:
``check="package.module:function"`` (or a registered name; see
:mod:`agentic_loop.judges.check_refs`), described by its docstring's first line.
Over an agent's episode (:mod:`agentic_loop.judges.checks.episode_checks`):
``tool_called="calculator" | {"name": n, "args": {...}}``, ``no_tool_errors=True``,
``max_steps=n``, ``max_tool_calls=n``, ``verified_with="run_tests" | {"tool": n,
"contains": text}`` and ``restates_tool_result=True | "calculator"``.

Rules shared by all: a blank output fails every yes/no constraint (an empty
reply complies with nothing), and ``answer`` never reveals the expected
value, neither in the instruction nor in a failure hint, so a refine prompt
built from them cannot leak it.

Example:
    >>> f = constraint_feature("exclude_words", ["we", "our"])
    >>> f.name, f.description
    ('exclude_words', 'Do not use the words "we", "our".')
    >>> f.run_check("", "Our shop is open.")
    CheckResult(value=False, detail='found "our"')
    >>> constraints_to_text(word_count=(10, 12), no_commas=True)
    '- Use between 10 and 12 words.\\n- Do not use any commas.'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentic_loop.judges.checks.constraint_builders import DEFAULT_ANSWER_TOLERANCE
from agentic_loop.judges.checks.constraint_keywords import CONSTRAINT_KEYWORDS, build_constraint
from agentic_loop.judges.features import Feature, set_constraint_builder

__all__ = [
    "CONSTRAINT_KEYWORDS",
    "DEFAULT_ANSWER_TOLERANCE",
    "constraint_feature",
    "constraint_features",
    "constraints_to_text",
]

def constraint_feature(
    keyword: str, value: Any, *, name: str | None = None, weight: float = 1.0,
    description: str | None = None,
) -> Feature:
    """Build the check feature for one constraint.

    ``name`` defaults to the keyword and ``description`` (the instruction and
    failure hint) to the keyword's own wording; override it when the value is
    too long to show a model, e.g. a lexicon of hundreds of phrases.

    >>> f = constraint_feature("word_count", (10, 12), weight=3)
    >>> f.kind, f.target, f.constraint
    ('count', (10, 12), ('word_count', [10, 12]))
    >>> constraint_feature("word_limit", 10)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: unknown constraint 'word_limit'; valid keywords: ...
    """
    built = build_constraint(keyword, value)
    return Feature(
        name or keyword, description or built.description, weight, check=built.check,
        kind=built.kind, target=built.target, constraint=(keyword, built.value),
    )


# a saved rubric's constraint features are rebuilt by Feature.from_dict through this
set_constraint_builder(constraint_feature)


def constraint_features(constraints: Mapping[str, Any]) -> list[Feature]:
    """One feature per constraint, in the order given; ``None`` / ``False`` values are skipped.

    Skipping lets task files write ``"lowercase": false`` for "not required".

    >>> [f.name for f in constraint_features({"no_commas": True, "lowercase": False})]
    ['no_commas']
    """
    return [
        constraint_feature(keyword, value)
        for keyword, value in constraints.items()
        if value is not None and value is not False
    ]


def constraints_to_text(**constraints: Any) -> str:
    """The constraints as a bullet list of plain instructions, for a prompt.

    >>> print(constraints_to_text(exact_words=12, starts_with="Books"))
    - Use exactly 12 words.
    - Start with "Books".
    """
    return "\n".join(f"- {f.description}" for f in constraint_features(constraints))
