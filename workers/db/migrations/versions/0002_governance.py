"""Memory governance: validity, supersession, slots, due times; history; LLM call log.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("memories", sa.Column("valid_from", sa.DateTime(timezone=True), nullable=True))
    op.execute("UPDATE memories SET valid_from = created_at WHERE valid_from IS NULL")
    op.alter_column("memories", "valid_from", nullable=False)
    op.add_column("memories", sa.Column("valid_to", sa.DateTime(timezone=True), nullable=True))
    op.add_column("memories", sa.Column("superseded_by", sa.String(36), nullable=True))
    op.add_column("memories", sa.Column("slot", sa.String(200), nullable=True))
    op.add_column("memories", sa.Column("status_reason", sa.Text(), nullable=True))
    op.add_column("memories", sa.Column("due_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index("ix_memories_user_slot", "memories", ["tenant_id", "user_id", "slot"])

    op.create_table(
        "memory_history",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column("memory_id", sa.String(36), nullable=False),
        sa.Column("tenant_id", sa.String(512), nullable=False),
        sa.Column("user_id", sa.String(512), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("related_id", sa.String(36), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("judge", sa.String(16), nullable=False),
        sa.Column("event_id", sa.String(512), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("details", postgresql.JSONB(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    )
    op.create_index("ix_memory_history_memory", "memory_history", ["memory_id", "id"])

    op.create_table(
        "llm_calls",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column("operation", sa.String(32), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("event_id", sa.String(512), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("llm_calls")
    op.drop_index("ix_memory_history_memory", table_name="memory_history")
    op.drop_table("memory_history")
    op.drop_index("ix_memories_user_slot", table_name="memories")
    for column in ("due_at", "status_reason", "slot", "superseded_by", "valid_to", "valid_from"):
        op.drop_column("memories", column)
