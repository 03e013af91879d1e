"""Our batched decoding engine against transformers' own ``model.generate``, and grammar-
constrained against free decoding, on the same loaded model in the same process.

Used by ``bench/models.py`` (its baseline configuration). Both sides get the same
chat-templated prompt ids, the same ``max_new_tokens``, the same stop (the model's EOS
tokens) and the same sampling (greedy; or temperature 0.7, top-p 0.95 and no top-k), and
are timed alternately so both see the same machine load. Tokens are counted up to, not
including, each row's EOS. Every ratio is ours / theirs (above 1: we are faster).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from langchain_core.messages import HumanMessage

from agentic_loop.models.engine.engine import GenerationParams, GenerationRequest
from agentic_loop.models.engine.grammar import JsonGrammar, constrained_json_schema

TEMPERATURE, TOP_P = 0.7, 0.95


Outputs = list[tuple[int, str]]  # (completion tokens, text) per prompt


def _timed(fn: Callable[[], Outputs]) -> tuple[float, Outputs]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def compare_engine(llm: Any, prompts: Sequence[str], schema: type, max_new_tokens: int) -> dict:
    """Tokens/s of engine and ``model.generate`` at batch 1 and 8, greedy and sampled, plus
    constrained vs free decoding on the engine; ratios measured here, in one process."""
    engine = llm.engine
    model, tokenizer = engine.model, engine.tokenizer
    eos = sorted(engine.eos_ids)
    ids = [llm.prompt_ids([HumanMessage(p)]) for p in prompts]
    review_ids = [llm.prompt_ids([HumanMessage(f"Review this answer: {p}")]) for p in prompts]
    grammar = JsonGrammar(constrained_json_schema(schema), tokenizer, engine.vocab_size)

    def ours(batch: list[list[int]], size: int, sample: bool, grammar: Any = None,
             budget: int = max_new_tokens) -> Outputs:
        outs: Outputs = []
        for lo in range(0, len(batch), size):
            futures = [
                engine.submit(GenerationRequest(list(p), GenerationParams(
                    max_tokens=budget, temperature=TEMPERATURE if sample else 0.0,
                    top_p=TOP_P if sample else 1.0, seed=lo + i), grammar))
                for i, p in enumerate(batch[lo : lo + size])]
            outs += [(o.completion_tokens, o.text) for o in (f.result() for f in futures)]
        return outs

    def theirs(batch: list[list[int]], size: int, sample: bool) -> Outputs:
        outs: Outputs = []
        torch.manual_seed(0)
        for lo in range(0, len(batch), size):
            chunk = batch[lo : lo + size]
            width = max(len(p) for p in chunk)
            input_ids = torch.full((len(chunk), width), engine.pad_id, dtype=torch.long)
            attention = torch.zeros((len(chunk), width), dtype=torch.long)
            for i, p in enumerate(chunk):  # left padding, as the engine does
                input_ids[i, width - len(p):] = torch.tensor(p)
                attention[i, width - len(p):] = 1
            kwargs: dict[str, Any] = (
                {"do_sample": True, "temperature": TEMPERATURE, "top_p": TOP_P, "top_k": 0}
                if sample else {"do_sample": False, "temperature": None, "top_p": None,
                                "top_k": None})
            with torch.inference_mode():
                out = model.generate(input_ids=input_ids.to(engine.device),
                                     attention_mask=attention.to(engine.device),
                                     max_new_tokens=max_new_tokens, eos_token_id=eos,
                                     pad_token_id=engine.pad_id, **kwargs)
            for row in out[:, width:].tolist():
                cut = next((j for j, t in enumerate(row) if t in eos), len(row))
                outs.append((cut, tokenizer.decode(row[:cut], skip_special_tokens=True)))
        return outs

    result: dict[str, Any] = {
        "what": ("tokens/s of our GenerationEngine vs transformers model.generate on the same "
                 "model, prompts, max_new_tokens and sampling; ratio = ours / model.generate"),
        "prompts": len(prompts),
        "max_new_tokens": max_new_tokens,
        "sampled_settings": {"temperature": TEMPERATURE, "top_p": TOP_P, "top_k": None},
    }
    for size in (1, 8):
        for mode in ("greedy", "sampled"):
            sample = mode == "sampled"
            ours([ids[0]], 1, sample)  # warm both paths
            theirs([ids[0]], 1, sample)
            our_s, our_out = _timed(lambda: ours(ids, size, sample))
            hf_s, hf_out = _timed(lambda: theirs(ids, size, sample))
            our_rate = sum(n for n, _ in our_out) / our_s
            hf_rate = sum(n for n, _ in hf_out) / hf_s
            row: dict[str, Any] = {
                "engine_tokens_per_s": round(our_rate, 2),
                "hf_generate_tokens_per_s": round(hf_rate, 2),
                "engine_over_hf_generate_tokens_per_s": round(our_rate / hf_rate, 3),
                "engine_tokens": sum(n for n, _ in our_out),
                "hf_generate_tokens": sum(n for n, _ in hf_out),
            }
            if not sample:
                row["same_greedy_text_share"] = round(sum(
                    a.strip() == b.strip() for (_, a), (_, b) in zip(our_out, hf_out)
                ) / len(ids), 3)
            result[f"batch{size}_{mode}"] = row
        free_s, free_out = _timed(lambda: ours(review_ids, size, False, None, 2 * max_new_tokens))
        con_s, con_out = _timed(lambda: ours(review_ids, size, False, grammar, 2 * max_new_tokens))
        free_rate = sum(n for n, _ in free_out) / free_s
        con_rate = sum(n for n, _ in con_out) / con_s
        result[f"batch{size}_constrained_vs_free"] = {
            "what": ("greedy engine decoding of the same review prompts, with the Review JSON "
                     "grammar (llguidance bitmask per step) and without"),
            "max_new_tokens": 2 * max_new_tokens,
            "constrained_tokens_per_s": round(con_rate, 2),
            "free_tokens_per_s": round(free_rate, 2),
            "constrained_over_free_tokens_per_s": round(con_rate / free_rate, 3),
            "constrained_valid_json_share": round(sum(
                _valid(schema, text) for _, text in con_out) / len(con_out), 3),
        }
    return result



def _valid(schema: Any, text: str) -> bool:
    try:
        schema.model_validate_json(text)
    except ValueError:
        return False
    return True
