"""The Redis broker's queues as the service tiers watch them, and the sends beat would make."""

from __future__ import annotations

import base64
import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import redis

from shared.ingest.record import record_event
from shared.queues import ROUTES, TaskName
from tests.support.services import wait_until
from workers.bootstrap import Container
from workers.broker import queue_lists


def queues_empty(broker_url: str) -> bool:
    """No message waiting in any pipeline queue and none delivered but unacknowledged."""
    client = redis.Redis.from_url(broker_url)
    try:
        return (
            all(client.llen(key) == 0 for q in set(ROUTES.values()) for key in queue_lists(q.value))
            and client.zcard("unacked_index") == 0
        )
    finally:
        client.close()


def queue_report(broker_url: str) -> str:
    """The queues' lengths and the unacknowledged tasks by name: what an assertion should show."""
    client = redis.Redis.from_url(broker_url)
    try:
        lengths = {q.value: sum(client.llen(k) for k in queue_lists(q.value)) for q in set(ROUTES.values())}
        unacked = client.hgetall("unacked")
        tasks = [json.loads(v)[0]["headers"]["task"] for v in unacked.values()]
        return f"queues {lengths}, unacked {Counter(tasks)}"
    finally:
        client.close()


def assert_queues_drain(broker_url: str, timeout: float) -> None:
    """Wait until the queues are empty; fail showing what is still queued."""
    assert wait_until(lambda: queues_empty(broker_url), timeout), queue_report(broker_url)


def broker_sender(broker_url: str) -> Any:
    """A send-only Celery app on the broker, as the producers build it."""
    from infra.broker import send_only_app

    return send_only_app(broker_url)


def beat_sweep(settings: Any, older_than_s: int) -> Callable[[], None]:
    """Send the stalled-event sweep once, as beat does on its schedule."""
    sender = broker_sender(settings.broker_url)

    def send() -> None:
        sender.send_task(
            TaskName.RESUME_STALLED.value, args=[older_than_s], queue=ROUTES[TaskName.RESUME_STALLED].value
        )

    return send


RECORD_QUEUE = ROUTES[TaskName.RECORD].value


def take_record_messages(client: redis.Redis) -> list[dict[str, Any]]:
    """Pop the queued ``memory.record`` messages, oldest first, as a worker would take them."""
    out = []
    while (raw := client.rpop(RECORD_QUEUE)) is not None:
        envelope = json.loads(raw)
        args, _kwargs, _embed = json.loads(base64.b64decode(envelope["body"]))
        out.append(args[0])
    return out


def record(c: Container, message: dict[str, Any]) -> None:
    with c.uow() as uow:
        record_event(uow, message, c.limits, c.seq_counter)
        uow.commit()
