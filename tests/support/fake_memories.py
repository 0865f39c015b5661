"""A fake of the memory rows (``workers/db/memories.py``)."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence

from shared.models import Memory, MemoryStatus
from tests.support.fake_state import FakeRepository, memories_of, without_vector


class FakeMemoryRepository(FakeRepository):
    """Memory rows, the same semantics as the SQL adapter."""

    def lock_user(self, tenant_id: str, user_id: str) -> None:
        return None  # the fake is single-threaded: nothing to serialise

    def add(self, memory: Memory) -> None:
        self.s.memories.setdefault(memory.id, copy.deepcopy(memory))

    def get(self, tenant_id: str, user_id: str, memory_id: str) -> Memory | None:
        m = self.s.memories.get(memory_id)
        return copy.deepcopy(m) if m and m.tenant_id == tenant_id and m.user_id == user_id else None

    def get_many(self, tenant_id: str, user_id: str, ids: Sequence[str]) -> list[Memory]:
        return [without_vector(m) for m in memories_of(self.s, tenant_id, user_id) if m.id in set(ids)]

    def save(self, memory: Memory) -> None:
        current = self.s.memories.get(memory.id)
        if current and current.tenant_id == memory.tenant_id and current.user_id == memory.user_id:
            self.s.memories[memory.id] = copy.deepcopy(memory)

    def from_event(self, tenant_id: str, user_id: str, event_id: str) -> list[Memory]:
        found = [
            m
            for m in memories_of(self.s, tenant_id, user_id)
            if m.sources and m.sources[0]["event_id"] == event_id
        ]
        return [copy.deepcopy(m) for m in sorted(found, key=lambda m: m.id)]

    def active_with_hash(
        self, tenant_id: str, user_id: str, content_hash: str, exclude_id: str
    ) -> Memory | None:
        found = [
            m
            for m in memories_of(self.s, tenant_id, user_id)
            if m.content_hash == content_hash and m.status is MemoryStatus.ACTIVE and m.id != exclude_id
        ]
        found.sort(key=lambda m: (m.created_at, m.id))
        return copy.deepcopy(found[0]) if found else None

    def delete(self, memory_id: str) -> None:
        m = self.s.memories.get(memory_id)
        if m and m.status is MemoryStatus.PENDING:
            del self.s.memories[memory_id]

    def by_cues(
        self, tenant_id: str, user_id: str, cues: Sequence[str], statuses: Iterable[MemoryStatus], limit: int
    ) -> list[Memory]:
        wanted, allowed = set(cues), set(statuses)
        found = [
            m
            for m in memories_of(self.s, tenant_id, user_id)
            if m.status in allowed and wanted.intersection(m.cues)
        ]
        found.sort(key=lambda m: (-m.score, m.id))
        return [without_vector(m) for m in found[:limit]]

    def for_user(self, tenant_id: str, user_id: str, statuses: Iterable[MemoryStatus] | None) -> list[Memory]:
        allowed = set(statuses) if statuses is not None else None
        found = [m for m in memories_of(self.s, tenant_id, user_id) if allowed is None or m.status in allowed]
        return [copy.deepcopy(m) for m in sorted(found, key=lambda m: (m.created_at, m.id))]

    def candidates(self, tenant_id, user_id, slot, cues, exclude, limit) -> list[Memory]:
        wanted = set(cues)
        found = [
            m
            for m in memories_of(self.s, tenant_id, user_id)
            if m.status is MemoryStatus.ACTIVE
            and m.id not in set(exclude)
            and ((slot and m.slot == slot) or wanted.intersection(m.cues))
        ]
        found.sort(key=lambda m: (-(m.valid_from or m.created_at).timestamp(), m.id))
        return [copy.deepcopy(m) for m in found[:limit]]

    def by_source(self, tenant_id, user_id, event_id, statuses) -> list[Memory]:
        allowed = set(statuses)
        found = [
            m
            for m in memories_of(self.s, tenant_id, user_id)
            if m.status in allowed and any(s["event_id"] == event_id for s in m.sources)
        ]
        return [copy.deepcopy(m) for m in sorted(found, key=lambda m: ((m.valid_from or m.created_at), m.id))]

    def by_sources(self, tenant_id, user_id, event_ids, statuses) -> list[Memory]:
        wanted, allowed = set(event_ids), set(statuses)
        found = [
            m
            for m in memories_of(self.s, tenant_id, user_id)
            if m.status in allowed and any(s["event_id"] in wanted for s in m.sources)
        ]
        return [copy.deepcopy(m) for m in sorted(found, key=lambda m: ((m.valid_from or m.created_at), m.id))]

    def cue_counts(self, tenant_id, user_id, cues, statuses) -> tuple[int, dict[str, int]]:
        allowed = set(statuses) - {MemoryStatus.PENDING}
        mine = [m for m in memories_of(self.s, tenant_id, user_id) if m.status in allowed]
        counts = {c: sum(1 for m in mine if c in m.cues) for c in cues}
        return len(mine), {c: n for c, n in counts.items() if n}

    def in_window(
        self, tenant_id, user_id, start, end, statuses, limit, with_embedding=False
    ) -> list[Memory]:
        allowed = set(statuses)
        found = [
            m
            for m in memories_of(self.s, tenant_id, user_id)
            if m.status in allowed and start <= (m.valid_from or m.created_at) < end
        ]
        found.sort(key=lambda m: (-(m.valid_from or m.created_at).timestamp(), m.id))
        return [m if with_embedding else without_vector(m) for m in found[:limit]]

    def happened_in(
        self, tenant_id, user_id, start, end, statuses, limit, with_embedding=False
    ) -> list[Memory]:
        allowed = set(statuses)
        found = [
            m
            for m in memories_of(self.s, tenant_id, user_id)
            if m.status in allowed
            and m.happened_from is not None
            and m.happened_to is not None
            and m.happened_from < end
            and m.happened_to > start
        ]
        found.sort(key=lambda m: (-m.happened_from.timestamp() if m.happened_from else 0.0, m.id))
        return [m if with_embedding else without_vector(m) for m in found[:limit]]

    def recent_of_type(self, tenant_id, user_id, memory_type, since, limit) -> list[Memory]:
        found = [
            m
            for m in memories_of(self.s, tenant_id, user_id)
            if m.type is memory_type
            and m.status is MemoryStatus.ACTIVE
            and (m.valid_from or m.created_at) >= since
        ]
        found.sort(key=lambda m: ((m.valid_from or m.created_at), m.id))
        return [copy.deepcopy(m) for m in found[:limit]]

    def users_with_recent(self, memory_type, since, limit) -> list[tuple[str, str]]:
        pairs = {
            (m.tenant_id, m.user_id)
            for m in self.s.memories.values()
            if m.type is memory_type
            and m.status is MemoryStatus.ACTIVE
            and (m.valid_from or m.created_at) >= since
        }
        return sorted(pairs)[:limit]
