"""Rows of one tenant (or one user) read for an export and written by an import, column for column
(the format: ``shared/transfer.py``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Table, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from shared.models import MemoryStatus
from shared.transfer import ImportRefused
from workers.db.packed_vectors import pack_vector, unpack_vector
from workers.db.tables import EventRow, HistoryRow, MemoryRow, ReceiptRow

_TABLES: dict[str, Any] = {
    "events": EventRow,
    "event_receipts": ReceiptRow,
    "memories": MemoryRow,
    "memory_history": HistoryRow,
}
# The key of a row, for idempotent inserts (history rows have none: they follow their memory),
# within the file's one tenant; the primary key it conflicts on (event ids are unique per tenant).
_KEYS = {"events": "event_id", "event_receipts": "event_id", "memories": "id"}
_CONFLICT = {
    "events": ("tenant_id", "event_id"),
    "event_receipts": ("tenant_id", "event_id"),
    "memories": ("id",),
}
_ORDER = {
    "events": ("session_id", "seq"),
    "event_receipts": ("event_id",),
    "memories": ("id",),
    "memory_history": ("id",),
}
_SKIPPED = {"memory_history": {"id"}}
CHUNK = 1000  # a serial id means nothing in another database


def _table(name: str) -> Table:
    return _TABLES[name].__table__  # type: ignore[no-any-return]


def _columns(name: str) -> list[Any]:
    return [c for c in _table(name).columns if c.name not in _SKIPPED.get(name, set())]


def _export_rows(
    session: Session, name: str, tenant_id: str, user_id: str | None
) -> Iterator[dict[str, Any]]:
    table = _table(name)
    query = select(*_columns(name)).where(table.c.tenant_id == tenant_id)
    if user_id is not None:
        query = query.where(table.c.user_id == user_id)
    if name == "memories":
        # A draft still in the pipeline (pending) is the pipeline's, not the user's memory yet.
        query = query.where(table.c.status != MemoryStatus.PENDING.value)
    query = query.order_by(table.c.user_id, *(table.c[c] for c in _ORDER[name]))
    for row in session.execute(query.execution_options(yield_per=500)).mappings():
        yield {k: _exported(v) for k, v in row.items()}


def _exported(value: Any) -> Any:
    """A column's value as the file holds it: times as ISO text, a packed vector as its numbers."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):  # events.alone_vector, the one binary column
        return unpack_vector(value)
    return value


def _import_rows(session: Session, name: str, rows: Sequence[tuple[int, dict[str, Any]]]) -> set[str]:
    """Insert the rows (checked by ``shared/transfer_rows.py``) a table does not hold yet; returns
    the keys inserted. A key held by another user of the tenant refuses the file (the caller's unit
    of work then writes nothing); memory ids come here made the tenant's own."""
    if not rows:
        return set()
    typed = [_stored(name, row) for _, row in rows]
    key = _KEYS.get(name)
    table = _table(name)
    inserted: set[str] = set()
    try:
        # In chunks: one statement's parameters are limited (65,535), a row has up to 30 columns.
        for start in range(0, len(typed), CHUNK):
            chunk = typed[start : start + CHUNK]
            if key is None:
                session.execute(insert(table), chunk)
                continue
            # Only a row whose key exists is skipped; any other clash (a conversation's seq taken
            # by another event) is an error that refuses the file.
            statement = (
                insert(table).values(chunk).on_conflict_do_nothing(index_elements=list(_CONFLICT[name]))
            )
            inserted |= set(session.scalars(statement.returning(table.c[key])).all())
    except DBAPIError as exc:
        problem = str(exc.orig).splitlines()[0] if exc.orig is not None else str(exc)
        raise ImportRefused(0, f"{name}: {problem}") from None
    if key is None:
        return set()
    kept = [(number, row) for number, row in rows if row[key] not in inserted]
    owners: dict[str, str] = {}
    for start in range(0, len(kept), CHUNK):
        wanted = [row[key] for _, row in kept[start : start + CHUNK]]
        owner = table.c.tenant_id + "\x1f" + table.c.user_id
        scope = table.c.tenant_id == kept[0][1]["tenant_id"]  # the file's one tenant: no other is read
        found = session.execute(select(table.c[key], owner).where(table.c[key].in_(wanted), scope)).all()
        owners.update({str(k): str(v) for k, v in found})
    if kept:
        for number, row in kept:
            if owners.get(row[key]) != f"{row['tenant_id']}\x1f{row['user_id']}":
                raise ImportRefused(
                    number, f"{name}.{key}: {row[key]!r} is held by another user of this tenant"
                )
    return inserted


