"""A weighted set of features, and the pure function from their values to a score.

``Rubric.score(values)`` is the deciding number of every loop in this library,
so it is deliberately boring: each feature's value becomes a credit in
``[0, 1]`` (see :meth:`Feature.credit`), and the score is the weighted share
of credit earned, on 0-10::

    score = 10 * sum(weight_i * credit_i) / sum(weight_i)

Same values, same score, every time; no model is involved. The judge model
only supplies the values of LLM features; check features are computed here.

Example:
    >>> from agentic_loop.judges.features import Feature
    >>> rubric = Rubric.for_constraints(
    ...     word_count=(10, 12), exclude_words=["we", "our"],
    ...     features=[Feature("vivid", "Uses concrete, sensory imagery.", 1.0)])
    >>> rubric.names
    ('word_count', 'exclude_words', 'vivid')
    >>> rubric.score({"word_count": 11, "exclude_words": True, "vivid": False})
    6.666667
    >>> ev = rubric.evaluate("Write a tagline.", "We sell books.", llm_values={"vivid": True})
    >>> ev.values, ev.score
    ({'word_count': 3, 'exclude_words': False, 'vivid': True}, 4.333333)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import nullcontext
from typing import Any

from agentic_loop.episodes import Episode, judging_episode
from agentic_loop.errors import ConfigError
from agentic_loop.judges.checks.constraint_features import CONSTRAINT_KEYWORDS, constraint_features
from agentic_loop.judges.evaluation import Evaluation, FeatureResult
from agentic_loop.judges.features import CheckResult, Feature, FeatureValue
from agentic_loop.judges.guards import GuardReport, inspect_output

__all__ = ["CheckResults", "Rubric", "saved_llm_features"]

_SCORE_DIGITS = 6  # rounding keeps float noise (7.4999999) out of logs and comparisons


class CheckResults(dict[str, CheckResult]):
    """Check feature name -> result, plus the reward-hacking guards run on the same output.

    A plain mapping to every caller; :meth:`Rubric.compose` reads ``guards``
    so that an output a guard voids earns no check credit on any path
    (``evaluate``, the critic, checks-first).
    """

    def __init__(self, results: Mapping[str, CheckResult], guards: GuardReport) -> None:
        super().__init__(results)
        self.guards = guards


class Rubric:
    """Features with weights; scores outputs on 0-10 and explains each score.

    Args:
        features: at least one :class:`Feature`; names must be unique and the
            weights must not all be zero.
        name, version: identify the rubric in evaluations and trajectories,
            so scores from different rubric versions are never mixed up.
    """

    def __init__(self, features: Sequence[Feature], *, name: str = "rubric",
                 version: str = "1") -> None:
        if isinstance(features, Feature) or not isinstance(features, Sequence):
            raise ConfigError("Rubric takes a list of Feature objects, e.g. Rubric([Feature(...)])")
        features = tuple(features)
        if not features:
            raise ConfigError(f"rubric {name!r} has no features; give it at least one Feature")
        for f in features:
            if not isinstance(f, Feature):
                raise ConfigError(
                    f"rubric {name!r}: every item must be a Feature, got {type(f).__name__}: {f!r}"
                )
        seen: set[str] = set()
        dupes = [f.name for f in features if f.name in seen or seen.add(f.name)]  # type: ignore[func-returns-value]
        if dupes:
            raise ConfigError(
                f"rubric {name!r}: duplicate feature names {sorted(set(dupes))}; "
                "every feature needs its own name (pass name= to constraint_feature)"
            )
        if sum(f.weight for f in features) <= 0:
            raise ConfigError(
                f"rubric {name!r}: all weights are zero; give some feature a weight > 0")
        if not isinstance(name, str) or not name or not isinstance(version, str) or not version:
            raise ConfigError(f"rubric name and version must be non-empty strings, got {name!r}, "
                              f"{version!r}; pass both as text")
        self._features = features
        self._by_name = {f.name: f for f in features}
        self._total_weight = sum(f.weight for f in features)
        self.name = name
        self.version = version

    # -- construction -------------------------------------------------------

    @classmethod
    def for_constraints(cls, *, features: Sequence[Feature] = (), name: str = "constraints",
                        version: str = "1", **constraints: Any) -> Rubric:
        """A rubric of one check per constraint keyword, plus any extra ``features``.

        Keywords are listed in
        :data:`~agentic_loop.judges.checks.constraint_features.CONSTRAINT_KEYWORDS`;
        ``None`` or ``False`` values are skipped. Each constraint weighs 1.

        >>> Rubric.for_constraints(lowercase=True, no_commas=True).evaluate(
        ...     "t", "all small no commas").score
        10.0
        """
        built = constraint_features(constraints)
        if not built and not features:
            raise ConfigError(
                "Rubric.for_constraints needs at least one constraint or feature; valid keywords: "
                + ", ".join(CONSTRAINT_KEYWORDS)
            )
        return cls([*built, *features], name=name, version=version)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; :meth:`from_dict` rebuilds an equal rubric.

        >>> r = Rubric.for_constraints(word_count=(5, 9), json=True)
        >>> Rubric.from_dict(r.to_dict()).to_dict() == r.to_dict()
        True
        """
        return {"name": self.name, "version": self.version,
                "features": [f.to_dict() for f in self._features]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Rubric:
        """Rebuild a rubric saved with :meth:`to_dict` (e.g. from a task file or trajectory)."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"a saved rubric must be a mapping, got {type(data).__name__}")
        if "features" not in data:
            raise ConfigError(
                "a saved rubric must be a mapping with a 'features' list "
                f"(as written by Rubric.to_dict), got {data!r:.200}"
            )
        if not isinstance(data["features"], list):
            raise ConfigError(
                f"a saved rubric's 'features' must be a list, got {data['features']!r:.200}")
        unknown = set(data) - {"name", "version", "features"}
        if unknown:
            raise ConfigError(f"a saved rubric has unknown keys {sorted(unknown)}; "
                             "expected name, version, features")
        return cls([Feature.from_dict(f) for f in data["features"]],
                   name=data.get("name", "rubric"), version=str(data.get("version", "1")))

    # -- introspection ------------------------------------------------------

    @property
    def features(self) -> tuple[Feature, ...]:
        """All features, in order."""
        return self._features

    @property
    def names(self) -> tuple[str, ...]:
        """Feature names, in order."""
        return tuple(self._by_name)

    @property
    def llm_features(self) -> tuple[Feature, ...]:
        """The features the judge model answers."""
        return tuple(f for f in self._features if f.source == "llm")

    @property
    def check_features(self) -> tuple[Feature, ...]:
        """The features computed in Python."""
        return tuple(f for f in self._features if f.source == "check")

    @property
    def constraints(self) -> dict[str, Any]:
        """The ``keyword -> value`` of the features built from constraints.

        >>> Rubric.for_constraints(exact_words=12, no_commas=True).constraints
        {'exact_words': 12, 'no_commas': True}
        """
        return {f.constraint[0]: f.constraint[1] for f in self._features if f.constraint}

    def describe(self) -> str:
        """Every feature's description as a bullet list, ready for a generation prompt.

        >>> print(Rubric.for_constraints(word_count=(10, 12), lowercase=True).describe())
        - Use between 10 and 12 words.
        - Write in lowercase only, with no capital letters.
        """
        return "\n".join(f"- {f.description}" for f in self._features)

    def __getitem__(self, name: str) -> Feature:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"rubric {self.name!r} has no feature {name!r}; "
                           f"it has {', '.join(self.names)}") from None

    def __iter__(self) -> Iterator[Feature]:
        return iter(self._features)

    def __len__(self) -> int:
        return len(self._features)

    def __repr__(self) -> str:
        parts = ", ".join(f"{f.name}[{f.source}:{f.kind}]x{f.weight:g}" for f in self._features)
        return f"Rubric({self.name!r} v{self.version}: {parts})"

    # -- scoring ------------------------------------------------------------

    def _check_names(self, given: Mapping[str, Any], expected: Sequence[str], what: str) -> None:
        missing = [n for n in expected if n not in given]
        extra = [n for n in given if n not in expected]
        if missing or extra:
            raise ConfigError(
                f"rubric {self.name!r}: {what} must have exactly the features "
                f"{list(expected)}; missing {missing}, unexpected {extra}"
            )

    def score(self, values: Mapping[str, FeatureValue]) -> float:
        """The 0-10 score of a full set of feature values; pure and deterministic.

        >>> r = Rubric.for_constraints(exact_words=4, no_commas=True)
        >>> r.score({"exact_words": 5, "no_commas": True})
        8.75
        """
        self._check_names(values, self.names, "values")
        earned = sum(f.weight * f.credit(values[f.name]) for f in self._features)
        return round(10.0 * earned / self._total_weight, _SCORE_DIGITS)

    def run_checks(self, task: str, output: str, *,
                   episode: Episode | None = None) -> dict[str, CheckResult]:
        """Compute every check feature on ``(task, output)``; no model involved.

        ``episode``: the agent episode that produced ``output``, read by the episode
        checks and guards (``None`` leaves the
        :func:`~agentic_loop.episodes.current_episode` as it is).

        >>> Rubric.for_constraints(exact_words=2).run_checks("t", "Hi there")
        {'exact_words': CheckResult(value=2, detail='2 words')}
        """
        for label, text in (("task", task), ("output", output)):
            if not isinstance(text, str):
                raise ConfigError(
                    f"{label} must be a string, got {type(text).__name__}: {text!r:.80}")
        with judging_episode(episode) if episode is not None else nullcontext():
            results = {f.name: f.run_check(task, output) for f in self.check_features}
            return CheckResults(results, self.inspect(task, output))

    def inspect(self, task: str, output: str, *, exemplars: Sequence[str] = ()) -> GuardReport:
        """The reward-hacking guards on ``output`` (see :mod:`agentic_loop.judges.guards`).

        The rubric's own feature descriptions are the wording an output may
        not recite back.

        >>> Rubric.for_constraints(lowercase=True).inspect("t", "").flags
        ['empty']
        """
        return inspect_output(task, output, exemplars=exemplars,
                              check_texts=[f.description for f in self._features])

    def compose(self, check_results: Mapping[str, CheckResult],
                llm_values: Mapping[str, FeatureValue] | None = None) -> Evaluation:
        """Build the :class:`Evaluation` from computed checks and the judge's values."""
        self._check_names(check_results, [f.name for f in self.check_features], "check results")
        llm_names = [f.name for f in self.llm_features]
        llm_values = dict(llm_values or {})
        clash = [n for n in llm_values if n in check_results]
        if clash:
            raise ConfigError(
                f"rubric {self.name!r}: {clash} are check features, computed in Python; "
                "they are never taken from the LLM, so leave them out of llm_values"
            )
        if llm_names and not llm_values:
            raise ConfigError(
                f"rubric {self.name!r} has LLM features {llm_names}; pass llm_values={{...}} "
                "with their values or judge with Critic(llm, rubric).critique(task, output)"
            )
        self._check_names(llm_values, llm_names, "llm_values")
        guards = getattr(check_results, "guards", None)
        voided = guards.voids if isinstance(guards, GuardReport) else None
        results: list[FeatureResult] = []
        for f in self._features:
            if f.source == "check":
                value, detail = check_results[f.name].value, check_results[f.name].detail
            else:
                value, detail = f.validate_value(llm_values[f.name]), ""
            credit = f.credit(value)
            if voided and f.source == "check":
                credit, detail = 0.0, f"void ({voided})"
            max_points = 10.0 * f.weight / self._total_weight
            results.append(FeatureResult(
                name=f.name, description=f.description, source=f.source, kind=f.kind or "bool",
                value=value, credit=credit, weight=f.weight, points=credit * max_points,
                max_points=max_points, target=f.describe_target(), detail=detail,
            ))
        earned = sum(r.weight * r.credit for r in results)
        score = round(10.0 * earned / self._total_weight, _SCORE_DIGITS)
        return Evaluation(score=score, features=results, rubric=self.name,
                          rubric_version=self.version,
                          guards=guards.reasons if isinstance(guards, GuardReport) else {},
                          void=voided)

    def evaluate(self, task: str, output: str,
                 llm_values: Mapping[str, FeatureValue] | None = None, *,
                 episode: Episode | None = None) -> Evaluation:
        """Score ``output`` for ``task``: run the checks, add ``llm_values``, compose.

        A rubric of checks only needs no ``llm_values`` and no model at all;
        ``episode`` is the agent episode behind ``output`` (see :meth:`run_checks`).

        >>> from agentic_loop.episodes import Episode, ToolStep
        >>> used = Episode(steps=[ToolStep(name="calculator", content="2491")])
        >>> rubric = Rubric.for_constraints(tool_called="calculator", max_steps=3)
        >>> rubric.evaluate("53 * 47?", "2491", episode=used).score
        10.0
        >>> rubric.evaluate("53 * 47?", "2491").values   # a plain model's answer
        {'tool_called': False, 'max_steps': True}
        """
        return self.compose(self.run_checks(task, output, episode=episode), llm_values)


def saved_llm_features(saved: Any) -> list[Mapping[str, Any]]:
    """The features of a saved rubric (:meth:`Rubric.to_dict`, as a trajectory keeps it)
    that the judge model answers: those saved with neither a ``check`` nor a
    ``constraint`` (:attr:`Feature.source` ``"llm"``). Read from the saved form, not a
    rebuilt rubric, because a rubric with unsaveable custom checks cannot be rebuilt;
    anything that is not a saved rubric has none.

    >>> saved = Rubric.for_constraints(exact_words=3).to_dict()
    >>> saved["features"].append({"name": "kind", "description": "Kind?"})
    >>> [f["name"] for f in saved_llm_features(saved)], saved_llm_features(None)
    (['kind'], [])
    """
    features = saved.get("features") if isinstance(saved, Mapping) else None
    if not isinstance(features, list):
        return []
    return [f for f in features if isinstance(f, Mapping) and "check" not in f
            and "constraint" not in f]

