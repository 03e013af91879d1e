"""One gradable property of an output, and the credit its value earns.

A :class:`Feature` is either a **check** (a Python function of the task and
the output, computed, never asked of a model) or an **LLM feature** (a yes/no
or a count the judge model commits to through a typed schema). Both kinds
yield a *value* (``bool`` or ``int``) that :meth:`Feature.credit` maps to a
credit in ``[0, 1]``; a rubric weighs the credits into a score.

Counts need a target so a count becomes a credit: ``target=(lo, hi)`` gives
full credit inside the range and, outside it, loses credit in proportion to
the distance relative to the bound missed: 0 credit at a count of 0 below a
minimum, at twice a maximum above it, and one step past a bound of 0::

    credit = max(0, 1 - distance / max(bound, 1))

So a 15-word answer to "10 to 12 words" earns ``1 - 3/12 = 0.75``; a graded
signal instead of a cliff, which is what a refine loop needs to climb.

Example:
    >>> short = Feature("short", "At most 5 words.", 2.0,
    ...                 check=lambda task, out: len(out.split()), target=(1, 5))
    >>> short.source, short.kind, short.credit(8)
    ('check', 'count', 0.4)
    >>> vivid = Feature("vivid", "Uses concrete imagery.", 1.0)
    >>> vivid.source, vivid.kind, vivid.credit(True)
    ('llm', 'bool', 1.0)
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agentic_loop.errors import ConfigError, JudgeError
from agentic_loop.judges.check_refs import CheckReferenceError, check_reference, resolve_check

# CheckResult and the value types live below this module and the constraint builders (which
# return checks), so the two never import each other; re-exported here as before.
from agentic_loop.judges.check_result import CheckFn, CheckResult, FeatureKind, FeatureValue

__all__ = [
    "LLM_COUNT_LIMIT",
    "RESERVED_NAMES",
    "CheckFn",
    "CheckResult",
    "Feature",
    "FeatureKind",
    "FeatureValue",
    "set_constraint_builder",
]

#: Upper bound of an LLM count in the judge schema (raised to twice a larger target).
LLM_COUNT_LIMIT = 100

#: Names the critic's schema uses for itself; features may not take them.
RESERVED_NAMES = frozenset({"critique", "overall_score"})

#: ``constraint_feature(keyword, value, name=, weight=, description=)``: how a saved constraint
#: becomes a feature again. Set by :mod:`agentic_loop.judges.checks.constraint_features` when
#: it is imported (``agentic_loop.judges`` imports it, so it is set before any rubric is read):
#: the checks build features and import this module, so this module never imports them.
_constraint_feature: Callable[..., Feature] | None = None


def set_constraint_builder(build: Callable[..., Feature]) -> None:
    """Name the function that builds a constraint's feature (the checks package calls it)."""
    global _constraint_feature
    _constraint_feature = build


def _build_constraint(keyword_: str, value: Any, **kw: Any) -> Feature:
    if _constraint_feature is None:
        raise ConfigError(f"constraint {keyword_!r} cannot be rebuilt: the constraint checks "
                          "are not loaded; import agentic_loop.judges first")
    return _constraint_feature(keyword_, value, **kw)




def _validate_target(name: str, target: Any) -> tuple[int, int | None]:
    if not isinstance(target, (tuple, list)) or len(target) != 2:
        raise ConfigError(
            f"feature {name!r}: target must be a pair (min, max), got {target!r}; "
            "use (n, n) for an exact count and (n, None) for 'at least n'"
        )
    lo, hi = target
    if isinstance(lo, bool) or not isinstance(lo, int) or lo < 0:
        raise ConfigError(f"feature {name!r}: target min must be an int >= 0, got {lo!r}")
    if hi is not None and (isinstance(hi, bool) or not isinstance(hi, int) or hi < lo):
        raise ConfigError(
            f"feature {name!r}: target max must be None or an int >= min ({lo}), got {hi!r}"
        )
    return lo, hi


