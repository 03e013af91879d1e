"""Grammar-constrained decoding: JSON schemas (and Lark grammars) compiled to llguidance matchers.

A 135M model asked for JSON returns broken JSON nearly every time. Instead of
hoping, we compile the requested schema into a grammar and, at every decoding
step, mask out every token the grammar cannot accept. The output is then
schema-valid by construction.

Two schema adjustments make that work well on small models (measured on
SmolLM2-135M: 0/10 valid unconstrained, 10/10 with these):

* objects are closed (``additionalProperties: false``) so the model cannot
  wander into invented keys;
* free-text strings get a length bound and a printable-ASCII pattern, so a
  runaway string is cut by the grammar instead of eating the token budget.

Example:
    >>> from pydantic import BaseModel, Field
    >>> class Verdict(BaseModel):
    ...     ok: bool
    ...     why: str = Field(max_length=40)
    >>> schema = constrained_json_schema(Verdict)
    >>> schema["additionalProperties"], schema["properties"]["why"]["maxLength"]
    (False, 40)
    >>> "pattern" in schema["properties"]["why"]
    True
    >>> from typing import TypedDict
    >>> class Pair(TypedDict):
    ...     a: int
    >>> constrained_json_schema(Pair)["required"]   # a TypedDict works too
    ['a']
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from typing_extensions import is_typeddict

from agentic_loop.models.errors import GrammarError

if TYPE_CHECKING:  # torch loads with the engine, not with the schema helpers
    import torch

#: Upper bound put on any string field that declares none. Declare ``max_length``
#: on fields that need more; an unbounded string lets a small model run on forever.
DEFAULT_MAX_STRING_LENGTH = 160
#: Printable ASCII without the quote and backslash, so no escapes are ever needed.
PLAIN_TEXT_PATTERN = r"^[ !#-\[\]-~]*$"

__all__ = [
    "DEFAULT_MAX_STRING_LENGTH",
    "Grammar",
    "GrammarError",
    "JsonGrammar",
    "allocate_token_masks",
    "apply_token_masks",
    "constrained_json_schema",
    "fill_token_mask",
    "schema_of",
]


def schema_of(schema: Any) -> dict[str, Any]:
    """The JSON schema of a pydantic model class or a TypedDict, or a copy of a schema dict."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    if is_typeddict(schema):  # LangChain's reading: Annotated descriptions kept, any Python
        from langchain_core.utils.function_calling import convert_to_json_schema

        return convert_to_json_schema(schema)
    if isinstance(schema, dict):
        return copy.deepcopy(schema)
    raise GrammarError(
        f"structured output needs a pydantic model class, a TypedDict or a JSON schema dict, "
        f"got {schema!r}; pass one of those")


def _tighten(node: Any, max_string_length: int) -> None:
    if isinstance(node, list):
        for item in node:
            _tighten(item, max_string_length)
        return
    if not isinstance(node, dict):
        return
    types = node.get("type")
    is_object = types == "object" or (isinstance(types, list) and "object" in types)
    if is_object and "properties" in node:
        node.setdefault("additionalProperties", False)
    is_string = types == "string" or (isinstance(types, list) and "string" in types)
    if is_string and "enum" not in node and "const" not in node and "format" not in node:
        node.setdefault("maxLength", max_string_length)
        node.setdefault("pattern", PLAIN_TEXT_PATTERN)
    for value in node.values():
        if isinstance(value, (dict, list)):
            _tighten(value, max_string_length)


def constrained_json_schema(
    schema: Any, max_string_length: int = DEFAULT_MAX_STRING_LENGTH
) -> dict[str, Any]:
    """Return the schema with closed objects and bounded plain-text strings."""
    result = schema_of(schema)
    _tighten(result, max_string_length)
    return result


@lru_cache(maxsize=8)
def _ll_tokenizer(tokenizer: Any) -> Any:
    import llguidance.hf

    return llguidance.hf.from_tokenizer(tokenizer)


