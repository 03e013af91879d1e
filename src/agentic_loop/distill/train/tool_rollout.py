"""GRPO with tools: multi-turn rollouts at token level, where the policy calls the package's tools.

TRL's own ``tools=`` support parses calls with the chat template's response
schema, which the embedded SmolLM2's template does not have; so the rollouts
are ours, handed to ``GRPOTrainer(rollout_func=...)``. For each prompt (TRL
repeats each task ``num_generations`` times) one episode runs:

1. the policy writes a turn (:class:`~.policy_sampler.PolicySampler`: the
   trainer's own model, in-process, under the call grammar of
   :class:`~agentic_loop.models.tools.ToolPlan`; the first turn a forced call
   when ``force_first``, as ``tool_agent(first_tool_choice="any")`` does);
2. a call (JSON ``{"name", "arguments"}``) runs its tool (a tool error, a
   timeout, bad arguments: the error is the result the policy reads, never a
   crash); the result is rendered as the chat template's next turn (a user turn
   ``The tool X returned: ...`` for templates without a tool role, the wording
   of :func:`~agentic_loop.models.tools.chat_dicts`) and appended as tokens;
3. until a text answer, the ``max_turns``-th model turn, or the token budget
   (``max_completion_length``, tool-result tokens included).

**Token level, and the call stays JSON.** The completion is the token ids
after the prompt: the policy's own tokens (``env_mask`` 1) and the turn
separators and tool results (``env_mask`` 0: no loss on them). Each turn is
sampled on exactly that sequence (prompt ids + sampled ids + rendered tool-turn
ids + ...), so the loss is computed on the very context the policy saw. The
inference engine re-renders the conversation at every call and writes an earlier
call back *in words* (``I called calculator(expression="53*47").``, because
SmolLM2-135M, shown its own JSON, copied it as its answer); re-rendering here
would train the policy on a context it never sampled from, so the rollout keeps
its call as the JSON it wrote. The system message is the one "text or a call"
plan's (the forced first turn's shorter variant is not swapped in mid-episode).

The episode (:class:`~agentic_loop.episodes.Episode`: model steps, tool steps,
final answer, stop reason, tools offered) goes to the reward functions, which
score the task's locked rubric over it (``judging_episode``), so episode checks
(``tool_called``, ``verified_with``, ``max_steps``) see the whole episode.

**Generation runs in-process on every device.** With vLLM (GPUs), TRL's vLLM
helper generates one single-turn completion per prompt without our grammar, so
tool rollouts do not use it: the GRPO stage turns ``use_vllm`` off for a prompt
set with tools (bf16 on GPUs still applies) and says so in the card's notes.

Example (a scripted policy; the real one is :class:`~.policy_sampler.PolicySampler`):
    >>> from agentic_loop.tools import calculator
    >>> plan = ToolPlan.of([calculator])
    >>> fmt = TurnFormat("<end>\\n<user>", "<end>\\n<assistant>", "<end>", False,
    ...                  encode=lambda text: [ord(c) for c in text])
    >>> policy = ScriptedPolicy(['{"name":"calculator","arguments":{"expression":"53*47"}}',
    ...                          "It is 2491."])
    >>> out = run_episode([1, 2], [], plan, {"calculator": calculator}, policy, fmt,
    ...                   max_turns=3, max_tokens=200)
    >>> out.episode.tools_called, out.episode.final, out.calls, out.valid_calls
    (['calculator'], 'It is 2491.', 1, 1)
    >>> len(out.completion_ids) == len(out.env_mask) == len(out.logprobs)
    True
    >>> fmt.decode_env(out)
    '<end>\\n<user>The tool calculator returned: 2491<end>\\n<assistant>'
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from langchain_core.messages import BaseMessage, ToolMessage, convert_to_messages
from langchain_core.tools import BaseTool

from agentic_loop.distill.train.policy_sampler import TurnSample
from agentic_loop.distill.train.prompt_set import PromptTask
from agentic_loop.episodes import Episode, EpisodeStop, episode_from_messages
from agentic_loop.errors import ConfigError
from agentic_loop.models.structured_output import message_text
from agentic_loop.models.tools import ToolPlan, chat_dicts, message_role, template_has_tool_role
from agentic_loop.tools import SafeTool, ready_tools, safe_tool

__all__ = ["DEFAULT_MAX_TURNS", "Rollout", "ScriptedPolicy", "ToolRollouts", "TurnFormat",
           "TurnPolicy", "rollout_stats", "run_episode", "summarize"]

#: Model turns an episode may take (calls and the answer) unless told otherwise.
DEFAULT_MAX_TURNS = 4
_SLOTS = ("\x00A", "\x00B", "\x00C")


class TurnPolicy(Protocol):
    """Writes one turn after a context of token ids (:class:`~.policy_sampler.PolicySampler`)."""

    def turn(self, context: Sequence[int], plan: ToolPlan, *, forced: bool,
             max_tokens: int) -> TurnSample: ...


class ScriptedPolicy:
    """A policy that writes the given turns in order (one id per character): for tests and
    examples of the rollout's bookkeeping, with no model."""

    def __init__(self, turns: Sequence[str]) -> None:
        self.turns = list(turns)
        self.seen: list[list[int]] = []  # the context of each turn
        self.forced: list[bool] = []  # whether each turn had to be a call

    def turn(self, context: Sequence[int], plan: ToolPlan, *, forced: bool,
             max_tokens: int) -> TurnSample:
        """The next scripted text, cut to ``max_tokens`` characters."""
        self.seen.append(list(context))
        self.forced.append(forced)
        text = self.turns.pop(0)[:max_tokens] if self.turns else ""
        return TurnSample([ord(c) for c in text], [-0.5] * len(text), text, False)


