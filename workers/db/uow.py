"""The SQLAlchemy unit of work: one session, one transaction, repositories bound to it."""

from __future__ import annotations

from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from shared.api_keys import ApiKeyRepository
from shared.erasure import RowData
from shared.insight import InsightRepository, TraceContextRepository
from shared.storage import (
    CurationRepository,
    DeadLetterRepository,
    EventRepository,
    HistoryRepository,
    LifecycleRepository,
    LlmCallRepository,
    MemoryIndexRepository,
    MemoryRepository,
    MetaRepository,
    ReceiptRepository,
    TurnIndexRepository,
)
from shared.transfer import TransferRepository
from workers.db.curation import SqlApiKeyRepository, SqlCurationRepository
from workers.db.erasure import SqlUserData
from workers.db.events import SqlEventRepository, SqlReceiptRepository
from workers.db.insight import SqlInsight, SqlTraceContexts
from workers.db.lifecycle import SqlLifecycleRepository
from workers.db.memories import SqlMemoryRepository
from workers.db.memory_index import SqlMemoryIndexRepository
from workers.db.records import (
    SqlDeadLetterRepository,
    SqlHistoryRepository,
    SqlLlmCallRepository,
    SqlMetaRepository,
)
from workers.db.transfer import SqlTransfer
from workers.db.turn_index import SqlTurnIndexRepository


class SqlUnitOfWork:
    outages: tuple[type[BaseException], ...] = (OperationalError, InterfaceError)

    def __init__(self, session_factory: sessionmaker[Session]):
        self._session_factory = session_factory

    def __enter__(self) -> SqlUnitOfWork:
        self.session = self._session_factory()
        # Typed as the ports: mypy checks here that each SQL repository implements its protocol.
        self.events: EventRepository = SqlEventRepository(self.session)
        self.receipts: ReceiptRepository = SqlReceiptRepository(self.session)
        self.memories: MemoryRepository = SqlMemoryRepository(self.session)
        self.memory_index: MemoryIndexRepository = SqlMemoryIndexRepository(self.session)
        self.turn_index: TurnIndexRepository = SqlTurnIndexRepository(self.session)
        self.lifecycle: LifecycleRepository = SqlLifecycleRepository(self.session)
        self.dead_letters: DeadLetterRepository = SqlDeadLetterRepository(self.session)
        self.meta: MetaRepository = SqlMetaRepository(self.session)
        self.history: HistoryRepository = SqlHistoryRepository(self.session)
        self.llm_calls: LlmCallRepository = SqlLlmCallRepository(self.session)
        self.api_keys: ApiKeyRepository = SqlApiKeyRepository(self.session)
        self.curation: CurationRepository = SqlCurationRepository(self.session)
        self.erasure: RowData = SqlUserData(self.session)
        self.transfer: TransferRepository = SqlTransfer(self.session)
        self.insight: InsightRepository = SqlInsight(self.session)
        self.traces: TraceContextRepository = SqlTraceContexts(self.session)
        return self

    def __exit__(self, *exc: object) -> None:
        # Whatever was not committed explicitly is rolled back: a failed task writes nothing.
        self.session.rollback()
        self.session.close()

    def commit(self) -> None:
        self.session.commit()

    def rollback(self) -> None:
        self.session.rollback()
