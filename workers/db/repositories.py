"""SQLAlchemy repositories. They receive a session and never commit (the unit of work does)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, or_, select, text, true, tuple_, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session, defer, undefer

from shared.events import TurnPublished
from shared.models import Memory, MemoryStatus, MemoryType
from shared.scoring import DecayPolicy, score_sql
from shared.storage import (
    DeadLetter,
    HistoryEntry,
    IndexState,
    Receipt,
    ScoreState,
    StatusChange,
    StoredEvent,
    TurnRow,
    TurnState,
)
from workers.db.mapping import event_from_row, memory_from_row, memory_values
from workers.db.tables import (
    DeadLetterRow,
    EventRow,
    HistoryRow,
    LlmCallRow,
    MemoryRow,
    MetaRow,
    RecallClaimRow,
    ReceiptRow,
)

REDACTED_HASH = "redacted"  # not a hash of anything: a replay of the original is refused, not merged


class SqlEventRepository:
    def __init__(self, session: Session):
        self.session = session

    def insert_if_absent(self, event: TurnPublished, stage: str) -> bool:
        stmt = (
            insert(EventRow)
            .values(
                event_id=event.event_id,
                tenant_id=event.tenant_id,
                user_id=event.user_id,
                session_id=event.session_id,
                seq=event.seq,
                role=event.role.value,
                content=event.content,
                content_hash=event.content_hash,
                at=event.at,
                metadata=event.metadata,
                stage=stage,
                extraction_reasons=[],
            )
            # No conflict target: a taken event id and a taken (conversation, seq) slot both mean
            # "not inserted"; the caller tells duplicates from conflicts by re-reading the slot.
            .on_conflict_do_nothing()
            .returning(EventRow.event_id)
        )
        return self.session.execute(stmt).first() is not None

    def get(self, event_id: str) -> StoredEvent | None:
        row = self.session.get(EventRow, event_id)
        return event_from_row(row) if row else None

    def at_seq(self, tenant_id: str, user_id: str, session_id: str, seq: int) -> StoredEvent | None:
        row = self.session.scalars(
            select(EventRow).where(
                EventRow.tenant_id == tenant_id,
                EventRow.user_id == user_id,
                EventRow.session_id == session_id,
                EventRow.seq == seq,
            )
        ).first()
        return event_from_row(row) if row else None

    def max_seq(self, tenant_id: str, user_id: str, session_id: str) -> int:
        # The (tenant, user, session, seq) unique index answers this with one index probe.
        found = self.session.scalar(
            select(func.max(EventRow.seq)).where(
                EventRow.tenant_id == tenant_id,
                EventRow.user_id == user_id,
                EventRow.session_id == session_id,
            )
        )
        return int(found or 0)

    def set_stage(
        self, event_id: str, stage: str, *, importance: float | None = None, reasons: Sequence[str] = ()
    ) -> None:
        values: dict[str, object] = {"stage": stage, "stage_at": func.now()}
        if importance is not None:
            values["importance"] = importance
            values["extraction_reasons"] = list(reasons)
        if stage == "done":
            values["done_at"] = func.now()
        self.session.execute(update(EventRow).where(EventRow.event_id == event_id).values(**values))

    def timeline(self, tenant_id: str, user_id: str, session_id: str) -> list[StoredEvent]:
        rows = self.session.scalars(
            select(EventRow)
            .where(
                EventRow.tenant_id == tenant_id,
                EventRow.user_id == user_id,
                EventRow.session_id == session_id,
            )
            .order_by(EventRow.seq)
        )
        return [event_from_row(r) for r in rows]

    def recent(
        self, tenant_id: str, user_id: str, limit: int, session_id: str | None = None
    ) -> list[StoredEvent]:
        stmt = select(EventRow).where(EventRow.tenant_id == tenant_id, EventRow.user_id == user_id)
        if session_id is not None:
            stmt = stmt.where(EventRow.session_id == session_id)
        rows = self.session.scalars(stmt.order_by(EventRow.at.desc(), EventRow.seq.desc()).limit(limit))
        return [event_from_row(r) for r in rows]

    def stages(self, event_ids: Sequence[str]) -> dict[str, str]:
        if not event_ids:
            return {}
        rows = self.session.execute(
            select(EventRow.event_id, EventRow.stage).where(EventRow.event_id.in_(list(event_ids)))
        )
        return {r.event_id: r.stage for r in rows}

    def of_user(self, tenant_id: str, user_id: str, event_ids: Sequence[str]) -> list[StoredEvent]:
        if not event_ids:
            return []
        rows = self.session.scalars(
            select(EventRow).where(
                EventRow.tenant_id == tenant_id,
                EventRow.user_id == user_id,
                EventRow.event_id.in_(list(event_ids)),
            )
        )
        return [event_from_row(r) for r in rows]

    def in_window(
        self, tenant_id: str, user_id: str, start: datetime, end: datetime, limit: int
    ) -> list[StoredEvent]:
        rows = self.session.scalars(
            select(EventRow)
            .where(
                EventRow.tenant_id == tenant_id,
                EventRow.user_id == user_id,
                EventRow.at >= start,
                EventRow.at < end,
            )
            .order_by(EventRow.at.desc(), EventRow.event_id)
            .limit(limit)
        )  # ix_events_user_at
        return [event_from_row(r) for r in rows]

    def redact(self, tenant_id: str, user_id: str, event_ids: Sequence[str]) -> list[tuple[str, str]]:
        if not event_ids:
            return []
        rows = self.session.execute(
            update(EventRow)
            .where(
                EventRow.tenant_id == tenant_id,
                EventRow.user_id == user_id,
                EventRow.event_id.in_(list(event_ids)),
            )
            .values(
                content="",
                content_hash=REDACTED_HASH,
                metadata_={"redacted": True},
                embedding=None,
                embedding_model=None,
                turn_indexed=True,  # nothing to index: reconciliation must not look for a point
            )
            .returning(EventRow.event_id, EventRow.session_id)
        )
        return sorted((r.event_id, r.session_id) for r in rows)

    def set_turn_vector(self, event_id: str, vector: Sequence[float], model: str) -> None:
        self.session.execute(
            update(EventRow)
            .where(EventRow.event_id == event_id)
            .values(embedding=list(vector), embedding_model=model, turn_indexed=False)
        )

    def turns_to_index(
        self, tenant_id: str, user_id: str, limit: int, after_event_id: str = ""
    ) -> list[TurnRow]:
        rows = self.session.scalars(
            select(EventRow)
            .options(undefer(EventRow.embedding))
            .where(
                EventRow.tenant_id == tenant_id,
                EventRow.user_id == user_id,
                EventRow.embedding.is_not(None),
                EventRow.turn_indexed.is_(False),
                EventRow.event_id > after_event_id,
            )
            .order_by(EventRow.event_id)
            .limit(limit)
        )
        return [(event_from_row(r).event, list(r.embedding or []), r.embedding_model or "") for r in rows]

    def mark_turns_indexed(self, event_ids: Sequence[str], indexed: bool = True) -> None:
        if event_ids:
            self.session.execute(
                update(EventRow).where(EventRow.event_id.in_(list(event_ids))).values(turn_indexed=indexed)
            )

    def page_turns(self, after_event_id: str, limit: int) -> list[TurnRow]:
        rows = self.session.scalars(
            select(EventRow)
            .options(undefer(EventRow.embedding))
            .where(EventRow.event_id > after_event_id)
            .order_by(EventRow.event_id)
            .limit(limit)
        )
        return [
            (event_from_row(r).event, list(r.embedding) if r.embedding else None, r.embedding_model)
            for r in rows
        ]

    def reset_turns_indexed(self) -> None:
        self.session.execute(update(EventRow).values(turn_indexed=False))

    def turn_states(self, tenant_id: str, user_id: str) -> list[TurnState]:
        rows = self.session.execute(
            select(EventRow, EventRow.embedding.is_not(None).label("has_embedding"))
            .where(EventRow.tenant_id == tenant_id, EventRow.user_id == user_id)
            .order_by(EventRow.event_id)
        )
        return [
            TurnState(
                event=event_from_row(row).event,
                stage=row.stage,
                embedding_model=(row.embedding_model or "") if has_embedding else None,
                turn_indexed=bool(row.turn_indexed),
            )
            for row, has_embedding in rows
        ]

    def turn_vectors(self, tenant_id: str, user_id: str, event_ids: Sequence[str]) -> dict[str, list[float]]:
        if not event_ids:
            return {}
        rows = self.session.execute(
            select(EventRow.event_id, EventRow.embedding).where(
                EventRow.tenant_id == tenant_id,
                EventRow.user_id == user_id,
                EventRow.event_id.in_(list(event_ids)),
                EventRow.embedding.is_not(None),
            )
        )
        return {r.event_id: list(r.embedding) for r in rows}

    def users_page(self, after: tuple[str, str] | None, limit: int) -> list[tuple[str, str]]:
        stmt = select(EventRow.tenant_id, EventRow.user_id).distinct()
        if after is not None:
            stmt = stmt.where(tuple_(EventRow.tenant_id, EventRow.user_id) > tuple_(*after))
        rows = self.session.execute(stmt.order_by(EventRow.tenant_id, EventRow.user_id).limit(limit))
        return [(r.tenant_id, r.user_id) for r in rows]

    def stalled(self, stuck_before: datetime, limit: int) -> list[tuple[str, str]]:
        rows = self.session.execute(
            select(EventRow.event_id, EventRow.stage)
            .where(EventRow.stage != "done", EventRow.stage_at < stuck_before)
            .order_by(EventRow.stage_at, EventRow.event_id)
            .limit(limit)
        )
        return [(r.event_id, r.stage) for r in rows]


class SqlReceiptRepository:
    def __init__(self, session: Session):
        self.session = session

    def add_if_absent(self, receipt: Receipt) -> bool:
        stmt = (
            insert(ReceiptRow)
            .values(
                event_id=receipt.event_id,
                tenant_id=receipt.tenant_id,
                user_id=receipt.user_id,
                outcome=receipt.outcome,
                canonical_event_id=receipt.canonical_event_id,
                reason=receipt.reason,
                payload=receipt.payload,
            )
            .on_conflict_do_nothing(index_elements=[ReceiptRow.event_id])
            .returning(ReceiptRow.event_id)
        )
        return self.session.execute(stmt).first() is not None

    def get_many(self, event_ids: Sequence[str]) -> dict[str, Receipt]:
        if not event_ids:
            return {}
        rows = self.session.scalars(select(ReceiptRow).where(ReceiptRow.event_id.in_(list(event_ids))))
        return {r.event_id: _receipt(r) for r in rows}

    def rejected(self, limit: int = 100) -> list[Receipt]:
        rows = self.session.scalars(
            select(ReceiptRow)
            .where(ReceiptRow.outcome == "rejected")
            .order_by(ReceiptRow.received_at)
            .limit(limit)
        )
        return [_receipt(r) for r in rows]


def _receipt(row: ReceiptRow) -> Receipt:
    return Receipt(
        event_id=row.event_id,
        tenant_id=row.tenant_id,
        user_id=row.user_id,
        outcome=row.outcome,  # type: ignore[arg-type]
        canonical_event_id=row.canonical_event_id,
        reason=row.reason,
        payload=row.payload,
    )


class SqlMemoryRepository:
    def __init__(self, session: Session):
        self.session = session

    def lock_user(self, tenant_id: str, user_id: str) -> None:
        # Two workers persisting the same repeat for one user at once would both find no active
        # copy and both create one; a transaction-scoped advisory lock per user prevents that.
        self.session.execute(
            select(func.pg_advisory_xact_lock(func.hashtextextended(tenant_id + "\x1f" + user_id, 0)))
        )

    def add(self, memory: Memory) -> None:
        stmt = (
            insert(MemoryRow)
            .values(**memory_values(memory))
            .on_conflict_do_nothing(index_elements=[MemoryRow.id])
        )
        self.session.execute(stmt)

    def get(self, tenant_id: str, user_id: str, memory_id: str) -> Memory | None:
        row = self.session.scalars(
            select(MemoryRow).where(
                MemoryRow.id == memory_id, MemoryRow.tenant_id == tenant_id, MemoryRow.user_id == user_id
            )
        ).first()
        return memory_from_row(row) if row else None

    def get_many(self, tenant_id: str, user_id: str, ids: Sequence[str]) -> list[Memory]:
        """Without the embedding (recall re-reads index hits here and never needs the vector)."""
        if not ids:
            return []
        rows = self.session.scalars(
            select(MemoryRow)
            .where(
                MemoryRow.id.in_(list(ids)), MemoryRow.tenant_id == tenant_id, MemoryRow.user_id == user_id
            )
            .options(defer(MemoryRow.embedding))
        )
        return [memory_from_row(r, with_embedding=False) for r in rows]

    def save(self, memory: Memory) -> None:
        values = memory_values(memory)
        values.pop("id")
        self.session.execute(
            update(MemoryRow)
            .where(
                MemoryRow.id == memory.id,
                MemoryRow.tenant_id == memory.tenant_id,
                MemoryRow.user_id == memory.user_id,
            )
            .values(**values)
        )

    def from_event(self, event_id: str) -> list[Memory]:
        rows = self.session.scalars(
            select(MemoryRow).where(MemoryRow.origin_event_id == event_id).order_by(MemoryRow.id)
        )
        memories = [memory_from_row(r) for r in rows]
        return memories

    def active_with_hash(
        self, tenant_id: str, user_id: str, content_hash: str, exclude_id: str
    ) -> Memory | None:
        row = self.session.scalars(
            select(MemoryRow)
            .where(
                MemoryRow.tenant_id == tenant_id,
                MemoryRow.user_id == user_id,
                MemoryRow.content_hash == content_hash,
                MemoryRow.status == MemoryStatus.ACTIVE.value,
                MemoryRow.id != exclude_id,
            )
            .order_by(MemoryRow.created_at, MemoryRow.id)
            # Two workers persisting the same repeat at once must not both create it: lock the row.
            .with_for_update()
        ).first()
        return memory_from_row(row) if row else None

    def delete(self, memory_id: str) -> None:
        self.session.execute(
            delete(MemoryRow).where(MemoryRow.id == memory_id, MemoryRow.status == MemoryStatus.PENDING.value)
        )

    def by_cues(
        self, tenant_id: str, user_id: str, cues: Sequence[str], statuses: Iterable[MemoryStatus], limit: int
    ) -> list[Memory]:
        if not cues:
            return []
        rows = self.session.scalars(
            select(MemoryRow)
            .where(
                MemoryRow.tenant_id == tenant_id,
                MemoryRow.user_id == user_id,
                MemoryRow.status.in_([s.value for s in statuses]),
                MemoryRow.cues.overlap(list(cues)),
            )
            .order_by(MemoryRow.score.desc(), MemoryRow.id)
            .limit(limit)
            .options(defer(MemoryRow.embedding))
        )
        return [memory_from_row(r, with_embedding=False) for r in rows]

    def for_user(self, tenant_id: str, user_id: str, statuses: Iterable[MemoryStatus] | None) -> list[Memory]:
        stmt = select(MemoryRow).where(MemoryRow.tenant_id == tenant_id, MemoryRow.user_id == user_id)
        if statuses is not None:
            stmt = stmt.where(MemoryRow.status.in_([s.value for s in statuses]))
        rows = self.session.scalars(stmt.order_by(MemoryRow.created_at, MemoryRow.id))
        return [memory_from_row(r) for r in rows]

    def by_source(
        self, tenant_id: str, user_id: str, event_id: str, statuses: Iterable[MemoryStatus]
    ) -> list[Memory]:
        rows = self.session.scalars(
            select(MemoryRow)
            .where(
                MemoryRow.tenant_id == tenant_id,
                MemoryRow.user_id == user_id,
                MemoryRow.status.in_([s.value for s in statuses]),
                MemoryRow.sources.contains([{"event_id": event_id}]),
            )
            .order_by(MemoryRow.valid_from, MemoryRow.id)
        )
        return [memory_from_row(r) for r in rows]

    def by_sources(
        self, tenant_id: str, user_id: str, event_ids: Sequence[str], statuses: Iterable[MemoryStatus]
    ) -> list[Memory]:
        if not event_ids:
            return []
        rows = self.session.scalars(
            select(MemoryRow)
            .options(defer(MemoryRow.embedding))
            .where(
                MemoryRow.tenant_id == tenant_id,
                MemoryRow.user_id == user_id,
                MemoryRow.status.in_([s.value for s in statuses]),
                or_(*(MemoryRow.sources.contains([{"event_id": e}]) for e in event_ids)),
            )
            .order_by(MemoryRow.valid_from, MemoryRow.id)
        )
        return [memory_from_row(r, with_embedding=False) for r in rows]

    def cue_counts(
        self, tenant_id: str, user_id: str, cues: Sequence[str], statuses: Iterable[MemoryStatus]
    ) -> tuple[int, dict[str, int]]:
        status_values = [s.value for s in statuses]
        scope = (
            MemoryRow.tenant_id == tenant_id,
            MemoryRow.user_id == user_id,
            MemoryRow.status.in_(status_values),
        )
        total = self.session.execute(select(func.count()).select_from(MemoryRow).where(*scope)).scalar_one()
        if not cues:
            return int(total), {}
        unnested = func.unnest(MemoryRow.cues).table_valued("cue").render_derived(name="u").lateral()
        rows = self.session.execute(
            select(unnested.c.cue, func.count())
            .select_from(MemoryRow)
            .join(unnested, true())
            .where(*scope, MemoryRow.cues.overlap(list(cues)), unnested.c.cue.in_(list(cues)))
            .group_by(unnested.c.cue)
        ).all()
        return int(total), {str(r[0]): int(r[1]) for r in rows}

    def in_window(
        self,
        tenant_id: str,
        user_id: str,
        start: datetime,
        end: datetime,
        statuses: Iterable[MemoryStatus],
        limit: int,
        with_embedding: bool = False,
    ) -> list[Memory]:
        query = (
            select(MemoryRow)
            .where(
                MemoryRow.tenant_id == tenant_id,
                MemoryRow.user_id == user_id,
                MemoryRow.status.in_([s.value for s in statuses]),
                MemoryRow.valid_from >= start,
                MemoryRow.valid_from < end,
            )
            .order_by(MemoryRow.valid_from.desc(), MemoryRow.id)
            .limit(limit)
        )
        if not with_embedding:
            query = query.options(defer(MemoryRow.embedding))
        rows = self.session.scalars(query)
        return [memory_from_row(r, with_embedding=with_embedding) for r in rows]

    def candidates(
        self,
        tenant_id: str,
        user_id: str,
        slot: str | None,
        cues: Sequence[str],
        exclude: Sequence[str],
        limit: int,
    ) -> list[Memory]:
        match = [MemoryRow.cues.overlap(list(cues))] if cues else []
        if slot:
            match.append(MemoryRow.slot == slot)
        if not match:
            return []
        rows = self.session.scalars(
            select(MemoryRow)
            .where(
                MemoryRow.tenant_id == tenant_id,
                MemoryRow.user_id == user_id,
                MemoryRow.status == MemoryStatus.ACTIVE.value,
                MemoryRow.id.not_in(list(exclude)) if exclude else true(),
                or_(*match),
            )
            .order_by(MemoryRow.valid_from.desc(), MemoryRow.id)
            .limit(limit)
        )
        return [memory_from_row(r) for r in rows]

    def recent_of_type(
        self, tenant_id: str, user_id: str, memory_type: MemoryType, since: datetime, limit: int
    ) -> list[Memory]:
        rows = self.session.scalars(
            select(MemoryRow)
            .where(
                MemoryRow.tenant_id == tenant_id,
                MemoryRow.user_id == user_id,
                MemoryRow.type == memory_type.value,
                MemoryRow.status == MemoryStatus.ACTIVE.value,
                MemoryRow.valid_from >= since,
            )
            .order_by(MemoryRow.valid_from, MemoryRow.id)
            .limit(limit)
        )
        return [memory_from_row(r) for r in rows]

    def users_with_recent(
        self, memory_type: MemoryType, since: datetime, limit: int
    ) -> list[tuple[str, str]]:
        rows = self.session.execute(
            select(MemoryRow.tenant_id, MemoryRow.user_id)
            .where(
                MemoryRow.type == memory_type.value,
                MemoryRow.status == MemoryStatus.ACTIVE.value,
                MemoryRow.valid_from >= since,
            )
            .group_by(MemoryRow.tenant_id, MemoryRow.user_id)
            .order_by(MemoryRow.tenant_id, MemoryRow.user_id)
            .limit(limit)
        )
        return [(r.tenant_id, r.user_id) for r in rows]

    def unindexed(self, tenant_id: str, user_id: str, limit: int, after_id: str = "") -> list[Memory]:
        rows = self.session.scalars(
            select(MemoryRow)
            .where(
                MemoryRow.tenant_id == tenant_id,
                MemoryRow.user_id == user_id,
                MemoryRow.id > after_id,
                MemoryRow.indexed_version < MemoryRow.version,
                MemoryRow.status != MemoryStatus.PENDING.value,
            )
            .order_by(MemoryRow.id)
            .limit(limit)
        )
        return [memory_from_row(r) for r in rows]

    def mark_indexed(self, memory_ids_versions: Sequence[tuple[str, int]]) -> None:
        for memory_id, version in memory_ids_versions:
            # The upserted payload carried the row's score: later score pushes start from it.
            self.session.execute(
                update(MemoryRow)
                .where(MemoryRow.id == memory_id, MemoryRow.indexed_version < version)
                .values(indexed_version=version, indexed_score=MemoryRow.score)
            )

    def page_for_reindex(self, after_id: str, limit: int) -> list[Memory]:
        rows = self.session.scalars(
            select(MemoryRow)
            .where(MemoryRow.id > after_id, MemoryRow.status != MemoryStatus.PENDING.value)
            .order_by(MemoryRow.id)
            .limit(limit)
        )
        return [memory_from_row(r) for r in rows]

    def recompute_scores(
        self, now: datetime, policy: DecayPolicy, after_id: str, limit: int
    ) -> tuple[int, str | None]:
        upper = self.session.execute(
            text(
                "SELECT max(id) FROM "
                "(SELECT id FROM memories WHERE id > :after ORDER BY id LIMIT :limit) page"
            ),
            {"after": after_id, "limit": limit},
        ).scalar_one()
        if upper is None:
            return 0, None
        expr = score_sql(policy)
        # Only rows whose score moved are written: an unchanged row costs no dead tuple and no WAL.
        result = self.session.execute(
            text(
                f"UPDATE memories SET score = {expr} "
                "WHERE id > :after AND id <= :upper AND status <> 'pending' "
                f"AND abs(score - ({expr})) > 1e-9"
            ),
            {"after": after_id, "upper": upper, "now": now},
        )
        return int(getattr(result, "rowcount", 0) or 0), str(upper)

    def reset_indexed(self) -> None:
        self.session.execute(
            update(MemoryRow).where(MemoryRow.indexed_version != 0).values(indexed_version=0)
        )

    def embedding_models(self) -> set[str]:
        rows = self.session.execute(
            select(MemoryRow.embedding_model).where(MemoryRow.embedding_model.is_not(None)).distinct()
        )
        return {r[0] for r in rows if r[0] is not None}

    # --- lifecycle ----------------------------------------------------------------------------

    def claim_recall(self, recall_id: str, tenant_id: str, user_id: str, at: datetime) -> bool:
        stmt = (
            insert(RecallClaimRow)
            .values(recall_id=recall_id, tenant_id=tenant_id, user_id=user_id, at=at)
            .on_conflict_do_nothing(index_elements=[RecallClaimRow.recall_id])
            .returning(RecallClaimRow.recall_id)
        )
        return self.session.execute(stmt).first() is not None

    def reinforce(
        self, tenant_id: str, user_id: str, ids: Sequence[str], now: datetime, policy: DecayPolicy
    ) -> int:
        if not ids:
            return 0
        scope = {"tenant": tenant_id, "user": user_id, "ids": list(ids), "now": now}
        # Two statements: in one UPDATE the score expression would read the old count and time.
        result = self.session.execute(
            text(
                "UPDATE memories SET access_count = access_count + 1, "
                "last_accessed_at = GREATEST(last_accessed_at, :now) "
                "WHERE tenant_id = :tenant AND user_id = :user AND id = ANY(:ids) AND status <> 'pending'"
            ),
            scope,
        )
        self.session.execute(
            text(
                f"UPDATE memories SET score = {score_sql(policy)} "
                "WHERE tenant_id = :tenant AND user_id = :user AND id = ANY(:ids) AND status <> 'pending'"
            ),
            scope,
        )
        return int(getattr(result, "rowcount", 0) or 0)

    def prune_recall_claims(self, before: datetime) -> int:
        result = self.session.execute(delete(RecallClaimRow).where(RecallClaimRow.at < before))
        return int(getattr(result, "rowcount", 0) or 0)

    def _set_status(
        self, candidates: str, status: str, reason_sql: str, params: dict[str, Any], limit: int
    ) -> tuple[list[StatusChange], str | None]:
        """One set-based page: lock the next candidates by id, move them, return what moved."""
        rows = self.session.execute(
            text(
                f"WITH page AS (SELECT id FROM memories WHERE {candidates} AND id > :after "
                "ORDER BY id LIMIT :limit FOR UPDATE) "
                f"UPDATE memories m SET status = '{status}', status_reason = {reason_sql}, "
                "version = m.version + 1, updated_at = :now "
                "FROM page WHERE m.id = page.id "
                "RETURNING m.id, m.tenant_id, m.user_id, m.status_reason"
            ),
            {**params, "limit": limit},
        ).all()
        changes = sorted(
            (StatusChange(r.id, r.tenant_id, r.user_id, r.status_reason) for r in rows),
            key=lambda c: c.memory_id,
        )
        return changes, (changes[-1].memory_id if len(changes) == limit else None)

    def expire_tasks(
        self, now: datetime, stated_before: datetime, reasons: tuple[str, str], after_id: str, limit: int
    ) -> tuple[list[StatusChange], str | None]:
        candidates = (
            "status = 'active' AND type = 'task' "
            "AND ((due_at IS NOT NULL AND due_at <= :now) OR (due_at IS NULL AND created_at <= :before))"
        )
        reason = "CASE WHEN due_at IS NOT NULL THEN :due_reason ELSE :age_reason END"
        params = {
            "now": now,
            "before": stated_before,
            "due_reason": reasons[0],
            "age_reason": reasons[1],
            "after": after_id,
        }
        return self._set_status(candidates, MemoryStatus.EXPIRED.value, reason, params, limit)

    def archive_stale(
        self,
        since: datetime,
        threshold: float,
        policy: DecayPolicy,
        reason: str,
        now: datetime,
        after_id: str,
        limit: int,
    ) -> tuple[list[StatusChange], str | None]:
        candidates = (
            "status = 'active' AND last_accessed_at <= :since "
            f"AND ({score_sql(policy, now_param='since')}) < :threshold"
        )
        params = {"since": since, "threshold": threshold, "reason": reason, "now": now, "after": after_id}
        return self._set_status(candidates, MemoryStatus.ARCHIVED.value, ":reason", params, limit)

    def stale_scores(self, after_id: str, limit: int, tolerance: float) -> list[ScoreState]:
        rows = self.session.execute(
            select(MemoryRow.id, MemoryRow.tenant_id, MemoryRow.user_id, MemoryRow.score)
            .where(
                MemoryRow.id > after_id,
                MemoryRow.status != MemoryStatus.PENDING.value,
                MemoryRow.indexed_version == MemoryRow.version,
                MemoryRow.version > 0,
                MemoryRow.embedding.is_not(None),
                or_(
                    MemoryRow.indexed_score.is_(None),
                    func.abs(MemoryRow.score - MemoryRow.indexed_score) > tolerance,
                ),
            )
            .order_by(MemoryRow.id)
            .limit(limit)
        )
        return [ScoreState(r.id, r.tenant_id, r.user_id, r.score) for r in rows]

    def mark_scores_indexed(self, scores: Sequence[tuple[str, float]]) -> None:
        if not scores:
            return
        self.session.execute(
            text("UPDATE memories SET indexed_score = :score WHERE id = :id"),
            [{"id": memory_id, "score": score} for memory_id, score in scores],
        )

    def index_states(self, tenant_id: str, user_id: str) -> list[IndexState]:
        rows = self.session.execute(
            select(
                MemoryRow.id,
                MemoryRow.version,
                MemoryRow.indexed_version,
                MemoryRow.status,
                MemoryRow.score,
                MemoryRow.embedding_model,
                MemoryRow.embedding.is_not(None).label("has_embedding"),
            )
            .where(MemoryRow.tenant_id == tenant_id, MemoryRow.user_id == user_id)
            .order_by(MemoryRow.id)
        )
        return [
            IndexState(
                memory_id=r.id,
                version=r.version,
                indexed_version=r.indexed_version,
                status=r.status,
                score=r.score,
                embedding_model=r.embedding_model,
                has_embedding=bool(r.has_embedding),
            )
            for r in rows
        ]

    def users_page(self, after: tuple[str, str] | None, limit: int) -> list[tuple[str, str]]:
        stmt = select(MemoryRow.tenant_id, MemoryRow.user_id).distinct()
        if after is not None:
            stmt = stmt.where(tuple_(MemoryRow.tenant_id, MemoryRow.user_id) > tuple_(*after))
        rows = self.session.execute(stmt.order_by(MemoryRow.tenant_id, MemoryRow.user_id).limit(limit))
        return [(r.tenant_id, r.user_id) for r in rows]


class SqlHistoryRepository:
    def __init__(self, session: Session):
        self.session = session

    def add(self, entry: HistoryEntry) -> None:
        self.session.add(
            HistoryRow(
                memory_id=entry.memory_id,
                tenant_id=entry.tenant_id,
                user_id=entry.user_id,
                action=entry.action,
                related_id=entry.related_id,
                reason=entry.reason,
                judge=entry.judge,
                event_id=entry.event_id,
                at=entry.at,
                details=entry.details,
            )
        )

    def for_memories(self, tenant_id: str, user_id: str, memory_ids: Sequence[str]) -> list[HistoryEntry]:
        if not memory_ids:
            return []
        rows = self.session.scalars(
            select(HistoryRow)
            .where(
                HistoryRow.memory_id.in_(list(memory_ids)),
                HistoryRow.tenant_id == tenant_id,
                HistoryRow.user_id == user_id,
            )
            .order_by(HistoryRow.at, HistoryRow.id)
        )
        return [
            HistoryEntry(
                memory_id=r.memory_id,
                tenant_id=r.tenant_id,
                user_id=r.user_id,
                action=r.action,
                reason=r.reason,
                judge=r.judge,
                at=r.at,
                related_id=r.related_id,
                event_id=r.event_id,
                details=dict(r.details or {}),
            )
            for r in rows
        ]


class SqlLlmCallRepository:
    def __init__(self, session: Session):
        self.session = session

    def add(self, usage: Any, event_id: str | None) -> None:
        self.session.add(
            LlmCallRow(
                operation=str(usage.operation),
                model=usage.model,
                prompt_tokens=int(usage.prompt_tokens or 0),
                completion_tokens=int(usage.completion_tokens or 0),
                ok=bool(usage.ok),
                error=usage.error,
                latency_ms=float(usage.latency_ms or 0.0),
                event_id=event_id,
            )
        )


class SqlDeadLetterRepository:
    def __init__(self, session: Session):
        self.session = session

    def add(self, letter: DeadLetter) -> None:
        self.session.add(
            DeadLetterRow(
                task_name=letter.task_name,
                task_id=letter.task_id,
                event_id=letter.event_id,
                args=letter.args,
                reason=letter.reason,
                deliveries=letter.deliveries,
            )
        )

    def for_events(self, event_ids: Sequence[str]) -> dict[str, str]:
        if not event_ids:
            return {}
        rows = self.session.execute(
            select(DeadLetterRow.event_id, DeadLetterRow.reason).where(
                DeadLetterRow.event_id.in_(list(event_ids)), DeadLetterRow.replayed_at.is_(None)
            )
        )
        return {r.event_id: r.reason for r in rows}


class SqlMetaRepository:
    def __init__(self, session: Session):
        self.session = session

    def get(self, key: str) -> str | None:
        row = self.session.get(MetaRow, key)
        return row.value if row else None

    def set(self, key: str, value: str) -> None:
        stmt = insert(MetaRow).values(key=key, value=value)
        self.session.execute(stmt.on_conflict_do_update(index_elements=[MetaRow.key], set_={"value": value}))
