"""Structured output for our chat models: turn a JSON answer into a validated object.

Every provider answers ``with_structured_output(Schema)`` through
:func:`structured_runnable`: the model (bound to a JSON-schema request)
followed by :func:`parse_structured`. Local models decode under a grammar,
so their answers validate by construction; a server may not enforce the
schema, so there the call goes through a
:class:`~agentic_loop.models.retry.RetryPolicy`, which shows the model its
own invalid answer and the validation error before giving up.

A schema is a pydantic model class (answers are its instances), a TypedDict
or a JSON-schema dict (answers are dicts, as LangChain returns them).

Example:
    >>> from pydantic import BaseModel
    >>> from langchain_core.messages import AIMessage
    >>> class Point(BaseModel):
    ...     x: int
    >>> parse_structured(AIMessage(content='{"x": 3}'), Point, "demo")
    Point(x=3)
    >>> from typing import TypedDict
    >>> class Pair(TypedDict):
    ...     a: int
    >>> parse_structured(AIMessage(content='{"a": 2}'), Pair, "demo")
    {'a': 2}
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import BaseModel
from typing_extensions import is_typeddict

from agentic_loop.models.engine.grammar import schema_of
from agentic_loop.models.errors import ModelCallError, StructuredOutputError
from agentic_loop.models.retry import RetryPolicy

__all__ = ["message_text", "parse_structured", "schema_name", "structured_runnable"]


def message_text(message: BaseMessage) -> str:
    """The text of a message whose content may be a list of parts."""
    if isinstance(message.content, str):
        return message.content
    return "".join(p if isinstance(p, str) else str(p.get("text", "")) for p in message.content)


def schema_name(schema: Any) -> str:
    """The name a schema goes by in requests and messages (class name or ``title``)."""
    if isinstance(schema, dict):
        return str(schema.get("title", "schema"))
    return str(getattr(schema, "__name__", "schema"))


def parse_structured(message: BaseMessage, schema: Any, model_id: str) -> Any:
    """Validate ``message``'s JSON against ``schema``; raise a clear error if it fails."""
    text = message_text(message)
    try:
        data = json.loads(text)
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            return schema.model_validate(data)
        import jsonschema

        jsonschema.validate(data, schema_of(schema) if is_typeddict(schema) else schema)
        return data
    except Exception as exc:  # JSON, pydantic and jsonschema errors all mean "invalid answer"
        finish = message.response_metadata.get("finish_reason")
        hint = ("; the answer ran out of tokens: raise the token budget or bound the schema's "
                "strings and lists" if finish == "length" else "")
        raise StructuredOutputError(
            f"{model_id} returned an answer that does not validate against "
            f"{schema_name(schema)}: {exc}{hint}; raw answer: {text[:200]!r}",
            raw=message) from exc


def structured_runnable(bound: Runnable[LanguageModelInput, BaseMessage],
                        schema: Any, model_id: str, *,
                        include_raw: bool = False,
                        retry: RetryPolicy | None = None) -> Runnable[LanguageModelInput, Any]:
    """``bound`` (a model bound to a JSON-schema request) followed by validation.

    With a ``retry`` policy an invalid answer is sent back to the model with
    its validation error (see :class:`~agentic_loop.models.retry.RetryPolicy`)
    until ``retry.max_attempts`` calls were made; then the last
    :class:`~agentic_loop.models.errors.StructuredOutputError` is raised (or,
    with ``include_raw``, returned as ``parsing_error``). Keyword arguments
    given to the returned runnable's call (``.bind(temperature=0)``) reach
    the model's call.
    """
    name = schema_name(schema)

    def package(message: BaseMessage) -> Any:
        if not include_raw:
            return parse_structured(message, schema, model_id)
        try:
            return {"raw": message, "parsed": parse_structured(message, schema, model_id),
                    "parsing_error": None}
        except StructuredOutputError as exc:
            return {"raw": message, "parsed": None, "parsing_error": exc}

    if retry is None or retry.max_attempts <= 1:
        return bound | RunnableLambda(package, name=f"parse[{name}]")
    policy = retry

    def with_retries(value: LanguageModelInput, **kwargs: Any) -> Any:
        def parse(message: BaseMessage) -> tuple[BaseMessage, Any]:
            return message, parse_structured(message, schema, model_id)

        model = bound.bind(**kwargs) if kwargs else bound
        try:
            (message, parsed), _ = policy.invoke_validated(
                model, value, parse, what=f"{model_id} structured output", expected=name)
        except ModelCallError as exc:
            last = exc.last_error
            if not isinstance(last, StructuredOutputError):
                raise
            if include_raw:
                return {"raw": last.raw, "parsed": None, "parsing_error": last}
            raise StructuredOutputError(str(exc), raw=last.raw) from last
        return {"raw": message, "parsed": parsed, "parsing_error": None} if include_raw else parsed

    return RunnableLambda(with_retries, name=f"structured[{name}]")
