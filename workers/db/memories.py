"""The memories table as the pipeline, recall and curation read and write it (rows, lookups,
conflict candidates). Repositories receive a session and never commit (the unit of work does)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Integer,
    Select,
    String,
    Text,
    any_,
    bindparam,
    cast,
    delete,
    func,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, insert
from sqlalchemy.orm import Session

from shared.models import Memory, MemoryStatus, MemoryType
from workers.db.mapping import (
    WITHOUT_EMBEDDING,
    entity_columns,
    memory_from_row,
    memory_values,
    plain_rows,
    read_rows,
    text_array_param,
)
from workers.db.session import SessionRepository
from workers.db.tables import CueCountRow, MemoryRow

# The cue under which memory_cue_counts keeps a user's number of memories (no cue key is empty).
TOTAL_KEY = ""


def user_memories(tenant_id: str, user_id: str, *where: ColumnElement[bool]) -> Select[MemoryRow]:
    """The query for one user's memory rows that match ``where``."""
    return select(MemoryRow).where(*MemoryRow.owned_by(tenant_id, user_id), *where)


def in_statuses(statuses: Iterable[MemoryStatus], column: Any = MemoryRow.status) -> ColumnElement[bool]:
    """``column`` (a memory's status, by default the table's) is one of ``statuses``."""
    return column.in_(statuses_of(statuses))


# Recall's hot reads run statements built once, with named parameters: building a statement and
# its cache key anew on every recall cost more than the SQL of these small reads (0.74 and 0.89 ms
# for the cue query and the citing query). The SQL Postgres receives is the one the statement built
# with the values would send, but for the parameters' names (a name used twice is sent once).
# Typed: an untyped argument of a SQL function would be sent without its ``::VARCHAR`` cast.
_TENANT = bindparam("tenant", type_=String())
_USER = bindparam("user", type_=String())
STATUSES: BindParameter[str] = bindparam("statuses", expanding=True)


def statuses_of(statuses: Iterable[MemoryStatus]) -> list[str]:
    """The ``statuses`` parameter's value."""
    return [s.value for s in statuses]


@cache
def cue_query() -> Select[Any]:
    """The user's memories holding any of the cues, best half-life score first, every column but
    the vector (``by_cues``, with :func:`cue_params`; the latency benchmark shows this statement's
    plan).

    The user's postings of those cues are read on their own (``ix_memories_user_cues``,
    MATERIALIZED: Postgres cannot estimate an overlap over an expression and would AND it with the
    user's other index), keeping only what the choice needs (id, score, scope, status); the best
    ``limit`` are chosen there, and only their rows are read whole. Reading all the ids there and
    then every matching row again by id read a popular cue's rows twice (11,200 buffers against
    2,292 for a query whose two cues 2,157 memories hold, at 100k memories); keeping whole rows in
    the lookup would hold up to 16 x 2,000 of them in memory before the limit."""
    found = (
        select(MemoryRow.id, MemoryRow.score, MemoryRow.tenant_id, MemoryRow.user_id, MemoryRow.status)
        .where(holds_any(_TENANT, _USER, text_array_param("cues")))
        .cte("holding")
        .prefix_with("MATERIALIZED")
    )
    best = (
        select(found.c.id, found.c.score)
        .where(
            found.c.tenant_id == bindparam("tenant"),
            found.c.user_id == bindparam("user"),
            found.c.status.in_(STATUSES),
        )
        .order_by(found.c.score.desc(), found.c.id)
        .limit(bindparam("limit", type_=Integer()))
        .subquery("best")
    )
    return (
        select(*entity_columns(MemoryRow, WITHOUT_EMBEDDING))
        .join(best, MemoryRow.id == best.c.id)
        .order_by(best.c.score.desc(), best.c.id)
    )


def cue_params(
    tenant_id: str, user_id: str, cues: Sequence[str], statuses: Iterable[MemoryStatus], limit: int
) -> dict[str, Any]:
    """The values of :func:`cue_query`'s parameters."""
    return {
        "tenant": tenant_id,
        "user": user_id,
        "cues": list(cues),
        "statuses": statuses_of(statuses),
        "limit": limit,
    }


@cache
def citing_once(skip: frozenset[str] = frozenset()) -> Select[Any]:
    """The user's memories in the statuses that cite any of the events (parameter ``events``: the
    GIN lookup of ``memory_source_event_ids``), every column but ``skip``'s, oldest first. The
    lookup runs on its own (MATERIALIZED, as in :func:`cue_query`) and reads the rows' columns
    there, since every row it finds is returned (a page of events is cited by few memories); the
    scope and the statuses are applied to those rows. Reading ids in the lookup and each row again
    by id read every row twice."""
    cited = func.memory_source_event_ids(MemoryRow.sources, type_=ARRAY(Text))
    match = cited.overlap(text_array_param("events"))
    found = select(*entity_columns(MemoryRow, skip)).where(match).cte("citing").prefix_with("MATERIALIZED")
    row = found.c
    return (
        select(found)
        .where(
            row.tenant_id == bindparam("tenant"), row.user_id == bindparam("user"), row.status.in_(STATUSES)
        )
        .order_by(row.valid_from, row.id)
    )


