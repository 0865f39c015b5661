"""Lifecycle: the score each index payload holds (so decay pushes only scores that moved), and
the recalls whose reinforcement was applied (so a redelivered memory.reinforce counts once).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL: unknown; the next score push writes every indexed memory's payload score once.
    op.add_column("memories", sa.Column("indexed_score", sa.Float(), nullable=True))
    op.create_table(
        "recall_claims",
        sa.Column("recall_id", sa.String(128), primary_key=True),
        sa.Column("tenant_id", sa.String(512), nullable=False),
        sa.Column("user_id", sa.String(512), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_recall_claims_at", "recall_claims", ["at"])


def downgrade() -> None:
    op.drop_index("ix_recall_claims_at", table_name="recall_claims")
    op.drop_table("recall_claims")
    op.drop_column("memories", "indexed_score")
