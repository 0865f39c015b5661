"""Ports: what the core needs from the outside world, as small protocols.

Adapters live in ``workers/`` (Qdrant, embedding models); fakes for unit tests live in
``tests/support/fakes.py``. Tenant and user are mandatory arguments of every index call: there is no
way to search or change the index without naming whose memory it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

from shared.events import TurnPublished


class SparseTerms(NamedTuple):
    """A sparse vector for keyword search: term indices (unique, ascending) and their weights.

    Built by ``shared.language.sparse`` (BM25 term weights of a document, 1.0 per term of a query); the
    index multiplies by the IDF. A NamedTuple so that it crosses JSON (Celery) as two lists.
    """

    indices: tuple[int, ...]
    values: tuple[float, ...]


@dataclass(frozen=True)
class IndexPoint:
    id: str  # memory id (UUID text)
    tenant_id: str
    user_id: str
    vector: Sequence[float]
    payload: dict[str, Any] = field(default_factory=dict)
    # Keyword terms of the memory's text; None (or no terms): the point is never found by keyword.
    sparse: SparseTerms | None = None


@dataclass(frozen=True)
class IndexHit:
    id: str
    score: float
    payload: dict[str, Any] = field(default_factory=dict)


class EmbeddingModelMismatch(RuntimeError):
    """Vectors of two different models would be mixed; the fix is `cuemem reindex`."""

    def __init__(self, stored: str, configured: str):
        self.stored = stored
        self.configured = configured
        super().__init__(
            f"the index holds vectors of embedding model {stored!r} but {configured!r} is configured; "
            "vectors of different models are never mixed: run `cuemem reindex` to re-embed and rebuild"
        )


class IndexUnavailable(RuntimeError):
    """The vector index cannot be reached or is owned by another process."""


class IndexOwnedElsewhere(IndexUnavailable):
    """The embedded index is held by another process (the index worker); ask that process."""


class Embedder(Protocol):
    @property
    def model_name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


class Reranker(Protocol):
    """A cross-encoder that scores how well each document answers the query (optional, off by
    default; ``shared.recall.rerank`` applies it to recall's top candidates)."""

    def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        """One relevance score per document, in the documents' order (higher is more relevant).
        Raises on failure; the caller keeps its previous order then."""
        ...


class PublishLedger(Protocol):
    """Turns published but not yet recorded in Postgres.

    Redis brokers hand a message to a consumer and only then note it as unacknowledged; a worker
    killed in between loses the message. The ledger keeps every published turn until its record
    committed, so the stalled sweep can send it again (recording is idempotent by event id).
    """

    def settle(self, members: Sequence[str]) -> None:
        """Forget turns whose record committed (accepted, duplicate or rejected); ``members`` are
        ``infra.redis_layout.ledger_member(tenant, event id)``."""

    def overdue(self, published_before_ms: int, limit: int) -> list[dict[str, Any]]:
        """Record messages of turns published before the given time and still not recorded; each
        returned entry counts as re-sent now (its time moves to now), so a sweep sends it once."""

    def backlog(self) -> int:
        """Messages waiting in the pipeline queues; a sweep waits while there is a backlog, since
        a queued message is late, not lost."""

    def count_redrives(self, stalled: Sequence[tuple[str, str]]) -> list[int]:
        """Count one more re-drive of each (event id, stage) and return the counts (kept a week)."""

    def forget_redrives(self, stalled: Sequence[tuple[str, str]]) -> None:
        """Start these (event id, stage) counts again (the event was parked for an operator)."""


@runtime_checkable
class LossAwareIndex(Protocol):
    """An index that can lose its files under the process holding it (the embedded engine) and
    remembers the loss until a reconciliation has rebuilt it from Postgres. Meanwhile its searches
    raise IndexUnavailable, since a partial index would answer "no such memory" for what it lost.
    ``shared.indexing.reconcile`` uses it when the index offers it."""

    def lost(self) -> str | None:
        """The note of a loss not repaired yet (when and what), or None when the index is whole."""

    def mark_rebuilt(self, lost: str) -> bool:
        """A reconciliation that began after ``lost`` was noted ran to its end: clear the note,
        unless another loss was noted since. Returns whether it cleared."""


class WorkingMemory(Protocol):
    """The last turns of each conversation, kept where they can be read before any worker ran
    (Redis, ``workers.redis.working_memory``): recall's read-your-writes."""

    def recent(
        self, tenant_id: str, user_id: str, session_id: str | None, limit: int
    ) -> list[TurnPublished]: ...


class SeqCounter(Protocol):
    """The per-conversation seq counters the producer draws from (Redis,
    ``infra.redis_layout.seq_key``)."""

    def next_after(self, tenant_id: str, user_id: str, session_id: str, floor: int) -> int:
        """A new seq for the conversation above both its counter and ``floor``; the counter moves to
        it, so no producer is handed it again."""


class VectorIndex(Protocol):
    """A per-tenant, per-user vector index. Every call names the tenant and the user."""

    def ensure(self, dim: int, model_name: str) -> None:
        """Create the index if missing; raise EmbeddingModelMismatch if it holds another model."""

    def upsert(self, points: Sequence[IndexPoint]) -> None: ...

    def delete(self, tenant_id: str, user_id: str, ids: Sequence[str]) -> None: ...

    def search(
        self,
        tenant_id: str,
        user_id: str,
        vector: Sequence[float],
        limit: int,
        statuses: Sequence[str] = ("active",),
    ) -> list[IndexHit]: ...

    def search_keywords(
        self,
        tenant_id: str,
        user_id: str,
        terms: SparseTerms,
        limit: int,
        statuses: Sequence[str] = ("active",),
    ) -> list[IndexHit]:
        """BM25-style keyword search inside the index: the points of this user sharing a term with
        ``terms``, scored by the sum of query weight x IDF x document weight, IDF computed over this
        tenant's and user's points that carry terms. Empty ``terms`` find nothing."""

    def ids(self, tenant_id: str, user_id: str) -> set[str]: ...

    def payloads(self, tenant_id: str, user_id: str) -> dict[str, dict[str, Any]]:
        """Every point of this tenant and user: id -> payload (no vectors). The reconciliation
        sweep compares it with Postgres."""

    def set_payload(self, tenant_id: str, user_id: str, payloads: Mapping[str, Mapping[str, Any]]) -> None:
        """Merge the given keys into the payload of each named point of this tenant and user,
        leaving vectors and other keys as they are; ids with no point are skipped. One call per
        batch (score refreshes touch many points)."""

    def count(self, tenant_id: str | None = None) -> int:
        """How many points the index holds: all of them, or one tenant's (every user's)."""

    def reset(self, dim: int, model_name: str) -> None:
        """Drop every point and start an empty index for ``model_name`` (used by reindex)."""

    def optimize(self) -> bool:
        """Build search structures (HNSW) where the engine does not do it by itself."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class Search:
    """One search of a batch: in the index ``kind`` (an ``IndexKind`` value), by ``vector`` or,
    when it is None, by ``terms``."""

    kind: str
    vector: Sequence[float] | None
    terms: SparseTerms | None
    limit: int
    statuses: tuple[str, ...] = ("active",)


@runtime_checkable
class BatchSearch(Protocol):
    """An index searched through another process (the embedded index's owner): several searches of
    one user, in any of the owner's indexes, cost one round trip together."""

    def search_batch(
        self, tenant_id: str, user_id: str, searches: Sequence[Search]
    ) -> list[list[IndexHit] | IndexUnavailable] | None:
        """The hits of each search in order, or the reason it could not run; None when the index
        is searched in this process right now (nothing to batch: search one by one). Raises
        IndexUnavailable when the owner could not be asked at all."""
