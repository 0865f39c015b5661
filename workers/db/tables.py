"""SQLAlchemy 2.0 tables. Postgres is the source of truth; the vector index is derived from it.

Embeddings are stored as ``REAL[]`` (not pgvector) so the same schema runs on any Postgres,
including the machine's plain one; vector search is Qdrant's job, Postgres keeps the vectors so
that ``cuemem reindex`` can rebuild the index without re-embedding.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    DateTime,
    Float,
    Index,
    Integer,
    LargeBinary,
    PrimaryKeyConstraint,
    String,
    Text,
    UniqueConstraint,
    false,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, REAL
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from shared.language.timeexpr import MAX_SPAN

# Column kinds, declared once (SQLAlchemy's ``Annotated`` column declarations). A column is NOT
# NULL unless its annotation admits None, as the migrations create it.
PublisherId = Annotated[str, mapped_column(String(512))]  # event, tenant, user, session ids as sent
Uuid = Annotated[str, mapped_column(String(36))]  # ids cuemem makes: memories, API keys
Label = Annotated[str, mapped_column(String(16))]  # an enum's value: role, stage, status, outcome
Sha256 = Annotated[str, mapped_column(String(64))]
Name = Annotated[str, mapped_column(String(200))]  # model names, key names, task ids
Prose = Annotated[str, mapped_column(Text)]
Instant = Annotated[datetime, mapped_column(DateTime(timezone=True))]
RecordedAt = Annotated[datetime, mapped_column(DateTime(timezone=True), server_default=func.now())]
Document = Annotated[dict[str, Any], mapped_column(JSONB, default=dict)]
Words = Annotated[list[str], mapped_column(ARRAY(Text), default=list)]
Vector = Annotated[list[float], mapped_column(ARRAY(REAL))]
SerialId = Annotated[int, mapped_column(BigInteger, primary_key=True, autoincrement=True)]


class Base(DeclarativeBase):
    # Plain ``float`` columns are FLOAT (SQLAlchemy 2.1 would make them DOUBLE PRECISION).
    type_annotation_map = {float: Float}


class UserOwned:
    """The scope of a row one user owns: every repository read filters on these two columns."""

    tenant_id: Mapped[PublisherId]
    user_id: Mapped[PublisherId]

    @classmethod
    def owned_by(
        cls, tenant_id: str | ColumnElement[str], user_id: str | ColumnElement[str]
    ) -> tuple[ColumnElement[bool], ColumnElement[bool]]:
        """The WHERE terms that scope a read or write to one user's rows (values, or the parameters
        of a statement built once)."""
        return (cls.tenant_id == tenant_id, cls.user_id == user_id)


class Happened:
    """Event time, [from, to): the days a turn's time expressions name ("前天…" told on 2026-08-12:
    08-10 .. 08-11), on the turn and on the memories made from it (migration 0008). NULL when it
    names none; the told time (``events.at``, ``memories.valid_from``) stays as it is."""

    happened_from: Mapped[Instant | None]
    happened_to: Mapped[Instant | None]

    @classmethod
    def happened_overlapping(cls, start: datetime, end: datetime) -> tuple[ColumnElement[bool], ...]:
        """The WHERE terms of rows whose event time overlaps [start, end). No span is longer than
        MAX_SPAN, so the lower bound makes it a bounded range of ``ix_*_user_happened``."""
        return (cls.happened_from >= start - MAX_SPAN, cls.happened_from < end, cls.happened_to > start)


class EventRow(UserOwned, Happened, Base):
    """The raw event log: every accepted turn, kept even when no memory is made from it."""

    __tablename__ = "events"

    # The producer's id, unique within its tenant: the key is (tenant_id, event_id) (migration 0017).
    event_id: Mapped[PublisherId]
    session_id: Mapped[PublisherId]
    seq: Mapped[int] = mapped_column(BigInteger)
    role: Mapped[Label]
    content: Mapped[Prose]
    content_hash: Mapped[Sha256]
    at: Mapped[Instant]
    # The UTC offset ``at`` was sent with, in seconds east of UTC (migration 0018): timestamptz
    # keeps the instant only, and "下午三点" in the turn means three in the turn's own zone. NULL
    # for a turn recorded before 0018 (read back in UTC, as it always was).
    at_offset_s: Mapped[int | None] = mapped_column(Integer)
    metadata_: Mapped[Document] = mapped_column("metadata")
    stage: Mapped[Label]
    importance: Mapped[float | None]
    extraction_reasons: Mapped[Words]
    received_at: Mapped[RecordedAt]
    done_at: Mapped[Instant | None]
    # When the event reached its current stage: the sweep re-drives events stuck there too long.
    stage_at: Mapped[RecordedAt]
    # The turn's own vector (conversation-log recall path), kept so the turn index can be rebuilt.
    # Deferred: event reads (timeline, recall) must not decode 384 floats per row.
    embedding: Mapped[Vector | None] = mapped_column(deferred=True)
    embedding_model: Mapped[Name | None]
    # The turn alone, as float32 bytes (migration 0020), for recall's ``alone`` scores; deferred too.
    alone_vector: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)
    turn_indexed: Mapped[bool] = mapped_column(server_default=false(), default=False)
    # The turns before it that the vector's context window holds (event ids, oldest first).
    window_ids: Mapped[Words] = mapped_column(server_default="{}")
    # The traceparent of the task that recorded it, when tracing is on (migration 0016): a recall
    # links to it.
    trace_context: Mapped[str | None] = mapped_column(String(55))

    __table_args__ = (
        PrimaryKeyConstraint("tenant_id", "event_id", name="events_pkey"),
        UniqueConstraint("tenant_id", "user_id", "session_id", "seq", name="uq_events_conversation_seq"),
        Index("ix_events_user_at", "tenant_id", "user_id", "at"),
        Index(
            "ix_events_user_happened",
            "tenant_id",
            "user_id",
            "happened_from",
            postgresql_where="happened_from IS NOT NULL",
        ),
        Index("ix_events_stage", "stage"),
        Index("ix_events_stage_at", "stage", "stage_at"),
    )


class ReceiptRow(UserOwned, Base):
    """The inbox: one row per (tenant, event id) ever delivered, with what became of it."""

    __tablename__ = "event_receipts"

    event_id: Mapped[PublisherId]
    outcome: Mapped[Label]  # accepted | duplicate | rejected
    canonical_event_id: Mapped[PublisherId | None]
    reason: Mapped[Prose | None]
    payload: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    received_at: Mapped[RecordedAt]

    __table_args__ = (
        PrimaryKeyConstraint("tenant_id", "event_id", name="event_receipts_pkey"),
        Index("ix_receipts_outcome", "outcome"),
    )


class MemoryRow(UserOwned, Happened, Base):
    __tablename__ = "memories"

    id: Mapped[Uuid] = mapped_column(primary_key=True)
    type: Mapped[Label]
    content: Mapped[Prose]
    content_hash: Mapped[Sha256]
    importance: Mapped[float]
    status: Mapped[Label]
    created_at: Mapped[Instant]
    updated_at: Mapped[Instant]
    last_accessed_at: Mapped[Instant]
    access_count: Mapped[int] = mapped_column(default=0)
    score: Mapped[float] = mapped_column(default=0.0)
    tags: Mapped[Words]
    entities: Mapped[Words]
    cues: Mapped[Words]
    sources: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, default=list)
    origin_event_id: Mapped[PublisherId]
    embedding: Mapped[Vector | None]
    embedding_model: Mapped[Name | None]
    version: Mapped[int] = mapped_column(default=1)
    indexed_version: Mapped[int] = mapped_column(default=0)
    # Validity in event time: a superseded fact stays, with the time it stopped being true.
    valid_from: Mapped[Instant]
    valid_to: Mapped[Instant | None]
    superseded_by: Mapped[Uuid | None]
    slot: Mapped[Name | None]
    status_reason: Mapped[Prose | None]
    due_at: Mapped[Instant | None]
    # The score the index payload holds (None: unknown): decay pushes only scores that moved.
    indexed_score: Mapped[float | None]

    __table_args__ = (
        Index("ix_memories_user_status", "tenant_id", "user_id", "status"),
        Index(
            "ix_memories_user_happened",
            "tenant_id",
            "user_id",
            "happened_from",
            postgresql_where="happened_from IS NOT NULL",
        ),
        Index("ix_memories_user_slot", "tenant_id", "user_id", "slot"),
        Index("ix_memories_user_valid_from", "tenant_id", "user_id", "valid_from"),
        Index("ix_memories_user_hash", "tenant_id", "user_id", "content_hash"),
        Index("ix_memories_origin", "origin_event_id"),
        # The cue keys scoped to their user (a digest of tenant and user before each key), so a
        # user's cue query reads that user's postings only; migration 0013.
        Index(
            "ix_memories_user_cues",
            text("memory_user_cues(tenant_id, user_id, cues)"),
            postgresql_using="gin",
        ),
        # "Which memories cite these turns?" on every recall (by_sources): the cited event ids
        # as an array, one overlap per page of turns; migration 0012 (0007 had one lookup per turn).
        Index("ix_memories_source_events", text("memory_source_event_ids(sources)"), postgresql_using="gin"),
        Index("ix_memories_unindexed", "tenant_id", "user_id", postgresql_where="indexed_version < version"),
        # Room on each page for decay's score updates to stay there (HOT): migration 0011.
        {"postgresql_with": {"fillfactor": "80"}},
    )


class CueCountRow(Base):
    """How many of a user's memories in a status hold a cue (``''``: all of them). Kept by a
    trigger on ``memories`` (migration 0010), so recall weighs a query's cues without counting."""

    __tablename__ = "memory_cue_counts"

    tenant_id: Mapped[str] = mapped_column(String(512), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(512), primary_key=True)
    status: Mapped[str] = mapped_column(String(16), primary_key=True)
    cue: Mapped[str] = mapped_column(Text, primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger)