@dataclass(frozen=True)
class TurnFormat:
    """How the chat template closes the policy's turn, frames a tool result and opens the next
    turn: ``before`` + result + ``after``; ``end`` is the end-of-turn text that ``before``
    starts with, left out when the policy wrote it itself."""

    before: str
    after: str
    end: str
    tool_role: bool
    encode: Callable[[str], list[int]]
    decode: Callable[[Sequence[int]], str] = field(
        default=lambda ids: "".join(chr(i) for i in ids))

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> TurnFormat:
        """Read the format off ``tokenizer``'s chat template (placeholders in, text out)."""
        tool_role = template_has_tool_role(tokenizer.chat_template)
        chat = [{"role": r, "content": s} for r, s in
                zip(("user", "assistant", "tool" if tool_role else "user"), _SLOTS, strict=True)]
        text = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        if any(slot not in text for slot in _SLOTS):
            raise ConfigError("the tokenizer's chat template changes the messages it formats, so "
                              "a tool result cannot be appended as tokens; use a model whose "
                              "template writes each message's content as it is")
        before, after = text.split(_SLOTS[1], 1)[1].split(_SLOTS[2], 1)
        eos = tokenizer.eos_token or ""
        end = eos if eos and before.startswith(eos) else ""
        return cls(before, after, end, tool_role,
                   lambda t: list(tokenizer(t, add_special_tokens=False)["input_ids"]),
                   lambda ids: tokenizer.decode(list(ids)))

    def prompt_chat(self, messages: Sequence[BaseMessage], plan: ToolPlan) -> list[dict[str, str]]:
        """The prompt as chat-template dicts, the tools described in the system message."""
        return chat_dicts(messages, plan, role_of=message_role, text_of=message_text,
                          tool_role=self.tool_role)

    def tool_turn(self, result: ToolMessage, ended: bool) -> list[int]:
        """The ids after the policy's call: end of its turn (unless it ``ended`` it), the result
        as the template frames it, the opening of the policy's next turn."""
        content = chat_dicts([result], None, role_of=message_role, text_of=message_text,
                             tool_role=self.tool_role)[0]["content"]
        head = self.before[len(self.end):] if ended else self.before
        return self.encode(head + content + self.after)

    def decode_env(self, rollout: Rollout) -> str:
        """The text of a rollout's environment tokens (``env_mask`` 0), for checks and logs."""
        return self.decode([i for i, m in zip(rollout.completion_ids, rollout.env_mask,
                                              strict=True) if not m])


