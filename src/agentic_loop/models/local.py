"""``LocalChatModel``: a LangChain chat model over an in-process HF causal LM.

Everything the loops need from a model, offline and on CPU: chat-templated
prompts, real batched generation (concurrent calls share one decoding batch),
token streaming, sampling controls, token usage, and structured output that
is schema-valid by construction (llguidance grammar masks at every step).

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
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from agentic_loop.errors import ConfigError
from agentic_loop.models.engine import (
    GenerationEngine,
    GenerationOutput,
    GenerationParams,
    GenerationRequest,
)
from agentic_loop.models.errors import ModelLoadError
from agentic_loop.models.grammar import JsonGrammar, constrained_json_schema
from agentic_loop.models.structured_output import message_text, structured_runnable

__all__ = ["LocalChatModel", "default_dtype", "default_num_threads", "loaded_engine"]

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


def default_dtype(device: str) -> torch.dtype:
    """bf16 on GPU; fp32 on CPU: as fast as bf16 there (bench/results/models.json), and
    batched greedy decoding stays identical to one-by-one decoding."""
    env = os.environ.get("AGENTIC_LOOP_DTYPE")
    if env:
        return getattr(torch, env)
    return torch.bfloat16 if device == "cuda" else torch.float32


def _resolve_device(device: str) -> str:
    if device != "auto":
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def loaded_engine(
    model_dir: str | Path, *, dtype: str = "auto", device: str = "auto", max_batch_size: int = 8
) -> GenerationEngine:
    """Load (once per process) the model in ``model_dir`` and return its engine."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(model_dir).expanduser()
    dev = _resolve_device(device)
    torch_dtype = default_dtype(dev) if dtype == "auto" else getattr(torch, dtype)
    key = (str(path.resolve()), str(torch_dtype), dev)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is not None:
            return engine
        if not path.is_dir():
            raise ModelLoadError(
                f"model dir {path} does not exist; pass a Hugging Face model directory "
                "(config.json + weights), e.g. one written by `agentic-loop distill`"
            )
        if not (path / "config.json").is_file():
            raise ModelLoadError(
                f"{path} has no config.json, so it is not a Hugging Face model directory; "
                "pass the directory that holds config.json and the weights"
            )
        if dev == "cpu":
            torch.set_num_threads(default_num_threads())
        from transformers.utils import logging as hf_logging

        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # a 1-second load needs no progress bar
        try:
            tokenizer = AutoTokenizer.from_pretrained(path)
            model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
        except Exception as exc:
            raise ModelLoadError(
                f"could not load the model in {path}: {exc}; check that the directory holds "
                "a complete Hugging Face causal-LM checkpoint") from exc
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        model.to(dev).eval()  # type: ignore[arg-type]  # transformers types .to as a wrapper
        if tokenizer.chat_template is None:
            raise ModelLoadError(
                f"the tokenizer in {path} has no chat template; save one with the model "
                "(tokenizer.chat_template) so chat messages can be formatted"
            )
        engine = GenerationEngine(model, tokenizer, max_batch_size=max_batch_size)
        _ENGINES[key] = engine
        return engine


def _role(message: BaseMessage) -> str:
    if isinstance(message, SystemMessage):
        return "system"
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, ToolMessage):
        return "tool"
    if isinstance(message, ChatMessage):
        return message.role
    raise ConfigError(f"unsupported message type {type(message).__name__}; pass system, human, "
                      "AI, tool or chat messages")




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
    max_batch_size: int = Field(default=8, ge=1)

    _engine: GenerationEngine | None = PrivateAttr(default=None)
    _grammars: dict[str, JsonGrammar] = PrivateAttr(default_factory=dict)

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
        """The shared decoding engine (loads the weights on first use)."""
        if self._engine is None:
            self._engine = loaded_engine(self.model_path, dtype=self.dtype, device=self.device,
                                         max_batch_size=self.max_batch_size)
        return self._engine

    # -- prompt and request building ----------------------------------------
    def prompt_ids(self, messages: Sequence[BaseMessage]) -> list[int]:
        """Token ids of the chat-templated prompt, ending with the assistant turn."""
        chat = [{"role": _role(m), "content": message_text(m)} for m in messages]
        if not chat:
            raise ConfigError("cannot generate from an empty list of messages; pass at least one")
        text = self.engine.tokenizer.apply_chat_template(chat, tokenize=False,
                                                         add_generation_prompt=True)
        return self.engine.tokenizer(text, add_special_tokens=False)["input_ids"]

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

    def _grammar(self, schema: dict[str, Any]) -> JsonGrammar:
        key = json.dumps(schema, sort_keys=True)
        grammar = self._grammars.get(key)
        if grammar is None:
            grammar = JsonGrammar(schema, self.engine.tokenizer, self.engine.vocab_size)
            self._grammars[key] = grammar
        return grammar

    def _request(self, messages: list[BaseMessage], stop: list[str] | None,
                 kwargs: dict[str, Any], on_text: Any = None) -> GenerationRequest:
        schema = kwargs.get("json_schema")
        grammar = self._grammar(schema) if schema is not None else None
        params = self._params(stop, kwargs, structured=grammar is not None)
        return GenerationRequest(self.prompt_ids(messages), params, grammar, on_text)

    @staticmethod
    def _message(output: GenerationOutput, model_id: str, seconds: float) -> AIMessage:
        usage = {"input_tokens": output.prompt_tokens, "output_tokens": output.completion_tokens,
                 "total_tokens": output.prompt_tokens + output.completion_tokens}
        meta = {"model_name": model_id, "finish_reason": output.finish_reason,
                "latency_s": round(seconds, 4)}
        if output.grammar_complete is not None:
            meta["grammar_complete"] = output.grammar_complete
        return AIMessage(content=output.text, usage_metadata=usage, response_metadata=meta)

    # -- LangChain hooks ------------------------------------------------------
    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        started = time.perf_counter()
        request = self._request(messages, stop, kwargs)
        output = self.engine.submit(request).result()
        message = self._message(output, self.model_id, time.perf_counter() - started)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                run_manager: CallbackManagerForLLMRun | None = None,
                **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        started = time.perf_counter()
        deltas: queue.Queue[str] = queue.Queue()
        request = self._request(messages, stop, kwargs, on_text=deltas.put)
        future = self.engine.submit(request)
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

    def with_structured_output(
        self, schema: type[BaseModel] | dict[str, Any], *, include_raw: bool = False,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, Any]:
        """Schema-valid answers by grammar-constrained decoding.

        ``schema`` is a pydantic model class (answers are instances of it) or a
        JSON schema dict (answers are dicts).
        """
        json_schema = constrained_json_schema(schema)
        self._grammar(json_schema)  # compile now: a bad schema fails here, not mid-run
        bound = self.bind(json_schema=json_schema,
                          ls_structured_output_format={"kwargs": {"method": "json_schema"},
                                                       "schema": json_schema})
        return structured_runnable(bound, schema, self.model_id, include_raw=include_raw)
