"""The per-process LRU of query vectors (workers/endpoints/embedders/query_cache.py)."""

from __future__ import annotations

from shared.settings import Settings
from tests.support.recording_embedder import RecordingEmbedder
from workers.endpoints.embedders import build_embedder
from workers.endpoints.embedders.query_cache import QueryCache


def test_a_repeated_query_is_embedded_once() -> None:
    inner = RecordingEmbedder()
    cache = QueryCache(inner, size=8)
    assert cache.embed_query("我不吃什么？") == [6.0, 0.0]
    assert cache.embed_query("我不吃什么？") == [6.0, 0.0]
    assert cache.embed_query("what do I eat") == [13.0, 0.0]
    assert inner.queries == ["我不吃什么？", "what do I eat"]
    assert cache.cache_info() == (1, 2, 2)


def test_the_oldest_query_leaves_when_full() -> None:
    inner = RecordingEmbedder()
    cache = QueryCache(inner, size=2)
    for text in ["a", "b", "a", "c", "b"]:  # "b" was the least recently used when "c" came
        cache.embed_query(text)
    assert inner.queries == ["a", "b", "c", "b"]


def test_a_caller_changing_its_vector_does_not_change_the_cache() -> None:
    cache = QueryCache(RecordingEmbedder(), size=2)
    first = cache.embed_query("abc")
    first[0] = 99.0
    assert cache.embed_query("abc") == [3.0, 0.0]


def test_passages_are_never_cached_and_the_port_passes_through() -> None:
    inner = RecordingEmbedder()
    cache = QueryCache(inner, size=2)
    cache.embed_passages(["x", "x"])
    cache.embed_passages(["x"])
    assert inner.passages == ["x", "x", "x"]
    assert (cache.model_name, cache.dim) == ("recording-v1", 2)


def test_settings_turn_it_on_by_default_and_off_with_zero() -> None:
    assert isinstance(build_embedder(Settings(embedder="hash", embedding_dim=64)), QueryCache)
    plain = build_embedder(Settings(embedder="hash", embedding_dim=64, query_embedding_cache=0))
    assert not isinstance(plain, QueryCache)
