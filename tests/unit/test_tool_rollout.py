"""Tool rollouts for GRPO at token level: what the policy wrote (env_mask 1), what the tools and
the chat template added (env_mask 0), the episode the rubric scores, and the limits.

The policy is scripted (one id per character) except in the last test, where a tiny random
Llama model stands in for the trainer's; the tools and the tokenizer are the real ones."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from agentic_loop.distill.train.prompt_set import PromptTask, load_prompt_set
from agentic_loop.distill.train.rewards import RubricRewards
from agentic_loop.distill.train.tool_rollout import (
    ScriptedPolicy,
    ToolRollouts,
    TurnFormat,
    rollout_stats,
    run_episode,
)
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Rubric
from agentic_loop.models.tools import ToolPlan
from agentic_loop.tasks.tool_tasks import tool_tasks
from agentic_loop.tools import calculator, reference_lookup

CALL = '{"name":"calculator","arguments":{"expression":"53*47"}}'
BAD_CALL = '{"name":"calculator","arguments":{"expression":"1/0"}}'
TOOLS = {"calculator": calculator, "lookup": reference_lookup}
PROMPT = [SystemMessage("You are helpful."), HumanMessage("What is 53 * 47?")]


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from agentic_loop.models.embedded import ensure_converted

    return AutoTokenizer.from_pretrained(str(ensure_converted()))


def chars() -> TurnFormat:
    return TurnFormat("<e>\n<u>", "<e>\n<a>", "<e>", False, encode=lambda t: [ord(c) for c in t])


def episode(turns: list[str], **kw):
    plan = ToolPlan.of(list(TOOLS.values()))
    policy = ScriptedPolicy(turns)
    out = run_episode([1, 2, 3], PROMPT, plan, TOOLS, policy, chars(), **kw)
    return out, policy


def test_the_completion_is_the_exact_sequence_each_turn_was_sampled_on() -> None:
    out, policy = episode([CALL, "It is 2491."], max_turns=3, max_tokens=300, force_first=True)
    assert policy.forced == [True, False]  # only the first turn must be a call
    env = [i for i, m in zip(out.completion_ids, out.env_mask, strict=True) if not m]
    mine = [i for i, m in zip(out.completion_ids, out.env_mask, strict=True) if m]
    assert "".join(map(chr, mine)) == CALL + "It is 2491."
    assert "".join(map(chr, env)) == "<e>\n<u>The tool calculator returned: 2491<e>\n<a>"
    assert len(out.completion_ids) == len(out.env_mask) == len(out.logprobs)
    assert all(lp == 0.0 for lp, m in zip(out.logprobs, out.env_mask, strict=True) if not m)
    # the answer turn saw the prompt, the call as JSON, and the rendered tool turn: no re-render
    assert policy.seen[1] == [1, 2, 3, *out.completion_ids[:len(CALL) + len(env)]]
    ep = out.episode
    assert [s.kind for s in ep.steps] == ["model", "tool", "model"]
    assert ep.steps[0].tool_calls[0].args == {"expression": "53*47"}
    assert (ep.final, ep.stop_reason, ep.results_of("calculator")) == ("It is 2491.", "final",
                                                                       ["2491"])
    assert [t["function"]["name"] for t in ep.tools] == ["calculator", "lookup"]
    assert "You can call these tools" in ep.system
    assert (out.calls, out.valid_calls) == (1, 1)


def test_a_tool_error_is_the_result_the_policy_reads_not_a_crash() -> None:
    out, _ = episode([BAD_CALL, "I cannot."], max_turns=3, max_tokens=300)
    step = out.episode.tool_steps[0]
    assert step.error and "division" in step.error.lower()
    env = "".join(chr(i) for i, m in zip(out.completion_ids, out.env_mask, strict=True) if not m)
    assert step.error in env and out.episode.final == "I cannot."
    assert (out.calls, out.valid_calls) == (1, 0)


def test_max_turns_ends_an_episode_that_only_calls() -> None:
    out, _ = episode([CALL] * 5, max_turns=3, max_tokens=1000)
    ep = out.episode
    assert (ep.stop_reason, ep.model_calls, len(ep.tool_steps), ep.final) == ("step_limit", 3, 2,
                                                                              "")
    assert out.calls == 3 and out.env_mask[-1] == 1  # ends on the policy's last call


def test_the_token_budget_counts_tool_results_and_a_cut_call_is_an_error() -> None:
    out, _ = episode([CALL, "It is 2491."], max_turns=3, max_tokens=len(CALL) + 10)
    assert out.episode.stop_reason == "step_limit" and len(out.completion_ids) == len(CALL)
    assert len(out.episode.tool_steps) == 1  # the tool ran; its result did not fit
    cut, _ = episode([CALL], max_turns=3, max_tokens=20)
    assert (cut.episode.stop_reason, cut.calls, cut.valid_calls) == ("error", 1, 0)
    assert "not valid" in cut.episode.error and len(cut.completion_ids) == 20


def test_the_reward_scores_the_episode_not_the_transcript() -> None:
    rubric = Rubric.for_constraints(answer={"value": 2491}, tool_called="calculator")
    rewards = RubricRewards([PromptTask("What is 53 * 47?", rubric, tools=("calculator",))])
    with_tool, _ = episode([CALL, "It is 2491."], max_turns=3, max_tokens=300)
    guessed, _ = episode(["It is 2491."], max_turns=3, max_tokens=300)
    transcript = [[{"role": "assistant", "content": "garbage 7"}]] * 2
    scores = rewards.functions[0](prompts=[None, None], completions=transcript,
                                  task_index=[0, 0],
                                  episode=[with_tool.episode.model_dump_json(),
                                           guessed.episode.model_dump_json()])
    assert scores[0] == 1.0 and scores[1] < 1.0
    by_check = {f.__name__: f for f in rewards.functions}
    assert by_check["tool_called"](prompts=[None, None], completions=transcript,
                                   task_index=[0, 0],
                                   episode=[with_tool.episode.model_dump_json(),
                                            guessed.episode.model_dump_json()]) == [1.0, 0.0]
    assert rollout_stats([with_tool, guessed]) == {"tool_use_rate": 0.5,
                                                   "tool_call_validity": 1.0,
                                                   "turns_per_episode": 1.5}


def test_turn_format_of_the_embedded_template(tokenizer) -> None:
    fmt = TurnFormat.from_tokenizer(tokenizer)
    assert (fmt.before, fmt.after, fmt.end, fmt.tool_role) == (
        "<|im_end|>\n<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n", "<|im_end|>",
        False)
    from langchain_core.messages import ToolMessage

    result = ToolMessage("2491", tool_call_id="c", name="calculator")
    closed = tokenizer.decode(fmt.tool_turn(result, ended=False))
    assert closed == ("<|im_end|>\n<|im_start|>user\nThe tool calculator returned: 2491"
                      "<|im_end|>\n<|im_start|>assistant\n")
    assert tokenizer.decode(fmt.tool_turn(result, ended=True)) == closed[len("<|im_end|>"):]


def test_prompt_set_reads_tool_names_and_refuses_unknown_ones(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(t.model_dump_json(by_alias=True) + "\n"
                            for t in tool_tasks(2, split="train")))
    prompts = load_prompt_set(path)
    assert prompts.has_tools and [t.tools for t in prompts.tasks] == [("calculator", "lookup")] * 2
    assert any("carry tools" in note for note in prompts.notes)
    path.write_text(json.dumps({"task": "What is 2+2?", "constraints": {"answer": {"value": 4}},
                                "metadata": {"tools": ["abacus"]}}) + "\n")
    with pytest.raises(ConfigError, match="abacus"):
        load_prompt_set(path)


def test_rollout_func_returns_what_trl_reads(tokenizer, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=16,
                                         intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1))
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    task = PromptTask("What is 53 * 47?", Rubric.for_constraints(answer={"value": 2491}),
                      tools=("calculator",))
    logged: dict[str, float] = {}
    trainer = SimpleNamespace(model=model, processing_class=tokenizer,
                              accelerator=SimpleNamespace(unwrap_model=lambda m: m),
                              _log_metric=logged.__setitem__)
    rollouts = ToolRollouts([task], max_turns=2, max_completion_length=40)
    model.train()
    out = rollouts([task.messages()] * 2, trainer)
    assert model.training  # the policy is put back in training mode
    assert set(out) == {"prompt_ids", "completion_ids", "logprobs", "env_mask", "episode"}
    for ids, mask, lps in zip(out["completion_ids"], out["env_mask"], out["logprobs"],
                              strict=True):
        assert len(ids) == len(mask) == len(lps) <= 40 and mask[0] == 1
    assert tokenizer.decode(out["completion_ids"][0]).startswith('{"name":"calculator"')
    assert "You can call these tools" in tokenizer.decode(out["prompt_ids"][0])
    assert set(logged) == {"tools/tool_use_rate", "tools/tool_call_validity",
                           "tools/turns_per_episode"}
    assert rollouts.stats()["episodes"] == 2
    resumed = ToolRollouts([task])
    resumed.restore([rollouts.stats()])  # a resumed run keeps counting from its checkpoint
    assert resumed.stats() == rollouts.stats()
    with pytest.raises(ConfigError, match="matches no task"):
        rollouts.task_of([{"role": "user", "content": "another"}])
