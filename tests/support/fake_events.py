"""Fakes of the event log and the receipts (``workers/db/events.py``); the turns' vectors and turn
index bookkeeping, on the same rows, are ``fake_turn_index.py``'s."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from shared.events import TurnPublished, event_ref
from shared.language.timeexpr import Span
from shared.storage import Receipt, StoredEvent
from tests.support.fake_state import FakeRepository, events_of


class FakeEventRepository(FakeRepository):
    def insert_if_absent(self, event: TurnPublished, stage: str) -> bool:
        if dict.__contains__(self.s.events, event.ref) or self.at_seq(*event.conversation, event.seq):
            return False
        self.s.events[event.ref] = {
            "event": event, "stage": stage, "importance": None, "stage_at": datetime.now(UTC)
        }  # fmt: skip
        self.s.received[event.ref] = len(self.s.received)
        return True

    def get(self, ref: str) -> StoredEvent | None:
        row = self.s.events.get(ref)
        return _stored(row) if row else None

    def at_seq(self, tenant_id: str, user_id: str, session_id: str, seq: int) -> StoredEvent | None:
        for row in self.s.events.values():
            e = row["event"]
            if e.conversation == (tenant_id, user_id, session_id) and e.seq == seq:
                return _stored(row)
        return None

    def max_seq(self, tenant_id: str, user_id: str, session_id: str) -> int:
        seqs = [
            r["event"].seq
            for r in self.s.events.values()
            if r["event"].conversation == (tenant_id, user_id, session_id)
        ]
        return max(seqs, default=0)

    def set_stage(
        self,
        ref: str,
        stage: str,
        *,
        importance: float | None = None,
        reasons: Sequence[str] = (),
        happened: Span | None = None,
    ) -> None:
        row = self.s.events[ref]
        row["stage"] = stage
        row["stage_at"] = datetime.now(UTC)
        if importance is not None:
            row["importance"] = importance
        if happened is not None:
            row["happened"] = happened

    def timeline(self, tenant_id: str, user_id: str, session_id: str) -> list[StoredEvent]:
        rows = [
            r for r in self.s.events.values() if r["event"].conversation == (tenant_id, user_id, session_id)
        ]
        return [_stored(r) for r in sorted(rows, key=lambda r: r["event"].seq)]

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
        return [_stored(r) for r in rows[:limit]]

    def user_offset(self, tenant_id: str, user_id: str) -> int | None:
        turns = [t.event for t in self.recent(tenant_id, user_id, len(self.s.events))]
        offsets = (t.at.utcoffset() for t in turns if t.role.value == "user")
        return next((int(o.total_seconds()) for o in offsets if o is not None), None)

    def stages(self, refs: Sequence[str]) -> dict[str, str]:
        return {i: self.s.events[i]["stage"] for i in refs if i in self.s.events}

    def of_user(
        self, tenant_id: str, user_id: str, event_ids: Sequence[str], windows_of: Sequence[str] = ()
    ) -> list[StoredEvent]:
        owned = dict(events_of(self.s, tenant_id, user_id))
        lending = set(windows_of)
        wanted = set(event_ids) | {w for i in lending if i in owned for w in _stored(owned[i]).window}
        return [_stored(r) for i, r in owned.items() if i in wanted]

    def in_window(self, tenant_id, user_id, start, end, limit) -> list[StoredEvent]:
        rows = [
            r
            for r in self.s.events.values()
            if (r["event"].tenant_id, r["event"].user_id) == (tenant_id, user_id)
            and start <= r["event"].at < end
        ]
        rows.sort(key=lambda r: (-r["event"].at.timestamp(), r["event"].event_id))
        return [_stored(r) for r in rows[:limit]]

    def happened_in(self, tenant_id, user_id, start, end, limit) -> list[StoredEvent]:
        rows = [
            r
            for r in self.s.events.values()
            if (r["event"].tenant_id, r["event"].user_id) == (tenant_id, user_id)
            and r.get("happened") is not None
            and r["happened"][0] < end
            and r["happened"][1] > start
        ]
        rows.sort(key=lambda r: (-r["happened"][0].timestamp(), r["event"].event_id))
        return [_stored(r) for r in rows[:limit]]

    def redact(self, tenant_id, user_id, event_ids) -> list[tuple[str, str]]:
        import dataclasses

        out = []
        for i in event_ids:
            row = self.s.events.get(event_ref(tenant_id, i))
            if row is None or row["event"].user_id != user_id:
                continue
            row["event"] = dataclasses.replace(row["event"], content="", metadata={"redacted": True})
            row.update(
                embedding=None, embedding_model=None, alone=None, turn_indexed=True, window=(), happened=None
            )
            out.append((i, row["event"].session_id))
        return sorted(out)

    def context_before(self, tenant_id, user_id, session_id, seq, limit) -> list[StoredEvent]:
        rows = sorted(
            (r["event"].seq, i)
            for i, r in self.s.events.items()
            if r["event"].conversation == (tenant_id, user_id, session_id)
            and r["event"].seq < seq
            and not r["event"].metadata.get("redacted")
        )
        return [_stored(self.s.events[i]) for _, i in rows[len(rows) - limit :]] if limit > 0 else []

    def stalled(self, stuck_before: datetime, limit: int) -> list[tuple[str, str]]:
        parked = {d.event_id for d in self.s.dead_letters}  # the fake's letters are never replayed
        rows = [
            (r["stage_at"], i, r["stage"])
            for i, r in self.s.events.items()
            if r["stage"] != "done" and i not in parked
        ]
        return [(i, stage) for at, i, stage in sorted(rows) if at < stuck_before][:limit]


def _stored(row: dict[str, Any]) -> StoredEvent:
    return StoredEvent(
        row["event"], row["stage"], row["importance"], row.get("happened"), tuple(row.get("window", ()))
    )


class FakeReceiptRepository(FakeRepository):
    def add_if_absent(self, receipt: Receipt) -> bool:
        key = event_ref(receipt.tenant_id, receipt.event_id)
        if dict.__contains__(self.s.receipts, key):
            return False
        self.s.receipts[key] = receipt
        return True

    def get_many(self, tenant_id: str, event_ids: Sequence[str]) -> dict[str, Receipt]:
        rows = dict(self.s.receipts)  # keyed exactly: a bare id must not find another tenant's
        return {i: rows[event_ref(tenant_id, i)] for i in event_ids if event_ref(tenant_id, i) in rows}

    def rejected(self, limit: int = 100) -> list[Receipt]:
        return [r for r in self.s.receipts.values() if r.outcome == "rejected"][:limit]