def holding_any(tenant_id: str, user_id: str, cues: Sequence[str]) -> ColumnElement[bool]:
    """The row is among the user's memories holding any of ``cues``, looked up in
    ``ix_memories_user_cues`` on its own (MATERIALIZED). Evaluated row by row instead, as the
    planner chose for a user's few hundred rows, the key function cost 10 ms per query (md5 and
    an array per row), on every persist's conflict candidates."""
    holding = (
        select(MemoryRow.id)
        .where(holds_any(tenant_id, user_id, cues))
        .cte("holding")
        .prefix_with("MATERIALIZED")
    )
    return MemoryRow.id.in_(select(holding.c.id))


def holds_any(
    tenant_id: str | ColumnElement[str],
    user_id: str | ColumnElement[str],
    cues: Sequence[str] | ColumnElement[Any],
) -> ColumnElement[bool]:
    """The row is this user's and holds any of ``cues``, in the terms of ``ix_memories_user_cues``
    (migration 0013): the same function on the row's columns and on the asked keys (values, or
    parameters of a statement built once)."""
    asked_cues = cues if isinstance(cues, ColumnElement) else list(cues)
    scoped = func.memory_user_cues(MemoryRow.tenant_id, MemoryRow.user_id, MemoryRow.cues, type_=ARRAY(Text))
    asked = func.memory_user_cues(tenant_id, user_id, cast(asked_cues, ARRAY(Text)), type_=ARRAY(Text))
    return scoped.overlap(asked)


def read_memories(session: Session, query: Select[MemoryRow], with_embedding: bool = True) -> list[Memory]:
    """The memories a row query finds. Without the embedding the vector column is not even
    fetched: recall re-reads and listings never need it, and decoding it dominated their cost."""
    skip = frozenset() if with_embedding else WITHOUT_EMBEDDING
    return [memory_from_row(r, with_embedding) for r in plain_rows(session, query, MemoryRow, skip)]


