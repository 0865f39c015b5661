"""Events: when they reached their stage (the stalled-event sweep), and the turn's own vector
(the conversation-log recall path; Postgres keeps it so the turn index can be rebuilt).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY, REAL

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "events",
        sa.Column("stage_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    )
    op.execute("UPDATE events SET stage_at = coalesce(done_at, received_at)")
    op.add_column("events", sa.Column("embedding", ARRAY(REAL), nullable=True))
    op.add_column("events", sa.Column("embedding_model", sa.String(200), nullable=True))
    op.add_column(
        "events", sa.Column("turn_indexed", sa.Boolean(), server_default=sa.false(), nullable=False)
    )
    op.create_index("ix_events_stage_at", "events", ["stage", "stage_at"])


def downgrade() -> None:
    op.drop_index("ix_events_stage_at", table_name="events")
    for column in ("turn_indexed", "embedding_model", "embedding", "stage_at"):
        op.drop_column("events", column)
