"""Chat models served by any OpenAI-compatible server, vLLM first of all.

Structured output is requested as ``response_format`` json_schema (vLLM
enforces it with guided decoding); we send the same bounded schema the local
grammar uses, validate the answer ourselves, and, through the one
:class:`~agentic_loop.models.retry.RetryPolicy`, retry once with the
validation error if a server did not enforce it.

Example (needs a running server, e.g. ``agentic-loop serve``):
    >>> llm = OpenAICompatibleChatModel(base_url="http://127.0.0.1:8000/v1",
    ...     model="smollm2", api_key="EMPTY")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import httpx
from langchain_core.language_models import LanguageModelInput
from langchain_core.runnables import Runnable
from langchain_openai import ChatOpenAI

from agentic_loop.errors import ConfigError
from agentic_loop.models.engine.grammar import constrained_json_schema
from agentic_loop.models.errors import ModelLoadError
from agentic_loop.models.retry import DEFAULT_RETRY
from agentic_loop.models.structured_output import schema_name, structured_runnable

__all__ = ["OpenAICompatibleChatModel", "list_served_models"]


def list_served_models(base_url: str, api_key: str = "EMPTY",
                       timeout_s: float = 5.0) -> list[str]:
    """Ids of the models a server serves (``GET {base_url}/models``); a clear error if down."""
    url = base_url.rstrip("/") + "/models"
    try:
        response = httpx.get(url, headers={"Authorization": f"Bearer {api_key}"},
                             timeout=timeout_s)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        raise ModelLoadError(
            f"cannot reach the OpenAI-compatible server at {url}: {exc}; start one with "
            "`agentic-loop serve`, check the URL (it usually ends in /v1), or pass check=False"
        ) from exc
    return [m["id"] for m in response.json().get("data", [])]


class OpenAICompatibleChatModel(ChatOpenAI):
    """``ChatOpenAI`` with json_schema structured output validated and retried once.

    ``structured_retries`` is how many times an invalid answer is sent back;
    the waits come from :data:`~agentic_loop.models.retry.DEFAULT_RETRY`.
    """

    structured_retries: int = 1

    def with_structured_output(
        self, schema: Any = None, *,
        include_raw: bool = False, **kwargs: Any,
    ) -> Runnable[LanguageModelInput, Any]:
        if schema is None:
            raise ConfigError(
                "with_structured_output(schema=None): pass a pydantic model class, a TypedDict or "
                "a JSON schema dict")
        json_schema = constrained_json_schema(schema)
        response_format = {"type": "json_schema", "json_schema": {
            "name": schema_name(schema), "schema": json_schema, "strict": False}}
        bound = self.bind(response_format=response_format,
                          ls_structured_output_format={"kwargs": {"method": "json_schema"},
                                                       "schema": json_schema})
        retry = DEFAULT_RETRY.model_copy(update={"max_attempts": 1 + self.structured_retries})
        return structured_runnable(bound, schema, self.model_name, include_raw=include_raw,
                                   retry=retry)
