"""One way to turn a model's JSON answer into a validated object, for every provider.

Local models decode under a grammar, so their answers validate by
construction; a server may not enforce the schema, so there we allow a
bounded number of retries that show the model its own validation error.

Example:
    >>> from pydantic import BaseModel
    >>> from langchain_core.messages import AIMessage
    >>> class Point(BaseModel):
    ...     x: int
    >>> parse_structured(AIMessage(content='{"x": 3}'), Point, "demo")
    Point(x=3)
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.prompt_values import ChatPromptValue
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import BaseModel, ValidationError

from agentic_loop.models.errors import StructuredOutputError

__all__ = ["message_text", "parse_structured", "structured_runnable"]


def message_text(message: BaseMessage) -> str:
    """The text of a message whose content may be a list of parts."""
    if isinstance(message.content, str):
        return message.content
    return "".join(p if isinstance(p, str) else str(p.get("text", "")) for p in message.content)


def _is_model(schema: Any) -> bool:
    return isinstance(schema, type) and issubclass(schema, BaseModel)


def schema_name(schema: type[BaseModel] | dict[str, Any]) -> str:
    return schema.__name__ if _is_model(schema) else str(schema.get("title", "schema"))  # type: ignore[union-attr]


def parse_structured(message: BaseMessage, schema: type[BaseModel] | dict[str, Any],
                     model_id: str) -> Any:
    """Validate ``message``'s JSON against ``schema``; raise a clear error if it fails."""
    text = message_text(message)
    try:
        data = json.loads(text)
        if _is_model(schema):
            return schema.model_validate(data)  # type: ignore[union-attr]
        import jsonschema

        jsonschema.validate(data, schema)  # type: ignore[arg-type]
        return data
    except (json.JSONDecodeError, ValidationError, Exception) as exc:
        if isinstance(exc, StructuredOutputError):
            raise
        finish = message.response_metadata.get("finish_reason")
        hint = (" The answer ran out of tokens: raise the token budget or bound the schema's "
                "strings and lists." if finish == "length" else "")
        raise StructuredOutputError(
            f"{model_id} returned an answer that does not validate against "
            f"{schema_name(schema)}: {exc}.{hint} Raw answer: {text[:200]!r}") from exc


def _as_messages(value: LanguageModelInput) -> list[BaseMessage]:
    if isinstance(value, str):
        return [HumanMessage(content=value)]
    if isinstance(value, ChatPromptValue):
        return list(value.messages)
    if hasattr(value, "to_messages"):
        return list(value.to_messages())
    from langchain_core.messages import convert_to_messages

    return list(convert_to_messages(value))  # type: ignore[arg-type]


def structured_runnable(bound: Runnable[LanguageModelInput, BaseMessage],
                        schema: type[BaseModel] | dict[str, Any], model_id: str, *,
                        include_raw: bool = False, retries: int = 0) -> Runnable[LanguageModelInput, Any]:
    """``bound`` (a model bound to a JSON-schema request) followed by validation.

    With ``retries > 0`` an invalid answer is sent back to the model with the
    validation error, at most ``retries`` times, before the error is raised.
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

    if retries <= 0:
        return bound | RunnableLambda(package, name=f"parse[{name}]")

    def with_retries(value: LanguageModelInput) -> Any:
        messages = _as_messages(value)
        answer = bound.invoke(messages)
        for _ in range(retries):
            try:
                parse_structured(answer, schema, model_id)
                break
            except StructuredOutputError as exc:
                messages = [*messages, answer, HumanMessage(
                    content=f"That answer was invalid: {exc}. Reply again with only a JSON "
                            f"object that matches the {name} schema.")]
                answer = bound.invoke(messages)
        return package(answer)

    return RunnableLambda(with_retries, name=f"structured[{name}]")
