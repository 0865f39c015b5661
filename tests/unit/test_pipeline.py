"""The pipeline's service functions, driven stage by stage against in-memory fakes."""

from datetime import UTC, datetime, timedelta

import pytest

from shared.events import SEQ_ASSIGNED, InvalidEvent, validate_turn
from shared.indexing.collections import MEMORIES
from shared.indexing.reindex import rebuild_collection
from shared.ingest.record import SeqContended, record_event
from shared.ingest.resume import resume_stalled
from shared.models import MemoryStatus
from shared.ports import EmbeddingModelMismatch
from shared.queues import TaskName
from tests.support.fake_index import FakeVectorIndex
from tests.support.pipeline import LIMITS, Harness, active, turn
from workers.endpoints.embedders.hashing import HashingEmbedder


def test_memorable_turn_goes_through_every_stage():
    h = Harness()
    h.drain(turn(1, "生产环境部署端口是8443"))
    stored = h.state.events["e-u1-s1-1"]
    assert stored["stage"] == "done"
    memories = active(h)
    assert len(memories) == 1
    m = memories[0]
    assert "8443" in m.content and m.embedding_model == "hash-v1-16" and m.indexed_version == m.version
    assert m.sources == [{"event_id": "e-u1-s1-1", "session_id": "s1", "seq": 1, "at": m.sources[0]["at"]}]
    assert h.index.ids("default", "u1") == {m.id}
    assert [t for t, _ in h.sent] == [
        "memory.extract", "memory.embed", "memory.persist", "memory.index", "memory.resolve"
    ]  # fmt: skip


def test_chit_chat_is_recorded_but_makes_no_memory():
    h = Harness()
    h.drain(turn(1, "好的，谢谢"))
    assert h.state.events["e-u1-s1-1"]["stage"] == "done"
    assert h.state.memories == {}


def test_republishing_the_same_event_changes_nothing():
    h = Harness()
    h.drain(turn(1, "我不吃香菜"))
    before = (dict(h.state.events), {k: vars(v).copy() for k, v in h.state.memories.items()})
    assert h.run(TaskName.RECORD, (turn(1, "我不吃香菜"),)) == []
    assert (dict(h.state.events), {k: vars(v).copy() for k, v in h.state.memories.items()}) == before


def test_same_seq_same_content_new_id_is_a_duplicate():
    h = Harness()
    h.drain(turn(1, "我不吃香菜"))
    assert h.run(TaskName.RECORD, (turn(1, "我不吃香菜", event_id="other"),)) == []
    assert h.state.receipts["other"].outcome == "duplicate"
    assert h.state.receipts["other"].canonical_event_id == "e-u1-s1-1"
    assert len(h.state.events) == 1


def test_same_seq_different_content_is_rejected_with_reason():
    h = Harness()
    h.drain(turn(1, "我不吃香菜"))
    h.run(TaskName.RECORD, (turn(1, "我爱吃香菜", event_id="clash"),))
    receipt = h.state.receipts["clash"]
    assert receipt.outcome == "rejected"
    assert "seq 1 of conversation u1/s1 already holds different content (event e-u1-s1-1)" in receipt.reason
    assert h.state.events["e-u1-s1-1"]["event"].content == "我不吃香菜"


class FakeSeqCounter:
    """The producer's counters (Redis in production): ``next_after`` as the Lua script does it."""

    def __init__(self, **counters: int):
        self.counters = dict(counters)  # session id -> counter (tenant "default", user "u1")
        self.calls: list[tuple[str, int]] = []

    def next_after(self, tenant_id, user_id, session_id, floor):
        seq = max(self.counters.get(session_id, 0), floor) + 1
        self.counters[session_id] = seq
        self.calls.append((session_id, floor))
        return seq


def assigned(seq, content, **kw):
    """A record message whose seq the producer's counter chose (the app gave none)."""
    return {**turn(seq, content, **kw), SEQ_ASSIGNED: True}


def record(h, message, counter):
    with h.store.uow() as uow:
        out = record_event(uow, message, LIMITS, counter)
        uow.commit()
    return out


