"""Which memories cite these turns: one GIN lookup of the cited event ids instead of one per turn.

Recall asks, for the conversation log's hits (about a hundred turns), which of the user's memories
cite them. Migration 0007 served ``sources @> '[{"event_id": …}]'`` with a ``jsonb_path_ops`` GIN
index, but only one containment per turn, OR-ed: about a hundred bitmap scans per recall (by_sources
17 / 32 ms p50 / p95 at 100k memories, ``cuemem bench latency``). The cited event ids as a text
array (``memory_source_event_ids(sources)``, immutable: it reads only its argument) under a GIN
index answer the whole page with one overlap (``&&``): about 1 ms for a hundred ids among 100k
memories. The 0007 index served only that question and is dropped.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE FUNCTION memory_source_event_ids(sources jsonb) RETURNS text[] "
        "LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS "
        "$$ SELECT coalesce(array_agg(s->>'event_id'), '{}') FROM jsonb_array_elements(sources) s $$"
    )
    op.execute(
        "CREATE INDEX ix_memories_source_events ON memories USING gin (memory_source_event_ids(sources))"
    )
    op.drop_index("ix_memories_sources", table_name="memories")


def downgrade() -> None:
    op.create_index(
        "ix_memories_sources",
        "memories",
        ["sources"],
        postgresql_using="gin",
        postgresql_ops={"sources": "jsonb_path_ops"},
    )
    op.execute("DROP INDEX ix_memories_source_events")
    op.execute("DROP FUNCTION memory_source_event_ids(jsonb)")
