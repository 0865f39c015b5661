"""events.window_ids: the turns a conversation-log vector's context window holds.

A turn's point in the conversation-log index is embedded with the turns before it in its session
(``shared/indexing/turn_windows.py``); the ids of those turns are kept beside the vector so that
recall can let a hit stand for them, reindex can rebuild the same window, and a privacy delete can
find the windows that quote a deleted turn. Existing rows get an empty window (their vectors are
of the turn alone, which is what an empty window means).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "events",
        sa.Column("window_ids", ARRAY(sa.Text()), nullable=False, server_default="{}"),
    )


def downgrade() -> None:
    op.drop_column("events", "window_ids")
