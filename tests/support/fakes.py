"""In-memory fakes of the storage port, for unit tests of the core (no patching of imports):
``FakeStore().uow`` is a unit-of-work factory like the real one, its repositories the fakes of
``tests/support/fake_*.py``, one module per SQL adapter module of ``workers/db/``."""

from __future__ import annotations

import copy

from tests.support.fake_events import FakeEventRepository, FakeReceiptRepository
from tests.support.fake_lifecycle import FakeLifecycleRepository
from tests.support.fake_memories import FakeMemoryRepository
from tests.support.fake_memory_index import FakeMemoryIndexRepository
from tests.support.fake_records import (
    FakeDeadLetterRepository,
    FakeHistoryRepository,
    FakeLlmCallRepository,
    FakeMetaRepository,
)
from tests.support.fake_state import FakeState
from tests.support.fake_turn_index import FakeTurnIndexRepository


class FakeUnitOfWork:
    """Commits by swapping in the working copy; leaving without commit discards it."""

    outages: tuple[type[BaseException], ...] = ()

    def __init__(self, store: FakeStore):
        self._store = store
        self.committed = False

    def __enter__(self) -> FakeUnitOfWork:
        self._work = copy.deepcopy(self._store.state)
        self.events = FakeEventRepository(self._work)
        self.receipts = FakeReceiptRepository(self._work)
        self.memories = FakeMemoryRepository(self._work)
        self.memory_index = FakeMemoryIndexRepository(self._work)
        self.turn_index = FakeTurnIndexRepository(self._work)
        self.lifecycle = FakeLifecycleRepository(self._work)
        self.dead_letters = FakeDeadLetterRepository(self._work)
        self.meta = FakeMetaRepository(self._work)
        self.history = FakeHistoryRepository(self._work)
        self.llm_calls = FakeLlmCallRepository(self._work)
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def commit(self) -> None:
        self._store.state = copy.deepcopy(self._work)
        self._store.commits += 1
        self.committed = True

    def rollback(self) -> None:
        self._work = copy.deepcopy(self._store.state)


class FakeStore:
    """The fake database: ``store.uow()`` is a unit-of-work factory like the real one."""

    def __init__(self) -> None:
        self.state = FakeState()
        self.commits = 0

    def uow(self) -> FakeUnitOfWork:
        return FakeUnitOfWork(self)
