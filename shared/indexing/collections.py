"""The two vector collections as data: one ``Collection`` spec, two instances.

The memory index (long-term memories) and the conversation-log index (one point per recorded
turn) are kept up to date by the same mechanisms: the pipeline's incremental push
(``shared/indexing/sync.py``), the reconciliation sweep (``reconcile.py``) and the rebuild
(``reindex.py``). What differs between them is written here once, as the fields of a spec: the
rows' key, vector and model, how a row becomes a point, which repository methods read and mark
the rows, and the names under which each mechanism reports its counts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

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


@dataclass(frozen=True, eq=False)  # hashed by identity: the instances key dicts of indexes
class Collection(Generic[R, S]):
    """What one vector collection is made of, and how its rows are read and marked.

    Every callable that takes a unit of work reads or writes the Postgres side only; the index
    side is written by the mechanisms, the same way for both collections."""

    name: str  # in log lines
    kind: IndexKind  # which index instance (the container builds one per kind)
    prefix: str  # prefixed to every count the mechanisms report ("" for memories)
    drift_keys: tuple[str, ...]  # the reconciliation counts this collection reports, in order
    reindex_keys: tuple[str, str]  # the reindex counts: (points written, rows (re-)embedded)
    key: Callable[[R], str]  # the row's id: keyset paging in id order
    vector: Callable[[R], list[float] | None]
    model: Callable[[R], str | None]
    text: Callable[[R], str]  # what is embedded for the row
    indexable: Callable[[R], bool]  # False: never embedded nor indexed (a redacted turn)
    point: Callable[[R], IndexPoint]
    # Rows not yet in the index, of one user, after a row id: (uow, tenant, user, limit, after).
    unindexed: Callable[[UnitOfWork, str, str, int, str], list[R]]
    mark: Callable[[UnitOfWork, Sequence[R]], None]  # their points are written
    # Every row (of every user) after a row id, vectors included: (uow, after, limit).
    page: Callable[[UnitOfWork, str, int], list[R]]
    reset: Callable[[UnitOfWork, str], None]  # every row unindexed, before a rebuild for a model
    store_vector: Callable[[UnitOfWork, R, list[float], str], R]  # keep a new vector, return the row
    users_page: Callable[[UnitOfWork, tuple[str, str] | None, int], list[tuple[str, str]]]
    states: Callable[[UnitOfWork, str, str], list[PointState[S]]]  # one user's, no vectors loaded
    load: Callable[[UnitOfWork, str, str, Sequence[PointState[S]]], list[R]]  # with vectors
    mark_states: Callable[[UnitOfWork, Sequence[PointState[S]]], None]  # points found current
    # A rewritten point also carries the row's score: score pushes start from it (memories).
    mark_rewritten: Callable[[UnitOfWork, Sequence[R]], None]
    mark_rescored: Callable[[UnitOfWork, Sequence[tuple[str, float]]], None] | None = None

    def counts(self, names: Sequence[str]) -> tuple[str, ...]:
        return tuple(self.prefix + name for name in names)

    @property
    def report_keys(self) -> tuple[str, ...]:
        """The reconciliation's drift counts under the names it reports them."""
        return self.counts(self.drift_keys)


# What a mechanism works on: the enabled collections with their index, the memory index first.
Indexes = Mapping[Collection[Any, Any], VectorIndex]


# --- memories ---------------------------------------------------------------------------------


