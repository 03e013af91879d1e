"""``LocalChatModel``: a LangChain chat model over an in-process HF causal LM.

Everything the loops need from a model, offline and on CPU: chat-templated
prompts, real batched generation (concurrent calls share one decoding batch),
token streaming, sampling controls, token usage, token counting with the
model's own tokenizer (``get_num_tokens``, ``get_num_tokens_from_messages``,
so ``trim_messages`` works), structured output that is schema-valid by
construction (llguidance grammar masks at every step), and tool calling
(``bind_tools``; calls decoded under a grammar too, see :mod:`.tools`), so
``create_react_agent(load_chat_model("local"), tools)`` runs offline.

Loaded models are shared per process: two ``LocalChatModel`` objects pointing
at the same directory use one set of weights and one decoding engine.

Example (offline; loads the embedded SmolLM2-135M):
    >>> from agentic_loop.models import load_chat_model
    >>> llm = load_chat_model("local", temperature=0.0, max_tokens=8)  # doctest: +SKIP
    >>> llm.invoke("Say hi").content  # doctest: +SKIP
    'Hello! How can I help you today?'
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import torch
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    SystemMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from agentic_loop.errors import ConfigError
from agentic_loop.models.cpu_caps import native_bf16
from agentic_loop.models.engine.attention import use_gqa_sdpa
from agentic_loop.models.engine.engine import (
    GenerationEngine,
    GenerationOutput,
    GenerationParams,
    GenerationRequest,
)
from agentic_loop.models.engine.fused_projections import fuse_projections
from agentic_loop.models.engine.grammar import Grammar, JsonGrammar, constrained_json_schema
from agentic_loop.models.engine.invariance import make_batch_invariant
from agentic_loop.models.engine.packed_linear import pack_linears
from agentic_loop.models.errors import ModelCallError, ModelLoadError
from agentic_loop.models.structured_output import structured_runnable
from agentic_loop.models.tools import ToolPlan, as_chunk, engine_chat
from agentic_loop.models.weights import load_causal_lm

__all__ = ["DTYPES", "LocalChatModel", "default_dtype", "default_num_threads", "dtype_named",
           "loaded_engine", "release_engine"]

_ENGINES: dict[tuple[str, str, str], GenerationEngine] = {}
_ENGINES_LOCK = threading.Lock()


#: What torch picked for this machine (its physical cores) before anything changed it.
_TORCH_THREADS = torch.get_num_threads()


def default_num_threads() -> int:
    """Torch intra-op threads: ``$AGENTIC_LOOP_TORCH_THREADS``, else torch's own default.

    On a quiet 2-core machine two threads decoded 1.3-1.6x the tokens/s of one
    (bench/results/models.json). When other heavy processes share the cores,
    the threads contend (two ran at 0.43x of one under load): set
    ``AGENTIC_LOOP_TORCH_THREADS=1`` there.

    >>> default_num_threads() >= 1
    True
    """
    env = os.environ.get("AGENTIC_LOOP_TORCH_THREADS")
    if env is None:
        return max(1, _TORCH_THREADS)
    try:
        threads = int(env)
    except ValueError:
        threads = 0
    if threads < 1:
        raise ConfigError(
            f"AGENTIC_LOOP_TORCH_THREADS={env!r}: set it to a whole number >= 1 or unset it")
    return threads


#: The dtypes ``AGENTIC_LOOP_DTYPE`` (and ``LocalChatModel(dtype=...)``) may name.
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def dtype_named(name: str, source: str = "dtype") -> torch.dtype:
    """The torch dtype called ``name`` (one of :data:`DTYPES`); ``source`` names the input.

    >>> dtype_named("bfloat16")
    torch.bfloat16
    """
    try:
        return DTYPES[name]
    except KeyError:
        raise ConfigError(
            f"{source}={name!r} is not a dtype the local engine runs in; "
            f"use one of {', '.join(DTYPES)}") from None


def default_dtype(device: str) -> torch.dtype:
    """The dtype the engine loads weights in: ``$AGENTIC_LOOP_DTYPE`` when set (one of
    :data:`DTYPES`), else bf16 on GPU, bf16 on a CPU with native bf16 math
    (:func:`.cpu_caps.native_bf16`: AVX-512 BF16, AMX-BF16, Arm BF16), fp32 on others.

    Why by capability: with native bf16, torch's bf16 matmul at the model's shapes runs
    2.7x fp32's (104.6 against 38.5 GFLOP/s, one thread, batch 32); on AVX2 alone bf16 is
    emulated and slower than fp32. bf16 used to make greedy answers depend on the batch
    (12 of 24 changed); on the CPU the engine now runs bf16 models batch-invariant
    (:mod:`.engine.invariance`), and answers alone and in any batch agree as in fp32
    (tests/integration/test_engine_batch_invariance.py).

    >>> default_dtype("cuda")
    torch.bfloat16
    """
    env = os.environ.get("AGENTIC_LOOP_DTYPE")
    if env:
        return dtype_named(env, "AGENTIC_LOOP_DTYPE")
    if device == "cuda" or (device == "cpu" and native_bf16()):
        return torch.bfloat16
    return torch.float32


def _resolve_device(device: str) -> str:
    if device != "auto":
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def loaded_engine(
    model_dir: str | Path, *, dtype: str = "auto", device: str = "auto", max_batch_size: int = 32,
    prefix_cache: bool = True,
) -> GenerationEngine:
    """Load (once per process) the model in ``model_dir`` and return its engine.

    One engine per model directory, dtype and device: one copy of the weights and
    one decoder, so every caller's requests batch together. A caller asking for a
    larger ``max_batch_size`` than the engine has widens it (the engine reads the
    cap at every admission); a smaller one leaves it, as other callers rely on it.
    ``prefix_cache=False`` gets an engine of its own that reuses no prompt prefix.
    """
    path = Path(model_dir).expanduser()
    dev = _resolve_device(device)
    torch_dtype = default_dtype(dev) if dtype == "auto" else dtype_named(dtype)
    key = (str(path.resolve()), str(torch_dtype), dev + ("" if prefix_cache else ":no-prefix"))
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is not None:
            engine.max_batch_size = max(engine.max_batch_size, max_batch_size)
            return engine
        if dev == "cpu":
            torch.set_num_threads(default_num_threads())
        tokenizer, model = load_causal_lm(path, dtype=torch_dtype)
        model.to(dev).eval()
        use_gqa_sdpa(model)  # padded batches: no per-step copy of the KV heads on the CPU
        pack_linears(model)  # CPU: weights laid out for the matrix kernel once, not per call
        make_batch_invariant(model)  # on the CPU: answers independent of the batch
        fuse_projections(model)  # q/k/v and gate/up: one product each, the same numbers
        if tokenizer.chat_template is None:
            raise ModelLoadError(
                f"the tokenizer in {path} has no chat template; save one with the model "
                "(tokenizer.chat_template) so chat messages can be formatted"
            )
        engine = GenerationEngine(model, tokenizer, max_batch_size=max_batch_size,
                                  prefix_cache=prefix_cache)
        _ENGINES[key] = engine
        return engine


def release_engine(model_dir: str | Path) -> int:
    """Drop ``model_dir``'s shared engines; each closes once the work it holds is answered.

    Why: a process following a registry loads every version that gets promoted,
    and the shared cache would keep each one's weights for good. A call still
    running on a released engine finishes there; a ``LocalChatModel`` of that
    folder loads it again on its next call. Returns how many engines went.
    """
    resolved = str(Path(model_dir).expanduser().resolve())
    with _ENGINES_LOCK:
        engines = [_ENGINES.pop(key) for key in list(_ENGINES) if key[0] == resolved]
    for engine in engines:
        engine.retire()
    return len(engines)


class LocalChatModel(BaseChatModel):
    """Chat model over a local Hugging Face causal-LM directory."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model_path: str
    model_id: str = "local"
    temperature: float = 0.7
    top_p: float = 0.95
    max_tokens: int = 256
    #: Budget for structured answers; strings are bounded by the grammar anyway.
    structured_max_tokens: int = 1024
    stop: list[str] | None = None
    seed: int | None = None
    dtype: str = "auto"
    device: str = "auto"
    #: Rows decoded together. 32 concurrent requests (bench/serve.py) ran at 64 tokens/s
    #: under a cap of 8 and 128 under 32; a lone request never waits for companions.
    max_batch_size: int = Field(default=32, ge=1)
    #: Reuse the KV of remembered prompt prefixes (an agent's earlier steps, the system
    #: prompt); False: every prompt token is computed, on an engine of its own (benches).
    prefix_cache: bool = True

    _engine: GenerationEngine | None = PrivateAttr(default=None)
    _grammars: dict[str, Grammar] = PrivateAttr(default_factory=dict)

    @property
    def _llm_type(self) -> str:
        return "agentic-loop-local"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_id": self.model_id, "model_path": self.model_path,
                "temperature": self.temperature, "top_p": self.top_p,
                "max_tokens": self.max_tokens}

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = "agentic-loop"
        params["ls_model_name"] = self.model_id
        return params

    @property
    def engine(self) -> GenerationEngine:
        """The shared decoding engine (loads the weights on first use, and again after
        :func:`release_engine` retired the one this model had)."""
        if self._engine is None or self._engine.closed:
            self._engine = loaded_engine(self.model_path, dtype=self.dtype, device=self.device,
                                         max_batch_size=self.max_batch_size,
                                         prefix_cache=self.prefix_cache)
        return self._engine

    # -- prompt and request building ----------------------------------------
    def prompt_ids(self, messages: Sequence[BaseMessage], tools: ToolPlan | None = None, *,
                   generation_prompt: bool = True) -> list[int]:
        """Token ids of the chat-templated prompt, ending with the assistant turn.

        ``tools`` are described in the system message (see :mod:`.tools`).
        """
        tokenizer = self.engine.tokenizer
        chat = engine_chat(messages, tools, tokenizer.chat_template)
        if not chat:
            raise ConfigError("cannot generate from an empty list of messages; pass at least one")
        text = tokenizer.apply_chat_template(chat, tokenize=False,
                                             add_generation_prompt=generation_prompt)
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    def get_token_ids(self, text: str) -> list[int]:
        """Token ids of ``text`` under the model's own tokenizer (no special tokens)."""
        return list(self.engine.tokenizer.encode(text, add_special_tokens=False))

    def get_num_tokens_from_messages(self, messages: list[BaseMessage],
                                     tools: Sequence[Any] | None = None) -> int:
        """Tokens of ``messages`` as the model reads them: chat template and tools included.

        No generation prompt, and no chat template's default system prompt (what a
        template adds when the first message is not a system message), so counts add
        up over parts of a conversation, as ``trim_messages`` needs.
        """
        if not messages:
            return 0
        if tools:
            return len(self.prompt_ids(messages, ToolPlan.of(tools), generation_prompt=False))
        if isinstance(messages[0], SystemMessage):
            return len(self.prompt_ids(messages, generation_prompt=False))
        empty = [SystemMessage(content="")]  # stands in for the default; then taken off
        return (len(self.prompt_ids([*empty, *messages], generation_prompt=False))
                - len(self.prompt_ids(empty, generation_prompt=False)))

    def _params(self, stop: list[str] | None, kwargs: dict[str, Any],
                structured: bool) -> GenerationParams:
        stops = tuple(stop if stop is not None else kwargs.get("stop") or self.stop or ())
        default_budget = self.structured_max_tokens if structured else self.max_tokens
        return GenerationParams(
            max_tokens=int(kwargs.get("max_tokens", default_budget)),
            temperature=float(kwargs.get("temperature", self.temperature)),
            top_p=float(kwargs.get("top_p", self.top_p)),
            stop=() if structured else stops,
            seed=kwargs.get("seed", self.seed),
        )

    def _grammar(self, schema: dict[str, Any] | None = None, lark: str | None = None) -> Grammar:
        key = lark if lark is not None else json.dumps(schema, sort_keys=True)
        grammar = self._grammars.get(key)
        if grammar is None:
            tokenizer, vocab = self.engine.tokenizer, self.engine.vocab_size
            grammar = (Grammar.from_lark(lark, tokenizer, vocab) if lark is not None
                       else JsonGrammar(schema or {}, tokenizer, vocab))
            self._grammars[key] = grammar
        return grammar

    def _tool_grammar(self, plan: ToolPlan) -> Grammar | None:
        """A forced call is one JSON schema; "auto" is text-or-call (Lark); "none" is free."""
        if not plan.callable_names:
            return None
        lark = plan.lark()
        return self._grammar(lark=lark) if lark is not None else self._grammar(plan.call_schema())

    def _request(self, messages: list[BaseMessage], stop: list[str] | None,
                 kwargs: dict[str, Any], on_text: Any = None,
                 ) -> tuple[GenerationRequest, ToolPlan | None]:
        """The engine request and, when tools are bound, the plan that reads the reply.

        A ``json_schema`` (structured output) wins over bound tools.
        """
        schema = kwargs.get("json_schema")
        plan = None
        if schema is not None:
            grammar: Grammar | None = self._grammar(schema)
            structured = True
        elif kwargs.get("tools"):
            plan = ToolPlan.of(kwargs["tools"], kwargs.get("tool_choice"))
            grammar, structured = self._tool_grammar(plan), plan.forced
        else:
            grammar, structured = None, False
        params = self._params(stop, kwargs, structured=structured)
        request = GenerationRequest(self.prompt_ids(messages, plan), params, grammar, on_text)
        return request, plan

    @staticmethod
    def _message(output: GenerationOutput, model_id: str, seconds: float,
                 plan: ToolPlan | None = None) -> AIMessage:
        usage = {"input_tokens": output.prompt_tokens, "output_tokens": output.completion_tokens,
                 "total_tokens": output.prompt_tokens + output.completion_tokens}
        meta: dict[str, Any] = {"model_name": model_id, "finish_reason": output.finish_reason,
                                "latency_s": round(seconds, 4)}
        if output.grammar_complete is not None:
            meta["grammar_complete"] = output.grammar_complete
        if plan is not None:
            return plan.message(output.text, usage_metadata=usage, response_metadata=meta)
        return AIMessage(content=output.text, usage_metadata=usage, response_metadata=meta)

    def _submit(self, request: GenerationRequest) -> Future[GenerationOutput]:
        """Queue ``request``; an engine retired between the check and the queueing
        (:func:`release_engine`) is loaded again, once."""
        engine = self.engine
        try:
            return engine.submit(request)
        except ModelCallError:
            if not engine.closed:
                raise
            return self.engine.submit(request)

    # -- LangChain hooks ------------------------------------------------------
    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        started = time.perf_counter()
        request, plan = self._request(messages, stop, kwargs)
        output = self._submit(request).result()
        message = self._message(output, self.model_id, time.perf_counter() - started, plan)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                run_manager: CallbackManagerForLLMRun | None = None,
                **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        started = time.perf_counter()
        if kwargs.get("tools") and kwargs.get("json_schema") is None:
            # A reply may be a tool call: read it whole, then hand it over as one chunk.
            request, plan = self._request(messages, stop, kwargs)
            output = self._submit(request).result()
            yield ChatGenerationChunk(message=as_chunk(self._message(
                output, self.model_id, time.perf_counter() - started, plan)))
            return
        deltas: queue.Queue[str] = queue.Queue()
        request, _ = self._request(messages, stop, kwargs, on_text=deltas.put)
        future = self._submit(request)
        while True:
            try:
                delta = deltas.get(timeout=0.05)
            except queue.Empty:
                if future.done() and deltas.empty():
                    break
                continue
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=delta))
            if run_manager is not None:
                run_manager.on_llm_new_token(delta, chunk=chunk)
            yield chunk
        output = future.result()  # re-raises a decoding error
        final = self._message(output, self.model_id, time.perf_counter() - started)
        yield ChatGenerationChunk(message=AIMessageChunk(
            content="", usage_metadata=final.usage_metadata,
            response_metadata=final.response_metadata, chunk_position="last"))

    def batch(self, inputs: list[LanguageModelInput],
              config: RunnableConfig | list[RunnableConfig] | None = None, *,
              return_exceptions: bool = False, **kwargs: Any) -> list[AIMessage]:
        """Generate for all inputs in shared decoding batches (not one by one)."""
        if config is None or isinstance(config, dict):
            shared: RunnableConfig = {**(config or {})}
            shared.setdefault("max_concurrency", max(1, min(len(inputs), 64)))
            config = shared
        return super().batch(inputs, config, return_exceptions=return_exceptions, **kwargs)

    def bind_tools(self, tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
                   *, tool_choice: str | dict[str, Any] | bool | None = None,
                   **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools; replies are text or one call, decoded under a grammar (see :mod:`.tools`).

        ``tool_choice``: ``None``/``"auto"`` (text or a call), ``"any"``/``"required"``
        (a call), a tool's name (a call of it), ``"none"`` (text).
        """
        plan = ToolPlan.of(tools, tool_choice)
        self._tool_grammar(plan)  # compile now: a bad tool schema fails here, not mid-run
        return self.bind(tools=list(plan.specs), tool_choice=tool_choice, **kwargs)

    def with_structured_output(
        self, schema: type[BaseModel] | dict[str, Any] | type, *, include_raw: bool = False,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, Any]:
        """Schema-valid answers by grammar-constrained decoding.

        ``schema`` is a pydantic model class (answers are instances of it), a
        TypedDict or a JSON schema dict (answers are dicts).
        """
        json_schema = constrained_json_schema(schema)
        self._grammar(json_schema)  # compile now: a bad schema fails here, not mid-run
        bound = self.bind(json_schema=json_schema,
                          ls_structured_output_format={"kwargs": {"method": "json_schema"},
                                                       "schema": json_schema})
        return structured_runnable(bound, schema, self.model_id, include_raw=include_raw)
