"""Which dead letters are a user's (``dead_letter_share``), and what a store's report verifies."""

from __future__ import annotations

from shared.erasure import IndexData, StoreErasure, failures, moved_elsewhere
from shared.lifecycle.dead_letters import dead_letter_share
from tests.support.fake_index import FakeVectorIndex
from tests.support.index_points import DIM, MODEL, basis, point

EVENTS = {"e1", "e2"}  # the user's stored events


def share(task: str, args: list) -> tuple:
    return dead_letter_share(task, args, "acme", "u1", EVENTS)


def turn(tenant: str, user: str, event_id: str) -> dict:
    return {"event_id": event_id, "tenant_id": tenant, "user_id": user, "content": "x"}


def test_a_turn_is_the_users_only_by_its_own_tenant_and_user() -> None:
    assert share("memory.record", [turn("acme", "u1", "e9")]) == ("all", None)
    assert share("memory.record", [turn("globex", "u1", "e1")]) == ("none", None)  # same id, other tenant
    assert share("memory.record", [turn("acme", "u2", "e1")]) == ("none", None)


def test_a_batch_of_several_users_keeps_the_others_part() -> None:
    mine, theirs = turn("acme", "u1", "e1"), turn("acme", "u2", "e7")
    assert share("memory.record_batch", [[mine, mine]]) == ("all", None)
    assert share("memory.record_batch", [[mine, theirs]]) == ("some", [[theirs]])
    assert share("memory.record_batch", [[theirs]]) == ("none", None)
    assert share("memory.index", [["e1", "e7"], True]) == ("some", [["e7"], True])
    assert share("memory.index", [["e1", "e2"], False]) == ("all", None)


def test_tasks_are_read_by_their_argument_shape() -> None:
    assert share("memory.sync_index", ["acme", "u1"]) == ("all", None)
    assert share("memory.delete_points", ["acme", "u2", ["m"], "memories"]) == ("none", None)
    assert share("memory.reinforce", ["r1", "acme", "u1", ["m"], "now"]) == ("all", None)
    assert share("memory.reinforce", ["acme", "u1", "x"]) == ("none", None)  # not its shape
    assert share("memory.extract", ["e1"]) == ("all", None)
    assert share("memory.extract", ["e7"]) == ("none", None)
    # An event id that names a tenant is still only an event id where a task takes one.
    assert dead_letter_share("memory.sync_index", ["acme", "u2"], "acme", "u1", {"acme"}) == ("none", None)
    assert share("memory.decay", []) == ("none", None)


def test_a_stage_message_names_the_event_by_tenant_and_id() -> None:
    # Event ids are unique per tenant only: another tenant's e1 is not the user's.
    assert share("memory.extract", ["acme/e1"]) == ("all", None)
    assert share("memory.extract", ["globex/e1"]) == ("none", None)
    assert share("memory.index", [["acme/e1", "globex/e2"], True]) == ("some", [["globex/e2"], True])


def test_a_report_verifies_what_its_store_can_compare() -> None:
    exact = StoreErasure("postgres.events", 2, 0, 5, 4)
    live = StoreErasure("redis.ledger", 1, 0, 5, 7, compared=False)
    left = StoreErasure("index.turns", 1, 1, 3, 3, compared=False)
    assert not exact.verified and live.verified and not left.verified
    problem = failures([exact, live, left])
    assert problem is not None and "postgres.events: 0 of the user's left, everyone else's 5 -> 4" in problem
    assert "index.turns: 1 of the user's left" in problem and "redis.ledger" not in problem


def test_the_index_part_counts_the_tenants_other_users_only() -> None:
    index = FakeVectorIndex()
    index.ensure(DIM, MODEL)
    index.upsert(
        [
            point(1, basis(0), tenant="acme", user="u1"),
            point(2, basis(0), tenant="acme", user="u10"),
            point(3, basis(0), tenant="globex", user="u1"),
            point(4, basis(0), tenant="acme:u1", user="x"),
        ]
    )
    assert IndexData({"memories": index}).count("acme", "u1") == {"memories": (1, 1)}


def test_everyone_elses_items_that_moved_are_named() -> None:
    assert moved_elsewhere({"memories": 8, "events": 2}, {"memories": 8, "events": 2}) is None
    assert moved_elsewhere({"memories": 8}, {"memories": 5}) == "memories: other users' items 8 -> 5"
