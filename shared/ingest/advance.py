"""The fast path of freshly recorded turns: extract, embed and persist (and, with the rules
judging, resolve) in one unit of work, with one model call for every text of the unit.

The stages stay what they are (each event's stage column moves recorded → extracted → embedded →
persisted, each stage's function decides), but the turns go through them here without a message
and a transaction per stage and event. What ``record`` would have sent to ``memory.extract`` is
carried on in the same process, one unit per user of a batch (``workers/tasks/ingest.py:
carry_on``); what comes after (the index, on the index owner) is one message for the batch.
Should a unit fail, the per-stage tasks take over its events one by one, so one bad turn holds
up no other.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from shared.events import TurnPublished
from shared.ingest.common import next_step
from shared.ingest.conflicts import Judge, Strategy
from shared.ingest.embed import embed_events
from shared.ingest.extract import Extractor, extract_event
from shared.ingest.persist import persist_event
from shared.ingest.resolve import judge_new_memories
from shared.models import EventStage, MemoryType
from shared.ports import Embedder
from shared.queues import TaskName
from shared.storage import FollowUp, UnitOfWork

log = logging.getLogger(__name__)

# The stages a batch is carried through in one unit of work (the tasks of these stages are the
# slow path: a re-drive by the stalled sweep, or one event alone after its batch failed).
FUSED_STAGES: frozenset[str] = frozenset(
    {TaskName.EXTRACT.value, TaskName.EMBED.value, TaskName.PERSIST.value}
)


@dataclass(frozen=True)
class IngestSteps:
    """What the fused stages need (built by the composition root from the settings)."""

    threshold: float
    extractor: Extractor
    embedder: Embedder
    keep_turns: bool
    window: int
    alone: bool = False  # each turn embedded by itself too (``Settings.turn_alone_vector``)
    # The conflict judge when it is the rules: new memories are then judged right after persist,
    # in the same unit, and the index is written once, after the verdicts. None (an LLM judges,
    # seconds a pair) keeps resolve its own stage, so that one slow judgement holds up no batch.
    judge: Judge | None = None
    strategies: Mapping[MemoryType, Strategy] | None = None


def advance_events(
    uow: UnitOfWork, event_ids: Sequence[str], steps: IngestSteps, now: datetime
) -> list[FollowUp]:
    """Carry these events from wherever they stand (recorded, extracted or embedded) to persisted,
    stage by stage over the whole batch, and return one ``memory.index`` message for every event
    that reached persisted (plus the next step of any event already past it: a redelivery).

    Conversations are taken in seq order, so that a turn's context window finds the turns before
    it that the same batch recorded."""
    events = _load_in_order(uow, event_ids)
    # No user lock until persist: two units of one user extract and embed at once (the model
    # call, most of the time, runs in parallel), and persist and resolve, which take the user's
    # lock, follow one after the other. Window context is read FOR KEY SHARE, which no stage
    # update waits for (``workers/db/events.py: context_before``).
    stage = {event.ref: s for event, s in events}
    for event, _ in events:
        if stage[event.ref] is EventStage.RECORDED:
            onward = extract_event(uow, event.ref, steps.threshold, now, steps.extractor, steps.keep_turns)
            # From recorded, extract moves a turn on to embed, or ends it (nothing to keep).
            stage[event.ref] = EventStage.EXTRACTED if onward else EventStage.DONE
    to_embed = [event for event, _ in events if stage[event.ref] is EventStage.EXTRACTED]
    stage.update(embed_events(uow, steps.embedder, to_embed, steps.keep_turns, steps.window, steps.alone))
    persisted_here: list[TurnPublished] = []
    for event, _ in events:
        if stage[event.ref] is EventStage.EMBEDDED:
            persist_event(uow, event.ref, now)
            stage[event.ref] = EventStage.PERSISTED
            persisted_here.append(event)
    if steps.judge is not None:
        for event in persisted_here:
            judge_new_memories(uow, event, steps.judge, steps.embedder, now, steps.strategies)
    # What this unit brought to persisted (judged, with the rules) goes to the index in one
    # message, which may end them. An event it found persisted already (another worker's, on the
    # slow path) is sent on alone, as the slow path would, and resolved after its index.
    here = [
        e.ref for e, was in events if was is not EventStage.PERSISTED and stage[e.ref] is EventStage.PERSISTED
    ]
    followups = [FollowUp(TaskName.INDEX.value, (here, steps.judge is not None))] if here else []
    for event, _ in events:
        if event.ref not in here and stage[event.ref] is not EventStage.DONE:
            followups += next_step(event.ref, stage[event.ref].value)
    log.info(
        "advanced %d events in one unit: %d embedded together, %d to index",
        len(events),
        len(to_embed),
        len(here),
    )
    return followups


def _load_in_order(uow: UnitOfWork, refs: Sequence[str]) -> list[tuple[TurnPublished, EventStage]]:
    """The events that exist, ordered by conversation and seq (a vanished id is skipped: its
    message, not this batch, says so on the slow path)."""
    loaded: list[tuple[TurnPublished, EventStage]] = []
    for ref in dict.fromkeys(refs):
        stored = uow.events.get(ref)
        if stored is not None:
            loaded.append((stored.event, EventStage(stored.stage)))
    return sorted(loaded, key=lambda pair: (*pair[0].conversation, pair[0].seq))
