"""The GRPO policy writing one turn of a tool episode: token ids, their logprobs, under a grammar.

Why not the inference engine (:class:`~agentic_loop.models.engine.GenerationEngine`)
around the live trainer model: GRPO's loss must see *exactly* the token ids the
policy sampled, and their sampling logprobs; the engine hands back text (its
rows' ids stay inside it), it remembers prompt prefixes' KV across calls (stale
as soon as an optimizer step changes the weights), and it patches the model's
attention and decodes on a thread of its own. So the turn is decoded here, in
the training process, on the trainer's own (unwrapped, LoRA-carrying) model,
with no copy of the weights, but with the engine's parts: the same llguidance
grammars (:meth:`ToolPlan.call_schema <agentic_loop.models.tools.ToolPlan.call_schema>`
for a forced call, :meth:`ToolPlan.lark <agentic_loop.models.tools.ToolPlan.lark>`
for "text or one call") and the same sampler
(:func:`~agentic_loop.models.engine.token_sampling.sample_tokens`, temperature
and top-p). One episode decodes at a time; the KV cache is cut back to the part
of the context the next turn shares (the prompt, for the ``num_generations``
episodes of one task), so a prompt is computed once per group, not once per turn.

The logprob reported for a sampled token is ``log_softmax(logits / T)`` at it,
before the grammar mask and top-p: the quantity TRL recomputes for the same
token (``old_per_token_logps``), so an importance-sampling ratio between the two
is 1 where the sampler is the policy itself. The grammar is part of the
environment, as the tool results are.

Example (a tiny random model; the real one is the trainer's):
    >>> import torch
    >>> from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    >>> from agentic_loop.models.embedded import ensure_converted
    >>> from agentic_loop.models.tools import ToolPlan
    >>> from agentic_loop.tools import calculator
    >>> tokenizer = AutoTokenizer.from_pretrained(str(ensure_converted()))
    >>> _ = torch.manual_seed(0)
    >>> model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=16,
    ...     intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
    ...     num_key_value_heads=1))
    >>> sampler = PolicySampler(model, tokenizer, temperature=1.0)
    >>> turn = sampler.turn([1, 2, 3], ToolPlan.of([calculator]), forced=True, max_tokens=60)
    >>> turn.text.startswith('{"name":"calculator","arguments":{"expression":"')
    True
    >>> len(turn.ids) == len(turn.logprobs) and all(lp <= 0 for lp in turn.logprobs)
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentic_loop.models.engine.grammar import Grammar, JsonGrammar
from agentic_loop.models.tools import ToolPlan

if TYPE_CHECKING:  # torch loads when a sampler is built, not with the training package
    import torch

__all__ = ["PolicySampler", "TurnSample"]


@dataclass(frozen=True)
class TurnSample:
    """What the policy wrote in one turn: token ids, each one's logprob, the text, and whether
    the last id is an end-of-turn token (else the grammar or the budget ended the turn)."""

    ids: list[int]
    logprobs: list[float]
    text: str
    ended: bool


class PolicySampler:
    """Samples turns from ``model`` (any HF causal LM, PEFT-wrapped or not) in-process.

    Build one per batch of rollouts: its KV cache belongs to the weights it saw.
    ``grammars`` may be shared between samplers (compiled once per tool plan).
    """

    def __init__(self, model: Any, tokenizer: Any, *, temperature: float = 1.0,
                 top_p: float = 1.0, grammars: dict[str, Grammar] | None = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.temperature = temperature
        self.top_p = top_p
        self.grammars = grammars if grammars is not None else {}
        self.device = next(model.parameters()).device
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        self.eos_ids = _eos_ids(tokenizer, model)
        self._ids: list[int] = []
        self._cache: Any = None
        self._logits: torch.Tensor | None = None

    def grammar(self, plan: ToolPlan, forced: bool) -> Grammar | None:
        """The grammar of a turn: one call (forced), text or one call, or none (no tools)."""
        if not plan.callable_names:
            return None
        lark = None if forced else plan.lark()
        key = f"lark:{lark}" if lark is not None else f"call:{plan.call_schema()}"
        if key not in self.grammars:
            self.grammars[key] = (
                Grammar.from_lark(lark, self.tokenizer, self.vocab_size) if lark is not None
                else JsonGrammar(plan.call_schema(), self.tokenizer, self.vocab_size))
        return self.grammars[key]

    def turn(self, context: Sequence[int], plan: ToolPlan, *, forced: bool,
             max_tokens: int) -> TurnSample:
        """Sample one turn after ``context`` (prompt ids and the episode's ids so far)."""
        import torch

        with torch.no_grad():
            return self._turn(context, plan, forced, max_tokens)

    def _turn(self, context: Sequence[int], plan: ToolPlan, forced: bool,
              max_tokens: int) -> TurnSample:
        import torch

        from agentic_loop.models.engine.token_sampling import sample_tokens

        grammar = self.grammar(plan, forced)
        matcher = grammar.matcher() if grammar is not None else None
        logits = self._advance(list(context))
        ids: list[int] = []
        logprobs: list[float] = []
        ended = False
        while len(ids) < max_tokens:
            scaled = logits / self.temperature if self.temperature > 0 else logits
            logprob_of = torch.log_softmax(scaled, dim=-1)
            masked = logits.clone().unsqueeze(0)
            if matcher is not None and grammar is not None:
                masked[0, ~grammar.allowed_mask(matcher)] = float("-inf")
            token = sample_tokens(masked, temperatures=[self.temperature], top_ps=[self.top_p],
                                  generators=[None])[0]
            ids.append(token)
            logprobs.append(float(logprob_of[token]))
            if token in self.eos_ids:
                ended = True
                break
            if matcher is not None:
                matcher.consume_token(token)
                if matcher.is_stopped():
                    break
            if len(ids) < max_tokens:
                logits = self._advance([*context, *ids])
        text = self.tokenizer.decode([i for i in ids if i not in self.eos_ids],
                                     skip_special_tokens=True)
        return TurnSample(ids, logprobs, text, ended)

    def _advance(self, context: list[int]) -> torch.Tensor:
        """The next-token logits after ``context`` (float32, CPU), computing only the part the
        KV cache does not hold yet."""
        import torch
        from transformers import DynamicCache

        shared = 0
        for a, b in zip(self._ids, context, strict=False):
            if a != b:
                break
            shared += 1
        if shared == len(context) == len(self._ids) and self._logits is not None:
            return self._logits
        shared = min(shared, len(context) - 1)  # at least one token to compute logits from
        if self._cache is None or shared == 0:
            self._cache, shared = DynamicCache(), 0
        elif len(self._ids) > shared:  # drop what the new context does not share
            self._cache.crop(shared - len(self._ids))
        fresh = torch.tensor([context[shared:]], dtype=torch.long, device=self.device)
        out = self.model(input_ids=fresh, past_key_values=self._cache, use_cache=True)
        self._cache = out.past_key_values
        self._ids = list(context)
        self._logits = out.logits[0, -1].float().cpu()
        return self._logits


def _eos_ids(tokenizer: Any, model: Any) -> set[int]:
    ids: set[int] = set()
    config = getattr(model, "generation_config", None)
    for source in (tokenizer.eos_token_id, getattr(config, "eos_token_id", None)):
        if isinstance(source, int):
            ids.add(source)
        elif isinstance(source, (list, tuple)):
            ids.update(int(i) for i in source)
    return ids
