"""SQLAlchemy 2.0 tables. Postgres is the source of truth; the vector index is derived from it.

Embeddings are stored as ``REAL[]`` (not pgvector) so the same schema runs on any Postgres,
including the machine's plain one; vector search is Qdrant's job, Postgres keeps the vectors so
that ``cuemem reindex`` can rebuild the index without re-embedding.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
    func,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, REAL
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class EventRow(Base):
    """The raw event log: every accepted turn, kept even when no memory is made from it."""

    __tablename__ = "events"

    event_id: Mapped[str] = mapped_column(String(512), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(512))
    user_id: Mapped[str] = mapped_column(String(512))
    session_id: Mapped[str] = mapped_column(String(512))
    seq: Mapped[int] = mapped_column(BigInteger)
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(64))
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, default=dict)
    stage: Mapped[str] = mapped_column(String(16))
    importance: Mapped[float | None] = mapped_column(Float, nullable=True)
    extraction_reasons: Mapped[list[str]] = mapped_column(ARRAY(Text), default=list)
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    done_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # When the event reached its current stage: the sweep re-drives events stuck there too long.
    stage_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    # The turn's own vector (conversation-log recall path), kept so the turn index can be rebuilt.
    # Deferred: event reads (timeline, recall) must not decode 384 floats per row.
    embedding: Mapped[list[float] | None] = mapped_column(ARRAY(REAL), nullable=True, deferred=True)
    embedding_model: Mapped[str | None] = mapped_column(String(200), nullable=True)
    turn_indexed: Mapped[bool] = mapped_column(Boolean, server_default=false(), default=False)

    __table_args__ = (
        UniqueConstraint("tenant_id", "user_id", "session_id", "seq", name="uq_events_conversation_seq"),
        Index("ix_events_user_at", "tenant_id", "user_id", "at"),
        Index("ix_events_stage", "stage"),
        Index("ix_events_stage_at", "stage", "stage_at"),
    )


class ReceiptRow(Base):
    """The inbox: one row per event id ever delivered, with what became of it."""

    __tablename__ = "event_receipts"

    event_id: Mapped[str] = mapped_column(String(512), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(512))
    user_id: Mapped[str] = mapped_column(String(512))
    outcome: Mapped[str] = mapped_column(String(16))  # accepted | duplicate | rejected
    canonical_event_id: Mapped[str | None] = mapped_column(String(512), nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    payload: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())

    __table_args__ = (Index("ix_receipts_outcome", "outcome"),)


class MemoryRow(Base):
    __tablename__ = "memories"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(512))
    user_id: Mapped[str] = mapped_column(String(512))
    type: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(64))
    importance: Mapped[float] = mapped_column(Float)
    status: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_accessed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    access_count: Mapped[int] = mapped_column(Integer, default=0)
    score: Mapped[float] = mapped_column(Float, default=0.0)
    tags: Mapped[list[str]] = mapped_column(ARRAY(Text), default=list)
    entities: Mapped[list[str]] = mapped_column(ARRAY(Text), default=list)
    cues: Mapped[list[str]] = mapped_column(ARRAY(Text), default=list)
    sources: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, default=list)
    origin_event_id: Mapped[str] = mapped_column(String(512))
    embedding: Mapped[list[float] | None] = mapped_column(ARRAY(REAL), nullable=True)
    embedding_model: Mapped[str | None] = mapped_column(String(200), nullable=True)
    version: Mapped[int] = mapped_column(Integer, default=1)
    indexed_version: Mapped[int] = mapped_column(Integer, default=0)
    # Validity in event time: a superseded fact stays, with the time it stopped being true.
    valid_from: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    valid_to: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    superseded_by: Mapped[str | None] = mapped_column(String(36), nullable=True)
    slot: Mapped[str | None] = mapped_column(String(200), nullable=True)
    status_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    due_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # The score the index payload holds (None: unknown): decay pushes only scores that moved.
    indexed_score: Mapped[float | None] = mapped_column(Float, nullable=True)

    __table_args__ = (
        Index("ix_memories_user_status", "tenant_id", "user_id", "status"),
        Index("ix_memories_user_slot", "tenant_id", "user_id", "slot"),
        Index("ix_memories_user_valid_from", "tenant_id", "user_id", "valid_from"),
        Index("ix_memories_user_hash", "tenant_id", "user_id", "content_hash"),
        Index("ix_memories_origin", "origin_event_id"),
        Index("ix_memories_cues", "cues", postgresql_using="gin"),
        # "Which memories cite these turns?" on every recall (by_sources); migration 0007.
        Index(
            "ix_memories_sources",
            "sources",
            postgresql_using="gin",
            postgresql_ops={"sources": "jsonb_path_ops"},
        ),
        Index("ix_memories_unindexed", "tenant_id", "user_id", postgresql_where="indexed_version < version"),
    )


class RecallClaimRow(Base):
    """Recalls whose reinforcement was applied: a redelivered memory.reinforce counts once."""

    __tablename__ = "recall_claims"

    recall_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(512))
    user_id: Mapped[str] = mapped_column(String(512))
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (Index("ix_recall_claims_at", "at"),)


class HistoryRow(Base):
    """What happened to a memory and why: never deleted, so a supersession can be traced back."""

    __tablename__ = "memory_history"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    memory_id: Mapped[str] = mapped_column(String(36))
    tenant_id: Mapped[str] = mapped_column(String(512))
    user_id: Mapped[str] = mapped_column(String(512))
    action: Mapped[str] = mapped_column(String(32))
    related_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    reason: Mapped[str] = mapped_column(Text)
    judge: Mapped[str] = mapped_column(String(16))
    event_id: Mapped[str | None] = mapped_column(String(512), nullable=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    details: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    recorded_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())

    __table_args__ = (Index("ix_memory_history_memory", "memory_id", "id"),)


class LlmCallRow(Base):
    """Every LLM call's token usage, recorded even when its answer failed to parse."""

    __tablename__ = "llm_calls"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    operation: Mapped[str] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(String(200))
    prompt_tokens: Mapped[int] = mapped_column(Integer)
    completion_tokens: Mapped[int] = mapped_column(Integer)
    ok: Mapped[bool] = mapped_column(Boolean)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    latency_ms: Mapped[float] = mapped_column(Float)
    event_id: Mapped[str | None] = mapped_column(String(512), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class DeadLetterRow(Base):
    """Messages the pipeline gave up on, with the reason; they can be replayed."""

    __tablename__ = "dead_letters"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    task_name: Mapped[str] = mapped_column(String(100))
    task_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    event_id: Mapped[str | None] = mapped_column(String(512), nullable=True, index=True)
    args: Mapped[list[Any]] = mapped_column(JSONB, default=list)
    reason: Mapped[str] = mapped_column(Text)
    deliveries: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    replayed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class MetaRow(Base):
    """Small key/value facts about the deployment (e.g. which embedding model the index holds)."""

    __tablename__ = "cuemem_meta"

    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class ApiKeyRow(Base):
    """HTTP API keys, one tenant each. Only a SHA-256 of the key is kept (shared/api_keys.py)."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(512))
    name: Mapped[str] = mapped_column(String(200))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)

    __table_args__ = (Index("ix_api_keys_prefix", "prefix"), Index("ix_api_keys_tenant", "tenant_id"))
