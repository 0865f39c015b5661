"""The event log (every recorded turn and its stage) and the receipts that say what became of each
published turn. The turns' vectors and their turn-index bookkeeping, on the same rows, are
``workers/db/turn_index.py``'s."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    Text,
    and_,
    any_,
    bindparam,
    exists,
    false,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, insert

from shared.events import TurnPublished, event_ref, split_ref
from shared.language.timeexpr import Span
from shared.models import REDACTED_HASH, REDACTED_METADATA
from shared.storage import (
    Receipt,
    StoredEvent,
)
from workers.db.mapping import (
    EVENT_BOOKKEEPING,
    among,
    column_values,
    entity_columns,
    event_from_row,
    from_columns,
    offset_seconds,
    plain_rows,
    read_rows,
    text_array_param,
)
from workers.db.session import SessionRepository
from workers.db.tables import (
    DeadLetterRow,
    EventRow,
    ReceiptRow,
)


def _conversation(tenant_id: str, user_id: str, session_id: str) -> tuple[ColumnElement[bool], ...]:
    """The WHERE terms of one conversation (the unique (tenant, user, session, seq) index's prefix)."""
    return (*EventRow.owned_by(tenant_id, user_id), EventRow.session_id == session_id)


def by_ref(ref: str) -> tuple[ColumnElement[bool], ...]:
    """The WHERE terms of the event a pipeline key names (the (tenant, event id) primary key). A
    bare event id (a message queued before 0017) matches every tenant's: callers reading one row
    take it only when it is the only one."""
    tenant, event_id = split_ref(ref)
    if tenant is None:
        return (EventRow.event_id == event_id,)
    return (EventRow.tenant_id == tenant, EventRow.event_id == event_id)


def by_refs(refs: Sequence[str]) -> ColumnElement[bool]:
    """The WHERE term of the events these pipeline keys name (bare ids as in ``by_ref``): per
    tenant, its event ids as one array (``mapping.among``). A batch or a recall names one tenant,
    so this is one term of the primary key, where a list of (tenant, id) pairs took two bound
    parameters per key and made a statement of its own for every length."""
    by_tenant: dict[str | None, list[str]] = {}
    for ref in refs:
        tenant, event_id = split_ref(ref)
        by_tenant.setdefault(tenant, []).append(event_id)
    terms = [
        among(EventRow.event_id, ids)
        if tenant is None
        else and_(EventRow.tenant_id == tenant, among(EventRow.event_id, ids))
        for tenant, ids in sorted(by_tenant.items(), key=lambda item: (item[0] is not None, item[0] or ""))
    ]
    return or_(false(), *terms)


class SqlEventRepository(SessionRepository):
    def _read(self, query: Select[EventRow]) -> list[StoredEvent]:
        # The vector stays unread (it is deferred on the entity too): no event read shows it; nor
        # the bookkeeping columns a StoredEvent does not hold.
        return [event_from_row(r) for r in plain_rows(self.session, query, EventRow, EVENT_BOOKKEEPING)]

    def insert_if_absent(self, event: TurnPublished, stage: str) -> bool:
        stmt = (
            insert(EventRow)
            .values(
                {
                    **column_values(event),
                    "role": event.role.value,
                    "at_offset_s": offset_seconds(event.at),
                    "content_hash": event.content_hash,
                    "stage": stage,
                    "extraction_reasons": [],
                }
            )
            # No conflict target: a taken event id and a taken (conversation, seq) slot both mean
            # "not inserted"; the caller tells duplicates from conflicts by re-reading the slot.
            .on_conflict_do_nothing()
            .returning(EventRow.event_id)
        )
        return self.session.execute(stmt).first() is not None

    def get(self, ref: str) -> StoredEvent | None:
        rows = self.session.scalars(select(EventRow).where(*by_ref(ref)).limit(2)).all()
        # Two rows: a bare id two tenants hold. Neither is taken (the wrong tenant's turn would
        # move on); the stalled sweep re-drives the right one by its full key.
        return event_from_row(rows[0]) if len(rows) == 1 else None

    def at_seq(self, tenant_id: str, user_id: str, session_id: str, seq: int) -> StoredEvent | None:
        row = self.session.scalars(
            select(EventRow).where(*_conversation(tenant_id, user_id, session_id), EventRow.seq == seq)
        ).first()
        return event_from_row(row) if row else None

    def max_seq(self, tenant_id: str, user_id: str, session_id: str) -> int:
        # The (tenant, user, session, seq) unique index answers this with one index probe.
        found = self.session.scalar(
            select(func.max(EventRow.seq)).where(*_conversation(tenant_id, user_id, session_id))
        )
        return int(found or 0)

    def set_stage(
        self,
        ref: str,
        stage: str,
        *,
        importance: float | None = None,
        reasons: Sequence[str] = (),
        happened: Span | None = None,
    ) -> None:
        values: dict[str, object] = {"stage": stage, "stage_at": func.now()}
        if importance is not None:
            values["importance"] = importance
            values["extraction_reasons"] = list(reasons)
        if happened is not None:
            values["happened_from"], values["happened_to"] = happened
        if stage == "done":
            values["done_at"] = func.now()
        self.session.execute(update(EventRow).where(*by_ref(ref)).values(**values))

    def timeline(self, tenant_id: str, user_id: str, session_id: str) -> list[StoredEvent]:
        query = select(EventRow).where(*_conversation(tenant_id, user_id, session_id))
        return self._read(query.order_by(EventRow.seq))

    def recent(
        self, tenant_id: str, user_id: str, limit: int, session_id: str | None = None
    ) -> list[StoredEvent]:
        query = select(EventRow).where(*EventRow.owned_by(tenant_id, user_id))
        if session_id is not None:
            query = query.where(EventRow.session_id == session_id)
        return self._read(query.order_by(EventRow.at.desc(), EventRow.seq.desc()).limit(limit))

    def user_offset(self, tenant_id: str, user_id: str) -> int | None:
        query = (
            select(EventRow.at_offset_s)
            .where(*EventRow.owned_by(tenant_id, user_id), EventRow.role == "user")
            .where(EventRow.at_offset_s.is_not(None))
            .order_by(EventRow.at.desc(), EventRow.seq.desc())
            .limit(1)
        )
        return self.session.execute(query).scalar_one_or_none()

    def stages(self, refs: Sequence[str]) -> dict[str, str]:
        if not refs:
            return {}
        rows = read_rows(
            self.session, select(EventRow.tenant_id, EventRow.event_id, EventRow.stage).where(by_refs(refs))
        )
        found = {(r.tenant_id, r.event_id): r.stage for r in rows}
        by_id = {e: stage for (_, e), stage in found.items()}
        out: dict[str, str] = {}
        for ref in refs:
            tenant, event_id = split_ref(ref)
            stage = by_id.get(event_id) if tenant is None else found.get((tenant, event_id))
            if stage is not None:
                out[ref] = stage
        return out

    def of_user(
        self, tenant_id: str, user_id: str, event_ids: Sequence[str], windows_of: Sequence[str] = ()
    ) -> list[StoredEvent]:
        if not event_ids and not windows_of:
            return []
        params = {"tenant": tenant_id, "user": user_id, "ids": list(event_ids)}
        if windows_of:
            params["lending"] = list(windows_of)
        return [event_from_row(r) for r in read_rows(self.session, _of_user(bool(windows_of)), params)]

    def in_window(
        self, tenant_id: str, user_id: str, start: datetime, end: datetime, limit: int
    ) -> list[StoredEvent]:
        query = select(EventRow).where(
            *EventRow.owned_by(tenant_id, user_id), EventRow.at >= start, EventRow.at < end
        )  # ix_events_user_at
        return self._read(query.order_by(EventRow.at.desc(), EventRow.event_id).limit(limit))

    def happened_in(
        self, tenant_id: str, user_id: str, start: datetime, end: datetime, limit: int
    ) -> list[StoredEvent]:
        query = select(EventRow).where(
            *EventRow.owned_by(tenant_id, user_id), *EventRow.happened_overlapping(start, end)
        )  # ix_events_user_happened
        return self._read(query.order_by(EventRow.happened_from.desc(), EventRow.event_id).limit(limit))

    def redact(self, tenant_id: str, user_id: str, event_ids: Sequence[str]) -> list[tuple[str, str]]:
        if not event_ids:
            return []
        # FOR UPDATE first: it waits for every window being written that quotes these turns (their
        # writers hold FOR KEY SHARE, ``context_before``), so ``turn_index.unembed_windows`` then
        # finds them. The UPDATE alone would not wait: it changes no key column.
        self.session.execute(
            select(EventRow.event_id)
            .where(*EventRow.owned_by(tenant_id, user_id), EventRow.event_id.in_(list(event_ids)))
            .order_by(EventRow.event_id)
            .with_for_update()
        )
        rows = self.session.execute(
            update(EventRow)
            .where(*EventRow.owned_by(tenant_id, user_id), EventRow.event_id.in_(list(event_ids)))
            .values(
                content="",
                content_hash=REDACTED_HASH,
                metadata_=dict(REDACTED_METADATA),
                embedding=None,
                embedding_model=None,
                alone_vector=None,
                window_ids=[],
                # What was derived from the words goes with them.
                happened_from=None,
                happened_to=None,
                turn_indexed=True,  # nothing to index: reconciliation must not look for a point
            )
            .returning(EventRow.event_id, EventRow.session_id)
        )
        return sorted((r.event_id, r.session_id) for r in rows)

    def context_before(
        self, tenant_id: str, user_id: str, session_id: str, seq: int, limit: int
    ) -> list[StoredEvent]:
        if limit <= 0:
            return []
        query = select(EventRow).where(
            *_conversation(tenant_id, user_id, session_id),
            EventRow.seq < seq,
            EventRow.content_hash != REDACTED_HASH,
        )  # uq_events_conversation_seq
        # FOR KEY SHARE: a privacy delete of one of these turns (``redact`` locks them FOR UPDATE)
        # waits until this window is committed, and then finds it (``turn_index.unembed_windows``),
        # so no window can keep a blanked turn's words. Not FOR SHARE: that conflicts with every
        # update of the row, and two ingest units of one conversation, each updating its own
        # turns' stage while reading the other's as context, deadlocked.
        query = query.order_by(EventRow.seq.desc()).limit(limit).with_for_update(read=True, key_share=True)
        return self._read(query)[::-1]

    def stalled(self, stuck_before: datetime, limit: int) -> list[tuple[str, str]]:
        rows = self.session.execute(
            select(EventRow.tenant_id, EventRow.event_id, EventRow.stage)
            .where(
                EventRow.stage != "done",
                EventRow.stage_at < stuck_before,
                # A parked event (a dead letter not replayed yet) is the operator's, not the sweep's:
                # sent again, it would fail and be parked again every run. The sweep parks it under
                # its pipeline key (tenant/event id), which names the tenant.
                ~exists().where(
                    DeadLetterRow.event_id == func.concat(EventRow.tenant_id, "/", EventRow.event_id),
                    DeadLetterRow.replayed_at.is_(None),
                ),
            )
            .order_by(EventRow.stage_at, EventRow.tenant_id, EventRow.event_id)
            .limit(limit)
        )
        return [(event_ref(r.tenant_id, r.event_id), r.stage) for r in rows]


class SqlReceiptRepository(SessionRepository):
    def add_if_absent(self, receipt: Receipt) -> bool:
        stmt = (
            insert(ReceiptRow)
            .values(**column_values(receipt))
            .on_conflict_do_nothing(index_elements=[ReceiptRow.tenant_id, ReceiptRow.event_id])
            .returning(ReceiptRow.event_id)
        )
        return self.session.execute(stmt).first() is not None

    def get_many(self, tenant_id: str, event_ids: Sequence[str]) -> dict[str, Receipt]:
        if not event_ids:
            return {}
        rows = self.session.scalars(
            select(ReceiptRow).where(
                ReceiptRow.tenant_id == tenant_id, ReceiptRow.event_id.in_(list(event_ids))
            )
        )
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
    return from_columns(Receipt, row)


@cache
def _of_user(lending: bool) -> Select[Any]:
    """The user's turns among the ids (``of_user``; recall re-reads its log hits here), built once:
    with ``lending``, also the turns the windows of the lending hits hold. One round trip for both
    (a window holds turns of its own user and session; the outer scope is applied to them all the
    same). One array of ids, not "hit OR in a subquery": Postgres reads an OR with a subquery by
    scanning every event (720 ms at 220k turns); an array it reads by the primary key."""
    owned = EventRow.owned_by(bindparam("tenant"), bindparam("user"))
    ids: ColumnElement[Any] = text_array_param("ids")
    if lending:
        lent_by = EventRow.event_id == any_(text_array_param("lending"))
        lent = select(func.unnest(EventRow.window_ids)).where(*owned, lent_by).scalar_subquery()
        ids = func.array_cat(ids, func.array(lent), type_=ARRAY(Text))
    return select(*entity_columns(EventRow, EVENT_BOOKKEEPING)).where(*owned, EventRow.event_id == any_(ids))
