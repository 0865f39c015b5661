"""The owner fallback, written once (service/operations/index_followups.py): which failures send
the work to the index worker, and what is sent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from service.operations.index_followups import SENT, delete_points, here_or_at_owner, maintain_index
from shared.ports import IndexOwnedElsewhere, IndexPoint, IndexUnavailable
from shared.queues import IndexKind, TaskName
from shared.settings import Settings
from shared.storage import FollowUp
from tests.support.fake_index import FakeVectorIndex
from tests.support.fakes import FakeStore
from workers.bootstrap import build_container
from workers.endpoints.embedders.hashing import HashingEmbedder

POINT = "00000000-0000-0000-0000-000000000001"


def _raise(exc: Exception) -> Any:
    raise exc


@pytest.mark.parametrize(
    "refusal",
    [
        IndexOwnedElsewhere("vector index /data/qdrant is owned by another process (pid 7)"),
        IndexUnavailable("the embedded index is owned by the index worker; this process may only search it"),
        IndexUnavailable("vector index /data/qdrant lost its files during a write"),  # the CLI crashed here
    ],
)
def test_every_index_refusal_sends_the_work_to_the_owner(refusal: Exception) -> None:
    assert here_or_at_owner(lambda: _raise(refusal), lambda: "at the owner") == "at the owner"


def test_the_work_stays_here_when_the_index_takes_it() -> None:
    sent: list[str] = []
    assert here_or_at_owner(lambda: "here", lambda: sent.append("owner")) == "here"
    assert sent == []


def test_other_failures_are_not_hidden_behind_the_owner() -> None:
    sent: list[str] = []
    with pytest.raises(ValueError, match="bad vector"):
        here_or_at_owner(lambda: _raise(ValueError("bad vector")), lambda: sent.append("owner"))
    assert sent == []


class ReadOnlyIndex(FakeVectorIndex):
    """An index this process may only search (the API's, on the embedded default)."""

    def delete(self, tenant_id: str, user_id: str, ids: Any) -> None:
        raise IndexUnavailable(
            "the embedded index is owned by the index worker; this process may only search it"
        )


@dataclass
class Container:
    memories: FakeVectorIndex
    turns: FakeVectorIndex | None = None
    sent: list[FollowUp] = field(default_factory=list)

    def index(self, kind: IndexKind = IndexKind.MEMORIES) -> FakeVectorIndex | None:
        return self.turns if kind is IndexKind.TURNS else self.memories

    def dispatch(self, followups: list[FollowUp]) -> None:
        self.sent.extend(followups)


def test_points_are_deleted_here_when_this_process_may_write() -> None:
    index = FakeVectorIndex()
    index.ensure(2, "m")
    index.upsert([IndexPoint(POINT, "t", "u", [1.0, 0.0], {"status": "active"})])
    c = Container(index)
    assert delete_points(c, "t", "u", [POINT]) == "deleted"  # type: ignore[arg-type]
    assert index.ids("t", "u") == set() and c.sent == []


def test_points_of_a_read_only_index_become_a_task_for_the_owner() -> None:
    c = Container(FakeVectorIndex(), turns=ReadOnlyIndex())
    assert delete_points(c, "t", "u", [POINT], IndexKind.TURNS) == SENT  # type: ignore[arg-type]
    assert c.sent == [FollowUp(TaskName.DELETE_POINTS.value, ("t", "u", [POINT], IndexKind.TURNS.value))]


def test_nothing_to_delete_sends_nothing() -> None:
    c = Container(ReadOnlyIndex())
    assert delete_points(c, "t", "u", []) == "nothing to delete"  # type: ignore[arg-type]
    assert c.sent == []


def test_a_waited_for_rebuild_goes_to_the_owner_only_when_one_holds_the_index() -> None:
    """`cuemem reindex` waits for the owner's answer: an unreachable index is reported at once."""
    owner = lambda: "at the owner"  # noqa: E731
    held = IndexOwnedElsewhere("vector index /data/qdrant is owned by another process (pid 7)")
    assert here_or_at_owner(lambda: _raise(held), owner, falls_back=IndexOwnedElsewhere) == "at the owner"
    unreachable = IndexUnavailable("qdrant server at http://127.0.0.1:6333 cannot be reached")
    with pytest.raises(IndexUnavailable, match="cannot be reached"):
        here_or_at_owner(lambda: _raise(unreachable), owner, falls_back=IndexOwnedElsewhere)


class OptimizingIndex(FakeVectorIndex):
    """Counts optimize calls; reports that it changed something."""

    def __init__(self) -> None:
        super().__init__()
        self.optimized = 0

    def optimize(self) -> bool:
        self.optimized += 1
        return True


def test_cuemem_maintain_optimizes_both_graphs_even_when_the_first_changed() -> None:
    # An `or` that short-circuits after the memory index reported a change would skip the
    # conversation log's graph (the engine builds a graph only in optimize: see
    # tests/contract/test_edge_optimize.py).
    memories, turns = OptimizingIndex(), OptimizingIndex()
    settings = Settings(index_turns=True, broker_url=None, redis_url=None)
    c = build_container(
        settings, uow=FakeStore().uow, embedder=HashingEmbedder(dim=16), index=memories, turn_index=turns
    )
    _, optimized = maintain_index(c, [])
    assert optimized is True
    assert (memories.optimized, turns.optimized) == (1, 1)