class Grammar:
    """A compiled llguidance grammar that hands out one fresh matcher per generation.

    Compiling is done once per grammar; ``matcher()`` is cheap. ``grammar`` is
    what ``llguidance.LLMatcher.grammar_from_*`` returns; see :class:`JsonGrammar`
    and :meth:`from_lark`.
    """

    def __init__(self, grammar: str, tokenizer: Any, vocab_size: int) -> None:
        import llguidance

        self.vocab_size = vocab_size
        self._ll_tok = _ll_tokenizer(tokenizer)
        self._grammar = grammar
        is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(
            self._grammar, self._ll_tok
        )
        if is_error:
            raise GrammarError(f"cannot compile the grammar: {messages[0]}; "
                               "simplify the schema (drop unsupported keywords)")

    @classmethod
    def from_lark(cls, lark: str, tokenizer: Any, vocab_size: int) -> Grammar:
        """A grammar in llguidance's Lark dialect (``%json {...}`` embeds a JSON schema)."""
        import llguidance

        return cls(llguidance.LLMatcher.grammar_from_lark(lark), tokenizer, vocab_size)

    def matcher(self) -> Any:
        import llguidance

        m = llguidance.LLMatcher(self._ll_tok, self._grammar, log_level=0)
        if m.is_error():
            raise GrammarError(f"grammar matcher failed to start: {m.get_error()}; "
                               "simplify the schema")
        return m

    @property
    def mask_vocab_size(self) -> int:
        """Tokens a matcher's bitmask covers (the tokenizer's vocabulary; the model's output
        layer may be wider, and tokens past this are never allowed)."""
        return int(self._ll_tok.vocab_size)

    def allowed_mask(self, matcher: Any) -> torch.Tensor:
        """Boolean mask over the model's vocabulary of tokens the grammar allows next."""
        import torch

        bitmask = allocate_token_masks(1, self.mask_vocab_size)
        fill_token_mask(matcher, bitmask, 0)
        logits = torch.zeros((1, self.vocab_size))
        apply_token_masks(logits, bitmask, [0])
        return torch.isfinite(logits[0])


def allocate_token_masks(rows: int, vocab_size: int) -> torch.Tensor:
    """An int32 ``(rows, ceil(vocab_size / 32))`` bitmask, every token allowed (llguidance's
    own layout, so matchers write into it directly with no copy)."""
    import llguidance.torch

    return llguidance.torch.allocate_token_bitmask(rows, vocab_size)


def fill_token_mask(matcher: Any, bitmask: torch.Tensor, row: int) -> None:
    """Write the tokens ``matcher`` allows next into row ``row`` of ``bitmask``."""
    import llguidance.torch

    llguidance.torch.fill_next_token_bitmask(matcher, bitmask, row)


def apply_token_masks(logits: torch.Tensor, bitmask: torch.Tensor, rows: list[int]) -> None:
    """Set to ``-inf``, in place, the logits of ``rows`` whose token the bitmask's row of the
    same index forbids; other rows are left alone.

    What ``llguidance.torch.apply_token_bitmask_inplace`` does, eagerly: that helper is
    wrapped in ``torch.compile``, which on a CPU build compiles C++ in every new process
    (tens of seconds on a small machine) before the first masked token. Tokens past the
    bitmask's width are forbidden too.
    """
    import torch

    if not rows:
        return
    index = torch.tensor(rows, dtype=torch.long)
    words = bitmask.index_select(0, index)
    shifts = torch.arange(32, dtype=torch.int32)
    bits = ((words.unsqueeze(-1) >> shifts) & 1).reshape(len(rows), -1)
    vocab = logits.shape[1]
    allowed = torch.zeros((len(rows), vocab), dtype=torch.bool)
    width = min(vocab, bits.shape[1])
    allowed[:, :width] = bits[:, :width].bool()
    sub = logits.index_select(0, index)
    sub.masked_fill_(~allowed, float("-inf"))
    logits.index_copy_(0, index, sub)


class JsonGrammar(Grammar):
    """The grammar of one JSON schema (compact JSON: no free whitespace)."""

    def __init__(self, schema: dict[str, Any], tokenizer: Any, vocab_size: int) -> None:
        import llguidance

        self.schema = schema
        try:
            compiled = llguidance.LLMatcher.grammar_from_json_schema(
                json.dumps(schema), defaults={"whitespace_flexible": False})
        except ValueError as exc:
            raise GrammarError(f"cannot compile JSON schema into a grammar: {exc}; "
                               "pass a JSON-serializable schema") from exc
        super().__init__(compiled, tokenizer, vocab_size)
