"""Fakes of the append-only records and the meta table (``workers/db/records.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shared.storage import DeadLetter, HistoryEntry
from tests.support.fake_state import FakeRepository


class FakeHistoryRepository(FakeRepository):
    def add(self, entry: HistoryEntry) -> None:
        self.s.history.append(entry)

    def for_memories(self, tenant_id: str, user_id: str, memory_ids: Sequence[str]) -> list[HistoryEntry]:
        wanted = set(memory_ids)
        found = [
            h
            for h in self.s.history
            if h.memory_id in wanted and (h.tenant_id, h.user_id) == (tenant_id, user_id)
        ]
        return sorted(found, key=lambda h: h.at)


class FakeLlmCallRepository(FakeRepository):
    def add(self, usage: Any, event_id: str | None) -> None:
        self.s.llm_calls.append((usage, event_id))


class FakeDeadLetterRepository(FakeRepository):
    def add(self, letter: DeadLetter) -> None:
        self.s.dead_letters.append(letter)

    def for_events(self, event_ids: Sequence[str]) -> dict[str, str]:
        return {d.event_id: d.reason for d in self.s.dead_letters if d.event_id in set(event_ids)}


class FakeMetaRepository(FakeRepository):
    def get(self, key: str) -> str | None:
        return self.s.meta.get(key)

    def set(self, key: str, value: str) -> None:
        self.s.meta[key] = value
