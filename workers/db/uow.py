"""The SQLAlchemy unit of work: one session, one transaction, repositories bound to it."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from workers.db.curation import SqlApiKeyRepository, SqlCurationRepository
from workers.db.events import SqlEventRepository, SqlReceiptRepository
from workers.db.lifecycle import SqlLifecycleRepository
from workers.db.memories import SqlMemoryRepository
from workers.db.memory_index import SqlMemoryIndexRepository
from workers.db.records import (
    SqlDeadLetterRepository,
    SqlHistoryRepository,
    SqlLlmCallRepository,
    SqlMetaRepository,
)


class SqlUnitOfWork:
    def __init__(self, session_factory: sessionmaker[Session]):
        self._session_factory = session_factory

    def __enter__(self) -> SqlUnitOfWork:
        self.session = self._session_factory()
        self.events = SqlEventRepository(self.session)
        self.receipts = SqlReceiptRepository(self.session)
        self.memories = SqlMemoryRepository(self.session)
        self.memory_index = SqlMemoryIndexRepository(self.session)
        self.lifecycle = SqlLifecycleRepository(self.session)
        self.dead_letters = SqlDeadLetterRepository(self.session)
        self.meta = SqlMetaRepository(self.session)
        self.history = SqlHistoryRepository(self.session)
        self.llm_calls = SqlLlmCallRepository(self.session)
        self.api_keys = SqlApiKeyRepository(self.session)
        self.curation = SqlCurationRepository(self.session)
        return self

    def __exit__(self, *exc: object) -> None:
        # Whatever was not committed explicitly is rolled back: a failed task writes nothing.
        self.session.rollback()
        self.session.close()

    def commit(self) -> None:
        self.session.commit()

    def rollback(self) -> None:
        self.session.rollback()
