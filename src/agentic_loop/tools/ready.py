"""The ready tools by name, so a command line or a config file can ask for them.

``agentic-loop run --tools calculator,python`` and a LangGraph server's
settings name tools as strings; this is the one table that turns those names
into tools, and its error lists the names there are.

Example:
    >>> [t.name for t in ready_tools("calculator, lookup")]
    ['calculator', 'lookup']
    >>> try:
    ...     ready_tools(["abacus"])
    ... except ConfigError as exc:
    ...     print(exc)
    unknown tool 'abacus'; the ready tools are calculator, lookup, orders, python
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from langchain_core.tools import BaseTool

from agentic_loop.errors import ConfigError
from agentic_loop.tools.calculator import calculator
from agentic_loop.tools.orders import order_lookup
from agentic_loop.tools.python_tool import python_tool
from agentic_loop.tools.reference import reference_lookup

__all__ = ["READY_TOOLS", "ready_tools"]

#: name -> a function giving the tool (the Python tool is built per call: it holds its limits)
READY_TOOLS: dict[str, Callable[[], BaseTool]] = {
    "calculator": lambda: calculator,
    "lookup": lambda: reference_lookup,
    "orders": lambda: order_lookup,
    "python": python_tool,
}


def ready_tools(names: str | Sequence[str]) -> list[BaseTool]:
    """The ready tools named (a comma-separated string or a list), in order, each once."""
    wanted = names.split(",") if isinstance(names, str) else list(names)
    out: list[BaseTool] = []
    for raw in dict.fromkeys(n.strip().lower() for n in wanted if n.strip()):
        make = READY_TOOLS.get(raw)
        if make is None:
            raise ConfigError(f"unknown tool {raw!r}; the ready tools are "
                              f"{', '.join(sorted(READY_TOOLS))}")
        out.append(make())
    return out
