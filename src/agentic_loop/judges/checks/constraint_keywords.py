"""The table of constraint keywords: one builder each, looked up by name.

The one place that joins the core builders
(:mod:`~agentic_loop.judges.checks.constraint_builders`) and the IFEval ones
(:mod:`~agentic_loop.judges.checks.constraint_builders_ifeval`). It returns
the builder's parts, not a feature, so that
:class:`~agentic_loop.judges.features.Feature` can rebuild a saved
constraint from here while this package never imports the feature module.

Example:
    >>> build_constraint("no_commas", True).description
    'Do not use any commas.'
    >>> "word_count" in CONSTRAINT_KEYWORDS
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentic_loop.errors import ConfigError
from agentic_loop.judges.checks.constraint_builders import BUILDERS, Built
from agentic_loop.judges.checks.constraint_builders_ifeval import IFEVAL_BUILDERS

__all__ = ["CONSTRAINT_KEYWORDS", "build_constraint"]

_BUILDERS: dict[str, Callable[[Any], Built]] = {**BUILDERS, **IFEVAL_BUILDERS}
#: Every keyword ``constraint_feature`` and ``Rubric.for_constraints`` accept.
CONSTRAINT_KEYWORDS: tuple[str, ...] = tuple(_BUILDERS)


def build_constraint(keyword: str, value: Any) -> Built:
    """The checked value, instruction and check of ``keyword=value``; an unknown keyword is named.

    >>> build_constraint("word_limit", 10)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: unknown constraint 'word_limit'; valid keywords: ...
    """
    builder = _BUILDERS.get(keyword)
    if builder is None:
        raise ConfigError(
            f"unknown constraint {keyword!r}; valid keywords: {', '.join(CONSTRAINT_KEYWORDS)}")
    return builder(value)
