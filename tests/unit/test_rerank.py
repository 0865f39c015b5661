"""shared.recall.rerank.rerank_order with fake rerankers: reorder the top N, stable ties, failures kept out
of recall."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from shared.ports import Reranker
from shared.recall.rerank import DEFAULT_TOP_N, RerankResult, rerank_order


class ScoreByWord:
    """Scores a document by the number of times it contains the query; records what it saw."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        self.calls.append((query, list(documents)))
        return [float(doc.count(query)) for doc in documents]


class Fixed:
    def __init__(self, answer: object) -> None:
        self.answer = answer

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        return self.answer  # type: ignore[return-value]


class Broken:
    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        raise ConnectionError("rerank endpoint down")


ITEMS = [("a", "x"), ("b", "port port"), ("c", "port"), ("d", "nothing")]


def test_it_satisfies_the_port() -> None:
    reranker: Reranker = ScoreByWord()
    assert reranker.rerank("q", ["q"]) == [1.0]


def test_reorders_by_score_and_reports_each_score() -> None:
    result = rerank_order("port", ITEMS, ScoreByWord())
    assert result.order == ["b", "c", "a", "d"]
    assert result.scores == {"a": 0.0, "b": 2.0, "c": 1.0, "d": 0.0}
    assert result.note is None
    assert result.applied


def test_ties_keep_the_previous_order() -> None:
    items = [(str(i), "same") for i in range(10)]
    assert rerank_order("q", items, Fixed([0.5] * 10)).order == [str(i) for i in range(10)]
    # b and c tie at 1.0, a and d at 0.0: each pair keeps its previous order
    result = rerank_order("q", ITEMS, Fixed([0.0, 1.0, 1.0, 0.0]))
    assert result.order == ["b", "c", "a", "d"]


def test_only_the_top_n_are_scored_and_the_rest_follow_unchanged() -> None:
    reranker = ScoreByWord()
    items = [("a", "x"), ("b", "port"), ("c", "port port"), ("d", "port port port")]
    result = rerank_order("port", items, reranker, top_n=2)
    assert reranker.calls == [("port", ["x", "port"])]
    assert result.order == ["b", "a", "c", "d"]
    assert set(result.scores) == {"a", "b"}


def test_the_default_top_n_is_20() -> None:
    reranker = ScoreByWord()
    items = [(str(i), "port") for i in range(30)]
    result = rerank_order("port", items, reranker)
    assert DEFAULT_TOP_N == 20
    assert len(reranker.calls[0][1]) == 20
    assert result.order == [str(i) for i in range(30)]


def test_off_or_empty_calls_nothing() -> None:
    assert rerank_order("q", ITEMS, None) == RerankResult(["a", "b", "c", "d"])
    reranker = ScoreByWord()
    assert rerank_order("q", [], reranker) == RerankResult([])
    assert reranker.calls == []


def test_a_failing_reranker_keeps_the_order_and_says_why() -> None:
    result = rerank_order("port", ITEMS, Broken())
    assert result.order == ["a", "b", "c", "d"]
    assert result.scores == {}
    assert not result.applied
    assert result.note is not None
    assert "reranker failed" in result.note and "rerank endpoint down" in result.note


@pytest.mark.parametrize(
    ("answer", "mentions"),
    [
        ([1.0, 2.0], "2 scores for 4 documents"),
        ([1.0, 2.0, float("nan"), 0.0], "score 2"),
        ([1.0, "high", 0.0, 0.0], "score 1"),
        ([1.0, True, 0.0, 0.0], "score 1"),
        (None, "expected a list of scores"),
    ],
)
def test_an_unusable_answer_keeps_the_order(answer: object, mentions: str) -> None:
    result = rerank_order("port", ITEMS, Fixed(answer))
    assert result.order == ["a", "b", "c", "d"]
    assert result.scores == {}
    assert result.note is not None and mentions in result.note


def test_caller_errors_raise() -> None:
    with pytest.raises(ValueError, match="top_n"):
        rerank_order("q", ITEMS, ScoreByWord(), top_n=0)
    with pytest.raises(ValueError, match="unique"):
        rerank_order("q", [("a", "x"), ("a", "y")], ScoreByWord())


def test_same_input_same_output() -> None:
    first = rerank_order("port", ITEMS, ScoreByWord())
    assert all(rerank_order("port", ITEMS, ScoreByWord()) == first for _ in range(5))
