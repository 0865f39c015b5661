"""The two vector collections: one ``Collection`` protocol, two classes.

The memory index (long-term memories) and the conversation-log index (one point per recorded
turn, as its context window) are kept up to date by the same mechanisms: the pipeline's
incremental push (``shared/indexing/sync.py``), the reconciliation sweep (``reconcile.py``) and
the rebuild (``reindex.py``). Those are written once, against the protocol; what differs between
the collections is written here, once each, as a class: the rows' key, vector and model, how a
row becomes a point, which repository reads and marks the rows (``uow.memory_index``,
``uow.turn_index``), and the names under which each mechanism reports its counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from shared.events import split_ref
from shared.indexing.points import memory_point, turn_payload, turn_point
from shared.indexing.turn_windows import window_text
from shared.models import EventStage, Memory, MemoryStatus, is_redacted, turn_point_id
from shared.ports import IndexPoint, VectorIndex
from shared.queues import IndexKind
from shared.storage import EMBEDDING_MODEL_KEY, IndexState, TurnRow, TurnState, UnitOfWork

R = TypeVar("R")  # a row as its repository returns it (a Memory, a TurnRow)
S = TypeVar("S")  # the repository's reconciliation view of a row (IndexState, TurnState)


@dataclass(frozen=True)
class PointState(Generic[S]):
    """What the index should hold for one row, in the terms reconciliation compares."""

    point_id: str
    row_id: str  # the key the repository marks and loads by (memory id, event id)
    indexable: bool  # the row should have a point once it has a vector of the current model
    model: str | None  # the row's embedding model (None: unknown, or no vector)
    payload: Mapping[str, Any]  # payload keys the point must hold with these values
    marked: bool  # the row says its point is current
    score: float | None  # a payload score pushed on its own (memories), else None
    unembedded: bool  # counted only: a finished row that was never embedded (turns)
    origin: S


class Collection(Protocol[R, S]):
    """What one vector collection is made of, and how its rows are read and marked.

    Every method that takes a unit of work reads or writes the Postgres side only; the index side
    is written by the mechanisms, the same way for both collections. The two classes below
    subclass this protocol, so a method one of them lacks fails type checking where it is made.
    Instances are hashed by identity: they key the dicts of indexes (``Indexes``)."""

    name: str  # in log lines
    kind: IndexKind  # which index instance (the container builds one per kind)
    prefix: str  # prefixed to every count the mechanisms report ("" for memories)
    drift_keys: tuple[str, ...]  # the reconciliation counts this collection reports, in order
    reindex_keys: tuple[str, str]  # the reindex counts: (points written, rows (re-)embedded)

    def counts(self, names: Sequence[str]) -> tuple[str, ...]:
        return tuple(self.prefix + name for name in names)

    @property
    def report_keys(self) -> tuple[str, ...]:
        """The reconciliation's drift counts under the names it reports them."""
        return self.counts(self.drift_keys)

    # --- a row ---

    def key(self, row: R) -> str:
        """The row's id: keyset paging in id order."""

    def vector(self, row: R) -> list[float] | None: ...

    def model(self, row: R) -> str | None: ...

    def text(self, row: R) -> str:
        """What is embedded for the row."""

    def indexable(self, row: R) -> bool:
        """False: never embedded nor indexed (a redacted turn)."""

    def point(self, row: R) -> IndexPoint: ...

    # --- its rows in Postgres ---

    def unindexed(self, uow: UnitOfWork, tenant_id: str, user_id: str, limit: int, after: str) -> list[R]:
        """One user's rows not yet in the index, after the row key ``after``."""

    def mark(self, uow: UnitOfWork, rows: Sequence[R]) -> None:
        """Their points are written."""

    def page(self, uow: UnitOfWork, after: str, limit: int) -> list[R]:
        """Every row (of every user) after the row key ``after``, vectors included."""

    def reset(self, uow: UnitOfWork, model: str) -> None:
        """Every row unindexed, before a rebuild for ``model``."""

    def store_vector(self, uow: UnitOfWork, row: R, vector: list[float], model: str) -> R:
        """Keep a new vector of the row; the row with it."""

    def users_page(self, uow: UnitOfWork, after: tuple[str, str] | None, limit: int) -> list[tuple[str, str]]:
        """(tenant, user) pairs that have rows, after ``after`` (keyset paging)."""

    def states(self, uow: UnitOfWork, tenant_id: str, user_id: str) -> list[PointState[S]]:
        """One user's rows as reconciliation compares them (no vectors loaded)."""

    def load(self, uow: UnitOfWork, tenant_id: str, user_id: str, states: Sequence[PointState[S]]) -> list[R]:
        """The rows of these states, vectors included."""

    def mark_states(self, uow: UnitOfWork, states: Sequence[PointState[S]]) -> None:
        """Their points were found current."""

    def mark_rewritten(self, uow: UnitOfWork, rows: Sequence[R]) -> None:
        """Their points were written again by reconciliation."""

    def mark_rescored(self, uow: UnitOfWork, scores: Sequence[tuple[str, float]]) -> None:
        """The points' payload scores were set to these (row id, score); only rows whose
        ``PointState.score`` is not None are ever rescored."""