def _stored(name: str, row: dict[str, Any]) -> dict[str, Any]:
    """The row as its table stores it: the turn's alone vector packed (``_exported`` unpacks it)."""
    if name == "events" and row.get("alone_vector") is not None:
        return {**row, "alone_vector": pack_vector(row["alone_vector"])}
    return row


def _held_memory_ids(session: Session, tenant_id: str, memory_ids: Sequence[str]) -> set[tuple[str, str]]:
    """(user, id) of the memories of these ids that the tenant holds (no other tenant's)."""
    held: set[tuple[str, str]] = set()
    for ids in _chunks(memory_ids):
        query = select(MemoryRow.user_id, MemoryRow.id).where(
            MemoryRow.tenant_id == tenant_id, MemoryRow.id.in_(ids)
        )
        held |= {(str(u), str(i)) for u, i in session.execute(query)}
    return held


def _chunks(ids: Sequence[str]) -> Iterator[list[str]]:
    items = list(ids)
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


def _drop_vectors(session: Session, memory_ids: Sequence[str]) -> list[tuple[str, str]]:
    """The imported memories' (id, content), their vectors cleared (another model made them)."""
    out: list[tuple[str, str]] = []
    for ids in _chunks(memory_ids):
        where = MemoryRow.id.in_(ids)
        session.execute(update(MemoryRow).where(where).values(embedding=None, embedding_model=None))
        out += [
            (str(i), str(c)) for i, c in session.execute(select(MemoryRow.id, MemoryRow.content).where(where))
        ]
    return out


def _set_memory_vectors(session: Session, vectors: dict[str, list[float]], model: str) -> None:
    for memory_id, vector in vectors.items():
        session.execute(
            update(MemoryRow).where(MemoryRow.id == memory_id).values(embedding=vector, embedding_model=model)
        )


def _mark_unindexed(
    session: Session, tenant_id: str, memory_ids: Sequence[str], event_ids: Sequence[str]
) -> None:
    """Imported rows get their points at the next push, whatever the exporting index held."""
    for ids in _chunks(memory_ids):
        session.execute(update(MemoryRow).where(MemoryRow.id.in_(ids)).values(indexed_version=0))
    for ids in _chunks(event_ids):
        where = (EventRow.tenant_id == tenant_id, EventRow.event_id.in_(ids))
        session.execute(update(EventRow).where(*where).values(turn_indexed=False))


class SqlTransfer:
    """``shared.transfer.TransferRepository`` over one session (``uow.transfer``)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def pin_snapshot(self) -> None:
        self.session.connection(execution_options={"isolation_level": "REPEATABLE READ"})

    def export_rows(self, table: str, tenant_id: str, user_id: str | None) -> Iterator[dict[str, Any]]:
        return _export_rows(self.session, table, tenant_id, user_id)

    def import_rows(self, table: str, rows: Sequence[tuple[int, dict[str, Any]]]) -> set[str]:
        return _import_rows(self.session, table, rows)

    def held_memory_ids(self, tenant_id: str, memory_ids: Sequence[str]) -> set[tuple[str, str]]:
        return _held_memory_ids(self.session, tenant_id, memory_ids)

    def drop_vectors(self, memory_ids: Sequence[str]) -> list[tuple[str, str]]:
        return _drop_vectors(self.session, memory_ids)

    def set_memory_vectors(self, vectors: dict[str, list[float]], model: str) -> None:
        _set_memory_vectors(self.session, vectors, model)

    def mark_unindexed(self, tenant_id: str, memory_ids: Sequence[str], event_ids: Sequence[str]) -> None:
        _mark_unindexed(self.session, tenant_id, memory_ids, event_ids)
