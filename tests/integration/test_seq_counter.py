"""Seq counters that fell back (Redis lost its last writes in a crash), on the real Postgres and
Redis, without workers: the producer marks the seqs its counter chose, and the recorder renumbers
such a turn when another turn already holds its seq, instead of rejecting a turn the app was told
was accepted. The crash itself is `tests/faults/test_redis_crash.py`."""

from __future__ import annotations

import json

import pytest
import redis

from infra import redis_layout
from producers.publisher import Publisher
from shared.events import SEQ_ASSIGNED
from tests.support.queues import record, take_record_messages
from workers.bootstrap import build_container


def test_the_producer_marks_only_the_seqs_its_counter_chose(it_settings):
    client = redis.Redis.from_url(it_settings.broker_url)
    with Publisher.from_settings(it_settings) as pub:
        auto = pub.publish(user_id="u", session_id="s", role="user", content="我不吃香菜")
        given = pub.publish(user_id="u", session_id="s", role="user", content="好的", seq=7)
    messages = {m["event_id"]: m for m in take_record_messages(client)}
    assert messages[auto.event_id][SEQ_ASSIGNED] is True and messages[auto.event_id]["seq"] == 1
    assert SEQ_ASSIGNED not in messages[given.event_id]
    # The ledger keeps the same message, so the stalled sweep re-sends the mark with it.
    kept = client.hget(redis_layout.UNRECORDED_MESSAGES, redis_layout.ledger_member("default", auto.event_id))
    assert kept is not None and json.loads(kept)[SEQ_ASSIGNED] is True
    client.close()


def test_a_turn_handed_a_taken_seq_after_the_counter_fell_back_is_renumbered(it_settings):
    c = build_container(it_settings)
    client = redis.Redis.from_url(it_settings.broker_url)
    with Publisher.from_settings(it_settings) as pub:
        for text in ("我不吃香菜", "生产环境部署端口是8443", "好的"):
            pub.publish(user_id="u", session_id="s", role="user", content=text)
        for m in take_record_messages(client):
            record(c, m)
        # Redis comes back from a host crash without the last two increments.
        client.set(redis_layout.seq_key("default", "u", "s"), 1)
        late = pub.publish(user_id="u", session_id="s", role="user", content="测试环境端口是8080")
        assert late.seq == 2, "the counter did not fall back; the test proves nothing"
        [message] = take_record_messages(client)
        record(c, message)
        after = pub.publish(user_id="u", session_id="s", role="user", content="谢谢")
        [message] = take_record_messages(client)
        record(c, message)
        given = pub.publish(user_id="u", session_id="s", role="user", content="我爱吃香菜", seq=2)
        [message] = take_record_messages(client)
        record(c, message)
    with c.uow() as uow:
        timeline = [(e.event.seq, e.event.content) for e in uow.events.timeline("default", "u", "s")]
        receipts = uow.receipts.get_many("default", [late.event_id, after.event_id, given.event_id])
    assert timeline == [
        (1, "我不吃香菜"), (2, "生产环境部署端口是8443"), (3, "好的"), (4, "测试环境端口是8080"), (5, "谢谢")
    ]  # fmt: skip
    assert receipts[late.event_id].outcome == "accepted"
    assert (receipts[late.event_id].reason or "").startswith("renumbered from seq 2 to 4")
    # The counter moved past the conversation: the next turn got a fresh seq, nothing renumbered.
    assert after.seq == 5 and receipts[after.event_id].reason is None
    # A seq the app chose stays strict.
    assert receipts[given.event_id].outcome == "rejected"
    client.close()
    c.close()


def test_a_conversation_at_the_largest_seq_refuses_more_turns_naming_seq_and_sends_nothing(it_settings):
    """Past 2^53 - 1 the counter (Lua's doubles) would hand out one seq twice, above the cap the
    API enforces, and the recorder would drop both turns without a word: refused at publish."""
    from shared.events import MAX_SEQ, InvalidEvent

    client = redis.Redis.from_url(it_settings.broker_url)
    with Publisher.from_settings(it_settings) as pub:
        last = pub.publish(user_id="u", session_id="s", role="user", content="我不吃香菜", seq=MAX_SEQ)
        with pytest.raises(InvalidEvent) as refused:
            pub.publish(user_id="u", session_id="s", role="user", content="好的")
        batch = pub.publish_batch(
            [
                {"user_id": "u", "session_id": "s", "role": "user", "content": "还有"},
                {"user_id": "u", "session_id": "other", "role": "user", "content": "生产环境部署端口是8443"},
            ]
        )
    assert last.seq == MAX_SEQ
    assert [e.field for e in refused.value.errors] == ["seq"]
    assert [(i, [e.field for e in exc.errors]) for i, exc in batch.errors] == [(0, ["seq"])]
    assert [(p.session_id, p.seq) for p in batch.published] == [("other", 1)]
    sent = take_record_messages(client)
    assert [(m["session_id"], m["seq"]) for m in sent] == [("s", MAX_SEQ), ("other", 1)]
    client.close()
