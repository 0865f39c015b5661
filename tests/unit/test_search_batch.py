"""One round trip for every search of a recall (shared/recall/search.py, shared.ports.BatchSearch).

When the indexes are searched through another process (the embedded index's owner), recall sends
its dense and keyword searches of both indexes in one batch. The batch must find what the searches
one by one find, and a search the owner could not run must cost only its own step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shared.ports import IndexHit, IndexUnavailable, Search, SparseTerms
from shared.queues import IndexKind
from shared.recall.cascade import recall
from shared.recall.request import RecallRequest
from tests.support.pipeline import ASKED, CHAT, TurnHarness, turn


class Owner:
    """The memory index as another process serves it: searches one by one still work; batches
    are answered from both indexes, like ``memory.search_batch``; ``refuse`` names searches
    (kind, "vector" | "keywords") the owner cannot run."""

    def __init__(self, indexes: dict[str, Any], refuse: Sequence[tuple[str, str]] = ()) -> None:
        self._indexes = indexes
        self._refuse = set(refuse)
        self.batches: list[list[Search]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._indexes[IndexKind.MEMORIES.value], name)

    def search_batch(
        self, tenant_id: str, user_id: str, searches: Sequence[Search]
    ) -> list[list[IndexHit] | IndexUnavailable]:
        self.batches.append(list(searches))
        out: list[list[IndexHit] | IndexUnavailable] = []
        for s in searches:
            index = self._indexes[s.kind]
            mode = "vector" if s.vector is not None else "keywords"
            if (s.kind, mode) in self._refuse:
                out.append(IndexUnavailable(f"{s.kind} {mode} search refused"))
            elif s.vector is not None:
                out.append(index.search(tenant_id, user_id, s.vector, s.limit, s.statuses))
            else:
                assert isinstance(s.terms, SparseTerms)
                out.append(index.search_keywords(tenant_id, user_id, s.terms, s.limit, s.statuses))
        return out


def _harness() -> TurnHarness:
    h = TurnHarness()
    h.drain(turn(1, CHAT))
    h.drain(turn(2, "我们昨天在河边看到一只红狐狸，老磨坊旁边"))
    h.drain(turn(1, "生产环境部署端口是8443，数据库在内网", session="s2"))
    h.drain(turn(2, "I switched the prod deployment port to 9443 yesterday", session="s2"))
    return h


def _recall(h: TurnHarness, index: Any, query: str) -> Any:
    with h.store.uow() as uow:
        return recall(
            uow,
            RecallRequest("default", "u1", query, now=ASKED, k=5),
            embedder=h.embedder,
            index=index,
            working_memory=None,
            turn_index=h.turns,
        )


def _answer(out: Any) -> list[tuple[str, float, tuple[str, ...]]]:
    return [(i.id, round(i.score, 9), tuple(i.explanation["paths"])) for i in out.items]


def test_one_batch_finds_what_the_searches_one_by_one_find() -> None:
    h = _harness()
    owner = Owner({"memories": h.index, "turns": h.turns})
    for query in ("where did we see the red fox", "部署端口是多少", "prod deployment port"):
        plain = _recall(h, h.index, query)
        batched = _recall(h, owner, query)
        assert _answer(batched) == _answer(plain) and _answer(plain), query
        assert batched.trace["candidates"] == plain.trace["candidates"]
        assert "search_ms" in batched.trace["timings_ms"] and "search_ms" not in plain.trace["timings_ms"]
    # One round trip per recall, carrying the dense and keyword searches of both indexes.
    assert len(owner.batches) == 3
    for batch in owner.batches:
        shape = [(s.kind, s.vector is not None, s.statuses) for s in batch]
        assert shape == [
            ("memories", True, ("active",)),
            ("memories", False, ("active",)),
            ("turns", True, ("active",)),
            ("turns", False, ("active",)),
        ]


def test_a_search_the_owner_cannot_run_costs_only_its_step() -> None:
    h = _harness()
    plain = _recall(h, h.index, "where did we see the red fox")
    assert any(p.startswith("turn_") for i in plain.items for p in i.explanation["paths"])

    refused = Owner({"memories": h.index, "turns": h.turns}, refuse=[("turns", "keywords")])
    out = _recall(h, refused, "where did we see the red fox")
    # The log's two searches are one step: both count for nothing, and the note says why.
    assert "conversation-log search unavailable: turns keywords search refused" in out.trace["notes"]
    assert out.trace["candidates"]["turn_vector"] == out.trace["candidates"]["turn_keyword"] == 0
    assert not any(p.startswith("turn_") for i in out.items for p in i.explanation["paths"])
    # The memory searches of the same batch still count.
    assert out.trace["candidates"]["vector"] == plain.trace["candidates"]["vector"] > 0


class Unreachable(Owner):
    def search_batch(self, tenant_id: str, user_id: str, searches: Sequence[Search]) -> Any:
        raise IndexUnavailable("the index worker did not answer a search in 10 s")


def test_an_owner_that_does_not_answer_leaves_the_cue_stage_and_says_so_for_every_step() -> None:
    h = _harness()
    out = _recall(h, Unreachable({"memories": h.index, "turns": h.turns}), "部署端口是多少")
    notes = out.trace["notes"]
    for label in ("vector search", "keyword search", "conversation-log search"):
        assert f"{label} unavailable: the index worker did not answer a search in 10 s" in notes
    assert out.items and all(
        set(i.explanation["paths"]) <= {"cue", "working", "time", "link", "recent"} for i in out.items
    )


class HereForNow(Owner):
    """An index still searched in this process answers None: recall searches one by one."""

    def search_batch(self, tenant_id: str, user_id: str, searches: Sequence[Search]) -> None:
        self.batches.append(list(searches))
        return None


def test_an_index_searched_here_is_searched_one_by_one() -> None:
    h = _harness()
    here = HereForNow({"memories": h.index, "turns": h.turns})
    out = _recall(h, here, "部署端口是多少")
    assert _answer(out) == _answer(_recall(h, h.index, "部署端口是多少"))
    assert len(here.batches) == 1 and "vector_ms" in out.trace["timings_ms"]