@dataclass
class Rollout:
    """One episode at token level: the completion after the prompt, which of its ids the
    policy wrote (``env_mask`` 1), their sampling logprobs (0.0 on environment ids), the
    episode, and its calls (``valid_calls``: parsed and ran without an error)."""

    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float]
    episode: Episode
    calls: int = 0
    valid_calls: int = 0


def _run_tool(tools: Mapping[str, BaseTool], call: Mapping[str, Any]) -> ToolMessage:
    tool = tools[call["name"]]
    request = {"type": "tool_call", "name": call["name"], "args": call["args"], "id": call["id"]}
    try:
        result = tool.invoke(request)
    except Exception as exc:  # a tool not wrapped by safe_tool: its error is the result
        return ToolMessage(f"{type(exc).__name__}: {exc}", tool_call_id=call["id"],
                           name=call["name"], status="error")
    if isinstance(result, ToolMessage):
        return result
    return ToolMessage(str(result), tool_call_id=call["id"], name=call["name"])


def run_episode(prompt_ids: Sequence[int], prompt: Sequence[BaseMessage], plan: ToolPlan,
                tools: Mapping[str, BaseTool], policy: TurnPolicy, fmt: TurnFormat, *,
                max_turns: int = DEFAULT_MAX_TURNS, max_tokens: int = 256,
                force_first: bool = False) -> Rollout:
    """One episode after ``prompt_ids`` (the rendered ``prompt``); see the module doc."""
    ids: list[int] = []
    mask: list[int] = []
    logprobs: list[float] = []
    messages = list(prompt)
    stop: EpisodeStop = "final"
    error = None
    calls = valid = 0
    started = time.perf_counter()
    for turn in range(max_turns):
        room = max_tokens - len(ids)
        sample = policy.turn([*prompt_ids, *ids], plan, forced=force_first and turn == 0,
                             max_tokens=room)
        ids += sample.ids
        mask += [1] * len(sample.ids)
        logprobs += sample.logprobs
        usage = {"input_tokens": len(prompt_ids) + len(ids) - len(sample.ids),
                 "output_tokens": len(sample.ids),
                 "total_tokens": len(prompt_ids) + len(ids)}
        message = plan.message(sample.text, usage_metadata=usage)
        messages.append(message)
        if not (message.tool_calls or message.invalid_tool_calls):
            break  # a text answer
        calls += 1
        if message.invalid_tool_calls:
            stop, error = "error", message.invalid_tool_calls[0].get("error")
            break
        if turn == max_turns - 1:
            stop = "step_limit"
            break
        result = _run_tool(tools, message.tool_calls[0])
        messages.append(result)
        valid += result.status != "error"
        env = fmt.tool_turn(result, sample.ended)
        if len(ids) + len(env) >= max_tokens:  # no room left for the policy to read and answer
            stop = "step_limit"
            break
        ids += env
        mask += [0] * len(env)
        logprobs += [0.0] * len(env)
    episode = episode_from_messages(messages, start=len(prompt), stop_reason=stop, error=error,
                                    latency_s=round(time.perf_counter() - started, 4))
    system = fmt.prompt_chat(prompt, plan)[0] if prompt or plan.callable_names else None
    episode = episode.model_copy(update={
        "tools": [dict(s) for s in plan.specs] or None,
        "system": system["content"] if system and system["role"] == "system" else None})
    return Rollout(ids, mask, logprobs, episode, calls, valid)


