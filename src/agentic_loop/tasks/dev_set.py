"""A dev set: train and held-out tasks from every task family the library generates.

Why discover instead of list: families are added to ``agentic_loop.tasks.sets``
and ``agentic_loop.tasks.sets_*`` over time, and a caller that names them goes
stale silently. Every public ``<name>_tasks(n, seed, ...)`` generator of those
modules is a *suite* (``demo_tasks`` is a mix of the others and
``split_tasks`` is not a generator). A suite whose generator takes ``split``
(IFEval-style: held-out tasks word their demands with templates train never
sees) is asked for each split; the others are generated once and cut with
``split_tasks``. Hand-written tasks (the quality bench's golden file) may be
added as held-out only. Each suite gets the same share of the held-out
sample, so no suite drowns the others; within a suite the generator already
cycles its families.

The demo measures its rounds on such a held-out set and the quality bench
measures its rows on one: same seed, same tasks, for every row of a run and
across runs.

Example:
    >>> names = [s.name for s in suites()]
    >>> {"constrained", "arithmetic"} <= set(names)
    True
    >>> train, held = dev_set(30, 10, seed=0)
    >>> len(held), {s.split for s in held}, not {s.task for s in train} & {s.task for s in held}
    (30, {'held_out'}, True)
    >>> sorted({suite_of(s) for s in held}) == sorted(names)
    True
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentic_loop.errors import ConfigError, DataError
from agentic_loop.tasks.spec import TaskSpec

__all__ = ["NOT_SUITES", "Suite", "dev_set", "family_of", "interleave", "suite_of", "suites"]

NOT_SUITES = {"demo_tasks", "split_tasks"}


@dataclass(frozen=True)
class Suite:
    """One task generator: ``make(n, seed, split)`` returns ``n`` specs of that split."""

    name: str
    module: str
    native_split: bool
    generate: Callable[..., list[TaskSpec]]

    def make(self, n: int, seed: int, held_out: float,
             train_n: int = 0) -> tuple[list[TaskSpec], list[TaskSpec]]:
        """At least ``n`` held-out specs and the train specs that go with them.

        A generator cut with ``split_tasks`` is asked for ``n / held_out`` tasks; one
        with fewer distinct tasks than that (it raises ``ConfigError``) is asked for
        just ``n + train_n`` and cut there, so the bench's 600 held-out tasks fit
        a family of 585 without changing which tasks a smaller run draws.
        """
        if self.native_split:
            train = self.generate(max(1, round(n * (1 - held_out) / held_out)), seed=seed,
                                  split="train")
            return list(train), list(self.generate(n, seed=seed, split="held_out"))
        from agentic_loop.tasks.sets import split_tasks

        total = max(n + 1, round(n / held_out))
        try:
            specs = self.generate(total, seed=seed)
        except ConfigError:
            total = n + max(1, train_n)
            specs = self.generate(total, seed=seed)
            held_out = n / total
        train, held = split_tasks(specs, held_out=held_out, seed=seed)
        while len(held) < n:  # rounding left the held-out split short: one more task
            total += 1
            train, held = split_tasks(self.generate(total, seed=seed), held_out=held_out,
                                      seed=seed)
        return train, held


def suites() -> list[Suite]:
    """Every ``*_tasks`` generator in ``agentic_loop.tasks.sets`` and ``.sets_*`` beside it."""
    import agentic_loop.tasks

    names = ["agentic_loop.tasks.sets"] + sorted(
        f"agentic_loop.tasks.{m.name}" for m in pkgutil.iter_modules(agentic_loop.tasks.__path__)
        if m.name.startswith("sets_"))
    found: list[Suite] = []
    seen: set[int] = set()  # a generator re-exported by another sets module is one suite
    for module_name in names:
        module = importlib.import_module(module_name)
        for attr in getattr(module, "__all__", ()):
            fn = getattr(module, attr)
            if not (attr.endswith("_tasks") and attr not in NOT_SUITES and callable(fn)) \
                    or id(fn) in seen:
                continue
            seen.add(id(fn))
            params = inspect.signature(fn).parameters
            if "seed" not in params:
                continue
            found.append(Suite(attr.removesuffix("_tasks"), module_name, "split" in params, fn))
    return found


def suite_of(spec: TaskSpec) -> str:
    """The suite a spec came from (its generator), stamped by :func:`dev_set`."""
    return str(spec.metadata.get("suite", "?"))


def family_of(spec: TaskSpec) -> str:
    """``suite/family``: the finest group the generators record."""
    return f"{suite_of(spec)}/{spec.metadata.get('family', '?')}"


def _stamp(specs: Sequence[TaskSpec], suite: str) -> list[TaskSpec]:
    return [s.model_copy(update={"metadata": {**s.metadata, "suite": suite}}) for s in specs]


def interleave(groups: Sequence[Sequence[TaskSpec]]) -> list[TaskSpec]:
    """One of each group in turn, so any prefix keeps every group in proportion."""
    out: list[TaskSpec] = []
    for i in range(max((len(g) for g in groups), default=0)):
        out += [g[i] for g in groups if i < len(g)]
    return out


def dev_set(held_out_tasks: int, train_tasks: int, *, seed: int = 0, held_out: float = 0.3,
            golden: Sequence[TaskSpec] = ()) -> tuple[list[TaskSpec], list[TaskSpec]]:
    """``(train, held_out)``: ``held_out_tasks`` held-out specs over every suite.

    ``golden`` (hand-written held-out specs, suite ``golden`` stamped by the
    caller) count towards ``held_out_tasks``; the rest is shared equally by the
    generated suites. Suites take turns in the list, so a short slice holds
    every suite. ``train_tasks`` train specs are drawn the same way. A train
    task that is also a held-out task is an error (the split would leak).
    """
    found = suites()
    if not found:
        raise DataError("no task generators found in agentic_loop.tasks.sets*; a dev set needs "
                        "at least one `<name>_tasks(n, seed)` function")
    gold = list(golden)
    share = -(-max(0, held_out_tasks - len(gold)) // len(found))
    train_share = -(-train_tasks // len(found))
    trains, helds = [], []
    for suite in found:
        train, held = suite.make(max(1, share), seed, held_out, train_share)
        trains.append(_stamp(train, suite.name))
        helds.append(_stamp(held[:share], suite.name))
    held_all = interleave([gold, *helds])[:held_out_tasks]
    train_all = interleave([t[:train_share] for t in trains])[:train_tasks]
    leak = {s.task for s in train_all} & {s.task for s in held_all}
    if leak:
        raise DataError(f"train and held-out share {len(leak)} tasks (e.g. {sorted(leak)[0]!r}); "
                        "the split leaks: fix the generator's split or change the seed")
    return train_all, held_all