def test_a_counter_assigned_seq_already_taken_is_renumbered_past_the_conversation():
    # Redis lost the counter's last increments: seqs 1-3 are recorded, the counter says 1, and
    # the next turn is handed seq 2 again. It must be recorded, not rejected.
    h = Harness()
    for seq, text in enumerate(["我不吃香菜", "生产环境部署端口是8443", "好的"], start=1):
        h.drain(assigned(seq, text))
    counter = FakeSeqCounter(s1=1)
    out = record(h, assigned(2, "测试环境端口是8080", event_id="late"), counter)
    stored = h.state.events["late"]["event"]
    assert stored.seq == 4 and counter.calls == [("s1", 3)] and counter.counters["s1"] == 4
    receipt = h.state.receipts["late"]
    assert receipt.outcome == "accepted"
    assert receipt.reason.startswith("renumbered from seq 2 to 4: event e-u1-s1-2 already holds seq 2")
    assert [(f.task, f.args) for f in out] == [("memory.extract", ("default/late",))]
    assert h.state.events["e-u1-s1-2"]["event"].content == "生产环境部署端口是8443"
    # Delivered again (a redelivery, the stalled sweep): the next step again, as for any recorded
    # turn, and nothing else: no second seq is drawn.
    assert record(h, assigned(2, "测试环境端口是8080", event_id="late"), counter) == out
    assert counter.calls == [("s1", 3)] and h.state.events["late"]["event"].seq == 4


def test_a_renumbered_turn_goes_above_the_counter_when_it_is_ahead_of_postgres():
    # Turns handed seqs 5 and 6 are still on their way: the counter (6) is ahead of Postgres (3).
    h = Harness()
    for seq in (1, 2, 3):
        h.drain(assigned(seq, f"第{seq}步"))
    counter = FakeSeqCounter(s1=6)
    record(h, assigned(3, "same slot, same text is still a new turn", event_id="x"), counter)
    assert h.state.events["x"]["event"].seq == 7 and counter.counters["s1"] == 7


def test_a_counter_assigned_seq_on_a_slot_of_the_same_text_is_a_new_turn_not_a_duplicate():
    # Two "好的" in a row are two turns; only an app's own seq can name the same turn twice.
    h = Harness()
    h.drain(assigned(1, "好的"))
    record(h, assigned(1, "好的", event_id="again"), FakeSeqCounter(s1=0))
    assert h.state.receipts["again"].outcome == "accepted"
    assert h.state.events["again"]["event"].seq == 2


def test_an_app_supplied_seq_already_taken_stays_rejected_even_with_a_counter():
    h = Harness()
    h.drain(turn(1, "我不吃香菜"))
    counter = FakeSeqCounter(s1=0)
    record(h, turn(1, "我爱吃香菜", event_id="clash"), counter)
    record(h, {**turn(1, "我爱吃", event_id="odd"), SEQ_ASSIGNED: "yes"}, counter)  # only True counts
    assert h.state.receipts["clash"].outcome == "rejected"
    assert h.state.receipts["odd"].outcome == "rejected"
    assert counter.calls == [] and len(h.state.events) == 1


def test_renumbering_gives_up_for_now_when_every_new_seq_is_taken():
    class Stuck(FakeSeqCounter):
        def next_after(self, tenant_id, user_id, session_id, floor):
            super().next_after(tenant_id, user_id, session_id, floor)
            return 1  # always a taken seq (a broken counter): the task retries later

    h = Harness()
    h.drain(assigned(1, "我不吃香菜"))
    with pytest.raises(SeqContended, match="5 new seqs for u1/s1 were all taken"):
        record(h, assigned(1, "生产环境部署端口是8443", event_id="y"), Stuck())
    assert "y" not in h.state.events and "y" not in h.state.receipts


def test_the_seq_assigned_mark_is_not_a_field_of_the_turn():
    h = Harness()
    h.drain(assigned(1, "我不吃香菜"))
    assert h.state.receipts["e-u1-s1-1"].outcome == "accepted"
    assert "seq_assigned" not in h.state.events["e-u1-s1-1"]["event"].to_message()
    with pytest.raises(InvalidEvent, match="seq_assigned: is not a known field"):
        validate_turn({**turn(1, "x"), SEQ_ASSIGNED: True})


def test_invalid_message_gets_a_rejected_receipt():
    h = Harness()
    h.run(
        TaskName.RECORD,
        ({"event_id": "bad1", "user_id": "", "session_id": "s", "seq": 1, "role": "user", "content": "x"},),
    )
    assert h.state.receipts["bad1"].outcome == "rejected"
    assert "user_id: must not be empty" in h.state.receipts["bad1"].reason


def test_invalid_message_without_usable_id_raises_for_dead_letter():
    h = Harness()
    with pytest.raises(InvalidEvent):
        h.run(TaskName.RECORD, ({"user_id": "u"},))


