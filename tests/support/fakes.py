"""In-memory fakes of the storage port, for unit tests of the core (no patching of imports):
``FakeStore().uow`` is a unit-of-work factory like the real one, its repositories the fakes of
``tests/support/fake_*.py``, one module per SQL adapter module of ``workers/db/``."""

from __future__ import annotations

import copy
import threading

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
    """Commits by swapping in the working copy; leaving without commit discards it. Units on
    several threads (a worker running a batch's users at once) take turns: each holds the store
    from ``with`` to its end, as if every unit locked the whole database, so none loses another's
    commit (the real adapters run them at once: tests/integration)."""

    outages: tuple[type[BaseException], ...] = ()

    def __init__(self, store: FakeStore):
        self._store = store
        self.committed = False

    def __enter__(self) -> FakeUnitOfWork:
        self._store.turn.acquire()
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
        self._store.turn.release()

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
        self.turn = threading.RLock()  # one unit at a time across threads; nested units go on

    def uow(self) -> FakeUnitOfWork:
        return FakeUnitOfWork(self)