def rollout_stats(rollouts: Sequence[Rollout]) -> dict[str, float]:
    """Tool-use rate (episodes where a tool ran), call validity (calls that parsed and ran
    without an error, of all calls; 1.0 with no call) and model turns per episode.

    >>> from agentic_loop.episodes import ModelStep, ToolStep
    >>> ran = Episode(steps=[ModelStep(), ToolStep(name="calculator"), ModelStep(text="4")])
    >>> rollout_stats([Rollout([], [], [], ran, 1, 1), Rollout([], [], [], Episode(), 0, 0)])
    {'tool_use_rate': 0.5, 'tool_call_validity': 1.0, 'turns_per_episode': 1.0}
    """
    if not rollouts:
        return {}
    calls = sum(r.calls for r in rollouts)
    return {"tool_use_rate": sum(bool(r.episode.tool_steps) for r in rollouts) / len(rollouts),
            "tool_call_validity": sum(r.valid_calls for r in rollouts) / calls if calls else 1.0,
            "turns_per_episode": sum(r.episode.model_calls for r in rollouts) / len(rollouts)}


def _prompt_key(prompt: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps([[m.get("role"), m.get("content")] for m in prompt], ensure_ascii=False)


def _toolbox(task: PromptTask) -> dict[str, BaseTool]:
    tools = ready_tools(list(task.tools)) if task.tools else []
    return {t.name: t if isinstance(t, SafeTool) else safe_tool(t) for t in tools}


class ToolRollouts:
    """TRL's ``rollout_func`` for a prompt set whose tasks carry tools (see the module doc).

    Args:
        tasks: the prompt set's tasks (their ``messages()`` are the dataset's prompts; their
            ``tools`` name :func:`~agentic_loop.tools.ready_tools`).
        max_turns: model turns an episode may take.
        force_first: the first turn of a task with tools is a call (``tool_choice="any"``).
        max_completion_length: completion tokens an episode may use, tool results included.
        temperature / top_p: sampling of the policy's turns.
    """

    def __init__(self, tasks: Sequence[PromptTask], *, max_turns: int = DEFAULT_MAX_TURNS,
                 force_first: bool = True, max_completion_length: int = 256,
                 temperature: float = 1.0, top_p: float = 1.0) -> None:
        if max_turns < 1:
            raise ConfigError(f"max_turns={max_turns}: an episode needs at least 1 model turn")
        self.tasks = list(tasks)
        self.max_turns = max_turns
        self.force_first = force_first
        self.max_completion_length = max_completion_length
        self.temperature, self.top_p = temperature, top_p
        self._index = {_prompt_key(t.messages()): i for i, t in enumerate(self.tasks)}
        self._tools = [_toolbox(t) for t in self.tasks]
        self._plans = [ToolPlan.of(list(box.values())) for box in self._tools]
        self._grammars: dict[str, Any] = {}
        self._rollouts = 0
        self._sums = {"tool_use_rate": 0.0, "turns_per_episode": 0.0}
        self._calls = self._valid = 0

    def task_of(self, prompt: Sequence[Mapping[str, Any]]) -> int:
        """The index of the task whose prompt this is."""
        index = self._index.get(_prompt_key(prompt))
        if index is None:
            raise ConfigError("a GRPO prompt matches no task of the prompt set; build the "
                              "dataset from PromptSet.rows() of the same tasks")
        return index

    def __call__(self, prompts: Sequence[Sequence[Mapping[str, Any]]],
                 trainer: Any) -> dict[str, list[Any]]:
        """One rollout per prompt with the trainer's current policy; TRL's output dict plus
        ``env_mask`` and ``episode`` (JSON, for the reward functions)."""
        from agentic_loop.distill.train.policy_sampler import PolicySampler

        model = trainer.accelerator.unwrap_model(trainer.model)
        tokenizer = trainer.processing_class
        fmt = TurnFormat.from_tokenizer(tokenizer)
        was_training = model.training
        model.eval()
        try:
            policy = PolicySampler(model, tokenizer, temperature=self.temperature,
                                   top_p=self.top_p, grammars=self._grammars)
            rollouts, prompt_ids = [], []
            for prompt in prompts:
                index = self.task_of(prompt)
                messages = convert_to_messages([dict(m) for m in prompt])
                plan = self._plans[index]
                ids = fmt.encode(tokenizer.apply_chat_template(
                    fmt.prompt_chat(messages, plan), tokenize=False, add_generation_prompt=True))
                prompt_ids.append(ids)
                rollouts.append(run_episode(
                    ids, messages, plan, self._tools[index], policy, fmt,
                    max_turns=self.max_turns, max_tokens=self.max_completion_length,
                    force_first=self.force_first and bool(plan.callable_names)))
        finally:
            model.train(was_training)
        self._record(rollouts, getattr(trainer, "_log_metric", None))
        return {"prompt_ids": prompt_ids,
                "completion_ids": [r.completion_ids for r in rollouts],
                "logprobs": [r.logprobs for r in rollouts],
                "env_mask": [r.env_mask for r in rollouts],
                "episode": [r.episode.model_dump_json() for r in rollouts]}

    def _record(self, rollouts: Sequence[Rollout], log_metric: Any) -> None:
        stats = rollout_stats(rollouts)
        if callable(log_metric):
            for name, value in stats.items():
                log_metric(f"tools/{name}", value)
        self._rollouts += len(rollouts)
        for name in self._sums:
            self._sums[name] += stats.get(name, 0.0) * len(rollouts)
        self._calls += sum(r.calls for r in rollouts)
        self._valid += sum(r.valid_calls for r in rollouts)

    def stats(self) -> dict[str, Any]:
        """Counts over every rollout so far (this process), for the model card."""
        return {"episodes": self._rollouts, "calls": self._calls, "valid_calls": self._valid,
                "tool_use_sum": self._sums["tool_use_rate"],
                "turns_sum": self._sums["turns_per_episode"]}

    def restore(self, saved: Sequence[Mapping[str, Any]]) -> None:
        """Start from the :meth:`stats` each process saved in a checkpoint (a resumed run)."""
        for part in saved:
            self._rollouts += int(part["episodes"])
            self._calls += int(part["calls"])
            self._valid += int(part["valid_calls"])
            self._sums["tool_use_rate"] += float(part["tool_use_sum"])
            self._sums["turns_per_episode"] += float(part["turns_sum"])

    def describe(self) -> dict[str, Any]:
        """How the rollouts ran, for the model card."""
        return {"max_turns": self.max_turns, "first_call_forced": self.force_first,
                "generation": "in-process policy (trainer model), llguidance call grammar",
                "tools": sorted({n for box in self._tools for n in box})}


def summarize(parts: Sequence[Mapping[str, Any]]) -> dict[str, float | int | None]:
    """Rates over the :meth:`ToolRollouts.stats` of every process.

    >>> summarize([{"episodes": 4, "calls": 4, "valid_calls": 3, "tool_use_sum": 3.0,
    ...             "turns_sum": 8.0}])
    {'episodes': 4, 'tool_use_rate': 0.75, 'tool_call_validity': 0.75, 'turns_per_episode': 2.0}
    """
    episodes = sum(p["episodes"] for p in parts)
    calls = sum(p["calls"] for p in parts)
    if not episodes:
        return {"episodes": 0, "tool_use_rate": None, "tool_call_validity": None,
                "turns_per_episode": None}
    return {"episodes": episodes,
            "tool_use_rate": round(sum(p["tool_use_sum"] for p in parts) / episodes, 4),
            "tool_call_validity": round(sum(p["valid_calls"] for p in parts) / calls, 4)
            if calls else None,
            "turns_per_episode": round(sum(p["turns_sum"] for p in parts) / episodes, 4)}
