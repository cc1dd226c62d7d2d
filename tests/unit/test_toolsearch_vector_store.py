"""Tool vectors kept on disk by the hash of their text: a new process indexes a known tool list
without embedding it again, and a broken or missing cache only costs a re-embedding."""

import numpy as np
import pytest

from stack.toolsearch.embedding import PERSIST_BATCH, OnnxMiniLM, VectorStore, onnx_model_path

needs_model = pytest.mark.skipif(onnx_model_path() is None, reason="the embed extra is missing")


def test_store_round_trip_and_a_damaged_file_reads_as_empty(tmp_path):
    store = VectorStore(tmp_path, "m")
    store.add({"a": np.ones(3, dtype=np.float32), "b": np.zeros(3, dtype=np.float32)})
    again = VectorStore(tmp_path, "m")
    assert np.array_equal(again.get("a"), np.ones(3)) and again.get("c") is None
    (tmp_path / "m.keys").write_bytes(b"short")
    assert VectorStore(tmp_path, "m").get("a") is None


@needs_model
def test_a_new_embedder_reads_a_catalog_batch_from_disk(tmp_path, monkeypatch):
    texts = [f"tool number {i}: does thing {i}" for i in range(PERSIST_BATCH)]
    first = OnnxMiniLM(onnx_model_path(), cache_folder=tmp_path)
    vectors = first.embed(texts)
    second = OnnxMiniLM(onnx_model_path(), cache_folder=tmp_path)
    monkeypatch.setattr(second, "_run", lambda batch: pytest.fail(f"re-embedded {batch}"))
    assert np.allclose(second.embed(texts), vectors)


@needs_model
def test_single_queries_are_not_written_to_disk(tmp_path):
    embedder = OnnxMiniLM(onnx_model_path(), cache_folder=tmp_path)
    embedder.embed(["send an email to bob"])
    assert not list(tmp_path.iterdir())


def test_store_keeps_the_newest_entries(tmp_path, monkeypatch):
    from stack.toolsearch import embedding

    monkeypatch.setattr(embedding, "_CACHE_SIZE", 2)
    store = VectorStore(tmp_path, "m")
    for text in ("a", "b", "c"):
        store.add({text: np.full(3, ord(text), dtype=np.float32)})
    again = VectorStore(tmp_path, "m")
    assert again.get("a") is None and again.get("c") is not None


@needs_model
def test_vectors_another_model_left_on_disk_are_not_read(tmp_path):
    texts = [f"tool number {i}: does thing {i}" for i in range(PERSIST_BATCH)]
    planted = {t: np.full(384, 0.05, dtype=np.float32) for t in texts}
    VectorStore(tmp_path, "all-MiniLM-L6-v2-int8-onnx").add(planted)  # the name an older lane used
    embedder = OnnxMiniLM(onnx_model_path(), cache_folder=tmp_path)
    vectors = embedder.embed(texts)
    assert embedder.name.startswith(f"{onnx_model_path().stem}-")
    assert not np.allclose(vectors[0], planted[texts[0]])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
