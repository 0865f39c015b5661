"""The index stage: the user's rows not yet in each index pushed there
(``shared/indexing/sync.py``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from shared.events import TurnPublished
from shared.indexing.collections import Indexes
from shared.indexing.sync import push_unindexed_users
from shared.ingest.common import load_event, next_step
from shared.models import EventStage
from shared.ports import Embedder
from shared.storage import FollowUp, UnitOfWork

log = logging.getLogger(__name__)


def index_events(
    uow: UnitOfWork, indexes: Indexes, embedder: Embedder, event_ids: Sequence[str], resolved: bool = False
) -> list[FollowUp]:
    """The index stage of a batch: each user's rows not yet in each index pushed once for all of
    the batch's events of that user, every user's points written together (one upsert and flush
    per index for the batch, not per user or per event).
    Events that made a memory go on to resolve (a message each: the judge may be an LLM, and one
    slow judgement must not hold the others), unless ``resolved`` (the fused stages judged them
    before the index); the others are done here. An event past this stage (a redelivery)
    re-sends its next step; one not yet here is left alone."""
    persisted: list[TurnPublished] = []
    followups: list[FollowUp] = []
    for ref in dict.fromkeys(event_ids):
        event, stage = load_event(uow, ref)
        if stage is EventStage.PERSISTED:
            persisted.append(event)
        elif stage is EventStage.INDEXED:
            followups += next_step(ref, stage.value)
    users = sorted({(e.tenant_id, e.user_id) for e in persisted})
    written = sum(
        push_unindexed_users(uow, collection, index, embedder, users) for collection, index in indexes.items()
    )
    for event in persisted:
        made_memories = bool(uow.memories.from_event(event.tenant_id, event.user_id, event.event_id))
        new_stage = EventStage.INDEXED if made_memories and not resolved else EventStage.DONE
        uow.events.set_stage(event.ref, new_stage.value)
        followups += next_step(event.ref, new_stage.value)
    if persisted:
        log.info("%d events of %d users indexed (%d points)", len(persisted), len(users), written)
    return followups
