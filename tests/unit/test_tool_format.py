"""Tool-calling rows in the shared export format: read and checked, then turned into training text.

The engine format is checked against the exact ChatML text the embedded
SmolLM2's tokenizer renders (its tokenizer only; no weights load).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from agentic_loop.distill.train.settings import TrainSettings
from agentic_loop.distill.train.tool_format import (
    engine_pair_row,
    engine_sft_rows,
    resolve_tool_format,
    training_rows,
)
from agentic_loop.distill.train.training_data import (
    TrainingDataError,
    read_pair_rows,
    read_sft_rows,
)
from agentic_loop.errors import ConfigError
from agentic_loop.models.tools import ToolPlan, call_json

SYSTEM = "You are a careful calculator agent."
CALC = {"type": "function", "function": {
    "name": "calculator", "description": "Evaluate an arithmetic expression.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"},
                                                    "digits": {"type": "integer"}},
                   "required": ["expression"]}}}
CALL = {"id": "call_1", "type": "function",
        "function": {"name": "calculator", "arguments": {"digits": 0, "expression": "53*47"}}}
EPISODE: dict[str, Any] = {
    "messages": [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "What is 53 * 47?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "name": "calculator", "content": "2491"},
        {"role": "assistant", "content": "53 * 47 = 2491."}],
    "tools": [CALC],
    "metadata": {"episode": {"model_steps": 2, "tool_calls": 1, "tools_called": ["calculator"]}}}
PLAIN = {"messages": [{"role": "user", "content": "Hi?"},
                      {"role": "assistant", "content": "Hello."}], "metadata": {"reward": 1.0}}
PAIR: dict[str, Any] = {
    "prompt": EPISODE["messages"][:2],
    "chosen": EPISODE["messages"][2:],
    "rejected": [{"role": "assistant", "content": "It is 2500."}],
    "tools": [CALC], "metadata": {}}
TOOLS_TEXT = (
    "You can call these tools:\n"
    '- calculator: Evaluate an arithmetic expression. Arguments: {"expression": string, '
    '"digits": integer}\n'
    'To call a tool, reply with only this JSON: {"name": "<tool name>", "arguments": {...}}.\n'
    "When you have what you need, answer the user in plain text.")
CALL_TEXT = '{"name":"calculator","arguments":{"expression":"53*47","digits":0}}'


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    from agentic_loop.models.embedded import ensure_converted

    return AutoTokenizer.from_pretrained(str(ensure_converted()))


def _write(path: Path, *rows: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _chatml(*turns: tuple[str, str], generation: bool = True) -> str:
    text = "".join(f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in turns)
    return text + ("<|im_start|>assistant\n" if generation else "")


# -- reading and checking ---------------------------------------------------------------------

def test_a_tool_row_is_read_whole_and_a_plain_row_as_before(tmp_path: Path) -> None:
    rows = read_sft_rows(_write(tmp_path / "sft.jsonl", EPISODE, PLAIN))
    assert rows[0] == {"messages": EPISODE["messages"], "tools": [CALC]}
    assert rows[1] == {"prompt": PLAIN["messages"][:1], "completion": PLAIN["messages"][1:]}


def test_a_result_without_its_name_takes_the_name_of_its_call(tmp_path: Path) -> None:
    row = copy.deepcopy(EPISODE)
    del row["messages"][3]["name"]
    row["messages"][2]["content"] = None  # OpenAI's empty content of a call
    [read] = read_sft_rows(_write(tmp_path / "sft.jsonl", row))
    assert read["messages"][3]["name"] == "calculator" and read["messages"][2]["content"] == ""


def _broken(change: Any) -> dict[str, Any]:
    row = copy.deepcopy(EPISODE)
    change(row)
    return row


@pytest.mark.parametrize(("change", "message"), [
    (lambda r: r["messages"][3].update(tool_call_id="call_9"),
     r"sft.jsonl:2: messages\[3\] is a tool result for tool_call_id 'call_9', which no earlier"),
    (lambda r: r["messages"][2]["tool_calls"][0]["function"].pop("name"),
     r"sft.jsonl:2: messages\[2\].tool_calls\[0\] has no function.name"),
    (lambda r: r["messages"][2]["tool_calls"][0]["function"].update(arguments='{"a": 1}'),
     r"messages\[2\].tool_calls\[0\] \(calculator\) arguments must be a JSON object"),
    (lambda r: r["messages"][2]["tool_calls"][0].pop("id"), r"needs a string id"),
    (lambda r: r.update(messages=r["messages"][:3]), r"the last message of 'messages' is a tool "
                                                     "call"),
    (lambda r: r.update(messages=r["messages"][:4]), r"the last message must be the assistant"),
    (lambda r: r.pop("tools"), r'the row calls tools but has no "tools" list'),
    (lambda r: r.update(tools=[{"type": "function", "function": {"name": "search"}}]),
     r"the row calls \['calculator'\], which its \"tools\" list does not offer"),
    (lambda r: r.update(tools=["calculator"]), r'"tools" must be a list of OpenAI function'),
])
def test_a_broken_tool_row_fails_naming_its_line(tmp_path: Path, change: Any,
                                                  message: str) -> None:
    path = _write(tmp_path / "sft.jsonl", PLAIN, _broken(change))
    with pytest.raises(TrainingDataError, match=message):
        read_sft_rows(path)


def test_tool_pairs_are_checked_across_prompt_and_continuations(tmp_path: Path) -> None:
    [pair] = read_pair_rows(_write(tmp_path / "pairs.jsonl", PAIR))
    assert pair["tools"] == [CALC] and pair["chosen"][1]["tool_call_id"] == "call_1"
    cut_off = {**PAIR, "rejected": EPISODE["messages"][2:3]}  # a failed episode may end on a call
    assert read_pair_rows(_write(tmp_path / "pairs.jsonl", cut_off))[0]["rejected"][0]["tool_calls"]
    orphan = {**PAIR, "rejected": [EPISODE["messages"][3], {"role": "assistant", "content": "x"}]}
    with pytest.raises(TrainingDataError, match=r"pairs.jsonl:1: rejected\[0\] is a tool result"):
        read_pair_rows(_write(tmp_path / "pairs.jsonl", orphan))
    plain_call_end = {"prompt": [{"role": "user", "content": "Hi"}],
                      "chosen": [{"role": "assistant", "content": "Hello"}],
                      "rejected": [{"role": "assistant", "content": " "}]}
    with pytest.raises(TrainingDataError, match="the assistant's answer in 'rejected' is empty"):
        read_pair_rows(_write(tmp_path / "pairs.jsonl", plain_call_end))


# -- the engine format: exactly what LocalChatModel renders and decodes ------------------------

def test_each_assistant_turn_is_one_row_with_the_engines_prompt(tokenizer: Any,
                                                                 tmp_path: Path) -> None:
    [row] = read_sft_rows(_write(tmp_path / "sft.jsonl", EPISODE))
    call, answer = engine_sft_rows(row, tokenizer.chat_template)
    system = ("system", f"{SYSTEM}\n\n{TOOLS_TEXT}")
    user = ("user", "What is 53 * 47?")
    render = tokenizer.apply_chat_template
    assert render(call["prompt"], tokenize=False, add_generation_prompt=True) == _chatml(
        system, user)
    assert call["completion"] == [{"role": "assistant", "content": CALL_TEXT}]
    assert render(answer["prompt"], tokenize=False, add_generation_prompt=True) == _chatml(
        system, user, ("assistant", 'I called calculator(expression="53*47", digits=0).'),
        ("user", "The tool calculator returned: 2491"))
    assert answer["completion"] == [{"role": "assistant", "content": "53 * 47 = 2491."}]
    # TRL's completion-only loss: the prompt's tokens are a prefix of prompt + completion's
    for turn in (call, answer):
        prompt_ids = render(turn["prompt"], add_generation_prompt=True, tokenize=True,
                            return_dict=True)["input_ids"]
        whole = render(turn["prompt"] + turn["completion"], tokenize=True,
                       return_dict=True)["input_ids"]
        assert whole[:len(prompt_ids)] == prompt_ids
        assert tokenizer.decode(whole[len(prompt_ids):]) == (
            turn["completion"][0]["content"] + "<|im_end|>\n")


def test_the_call_text_is_the_grammars_compact_json_in_schema_order() -> None:
    plan = ToolPlan.of([CALC])
    assert plan.call_json("calculator", {"digits": 0, "expression": "53*47"}) == CALL_TEXT
    assert json.loads(CALL_TEXT) == {"name": "calculator",
                                     "arguments": {"expression": "53*47", "digits": 0}}
    assert plan.message(CALL_TEXT).tool_calls[0]["args"] == CALL["function"]["arguments"]
    assert call_json("f", {"z": "é", "a": [1, 2]}) == '{"name":"f","arguments":{"z":"é","a":[1,2]}}'


def test_a_row_without_a_system_message_gets_the_tools_as_its_system(tokenizer: Any) -> None:
    row = {"messages": EPISODE["messages"][1:], "tools": [CALC]}
    first = engine_sft_rows(row, tokenizer.chat_template)[0]
    assert first["prompt"][0] == {"role": "system", "content": TOOLS_TEXT}


def test_parallel_calls_cannot_be_shown_in_the_engine_format() -> None:
    row = copy.deepcopy(EPISODE)
    second = {**CALL, "id": "call_2"}
    row["messages"][2]["tool_calls"].append(second)
    with pytest.raises(TrainingDataError, match="makes 2 calls at once.*'chat_template'"):
        engine_sft_rows(row, None)


def test_a_pair_is_the_engines_prompt_and_decoded_continuations(tokenizer: Any,
                                                                 tmp_path: Path) -> None:
    [pair] = read_pair_rows(_write(tmp_path / "pairs.jsonl", PAIR))
    row = engine_pair_row(pair, tokenizer.chat_template)
    assert tokenizer.apply_chat_template(row["prompt"], tokenize=False,
                                         add_generation_prompt=True) == _chatml(
        ("system", f"{SYSTEM}\n\n{TOOLS_TEXT}"), ("user", "What is 53 * 47?"))
    assert row["chosen"] == [{"role": "assistant", "content": CALL_TEXT},
                             {"role": "user", "content": "The tool calculator returned: 2491"},
                             {"role": "assistant", "content": "53 * 47 = 2491."}]
    assert row["rejected"] == [{"role": "assistant", "content": "It is 2500."}]


# -- choosing the format, and the stage's rows ------------------------------------------------

def test_auto_picks_the_template_when_it_knows_tools(tokenizer: Any) -> None:
    assert resolve_tool_format("auto", tokenizer.chat_template) == "engine"
    assert resolve_tool_format("auto", "{%- if tools %}{{ tools | tojson }}{% endif %}") == (
        "chat_template")
    assert resolve_tool_format("engine", "{% if tools %}") == "engine"
    with pytest.raises(ConfigError, match="tool_format .--tool-format. must be one of"):
        TrainSettings(tool_format="openai")


def test_stage_rows_mix_plain_and_tool_rows_and_report_the_format(tmp_path: Path) -> None:
    rows = read_sft_rows(_write(tmp_path / "sft.jsonl", PLAIN, EPISODE))
    engine = training_rows("sft", rows, "auto", None)
    assert len(engine.rows) == 3 and engine.rows[0] == rows[0]
    assert all(set(r) == {"prompt", "completion"} for r in engine.rows)
    assert all(set(m) == {"role", "content"} for r in engine.rows for m in r["prompt"])
    assert engine.metrics() == {"tool_format": "engine", "tool_rows": 1, "tool_turns": 2}

    template = training_rows("sft", rows, "chat_template", None)
    assert template.rows[0]["tools"] is None
    call, answer = template.rows[1:]
    assert call["completion"][0]["tool_calls"] == [CALL] and json.loads(call["tools"]) == [CALC]
    assert answer["prompt"][-1]["role"] == "tool" and len(answer["prompt"]) == 4

    pairs = read_pair_rows(_write(tmp_path / "pairs.jsonl", PAIR))
    dpo = training_rows("dpo", pairs, "chat_template", None)
    assert dpo.rows[0]["chosen"][0]["tool_calls"] == [CALL] and dpo.metrics()["tool_turns"] == 1
    assert training_rows("dpo", [], "auto", None).metrics() == {}


TOOL_TEMPLATE = (  # a minimal template that knows tools, as Qwen's or Llama's do
    "{% if tools %}<|im_start|>system\nTools: {{ tools | tojson }}<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}<call>{{ c.function | tojson }}</call>"
    "{% endfor %}{% else %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def test_chat_template_rows_learn_each_turn_as_the_models_template_writes_it(
        tokenizer: Any, tmp_path: Path) -> None:
    rows = read_sft_rows(_write(tmp_path / "sft.jsonl", EPISODE))
    assert resolve_tool_format("auto", TOOL_TEMPLATE) == "chat_template"
    for turn in training_rows("sft", rows, "auto", TOOL_TEMPLATE).rows:
        kwargs = {"tools": json.loads(turn["tools"]), "chat_template": TOOL_TEMPLATE,
                  "tokenize": False}
        prompt = tokenizer.apply_chat_template(turn["prompt"], add_generation_prompt=True,
                                               **kwargs)
        whole = tokenizer.apply_chat_template(turn["prompt"] + turn["completion"], **kwargs)
        assert prompt.startswith("<|im_start|>system\nTools: ") and whole.startswith(prompt)
        learned = whole[len(prompt):]
        assert learned in ('<call>{"name": "calculator", "arguments": {"digits": 0, '
                           '"expression": "53*47"}}</call><|im_end|>\n',
                           "53 * 47 = 2491.<|im_end|>\n")


def test_a_pair_that_splits_at_a_tool_result_starts_both_sides_with_the_shared_call(
        tokenizer: Any, tmp_path: Path) -> None:
    other = {"role": "tool", "tool_call_id": "call_1", "name": "calculator", "content": "Error: x"}
    pair = {"prompt": EPISODE["messages"][:3], "chosen": EPISODE["messages"][3:],
            "rejected": [other, {"role": "assistant", "content": "I could not compute it."}],
            "tools": [CALC]}
    [read] = read_pair_rows(_write(tmp_path / "pairs.jsonl", pair))
    row = engine_pair_row(read, tokenizer.chat_template)
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert row["chosen"][:2] == [{"role": "assistant", "content": CALL_TEXT},
                                 {"role": "user", "content": "The tool calculator returned: 2491"}]
    assert row["rejected"][0] == row["chosen"][0]
    assert row["rejected"][1]["content"] == "The tool calculator returned: Error: x"
    for side in ("chosen", "rejected"):  # the prompt TRL renders is a prefix of each side
        prompt = tokenizer.apply_chat_template(row["prompt"], tokenize=False,
                                               add_generation_prompt=True)
        whole = tokenizer.apply_chat_template(row["prompt"] + row[side], tokenize=False)
        assert whole.startswith(prompt)
    template = training_rows("dpo", [read], "chat_template", None).rows[0]
    assert template["prompt"] == EPISODE["messages"][:2]
    assert template["chosen"][0]["tool_calls"] == [CALL]
