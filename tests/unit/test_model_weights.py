"""A LoRA adapter runs in-process, merged onto its base, and a replaced version frees its weights.

Real tiny models on disk (a 2-layer Llama, a word-level tokenizer with a chat
template, a PEFT adapter whose B matrices are not zero), loaded through the
same path as the embedded model: ``load_causal_lm``, ``load_chat_model``,
``"registry:<dir>"``.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from langchain_core.messages import HumanMessage

from agentic_loop.distill.release.live_model import RegistryChatModel
from agentic_loop.distill.release.registry import Registry
from agentic_loop.models import load_chat_model
from agentic_loop.models.engine.requests import GenerationParams, GenerationRequest
from agentic_loop.models.errors import ModelCallError, ModelLoadError
from agentic_loop.models.local import loaded_engine, release_engine
from agentic_loop.models.weights import load_causal_lm

WORDS = ["hello", "world", "ink", "quill", "paper", "lamp", "user", "assistant", ":", "yes",
         "no", "maybe", "red", "blue", "green", "tea"]
TEMPLATE = ("{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} {% endfor %}"
            "{% if add_generation_prompt %}assistant :{% endif %}")


def _save_tokenizer(folder: Path) -> int:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<pad>", "<unk>", *WORDS])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    # No end-of-sequence token: every answer runs to its token budget.
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>",
                                        unk_token="<unk>")
    tokenizer.chat_template = TEMPLATE
    tokenizer.save_pretrained(folder)
    return len(vocab)


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("base")
    vocab = _save_tokenizer(folder)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=128, pad_token_id=0, eos_token_id=None,
                         bos_token_id=None, initializer_range=0.5)
    model = LlamaForCausalLM(config)
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def adapter_dir(base_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    folder = tmp_path_factory.mktemp("adapter")
    torch.manual_seed(1)
    base = AutoModelForCausalLM.from_pretrained(base_dir)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"],
                        init_lora_weights=False)  # random B: the adapter changes the model
    get_peft_model(base, config).save_pretrained(folder)
    return folder


def _logits(model: Any, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0]


def test_an_adapter_loads_merged_and_computes_what_peft_computes(base_dir: Path,
                                                                  adapter_dir: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    assert json.loads((adapter_dir / "adapter_config.json").read_text())[
        "base_model_name_or_path"] == str(base_dir)
    tokenizer, merged = load_causal_lm(adapter_dir, dtype="float32")
    assert tokenizer.chat_template == TEMPLATE  # the adapter saved none: the base's
    assert not any("lora" in name for name, _ in merged.named_parameters())  # folded in
    ids = tokenizer("hello world ink quill paper lamp")["input_ids"]
    unmerged = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_dir),
                                         adapter_dir).eval()
    base = load_causal_lm(base_dir, dtype="float32")[1]
    assert torch.allclose(_logits(merged, ids), _logits(unmerged, ids), atol=1e-5)
    assert not torch.allclose(_logits(merged, ids), _logits(base, ids), atol=1e-2)


def test_an_adapter_is_a_local_chat_model(adapter_dir: Path, base_dir: Path) -> None:
    tuned = load_chat_model(f"local:{adapter_dir}", temperature=0.0, max_tokens=6)
    plain = load_chat_model(f"local:{base_dir}", temperature=0.0, max_tokens=6)
    answer = tuned.invoke("hello world")
    assert answer.content and answer.usage_metadata["output_tokens"] == 6
    assert tuned.engine is not plain.engine
    # The merged weights are the adapter's, not the base's (same prompt, greedy).
    prompt = tuned.prompt_ids([HumanMessage("hello world")])
    assert not torch.allclose(_logits(tuned.engine.model, prompt),
                              _logits(plain.engine.model, prompt), atol=1e-2)


def test_broken_adapters_name_the_folder(tmp_path: Path, base_dir: Path) -> None:
    orphan = tmp_path / "orphan"
    orphan.mkdir()
    (orphan / "adapter_config.json").write_text(json.dumps(
        {"base_model_name_or_path": str(tmp_path / "gone"), "peft_type": "LORA"}))
    with pytest.raises(ModelLoadError, match=r"LoRA adapter in .*orphan on its base .*gone"):
        load_causal_lm(orphan, dtype="float32")
    with pytest.raises(ModelLoadError, match="neither config.json nor adapter_config.json"):
        load_causal_lm(tmp_path, dtype="float32")


def test_registry_runs_an_adapter_version_in_process_and_frees_the_one_it_replaced(
        tmp_path: Path, base_dir: Path, adapter_dir: Path) -> None:
    reg = Registry(tmp_path / "registry")
    reg.register(base_dir)
    reg.register(adapter_dir)
    reg.promote("v1")
    llm = RegistryChatModel(registry=str(reg.root), model_kwargs={"temperature": 0.0,
                                                                  "max_tokens": 4})
    first = llm.invoke("hello world")
    assert first.response_metadata["model_name"] == "registry@v1"
    old = loaded_engine(base_dir)
    reg.promote("v2")
    second = llm.invoke("hello world")
    assert second.response_metadata["model_name"] == "registry@v2"
    old._worker.join(5)
    assert old.closed  # v1's weights went with its engine
    assert loaded_engine(base_dir) is not old  # a later caller loads v1 again, fresh


def test_a_retired_engine_answers_what_it_holds_then_refuses(base_dir: Path) -> None:
    engine = loaded_engine(base_dir)
    params = GenerationParams(max_tokens=40, temperature=0.0)
    running = [engine.submit(GenerationRequest([3, 4, 5, 6], params)) for _ in range(3)]
    assert release_engine(base_dir) == 1
    assert release_engine(base_dir) == 0  # already out of the cache
    # Submits racing the retirement: each is answered or refused at once, never left hanging.
    late: list[Any] = []

    def submit_some() -> None:
        for _ in range(20):
            try:
                late.append(engine.submit(GenerationRequest([7, 8], GenerationParams(
                    max_tokens=2, temperature=0.0))))
            except ModelCallError as exc:
                late.append(exc)

    threads = [threading.Thread(target=submit_some) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(f.result(timeout=30).completion_tokens == 40 for f in running)
    for item in late:
        if not isinstance(item, ModelCallError):
            assert item.result(timeout=30).completion_tokens == 2
    engine._worker.join(10)
    assert engine.closed
    with pytest.raises(ModelCallError, match="closed"):
        engine.submit(GenerationRequest([3], params))


def test_a_chat_model_whose_engine_was_released_loads_it_again(base_dir: Path) -> None:
    llm = load_chat_model(f"local:{base_dir}", temperature=0.0, max_tokens=3)
    before = llm.engine
    release_engine(base_dir)
    before._worker.join(10)
    assert before.closed
    assert llm.invoke("hello").usage_metadata["output_tokens"] == 3
    assert llm.engine is not before and not llm.engine.closed


def test_kl_drift_of_an_adapter_is_measured_on_its_merged_weights(base_dir: Path,
                                                                   adapter_dir: Path) -> None:
    from agentic_loop.distill.eval.drift import kl_drift

    prompts = ["hello world", "red blue green tea"]
    assert kl_drift(base_dir, base_dir, prompts).mean_kl == pytest.approx(0.0, abs=1e-6)
    drift = kl_drift(base_dir, adapter_dir, prompts)
    assert drift.mean_kl > 1e-3 and drift.prompts == 2
