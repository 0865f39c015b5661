"""How the pipeline sorts failures, counts deliveries and parks what it gives up on.

- transient (database or broker unreachable, index busy, model endpoint down): retry with
  backoff and jitter;
- permanent (a message that can never succeed: malformed, unknown event, model mismatch): no
  retry, a dead letter with the reason;
- crash loops (a message whose worker dies every time): capped by a delivery counter kept in
  Redis, then dead-lettered.
"""

from __future__ import annotations

import logging
from typing import Any

import redis
from kombu.exceptions import OperationalError as BrokerUnreachable
from sqlalchemy.exc import DBAPIError, OperationalError

from infra import redis_layout
from shared.events import InvalidEvent, split_ref
from shared.ingest.common import EventVanished
from shared.ingest.record import SeqContended
from shared.ports import EmbeddingModelMismatch, IndexUnavailable
from shared.storage import DeadLetter
from workers.endpoints.embedders import EmbeddingError

log = logging.getLogger(__name__)

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    OperationalError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    # kombu's wrapper when a task's follow-up cannot be sent (the broker is restarting): the
    # task's own work has committed; a retry redoes it idempotently and sends the follow-up.
    BrokerUnreachable,
    IndexUnavailable,
    ConnectionError,
    TimeoutError,
    EmbeddingError,  # only transient ones reach Celery: run_unit turns the others permanent
    SeqContended,
)


class PermanentFailure(RuntimeError):
    """A failure that no retry can fix (e.g. an embedding endpoint refusing the input)."""


PERMANENT_ERRORS: tuple[type[BaseException], ...] = (
    InvalidEvent,
    EventVanished,
    EmbeddingModelMismatch,
    PermanentFailure,
)

DELIVERY_COUNTER_TTL_S = 7 * 24 * 3600


def count_delivery(container: Any, task_id: str | None, attempt: int) -> int:
    """How many times this attempt of this task has started (1 on a first delivery)."""
    if not task_id:
        return 1
    client = container.redis_client()
    if client is None:
        return 1
    key = redis_layout.deliveries_key(task_id, attempt)
    pipe = client.pipeline()
    pipe.incr(key)
    pipe.expire(key, DELIVERY_COUNTER_TTL_S)
    count, _ = pipe.execute()
    return int(count)


def dead_letter(container: Any, task_name: str, task_id: str | None, args: list[Any], reason: str) -> None:
    event_id = _event_id_of(args)
    try:
        with container.uow() as uow:
            letter = DeadLetter(task_name, task_id, event_id, _json_safe(args), _json_safe(reason[:4000]), 0)
            uow.dead_letters.add(letter)
            uow.commit()
        log.error("dead-lettered %s %s (event %s): %s", task_name, task_id, event_id, reason)
        ledger = container.ledger
        if task_name == "memory.record" and event_id and ledger is not None:
            tenant = args[0].get("tenant_id") if args and isinstance(args[0], dict) else None
            # Parked with its reason: the sweep must not send it again.
            ledger.settle([redis_layout.ledger_member(str(tenant or "default"), event_id)])
    except (DBAPIError, OSError):
        # The database is the place of record; when it is down the log must carry the message.
        log.critical(
            "could not dead-letter %s %s args=%r: %s", task_name, task_id, args, reason, exc_info=True
        )


def _event_id_of(args: list[Any]) -> str | None:
    if not args:
        return None
    first = args[0]
    # Cleaned like the args: an id holding a NUL made the dead letter's own insert fail.
    if isinstance(first, dict):
        value = first.get("event_id")
        return _json_safe(value[:512]) if isinstance(value, str) else None
    # A stage message names the event by its pipeline key (tenant and event id): the letter keeps
    # the event id, as the record message's does.
    return _json_safe(split_ref(first)[1][:512]) if isinstance(first, str) else None


def _json_safe(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\\0").encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {str(k)[:200]: _json_safe(v) for k, v in list(value.items())[:50]}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in list(value)[:200]]
    if isinstance(value, int | float | bool) or value is None:
        return value
    return repr(value)[:2000]