def test_redelivered_stage_message_re_emits_next_step_only():
    h = Harness()
    h.run(TaskName.RECORD, (turn(1, "生产环境部署端口是8443"),))
    first = h.run(TaskName.EXTRACT, ("e-u1-s1-1",))
    drafts = dict(h.state.memories)
    # The same extract message again (crash after commit, before the ack): no new drafts, same next step.
    again = h.run(TaskName.EXTRACT, ("e-u1-s1-1",))
    assert again == first and h.state.memories.keys() == drafts.keys()
    h.run(TaskName.EMBED, ("e-u1-s1-1",))
    # A stage long passed does nothing at all.
    assert h.run(TaskName.EXTRACT, ("e-u1-s1-1",)) == []


def test_exact_repeat_reinforces_instead_of_duplicating():
    h = Harness()
    for seq in (1, 2, 3):
        h.drain(turn(seq, "我不吃香菜", session=f"s{seq}", event_id=f"cilantro-{seq}"))
    memories = active(h)
    assert len(memories) == 1
    m = memories[0]
    assert m.access_count == 2
    assert [s["event_id"] for s in m.sources] == ["cilantro-1", "cilantro-2", "cilantro-3"]
    assert h.index.ids("default", "u1") == {m.id}


def test_repeats_arriving_out_of_order_keep_their_sources_in_event_time_order():
    # Three sessions repeat one fact; the latest (by event time) is recorded first, as a slow
    # producer or a redelivery can make it. The sources are the memory's history: told when.
    h = Harness()
    for session, minutes in (("late", 60), ("early", 0), ("middle", 30)):
        h.drain(turn(1, "我不吃香菜", session=session, event_id=f"cilantro-{session}", minutes=minutes))
    (m,) = active(h)
    assert [s["event_id"] for s in m.sources] == ["cilantro-early", "cilantro-middle", "cilantro-late"]
    assert [s["at"] for s in m.sources] == sorted(s["at"] for s in m.sources)
    assert m.access_count == 2


def test_users_never_share_memories():
    h = Harness()
    h.drain(turn(1, "我不吃香菜", user="alice"))
    h.drain(turn(1, "我不吃香菜", user="bob"))
    assert len(active(h, "alice")) == 1 and len(active(h, "bob")) == 1
    assert h.index.ids("default", "alice").isdisjoint(h.index.ids("default", "bob"))


def test_model_change_is_refused_with_reindex_hint():
    h = Harness()
    h.drain(turn(1, "生产环境部署端口是8443"))
    h.embedder = HashingEmbedder(dim=32)
    h.run(TaskName.RECORD, (turn(2, "测试环境端口是8080"),))
    h.run(TaskName.EXTRACT, ("e-u1-s1-2",))
    with pytest.raises(EmbeddingModelMismatch, match="cuemem reindex"):
        h.run(TaskName.EMBED, ("e-u1-s1-2",))


def test_reindex_rebuilds_from_postgres_with_new_model():
    h = Harness()
    h.say("生产环境部署端口是8443", "我不吃香菜")
    h.embedder = HashingEmbedder(dim=32)
    h.index = FakeVectorIndex()
    stats = rebuild_collection(h.store.uow, MEMORIES, h.index, h.embedder)
    assert stats == {"indexed": 2, "reembedded": 2}
    assert all(m.embedding_model == "hash-v1-32" and len(m.embedding) == 32 for m in active(h))
    assert h.index.ids("default", "u1") == {m.id for m in active(h)}
    assert h.state.meta["embedding_model"] == "hash-v1-32"


def test_uncommitted_work_is_discarded():
    h = Harness()
    with h.store.uow() as uow:
        record_event(uow, turn(1, "我不吃香菜"), LIMITS)
        # no commit: as if the task crashed
    assert h.state.events == {}


# Each stage an event can stall at, and the task that takes it on (as docs/ARCHITECTURE.md's
# pipeline lists them): literals, so a wrong step in the code's own table fails here.
NEXT_TASK = {
    "recorded": "memory.extract",
    "extracted": "memory.embed",
    "embedded": "memory.persist",
    "persisted": "memory.index",
    "indexed": "memory.resolve",
}


