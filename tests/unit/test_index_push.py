"""The index stage writes a batch's points together: one upsert (and flush) per index for every
user of the batch, each point in its own owner's scope, every row marked once.

An upsert of the embedded engine ends in a flush that costs about the same for 1 point as for
100; the stage used to upsert per user and index, so a batch of 20 users' turns flushed 40 times.
"""

from __future__ import annotations

from collections.abc import Sequence

from shared.indexing.collections import MEMORIES, TURNS
from shared.indexing.sync import push_unindexed, push_unindexed_users
from shared.ports import IndexPoint
from shared.queues import TaskName
from tests.support.fake_index import FakeVectorIndex
from tests.support.pipeline import TurnHarness, turn

# Owners whose ids could collide in a careless key: u1/u10, the same user id in two tenants.
OWNERS = [("t1", "u1"), ("t1", "u10"), ("t2", "u1"), ("t2", "u10")]
SAID = {
    ("t1", "u1"): "My sister Anna lives in Berlin and works as a doctor at the Charité.",
    ("t1", "u10"): "I am allergic to peanuts, my doctor told me to carry an epipen.",
    ("t2", "u1"): "I moved to Lisbon in March and I work as a nurse at the city hospital.",
    ("t2", "u10"): "My daughter Mia started school this September, she loves drawing horses.",
}


class CountingIndex(FakeVectorIndex):
    """The fake index, remembering each non-empty upsert's points' owners."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[list[tuple[str, str]]] = []

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        if points:
            self.writes.append([(p.tenant_id, p.user_id) for p in points])
        super().upsert(points)


def harness() -> TurnHarness:
    h = TurnHarness()
    h.index = CountingIndex()
    h.turns = CountingIndex()
    return h


def up_to_index(h: TurnHarness, message: dict) -> list[str]:
    """Run a turn through record … persist as the workers do; return the refs the index stage
    was sent, without running it."""
    queue = [(TaskName.RECORD.value, (message,))]
    refs: list[str] = []
    while queue:
        task, args = queue.pop(0)
        if task == TaskName.INDEX.value:
            refs += [args[0]] if isinstance(args[0], str) else list(args[0])
            continue
        queue.extend((f.task, f.args) for f in h.run(task, args))
    return refs


def test_a_batch_of_many_users_is_one_write_per_index_each_point_in_its_owners_scope():
    h = harness()
    refs: list[str] = []
    for tenant, user in OWNERS:
        message = {**turn(1, SAID[(tenant, user)], user=user), "tenant_id": tenant}
        refs += up_to_index(h, message)
    assert len(refs) == len(OWNERS)

    h.run(TaskName.INDEX, (refs,))

    for index in (h.index, h.turns):
        assert len(index.writes) == 1  # one upsert (and flush) for the whole batch
        assert sorted(set(index.writes[0])) == sorted(OWNERS)
    # Each owner finds its own memory and turn, and no one else's.
    memories = h.state.memories.values()
    assert {(m.tenant_id, m.user_id) for m in memories} == set(OWNERS)
    for tenant, user in OWNERS:
        own = {m.id for m in memories if (m.tenant_id, m.user_id) == (tenant, user)}
        vector = h.embedder.embed_query(SAID[(tenant, user)])
        assert {hit.id for hit in h.index.search(tenant, user, vector, 10)} == own
        turns = h.turns.search(tenant, user, vector, 10)
        assert {hit.payload["event_id"] for hit in turns} == {f"e-{user}-s1-1"}
        assert all(hit.payload["tenant_id"] == tenant for hit in turns)
    # Every row was marked: a second push writes nothing.
    with h.store.uow() as uow:
        assert push_unindexed_users(uow, MEMORIES, h.index, h.embedder, OWNERS) == 0
        assert push_unindexed_users(uow, TURNS, h.turns, h.embedder, OWNERS) == 0
    assert len(h.index.writes) == 1 and len(h.turns.writes) == 1


def test_points_are_written_in_bounded_pieces_and_none_is_lost():
    """A catch-up of many rows is not held in one upsert: pieces of at most ``per_write`` points
    plus one page, every row written once."""
    h = harness()
    refs: list[str] = []
    for tenant, user in OWNERS:
        for seq, text in enumerate(["I live in Porto.", "I work as a baker.", "My cat is called Tofu."], 1):
            refs += up_to_index(h, {**turn(seq, text, user=user), "tenant_id": tenant})
    assert len(refs) == 3 * len(OWNERS)
    with h.store.uow() as uow:
        written = push_unindexed_users(uow, TURNS, h.turns, h.embedder, OWNERS, per_write=5)
        uow.commit()
    assert written == 3 * len(OWNERS)
    # A piece is written once it holds 5 or more: after the second user and after the fourth.
    assert [len(w) for w in h.turns.writes] == [6, 6]
    assert sorted(o for w in h.turns.writes for o in w) == sorted(OWNERS * 3)


def test_one_user_push_is_the_same_mechanism():
    h = harness()
    refs = up_to_index(h, {**turn(1, SAID[("t1", "u1")], user="u1"), "tenant_id": "t1"})
    refs += up_to_index(h, {**turn(1, SAID[("t1", "u10")], user="u10"), "tenant_id": "t1"})
    with h.store.uow() as uow:
        assert push_unindexed(uow, MEMORIES, h.index, h.embedder, "t1", "u1") >= 1
        uow.commit()
    assert h.index.writes == [[("t1", "u1")]]  # u10's row (an id with u1 as its prefix) waits
