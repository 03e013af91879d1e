"""The provider table of model specs: rows registered from above, unknown providers named."""

from __future__ import annotations

import pytest

from agentic_loop.models import (
    ModelProvider,
    ModelSpecError,
    get_provider,
    known_providers,
    load_chat_model,
    parse_spec,
    register_provider,
    resolve_model_dir,
)
from agentic_loop.models.providers import provider_of, unregister_provider
from agentic_loop.testing import ScriptedChatModel


@pytest.fixture
def echo_provider(tmp_path):
    weights = tmp_path / "echo-weights"
    weights.mkdir()
    (weights / "config.json").write_text("{}")
    seen: list[tuple[str | None, str, dict]] = []

    def load(target, source, kw):
        seen.append((target, source, dict(kw)))
        return ScriptedChatModel(default=f"echo {target}")

    provider = ModelProvider(name="echo", form="echo:<text>", load=load, target_name="text",
                             example="echo:hi", model_dir=lambda target: weights)
    register_provider(provider)
    yield provider, seen, weights
    unregister_provider("echo")


def test_a_registered_provider_parses_loads_and_names_its_weights(echo_provider) -> None:
    provider, seen, weights = echo_provider
    assert get_provider("ECHO") is provider and "echo" in known_providers()
    assert parse_spec("echo:hello").provider == "echo"
    assert load_chat_model("echo:hello", temperature=0.0).invoke("x").content == "echo hello"
    assert seen == [("hello", "echo:hello", {"temperature": 0.0})]
    assert resolve_model_dir("echo:hello") == weights
    with pytest.raises(ModelSpecError, match=r"names no text after 'echo:'; write 'echo:<text>'"):
        parse_spec("echo:")


def test_the_built_in_rows_and_the_registry_row_are_known() -> None:
    assert {"local", "openai", "langchain", "registry"} <= set(known_providers())
    assert get_provider("registry").form == "registry:<registry dir>"


def test_an_unknown_provider_names_the_spec_and_the_known_ones() -> None:
    with pytest.raises(ModelSpecError) as err:
        provider_of("nope", spec="nope:x")
    assert "'nope:x'" in str(err.value)
    assert "local, openai, registry" in str(err.value).replace("langchain, ", "")


def test_a_provider_name_with_a_colon_is_refused() -> None:
    with pytest.raises(ModelSpecError, match="not usable"):
        register_provider(ModelProvider(name="a:b", form="a:b", load=lambda t, s, k: None))