# What a mechanism works on: the enabled collections with their index, the memory index first.
Indexes = Mapping[Collection[Any, Any], VectorIndex]


class MemoryCollection(Collection[Memory, IndexState]):
    """Long-term memories: a point per persisted memory, keyed by memory id, with the memory's own
    vector; the bookkeeping is ``uow.memory_index`` (which version and score the index holds)."""

    name = "memory"
    kind = IndexKind.MEMORIES
    prefix = ""
    drift_keys = ("missing", "extra", "stale", "rescored", "bookkept", "foreign")
    reindex_keys = ("indexed", "reembedded")

    def key(self, row: Memory) -> str:
        return row.id

    def vector(self, row: Memory) -> list[float] | None:
        return row.embedding

    def model(self, row: Memory) -> str | None:
        return row.embedding_model

    def text(self, row: Memory) -> str:
        return row.content

    def indexable(self, row: Memory) -> bool:
        return True

    def point(self, row: Memory) -> IndexPoint:
        return memory_point(row)

    def unindexed(
        self, uow: UnitOfWork, tenant_id: str, user_id: str, limit: int, after: str
    ) -> list[Memory]:
        return uow.memory_index.unindexed(tenant_id, user_id, limit, after)

    def mark(self, uow: UnitOfWork, rows: Sequence[Memory]) -> None:
        uow.memory_index.mark_indexed([(m.id, m.version) for m in rows])

    def page(self, uow: UnitOfWork, after: str, limit: int) -> list[Memory]:
        return uow.memory_index.page_for_reindex(after, limit)

    def reset(self, uow: UnitOfWork, model: str) -> None:
        uow.memory_index.reset_indexed()
        uow.meta.set(EMBEDDING_MODEL_KEY, model)  # the rebuilt index holds this model's vectors only

    def store_vector(self, uow: UnitOfWork, row: Memory, vector: list[float], model: str) -> Memory:
        row.embedding = vector
        row.embedding_model = model
        uow.memories.save(row)
        return row

    def users_page(self, uow: UnitOfWork, after: tuple[str, str] | None, limit: int) -> list[tuple[str, str]]:
        return uow.memory_index.users_page(after, limit)

    def states(self, uow: UnitOfWork, tenant_id: str, user_id: str) -> list[PointState[IndexState]]:
        return [
            PointState(
                point_id=s.memory_id,
                row_id=s.memory_id,
                indexable=s.status != MemoryStatus.PENDING.value and s.has_embedding,
                model=s.embedding_model,
                payload={"version": s.version, "status": s.status},
                marked=s.indexed_version >= s.version,
                score=s.score,
                unembedded=False,
                origin=s,
            )
            for s in uow.memory_index.index_states(tenant_id, user_id)
        ]

    def load(
        self, uow: UnitOfWork, tenant_id: str, user_id: str, states: Sequence[PointState[IndexState]]
    ) -> list[Memory]:
        return [m for m in (uow.memories.get(tenant_id, user_id, s.row_id) for s in states) if m]

    def mark_states(self, uow: UnitOfWork, states: Sequence[PointState[IndexState]]) -> None:
        uow.memory_index.mark_indexed([(s.row_id, s.origin.version) for s in states])

    def mark_rewritten(self, uow: UnitOfWork, rows: Sequence[Memory]) -> None:
        # A rewritten point also carries the row's score: score pushes start from it.
        self.mark(uow, rows)
        uow.memory_index.mark_scores_indexed([(m.id, m.score) for m in rows])

    def mark_rescored(self, uow: UnitOfWork, scores: Sequence[tuple[str, float]]) -> None:
        uow.memory_index.mark_scores_indexed(scores)