def _memory_state(s: IndexState) -> PointState[IndexState]:
    return PointState(
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


def _store_memory_vector(uow: UnitOfWork, memory: Memory, vector: list[float], model: str) -> Memory:
    memory.embedding = vector
    memory.embedding_model = model
    uow.memories.save(memory)
    return memory


def _reset_memories(uow: UnitOfWork, model: str) -> None:
    uow.memory_index.reset_indexed()
    uow.meta.set(EMBEDDING_MODEL_KEY, model)  # the rebuilt index holds this model's vectors only


def _mark_memories(uow: UnitOfWork, memories: Sequence[Memory]) -> None:
    uow.memory_index.mark_indexed([(m.id, m.version) for m in memories])


def _mark_memory_states(uow: UnitOfWork, states: Sequence[PointState[IndexState]]) -> None:
    uow.memory_index.mark_indexed([(s.row_id, s.origin.version) for s in states])


def _mark_rewritten_memories(uow: UnitOfWork, memories: Sequence[Memory]) -> None:
    _mark_memories(uow, memories)
    uow.memory_index.mark_scores_indexed([(m.id, m.score) for m in memories])


MEMORIES: Collection[Memory, IndexState] = Collection(
    name="memory",
    kind=IndexKind.MEMORIES,
    prefix="",
    drift_keys=("missing", "extra", "stale", "rescored", "bookkept", "foreign"),
    reindex_keys=("indexed", "reembedded"),
    key=lambda m: m.id,
    vector=lambda m: m.embedding,
    model=lambda m: m.embedding_model,
    text=lambda m: m.content,
    indexable=lambda m: True,
    point=memory_point,
    unindexed=lambda uow, tenant, user, limit, after: uow.memory_index.unindexed(tenant, user, limit, after),
    mark=_mark_memories,
    page=lambda uow, after, limit: uow.memory_index.page_for_reindex(after, limit),
    reset=_reset_memories,
    store_vector=_store_memory_vector,
    users_page=lambda uow, after, limit: uow.memory_index.users_page(after, limit),
    states=lambda uow, tenant, user: [_memory_state(s) for s in uow.memory_index.index_states(tenant, user)],
    load=lambda uow, tenant, user, states: [
        m for m in (uow.memories.get(tenant, user, s.row_id) for s in states) if m
    ],
    mark_states=_mark_memory_states,
    mark_rewritten=_mark_rewritten_memories,
    mark_rescored=lambda uow, scores: uow.memory_index.mark_scores_indexed(scores),
)


# --- conversation turns -----------------------------------------------------------------------


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


def _turn_point(row: TurnRow) -> IndexPoint:
    return turn_point(row.event, row.vector or [], row.context)


def _load_turns(
    uow: UnitOfWork, tenant_id: str, user_id: str, states: Sequence[PointState[TurnState]]
) -> list[TurnRow]:
    return uow.turn_index.rows(tenant_id, user_id, [s.row_id for s in states])


def _store_turn_vector(uow: UnitOfWork, row: TurnRow, vector: list[float], model: str) -> TurnRow:
    # A re-embedding keeps the window the turn had: its context turns are the same rows.
    uow.turn_index.set_vector(row.event.ref, vector, model)
    return row._replace(vector=vector, model=model)


def _mark_turns(uow: UnitOfWork, rows: Sequence[TurnRow]) -> None:
    uow.turn_index.mark_indexed([row.event.ref for row in rows])


TURNS: Collection[TurnRow, TurnState] = Collection(
    name="turn",
    kind=IndexKind.TURNS,
    prefix="turns_",
    drift_keys=("missing", "extra", "stale", "bookkept", "foreign", "unembedded"),
    reindex_keys=("indexed", "embedded"),
    # The pipeline key (tenant, event id): reindex pages every tenant's turns by it, and event ids
    # are unique per tenant only. A user's own pages (``unindexed``) go by the event id part.
    key=lambda row: row.event.ref,
    vector=lambda row: row.vector,
    model=lambda row: row.model,
    text=lambda row: window_text(row.event.content, row.context),  # its context window
    indexable=lambda row: not is_redacted(row.event),  # blanked by a privacy delete: never again
    point=_turn_point,
    unindexed=lambda uow, tenant, user, limit, after: uow.turn_index.unindexed(
        tenant, user, limit, split_ref(after)[1]
    ),
    mark=_mark_turns,
    page=lambda uow, after, limit: uow.turn_index.page_for_reindex(after, limit),
    reset=lambda uow, model: uow.turn_index.reset_indexed(),
    store_vector=_store_turn_vector,
    users_page=lambda uow, after, limit: uow.turn_index.users_page(after, limit),
    states=lambda uow, tenant, user: [_turn_state(s) for s in uow.turn_index.index_states(tenant, user)],
    load=_load_turns,
    mark_states=lambda uow, states: uow.turn_index.mark_indexed([s.origin.event.ref for s in states]),
    mark_rewritten=_mark_turns,
)

COLLECTIONS: tuple[Collection[Any, Any], ...] = (MEMORIES, TURNS)
