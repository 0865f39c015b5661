"""How far a set of published events has got: what `cuemem ingest --wait` waits on."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from shared.models import EventStage
from shared.storage import UnitOfWork

FINAL = frozenset({"done", "duplicate", "rejected", "failed"})
CHUNK = 1000


@dataclass
class Progress:
    states: dict[str, str] = field(default_factory=dict)  # event id -> state
    reasons: dict[str, str] = field(default_factory=dict)  # event id -> why rejected or failed

    @property
    def counts(self) -> Counter[str]:
        return Counter(self.states.values())

    @property
    def finished(self) -> int:
        return sum(1 for s in self.states.values() if s in FINAL)

    @property
    def complete(self) -> bool:
        return all(s in FINAL for s in self.states.values())


def progress(uow: UnitOfWork, event_ids: Sequence[str]) -> Progress:
    out = Progress()
    for start in range(0, len(event_ids), CHUNK):
        chunk = list(event_ids[start : start + CHUNK])
        receipts = uow.receipts.get_many(chunk)
        stages = uow.events.stages(chunk)
        failed = uow.dead_letters.for_events(chunk)
        for event_id in chunk:
            receipt = receipts.get(event_id)
            if event_id in failed and stages.get(event_id) != EventStage.DONE.value:
                out.states[event_id] = "failed"
                out.reasons[event_id] = failed[event_id]
            elif receipt is None:
                out.states[event_id] = "queued"
            elif receipt.outcome == "rejected":
                out.states[event_id] = "rejected"
                out.reasons[event_id] = receipt.reason or "rejected"
            elif receipt.outcome == "duplicate":
                out.states[event_id] = "duplicate"
            else:
                out.states[event_id] = stages.get(event_id, "queued")
    return out
