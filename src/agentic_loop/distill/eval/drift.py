"""KL drift: how far a trained model's next-token distributions moved from its base.

A candidate can score well on the golden set while having drifted far from
the base model everywhere else (forgotten skills, a changed tone). The KL
divergence ``KL(candidate || base)`` of the next-token distributions, at
every position of the chat-templated golden prompts, measures that drift
in nats per token: near 0 is "barely changed"; values of several nats
mean the model now predicts very different text.

Both models are loaded with transformers (fp32, CPU unless a GPU is there);
they must share a vocabulary, which any fine-tune of the base does.

Example (the per-position formula, on toy logits):
    >>> import torch
    >>> same = torch.tensor([[[1.0, 2.0, 3.0]]])
    >>> round(float(token_kl(same, same).sum()), 6)
    0.0
    >>> float(token_kl(torch.tensor([[[5.0, 0.0, 0.0]]]), same)) > 1.0
    True
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from agentic_loop.errors import ConfigError, ReleaseError

__all__ = ["DriftReport", "kl_drift", "token_kl"]


class DriftReport(BaseModel):
    """Mean KL per token over all prompts, and the worst prompt's mean (a pydantic record)."""

    model_config = ConfigDict(frozen=True)

    mean_kl: float
    max_prompt_kl: float
    tokens: int
    prompts: int


def token_kl(candidate_logits: Any, base_logits: Any) -> Any:
    """``KL(candidate || base)`` per position, from logits of shape ``(..., vocab)``."""
    import torch

    log_p = torch.log_softmax(candidate_logits.float(), dim=-1)
    log_q = torch.log_softmax(base_logits.float(), dim=-1)
    return (log_p.exp() * (log_p - log_q)).sum(dim=-1)


def kl_drift(base_dir: str | os.PathLike[str], candidate_dir: str | os.PathLike[str],
             prompts: Sequence[str]) -> DriftReport:
    """Mean ``KL(candidate || base)`` per token over the chat-templated ``prompts``.

    A LoRA adapter directory is loaded merged onto its base (:mod:`agentic_loop.models.weights`).
    """
    import torch

    from agentic_loop.models.weights import load_causal_lm

    if not prompts:
        raise ConfigError("kl_drift needs at least one prompt; pass the golden tasks")
    tokenizer, base = load_causal_lm(base_dir, dtype="float32")
    candidate = load_causal_lm(candidate_dir, dtype="float32")[1]
    vocab = candidate.get_output_embeddings().weight.shape[0]
    if vocab != base.get_output_embeddings().weight.shape[0]:
        raise ReleaseError(f"{candidate_dir} and {base_dir} have different vocabularies; KL "
                           "drift compares a fine-tune with its own base model")
    total, tokens, worst = 0.0, 0, 0.0
    with torch.no_grad():
        for prompt in prompts:
            ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                                add_generation_prompt=True, return_tensors="pt",
                                                return_dict=True)["input_ids"]
            kl = token_kl(candidate(input_ids=ids).logits, base(input_ids=ids).logits)[0]
            total += float(kl.sum())
            tokens += int(kl.numel())
            worst = max(worst, float(kl.mean()))
    return DriftReport(mean_kl=total / tokens, max_prompt_kl=worst, tokens=tokens,
                       prompts=len(prompts))
