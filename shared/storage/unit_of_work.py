"""The unit of work: one transaction and the repositories bound to it (``workers/db/uow.py``).

The caller owns the transaction: repositories never commit; the task adapter commits the unit of
work once the service function returns, and only then enqueues follow-up work (``FollowUp``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from shared.api_keys import ApiKeyRepository
from shared.erasure import RowData
from shared.insight import InsightRepository, TraceContextRepository
from shared.storage.curation import CurationRepository
from shared.storage.events import EventRepository, ReceiptRepository
from shared.storage.lifecycle import LifecycleRepository
from shared.storage.memories import MemoryRepository
from shared.storage.memory_index import MemoryIndexRepository
from shared.storage.records import DeadLetterRepository, HistoryRepository, LlmCallRepository, MetaRepository
from shared.storage.turn_index import TurnIndexRepository
from shared.transfer import TransferRepository


class UnitOfWork(Protocol):
    """One transaction and the repositories bound to it (an adapter types its own as these)."""

    events: EventRepository
    receipts: ReceiptRepository
    memories: MemoryRepository
    memory_index: MemoryIndexRepository
    turn_index: TurnIndexRepository
    lifecycle: LifecycleRepository
    dead_letters: DeadLetterRepository
    meta: MetaRepository
    history: HistoryRepository
    llm_calls: LlmCallRepository
    api_keys: ApiKeyRepository
    curation: CurationRepository
    erasure: RowData
    transfer: TransferRepository
    insight: InsightRepository
    traces: TraceContextRepository
    # The errors of this store that mean it is unreachable, not that a row is bad: a sweep that
    # skips a bad row must not skip every row because the database is restarting.
    outages: tuple[type[BaseException], ...]

    def __enter__(self) -> UnitOfWork: ...

    def __exit__(self, *exc: object) -> None: ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...


@dataclass(frozen=True)
class FollowUp:
    """A task to enqueue once the unit of work has committed."""

    task: str
    args: tuple[Any, ...]