@dataclass(frozen=True)
class Feature:
    """A named, weighted property of an output, judged by Python or by the LLM.

    Args:
        name: a Python identifier (it becomes a field of the judge's schema).
        description: what the property means; shown to the judge model, in
            explanations and, when a check fails, as the hint to fix it, so
            write it as the requirement (``"Use between 10 and 12 words."``).
        weight: relative importance, ``>= 0``.
        check: ``fn(task, output) -> bool | int | CheckResult``; makes this a
            check feature, computed in Python and never asked of the LLM. May
            be given as a reference, ``"package.module:function"`` or a name
            registered with :func:`~agentic_loop.judges.check_refs.register_check`,
            resolved now; a saved rubric stores the check by such a reference
            (:mod:`agentic_loop.judges.check_refs`).
        kind: ``"bool"`` or ``"count"``. Defaults to ``"count"`` when a
            ``target`` is given, else ``"bool"``.
        target: ``(min, max)`` for a count (``max`` may be ``None``).
        constraint: the ``(keyword, value)`` a constraint feature was built
            from, so the rubric can be saved and rebuilt; set by
            :func:`~agentic_loop.judges.checks.constraint_features.constraint_feature`.

    >>> Feature("bad name", "x", 1.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: feature name 'bad name' is not a valid Python identifier; ...
    """

    name: str
    description: str
    weight: float = 1.0
    check: CheckFn | str | None = field(default=None, compare=False)
    kind: FeatureKind | None = None
    target: tuple[int, int | None] | None = None
    constraint: tuple[str, Any] | None = field(default=None, compare=False)
    #: The reference the check was given as (saved back as given); None for a callable.
    check_ref: str | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        name = self.name
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            suggestion = re.sub(r"\W+", "_", str(name)).strip("_") or "my_feature"
            if suggestion[0].isdigit() or keyword.iskeyword(suggestion):
                suggestion = f"f_{suggestion}"
            raise ConfigError(
                f"feature name {name!r} is not a valid Python identifier; use letters, digits "
                f"and underscores, e.g. {suggestion!r}"
            )
        if name.startswith("_"):
            raise ConfigError(f"feature name {name!r} may not start with '_' (pydantic ignores it)")
        if name in RESERVED_NAMES:
            raise ConfigError(
                f"feature name {name!r} is reserved for the critic's own fields "
                f"({', '.join(sorted(RESERVED_NAMES))}); pick another name"
            )
        if not isinstance(self.description, str) or not self.description.strip():
            raise ConfigError(f"feature {name!r}: description must be a non-empty string")
        weight = self.weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight >= 0:
            raise ConfigError(f"feature {name!r}: weight must be a number >= 0, got {weight!r}")
        if weight == float("inf"):
            raise ConfigError(f"feature {name!r}: weight must be finite, got {weight!r}")
        object.__setattr__(self, "weight", float(weight))
        if isinstance(self.check, str):
            try:
                function = resolve_check(self.check)
            except CheckReferenceError as exc:
                raise CheckReferenceError(f"feature {name!r}: {exc}") from None
            object.__setattr__(self, "check_ref", self.check.strip())
            object.__setattr__(self, "check", function)
        if self.check is not None and not callable(self.check):
            raise ConfigError(
                f"feature {name!r}: check must be a callable (task, output) -> bool | int, "
                f"got {type(self.check).__name__}"
            )
        if self.target is not None:
            object.__setattr__(self, "target", _validate_target(name, self.target))
        kind = self.kind if self.kind is not None else ("count" if self.target else "bool")
        if kind not in ("bool", "count"):
            raise ConfigError(f"feature {name!r}: kind must be 'bool' or 'count', got {kind!r}")
        if kind == "count" and self.target is None:
            raise ConfigError(
                f"feature {name!r}: a count feature needs target=(min, max) so a count "
                "can be turned into credit, e.g. target=(0, 0) for 'none at all'"
            )
        if kind == "bool" and self.target is not None:
            raise ConfigError(f"feature {name!r}: a bool feature takes no target")
        object.__setattr__(self, "kind", kind)

    @property
    def source(self) -> Literal["check", "llm"]:
        """``"check"`` when computed in Python, ``"llm"`` when the judge model answers it."""
        return "check" if self.check is not None else "llm"

    @property
    def count_limit(self) -> int:
        """The largest count the judge schema accepts for this (count) feature.

        >>> Feature("n", "How many claims?", target=(0, 80)).count_limit
        160
        """
        lo, hi = self.target or (0, 0)
        return max(LLM_COUNT_LIMIT, 2 * (hi if hi is not None else lo))

    def unmet_value(self) -> FeatureValue:
        """The value that earns no credit: what a feature scores when it was not judged.

        ``False`` for a yes/no feature; for a count, the nearest count with
        credit 0 (0 below a minimum, else past the maximum). A count with no
        maximum and a minimum of 0 cannot miss; it gets 0.

        >>> [Feature("n", "x", target=t).unmet_value() for t in ((2, 5), (0, 0), (0, 4))]
        [0, 1, 8]
        >>> Feature("ok", "Fine?").unmet_value()
        False
        """
        if self.kind == "bool":
            return False
        lo, hi = self.target or (0, None)
        if lo > 0 or hi is None:
            return 0
        return hi + max(hi, 1)

    def validate_value(self, value: Any) -> FeatureValue:
        """Return ``value`` if it fits this feature's kind, else raise a clear error.

        >>> Feature("ok", "Fine?").validate_value(1)
        Traceback (most recent call last):
        ...
        agentic_loop.errors.ConfigError: feature 'ok' is a bool feature; got 1 (int), ...
        """
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise ConfigError(
                    f"feature {self.name!r} is a bool feature; got {value!r} "
                    f"({type(value).__name__}), expected True or False"
                )
            return value
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            hint = "" if self.source == "llm" else " (a check returning a count needs a target)"
            raise ConfigError(
                f"feature {self.name!r} is a count feature; got {value!r} "
                f"({type(value).__name__}), expected an int >= 0{hint}"
            )
        return value

    def credit(self, value: FeatureValue) -> float:
        """Map a value to a credit in ``[0, 1]`` (see the module docstring).

        >>> f = Feature("bullets", "3 to 5 bullets.", target=(3, 5))
        >>> [f.credit(n) for n in (0, 2, 4, 6, 10)]
        [0.0, 0.6666666666666667, 1.0, 0.8, 0.0]
        """
        value = self.validate_value(value)
        if self.kind == "bool":
            return 1.0 if value else 0.0
        assert self.target is not None
        lo, hi = self.target
        if value < lo:
            bound, distance = lo, lo - value
        elif hi is not None and value > hi:
            bound, distance = hi, value - hi
        else:
            return 1.0
        return max(0.0, 1.0 - distance / max(bound, 1))

    def describe_target(self) -> str:
        """The target as words, for explanations (empty for bool features).

        >>> Feature("n", "x", target=(2, None)).describe_target()
        'at least 2'
        """
        if self.target is None:
            return ""
        lo, hi = self.target
        if hi is None:
            return f"at least {lo}"
        return f"exactly {lo}" if lo == hi else f"{lo} to {hi}"

    def run_check(self, task: str, output: str) -> CheckResult:
        """Run this check feature on ``(task, output)`` and validate what it returns.

        >>> Feature("has_x", "Mentions x.", check=lambda t, o: "x" in o).run_check("", "xyz")
        CheckResult(value=True, detail='')
        """
        if self.check is None:
            raise ConfigError(
                f"feature {self.name!r} is judged by the LLM; it has no Python check to run"
            )
        try:
            raw = self.check(task, output)  # type: ignore[operator]  # a str is resolved on init
        except Exception as err:  # a broken check must not pass silently as "False"
            raise JudgeError(
                f"check of feature {self.name!r} raised {type(err).__name__}: {err}; "
                "fix the check function (it receives (task, output) strings)"
            ) from err
        result = raw if isinstance(raw, CheckResult) else CheckResult(raw)
        return CheckResult(self.validate_value(result.value), result.detail)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description that :meth:`from_dict` (or a rubric) rebuilds.

        A custom Python check is saved by reference (``"check":
        "package.module:function"`` or its registered name), never as code; a
        lambda or a nested function has no reference and cannot be saved.

        >>> Feature("engaging", "Makes you want to read on.", 2).to_dict()
        ... # doctest: +NORMALIZE_WHITESPACE
        {'name': 'engaging', 'description': 'Makes you want to read on.', 'weight': 2.0,
         'kind': 'bool'}
        >>> Feature("close", "Close enough.", check="math:isclose").to_dict()["check"]
        'math:isclose'
        """
        if self.constraint is not None:
            keyword_, value = self.constraint
            saved: dict[str, Any] = {"name": self.name, "weight": self.weight,
                                     "constraint": keyword_, "value": value}
            if self.description != _build_constraint(keyword_, value).description:
                saved["description"] = self.description  # only an override is worth saving
            return saved
        reference, check = None, self.check
        if check is not None:
            assert not isinstance(check, str)  # a reference string is resolved on init
            reference = self.check_ref or check_reference(check, feature=self.name)
        data: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "weight": self.weight,
            "kind": self.kind,
        }
        if self.target is not None:
            data["target"] = list(self.target)
        if reference is not None:
            data["check"] = reference
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Feature:
        """Rebuild a feature saved by :meth:`to_dict`.

        >>> Feature.from_dict({"name": "n_claims", "description": "Claims made.",
        ...                    "kind": "count", "target": [0, 2]}).target
        (0, 2)
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"a feature must be a mapping, got {type(data).__name__}: {data!r}")
        if "constraint" in data:
            unknown = set(data) - {"name", "weight", "constraint", "value", "description"}
            if unknown:
                raise ConfigError(
                    f"constraint feature {data.get('name')!r} has unknown keys {sorted(unknown)}; "
                    "expected name, weight, constraint, value, description"
                )
            return _build_constraint(
                data["constraint"], data.get("value"), name=data.get("name"),
                weight=data.get("weight", 1.0), description=data.get("description"),
            )
        unknown = set(data) - {"name", "description", "weight", "kind", "target", "check"}
        missing = {"name", "description"} - set(data)
        if unknown or missing:
            raise ConfigError(
                f"feature {data.get('name')!r}: unknown keys {sorted(unknown)}, missing keys "
                f"{sorted(missing)}; expected name, description, weight, kind, target, check"
            )
        check = data.get("check")
        if check is not None and not isinstance(check, str):
            raise CheckReferenceError(
                f"feature {data.get('name')!r}: a saved check must be a reference string "
                f"('package.module:function' or a registered name), got {check!r:.80}")
        target = data.get("target")
        return cls(
            data["name"], data["description"], data.get("weight", 1.0), check=check,
            kind=data.get("kind"), target=tuple(target) if isinstance(target, list) else target,
        )
