"""Reconciliation of the conversation-log index (one point per recorded turn) against the event
log, on in-memory fakes: missing, extra and stale turn points are repaired, the report carries
``turns_*`` counts, a second run finds nothing, and the memory index is left exactly as it was."""

from __future__ import annotations

from typing import Any

from shared.events import validate_turn
from shared.indexing.collections import MEMORIES, TURNS
from shared.indexing.points import turn_payload
from shared.indexing.reconcile import reconcile_indexes
from shared.lifecycle import sweeps as lifecycle
from shared.models import turn_point_id
from shared.ports import IndexPoint
from tests.support.losing_index import LosingIndex
from tests.support.pipeline import CHAT, LIMITS, TurnHarness, turn

STRAY = "00000000-0000-4000-8000-999999999999"


def world() -> TurnHarness:
    h = TurnHarness()
    h.say(CHAT, "生产环境部署端口是8443", "I prefer green tea over coffee")
    h.drain(turn(1, "bob's turn about the weather today", user="u2"))
    return h


def reconcile(h: TurnHarness) -> dict[str, int]:
    return reconcile_indexes(h.store.uow, h.indexes, h.embedder)


def turn_drift(stats: dict[str, int]) -> dict[str, int]:
    return {k: stats[k] for k in TURNS.report_keys}


def pid(event_id: str, user: str = "u1") -> str:
    return turn_point_id("default", user, event_id)


def agree(h: TurnHarness, user: str = "u1") -> None:
    """Every turn with a vector has exactly its point, with the payload the pipeline writes."""
    rows = {
        pid(r["event"].event_id, user): r
        for r in h.state.events.values()
        if r["event"].user_id == user and r.get("embedding") is not None
    }
    points = h.turns.payloads("default", user)
    assert set(points) == set(rows)
    for point_id, payload in points.items():
        expected: dict[str, Any] = turn_payload(rows[point_id]["event"])
        assert {k: payload[k] for k in expected} == expected
        assert rows[point_id]["turn_indexed"]


def memory_snapshot(h: TurnHarness) -> dict[str, dict[str, dict[str, Any]]]:
    return {u: h.index.payloads("default", u) for u in ("u1", "u2")}


def test_a_clean_world_reports_zero_turn_drift_and_merges_into_the_memory_report():
    h = world()
    stats = reconcile(h)
    assert turn_drift(stats) == dict.fromkeys(TURNS.report_keys, 0)
    assert stats["turns_users"] == 2 and stats["turns_points"] == 4
    assert all(stats[k] == 0 for k in MEMORIES.report_keys) and stats["users"] == 1  # u2 made no memory
    # Without a turn index the report is the memory report alone, as before.
    plain = reconcile_indexes(h.store.uow, {MEMORIES: h.index}, h.embedder)
    assert not any(k.startswith("turns_") for k in plain)


def test_missing_extra_and_stale_turn_points_are_repaired_and_a_second_run_finds_nothing():
    h = world()
    memories_before = memory_snapshot(h)
    assert memories_before["u1"]  # the memorable turns made memories
    # Drift: a turn point deleted by hand, a stray point, a stale payload.
    h.turns.delete("default", "u1", [pid("e-u1-s1-1")])
    h.turns.upsert([IndexPoint(STRAY, "default", "u1", [1.0] * 16, {"status": "active", "seq": 9})])
    h.turns.set_payload("default", "u1", {pid("e-u1-s1-2"): {"seq": 99, "session_id": "elsewhere"}})
    stats = reconcile(h)
    assert {k: stats[k] for k in ("turns_missing", "turns_extra", "turns_stale")} == {
        "turns_missing": 1, "turns_extra": 1, "turns_stale": 1
    }  # fmt: skip
    agree(h)
    agree(h, "u2")
    assert STRAY not in h.turns.ids("default", "u1")
    assert h.turns.payloads("default", "u1")[pid("e-u1-s1-2")]["seq"] == 2
    # The memory index is untouched: no memory drift, the very same points.
    assert all(stats[k] == 0 for k in MEMORIES.report_keys)
    assert memory_snapshot(h) == memories_before
    # Idempotent: a second run repairs nothing.
    again = reconcile(h)
    assert turn_drift(again) == dict.fromkeys(TURNS.report_keys, 0)
    assert again["turns_points"] == 4
    assert memory_snapshot(h) == memories_before