class RecallClaimRow(UserOwned, Base):
    """Recalls whose reinforcement was applied: a redelivered memory.reinforce counts once."""

    __tablename__ = "recall_claims"

    recall_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    at: Mapped[Instant]

    __table_args__ = (Index("ix_recall_claims_at", "at"),)


class HistoryRow(UserOwned, Base):
    """What happened to a memory and why: kept (deleted only by a privacy delete), so a supersession
    can be traced back."""

    __tablename__ = "memory_history"

    id: Mapped[SerialId]
    memory_id: Mapped[Uuid]
    action: Mapped[str] = mapped_column(String(32))
    related_id: Mapped[Uuid | None]
    reason: Mapped[Prose]
    judge: Mapped[Label]
    event_id: Mapped[PublisherId | None]
    at: Mapped[Instant]
    details: Mapped[Document]
    recorded_at: Mapped[RecordedAt]

    __table_args__ = (Index("ix_memory_history_memory", "memory_id", "id"),)


class LlmCallRow(Base):
    """Every LLM call's token usage, recorded even when its answer failed to parse."""

    __tablename__ = "llm_calls"

    id: Mapped[SerialId]
    operation: Mapped[str] = mapped_column(String(32))
    model: Mapped[Name]
    prompt_tokens: Mapped[int]
    completion_tokens: Mapped[int]
    ok: Mapped[bool]
    error: Mapped[Prose | None]
    latency_ms: Mapped[float]
    event_id: Mapped[PublisherId | None]
    created_at: Mapped[RecordedAt]


