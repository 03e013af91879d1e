"""A model directory's tokenizer and weights: a full checkpoint, or a LoRA adapter on its base.

Why an adapter is merged here, in memory: unmerged, every adapted layer runs
two extra small matmuls at each decoding step; merged (``W + B @ A * scale``),
the adapter decodes at its base model's speed through the same engine, with
no PEFT code on the hot path. The adapter on disk is left as it is, so vLLM
can still serve it by name and swap it live (``agentic-loop serve``). This is
what lets an unmerged ``--lora --no-merge`` model run in-process: the eval
gate, ``load_chat_model("local:<adapter dir>")`` and ``"registry:<dir>"``.

The adapter's base comes from its ``adapter_config.json``
(``base_model_name_or_path``, read by
:func:`~agentic_loop.models.model_dirs.adapter_base`); the tokenizer is the
adapter's own when it saved one (training does, with the chat template),
else the base's.

Example (what a folder that is neither gets):
    >>> import tempfile
    >>> load_causal_lm(tempfile.mkdtemp(), dtype="float32")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.models.errors.ModelDirError: ... has neither config.json nor adapter_config.json...
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from agentic_loop.models.errors import ModelLoadError
from agentic_loop.models.model_dirs import (
    adapter_base,
    is_adapter_dir,
    local_model_dir,
    resolve_model_dir,
)
from agentic_loop.models.spec import ModelSpec

__all__ = ["load_causal_lm"]


def load_causal_lm(model_dir: str | os.PathLike[str], *,
                   dtype: torch.dtype | str) -> tuple[Any, Any]:
    """``(tokenizer, model)`` of ``model_dir``, in eval mode on the CPU; an adapter merged.

    ``dtype`` is a ``torch.dtype`` or its name (``"float32"``, ``"bfloat16"``).
    Every failure is a :class:`ModelLoadError` naming the folder.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    # the one check of a model folder (full model or adapter) that every loader uses
    path = local_model_dir(ModelSpec("local", str(Path(model_dir).expanduser())),
                           source=os.fspath(model_dir))
    torch_dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    adapter = is_adapter_dir(path)
    base = adapter_base(path) if adapter else None
    peft = _peft(path) if adapter else None  # missing PEFT: its own error, not a bad folder
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a 1-second load needs no progress bar
    try:
        # the base resolves as `serve` resolves it: a directory, or a spec such as "local"
        weights = resolve_model_dir(base) if base is not None else path
        tokenizer_dir = path if (path / "tokenizer_config.json").is_file() else weights
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        model = AutoModelForCausalLM.from_pretrained(weights, dtype=torch_dtype)
        if peft is not None:
            model = peft.from_pretrained(model, path).merge_and_unload()
    except Exception as exc:
        what = f"the LoRA adapter in {path} on its base {base}" if adapter else \
            f"the model in {path}"
        raise ModelLoadError(
            f"could not load {what}: {exc}; check that the directory holds a complete "
            "Hugging Face causal-LM checkpoint") from exc
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    return tokenizer, model.eval()


def _peft(adapter_dir: Path) -> Any:
    """PEFT's ``PeftModel``, or a :class:`ModelLoadError` saying how to install it."""
    try:
        from peft import PeftModel
    except ImportError as exc:
        raise ModelLoadError(
            f"{adapter_dir} is a LoRA adapter, and loading one needs PEFT ({exc}); install "
            "it with `pip install 'agentic-loop[train]'`, or merge the adapter when training "
            "(the default)") from exc
    return PeftModel
