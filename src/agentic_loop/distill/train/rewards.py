"""GRPO's reward functions: each task's locked rubric, as the callables TRL's ``GRPOTrainer`` calls.

TRL calls every reward function with the batch's ``prompts`` and
``completions`` and, as keyword arguments, the dataset's other columns; ours
carry ``task_index``, which points at the task and its locked (checks-only)
rubric (:mod:`agentic_loop.distill.train.prompt_set`). The functions:

``rubric`` (weight 1)
    the rubric's composite score on ``[0, 1]``: ``Rubric.evaluate(task,
    output).score / 10``, computed in Python (and the sandbox for code).
one per check, named after it (weight ``check_reward_weight``, default 0)
    that check's credit on ``[0, 1]``, so TRL logs each check on its own
    (``rewards/<check>/mean``); ``None`` for tasks whose rubric lacks the
    check (TRL skips it in means). At weight 0 they are logged, not trained
    on: the composite already weighs them as the rubric says.
``format_penalty`` (weight ``format_penalty``, only when above 0)
    -1 when the completion is empty or runs to ``max_completion_length``
    (the model did not stop), else 0.
a judged part (``judge_rank`` or ``judge_vote``, weight ``judged_reward_weight``)
    passed in as ``extra`` (:mod:`.judged_reward`): a judge's ranking of the
    group, or the group's majority vote; logged as its own column, so the
    checks' part and the judged part are read apart. A task kept for the
    judged part alone (no check: ``PromptTask.rubric`` is None) has no
    ``rubric`` value (``None``, skipped by TRL's sums and means).

The completion is judged as the model wrote it (surrounding whitespace
aside). A tool rollout's completion (:mod:`.tool_rollout`) comes with its
episode (the ``episode`` column, JSON): the output judged is the episode's
final answer, and its checks run inside
:func:`~agentic_loop.episodes.judging_episode`, so episode checks
(``tool_called``, ``verified_with``, ``max_steps``) see every step.
The architectures strip a quoted "Here is ..." preamble from a draft
before judging it; the reward does not, so the policy learns to leave such
habits out.

**Never a crash.** A check that raises scores 0 (in its own function and in
``rubric``) and is counted; so is a reward worker that dies. The counts
(and the first error of each function) go to the trainer's log
(``reward_errors/<name>``) and the model card.

**Expensive checks** (code run in the sandbox) can be scored in parallel
processes: ``workers=N`` starts a process pool once (its rubrics travel as
``Rubric.to_dict``: a custom Python check goes by reference, ``module:function`` or a
registered name, and a lambda needs ``workers=0``). A batch is
scored once; the other functions read the same results.

Example:
    >>> from agentic_loop.distill.train.prompt_set import PromptTask
    >>> from agentic_loop.judges import Rubric
    >>> rubric = Rubric.for_constraints(exact_words=2, lowercase=True)
    >>> rewards = RubricRewards([PromptTask("Greet me in 2 words.", rubric)])
    >>> [f.__name__ for f in rewards.functions], rewards.weights
    (['rubric', 'exact_words', 'lowercase'], [1.0, 0.0, 0.0])
    >>> done = [[{"role": "assistant", "content": text}] for text in ("hi there", "Hello")]
    >>> rewards.functions[0](prompts=[None, None], completions=done, task_index=[0, 0])
    [1.0, 0.25]
    >>> rubric.evaluate("Greet me in 2 words.", "Hello").score / 10
    0.25
    >>> rewards.functions[2](prompts=[None, None], completions=done, task_index=[0, 0])
    [1.0, 0.0]
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from agentic_loop.distill.train.prompt_set import PromptTask
from agentic_loop.episodes import Episode, judging_episode
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Rubric, registrations, restore_registrations
from agentic_loop.judges.rubric import CheckResults

__all__ = ["Reward", "RewardFunction", "RewardStats", "RubricRewards", "Scored",
           "completion_text", "merge_stats", "score_completion", "score_episode"]

RUBRIC = "rubric"
FORMAT = "format_penalty"
_ANY = "*"  # an error outside any one check (a guard, a dead worker): every function counts it
_MAX_ERROR = 300


@dataclass(frozen=True)
class Scored:
    """What a locked rubric made of one completion.

    ``score`` is ``Rubric.evaluate(...).score / 10``, or None when a check
    raised; ``credits`` holds each check that ran, ``errors`` each that raised.
    """

    score: float | None
    credits: dict[str, float]
    errors: dict[str, str]
    empty: bool


def completion_text(completion: Any) -> str:
    """The text of a TRL completion: a string, or conversational ``[{"role", "content"}]``.

    >>> completion_text([{"role": "assistant", "content": "Hi"}]), completion_text("Hi")
    ('Hi', 'Hi')
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping):
        return str(completion[-1].get("content") or "")
    return str(completion)


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:_MAX_ERROR]


