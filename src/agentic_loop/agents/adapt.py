"""Whatever the user passes as ``llm`` (or ``llm`` plus ``tools=``), as an agent the loops can run.

Why: an agent app's unit of work is an agent, not a prompt-to-text call. The
architectures accept three kinds of agent wherever a chat model goes, and
:func:`as_agent` turns each into one :class:`AgentRunner`:

* ``"graph"``: a compiled LangGraph graph with a ``messages`` state
  (LangChain's ``create_agent``, LangGraph's ``create_react_agent``, a user's
  ``StateGraph``); it is invoked with ``{"messages": [...]}`` and keeps its own
  checkpointer, store and interrupts (each episode runs on a thread of its own);
* ``"runnable"``: any other Runnable that takes messages and returns messages,
  a message, or a dict with ``"messages"``;
* ``"tools"``: a chat model plus ``tools=[...]``; the tool loop is built here on
  LangGraph's prebuilt pieces (:func:`tool_agent`: the model bound to the
  tools, a ``ToolNode`` that turns a tool's exception into an error result and
  caps a huge result, ``tools_condition``).

A plain chat model without tools is no agent (:func:`as_agent` returns
``None``): the loops call it as they always did.

Example:
    >>> from langchain_core.runnables import RunnableLambda
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> as_agent(ScriptedChatModel()) is None
    True
    >>> echo = as_agent(RunnableLambda(lambda messages: "done"))
    >>> echo.kind, echo.chat_model is None
    ('runnable', True)
    >>> calc = as_agent(ScriptedChatModel(model_id="m"), tools=[len])
    >>> calc.kind, calc.name, calc.chat_model.model_id
    ('tools', 'm', 'm')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.pregel import Pregel

from agentic_loop.episodes import CUT_FROM_KEY, cap_tool_output
from agentic_loop.errors import ConfigError
from agentic_loop.models.tools import tool_specs
from agentic_loop.models.wrappers import inner_chat_model, model_id_of

__all__ = ["CUT_FROM_KEY", "TEMPERATURE_KEY", "AgentKind", "AgentRunner", "agent_chat_model",
           "agent_options", "as_agent", "output_messages", "tool_agent"]

AgentKind = Literal["graph", "runnable", "tools"]
#: The ``configurable`` key the package's own tool loop reads its sampling temperature from.
TEMPERATURE_KEY = "agentic_loop_temperature"


@dataclass(frozen=True)
class AgentRunner:
    """One agent, ready to run an episode: what to invoke, with what input, and its names.

    ``chat_model``: the chat model inside the agent when one was found (the
    default judge); ``supersteps_per_step``: LangGraph steps one model call
    takes at most, to derive a ``recursion_limit`` from an episode's step limit.
    """

    runnable: Runnable[Any, Any]
    kind: AgentKind
    name: str
    chat_model: BaseChatModel | None = None
    supersteps_per_step: int = 2
    #: the tools as OpenAI function specs, when the package built the tool loop (an episode
    #: records them when its model calls do not say which tools they were offered)
    tool_specs: tuple[dict[str, Any], ...] | None = None

    def input_of(self, messages: Sequence[BaseMessage]) -> Any:
        """What the agent is invoked with for a conversation."""
        return list(messages) if self.kind == "runnable" else {"messages": list(messages)}

    def recursion_limit(self, max_steps: int) -> int:
        """A LangGraph recursion limit that lets ``max_steps`` model calls finish."""
        return self.supersteps_per_step * (max_steps + 1) + 2


def _capped(request: Any, execute: Callable[[Any], Any]) -> Any:
    """ToolNode's wrapper: a tool result longer than the record's cap is cut for the agent too."""
    result = execute(request)
    if isinstance(result, ToolMessage):
        text, cut_from = cap_tool_output(result.content)
        if cut_from is not None:  # the record keeps the length it had (see CUT_FROM_KEY)
            return result.model_copy(update={
                "content": text,
                "additional_kwargs": {**result.additional_kwargs, CUT_FROM_KEY: cut_from}})
    return result


def tool_agent(model: Runnable[Any, Any], tools: Sequence[Any], *, system: str | None = None,
               name: str | None = None, first_tool_choice: Any = None) -> Pregel:
    """The package's own tool loop: ``model`` bound to ``tools`` until it answers without a call.

    A tool that raises becomes an error result the model sees (and the
    episode records); a result over :data:`~agentic_loop.episodes.MAX_TOOL_RESULT_CHARS`
    is cut. The sampling temperature of a round arrives in the config
    (:data:`TEMPERATURE_KEY`). ``first_tool_choice`` (e.g. ``"any"``) binds the
    episode's first model call with that ``tool_choice``: a small model that
    rarely opens with a call is made to use a tool once, then answers freely.
    Pass the compiled graph as ``llm`` (an agent graph) to use it.
    """
    try:
        bound = model.bind_tools(list(tools))  # type: ignore[attr-defined]
        first = (bound if first_tool_choice is None else
                 model.bind_tools(list(tools), tool_choice=first_tool_choice))  # type: ignore[attr-defined]
    except (AttributeError, NotImplementedError) as exc:
        raise ConfigError(f"{repr(model)[:80]} cannot call tools (no bind_tools); pass a chat "
                          "model that supports tool calling, or your own agent graph") from exc

    def agent(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        temperature = (config.get("configurable") or {}).get(TEMPERATURE_KEY)
        sent = list(state["messages"])
        chosen = bound if _answered_since_prompt(sent) else first
        runnable = chosen.bind(temperature=temperature) if temperature is not None else chosen
        if system:
            sent = [SystemMessage(system), *sent]
        return {"messages": [runnable.invoke(sent, config)]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(list(tools), handle_tool_errors=True,
                                     wrap_tool_call=_capped))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(name=name or "tool_agent")


def _answered_since_prompt(messages: Sequence[BaseMessage]) -> bool:
    """Whether the model already spoke in this episode: an AI message after the last user
    message (few-shot episodes shown in the prompt hold AI messages of their own).

    >>> from langchain_core.messages import HumanMessage
    >>> shot = [HumanMessage("q1"), AIMessage("a1"), HumanMessage("q2")]
    >>> _answered_since_prompt(shot), _answered_since_prompt([*shot, AIMessage("a2")])
    (False, True)
    """
    last_user = max((i for i, m in enumerate(messages) if m.type == "human"), default=-1)
    return any(isinstance(m, AIMessage) for m in messages[last_user + 1:])


def _chat_models_in(obj: Any, depth: int = 0) -> BaseChatModel | None:
    """A chat model reachable from a graph node's runnable (its steps, its function's closure)."""
    found = inner_chat_model(obj)
    if found is not None or depth > 3:
        return found
    children: list[Any] = []
    for attr in ("bound", "steps", "first", "middle", "last", "func", "afunc"):
        value = getattr(obj, attr, None)
        if value is not None and value is not obj:
            children.extend(value if isinstance(value, list | tuple) else [value])
    for cell in getattr(obj, "__closure__", None) or ():
        try:
            children.append(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
    for child in children:
        if isinstance(child, str | int | float | bool | dict):
            continue
        hit = _chat_models_in(child, depth + 1)
        if hit is not None:
            return hit
    return None


def agent_chat_model(graph: Pregel) -> BaseChatModel | None:
    """The chat model a compiled agent graph calls, when it can be found (else None).

    Found for ``create_react_agent``, ``create_agent`` and graphs whose node
    functions close over their model; a judge can always be given as ``judge=``.
    """
    for node in getattr(graph, "nodes", {}).values():
        hit = _chat_models_in(getattr(node, "bound", None))
        if hit is not None:
            return hit
    return None


def _name(obj: Any, fallback: str) -> str:
    name = getattr(obj, "name", None)
    return name if isinstance(name, str) and name and name != "LangGraph" else fallback


def as_agent(llm: Any, tools: Sequence[Any] | None = None, *,
             system: str | None = None) -> AgentRunner | None:
    """``llm`` (and ``tools``) as an agent, or ``None`` for a plain chat model (no tools).

    Raises :class:`ConfigError` for a graph without a ``messages`` state, or
    ``tools=`` given with something that is not a chat model.
    """
    model = inner_chat_model(llm) if isinstance(llm, Runnable) else None
    if tools:
        if model is None:
            raise ConfigError(f"tools= goes with a chat model, not {repr(llm)[:80]}; give the "
                              "tools to your agent instead, or pass a chat model")
        return AgentRunner(tool_agent(llm, tools, system=system, name="tool_agent"), "tools",
                           name=model_id_of(llm), chat_model=model,
                           tool_specs=tuple(tool_specs(tools)))
    if model is not None or not isinstance(llm, Runnable):
        return None
    if isinstance(llm, Pregel):
        if "messages" not in llm.channels:
            raise ConfigError(f"the graph {_name(llm, type(llm).__name__)!r} has no 'messages' "
                              "state; an agent graph takes and returns {'messages': [...]} "
                              "(MessagesState, create_agent, create_react_agent)")
        found = agent_chat_model(llm)
        return AgentRunner(llm, "graph", name=_name(llm, model_id_of(found) if found
                                                    else "agent"),
                           chat_model=found, supersteps_per_step=4)
    return AgentRunner(llm, "runnable", name=_name(llm, type(llm).__name__))


def output_messages(agent: AgentRunner, sent: Sequence[BaseMessage],
                    output: Any) -> tuple[list[BaseMessage], int]:
    """The conversation an agent's output holds, and where its episode starts in it.

    >>> from langchain_core.messages import HumanMessage
    >>> from langchain_core.runnables import RunnableLambda
    >>> agent = as_agent(RunnableLambda(lambda m: m))
    >>> messages, start = output_messages(agent, [HumanMessage("hi")], "hello")
    >>> [m.content for m in messages], start
    (['hello'], 0)
    """
    if isinstance(output, dict) and "messages" in output:
        output = output["messages"]
    if isinstance(output, str):
        return [AIMessage(output)], 0
    if isinstance(output, BaseMessage):
        return [output], 0
    if isinstance(output, list | tuple) and all(isinstance(m, BaseMessage) for m in output):
        messages = list(output)
        given = list(sent)
        starts_with_sent = (len(messages) >= len(given) and all(
            a is b or (a.type == b.type and a.content == b.content)
            for a, b in zip(messages, given, strict=False)))
        return messages, len(given) if starts_with_sent else 0
    raise ConfigError(f"the agent returned {type(output).__name__}; an agent returns messages, "
                      "a message, a string or a dict with 'messages'")


def agent_options(chat: Any, tools: Sequence[Any], *, first_tool_call: bool = False,
                  max_steps: int | None = None) -> dict[str, Any]:
    """The architecture keywords that make ``chat`` an agent with ``tools`` (none: ``llm`` only).

    One rule for every caller (``agentic-loop run --tools --first-tool-call``, ``improve``'s
    grow stage and gate): forcing each episode's first call needs the package's own tool loop,
    built here, with ``chat`` as the judge; otherwise the architecture builds it from
    ``tools=``.

    >>> from agentic_loop.testing import ScriptedChatModel
    >>> llm = ScriptedChatModel()
    >>> sorted(agent_options(llm, [len], max_steps=3))
    ['llm', 'max_steps', 'tools']
    >>> sorted(agent_options(llm, [len], first_tool_call=True))
    ['judge', 'llm']
    >>> agent_options(llm, [], max_steps=3) == {"llm": llm}
    True
    """
    if not tools:
        return {"llm": chat}
    options: dict[str, Any] = (
        {"llm": tool_agent(chat, list(tools), first_tool_choice="any"), "judge": chat}
        if first_tool_call else {"llm": chat, "tools": list(tools)})
    return options if max_steps is None else {**options, "max_steps": max_steps}
