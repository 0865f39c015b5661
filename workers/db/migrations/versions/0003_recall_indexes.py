"""Recall indexes: memories by (tenant, user, valid_from) for time ranges and the recency path.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_memories_user_valid_from", "memories", ["tenant_id", "user_id", "valid_from"])


def downgrade() -> None:
    op.drop_index("ix_memories_user_valid_from", table_name="memories")