def test_a_point_deleted_while_the_row_says_indexed_is_re_added_with_its_stored_vector():
    h = world()
    vector = h.turns._points[pid("e-u1-s1-1")].vector
    assert h.state.events["e-u1-s1-1"]["turn_indexed"]
    h.turns.delete("default", "u1", [pid("e-u1-s1-1")])
    calls: list[int] = []
    embed = h.embedder.embed_passages
    h.embedder.embed_passages = lambda texts: calls.append(len(texts)) or embed(texts)  # type: ignore[method-assign]
    assert reconcile(h)["turns_missing"] == 1
    assert calls == []  # the sweep never embeds: the stored vector is re-used
    assert h.turns._points[pid("e-u1-s1-1")].vector == vector
    out = h.turns.search("default", "u1", list(vector), 1)
    assert out[0].id == pid("e-u1-s1-1")


def test_points_of_other_users_or_of_turns_without_a_vector_are_extra():
    h = world()
    # A point of a turn of u2 stored under u1 (same scope keys, foreign event id), and a point of a
    # u1 turn that has no vector yet (recorded, not embedded).
    h.turns.upsert([IndexPoint(pid("e-u2-s1-1", "u1"), "default", "u1", [1.0] * 16, {"status": "active"})])
    with h.store.uow() as uow:
        uow.events.insert_if_absent(validate_turn(turn(4, "still in the pipeline"), LIMITS), "recorded")
        uow.commit()
    h.turns.upsert([IndexPoint(pid("e-u1-s1-4"), "default", "u1", [1.0] * 16, {"status": "active"})])
    stats = reconcile(h)
    assert stats["turns_extra"] == 2 and stats["turns_unembedded"] == 0  # not done: not drift
    agree(h)
    assert pid("e-u2-s1-1", "u2") in h.turns.ids("default", "u2")  # u2's own point stays


def test_done_turns_without_a_vector_are_counted_not_embedded_and_foreign_vectors_left_alone():
    h = world()
    with h.store.uow() as uow:
        old_turn = validate_turn(turn(5, "recorded before turns were indexed"), LIMITS)
        uow.events.insert_if_absent(old_turn, "done")
        uow.commit()
    h.state.events["e-u1-s1-3"]["embedding_model"] = "another-model"
    stats = reconcile(h)
    assert stats["turns_unembedded"] == 1 and stats["turns_foreign"] == 1
    assert stats["turns_extra"] == stats["turns_missing"] == stats["turns_stale"] == 0
    assert h.state.events["e-u1-s1-5"].get("embedding") is None  # reindex's job, not the sweep's
    assert pid("e-u1-s1-3") in h.turns.ids("default", "u1")  # kept for reindex to replace


def test_a_right_point_whose_row_says_not_indexed_is_bookkept():
    h = world()
    h.state.events["e-u1-s1-1"]["turn_indexed"] = False
    stats = reconcile(h)
    assert stats["turns_bookkept"] == 1 and stats["turns_missing"] == stats["turns_stale"] == 0
    assert h.state.events["e-u1-s1-1"]["turn_indexed"]
    assert reconcile(h)["turns_bookkept"] == 0


def test_maintain_index_reconciles_the_turn_index_it_is_given():
    h = world()
    h.turns.delete("default", "u2", [pid("e-u2-s1-1", "u2")])
    policy = lifecycle.LifecyclePolicy()
    out = lifecycle.maintain_index(h.store.uow, h.indexes, h.embedder, [], policy)
    assert out["reconcile"]["turns_missing"] == 1
    agree(h, "u2")
    without = lifecycle.maintain_index(h.store.uow, {MEMORIES: h.index}, h.embedder, [], policy)
    assert "turns_missing" not in without["reconcile"]


def test_a_lost_turn_index_is_restored_and_its_note_cleared():
    h = TurnHarness()
    losing = h.turns = LosingIndex()
    h.say(CHAT, "生产环境部署端口是8443")
    h.drain(turn(1, "bob's turn about the weather today", user="u2"))
    expected = {u: losing.ids("default", u) for u in ("u1", "u2")}
    assert all(expected.values())
    losing.lose_everything("the turn index's files vanished")
    stats = reconcile(h)
    assert stats["turns_missing"] == 3
    assert {u: losing.ids("default", u) for u in ("u1", "u2")} == expected
    assert losing.note is None and losing.cleared == ["the turn index's files vanished"]
