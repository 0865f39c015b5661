"""What every ingest stage shares: the order of the stages, and loading the event a stage
message names.

record → extract → embed → persist → index → resolve. Each handler is keyed by the event's
pipeline key (``shared.events.event_ref``: tenant and event id, as event ids are unique per tenant), re-reads
the event's stage and only acts when the event sits at the stage it handles. A redelivered message
whose work was already committed re-emits the next step (the crash may have fallen between
commit and enqueue) and changes nothing else; a message for a stage long passed does nothing.
"""

from __future__ import annotations

from shared.events import TurnPublished
from shared.models import EventStage
from shared.queues import TaskName
from shared.storage import FollowUp, UnitOfWork

CONFLICT_CANDIDATES = 50  # active memories a new one is compared with (persist, resolve)

_NEXT: dict[EventStage, TaskName] = {
    EventStage.RECORDED: TaskName.EXTRACT,
    EventStage.EXTRACTED: TaskName.EMBED,
    EventStage.EMBEDDED: TaskName.PERSIST,
    EventStage.PERSISTED: TaskName.INDEX,
    EventStage.INDEXED: TaskName.RESOLVE,
}


class EventVanished(LookupError):
    """A stage message names an event that is not in the log (never recorded, or a foreign id)."""


def next_step(ref: str, stage: str) -> list[FollowUp]:
    """The message that carries the event ``ref`` (its pipeline key) on from ``stage``."""
    task = _NEXT.get(EventStage(stage))
    return [FollowUp(task.value, (ref,))] if task else []


def load_event(uow: UnitOfWork, ref: str) -> tuple[TurnPublished, EventStage]:
    stored = uow.events.get(ref)
    if stored is None:
        raise EventVanished(f"event {ref!r} is not in the event log")
    return stored.event, EventStage(stored.stage)
