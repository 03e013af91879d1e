"""Embedders (without loading the real model) and the FAISS index wrapper."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agentic_loop.memory import Embedder, EmbedderError, HashingEmbedder
from agentic_loop.memory.collection.index import IndexFileError, VectorIndex
from agentic_loop.memory.collection.layout import namespace_dir, namespace_of
from agentic_loop.memory.embeddings import DEFAULT_MODEL_NAME, TextEmbedder, default_model_dir


def test_hashing_embedder_is_normalized_deterministic_and_lexical() -> None:
    emb = HashingEmbedder(dim=64)
    assert isinstance(emb, TextEmbedder)
    vectors = emb.embed(
        ["fresh bread every morning", "bread fresh every morning", "court appeal", ""]
    )
    assert vectors.shape == (4, 64) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors[:3], axis=1), 1.0) and not vectors[3].any()
    assert vectors[0] @ vectors[1] > 0.99 and vectors[0] @ vectors[2] < 0.5
    assert emb.embed([]).shape == (0, 64)
    # the same vector in another process (no salted hash())
    code = (
        "from agentic_loop.memory import HashingEmbedder; "
        "print(HashingEmbedder(64).embed(['court appeal'])[0].tolist())"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert np.allclose(eval(other.stdout), vectors[2])


def test_embedders_reject_bad_input() -> None:
    emb = HashingEmbedder(dim=64)
    with pytest.raises(TypeError, match="wrap a single text in a list"):
        emb.embed("one text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="text 1 to embed is int"):
        emb.embed(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="dim >= 8"):
        HashingEmbedder(dim=2)


def test_embedder_errors_name_the_missing_or_wrong_folder(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match=f"folder not found: {tmp_path / 'nope'}"):
        Embedder(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(EmbedderError, match="is not a sentence-transformers model folder"):
        Embedder(tmp_path / "empty")
    with pytest.raises(ValueError, match="batch_size"):
        Embedder(batch_size=0)


def test_default_embedder_points_into_the_installed_package_without_loading() -> None:
    emb = Embedder()
    assert emb.name == DEFAULT_MODEL_NAME == Embedder("all-MiniLM-L6-v2").name
    assert emb.model_dir == default_model_dir().resolve()
    assert (emb.model_dir / "model.safetensors").is_file()
    assert Embedder(emb.model_dir).name == DEFAULT_MODEL_NAME
    assert Embedder(emb.model_dir, name="mine").name == "mine"


def unit(rows: int, dim: int = 16, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_index_is_exact_below_the_limit_and_hnsw_above_with_the_same_answers() -> None:
    data = unit(300)
    flat = VectorIndex(16, exact_limit=1000)
    flat.add(data)
    growing = VectorIndex(16, exact_limit=100)
    growing.add(data[:100])
    assert growing.kind == "flat"
    growing.add(data[100:])
    assert (flat.kind, growing.kind, len(growing)) == ("flat", "hnsw", 300)
    assert np.allclose(growing.reconstruct([0, 150, 299]), data[[0, 150, 299]])
    queries = unit(50, seed=1)
    recall = np.mean(
        [len(set(flat.search(q, 10)[1]) & set(growing.search(q, 10)[1])) / 10 for q in queries]
    )
    assert recall >= 0.95
    sims, rows = flat.search(queries[0], 1000)
    assert len(rows) == 300 and np.all(np.diff(sims) <= 1e-6)


def test_index_save_load_and_bad_files(tmp_path: Path) -> None:
    index = VectorIndex(16, exact_limit=50)
    index.add(unit(80))
    index.save(tmp_path / "i.faiss")
    loaded = VectorIndex(16, exact_limit=50)
    loaded.load(tmp_path / "i.faiss")
    assert (loaded.kind, len(loaded)) == ("hnsw", 80)
    exact = VectorIndex(16, exact_limit=1000)  # a raised limit turns a saved HNSW back into exact
    exact.load(tmp_path / "i.faiss")
    assert exact.kind == "flat" and len(exact) == 80
    with pytest.raises(IndexFileError, match="16-dimensional.*expected 8"):
        VectorIndex(8).load(tmp_path / "i.faiss")
    (tmp_path / "bad.faiss").write_bytes(b"\x00" * 10)
    with pytest.raises(IndexFileError, match="unreadable"):
        VectorIndex(16).load(tmp_path / "bad.faiss")
    with pytest.raises(IndexFileError, match="does not exist"):
        VectorIndex(16).load(tmp_path / "missing.faiss")
    with pytest.raises(ValueError, match=r"shape \(n, 16\)"):
        index.add(unit(3, dim=8))


def test_namespace_folders_round_trip_any_label(tmp_path: Path) -> None:
    labels = ("users", "ana@example/com", "with space", "ünï")
    folder = namespace_dir(tmp_path, labels)
    assert folder.parent.parent.parent.parent == tmp_path
    assert namespace_of(tmp_path, folder) == labels
    with pytest.raises(ValueError, match="reserved"):
        namespace_dir(tmp_path, ("..",))
