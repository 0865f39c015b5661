"""Row <-> domain conversions.

Domain records are dataclasses whose field names are the columns' names, so a conversion is
"copy the same-named fields" plus the few that change type on the way (enums, JSON copies)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from datetime import datetime, timedelta, timezone
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar, TypeVarTuple

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Row,
    RowMapping,
    Select,
    Text,
    any_,
    bindparam,
    inspect,
    type_coerce,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import InstrumentedAttribute, Session
from sqlalchemy.types import NullType

from shared.events import Role, TurnPublished
from shared.models import Memory, MemoryStatus, MemoryType
from shared.storage import StoredEvent
from workers.db.tables import EventRow, MemoryRow

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Record = TypeVar("Record", bound="DataclassInstance")
Columns = TypeVarTuple("Columns")


def column_values(record: DataclassInstance) -> dict[str, Any]:
    """The record's fields by name, for an INSERT (shallow: ``asdict`` would deep-copy payloads)."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


@cache
def _field_names(record_type: type[DataclassInstance]) -> tuple[str, ...]:
    # ``fields()`` walks the class on every call: a third of a recall's row conversion.
    return tuple(f.name for f in fields(record_type))


class _Attributes:
    """An ORM entity read by key, as a row's mapping is."""

    __slots__ = ("_entity",)

    def __init__(self, entity: Any) -> None:
        self._entity = entity

    def __getitem__(self, name: str) -> Any:
        return getattr(self._entity, name)


ByKey = RowMapping | _Attributes


def by_key(row: Any) -> ByKey:
    """A row's (or an entity's) columns by name. Recall converts a few hundred rows of 20-odd
    columns per query, and a Row's attribute lookup costs seven times its mapping's (350 ns
    against 50); its mapping is made anew on each ``_mapping``, so it is taken once per row."""
    if isinstance(row, RowMapping | _Attributes):
        return row
    return row._mapping if isinstance(row, Row) else _Attributes(row)


def from_columns(record_type: type[Record], row: Any, **converted: Any) -> Record:
    """A ``record_type`` from the row's same-named columns (a Row, its mapping, or an ORM
    entity); ``converted`` gives the fields that need a conversion (those columns are not read,
    so a deferred one stays unloaded)."""
    columns = by_key(row)
    same = {name: columns[name] for name in _field_names(record_type) if name not in converted}
    return record_type(**same, **converted)


def text_array(values: Iterable[str]) -> ColumnElement[Any]:
    """``values`` as one ``text[]`` parameter (see :func:`among`)."""
    return bindparam(None, list(values), type_=ARRAY(Text))


def text_array_param(name: str) -> BindParameter[Any]:
    """The named ``text[]`` parameter of a statement built once (recall's hot reads): ``text[]``,
    not the column's ``varchar(n)[]``, for the reason :func:`among` gives."""
    return bindparam(name, type_=ARRAY(Text))


def among(column: InstrumentedAttribute[str], values: Iterable[str]) -> ColumnElement[bool]:
    """``column`` is one of ``values``, sent as one array parameter (``= ANY(:values)``). Recall's
    reads name a hundred ids or more: as ``IN (...)`` each id was a bound parameter of its own,
    coerced and rendered in Python (a few milliseconds per recall at 100k memories), and each
    list length made another statement for Postgres to parse and plan. The btree indexes serve
    ``= ANY`` as they serve ``IN``. The array is ``text[]``, not the column's ``varchar(n)[]``:
    a cast to ``varchar(n)`` cuts a longer value, and a 40-character id would match the row whose
    id is its first 36 characters."""
    return column == any_(text_array(values))


# The columns a read leaves out when it never shows the vector (recall, listings, the log).
WITHOUT_EMBEDDING = frozenset({"embedding", "alone_vector"})
# And what ``event_from_row`` never looks at: the pipeline's bookkeeping of a turn. Recall re-reads
# a few hundred turns per query, and parsing their three bookkeeping timestamps alone cost more
# than a millisecond of it at 100k memories.
EVENT_BOOKKEEPING = WITHOUT_EMBEDDING | frozenset(
    {
        "content_hash", "received_at", "done_at", "stage_at", "extraction_reasons", "embedding_model",
        "turn_indexed", "trace_context",
    }
)  # fmt: skip


