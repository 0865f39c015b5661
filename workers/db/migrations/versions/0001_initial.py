"""Initial schema: event log, receipts (inbox), memories, dead letters, meta.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("event_id", sa.String(512), primary_key=True),
        sa.Column("tenant_id", sa.String(512), nullable=False),
        sa.Column("user_id", sa.String(512), nullable=False),
        sa.Column("session_id", sa.String(512), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("metadata", postgresql.JSONB(), nullable=False),
        sa.Column("stage", sa.String(16), nullable=False),
        sa.Column("importance", sa.Float(), nullable=True),
        sa.Column("extraction_reasons", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("tenant_id", "user_id", "session_id", "seq", name="uq_events_conversation_seq"),
    )
    op.create_index("ix_events_user_at", "events", ["tenant_id", "user_id", "at"])
    op.create_index("ix_events_stage", "events", ["stage"])

    op.create_table(
        "event_receipts",
        sa.Column("event_id", sa.String(512), primary_key=True),
        sa.Column("tenant_id", sa.String(512), nullable=False),
        sa.Column("user_id", sa.String(512), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("canonical_event_id", sa.String(512), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("payload", postgresql.JSONB(), nullable=True),
        sa.Column("received_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    )
    op.create_index("ix_receipts_outcome", "event_receipts", ["outcome"])

    op.create_table(
        "memories",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("tenant_id", sa.String(512), nullable=False),
        sa.Column("user_id", sa.String(512), nullable=False),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("importance", sa.Float(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_accessed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("access_count", sa.Integer(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("tags", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("entities", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("cues", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("sources", postgresql.JSONB(), nullable=False),
        sa.Column("origin_event_id", sa.String(512), nullable=False),
        sa.Column("embedding", postgresql.ARRAY(postgresql.REAL()), nullable=True),
        sa.Column("embedding_model", sa.String(200), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("indexed_version", sa.Integer(), nullable=False),
    )
    op.create_index("ix_memories_user_status", "memories", ["tenant_id", "user_id", "status"])
    op.create_index("ix_memories_user_hash", "memories", ["tenant_id", "user_id", "content_hash"])
    op.create_index("ix_memories_origin", "memories", ["origin_event_id"])
    op.create_index("ix_memories_cues", "memories", ["cues"], postgresql_using="gin")
    op.create_index(
        "ix_memories_unindexed",
        "memories",
        ["tenant_id", "user_id"],
        postgresql_where=sa.text("indexed_version < version"),
    )

    op.create_table(
        "dead_letters",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column("task_name", sa.String(100), nullable=False),
        sa.Column("task_id", sa.String(200), nullable=True),
        sa.Column("event_id", sa.String(512), nullable=True),
        sa.Column("args", postgresql.JSONB(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("deliveries", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("replayed_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_dead_letters_event_id", "dead_letters", ["event_id"])

    op.create_table(
        "cuemem_meta",
        sa.Column("key", sa.String(100), primary_key=True),
        sa.Column("value", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("cuemem_meta")
    op.drop_table("dead_letters")
    op.drop_table("memories")
    op.drop_table("event_receipts")
    op.drop_table("events")
