"""Ready tools for agents: a calculator, a sandboxed Python interpreter, lookups in a local
table; errors, timeouts and huge outputs come back as data, never as a crash.

Every tool here is a LangChain tool with flat, simple arguments (one string
each), so a small model's tool-call grammar can follow them, and each is
wrapped by :func:`safe_tool`: an exception, a timeout or invalid arguments end
as an error result (``ToolMessage(status="error")``), and an output over
:data:`~agentic_loop.episodes.MAX_TOOL_RESULT_CHARS` is cut, with the length it
had kept for the record. :mod:`.safe` does that for any tool; :mod:`.calculator`
evaluates arithmetic from its syntax tree (never ``eval``); :mod:`.python_tool`
runs code in the judges' sandbox, so an agent's code cannot reach the
evaluator, the archive, the trajectory files or the host; :mod:`.lookup` builds
a lookup over any small table, :mod:`.reference` is the table of exact
unit factors and element data that the tool tasks
(:mod:`agentic_loop.tasks.tool_tasks`) use, :mod:`.orders` the order table and
``order_lookup`` tool of the support tasks (:mod:`agentic_loop.tasks.support_tasks`),
and :mod:`.ready` names the ready
tools for the CLI (:func:`ready_tools`).

Example:
    >>> from agentic_loop.tools import calculator, reference_lookup
    >>> calculator.invoke({"expression": "53 * 47"})
    '2491'
    >>> reference_lookup.invoke({"key": "pound"})
    '1 pound = 0.45359237 kilograms'
"""

from agentic_loop.tools.calculator import (
    MAX_DIGITS,
    MAX_EXPONENT,
    MAX_EXPRESSION_CHARS,
    CalculatorError,
    calculate,
    calculator,
)
from agentic_loop.tools.lookup import lookup_key, lookup_tool
from agentic_loop.tools.orders import (
    ORDER_STATUSES,
    ORDER_TABLE,
    ORDERS,
    Order,
    order_by_id,
    order_lookup,
)
from agentic_loop.tools.python_tool import (
    PYTHON_TOOL_DESCRIPTION,
    echo_last_expression,
    python_tool,
    run_python,
)
from agentic_loop.tools.ready import READY_TOOLS, ready_tools
from agentic_loop.tools.reference import (
    ELEMENTS,
    REFERENCE_TABLE,
    UNITS,
    Element,
    Unit,
    reference_lookup,
)
from agentic_loop.tools.safe import (
    DEFAULT_TOOL_TIMEOUT_S,
    SafeTool,
    ToolFailed,
    cut_note,
    safe_tool,
)

__all__ = [
    "READY_TOOLS",
    "DEFAULT_TOOL_TIMEOUT_S",
    "ELEMENTS",
    "MAX_DIGITS",
    "MAX_EXPONENT",
    "MAX_EXPRESSION_CHARS",
    "ORDERS",
    "ORDER_STATUSES",
    "ORDER_TABLE",
    "PYTHON_TOOL_DESCRIPTION",
    "REFERENCE_TABLE",
    "UNITS",
    "CalculatorError",
    "Element",
    "Order",
    "SafeTool",
    "ToolFailed",
    "Unit",
    "calculate",
    "ready_tools",
    "calculator",
    "cut_note",
    "echo_last_expression",
    "lookup_key",
    "lookup_tool",
    "order_by_id",
    "order_lookup",
    "python_tool",
    "reference_lookup",
    "run_python",
    "safe_tool",
]
