"""Support conversations: a customer asks about an order, and only the order lookup knows.

Why a family of its own: a support agent must look things up, not guess, and
often must first ask for what it lacks. Each task is one customer
conversation about one order of :data:`~agentic_loop.tools.ORDERS`: where it
is (its status) or what it cost (its total). Half the customers give the
order number in their first message; the others give it only in their reply
(a scripted :class:`~agentic_loop.agents.user_sim.UserSimulator`), so the
agent that answers at once has nothing to go on. The right answer exists
only in the lookup's result, and the task's locked rubric checks both:

* ``answer``: the status word on the last line, or the total as the last number;
* ``verified_with``: ``order_lookup`` ran without an error and its last result is
  this order's (it holds the order number), so the answer came from the record.

The user replies are scripted (deterministic in tests and benches): the
order number when it was not given, then one push-back ("please check
again"); the conversation ends as soon as the agent's answer passes the
``answer`` check (the stop predicate :func:`answer_given`) or the replies run
out. Tasks are deterministic by ``seed``, distinct within a call, and worded
with **train** or **held-out** templates (no wording shared), as
:mod:`.tool_tasks`; each is a :class:`SupportTask` carrying its tools (not
saved; their names are, in ``metadata["tools"]``).

Example:
    >>> held = support_tasks(4, split="held_out", seed=0)
    >>> task = held[1]
    >>> task.metadata["question"], task.metadata["gives_id"], task.user_sim.kind
    ('status', False, 'scripted')
    >>> sorted(task.rubric().names), [tool.name for tool in task.tools]
    (['answer', 'verified_with'], ['order_lookup'])
    >>> not {t.task for t in support_tasks(8, split="train")} & {t.task for t in held}
    True
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.tools import BaseTool
from pydantic import Field

from agentic_loop.agents.user_sim import UserSimulator
from agentic_loop.episodes import Episode
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Rubric
from agentic_loop.tasks.spec import TaskSpec
from agentic_loop.tools.orders import ORDERS, Order, order_lookup

__all__ = ["SUPPORT_QUESTIONS", "SUPPORT_SPLITS", "SupportTask", "answer_given",
           "support_tasks"]

SupportSplit = Literal["train", "held_out"]
SUPPORT_SPLITS: tuple[SupportSplit, ...] = ("train", "held_out")
Question = Literal["status", "total"]
#: What a customer asks about an order: where it is, or what it cost.
SUPPORT_QUESTIONS: tuple[Question, ...] = ("status", "total")
_TOTAL_TOLERANCE = 0.005

# (question, gives the order number) -> (train openings, held-out openings)
_OPENINGS: dict[tuple[Question, bool], tuple[tuple[str, ...], tuple[str, ...]]] = {
    ("status", True): (
        ("Hi, where is my order {id}? It still hasn't arrived.",
         "Can you tell me the status of order {id}?"),
        ("What is happening with order {id}, please?",
         "I'm waiting on order {id}. What's its status?")),
    ("status", False): (
        ("Hi, I ordered a {item} and it hasn't arrived. Where is my order?",
         "What's going on with my {item} order?"),
        ("My {item} order still isn't here. Can you check on it?",
         "Could you find out where my {item} is?")),
    ("total", True): (
        ("How much did I pay in total for order {id}?",
         "What was the total charged for my order {id}?"),
        ("Order {id}: what did it cost me altogether?",
         "Can you confirm the amount I paid for order {id}?")),
    ("total", False): (
        ("I bought a {item} recently. How much was I charged for it?",
         "What did my {item} order cost in total?"),
        ("Can you tell me what I paid for my {item}?",
         "How much was my {item} purchase, all in?")),
}
_GIVE_ID = (("It's order {id}.", "The order number is {id}."),
            ("Sure, it is {id}.", "My order number is {id}."))
_PUSH_BACK = (("Are you sure? Please check order {id} again.",),
              ("That doesn't sound right. Could you look up order {id} once more?",))


class SupportTask(TaskSpec):
    """A support conversation about one order, with the tools an agent should get for it.

    ``answer`` is the status word or the total (``"259.60"``); ``tools`` is not
    saved (``metadata["tools"]`` keeps the names); ``user_sim`` plays the customer.
    """

    answer: str
    order_id: str
    tools: tuple[BaseTool, ...] = Field(default=(), exclude=True)


def answer_given(episode: Episode, answer: Any) -> bool:
    """The stop test of a support conversation: the agent's last answer passes the task's
    ``answer`` check (the customer's question is answered, rightly).

    >>> from agentic_loop.episodes import ModelStep
    >>> answer_given(Episode(steps=[ModelStep(text="It has shipped.")], final="It has shipped."),
    ...              "shipped")
    True
    """
    if not episode.final.strip():
        return False
    return Rubric.for_constraints(answer=answer).evaluate("", episode.final).passed


def _answer_constraint(order: Order, question: Question) -> Any:
    if question == "status":
        return order.status
    return {"value": float(order.total), "tolerance": _TOTAL_TOLERANCE}


def _task(order: Order, question: Question, gives_id: bool, split: SupportSplit,
          r: random.Random, tools: tuple[BaseTool, ...]) -> SupportTask:
    held = split == "held_out"
    fields = {"id": order.id, "item": order.item}
    opening = r.choice(_OPENINGS[(question, gives_id)][held]).format(**fields)
    replies = ([] if gives_id else [r.choice(_GIVE_ID[held]).format(**fields)])
    replies.append(r.choice(_PUSH_BACK[held]).format(**fields))
    answer = _answer_constraint(order, question)
    user = UserSimulator.scripted(replies, goal=f"learn the {question} of order {order.id}",
                                  stop=answer_given, stop_args={"answer": answer})
    return SupportTask(
        task=opening, split=split, user_sim=user, tools=tools, order_id=order.id,
        answer=order.status if question == "status" else order.total_text,
        constraints={"answer": answer,
                     "verified_with": {"tool": order_lookup.name, "contains": order.id}},
        metadata={"family": "support", "question": question, "gives_id": gives_id,
                  "needs": [order_lookup.name], "tools": [tool.name for tool in tools],
                  "answer_text": order.status if question == "status" else order.total_text})


def support_tasks(n: int, *, split: SupportSplit = "train", seed: int = 0,
                  tools: Sequence[BaseTool] | None = None) -> list[SupportTask]:
    """``n`` distinct support conversations of one split, cycling through the question and
    whether the first message gives the order number.

    Distinct means a new task text and a new (order, question) each time; a kind that runs
    out (a first message without the number names only the item) is skipped from then on.
    ``tools`` replaces the default (the order lookup alone).

    Raises:
        ConfigError: for an unknown split, ``n < 1``, or more tasks than can be distinct.
    """
    if split not in SUPPORT_SPLITS:
        raise ConfigError(f"split must be one of {SUPPORT_SPLITS}, got {split!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"n must be an int >= 1, got {n!r}")
    given = (order_lookup,) if tools is None else tuple(tools)
    kinds = [(q, g) for q in SUPPORT_QUESTIONS for g in (True, False)]
    r = random.Random(seed * 1_000_003 + (41 if split == "train" else 53))
    out: list[SupportTask] = []
    texts: set[str] = set()
    asked: set[tuple[str, str]] = set()
    exhausted: set[tuple[Question, bool]] = set()
    turn = 0
    while len(out) < n:
        if len(exhausted) == len(kinds):
            raise ConfigError(f"cannot make {n} distinct {split} support tasks (made "
                              f"{len(out)}); ask for fewer")
        question, gives_id = kinds[turn % len(kinds)]
        turn += 1
        if (question, gives_id) in exhausted:
            continue
        for _ in range(200):
            order = r.choice(ORDERS)
            if (order.id, question) in asked:
                continue
            spec = _task(order, question, gives_id, split, r, given)
            if spec.task not in texts:
                texts.add(spec.task)
                asked.add((order.id, question))
                out.append(spec.model_copy(update={"id": f"support-{split}-{seed}-{len(out)}"}))
                break
        else:
            exhausted.add((question, gives_id))
    return out
