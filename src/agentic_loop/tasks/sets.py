"""Reproducible task families with verifiable constraints, for the demo and the benchmarks.

Improvement has to be measured on tasks whose success Python can check: an
exact word count, a forbidden word, JSON, casing, bullets, a number. These
generators write such tasks from templates and a seed, so a dev set can be
regenerated anywhere and split into train and held-out without overlap. The
IFEval-style families (layout, frequency and language demands, split by
phrasing) live in :mod:`agentic_loop.tasks.sets_ifeval` and are re-exported here.

Example:
    >>> tasks = constrained_tasks(3, seed=1)
    >>> len(tasks), all(t.constraints for t in tasks)
    (3, True)
    >>> constrained_tasks(3, seed=1) == tasks        # same seed, same tasks
    True
    >>> math = arithmetic_tasks(2, seed=0)
    >>> math[0].rubric().evaluate(math[0].task, f"It is {math[0].constraints['answer']}.").score
    10.0
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from agentic_loop.errors import ConfigError
from agentic_loop.tasks.sets_ifeval import IFEVAL_FAMILIES, IFEVAL_SPLITS, ifeval_tasks
from agentic_loop.tasks.spec import TaskSpec

__all__ = ["IFEVAL_FAMILIES", "IFEVAL_SPLITS", "arithmetic_tasks", "constrained_tasks",
           "demo_tasks", "ifeval_tasks", "split_tasks"]

BUSINESSES = ["bookstore", "coffee shop", "bakery", "bike shop", "museum", "flower shop",
              "yoga studio", "hardware store", "tea house", "library", "record store",
              "pet groomer", "ice cream parlor", "climbing gym", "toy store", "farmers market"]
TOPICS = ["the ocean", "a thunderstorm", "autumn leaves", "a city at night", "fresh bread",
          "a mountain lake", "an old clock", "a busy train station", "a garden", "the desert",
          "a snowy forest", "a lighthouse", "a market at dawn", "a quiet library", "the moon",
          "a river in spring", "an empty stadium", "a kitchen at noon", "a foggy harbor",
          "a field of sunflowers"]
CATEGORIES = ["fruits", "colors", "animals", "musical instruments", "vegetables", "countries",
              "tools", "sports", "trees", "birds", "flowers", "board games", "rivers",
              "cheeses", "planets", "fabrics", "spices", "insects", "boats", "dances"]
WORDS = ["bright", "warm", "simple", "fresh", "quiet", "bold", "clear", "gentle", "wild", "true"]
ITEMS = ["apples", "books", "tickets", "pencils", "cookies", "stamps", "marbles", "plants"]
NAMES = ["Ana", "Ben", "Chloe", "Dev", "Eli", "Fatima", "Goro", "Hana", "Ivan", "Jun"]


def _tagline_exact(r: random.Random) -> TaskSpec:
    n = r.randint(4, 9)
    biz = r.choice(BUSINESSES)
    return TaskSpec(task=f"Write a tagline for a {biz} in exactly {n} words.",
                    constraints={"exact_words": n}, metadata={"family": "exact_words"})


def _describe_lowercase(r: random.Random) -> TaskSpec:
    n = r.randint(6, 14)
    topic = r.choice(TOPICS)
    return TaskSpec(task=f"Describe {topic} in at most {n} words, all in lowercase.",
                    constraints={"word_count": (1, n), "lowercase": True},
                    metadata={"family": "lowercase"})


def _bullets(r: random.Random) -> TaskSpec:
    n = r.randint(2, 5)
    category = r.choice(CATEGORIES)
    return TaskSpec(task=f"List exactly {n} {category} as bullet points, one per line "
                         f"starting with '- '.",
                    constraints={"bullet_count": (n, n)}, metadata={"family": "bullets"})


def _no_commas(r: random.Random) -> TaskSpec:
    topic = r.choice(TOPICS)
    return TaskSpec(task=f"Write one sentence about {topic} without using any commas.",
                    constraints={"sentence_count": (1, 1), "no_commas": True},
                    metadata={"family": "no_commas"})


def _include_word(r: random.Random) -> TaskSpec:
    biz = r.choice(BUSINESSES)
    word = r.choice(WORDS)
    return TaskSpec(task=f"Write a short slogan for a {biz} that includes the word '{word}'.",
                    constraints={"include_words": [word], "word_count": (2, 15)},
                    metadata={"family": "include_words"})


def _exclude_words(r: random.Random) -> TaskSpec:
    biz = r.choice(BUSINESSES)
    return TaskSpec(task=f"Write a tagline for a {biz} in 5 to 12 words. Do not use the words "
                         f"'we', 'our' or 'best'.",
                    constraints={"word_count": (5, 12), "exclude_words": ["we", "our", "best"]},
                    metadata={"family": "exclude_words"})


def _json(r: random.Random) -> TaskSpec:
    category = r.choice(CATEGORIES)
    schema = {"type": "object", "required": ["name", "reason"],
              "properties": {"name": {"type": "string"}, "reason": {"type": "string"}}}
    return TaskSpec(task=f"Name one of the {category} you like. Reply only with a JSON object "
                         f'with the keys "name" and "reason".',
                    constraints={"json": schema}, metadata={"family": "json"})


def _uppercase(r: random.Random) -> TaskSpec:
    category = r.choice(CATEGORIES)
    return TaskSpec(task=f"Name two {category}, in uppercase letters only.",
                    constraints={"uppercase": True, "word_count": (2, 8)},
                    metadata={"family": "uppercase"})


def _starts_with(r: random.Random) -> TaskSpec:
    topic = r.choice(TOPICS)
    return TaskSpec(task=f"Write one sentence about {topic} that starts with 'Imagine'.",
                    constraints={"starts_with": "Imagine", "sentence_count": (1, 1)},
                    metadata={"family": "starts_with"})


_CONSTRAINED: Sequence[Callable[[random.Random], TaskSpec]] = (
    _tagline_exact, _describe_lowercase, _bullets, _no_commas, _include_word, _exclude_words,
    _json, _uppercase, _starts_with)


def constrained_tasks(n: int, seed: int = 0) -> list[TaskSpec]:
    """``n`` distinct instruction-following tasks, cycling through the families."""
    r = random.Random(seed)
    seen: set[str] = set()
    out: list[TaskSpec] = []
    exhausted: set[int] = set()
    family = 0
    while len(out) < n:
        if len(exhausted) == len(_CONSTRAINED):
            raise ConfigError(f"cannot make {n} distinct constrained tasks (made {len(out)}); "
                              "ask for fewer")
        family = (family + 1) % len(_CONSTRAINED)
        if family in exhausted:
            continue
        for _ in range(50):  # a family with few distinct prompts left is skipped from now on
            spec = _CONSTRAINED[family](r)
            if spec.task not in seen:
                seen.add(spec.task)
                out.append(spec.model_copy(update={"id": f"c{seed}-{len(out)}"}))
                break
        else:
            exhausted.add(family)
    return out


def arithmetic_tasks(n: int, seed: int = 0) -> list[TaskSpec]:
    """``n`` arithmetic word problems whose answer is the last number of the reply."""
    r = random.Random(seed + 1_000_003)
    out: list[TaskSpec] = []
    while len(out) < n:
        name, item = r.choice(NAMES), r.choice(ITEMS)
        a, b = r.randint(2, 40), r.randint(2, 30)
        kind = len(out) % 4
        if kind == 0:
            text = f"{name} has {a} {item} and buys {b} more. How many {item} does {name} have now?"
            answer = a + b
        elif kind == 1:
            a += b
            text = f"{name} had {a} {item} and gave away {b}. How many {item} are left?"
            answer = a - b
        elif kind == 2:
            a, b = r.randint(2, 12), r.randint(2, 9)
            text = (f"{name} packs {a} boxes with {b} {item} in each. "
                    f"How many {item} is that in total?")
            answer = a * b
        else:
            c = r.randint(2, 6)
            used = a % (b * c) or 1
            text = (f"{name} buys {c} bags of {item} with {b} in each bag, then uses {used}. "
                    f"How many {item} remain?")
            answer = b * c - used
        task = f"{text} Answer with the number at the end."
        out.append(TaskSpec(task=task, constraints={"answer": answer}, id=f"m{seed}-{len(out)}",
                            metadata={"family": "arithmetic"}))
    return out


def split_tasks(tasks: Sequence[TaskSpec], held_out: float = 0.3,
                seed: int = 0) -> tuple[list[TaskSpec], list[TaskSpec]]:
    """Shuffle and split into ``(train, held_out)``; marks each spec's ``split``."""
    if not 0.0 < held_out < 1.0:
        raise ConfigError(f"held_out is a fraction in (0, 1), got {held_out}")
    order = list(tasks)
    random.Random(seed).shuffle(order)
    cut = max(1, int(round(len(order) * held_out)))
    test = [t.model_copy(update={"split": "held_out"}) for t in order[:cut]]
    train = [t.model_copy(update={"split": "train"}) for t in order[cut:]]
    return train, test


def demo_tasks(n: int = 30, seed: int = 7) -> list[TaskSpec]:
    """The demo's family: constrained instructions with a few arithmetic problems mixed in."""
    n_math = n // 6
    return constrained_tasks(n - n_math, seed=seed) + arithmetic_tasks(n_math, seed=seed)