def score_completion(rubric: Rubric, task: str, output: str) -> Scored:
    """Score one output on a checks-only rubric; a raising check is kept as an error.

    >>> from agentic_loop.judges import Feature
    >>> def broken(task, output):
    ...     raise KeyError("boom")
    >>> rubric = Rubric([Feature("ok", "Says ok.", check=lambda t, o: "ok" in o),
    ...                  Feature("broken", "Never works.", check=broken)])
    >>> s = score_completion(rubric, "t", "ok then")
    >>> s.score, s.credits, sorted(s.errors)
    (None, {'ok': 1.0}, ['broken'])
    """
    cleaned = output.strip()
    try:
        results: dict[str, Any] = {}
        errors: dict[str, str] = {}
        for feature in rubric.check_features:
            try:
                results[feature.name] = feature.run_check(task, cleaned)
            except Exception as exc:  # counted by the caller; never stops training
                errors[feature.name] = _error(exc.__cause__ or exc)
        guards = rubric.inspect(task, cleaned)
        if errors:
            void = guards.voids
            credits = {n: 0.0 if void else rubric[n].credit(r.value) for n, r in results.items()}
            return Scored(None, credits, errors, not cleaned)
        evaluation = rubric.compose(CheckResults(results, guards))
    except Exception as exc:  # a guard or the composition failed: nothing is known
        return Scored(None, {}, {_ANY: _error(exc)}, not cleaned)
    credits = {f.name: f.credit for f in evaluation.features}
    return Scored(evaluation.score / 10, credits, {}, not cleaned)


def score_episode(rubric: Rubric | None, task: str, output: str, episode: str | None) -> Scored:
    """:func:`score_completion` with ``episode`` (JSON) as the checks' current episode.

    >>> from agentic_loop.episodes import Episode, ToolStep
    >>> rubric = Rubric.for_constraints(tool_called="calculator")
    >>> ran = Episode(steps=[ToolStep(name="calculator", content="4")], final="4")
    >>> score_episode(rubric, "2+2?", "4", ran.model_dump_json()).score
    1.0
    >>> score_episode(rubric, "2+2?", "4", None).score
    0.0
    >>> score_episode(None, "2+2?", "4", None)  # no check: nothing to score, no error
    Scored(score=None, credits={}, errors={}, empty=False)
    """
    if rubric is None:
        return Scored(None, {}, {}, not output.strip())
    if episode is None:
        return score_completion(rubric, task, output)
    with judging_episode(Episode.model_validate_json(episode)):
        return score_completion(rubric, task, output)


_Key = tuple[int, str, str | None]


def _key(index: int, completion: Any, episode: str | None) -> _Key:
    """What one completion is scored on: its task, the output judged, its episode (if any)."""
    if episode is None:
        return index, completion_text(completion), None
    return index, Episode.model_validate_json(episode).final, episode


@dataclass
class RewardStats:
    """How often one reward function was called and failed, and its first error."""

    calls: int = 0
    errors: int = 0
    first_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the model card."""
        return {"calls": self.calls, "errors": self.errors, "first_error": self.first_error}


def merge_stats(parts: Sequence[Mapping[str, Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Sum per-function stats from several processes (``accelerate launch``).

    >>> merge_stats([{"rubric": {"calls": 4, "errors": 1, "first_error": "E"}},
    ...              {"rubric": {"calls": 4, "errors": 0, "first_error": None}}])
    {'rubric': {'calls': 8, 'errors': 1, 'first_error': 'E'}}
    """
    out: dict[str, dict[str, Any]] = {}
    for part in parts:
        for name, stats in part.items():
            into = out.setdefault(name, {"calls": 0, "errors": 0, "first_error": None})
            into["calls"] += stats["calls"]
            into["errors"] += stats["errors"]
            into["first_error"] = into["first_error"] or stats["first_error"]
    return out


