"""The producer's publish meets kombu's own race with a dropped Redis connection (an
``AttributeError`` from ``Channel._connparams``, raised by kombu's real code on a channel whose
connection is gone) and retries it as the outage it is: the turn is sent once and kept in the
ledger, in its tenant's key, until it is recorded."""

from __future__ import annotations

from typing import Any

import redis
from kombu.transport.redis import Channel

from infra import redis_layout
from infra.broker import send_only_app
from producers.publisher import Publisher
from tests.support.queues import take_record_messages


class RacingOnce:
    """The real send-only app, whose first publish meets the dropped connection inside kombu."""

    def __init__(self, broker_url: str) -> None:
        self.real = send_only_app(broker_url)
        self.attempts = 0

    def send_task(self, name: str, **options: Any) -> Any:
        self.attempts += 1
        if self.attempts == 1:
            dropped = Channel.__new__(Channel)
            dropped.connection = None
            dropped._connparams()
        return self.real.send_task(name, **options)

    def close(self) -> None:
        self.real.close()


def test_a_publish_that_meets_kombus_dropped_connection_is_retried_and_sent_once(it_settings):
    client = redis.Redis.from_url(it_settings.broker_url)
    app = RacingOnce(it_settings.broker_url)
    with Publisher(
        it_settings.broker_url,
        it_settings.broker_url,
        tenant_id="t1",
        app=app,  # type: ignore[arg-type]
    ) as pub:
        sent = pub.publish(user_id="u1", session_id="s", role="user", content="我不吃香菜")
    with Publisher(it_settings.broker_url, it_settings.broker_url, tenant_id="t10") as other:
        kept = other.publish(user_id="u10", session_id="s", role="user", content="I moved to Lisbon")
    assert app.attempts == 2
    messages = take_record_messages(client)
    sent_ids = [(m["tenant_id"], m["event_id"]) for m in messages]
    assert sent_ids == [("t1", sent.event_id), ("t10", kept.event_id)]
    for tenant, event_id in (("t1", sent.event_id), ("t10", kept.event_id)):
        member = redis_layout.ledger_member(tenant, event_id)
        assert client.hget(redis_layout.UNRECORDED_MESSAGES, member) is not None, member
    client.close()
