from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from shared.ports import Embedder
from shared.settings import Settings
from workers.endpoints.embedders import build_embedder
from workers.endpoints.embedders.hashing import HashingEmbedder, tokens
from workers.endpoints.embedders.query_cache import QueryCache
from workers.endpoints.embedders.window import WindowCut

REPO = Path(__file__).resolve().parents[2]


def cos(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def norm(v: Sequence[float]) -> float:
    return math.sqrt(sum(x * x for x in v))


def test_satisfies_the_embedder_port() -> None:
    embedder: Embedder = HashingEmbedder()
    assert embedder.dim == 384
    assert embedder.model_name == "hash-v1-384"
    assert HashingEmbedder(dim=64).model_name == "hash-v1-64"


def test_deterministic_across_instances_and_calls() -> None:
    a, b = HashingEmbedder(), HashingEmbedder()
    texts = ["the user likes green tea", "用户喜欢喝绿茶", ""]
    assert a.embed_passages(texts) == b.embed_passages(texts)
    assert a.embed_query(texts[0]) == a.embed_passages(texts[:1])[0]


def test_pinned_vector_so_a_changed_algorithm_is_noticed() -> None:
    # Stored vectors are only comparable if hash-v1 never changes; a change needs a new name.
    v = HashingEmbedder().embed_query("Hello world 42")
    nonzero = {i: round(x, 4) for i, x in enumerate(v) if x}
    assert nonzero == {66: -0.5774, 110: -0.5774, 383: -0.5774}


def test_stable_across_processes_with_different_hash_seeds() -> None:
    code = (
        "from workers.endpoints.embedders.hashing import HashingEmbedder as H; "
        "print(H(32).embed_query('tea 绿茶 42'))"
    )
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        outputs.add(done.stdout)
    assert len(outputs) == 1


@pytest.mark.parametrize(
    "text", ["one", "The user likes green tea.", "我喜欢喝绿茶", "mixed 中文 and English 2024"]
)
def test_unit_length(text: str) -> None:
    for dim in (8, 384):
        v = HashingEmbedder(dim=dim).embed_query(text)
        assert len(v) == dim
        assert norm(v) == pytest.approx(1.0)


@pytest.mark.parametrize("text", ["", "   ", "!!! ... ???", "😀"])
def test_featureless_text_gives_the_fixed_unit_vector(text: str) -> None:
    v = HashingEmbedder(dim=16).embed_query(text)
    assert v == [1.0] + [0.0] * 15


def test_shared_words_score_higher_than_unrelated_text() -> None:
    e = HashingEmbedder()
    q = e.embed_query("What tea does the user like?")
    related, unrelated = e.embed_passages(["The user likes green tea.", "Quarterly report due on Friday."])
    assert cos(q, related) > 0.3
    assert cos(q, unrelated) < 0.1
    assert cos(q, related) > cos(q, unrelated)


def test_case_does_not_matter() -> None:
    e = HashingEmbedder()
    assert e.embed_query("Green TEA") == e.embed_query("green tea")


def test_chinese_text_uses_character_bigrams() -> None:
    assert tokens("我喜欢绿茶") == ["c:我喜", "c:喜欢", "c:欢绿", "c:绿茶"]
    assert tokens("猫") == ["c:猫"]
    assert tokens("I like 绿茶 2024") == ["w:i", "w:like", "w:2024", "c:绿茶"]
    e = HashingEmbedder()
    q = e.embed_query("我喜欢喝绿茶")
    related, unrelated = e.embed_passages(["用户喜欢喝绿茶", "明天上海会下雨"])
    assert cos(q, related) > 0.5
    assert cos(q, unrelated) < 0.1


def test_build_embedder_hash_uses_configured_dim() -> None:
    built = build_embedder(Settings(embedder="hash", embedding_dim=64))
    assert isinstance(built, QueryCache)
    cut = built.inner
    assert isinstance(cut, WindowCut)
    embedder = cut.inner
    assert isinstance(embedder, HashingEmbedder)
    assert embedder.dim == 64
    assert embedder.model_name == "hash-v1-64"


def test_rejects_tiny_dim() -> None:
    with pytest.raises(ValueError):
        HashingEmbedder(dim=1)
