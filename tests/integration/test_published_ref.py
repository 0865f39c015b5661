"""A published turn's pipeline key (``Published.ref``), on the real Redis and Postgres without
workers: it names the tenant the turn was published under, and it is what the wait of
`cuemem ingest --wait`, the demo and the benchmarks finds the turn's progress by. An event id is
unique only within its tenant: two tenants (``ac`` and ``ac:me``) publish the same id here."""

from __future__ import annotations

import pytest
import redis

from producers.publisher import Published, Publisher
from shared.ingest.progress import progress
from tests.support.queues import record, take_record_messages
from workers.bootstrap import build_container


def test_published_refs_name_the_tenant_and_find_the_turns_progress(it_settings):
    c = build_container(it_settings)
    client = redis.Redis.from_url(it_settings.broker_url)
    turn = {"event_id": "e1", "user_id": "u1", "session_id": "s", "role": "user", "content": "我不吃香菜"}
    with Publisher.from_settings(it_settings) as pub:
        result = pub.publish_batch([{**turn, "tenant_id": "ac"}, {**turn, "tenant_id": "ac:me"}, turn])
        single = pub.publish(user_id="u10", session_id="s", role="user", content="好的", tenant_id="ac")
    assert not result.errors
    refs = [p.ref for p in result.published]
    assert refs == ["ac/e1", "ac:me/e1", "default/e1"]
    assert single.ref == f"ac/{single.event_id}"

    with c.uow() as uow:
        before = progress(uow, [*refs, single.ref]).states
    assert set(before.values()) == {"queued"}
    for message in take_record_messages(client):  # a batch's message holds a list of turns
        for one in message if isinstance(message, list) else [message]:
            record(c, one)
    with c.uow() as uow:
        after = progress(uow, [*refs, single.ref])
        bare = progress(uow, [p.event_id for p in result.published])
    # Recorded in each tenant, each found by its own key.
    assert set(after.states) == {*refs, single.ref}
    assert "queued" not in after.states.values(), after.states
    # The event id alone names no turn: a wait on it would never end (the hang this key fixes).
    assert set(bare.states.values()) == {"queued"}
    client.close()
    c.close()


def test_a_turn_published_through_the_http_client_has_no_key_of_its_own():
    """The API's key decides the tenant there, so the client's result cannot name it."""
    with pytest.raises(ValueError, match="'e1': published without a known tenant"):
        _ = Published("e1", 1, "s", "u").ref
    assert Published("e1", 1, "s", "u", "ac:me").ref == "ac:me/e1"
