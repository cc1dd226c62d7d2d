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
    first = OnnxMiniLM(onnx_model_path(), store=VectorStore(tmp_path, OnnxMiniLM.name))
    vectors = first.embed(texts)
    second = OnnxMiniLM(onnx_model_path(), store=VectorStore(tmp_path, OnnxMiniLM.name))
    monkeypatch.setattr(second, "_run", lambda batch: pytest.fail(f"re-embedded {batch}"))
    assert np.allclose(second.embed(texts), vectors)


@needs_model
def test_single_queries_are_not_written_to_disk(tmp_path):
    embedder = OnnxMiniLM(onnx_model_path(), store=VectorStore(tmp_path, OnnxMiniLM.name))
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
