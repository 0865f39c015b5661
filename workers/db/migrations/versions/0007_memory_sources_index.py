"""A GIN index on memories.sources: recall asks which memories cite a page of turns.

The conversation-log path and the time path ask, on every recall, which of the user's memories
cite the turns they found (``sources @> '[{"event_id": …}]'``, one term per turn). Without an
index Postgres scans all of the user's memories for it: about a second per recall at 100k
memories (measured by ``cuemem bench latency``). ``jsonb_path_ops`` is the smaller GIN opclass and
serves ``@>``, the only operator used on this column.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_memories_sources",
        "memories",
        ["sources"],
        postgresql_using="gin",
        postgresql_ops={"sources": "jsonb_path_ops"},
    )


def downgrade() -> None:
    op.drop_index("ix_memories_sources", table_name="memories")