def plain_rows(
    session: Session, query: Select[Any], entity: type[Any], skip: frozenset[str] = frozenset()
) -> Sequence[Row[Any]]:
    """The rows ``query`` (a ``select(entity)``) finds, as plain column tuples keyed by the
    entity's attribute names, every column but ``skip``'s. Not ORM instances: recall reads a few
    hundred rows per query, and building identity-mapped objects for rows that are only converted
    to domain records cost more than the SQL (the rows' locking clause and order stay the query's)."""
    return read_rows(session, query.with_only_columns(*entity_columns(entity, skip)))


def read_rows(
    session: Session, statement: Select[*Columns], params: Mapping[str, Any] | None = None
) -> Sequence[Row[*Columns]]:
    """The rows of a column ``statement`` (with the values of its named ``params``: recall's
    statements are built once), run on the session's connection as a Core statement.
    Through ``Session.execute`` an ORM-enabled select also passes every row through the ORM's
    loading (about a sixth of a recall's re-read time for rows that are only plain tuples). What
    the session holds unwritten is flushed first when the session autoflushes, as
    ``Session.execute`` would."""
    if session.autoflush:
        session.flush()
    return session.connection().execute(statement, params).all()


# Built once per (entity, skip): recall builds its statements anew on every query.
_COLUMNS: dict[tuple[type[Any], frozenset[str]], tuple[ColumnElement[Any], ...]] = {}


def _labelled_columns(entity: type[Any], skip: frozenset[str]) -> tuple[ColumnElement[Any], ...]:
    columns: list[ColumnElement[Any]] = []
    for attr in inspect(entity).column_attrs:
        if attr.key in skip:
            continue
        column: ColumnElement[Any] = getattr(entity, attr.key)
        if isinstance(column.type, ARRAY):
            # psycopg already gives a Postgres array as a list; SQLAlchemy's ARRAY would walk every
            # element of every row again (a millisecond of a recall's re-reads).
            column = type_coerce(column, NullType())
        columns.append(column.label(attr.key))
    return tuple(columns)


def entity_columns(entity: type[Any], skip: frozenset[str] = frozenset()) -> list[ColumnElement[Any]]:
    """The entity's mapped columns, but ``skip``'s, in mapping order, each labelled with its
    attribute's name (rows keyed by those names; ``EventRow.metadata_`` reads column "metadata")."""
    key = (entity, skip)
    if key not in _COLUMNS:
        _COLUMNS[key] = _labelled_columns(entity, skip)
    return list(_COLUMNS[key])


def offset_seconds(at: datetime) -> int | None:
    """The UTC offset of ``at`` in seconds east of UTC (``events.at_offset_s``), None when naive."""
    offset = at.utcoffset()
    return None if offset is None else int(offset.total_seconds())


def in_offset(at: datetime, seconds: int | None) -> datetime:
    """The instant ``at`` shown at the offset it was sent with (a row from before 0018: as read)."""
    return at if seconds is None else at.astimezone(timezone(timedelta(seconds=seconds)))


def event_from_row(row: EventRow | Row[Any]) -> StoredEvent:
    """From an entity or a plain row of its columns (``plain_rows``)."""
    m = by_key(row)
    event = from_columns(
        TurnPublished,
        m,
        role=Role(m["role"]),
        metadata=dict(m["metadata_"] or {}),
        at=in_offset(m["at"], m["at_offset_s"]),
    )
    start, end = m["happened_from"], m["happened_to"]
    return StoredEvent(
        event=event,
        stage=m["stage"],
        importance=m["importance"],
        happened=(start, end) if start and end else None,
        window=tuple(m["window_ids"] or ()),
    )


def memory_from_row(row: MemoryRow | Row[Any], with_embedding: bool = True) -> Memory:
    """``with_embedding=False`` for rows read with the vector column deferred (recall reads):
    decoding 384 floats per row was most of a recall's Postgres time."""
    m = by_key(row)
    embedding = m["embedding"] if with_embedding else None
    return from_columns(
        Memory,
        m,
        type=MemoryType(m["type"]),
        status=MemoryStatus(m["status"]),
        tags=list(m["tags"] or []),
        entities=list(m["entities"] or []),
        cues=list(m["cues"] or []),
        sources=list(m["sources"] or []),
        embedding=list(embedding) if embedding is not None else None,
    )


def memory_values(memory: Memory) -> dict[str, object]:
    return {
        **column_values(memory),
        "type": memory.type.value,
        "status": memory.status.value,
        "tags": list(memory.tags),
        "entities": list(memory.entities),
        "cues": list(memory.cues),
        "sources": list(memory.sources),
        "origin_event_id": memory.sources[0]["event_id"] if memory.sources else "",
        "valid_from": memory.valid_from or memory.created_at,
    }
