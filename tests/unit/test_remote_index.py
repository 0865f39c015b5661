"""The ``memory.search`` wire contract between RemoteSearchIndex and the index owner's task."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from shared.language.sparse import sparse_query
from shared.ports import IndexHit, SparseTerms
from shared.queues import Queue, SearchMode, TaskName
from workers.index.remote import RemoteSearchIndex


class _Result:
    def __init__(self, rows: list[dict[str, Any]]):
        self._rows = rows
        self.forgotten = False

    def get(self, timeout: float, propagate: bool) -> list[dict[str, Any]]:
        return self._rows

    def forget(self) -> None:
        self.forgotten = True


class _App:
    """Records what would be sent; answers with canned rows."""

    def __init__(self, rows: list[dict[str, Any]]):
        self.sent: list[tuple[str, list[Any], str]] = []
        self._rows = rows

    def send_task(self, name: str, args: Sequence[Any], queue: str, expires: float) -> _Result:
        self.sent.append((name, json.loads(json.dumps(list(args))), queue))  # as it crosses the broker
        return _Result(self._rows)


ROW = {"id": "00000000-0000-0000-0000-000000000001", "score": 1.5, "payload": {"status": "active"}}


def test_vector_search_sends_no_mode() -> None:
    app = _App([ROW])

    hits = RemoteSearchIndex(app).search("t1", "alice", [0.5, 1], 3)  # type: ignore[arg-type]

    assert app.sent == [
        (TaskName.SEARCH.value, ["t1", "alice", [0.5, 1.0], 3, ["active"]], Queue.SEARCH.value)
    ]
    assert hits == [IndexHit(ROW["id"], 1.5, {"status": "active"})]  # type: ignore[arg-type]


def test_keyword_search_sends_terms_and_mode() -> None:
    app = _App([ROW])
    terms = SparseTerms((7, 3), (1.0, 2.0))

    hits = RemoteSearchIndex(app).search_keywords("t1", "alice", terms, 3, ("active", "superseded"))  # type: ignore[arg-type]

    assert app.sent == [
        (
            TaskName.SEARCH.value,
            ["t1", "alice", [[3, 7], [2.0, 1.0]], 3, ["active", "superseded"], SearchMode.KEYWORDS.value],
            Queue.SEARCH.value,
        )
    ]
    assert [h.id for h in hits] == [ROW["id"]]


def test_keyword_search_without_terms_sends_nothing() -> None:
    app = _App([ROW])
    remote = RemoteSearchIndex(app)  # type: ignore[arg-type]

    assert remote.search_keywords("t1", "alice", sparse_query("the 的"), 3) == []
    assert remote.search_keywords("t1", "alice", sparse_query("coffee"), 0) == []
    with pytest.raises(ValueError, match="user_id"):
        remote.search_keywords("t1", "", sparse_query("coffee"), 3)
    assert app.sent == []


def test_the_owners_own_unavailable_index_is_reported_as_it_said_not_as_a_timeout() -> None:
    from shared.ports import IndexUnavailable

    class Refusing(_Result):
        def get(self, timeout: float, propagate: bool) -> list[dict[str, Any]]:
            raise IndexUnavailable("vector index /data/qdrant is incomplete: its files vanished")

    class App(_App):
        def send_task(self, name: str, args: Sequence[Any], queue: str, expires: float) -> _Result:
            return Refusing([])

    with pytest.raises(IndexUnavailable) as excinfo:
        RemoteSearchIndex(App([])).search("t1", "alice", [0.5, 1], 3)  # type: ignore[arg-type]
    assert str(excinfo.value) == "vector index /data/qdrant is incomplete: its files vanished"


def test_a_batch_is_one_message_with_every_search_and_answers_each() -> None:
    from shared.ports import IndexUnavailable, Search

    app = _App([{"hits": [ROW]}, {"error": "turn index is being rebuilt"}, {"hits": []}])
    searches = [
        Search("memories", [0.5, 1], None, 7, ("active", "archived")),
        Search("turns", [0.25, 0], None, 7),
        Search("turns", None, SparseTerms((9, 2), (1.0, 0.5)), 7),
    ]

    answers = RemoteSearchIndex(app).search_batch("t1", "alice", searches)  # type: ignore[arg-type]

    assert app.sent == [
        (
            TaskName.SEARCH_BATCH.value,
            [
                "t1",
                "alice",
                [
                    {"kind": "memories", "mode": "vector", "query": [0.5, 1.0], "limit": 7,
                     "statuses": ["active", "archived"]},
                    {"kind": "turns", "mode": "vector", "query": [0.25, 0.0], "limit": 7,
                     "statuses": ["active"]},
                    {"kind": "turns", "mode": "keywords", "query": [[2, 9], [0.5, 1.0]], "limit": 7,
                     "statuses": ["active"]},
                ],
            ],
            Queue.SEARCH.value,
        )
    ]  # fmt: skip
    assert answers[0] == [IndexHit(ROW["id"], 1.5, {"status": "active"})]  # type: ignore[arg-type]
    assert isinstance(answers[1], IndexUnavailable) and str(answers[1]) == "turn index is being rebuilt"
    assert answers[2] == []
    with pytest.raises(ValueError, match="user_id"):
        RemoteSearchIndex(app).search_batch("t1", "", searches)  # type: ignore[arg-type]
