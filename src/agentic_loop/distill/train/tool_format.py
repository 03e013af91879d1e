"""Tool-calling rows turned into the text a model is trained on: the engine's, or its template's.

An exported episode (``messages`` with assistant ``tool_calls`` and ``tool``
results, plus the ``tools`` offered) can be shown to a model in two ways,
and training must show it the way the model will see it when it runs:

* ``"engine"``: the in-process engine's own format
  (:mod:`agentic_loop.models.tools`), for models whose chat template knows
  no tools, as the embedded SmolLM2's does not. The tools are described in
  the system message, earlier calls are written back in words, results come
  back as ``The tool X returned: ...`` user turns, and a call is decoded as
  compact JSON. Each assistant turn becomes one prompt-completion row:
  prompt = the conversation before the turn, rendered by
  :func:`~agentic_loop.models.tools.engine_chat` exactly as
  ``LocalChatModel`` renders it; completion = the turn as the engine decodes
  it (:meth:`~agentic_loop.models.tools.ToolPlan.call_json` for a call, the
  text for an answer). TRL then computes the loss on the completion only:
  every assistant turn, calls included, is learned; prompts and tool results
  never are. An assistant turn with text *and* a call is learned as the call
  (the engine decodes one or the other); the text stays in later prompts.
* ``"chat_template"``: the rows keep ``tool_calls``, ``tool`` messages and
  ``tools``, and TRL renders them with the model's own template (a model
  served by vLLM with a tool parser). They are split per assistant turn too,
  so the loss covers every assistant turn and no tool result.

``"auto"`` picks ``chat_template`` when the template mentions ``tools``, else
``engine``. Prompts are rendered as under ``tool_choice="auto"`` (text or a
call), the choice the model is trained to make.

DPO pairs: in ``engine`` format the shared prompt is rendered as the engine
would, and each side's continuation as the model would produce and see it:
assistant turns as decoded (JSON for a call, text for an answer), tool
results as the engine shows them. TRL's DPO loss covers *every* token of
the continuation: the first differing turn, and also the tool results and
later turns that follow it (it has no per-message mask). Those results are
scored under both the policy and the reference, so their share of the
log-ratio is what training moved, not their raw likelihood.
A pair whose episodes part at a tool result (the same call, different
results) would end its prompt on the model's own call; that call moves to
the head of both sides (:func:`starting_at_a_turn`), where it cancels.

Example:
    >>> spec = {"type": "function", "function": {"name": "calc", "description": "Arithmetic.",
    ...         "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}}}}
    >>> call = {"id": "c1", "type": "function",
    ...         "function": {"name": "calc", "arguments": {"expr": "53*47"}}}
    >>> row = {"tools": [spec], "messages": [
    ...     {"role": "user", "content": "53 * 47?"},
    ...     {"role": "assistant", "content": "", "tool_calls": [call]},
    ...     {"role": "tool", "tool_call_id": "c1", "name": "calc", "content": "2491"},
    ...     {"role": "assistant", "content": "2491."}]}
    >>> first, second = engine_sft_rows(row, chat_template=None)
    >>> first["completion"]
    [{'role': 'assistant', 'content': '{"name":"calc","arguments":{"expr":"53*47"}}'}]
    >>> [m["content"] for m in second["prompt"][2:]], second["completion"][0]["content"]
    (['I called calc(expr="53*47").', 'The tool calc returned: 2491'], '2491.')
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.tool import tool_call

from agentic_loop.distill.train.settings import TOOL_FORMATS
from agentic_loop.distill.train.training_data import TrainingDataError
from agentic_loop.models.tools import ToolPlan, engine_chat

__all__ = ["TOOL_FORMATS", "ToolRows", "as_langchain", "chat_template_pair_row",
           "chat_template_sft_rows", "engine_pair_row", "engine_sft_rows", "is_tool_row",
           "resolve_tool_format", "starting_at_a_turn", "training_rows"]

_Row = dict[str, Any]


def resolve_tool_format(setting: str, chat_template: str | None) -> str:
    """``"engine"`` or ``"chat_template"``: ``setting`` itself, or for ``"auto"`` the template's.

    >>> resolve_tool_format("auto", "{% for m in messages %}..."), resolve_tool_format(
    ...     "auto", "{% if tools %}...{% endif %}")
    ('engine', 'chat_template')
    """
    if setting not in TOOL_FORMATS:
        raise TrainingDataError(f"tool_format must be one of {', '.join(TOOL_FORMATS)}, "
                                f"got {setting!r}")
    if setting != "auto":
        return setting
    return "chat_template" if "tools" in (chat_template or "") else "engine"


def is_tool_row(row: _Row) -> bool:
    """Whether a checked row (``training_data``) is a tool-calling one (it keeps ``tools``)."""
    return bool(row.get("tools"))


def as_langchain(messages: Sequence[_Row], plan: ToolPlan) -> list[BaseMessage]:
    """Checked row messages as the LangChain messages an agent's state held.

    A call's arguments are put in the order the engine decodes them (the
    schema's), the order its call is then written back in.
    """
    out: list[BaseMessage] = []
    for m in messages:
        if m["role"] == "system":
            out.append(SystemMessage(m["content"]))
        elif m["role"] == "user":
            out.append(HumanMessage(m["content"]))
        elif m["role"] == "tool":
            out.append(ToolMessage(m["content"], tool_call_id=m["tool_call_id"], name=m["name"]))
        else:
            calls = [tool_call(name=c["function"]["name"], id=c["id"], args=json.loads(
                plan.call_json(c["function"]["name"], c["function"]["arguments"]))["arguments"])
                for c in m.get("tool_calls", ())]
            out.append(AIMessage(m["content"], tool_calls=calls))
    return out


def _decoded(message: _Row, plan: ToolPlan) -> str:
    """An assistant turn as the engine decodes it: one call's JSON, or the answer's text."""
    calls = message.get("tool_calls") or []
    if len(calls) > 1:
        names = [c["function"]["name"] for c in calls]
        raise TrainingDataError(
            f"an assistant turn makes {len(calls)} calls at once ({names}); the in-process "
            "engine makes one call per turn, so it cannot be shown this turn; set "
            "tool_format='chat_template' for a model whose template takes parallel calls, or "
            "export one call per turn")
    if calls:
        function = calls[0]["function"]
        return plan.call_json(function["name"], function["arguments"])
    return str(message["content"]).lstrip()  # the grammar's text never starts with a space


def engine_sft_rows(row: _Row, chat_template: str | None) -> list[_Row]:
    """One prompt-completion row per assistant turn of a tool row, in the engine's format."""
    plan = ToolPlan.of(row["tools"])
    messages = row["messages"]
    history = as_langchain(messages, plan)
    out = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        text = _decoded(message, plan)
        if not text:
            continue  # an empty turn teaches nothing (the last one is checked non-empty)
        out.append({"prompt": engine_chat(history[:i], plan, chat_template),
                    "completion": [{"role": "assistant", "content": text}]})
    return out