class Reward(Protocol):
    """What :class:`RubricRewards` keeps of a reward function: TRL's callable, its name (the
    logged column), weight, description and counts."""

    __name__: str
    weight: float
    description: str
    stats: RewardStats

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any],
                 task_index: Sequence[int], **kwargs: Any) -> list[float | None]:
        """One reward per completion (None where it does not apply)."""
        ...


class RewardFunction:
    """One reward TRL calls and logs under ``__name__``; its value comes from ``value``."""

    def __init__(self, name: str, weight: float, description: str, source: RubricRewards,
                 value: Callable[[Scored, int, int | None], tuple[float | None, str | None]]):
        self.__name__ = name
        self.weight = weight
        self.description = description
        self.stats = RewardStats()
        self._source = source
        self._value = value

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any],
                 task_index: Sequence[int], completion_ids: Sequence[Sequence[int]] | None = None,
                 episode: Sequence[str | None] | None = None,
                 **kwargs: Any) -> list[float | None]:
        """One reward per completion (``None`` where this function does not apply);
        ``episode``: each completion's episode as JSON, from the tool rollouts."""
        scored = self._source.score_batch(task_index, completions, episode)
        values: list[float | None] = []
        errors = 0
        for i, item in enumerate(scored):
            length = len(completion_ids[i]) if completion_ids is not None else None
            value, error = self._value(item, int(task_index[i]), length)
            if error is not None:
                errors += 1
                self.stats.first_error = self.stats.first_error or error
            values.append(value)
        self.stats.calls += len(values)
        self.stats.errors += errors
        log_metric = kwargs.get("log_metric")
        if callable(log_metric):
            log_metric(f"reward_errors/{self.__name__}", float(errors))
        return values

    def __repr__(self) -> str:
        return f"RewardFunction({self.__name__!r}, weight={self.weight:g})"


class RubricRewards:
    """The reward functions of a prompt set (see the module doc), their weights and their stats.

    Args:
        tasks: the prompt set's tasks; ``task_index`` points into it.
        check_weight: the weight of each per-check function (0: logged only).
        format_penalty: the weight of ``format_penalty`` (0: left out).
        max_completion_length: the length at which a completion counts as cut off.
        workers: score in this many processes (0: in the training process).
        extra: more reward functions (the judged part), logged and weighed as they say.
    """

    def __init__(self, tasks: Sequence[PromptTask], *, check_weight: float = 0.0,
                 format_penalty: float = 0.0, max_completion_length: int | None = None,
                 workers: int = 0, extra: Sequence[Reward] = ()) -> None:
        if not tasks:
            raise ConfigError("RubricRewards needs at least one task; pass a prompt set's tasks")
        self.tasks = list(tasks)
        self.workers = workers
        self._payload = _worker_payload(self.tasks) if workers else None
        self._pool: ProcessPoolExecutor | None = None
        self._cache: dict[_Key, Scored] = {}
        self.functions: list[Reward] = [RewardFunction(
            RUBRIC, 1.0, "the locked rubric's score / 10 on [0, 1] (checks only, computed in "
            "Python or the sandbox); 0 when a check raises", self, _rubric_value)]
        checks: dict[str, str] = {}
        for task in self.tasks:
            for feature in task.rubric.check_features if task.rubric is not None else ():
                checks.setdefault(feature.name, feature.description)
        for check, example in checks.items():
            name = f"check_{check}" if check in (RUBRIC, FORMAT) else check
            self.functions.append(RewardFunction(
                name, check_weight, f"credit of the check {check!r} on [0, 1] (e.g. "
                f"{example!r}); no value for tasks without it", self, _check_value(check)))
        if format_penalty > 0:
            limit = max_completion_length
            self.functions.append(RewardFunction(
                FORMAT, format_penalty, "-1 when the completion is empty or runs to "
                f"max_completion_length ({limit} tokens) without stopping, else 0", self,
                _format_value(limit)))
        self.functions.extend(extra)

    @property
    def weights(self) -> list[float]:
        """The functions' weights, in order (TRL's ``reward_weights``)."""
        return [f.weight for f in self.functions]

    def score_batch(self, task_index: Sequence[int], completions: Sequence[Any],
                    episodes: Sequence[str | None] | None = None) -> list[Scored]:
        """Each completion scored once per batch (the next function reads the cache).

        With ``episodes`` (JSON of :class:`~agentic_loop.episodes.Episode`), the output
        judged is the episode's final answer, and the checks see the episode."""
        found = list(episodes) if episodes is not None else [None] * len(completions)
        keys = [_key(int(i), c, e) for i, c, e in zip(task_index, completions, found, strict=True)]
        missing = list(dict.fromkeys(k for k in keys if k not in self._cache))
        if missing:
            fresh = dict(zip(missing, self._score(missing), strict=True))
            self._cache = {k: self._cache.get(k) or fresh[k] for k in keys}
        return [self._cache[k] for k in keys]

    def _score(self, keys: Sequence[_Key]) -> list[Scored]:
        if not self.workers:
            return [score_episode(self.tasks[i].rubric, self.tasks[i].task, text, episode)
                    for i, text, episode in keys]
        try:
            pool = self._start_pool()
            chunk = max(1, len(keys) // (4 * self.workers))
            return list(pool.map(_score_in_worker, keys, chunksize=chunk))
        except Exception as exc:  # a dead worker: this batch scores 0, the next gets a new pool
            self.close()
            return [Scored(None, {}, {_ANY: "reward worker failed: " + _error(exc)}, False)
                    for _ in keys]

    def _start_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            assert self._payload is not None
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker, initargs=(self._payload,))
        return self._pool

    def close(self) -> None:
        """Stop the worker processes (a later batch starts new ones)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per-function calls, errors and first error (this process only)."""
        return {f.__name__: f.stats.to_dict() for f in self.functions}

    def restore(self, saved: Mapping[str, Mapping[str, Any]]) -> None:
        """Start from counts saved by :meth:`stats` (a resumed run keeps counting)."""
        for function in self.functions:
            if function.__name__ in saved:
                done = saved[function.__name__]
                function.stats = RewardStats(done["calls"], done["errors"], done["first_error"])

    def describe(self) -> list[dict[str, Any]]:
        """Each function's name, weight and what it measures, for the model card."""
        return [{"name": f.__name__, "weight": f.weight, "description": f.description}
                for f in self.functions]


