"""The table of constraint keywords: one builder each, looked up by name.

The one place that joins the core builders
(:mod:`~agentic_loop.judges.checks.constraint_builders`), the IFEval ones
(:mod:`~agentic_loop.judges.checks.constraint_builders_ifeval`) and the checks
over an agent's episode (:mod:`~agentic_loop.judges.checks.episode_checks`). It returns
the builder's parts, not a feature, so that
:class:`~agentic_loop.judges.features.Feature` can rebuild a saved
constraint from here while this package never imports the feature module.

It also holds the one keyword that is not a built-in check: ``check``, a
user's own check function by reference (``"package.module:function"`` or a
name given to :func:`~agentic_loop.judges.check_refs.register_check`), so a
task file can say ``"constraints": {"check": "mypkg.checks:valid_invoice"}``
and a served graph's context can name a registered check.

Example:
    >>> build_constraint("no_commas", True).description
    'Do not use any commas.'
    >>> "word_count" in CONSTRAINT_KEYWORDS
    True
    >>> build_constraint("check", "operator:contains").check("a task", "task")
    True
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, cast

from agentic_loop.errors import ConfigError
from agentic_loop.judges.check_refs import resolve_check
from agentic_loop.judges.checks.constraint_builders import (
    BUILDERS,
    Built,
    bad_value,
    check_range,
)
from agentic_loop.judges.checks.constraint_builders_ifeval import IFEVAL_BUILDERS
from agentic_loop.judges.checks.episode_checks import EPISODE_BUILDERS

__all__ = ["CONSTRAINT_KEYWORDS", "build_constraint"]

_CHECK_VALUE = ("'package.module:function', a registered check name, or "
                "{\"ref\": ..., \"target\": [min, max]} for a check that returns a count")


def _user_check(value: Any) -> Built:
    """``check=reference``: the user's own function; its docstring's first line is the
    instruction (and failure hint)."""
    ref, target = value, None
    if isinstance(value, Mapping):
        if set(value) - {"ref", "target"} or "ref" not in value:
            raise bad_value("check", value, _CHECK_VALUE)
        ref, target = value["ref"], value.get("target")
    if not isinstance(ref, str) or not ref.strip():
        raise bad_value("check", value, _CHECK_VALUE)
    function = resolve_check(ref)
    lines = (inspect.getdoc(function) or "").strip().splitlines()
    description = lines[0] if lines else f"Pass the check {ref.strip()}."
    rng = check_range("check", target) if target is not None else None
    saved: Any = ref.strip() if rng is None else {"ref": ref.strip(), "target": list(rng)}
    return Built(saved, description, cast(Callable[[str, str], Any], function),
                 kind="count" if rng else "bool", target=rng)


_BUILDERS: dict[str, Callable[[Any], Built]] = {**BUILDERS, **IFEVAL_BUILDERS,
                                                "check": _user_check, **EPISODE_BUILDERS}
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