class TurnCollection(Collection[TurnRow, TurnState]):
    """The conversation log: a point per recorded turn, holding its context window's vector and
    keyword terms; the bookkeeping is ``uow.turn_index`` (on the event rows)."""

    name = "turn"
    kind = IndexKind.TURNS
    prefix = "turns_"
    drift_keys = ("missing", "extra", "stale", "bookkept", "foreign", "unembedded")
    reindex_keys = ("indexed", "embedded")

    def key(self, row: TurnRow) -> str:
        # The pipeline key (tenant, event id): reindex pages every tenant's turns by it, and event
        # ids are unique per tenant only. A user's own pages (``unindexed``) go by the event id part.
        return row.event.ref

    def vector(self, row: TurnRow) -> list[float] | None:
        return row.vector

    def model(self, row: TurnRow) -> str | None:
        return row.model

    def text(self, row: TurnRow) -> str:
        return window_text(row.event.content, row.context)  # its context window

    def indexable(self, row: TurnRow) -> bool:
        return not is_redacted(row.event)  # blanked by a privacy delete: never again

    def point(self, row: TurnRow) -> IndexPoint:
        return turn_point(row.event, row.vector or [], row.context)

    def unindexed(
        self, uow: UnitOfWork, tenant_id: str, user_id: str, limit: int, after: str
    ) -> list[TurnRow]:
        return uow.turn_index.unindexed(tenant_id, user_id, limit, split_ref(after)[1])

    def mark(self, uow: UnitOfWork, rows: Sequence[TurnRow]) -> None:
        uow.turn_index.mark_indexed([row.event.ref for row in rows])

    def page(self, uow: UnitOfWork, after: str, limit: int) -> list[TurnRow]:
        return uow.turn_index.page_for_reindex(after, limit)

    def reset(self, uow: UnitOfWork, model: str) -> None:
        uow.turn_index.reset_indexed()

    def store_vector(self, uow: UnitOfWork, row: TurnRow, vector: list[float], model: str) -> TurnRow:
        # A re-embedding keeps the window the turn had: its context turns are the same rows.
        uow.turn_index.set_vector(row.event.ref, vector, model)
        return row._replace(vector=vector, model=model)

    def users_page(self, uow: UnitOfWork, after: tuple[str, str] | None, limit: int) -> list[tuple[str, str]]:
        return uow.turn_index.users_page(after, limit)

    def states(self, uow: UnitOfWork, tenant_id: str, user_id: str) -> list[PointState[TurnState]]:
        return [_turn_state(s) for s in uow.turn_index.index_states(tenant_id, user_id)]

    def load(
        self, uow: UnitOfWork, tenant_id: str, user_id: str, states: Sequence[PointState[TurnState]]
    ) -> list[TurnRow]:
        return uow.turn_index.rows(tenant_id, user_id, [s.row_id for s in states])

    def mark_states(self, uow: UnitOfWork, states: Sequence[PointState[TurnState]]) -> None:
        uow.turn_index.mark_indexed([s.origin.event.ref for s in states])

    def mark_rewritten(self, uow: UnitOfWork, rows: Sequence[TurnRow]) -> None:
        self.mark(uow, rows)

    def mark_rescored(self, uow: UnitOfWork, scores: Sequence[tuple[str, float]]) -> None:
        # Never called: a turn's point carries no score of its own (its states' score is None).
        return None


def _turn_state(s: TurnState) -> PointState[TurnState]:
    event = s.event
    return PointState(
        point_id=turn_point_id(event.tenant_id, event.user_id, event.event_id),
        row_id=event.event_id,
        indexable=s.embedding_model is not None,
        model=s.embedding_model,
        payload=turn_payload(event),
        marked=s.turn_indexed,
        score=None,
        # Turns without a vector that are not done yet are in the pipeline, not drift; done ones
        # (the index was turned on later, say) are only counted: embedding them is reindex's job.
        unembedded=s.embedding_model is None and s.stage == EventStage.DONE.value and not is_redacted(event),
        origin=s,
    )


MEMORIES = MemoryCollection()
TURNS = TurnCollection()
COLLECTIONS: tuple[Collection[Any, Any], ...] = (MEMORIES, TURNS)
