"""An event id reused for another turn, refused when it is published instead of after.

The recorder refuses a turn whose event id its tenant already recorded for another turn (other
words, conversation or user: ``shared.ingest.record.reused_id_problem``), as a dead letter, after
the publish was answered 202 and the turn had entered the working memory and taken a seq. The API
asks the same question before it publishes: one read of the tenant's receipts for the ids in hand
(event ids are unique per tenant: another tenant's same id is another turn, never a conflict), and
for an id found, the recorded turn, compared by the same function. A turn whose first one is not
recorded yet (published a moment before, or in the same batch) is still left to the recorder.

When Postgres cannot be read the check lets the turns through (logged): the recorder refuses a
reuse anyway, and publishing does not otherwise need Postgres.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from service.operations.ports import Stores
from shared.events import FieldError, InvalidEvent, validate_turn
from shared.ingest.record import reused_id_problem
from shared.storage import UnitOfWork

log = logging.getLogger(__name__)


def reused(container: Stores, tenant: str, turns: Sequence[tuple[int, Any]]) -> dict[int, InvalidEvent]:
    """The positions among ``turns`` (position, raw turn as sent) whose event id ``tenant``
    already holds for another turn, each with its reason naming ``event_id``."""
    wanted = {
        position: raw["event_id"]
        for position, raw in turns
        if isinstance(raw, Mapping) and isinstance(raw.get("event_id"), str) and raw["event_id"]
    }
    if not wanted:
        return {}
    uow = container.uow()
    outages: tuple[type[BaseException], ...] = (*uow.outages, OSError)
    try:
        return _reused(container, uow, tenant, turns, wanted)
    except outages as exc:  # an outage only: any other error is a bug, raised
        log.warning("event ids not checked for reuse in tenant %s: %s", tenant, exc)
        return {}


def _reused(
    container: Stores,
    uow: UnitOfWork,
    tenant: str,
    turns: Sequence[tuple[int, Any]],
    wanted: dict[int, str],
) -> dict[int, InvalidEvent]:
    out: dict[int, InvalidEvent] = {}
    raws = dict(turns)
    with uow:
        seen = uow.receipts.get_many(tenant, sorted(set(wanted.values())))
        for position, event_id in wanted.items():
            receipt = seen.get(event_id)
            if receipt is None:
                continue
            try:
                event = validate_turn(
                    {**raws[position], "tenant_id": tenant},
                    container.limits,
                    now=container.clock(),
                    require_seq=False,
                )
            except InvalidEvent:
                continue  # the publisher names what is wrong with it
            stored = uow.events.get(event.ref)
            problem = reused_id_problem(receipt, stored.event if stored else None, event)
            if problem is not None:
                out[position] = InvalidEvent([FieldError("event_id", problem)])
    return out