class SqlMemoryRepository(SessionRepository):
    """Memory rows: add, read, save, and the lookups recall and conflict resolution make."""

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
        row = self.session.scalars(user_memories(tenant_id, user_id, MemoryRow.id == memory_id)).first()
        return memory_from_row(row) if row else None

    def get_many(self, tenant_id: str, user_id: str, ids: Sequence[str]) -> list[Memory]:
        """Without the embedding (recall re-reads index hits here and never needs the vector)."""
        if not ids:
            return []
        rows = read_rows(self.session, _by_ids(), {"tenant": tenant_id, "user": user_id, "ids": list(ids)})
        return [memory_from_row(r, with_embedding=False) for r in rows]

    def save(self, memory: Memory) -> None:
        values = memory_values(memory)
        values.pop("id")
        self.session.execute(
            update(MemoryRow)
            .where(MemoryRow.id == memory.id, *MemoryRow.owned_by(memory.tenant_id, memory.user_id))
            .values(**values)
        )

    def from_event(self, tenant_id: str, user_id: str, event_id: str) -> list[Memory]:
        query = user_memories(tenant_id, user_id, MemoryRow.origin_event_id == event_id).order_by(
            MemoryRow.id
        )
        return read_memories(self.session, query)

    def active_with_hash(
        self, tenant_id: str, user_id: str, content_hash: str, exclude_id: str
    ) -> Memory | None:
        row = self.session.scalars(
            user_memories(
                tenant_id,
                user_id,
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
        rows = read_rows(self.session, cue_query(), cue_params(tenant_id, user_id, cues, statuses, limit))
        return [memory_from_row(r, with_embedding=False) for r in rows]

    def for_user(self, tenant_id: str, user_id: str, statuses: Iterable[MemoryStatus] | None) -> list[Memory]:
        query = user_memories(tenant_id, user_id)
        if statuses is not None:
            query = query.where(in_statuses(statuses))
        return read_memories(self.session, query.order_by(MemoryRow.created_at, MemoryRow.id))

    def by_source(
        self, tenant_id: str, user_id: str, event_id: str, statuses: Iterable[MemoryStatus]
    ) -> list[Memory]:
        return self._citing(tenant_id, user_id, [event_id], statuses, with_embedding=True)

    def by_sources(
        self, tenant_id: str, user_id: str, event_ids: Sequence[str], statuses: Iterable[MemoryStatus]
    ) -> list[Memory]:
        return self._citing(tenant_id, user_id, event_ids, statuses, with_embedding=False)

    def _citing(
        self,
        tenant_id: str,
        user_id: str,
        event_ids: Sequence[str],
        statuses: Iterable[MemoryStatus],
        with_embedding: bool,
    ) -> list[Memory]:
        """The user's memories that cite any of these events among their sources."""
        if not event_ids:
            return []
        # ix_memories_source_events (migration 0012): one GIN overlap for the whole page, on its
        # own (MATERIALIZED): Postgres cannot estimate an overlap over an expression and ANDed it
        # with the user's index, reading every memory of the user (18 ms at 100k); the event ids
        # name few rows, and the user's scope is applied to those.
        skip = frozenset() if with_embedding else WITHOUT_EMBEDDING
        events = sorted(set(event_ids))
        params = {"tenant": tenant_id, "user": user_id, "events": events, "statuses": statuses_of(statuses)}
        rows = read_rows(self.session, citing_once(skip), params)
        return [memory_from_row(r, with_embedding) for r in rows]

    def cue_counts(
        self, tenant_id: str, user_id: str, cues: Sequence[str], statuses: Iterable[MemoryStatus]
    ) -> tuple[int, dict[str, int]]:
        """Read from ``memory_cue_counts`` (kept by a trigger, migration 0010): one index lookup
        per status and cue, however many memories the user has."""
        keys = sorted({*cues, TOTAL_KEY})
        params = {"tenant": tenant_id, "user": user_id, "statuses": statuses_of(statuses), "cues": keys}
        rows = read_rows(self.session, _cue_counts(), params)
        counts = {str(r[0]): int(r[1]) for r in rows if r[1]}
        return counts.pop(TOTAL_KEY, 0), counts

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
        began = (MemoryRow.valid_from >= start, MemoryRow.valid_from < end)
        query = user_memories(tenant_id, user_id, in_statuses(statuses), *began)
        query = query.order_by(MemoryRow.valid_from.desc(), MemoryRow.id).limit(limit)
        return read_memories(self.session, query, with_embedding=with_embedding)

    def happened_in(
        self,
        tenant_id: str,
        user_id: str,
        start: datetime,
        end: datetime,
        statuses: Iterable[MemoryStatus],
        limit: int,
        with_embedding: bool = False,
    ) -> list[Memory]:
        overlap = MemoryRow.happened_overlapping(start, end)  # ix_memories_user_happened
        query = user_memories(tenant_id, user_id, in_statuses(statuses), *overlap)
        query = query.order_by(MemoryRow.happened_from.desc(), MemoryRow.id).limit(limit)
        return read_memories(self.session, query, with_embedding=with_embedding)

    def candidates(
        self,
        tenant_id: str,
        user_id: str,
        slot: str | None,
        cues: Sequence[str],
        exclude: Sequence[str],
        limit: int,
    ) -> list[Memory]:
        match = [holding_any(tenant_id, user_id, cues)] if cues else []
        if slot:
            match.append(MemoryRow.slot == slot)
        if not match:
            return []
        query = user_memories(
            tenant_id,
            user_id,
            MemoryRow.status == MemoryStatus.ACTIVE.value,
            MemoryRow.id.not_in(list(exclude)) if exclude else true(),
            or_(*match),
        ).order_by(MemoryRow.valid_from.desc(), MemoryRow.id)
        return read_memories(self.session, query.limit(limit))

    def recent_of_type(
        self, tenant_id: str, user_id: str, memory_type: MemoryType, since: datetime, limit: int
    ) -> list[Memory]:
        query = user_memories(tenant_id, user_id, *_recent_active(memory_type, since))
        return read_memories(self.session, query.order_by(MemoryRow.valid_from, MemoryRow.id).limit(limit))

    def users_with_recent(
        self, memory_type: MemoryType, since: datetime, limit: int
    ) -> list[tuple[str, str]]:
        rows = self.session.execute(
            select(MemoryRow.tenant_id, MemoryRow.user_id)
            .where(*_recent_active(memory_type, since))
            .group_by(MemoryRow.tenant_id, MemoryRow.user_id)
            .order_by(MemoryRow.tenant_id, MemoryRow.user_id)
            .limit(limit)
        )
        return [(r.tenant_id, r.user_id) for r in rows]


def _recent_active(memory_type: MemoryType, since: datetime) -> tuple[ColumnElement[bool], ...]:
    """Active memories of this type whose validity began at ``since`` or later (consolidation)."""
    return (
        MemoryRow.type == memory_type.value,
        MemoryRow.status == MemoryStatus.ACTIVE.value,
        MemoryRow.valid_from >= since,
    )


@cache
def _cue_counts() -> Select[str, int]:
    """How many of the user's memories in the statuses hold each cue (``cue_counts``)."""
    return (
        select(CueCountRow.cue, func.sum(CueCountRow.n))
        .where(
            CueCountRow.tenant_id == bindparam("tenant"),
            CueCountRow.user_id == bindparam("user"),
            CueCountRow.status.in_(STATUSES),
            CueCountRow.cue == any_(text_array_param("cues")),
        )
        .group_by(CueCountRow.cue)
    )


@cache
def _by_ids() -> Select[Any]:
    """The user's memories among the ids (``get_many``), every column but the vector."""
    owned = MemoryRow.owned_by(bindparam("tenant"), bindparam("user"))
    ids = MemoryRow.id == any_(text_array_param("ids"))
    return select(*entity_columns(MemoryRow, WITHOUT_EMBEDDING)).where(*owned, ids)