def _continuation(messages: Sequence[_Row], plan: ToolPlan,
                  chat_template: str | None) -> list[dict[str, str]]:
    """Messages after a shared prompt: assistant turns as decoded, the rest as the engine shows."""
    shown = engine_chat(as_langchain(messages, plan), None, chat_template)  # one dict per message
    return [{"role": "assistant", "content": _decoded(m, plan)} if m["role"] == "assistant"
            else dict(s) for m, s in zip(messages, shown, strict=True)]


def starting_at_a_turn(row: _Row) -> _Row:
    """A pair whose prompt ends where the model's turn begins (not after a call of its own).

    Two episodes that make the same call and then read different results
    share a prompt ending on that call; a chat template's generation prompt
    after it would open an assistant turn the continuations do not have. The
    shared call moves to the head of both continuations instead: the same
    tokens after the same context, they add equally to both sides of DPO's
    log-ratio and cancel.
    """
    prompt = list(row["prompt"])
    moved: list[_Row] = []
    while len(prompt) > 1 and prompt[-1]["role"] == "assistant":
        moved.insert(0, prompt.pop())
    if not moved:
        return row
    return {**row, "prompt": prompt, "chosen": [*moved, *row["chosen"]],
            "rejected": [*moved, *row["rejected"]]}


def engine_pair_row(row: _Row, chat_template: str | None) -> _Row:
    """A tool pair as one conversational preference row in the engine's format."""
    row = starting_at_a_turn(row)
    plan = ToolPlan.of(row["tools"])
    return {"prompt": engine_chat(as_langchain(row["prompt"], plan), plan, chat_template),
            "chosen": _continuation(row["chosen"], plan, chat_template),
            "rejected": _continuation(row["rejected"], plan, chat_template)}


def chat_template_sft_rows(row: _Row) -> list[_Row]:
    """One prompt-completion row per assistant turn, tool calls and ``tools`` kept for TRL.

    ``tools`` goes as a JSON string (TRL decodes it), so rows offering
    different tools still make one dataset column.
    """
    tools = json.dumps(row["tools"])
    messages = row["messages"]
    return [{"prompt": messages[:i], "completion": [m], "tools": tools}
            for i, m in enumerate(messages)
            if m["role"] == "assistant" and (m.get("tool_calls") or m["content"].strip())]


def chat_template_pair_row(row: _Row) -> _Row:
    """A tool pair as TRL takes it, ``tools`` as a JSON string."""
    return {**starting_at_a_turn(row), "tools": json.dumps(row["tools"])}


@dataclass(frozen=True)
class ToolRows:
    """Rows ready for TRL, and what the conversion did (for the model card's stage metrics)."""

    rows: list[_Row]
    tool_format: str | None  # None when no row called tools
    tool_rows: int
    turns: int

    def metrics(self) -> dict[str, Any]:
        """``{}`` without tool rows, else the format used and the rows and turns it covered."""
        if self.tool_format is None:
            return {}
        return {"tool_format": self.tool_format, "tool_rows": self.tool_rows,
                "tool_turns": self.turns}


def training_rows(stage: str, rows: Sequence[_Row], setting: str,
                  chat_template: str | None) -> ToolRows:
    """``rows`` of an SFT or DPO stage as TRL takes them; plain rows pass through unchanged.

    >>> plain = {"prompt": [{"role": "user", "content": "Hi"}],
    ...          "completion": [{"role": "assistant", "content": "Hello"}]}
    >>> done = training_rows("sft", [plain], "auto", None)
    >>> done.rows == [plain], done.metrics()
    (True, {})
    """
    fmt = resolve_tool_format(setting, chat_template)
    out: list[_Row] = []
    tool_rows = turns = 0
    for row in rows:
        if not is_tool_row(row):
            out.append({k: v for k, v in row.items() if k != "tools"})
            continue
        tool_rows += 1
        if stage == "sft":
            split = (engine_sft_rows(row, chat_template) if fmt == "engine"
                     else chat_template_sft_rows(row))
            turns += len(split)
            out.extend(split)
        else:
            turns += 1
            out.append(engine_pair_row(row, chat_template) if fmt == "engine"
                       else chat_template_pair_row(row))
    if fmt == "chat_template" and tool_rows:
        out = [r if "tools" in r else {**r, "tools": None} for r in out]
    return ToolRows(out, fmt if tool_rows else None, tool_rows, turns)