def test_resume_stalled_redrives_each_stage():
    """One event stalled at each stage (its next message lost): the sweep sends each the task of
    its stage, running what it sent takes every event to done, and a done event is left alone."""
    h = Harness()
    event_of: dict[str, str] = {}
    for n, stage in enumerate(NEXT_TASK):
        user = f"u{n}"  # one conversation each: no event waits on another's resolution
        message = turn(1, f"生产环境部署端口是{8440 + n}", user=user)
        pending = [(TaskName.RECORD.value, (message,))]
        while h.state.events.get(message["event_id"], {}).get("stage") != stage:
            task, args = pending.pop(0)
            pending = [(f.task, f.args) for f in h.run(task, args)]  # the next message: lost below
        event_of[stage] = message["event_id"]
    done = turn(1, "我不吃香菜", user="u-done")
    h.drain(done)
    assert h.state.events[done["event_id"]]["stage"] == "done"
    with h.store.uow() as uow:
        out = resume_stalled(uow, datetime.now(UTC) + timedelta(seconds=1))
    # The stage messages name the tenant with the event id (event ids are unique per tenant).
    assert sorted((f.task, f.args) for f in out) == sorted(
        (task, (f"default/{event_of[stage]}",)) for stage, task in NEXT_TASK.items()
    )
    queue = [(f.task, f.args) for f in out]
    while queue:
        task, args = queue.pop(0)
        queue.extend((f.task, f.args) for f in h.run(task, args))
    assert {e: h.state.events[e]["stage"] for e in event_of.values()} == dict.fromkeys(
        event_of.values(), "done"
    )
    with h.store.uow() as uow:
        assert resume_stalled(uow, datetime.now(UTC) + timedelta(seconds=1)) == []


def test_resume_stalled_leaves_events_that_reached_their_stage_recently():
    h = Harness()
    h.run(TaskName.RECORD, (turn(1, "生产环境部署端口是8443"),))
    # The cutoff is taken from the stage time the store wrote, not from the clock: however slow
    # the machine, the event reached its stage after it.
    (row,) = h.state.events.values()
    with h.store.uow() as uow:
        assert resume_stalled(uow, row["stage_at"] - timedelta(microseconds=1)) == []


class FakeLedger:
    def __init__(self, messages: dict[str, tuple[int, dict]], backlog: int = 0):
        self.messages = messages
        self.waiting = backlog
        self.claimed: list[str] = []

    def settle(self, event_ids):
        for i in event_ids:
            self.messages.pop(i, None)

    def overdue(self, published_before_ms, limit):
        due = sorted((at, i) for i, (at, _) in self.messages.items() if at <= published_before_ms)[:limit]
        self.claimed += [i for _, i in due]
        return [self.messages[i][1] for _, i in due]

    def backlog(self):
        return self.waiting


def test_resume_stalled_resends_turns_published_but_never_recorded():
    cutoff = datetime.now(UTC) - timedelta(minutes=5)
    old_ms = int((cutoff - timedelta(minutes=1)).timestamp() * 1000)
    new_ms = int((cutoff + timedelta(minutes=1)).timestamp() * 1000)
    ledger = FakeLedger({"lost": (old_ms, turn(1, "我不吃香菜")), "queued": (new_ms, turn(2, "好的"))})
    h = Harness()
    with h.store.uow() as uow:
        out = resume_stalled(uow, cutoff, ledger)
    assert [(f.task, f.args[0]["content"]) for f in out] == [("memory.record", "我不吃香菜")]
    assert ledger.claimed == ["lost"]


def test_resume_stalled_waits_while_the_queues_hold_a_backlog_unless_far_overdue():
    now = datetime.now(UTC)
    late_ms = int((now - timedelta(minutes=10)).timestamp() * 1000)
    lost_ms = int((now - timedelta(hours=2)).timestamp() * 1000)
    ledger = FakeLedger(
        {"late": (late_ms, turn(1, "我不吃香菜")), "lost": (lost_ms, turn(3, "好的"))}, backlog=3
    )
    h = Harness()
    h.run(TaskName.RECORD, (turn(2, "生产环境部署端口是8443"),))
    with h.store.uow() as uow:
        out = resume_stalled(uow, now - timedelta(minutes=5), ledger)
    # Under a backlog only what is stuck far beyond the grace is re-sent; the event recorded a
    # moment ago and the turn published 10 minutes ago are left to the queues.
    assert [(f.task, f.args[0]["content"]) for f in out] == [("memory.record", "好的")]
    assert ledger.claimed == ["lost"]


def test_explicit_remember_is_kept_as_the_named_kind():
    h = Harness()
    h.drain({**turn(1, "my locker code is 4711"), "metadata": {"remember": True, "kind": "fact"}})
    h.drain(turn(2, "lol ok"))
    [memory] = [m for m in h.state.memories.values() if m.status is MemoryStatus.ACTIVE]
    assert memory.content == "my locker code is 4711" and memory.type.value == "fact"
    assert memory.importance >= 5.0 and "e:4711" in memory.cues
