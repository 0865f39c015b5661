"""In-memory fakes of the storage port, for unit tests of the core (no patching of imports)."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from shared.events import TurnPublished
from shared.models import Memory, MemoryStatus
from shared.storage import DeadLetter, HistoryEntry, Receipt, StoredEvent, TurnState


class _State:
    def __init__(self) -> None:
        self.events: dict[str, dict[str, Any]] = {}
        self.receipts: dict[str, Receipt] = {}
        self.memories: dict[str, Memory] = {}
        self.dead_letters: list[DeadLetter] = []
        self.meta: dict[str, str] = {}
        self.received: dict[str, int] = {}
        self.history: list[HistoryEntry] = []
        self.llm_calls: list[tuple[Any, str | None]] = []
        self.recall_claims: dict[str, datetime] = {}
        self.indexed_scores: dict[str, float] = {}  # memories.indexed_score


def _without_vector(memory: Memory) -> Memory:
    """Recall reads leave the embedding unloaded in the SQL adapter; the fake does the same."""
    out = copy.deepcopy(memory)
    out.embedding = None
    return out


class FakeEventRepository:
    def __init__(self, state: _State):
        self.s = state

    def insert_if_absent(self, event: TurnPublished, stage: str) -> bool:
        if event.event_id in self.s.events or self.at_seq(*event.conversation, event.seq) is not None:
            return False
        self.s.events[event.event_id] = {
            "event": event, "stage": stage, "importance": None, "stage_at": datetime.now(UTC)
        }  # fmt: skip
        self.s.received[event.event_id] = len(self.s.received)
        return True

    def get(self, event_id: str) -> StoredEvent | None:
        row = self.s.events.get(event_id)
        return StoredEvent(row["event"], row["stage"], row["importance"]) if row else None

    def at_seq(self, tenant_id: str, user_id: str, session_id: str, seq: int) -> StoredEvent | None:
        for row in self.s.events.values():
            e = row["event"]
            if e.conversation == (tenant_id, user_id, session_id) and e.seq == seq:
                return StoredEvent(e, row["stage"], row["importance"])
        return None

    def max_seq(self, tenant_id: str, user_id: str, session_id: str) -> int:
        seqs = [
            r["event"].seq
            for r in self.s.events.values()
            if r["event"].conversation == (tenant_id, user_id, session_id)
        ]
        return max(seqs, default=0)

    def set_stage(
        self, event_id: str, stage: str, *, importance: float | None = None, reasons: Sequence[str] = ()
    ) -> None:
        self.s.events[event_id]["stage"] = stage
        self.s.events[event_id]["stage_at"] = datetime.now(UTC)
        if importance is not None:
            self.s.events[event_id]["importance"] = importance

    def timeline(self, tenant_id: str, user_id: str, session_id: str) -> list[StoredEvent]:
        rows = [
            r for r in self.s.events.values() if r["event"].conversation == (tenant_id, user_id, session_id)
        ]
        return [
            StoredEvent(r["event"], r["stage"], r["importance"])
            for r in sorted(rows, key=lambda r: r["event"].seq)
        ]

    def recent(
        self, tenant_id: str, user_id: str, limit: int, session_id: str | None = None
    ) -> list[StoredEvent]:
        rows = [
            r
            for r in self.s.events.values()
            if r["event"].tenant_id == tenant_id
            and r["event"].user_id == user_id
            and (session_id is None or r["event"].session_id == session_id)
        ]
        rows.sort(key=lambda r: (r["event"].at, r["event"].seq), reverse=True)
        return [StoredEvent(r["event"], r["stage"], r["importance"]) for r in rows[:limit]]

    def stages(self, event_ids: Sequence[str]) -> dict[str, str]:
        return {i: self.s.events[i]["stage"] for i in event_ids if i in self.s.events}

    def of_user(self, tenant_id: str, user_id: str, event_ids: Sequence[str]) -> list[StoredEvent]:
        rows = [self.s.events[i] for i in event_ids if i in self.s.events]
        return [
            StoredEvent(r["event"], r["stage"], r["importance"])
            for r in rows
            if r["event"].tenant_id == tenant_id and r["event"].user_id == user_id
        ]

    def in_window(self, tenant_id, user_id, start, end, limit) -> list[StoredEvent]:
        rows = [
            r
            for r in self.s.events.values()
            if (r["event"].tenant_id, r["event"].user_id) == (tenant_id, user_id)
            and start <= r["event"].at < end
        ]
        rows.sort(key=lambda r: (-r["event"].at.timestamp(), r["event"].event_id))
        return [StoredEvent(r["event"], r["stage"], r["importance"]) for r in rows[:limit]]

    def redact(self, tenant_id, user_id, event_ids) -> list[tuple[str, str]]:
        import dataclasses

        out = []
        for i in event_ids:
            row = self.s.events.get(i)
            if row is None or (row["event"].tenant_id, row["event"].user_id) != (tenant_id, user_id):
                continue
            row["event"] = dataclasses.replace(row["event"], content="", metadata={"redacted": True})
            row.update(embedding=None, embedding_model=None, turn_indexed=True)
            out.append((i, row["event"].session_id))
        return sorted(out)

    def set_turn_vector(self, event_id: str, vector: Sequence[float], model: str) -> None:
        row = self.s.events[event_id]
        row.update(embedding=list(vector), embedding_model=model, turn_indexed=False)

    def turns_to_index(self, tenant_id, user_id, limit, after_event_id=""):
        rows = sorted(
            (i, r)
            for i, r in self.s.events.items()
            if r.get("embedding") is not None
            and not r.get("turn_indexed")
            and i > after_event_id
            and (r["event"].tenant_id, r["event"].user_id) == (tenant_id, user_id)
        )
        return [(r["event"], list(r["embedding"]), r["embedding_model"]) for _, r in rows[:limit]]

    def mark_turns_indexed(self, event_ids: Sequence[str], indexed: bool = True) -> None:
        for i in event_ids:
            if i in self.s.events:
                self.s.events[i]["turn_indexed"] = indexed

    def page_turns(self, after_event_id, limit):
        rows = sorted((i, r) for i, r in self.s.events.items() if i > after_event_id)[:limit]
        return [(r["event"], r.get("embedding"), r.get("embedding_model")) for _, r in rows]

    def reset_turns_indexed(self) -> None:
        for r in self.s.events.values():
            r["turn_indexed"] = False

    def _user_rows(self, tenant_id: str, user_id: str) -> list[tuple[str, dict[str, Any]]]:
        return sorted(
            (i, r)
            for i, r in self.s.events.items()
            if (r["event"].tenant_id, r["event"].user_id) == (tenant_id, user_id)
        )

    def turn_states(self, tenant_id: str, user_id: str) -> list[TurnState]:
        return [
            TurnState(
                r["event"],
                r["stage"],
                r.get("embedding_model") if r.get("embedding") is not None else None,
                bool(r.get("turn_indexed")),
            )
            for _, r in self._user_rows(tenant_id, user_id)
        ]

    def turn_vectors(self, tenant_id: str, user_id: str, event_ids: Sequence[str]) -> dict[str, list[float]]:
        wanted = set(event_ids)
        return {
            i: list(r["embedding"])
            for i, r in self._user_rows(tenant_id, user_id)
            if i in wanted and r.get("embedding") is not None
        }

    def users_page(self, after: tuple[str, str] | None, limit: int) -> list[tuple[str, str]]:
        pairs = sorted({(r["event"].tenant_id, r["event"].user_id) for r in self.s.events.values()})
        return [p for p in pairs if after is None or p > after][:limit]

    def stalled(self, stuck_before: datetime, limit: int) -> list[tuple[str, str]]:
        rows = [(r["stage_at"], i, r["stage"]) for i, r in self.s.events.items() if r["stage"] != "done"]
        return [(i, stage) for at, i, stage in sorted(rows) if at < stuck_before][:limit]


class FakeReceiptRepository:
    def __init__(self, state: _State):
        self.s = state

    def add_if_absent(self, receipt: Receipt) -> bool:
        if receipt.event_id in self.s.receipts:
            return False
        self.s.receipts[receipt.event_id] = receipt
        return True

    def get_many(self, event_ids: Sequence[str]) -> dict[str, Receipt]:
        return {i: self.s.receipts[i] for i in event_ids if i in self.s.receipts}

    def rejected(self, limit: int = 100) -> list[Receipt]:
        return [r for r in self.s.receipts.values() if r.outcome == "rejected"][:limit]


class FakeMemoryRepository:
    def __init__(self, state: _State):
        self.s = state

    def lock_user(self, tenant_id: str, user_id: str) -> None:
        return None  # the fake is single-threaded: nothing to serialise

    def _mine(self, tenant_id: str, user_id: str) -> list[Memory]:
        return [m for m in self.s.memories.values() if m.tenant_id == tenant_id and m.user_id == user_id]

    def add(self, memory: Memory) -> None:
        self.s.memories.setdefault(memory.id, copy.deepcopy(memory))

    def get(self, tenant_id: str, user_id: str, memory_id: str) -> Memory | None:
        m = self.s.memories.get(memory_id)
        return copy.deepcopy(m) if m and m.tenant_id == tenant_id and m.user_id == user_id else None

    def get_many(self, tenant_id: str, user_id: str, ids: Sequence[str]) -> list[Memory]:
        return [_without_vector(m) for m in self._mine(tenant_id, user_id) if m.id in set(ids)]

    def save(self, memory: Memory) -> None:
        current = self.s.memories.get(memory.id)
        if current and current.tenant_id == memory.tenant_id and current.user_id == memory.user_id:
            self.s.memories[memory.id] = copy.deepcopy(memory)

    def from_event(self, event_id: str) -> list[Memory]:
        found = [m for m in self.s.memories.values() if m.sources and m.sources[0]["event_id"] == event_id]
        return [copy.deepcopy(m) for m in sorted(found, key=lambda m: m.id)]

    def active_with_hash(
        self, tenant_id: str, user_id: str, content_hash: str, exclude_id: str
    ) -> Memory | None:
        found = [
            m
            for m in self._mine(tenant_id, user_id)
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
            m for m in self._mine(tenant_id, user_id) if m.status in allowed and wanted.intersection(m.cues)
        ]
        found.sort(key=lambda m: (-m.score, m.id))
        return [_without_vector(m) for m in found[:limit]]

    def for_user(self, tenant_id: str, user_id: str, statuses: Iterable[MemoryStatus] | None) -> list[Memory]:
        allowed = set(statuses) if statuses is not None else None
        found = [m for m in self._mine(tenant_id, user_id) if allowed is None or m.status in allowed]
        return [copy.deepcopy(m) for m in sorted(found, key=lambda m: (m.created_at, m.id))]

    def candidates(
        self,
        tenant_id: str,
        user_id: str,
        slot: str | None,
        cues: Sequence[str],
        exclude: Sequence[str],
        limit: int,
    ) -> list[Memory]:
        wanted = set(cues)
        found = [
            m
            for m in self._mine(tenant_id, user_id)
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
            for m in self._mine(tenant_id, user_id)
            if m.status in allowed and any(s["event_id"] == event_id for s in m.sources)
        ]
        return [copy.deepcopy(m) for m in sorted(found, key=lambda m: ((m.valid_from or m.created_at), m.id))]

    def by_sources(self, tenant_id, user_id, event_ids, statuses) -> list[Memory]:
        wanted, allowed = set(event_ids), set(statuses)
        found = [
            m
            for m in self._mine(tenant_id, user_id)
            if m.status in allowed and any(s["event_id"] in wanted for s in m.sources)
        ]
        return [copy.deepcopy(m) for m in sorted(found, key=lambda m: ((m.valid_from or m.created_at), m.id))]

    def cue_counts(self, tenant_id, user_id, cues, statuses) -> tuple[int, dict[str, int]]:
        allowed = set(statuses)
        mine = [m for m in self._mine(tenant_id, user_id) if m.status in allowed]
        counts = {c: sum(1 for m in mine if c in m.cues) for c in cues}
        return len(mine), {c: n for c, n in counts.items() if n}

    def in_window(
        self, tenant_id, user_id, start, end, statuses, limit, with_embedding=False
    ) -> list[Memory]:
        allowed = set(statuses)
        found = [
            m
            for m in self._mine(tenant_id, user_id)
            if m.status in allowed and start <= (m.valid_from or m.created_at) < end
        ]
        found.sort(key=lambda m: (-(m.valid_from or m.created_at).timestamp(), m.id))
        return [m if with_embedding else _without_vector(m) for m in found[:limit]]

    def recent_of_type(self, tenant_id, user_id, memory_type, since, limit) -> list[Memory]:
        found = [
            m
            for m in self._mine(tenant_id, user_id)
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

    def unindexed(self, tenant_id: str, user_id: str, limit: int, after_id: str = "") -> list[Memory]:
        found = [
            m
            for m in self._mine(tenant_id, user_id)
            if m.indexed_version < m.version and m.status is not MemoryStatus.PENDING and m.id > after_id
        ]
        return [copy.deepcopy(m) for m in sorted(found, key=lambda m: m.id)[:limit]]

    def mark_indexed(self, memory_ids_versions: Sequence[tuple[str, int]]) -> None:
        for memory_id, version in memory_ids_versions:
            m = self.s.memories[memory_id]
            if m.indexed_version < version:
                m.indexed_version = version
                self.s.indexed_scores[memory_id] = m.score

    def page_for_reindex(self, after_id: str, limit: int) -> list[Memory]:
        found = sorted(
            (m for m in self.s.memories.values() if m.id > after_id and m.status is not MemoryStatus.PENDING),
            key=lambda m: m.id,
        )
        return [copy.deepcopy(m) for m in found[:limit]]

    def recompute_scores(self, now, policy, after_id: str, limit: int) -> tuple[int, str | None]:
        from shared.scoring import score

        page = sorted((m for m in self.s.memories.values() if m.id > after_id), key=lambda m: m.id)[:limit]
        if not page:
            return 0, None
        changed = 0
        for m in page:
            if m.status is MemoryStatus.PENDING:
                continue
            new = score(m.importance, m.type, m.last_accessed_at, m.access_count, now, policy)
            if abs(new - m.score) > 1e-9:
                m.score = new
                changed += 1
        return changed, page[-1].id

    def reset_indexed(self) -> None:
        for m in self.s.memories.values():
            m.indexed_version = 0

    def embedding_models(self) -> set[str]:
        return {m.embedding_model for m in self.s.memories.values() if m.embedding_model}

    # --- lifecycle: the same semantics as the SQL adapter, row by row ---------------------------

    def claim_recall(self, recall_id: str, tenant_id: str, user_id: str, at: datetime) -> bool:
        if recall_id in self.s.recall_claims:
            return False
        self.s.recall_claims[recall_id] = at
        return True

    def reinforce(self, tenant_id, user_id, ids, now, policy) -> int:
        from shared.scoring import score

        changed = 0
        for m in self._mine(tenant_id, user_id):
            if m.id in set(ids) and m.status is not MemoryStatus.PENDING:
                m.access_count += 1
                m.last_accessed_at = max(m.last_accessed_at, now)
                m.score = score(m.importance, m.type, m.last_accessed_at, m.access_count, now, policy)
                changed += 1
        return changed

    def prune_recall_claims(self, before: datetime) -> int:
        old = [r for r, at in self.s.recall_claims.items() if at < before]
        for recall_id in old:
            del self.s.recall_claims[recall_id]
        return len(old)

    def _move(self, candidates, status, reason_of, now, after_id, limit):
        from shared.storage import StatusChange

        page = sorted(
            (m for m in self.s.memories.values() if m.id > after_id and candidates(m)), key=lambda m: m.id
        )
        changes = []
        for m in page[:limit]:
            m.status, m.status_reason = status, reason_of(m)
            m.version += 1
            m.updated_at = now
            changes.append(StatusChange(m.id, m.tenant_id, m.user_id, m.status_reason))
        return changes, (changes[-1].memory_id if len(changes) == limit else None)

    def expire_tasks(self, now, stated_before, reasons, after_id, limit):
        def due(m: Memory) -> bool:
            if m.status is not MemoryStatus.ACTIVE or m.type.value != "task":
                return False
            return m.due_at <= now if m.due_at is not None else m.created_at <= stated_before

        return self._move(
            due, MemoryStatus.EXPIRED, lambda m: reasons[0] if m.due_at else reasons[1], now, after_id, limit
        )

    def archive_stale(self, since, threshold, policy, reason, now, after_id, limit):
        from shared.scoring import score

        def stale(m: Memory) -> bool:
            return (
                m.status is MemoryStatus.ACTIVE
                and m.last_accessed_at <= since
                and score(m.importance, m.type, m.last_accessed_at, m.access_count, since, policy) < threshold
            )

        return self._move(stale, MemoryStatus.ARCHIVED, lambda m: reason, now, after_id, limit)

    def stale_scores(self, after_id: str, limit: int, tolerance: float):
        from shared.storage import ScoreState

        found = [
            m
            for m in self.s.memories.values()
            if m.id > after_id
            and m.status is not MemoryStatus.PENDING
            and m.indexed_version == m.version > 0
            and m.embedding is not None
            and (m.id not in self.s.indexed_scores or abs(m.score - self.s.indexed_scores[m.id]) > tolerance)
        ]
        found.sort(key=lambda m: m.id)
        return [ScoreState(m.id, m.tenant_id, m.user_id, m.score) for m in found[:limit]]

    def mark_scores_indexed(self, scores: Sequence[tuple[str, float]]) -> None:
        for memory_id, value in scores:
            self.s.indexed_scores[memory_id] = value

    def index_states(self, tenant_id: str, user_id: str):
        from shared.storage import IndexState

        return [
            IndexState(
                m.id,
                m.version,
                m.indexed_version,
                m.status.value,
                m.score,
                m.embedding_model,
                m.embedding is not None,
            )
            for m in sorted(self._mine(tenant_id, user_id), key=lambda m: m.id)
        ]

    def users_page(self, after, limit) -> list[tuple[str, str]]:
        pairs = sorted({(m.tenant_id, m.user_id) for m in self.s.memories.values()})
        return [p for p in pairs if after is None or p > after][:limit]


class FakeHistoryRepository:
    def __init__(self, state: _State):
        self.s = state

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


class FakeLlmCallRepository:
    def __init__(self, state: _State):
        self.s = state

    def add(self, usage: Any, event_id: str | None) -> None:
        self.s.llm_calls.append((usage, event_id))


class FakeDeadLetterRepository:
    def __init__(self, state: _State):
        self.s = state

    def add(self, letter: DeadLetter) -> None:
        self.s.dead_letters.append(letter)

    def for_events(self, event_ids: Sequence[str]) -> dict[str, str]:
        return {d.event_id: d.reason for d in self.s.dead_letters if d.event_id in set(event_ids)}


class FakeMetaRepository:
    def __init__(self, state: _State):
        self.s = state

    def get(self, key: str) -> str | None:
        return self.s.meta.get(key)

    def set(self, key: str, value: str) -> None:
        self.s.meta[key] = value


class FakeUnitOfWork:
    """Commits by swapping in the working copy; leaving without commit discards it."""

    def __init__(self, store: FakeStore):
        self._store = store
        self.committed = False

    def __enter__(self) -> FakeUnitOfWork:
        self._work = copy.deepcopy(self._store.state)
        self.events = FakeEventRepository(self._work)
        self.receipts = FakeReceiptRepository(self._work)
        self.memories = FakeMemoryRepository(self._work)
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
        self.state = _State()
        self.commits = 0

    def uow(self) -> FakeUnitOfWork:
        return FakeUnitOfWork(self)
