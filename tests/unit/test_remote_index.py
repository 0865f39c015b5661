"""The ``memory.search`` wire contract between RemoteSearchIndex and the index owner's task."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from shared.ports import IndexHit, SparseTerms
from shared.queues import Queue, SearchMode, TaskName
from shared.recall.sparse import sparse_query
from tests.support.processes import python_json
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


# The real task, fed what RemoteSearchIndex sends (after a JSON round trip), against the fake index.
# In a subprocess: importing workers.tasks.stages configures Celery from the environment, which must not
# leak into the other tests of this session.
_ROUND_TRIP = """
import json
from types import SimpleNamespace
import workers.tasks.stages as tasks
from shared.ports import IndexPoint
from shared.recall.sparse import sparse_document, sparse_query
from tests.support.fake_index import FakeVectorIndex
from workers.index.remote import RemoteSearchIndex

index = FakeVectorIndex()
index.ensure(2, "m")
index.upsert([
    IndexPoint("00000000-0000-0000-0000-000000000001", "t1", "alice", [1.0, 0.0], {"status": "active"},
               sparse=sparse_document("我喜欢喝咖啡")),
    IndexPoint("00000000-0000-0000-0000-000000000002", "t1", "alice", [0.0, 1.0], {"status": "active"},
               sparse=sparse_document("coffee")),
])
tasks.container = lambda: SimpleNamespace(index=lambda kind: index)

class Result:
    def __init__(self, rows): self.rows = rows
    def get(self, timeout, propagate): return self.rows
    def forget(self): pass

class App:
    def send_task(self, name, args, queue, expires):
        return Result(tasks.search.run(*json.loads(json.dumps(args))))

remote = RemoteSearchIndex(App())
out = {
    "keywords": [h.id for h in remote.search_keywords("t1", "alice", sparse_query("咖啡"), 5)],
    "vector": [h.id for h in remote.search("t1", "alice", [0.0, 1.0], 5)],
    "other_user": [h.id for h in remote.search_keywords("t1", "bob", sparse_query("咖啡"), 5)],
}
try:
    tasks.search.run("t1", "alice", [1.0, 0.0], 5, ["active"], "fuzzy")
except ValueError as exc:
    out["bad_mode"] = str(exc)
print(json.dumps(out))
"""


def test_round_trip_through_the_search_task() -> None:
    # The broker URL is never connected to: the task runs in-process after a JSON round trip.
    out = python_json(_ROUND_TRIP, timeout=120, CUEMEM_BROKER_URL="redis://127.0.0.1:1/0")

    assert out["keywords"] == ["00000000-0000-0000-0000-000000000001"]
    assert out["vector"][0] == "00000000-0000-0000-0000-000000000002"
    assert out["other_user"] == []
    assert "unknown search mode 'fuzzy'" in out["bad_mode"]


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
