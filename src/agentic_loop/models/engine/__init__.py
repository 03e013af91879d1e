"""The in-process generation engine behind ``load_chat_model("local")``: batched decoding on CPU.

Why a package: the engine is the fastest-moving part of the models layer
and has several jobs, one module each. :mod:`.engine` runs one decode loop
over many requests (continuous batching); :mod:`.requests` holds the
request types and a row's decoding state; :mod:`.join_policy` decides when
requests that arrive mid-decode join; :mod:`.decode_batch` keeps the batch's
KV cache (left padding, spare room); :mod:`.prefix_memory` reuses prompt
prefixes; :mod:`.attention` registers grouped-query SDPA;
:mod:`.token_sampling` samples (temperature, nucleus); :mod:`.grammar`
masks tokens so structured output is always schema-valid.

Example:
    >>> from agentic_loop.models.engine.join_policy import JoinPolicy
    >>> JoinPolicy(min_rows=2, wait_steps=3).due(queued=2, free=8, running=4)
    True
"""