def _rubric_value(item: Scored, index: int, length: int | None) -> tuple[float | None, str | None]:
    if item.score is None and not item.errors:
        return None, None  # a task without a check: the judged part alone rewards it
    if item.score is None:
        return 0.0, next(iter(item.errors.values()), "no score")
    return item.score, None


def _check_value(check: str) -> Callable[[Scored, int, int | None],
                                         tuple[float | None, str | None]]:
    def value(item: Scored, index: int, length: int | None) -> tuple[float | None, str | None]:
        if check in item.errors or _ANY in item.errors:
            return 0.0, item.errors.get(check) or item.errors[_ANY]
        return item.credits.get(check), None  # None: this task's rubric has no such check

    return value


def _format_value(limit: int | None) -> Callable[[Scored, int, int | None],
                                                 tuple[float | None, str | None]]:
    def value(item: Scored, index: int, length: int | None) -> tuple[float | None, str | None]:
        cut = limit is not None and length is not None and length >= limit
        return (-1.0 if item.empty or cut else 0.0), None

    return value


# -- the process pool ------------------------------------------------------------------

_WORKER_TASKS: list[tuple[str, Rubric | None]] = []


_Payload = list[tuple[str, dict[str, Any] | None, dict[str, str]]]


def _worker_payload(tasks: Sequence[PromptTask]) -> _Payload:
    """Each task's saved rubric (checks by reference) and its checks' registered names."""
    payload: _Payload = []
    for number, task in enumerate(tasks, 1):
        if task.rubric is None:
            payload.append((task.task, None, {}))
            continue
        try:
            payload.append((task.task, task.rubric.to_dict(), registrations(
                f.check for f in task.rubric.check_features)))
        except ConfigError as exc:
            raise ConfigError(
                f"reward_workers (--reward-workers) sends rubrics to worker processes, and task "
                f"{number} ({task.task[:60]!r}) has a custom Python check that cannot be sent "
                f"({exc}); pass reward_workers=0, or save the check by reference") from None
    return payload


def _init_worker(payload: _Payload) -> None:
    restore_registrations({k: v for _, _, names in payload for k, v in names.items()})
    _WORKER_TASKS[:] = [(task, Rubric.from_dict(saved) if saved is not None else None)
                        for task, saved, _ in payload]


def _score_in_worker(key: _Key) -> Scored:
    task, rubric = _WORKER_TASKS[key[0]]
    return score_episode(rubric, task, key[1], key[2])
