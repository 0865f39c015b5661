"""The index stage: the user's rows not yet in each index pushed there
(``shared/indexing/sync.py``)."""

from __future__ import annotations

import logging

from shared.indexing.collections import Indexes
from shared.indexing.sync import push_unindexed
from shared.ingest.common import load_event, next_step
from shared.models import EventStage
from shared.ports import Embedder
from shared.storage import FollowUp, UnitOfWork

log = logging.getLogger(__name__)


def index_event(uow: UnitOfWork, indexes: Indexes, embedder: Embedder, event_id: str) -> list[FollowUp]:
    """Push the user's rows not yet in each of ``indexes`` (changed memories and, when the
    conversation log is indexed, turns). An event that made no memory is done here."""
    event, stage = load_event(uow, event_id)
    if stage is not EventStage.PERSISTED:
        return next_step(event_id, stage) if stage is EventStage.INDEXED else []
    written = sum(
        push_unindexed(uow, collection, index, embedder, event.tenant_id, event.user_id)
        for collection, index in indexes.items()
    )
    made_memories = bool(uow.memories.from_event(event_id))
    new_stage = EventStage.INDEXED if made_memories else EventStage.DONE
    uow.events.set_stage(event_id, new_stage.value)
    log.info("event %s indexed (%d points)", event_id, written)
    return next_step(event_id, new_stage.value)
