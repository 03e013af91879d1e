"""The engine's prefix memory: several prefixes, least recently used out by bytes, the
longest shared one copied, stale after a weight change, and nothing reused when off.

An agent's episode re-sends its growing conversation at every step; with reuse on,
step k+1 computes only what step k did not, and greedy answers are the same as with
reuse off (a tiny random Llama in float64, exact enough that padding can't flip an
argmax).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from engine_helpers import VOCAB, DigitTokenizer, tiny_llama

from agentic_loop.errors import ConfigError
from agentic_loop.models.engine.decode_batch import new_cache
from agentic_loop.models.engine.engine import GenerationEngine, GenerationParams, GenerationRequest
from agentic_loop.models.engine.prefix_memory import PrefixMemory, shared_length


@pytest.fixture(scope="module")
def tiny_model() -> Any:
    return tiny_llama(max_positions=512)


def _tokens(n: int, seed: int) -> tuple[int, ...]:
    gen = torch.Generator().manual_seed(seed)
    return tuple(int(t) for t in torch.randint(2, VOCAB, (n,), generator=gen))


def _fill(memory: PrefixMemory, model: Any, tokens: tuple[int, ...]) -> int:
    return memory.fill(model, new_cache(model.config), tokens, torch.device("cpu"))


def _bytes_per_token(model: Any) -> int:
    memory = PrefixMemory(minimum=1)
    _fill(memory, model, _tokens(10, 0))
    return memory.bytes // 10


def test_shared_length_agrees_with_a_plain_scan() -> None:
    a = _tokens(300, 1)
    for cut in (0, 1, 17, 150, 299, 300):
        b = a[:cut] + (VOCAB + 1,) + a[cut + 1:]
        assert shared_length(a, b) == cut
    assert shared_length(a, a[:40]) == 40
    assert shared_length((), a) == 0


def test_the_longest_shared_prefix_is_copied_and_its_kv_is_exact(tiny_model: Any) -> None:
    system = _tokens(20, 2)
    memory = PrefixMemory(minimum=4)
    assert _fill(memory, tiny_model, system + (2,) + _tokens(4, 3)) == 0
    episode = system + (3,) + _tokens(11, 4)
    assert _fill(memory, tiny_model, episode) == 20  # the system prompt
    longer = episode + _tokens(9, 5)
    cache = new_cache(tiny_model.config)
    assert memory.fill(tiny_model, cache, longer, torch.device("cpu")) == 32  # the episode
    assert len(memory) == 2  # the episode's step was extended by the next one: one entry
    computed = new_cache(tiny_model.config)
    PrefixMemory(minimum=4, enabled=False).fill(tiny_model, computed, longer, torch.device("cpu"))
    for ours, theirs in zip(cache.layers, computed.layers, strict=True):
        torch.testing.assert_close(ours.keys, theirs.keys)
        torch.testing.assert_close(ours.values, theirs.values)
    assert memory.match(system + (4, 5, 6)) == 20
    assert memory.match(system[:3]) == 0  # below the minimum


def test_least_recently_used_prefixes_go_when_their_bytes_exceed_the_budget(
        tiny_model: Any) -> None:
    per_token = _bytes_per_token(tiny_model)
    memory = PrefixMemory(minimum=4, budget_bytes=per_token * 70)
    a, b, c = _tokens(30, 10), _tokens(30, 11), _tokens(30, 12)
    _fill(memory, tiny_model, a)
    _fill(memory, tiny_model, b)
    assert memory.bytes == per_token * 60 and memory.evictions == 0
    assert _fill(memory, tiny_model, a + (5,)) == 30  # a is used again: b is now the oldest
    assert len(memory) == 2  # a + (5,) replaced a
    _fill(memory, tiny_model, c)
    assert memory.evictions == 1 and memory.bytes <= per_token * 70
    assert memory.match(b) == 0 and memory.match(a) == 30 and memory.match(c) == 30
    _fill(memory, tiny_model, _tokens(80, 13))  # larger than the whole budget: not kept
    assert memory.match(c) == 30 and memory.bytes <= per_token * 70
    with pytest.raises(ConfigError, match="prefix_cache_bytes=-1"):
        PrefixMemory(minimum=4, budget_bytes=-1)


def test_a_weight_change_makes_every_prefix_stale(tiny_model: Any) -> None:
    model = copy.deepcopy(tiny_model)
    memory = PrefixMemory(minimum=4)
    prompt = _tokens(25, 20)
    _fill(memory, model, prompt)
    _fill(memory, model, _tokens(25, 21))
    assert _fill(memory, model, prompt + (3,)) == 25
    with torch.no_grad():
        model.model.layers[0].mlp.up_proj.weight.mul_(1.5)
    assert _fill(memory, model, prompt + (4,)) == 0
    assert len(memory) == 1  # only what was computed under the new weights


def test_reuse_off_remembers_and_copies_nothing(tiny_model: Any) -> None:
    memory = PrefixMemory(minimum=4, enabled=False)
    prompt = _tokens(25, 30)
    assert _fill(memory, tiny_model, prompt) == 0
    assert _fill(memory, tiny_model, prompt + (3,)) == 0
    assert len(memory) == 0 and memory.match(prompt) == 0


def _greedy(prompt: tuple[int, ...], budget: int) -> GenerationRequest:
    return GenerationRequest(list(prompt), GenerationParams(max_tokens=budget, temperature=0.0))


def _episodes(engine: GenerationEngine, starts: list[tuple[int, ...]], steps: int) -> list[str]:
    """Concurrent scripted episodes: each step's prompt is the last prompt, the model's
    answer and a "tool result"; every step of every episode is submitted at once."""
    prompts, texts = list(starts), []
    for step in range(steps):
        futures = [engine.submit(_greedy(p, 6)) for p in prompts]
        answers = [f.result(timeout=60).text for f in futures]
        texts += answers
        prompts = [(*p, *(ord(ch) - 65 for ch in answer), *_tokens(7, 100 * step + i))
                   for i, (p, answer) in enumerate(zip(prompts, answers, strict=True))]
    return texts


def test_episodes_decode_the_same_with_reuse_on_and_off_and_compute_less(
        tiny_model: Any) -> None:
    system = _tokens(24, 40)
    starts = [system + _tokens(n, 41 + n) for n in (3, 5, 8)]
    off = GenerationEngine(tiny_model, DigitTokenizer(), max_batch_size=8, prefix_cache=False)
    on = GenerationEngine(tiny_model, DigitTokenizer(), max_batch_size=8, batch_window_s=0.2)
    try:
        assert _episodes(on, starts, 5) == _episodes(off, starts, 5)
        # one at a time too (the lone-prompt path)
        assert _episodes(on, starts[:1], 4) == _episodes(off, starts[:1], 4)
    finally:
        on.close()
        off.close()
    assert not off.prefix_cache and on.prefix_cache
    assert off.stats["prompt_tokens_computed"] == off.stats["prompt_tokens_sent"]
    assert off.stats["reused_prefix_tokens"] == 0
    assert on.stats["prompt_tokens_sent"] == off.stats["prompt_tokens_sent"]
    # each step copies the previous step's prompt and answer
    assert on.stats["prompt_tokens_computed"] * 2 < on.stats["prompt_tokens_sent"]
    assert on.stats["reused_prefix_tokens"] > 0


def _tiny_model_dir(folder: Any) -> Any:
    """A 2-layer Llama with a word-level tokenizer and a chat template, saved to ``folder``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = ["<pad>", "<unk>", "hello", "world", "ink", "quill", "paper", "lamp", "user",
             "assistant", "system", "tool", ":", "yes", "no", "red", "blue", "tea"]
    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##")
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>",
                                        unk_token="<unk>")
    tokenizer.chat_template = ("{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} "
                               "{% endfor %}{% if add_generation_prompt %}assistant :{% endif %}")
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(
        vocab_size=len(words), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        pad_token_id=0, eos_token_id=None, bos_token_id=None,
        initializer_range=0.5)).save_pretrained(folder)
    return folder


def test_load_chat_model_switches_reuse_off_on_an_engine_of_its_own(tmp_path: Any) -> None:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    from agentic_loop.models import load_chat_model
    from agentic_loop.models.local import release_engine

    folder = _tiny_model_dir(tmp_path / "tiny")
    settings = {"temperature": 0.0, "max_tokens": 4}
    on = load_chat_model(f"local:{folder}", **settings)
    off = load_chat_model(f"local:{folder}", prefix_cache=False, **settings)
    try:
        assert on.engine is not off.engine
        assert on.engine.prefix_cache and not off.engine.prefix_cache
        chat = [SystemMessage("hello world ink quill paper lamp red blue tea " * 3),
                HumanMessage("hello tea")]
        for _ in range(3):  # a conversation growing by the answer and a new turn
            answer = on.invoke(chat)
            assert answer.content == off.invoke(chat).content
            chat += [AIMessage(answer.content), HumanMessage("yes red lamp")]
        assert off.engine.stats["prompt_tokens_computed"] \
            == off.engine.stats["prompt_tokens_sent"]
        assert on.engine.stats["prompt_tokens_computed"] \
            < off.engine.stats["prompt_tokens_sent"] // 2
    finally:
        assert release_engine(folder) == 2
