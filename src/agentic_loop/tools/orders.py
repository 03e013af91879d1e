"""A table of customer orders and the tool that looks one up: the support tasks' ground truth.

Why a fixed table in the package: a support agent's answer ("your order
shipped", "you paid $48.20") is right only if it came from the order
system, and a check can tell only when the lookup is a tool call in the
episode and the table is known exactly. The table is made once from a fixed
seed, so every process, test and bench run sees the same orders; it holds no
personal data (no names, addresses or emails), so the episodes that read it
can go into a dataset as they are.

The tool is :func:`~agentic_loop.tools.lookup_tool` over the table (one
argument, ``key``: the order number, forgiving of case and a leading ``#``);
an unknown number is an error result naming the closest ones.

Example:
    >>> order = ORDERS[0]
    >>> order.id, order.status in ORDER_STATUSES
    ('A4545', True)
    >>> order_lookup.invoke({"key": "#" + order.id.lower()}) == order.record()
    True
    >>> order.record()
    'Order A4545: 4 x backpack, total $259.60, status: processing (updated 2026-03-22).'
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from decimal import Decimal

from agentic_loop.errors import ConfigError
from agentic_loop.tools.lookup import lookup_tool

__all__ = ["ORDERS", "ORDER_STATUSES", "ORDER_TABLE", "Order", "order_by_id", "order_lookup"]

#: What an order can be doing; one word each, so an answer's check can look for the word.
ORDER_STATUSES: tuple[str, ...] = ("processing", "shipped", "delivered", "cancelled", "returned")
_ITEMS: tuple[tuple[str, str], ...] = (
    ("desk lamp", "29.00"), ("phone case", "12.50"), ("water bottle", "18.75"),
    ("backpack", "64.90"), ("keyboard", "49.99"), ("wool scarf", "22.40"),
    ("coffee grinder", "39.95"), ("yoga mat", "27.30"), ("headphones", "79.00"),
    ("notebook set", "9.80"), ("plant pot", "15.60"), ("bike light", "24.25"))
_COUNT = 200
_SEED = 3301


@dataclass(frozen=True)
class Order:
    """One order: its number, what was bought, the total paid, its status and when it last
    changed."""

    id: str
    item: str
    quantity: int
    total: Decimal
    status: str
    updated: str

    @property
    def total_text(self) -> str:
        """The total as written in the record and expected in an answer (``259.60``)."""
        return f"{self.total:.2f}"

    def record(self) -> str:
        """The line the lookup tool returns for this order."""
        return (f"Order {self.id}: {self.quantity} x {self.item}, total ${self.total_text}, "
                f"status: {self.status} (updated {self.updated}).")


def _orders() -> tuple[Order, ...]:
    r = random.Random(_SEED)
    numbers = r.sample(range(1001, 9999), _COUNT)
    out = []
    for number in numbers:
        item, price = r.choice(_ITEMS)
        quantity = r.randint(1, 4)
        out.append(Order(id=f"A{number}", item=item, quantity=quantity,
                         total=Decimal(price) * quantity, status=r.choice(ORDER_STATUSES),
                         updated=f"2026-03-{r.randint(1, 28):02d}"))
    return tuple(out)


#: The orders, in a fixed order (made from a fixed seed).
ORDERS: tuple[Order, ...] = _orders()
#: Order number -> the lookup's answer.
ORDER_TABLE: dict[str, str] = {order.id: order.record() for order in ORDERS}
_BY_ID = {order.id: order for order in ORDERS}

#: The order lookup tool (name ``order_lookup``, one argument ``key``).
order_lookup = lookup_tool(
    ORDER_TABLE, name="order_lookup",
    description="Look up a customer's order by its order number (such as A4545): the item, "
                "the total paid, and the order's status.")


def order_by_id(order_id: str) -> Order:
    """The order with this number.

    Raises:
        ConfigError: for a number not in the table.
    """
    order = _BY_ID.get(order_id.strip().upper().lstrip("#"))
    if order is None:
        raise ConfigError(f"no order {order_id!r} in the order table; order numbers are such as "
                          f"{', '.join(o.id for o in ORDERS[:3])}")
    return order
