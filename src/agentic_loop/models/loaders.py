"""The built-in rows of the provider table: ``local``, ``openai`` and LangChain's specs.

Each loader takes the parsed target, the spec as written (for errors) and
``load_chat_model``'s keyword arguments; :mod:`agentic_loop.models`
registers them on import, so the table is never without them. Providers from
above (the registry) register their own rows
(:mod:`agentic_loop.models.providers`).

Example:
    >>> from agentic_loop.models.providers import get_provider
    >>> [get_provider(name).form for name in ("local", "openai", "langchain")]
    ['local:<model dir>', 'openai:<base_url>', '<provider>:<model>']
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel

from agentic_loop.models.embedded import EMBEDDED_MODEL_ID
from agentic_loop.models.errors import ModelLoadError, ModelSpecError
from agentic_loop.models.model_dirs import local_model_dir
from agentic_loop.models.providers import ModelProvider, register_provider
from agentic_loop.models.spec import ModelSpec, spec_forms

__all__ = ["BUILT_IN_PROVIDERS", "drop_unset", "load_langchain", "load_local", "load_openai"]


def drop_unset(kw: dict[str, Any]) -> None:
    """Sampling keywords passed as None mean "the provider's default": leave them out."""
    for name in ("max_tokens", "temperature", "top_p", "seed", "stop"):
        if name in kw and kw[name] is None:
            kw.pop(name)


def load_local(target: str | None, source: str, kw: dict[str, Any]) -> BaseChatModel:
    """``"local"`` or ``"local:<dir>"`` (or a bare directory): the in-process engine."""
    from agentic_loop.models.local import LocalChatModel

    path = local_model_dir(ModelSpec("local", target), source=source,
                           cache_dir=kw.pop("cache_dir", None) or None)
    default_id = EMBEDDED_MODEL_ID if target is None else path.name
    model = LocalChatModel(model_path=str(path), model_id=kw.pop("model_id", default_id), **kw)
    _ = model.engine  # load now, so a broken model fails here and not mid-run
    return model


def load_openai(target: str | None, source: str, kw: dict[str, Any]) -> BaseChatModel:
    """``"openai:<base_url>"``: an OpenAI-compatible server, probed unless ``check=False``."""
    from agentic_loop.models.openai_compat import OpenAICompatibleChatModel, list_served_models

    base_url = target or ""
    api_key = kw.pop("api_key", "EMPTY")
    check = kw.pop("check", True)
    model_name = kw.pop("model", None)
    if check:
        served = list_served_models(base_url, api_key)
        if model_name is None:
            if not served:
                raise ModelLoadError(f"the server at {base_url} serves no model; start it with one "
                                     "(`agentic-loop serve`)")
            model_name = served[0]
        elif model_name not in served:
            raise ModelLoadError(f"the server at {base_url} does not serve {model_name!r}; "
                                 f"it serves {served}: pass one of them as model=")
    if model_name is None:
        raise ModelSpecError(
            f"model spec {source!r} needs model=<served model name> when check=False")
    drop_unset(kw)
    return OpenAICompatibleChatModel(base_url=base_url, model=model_name, api_key=api_key, **kw)


def load_langchain(target: str | None, source: str, kw: dict[str, Any]) -> BaseChatModel:
    """A spec that is not ours, through LangChain's ``init_chat_model`` (``provider:model``)."""
    spec = target or source
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:
        raise ModelLoadError(
            f"model spec {spec!r} is not one of ours, so it goes to LangChain's init_chat_model, "
            "which needs the langchain package: pip install langchain") from exc
    drop_unset(kw)
    for ours in ("check", "cache_dir", "model_id"):
        kw.pop(ours, None)
    try:
        model = init_chat_model(spec, **kw)
    except ValueError as exc:
        raise ModelSpecError(
            f"init_chat_model (LangChain) refused model spec {spec!r}: {exc}; "
            f"use one of: {spec_forms()}") from exc
    except Exception as exc:  # noqa: BLE001 - a missing provider package or key, named below
        raise ModelLoadError(
            f"init_chat_model (LangChain) could not load {spec!r}: {type(exc).__name__}: {exc}; "
            "install the provider's package (e.g. langchain-openai) and set its API key") from exc
    if not isinstance(model, BaseChatModel):
        raise ModelSpecError(f"init_chat_model (LangChain) gave no chat model for {spec!r}; "
                             "name the model in the spec, e.g. 'openai:gpt-4o-mini'")
    return model


BUILT_IN_PROVIDERS = (
    ModelProvider(name="local", form="local:<model dir>", load=load_local,
                  target_name="directory", example="local:runs/distilled", target_required=False),
    ModelProvider(name="openai", form="openai:<base_url>", load=load_openai,
                  target_name="base URL", example="openai:http://127.0.0.1:8000/v1"),
    ModelProvider(name="langchain", form="<provider>:<model>", load=load_langchain,
                  target_name="model", example="openai:gpt-4o-mini"),
)
for _provider in BUILT_IN_PROVIDERS:
    register_provider(_provider)
