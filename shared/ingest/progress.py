"""How far a set of published events has got: what `cuemem ingest --wait` waits on."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from shared.events import event_ref, split_ref
from shared.models import EventStage
from shared.storage import UnitOfWork

FINAL = frozenset({"done", "duplicate", "rejected", "failed"})
CHUNK = 1000


@dataclass
class Progress:
    states: dict[str, str] = field(default_factory=dict)  # pipeline key -> state
    reasons: dict[str, str] = field(default_factory=dict)  # pipeline key -> why rejected or failed

    @property
    def counts(self) -> Counter[str]:
        return Counter(self.states.values())

    @property
    def finished(self) -> int:
        return sum(1 for s in self.states.values() if s in FINAL)

    @property
    def complete(self) -> bool:
        return all(s in FINAL for s in self.states.values())


def progress(uow: UnitOfWork, refs: Sequence[str]) -> Progress:
    """How far the events these pipeline keys (``shared.events.event_ref``) name have got. A dead
    letter names an event id without its tenant: one of another tenant's turns with the same id
    counts too (an operator's view: the CLI waits on every tenant's turns)."""
    out = Progress()
    for start in range(0, len(refs), CHUNK):
        chunk = list(refs[start : start + CHUNK])
        by_tenant: dict[str, list[str]] = {}
        for ref in chunk:
            tenant, event_id = split_ref(ref)
            by_tenant.setdefault(tenant or "default", []).append(event_id)
        receipts = {
            event_ref(tenant, event_id): receipt
            for tenant, ids in by_tenant.items()
            for event_id, receipt in uow.receipts.get_many(tenant, ids).items()
        }
        stages = uow.events.stages(chunk)
        failed_ids = uow.dead_letters.for_events([split_ref(ref)[1] for ref in chunk])
        failed = {ref: failed_ids[split_ref(ref)[1]] for ref in chunk if split_ref(ref)[1] in failed_ids}
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
