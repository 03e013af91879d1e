"""Tool tasks: questions a small model gets wrong alone and right with a calculator or a lookup.

Why a family of its own: an agent earns its tools only on tasks where the
model alone fails, and the bench must measure that on wordings it never
trained on. Each task has one numeric answer, known exactly, and the Python
``answer`` check (the last number of the reply, so ``2,491`` and ``2491.0``
both pass ``2491``). The families:

* ``product``: a product of two 3- or 4-digit numbers;
* ``sum``: a sum of four or five 4- to 6-digit numbers;
* ``two_step``: a product then a difference, told as a word problem;
* ``convert``: a unit conversion whose exact factor is in the reference table
  (:data:`agentic_loop.tools.REFERENCE_TABLE`), rounded to 2 decimals;
* ``atomic_number``: an element's atomic number, from the table;
* ``molar_mass``: the mass of some moles of an element (a lookup, then a product).

Every family words its tasks with **train** templates and with **held-out**
templates that no train task uses, so :func:`tool_tasks` with
``split="held_out"`` gives tasks phrased as the model never saw in training.
Tasks are deterministic by ``seed`` and distinct within a call. Each task is a
:class:`ToolTask`: a :class:`~agentic_loop.tasks.TaskSpec` with its
``answer`` and the ``tools`` to give the agent (the calculator and the
reference lookup unless told otherwise; they are not saved with the task, their
names are, in ``metadata["tools"]``). These tasks are not part of
:func:`~agentic_loop.tasks.dev_set.dev_set`, which plain chat models answer
without tools.

Example:
    >>> train = tool_tasks(12, split="train", seed=0)
    >>> held = tool_tasks(12, split="held_out", seed=0)
    >>> len(held), {t.split for t in held}, not {t.task for t in train} & {t.task for t in held}
    (12, {'held_out'}, True)
    >>> task = held[0]
    >>> task.metadata["family"], [tool.name for tool in task.tools]
    ('product', ['calculator', 'lookup'])
    >>> task.rubric().evaluate(task.task, f"It is {task.answer:,.0f}.").passed
    True
    >>> task.rubric().evaluate(task.task, f"It is {task.answer + 1:.0f}.").passed
    False
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Literal

from langchain_core.tools import BaseTool
from pydantic import Field

from agentic_loop.errors import ConfigError
from agentic_loop.tasks.spec import TaskSpec
from agentic_loop.tools import ELEMENTS, UNITS, calculator, reference_lookup

__all__ = ["TOOL_TASK_FAMILIES", "TOOL_TASK_SPLITS", "ToolTask", "default_task_tools",
           "tool_tasks"]

ToolSplit = Literal["train", "held_out"]
TOOL_TASK_SPLITS: tuple[ToolSplit, ...] = ("train", "held_out")
_ROUNDED_TOLERANCE = 0.0051  # the exact value and the value rounded to 2 decimals both pass
_ROUND = " Round to 2 decimal places."
_END = " Answer with the number at the end."
_NAMES = ["Ana", "Ben", "Chloe", "Dev", "Eli", "Fatima", "Goro", "Hana", "Ivan", "Jun"]
_ITEMS = ["bolts", "tiles", "beads", "seeds", "cans", "bricks", "labels", "cups"]


class ToolTask(TaskSpec):
    """A task whose answer is one number, with the tools an agent should get for it.

    ``tools`` is not saved (``model_dump`` leaves it out); ``metadata`` keeps
    the tools' names (``"tools"``), the tools a solution needs (``"needs"``)
    and the family.
    """

    answer: float
    tools: tuple[BaseTool, ...] = Field(default=(), exclude=True)


def default_task_tools() -> tuple[BaseTool, ...]:
    """The tools every tool task gets unless told otherwise: the calculator and the lookup."""
    return calculator, reference_lookup


# Each family: train templates, held-out templates, and a draw giving the template's fields,
# the exact answer, whether it is rounded to 2 decimals, and the tools a solution needs.
Draw = tuple[dict[str, Any], Decimal, bool, tuple[str, ...]]


def _product(r: random.Random) -> Draw:
    a, b = r.randint(100, 9999), r.randint(100, 9999)
    return {"a": a, "b": b}, Decimal(a * b), False, ("calculator",)


def _sum(r: random.Random) -> Draw:
    values = [r.randint(1000, 999_999) for _ in range(r.choice((4, 5)))]
    listed = ", ".join(str(v) for v in values[:-1]) + f" and {values[-1]}"
    return {"listed": listed, "plus": " + ".join(map(str, values))}, Decimal(sum(values)), \
        False, ("calculator",)


def _two_step(r: random.Random) -> Draw:
    a, b = r.randint(12, 99), r.randint(12, 99)
    c = r.randint(10, a * b - 1)
    return {"a": a, "b": b, "c": c, "name": r.choice(_NAMES), "item": r.choice(_ITEMS)}, \
        Decimal(a * b - c), False, ("calculator",)


def _convert(r: random.Random) -> Draw:
    unit = r.choice(UNITS)
    factor = Decimal(unit.factor)
    low = max(2, int(1 / factor) + 1)
    value = r.randint(low, max(low + 50, 500))
    fields = {"value": value, "units": unit.plural if value != 1 else unit.name,
              "target": unit.target}
    return fields, value * factor, True, ("lookup", "calculator")


def _atomic_number(r: random.Random) -> Draw:
    element = r.choice(ELEMENTS)
    return {"element": element.name}, Decimal(element.number), False, ("lookup",)


def _molar_mass(r: random.Random) -> Draw:
    element, moles = r.choice(ELEMENTS), r.randint(2, 60)
    return {"element": element.name, "moles": moles}, moles * Decimal(element.weight), True, \
        ("lookup", "calculator")


_Family = tuple[Callable[[random.Random], Draw], tuple[str, ...], tuple[str, ...]]
_FAMILIES: dict[str, _Family] = {
    "product": (_product, (
        "What is {a} times {b}?",
        "Compute {a} × {b}.",
        "Multiply {a} by {b}.",
        "A crate holds {a} bottles. How many bottles are in {b} crates?",
    ), (
        "Find the product of {a} and {b}.",
        "Each of {b} tickets costs {a} cents. How many cents do they cost altogether?",
        "How much is {a} multiplied by {b}?",
    )),
    "sum": (_sum, (
        "What is {plus}?",
        "Add up {listed}.",
        "What is the sum of {listed}?",
    ), (
        "Find the total of {listed}.",
        "The warehouses stock {listed} units. How many units is that together?",
        "Calculate {plus}.",
    )),
    "two_step": (_two_step, (
        "{name} buys {a} boxes with {b} {item} in each, then uses {c} of them. "
        "How many {item} are left?",
        "There are {a} rows of {b} {item}. {c} are removed. How many {item} remain?",
    ), (
        "{name} stacks {a} layers of {b} {item} and later takes {c} away. "
        "How many {item} does {name} still have?",
        "What is {a} times {b}, minus {c}?",
    )),
    "convert": (_convert, (
        "Convert {value} {units} to {target}.",
        "How many {target} are {value} {units}?",
        "Express {value} {units} in {target}.",
    ), (
        "{value} {units} is how many {target}?",
        "What is {value} {units} in {target}?",
    )),
    "atomic_number": (_atomic_number, (
        "What is the atomic number of {element}?",
        "How many protons does an atom of {element} have?",
    ), (
        "Give the atomic number of the element {element}.",
        "Which atomic number does {element} have?",
    )),
    "molar_mass": (_molar_mass, (
        "What is the mass in grams of {moles} moles of {element}?",
        "How many grams do {moles} moles of {element} weigh?",
    ), (
        "Find the mass, in grams, of {moles} moles of {element} atoms.",
        "A sample holds {moles} moles of {element}. What is its mass in grams?",
    )),
}
#: The tool task families, in the order :func:`tool_tasks` cycles through them.
TOOL_TASK_FAMILIES: tuple[str, ...] = tuple(_FAMILIES)


def _number(value: Decimal, rounded: bool) -> str:
    if rounded:
        value = value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return format(value.normalize(), "f") if value == value.to_integral_value() \
        else format(value, "f")


def _task(family: str, r: random.Random, split: ToolSplit,
          tools: tuple[BaseTool, ...]) -> ToolTask:
    draw, train, held = _FAMILIES[family]
    fields, exact, rounded, needs = draw(r)
    template = r.choice(train if split == "train" else held)
    text = template.format(**fields) + (_ROUND if rounded else "") + _END
    tolerance = _ROUNDED_TOLERANCE if rounded else 1e-6
    return ToolTask(task=text, answer=float(exact), tools=tools, split=split,
                    constraints={"answer": {"value": float(exact), "tolerance": tolerance}},
                    metadata={"family": family, "needs": list(needs),
                              "tools": [tool.name for tool in tools],
                              "answer_text": _number(exact, rounded)})


def tool_tasks(n: int, *, split: ToolSplit = "train", seed: int = 0,
               tools: Sequence[BaseTool] | None = None,
               families: Sequence[str] | None = None) -> list[ToolTask]:
    """``n`` distinct tool tasks of one split, cycling through ``families`` (all by default).

    ``split="held_out"`` words every task with templates no train task uses.
    ``tools`` replaces :func:`default_task_tools` (e.g. add
    :func:`~agentic_loop.tools.python_tool`). A family that runs out of
    distinct tasks (``atomic_number`` has one per element and template) is
    skipped from then on.

    Raises:
        ConfigError: for an unknown split or family, ``n < 1``, or more tasks than
            the families can make distinct.
    """
    if split not in TOOL_TASK_SPLITS:
        raise ConfigError(f"split must be one of {TOOL_TASK_SPLITS}, got {split!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"n must be an int >= 1, got {n!r}")
    chosen = tuple(families) if families is not None else TOOL_TASK_FAMILIES
    unknown = [f for f in chosen if f not in _FAMILIES]
    if unknown or not chosen:
        raise ConfigError(f"unknown tool task families {unknown or chosen!r}; "
                          f"choose from {TOOL_TASK_FAMILIES}")
    given = default_task_tools() if tools is None else tuple(tools)
    r = random.Random(seed * 1_000_003 + (17 if split == "train" else 29))
    out: list[ToolTask] = []
    seen: set[str] = set()
    exhausted: set[str] = set()
    turn = 0
    while len(out) < n:
        if len(exhausted) == len(chosen):
            raise ConfigError(f"cannot make {n} distinct {split} tool tasks from {chosen} "
                              f"(made {len(out)}); ask for fewer")
        family = chosen[turn % len(chosen)]
        turn += 1
        if family in exhausted:
            continue
        for _ in range(200):
            spec = _task(family, r, split, given)
            if spec.task not in seen:
                seen.add(spec.task)
                out.append(spec.model_copy(update={"id": f"tool-{split}-{seed}-{len(out)}"}))
                break
        else:
            exhausted.add(family)
    return out