class DeadLetterRow(Base):
    """Messages the pipeline gave up on, with the reason; they can be replayed."""

    __tablename__ = "dead_letters"

    id: Mapped[SerialId]
    task_name: Mapped[str] = mapped_column(String(100))
    task_id: Mapped[Name | None]
    event_id: Mapped[PublisherId | None] = mapped_column(index=True)
    args: Mapped[list[Any]] = mapped_column(JSONB, default=list)
    reason: Mapped[Prose]
    deliveries: Mapped[int] = mapped_column(default=0)
    created_at: Mapped[RecordedAt]
    replayed_at: Mapped[Instant | None]


class MetaRow(Base):
    """Small key/value facts about the deployment (e.g. which embedding model the index holds)."""

    __tablename__ = "cuemem_meta"

    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[Prose]


class ApiKeyRow(Base):
    """HTTP API keys, one tenant each. Only a SHA-256 of the key is kept (shared/api_keys.py)."""

    __tablename__ = "api_keys"

    id: Mapped[Uuid] = mapped_column(primary_key=True)
    tenant_id: Mapped[PublisherId]
    name: Mapped[Name]
    key_hash: Mapped[Sha256] = mapped_column(unique=True)
    prefix: Mapped[Label]
    created_at: Mapped[Instant]
    revoked_at: Mapped[Instant | None]

    __table_args__ = (Index("ix_api_keys_prefix", "prefix"), Index("ix_api_keys_tenant", "tenant_id"))
