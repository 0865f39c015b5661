"""memory_cue_counts: how many of a user's memories in each status hold each cue, kept at write time.

Recall weighs every query cue by its rarity among the user's memories. Counting that per query
(``unnest(cues)`` over the user's rows) cost 13 / 80 ms (p50 / p95) at 100k memories and a second
at 1M (``cuemem bench latency``). The counts are kept here instead, by a row trigger on
``memories``: every path that inserts, deletes, or changes a row's cues or status (the pipeline,
curation, lifecycle sweeps, privacy deletes, a COPY) moves them in the same transaction, so they
cannot drift from the rows; a TRUNCATE of memories empties them. The cue ``''`` counts all of the
user's memories in a status.

An update that touches neither ``cues`` nor ``status`` (decay, reinforcement, index bookkeeping)
does not fire the trigger. ``memory_cue_counts_rebuild()`` recounts from the rows (this migration
uses it to fill the table; a bulk loader that disables user triggers calls it afterwards).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


# One memory's cue keys and the total key '' (each once), in a fixed order: two transactions
# moving the same counts take their row locks in the same order.
_APPLY = """
CREATE FUNCTION memory_cue_counts_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        INSERT INTO memory_cue_counts AS c (tenant_id, user_id, status, cue, n)
        SELECT OLD.tenant_id, OLD.user_id, OLD.status, k.cue, -1
        FROM (SELECT DISTINCT unnest(OLD.cues || ARRAY['']::text[]) AS cue) k ORDER BY k.cue
        ON CONFLICT (tenant_id, user_id, status, cue) DO UPDATE SET n = c.n + EXCLUDED.n;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO memory_cue_counts AS c (tenant_id, user_id, status, cue, n)
        SELECT NEW.tenant_id, NEW.user_id, NEW.status, k.cue, 1
        FROM (SELECT DISTINCT unnest(NEW.cues || ARRAY['']::text[]) AS cue) k ORDER BY k.cue
        ON CONFLICT (tenant_id, user_id, status, cue) DO UPDATE SET n = c.n + EXCLUDED.n;
    END IF;
    RETURN NULL;
END
$$;
"""

# TRUNCATE fires no row trigger: emptying memories empties the counts with it. (DELETE, not
# TRUNCATE: a TRUNCATE naming both tables would find the counts in use by itself.)
_CLEAR = """
CREATE FUNCTION memory_cue_counts_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_cue_counts;
    RETURN NULL;
END
$$;
"""

_REBUILD = """
CREATE FUNCTION memory_cue_counts_rebuild() RETURNS bigint LANGUAGE sql AS $$
    DELETE FROM memory_cue_counts;
    INSERT INTO memory_cue_counts (tenant_id, user_id, status, cue, n)
    SELECT m.tenant_id, m.user_id, m.status, k.cue, count(*)
    FROM memories m, LATERAL (SELECT DISTINCT unnest(m.cues || ARRAY['']::text[]) AS cue) k
    GROUP BY 1, 2, 3, 4;
    SELECT count(*) FROM memory_cue_counts;
$$;
"""


def upgrade() -> None:
    op.create_table(
        "memory_cue_counts",
        sa.Column("tenant_id", sa.String(512), nullable=False),
        sa.Column("user_id", sa.String(512), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("cue", sa.Text(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "user_id", "status", "cue"),
    )
    op.execute(_APPLY)
    op.execute(_CLEAR)
    op.execute(_REBUILD)
    # No write may slip between the recount and the trigger: hold writers off for both.
    op.execute("LOCK TABLE memories IN SHARE ROW EXCLUSIVE MODE")
    op.execute(
        "CREATE TRIGGER memories_cue_counts AFTER INSERT OR DELETE ON memories "
        "FOR EACH ROW EXECUTE FUNCTION memory_cue_counts_apply()"
    )
    op.execute(
        "CREATE TRIGGER memories_cue_counts_changed AFTER UPDATE OF cues, status, tenant_id, user_id "
        "ON memories FOR EACH ROW WHEN (OLD.cues IS DISTINCT FROM NEW.cues "
        "OR OLD.status IS DISTINCT FROM NEW.status OR OLD.tenant_id IS DISTINCT FROM NEW.tenant_id "
        "OR OLD.user_id IS DISTINCT FROM NEW.user_id) EXECUTE FUNCTION memory_cue_counts_apply()"
    )
    op.execute(
        "CREATE TRIGGER memories_cue_counts_truncated AFTER TRUNCATE ON memories "
        "FOR EACH STATEMENT EXECUTE FUNCTION memory_cue_counts_clear()"
    )
    op.execute("SELECT memory_cue_counts_rebuild()")
    # Statistics now, not at autovacuum's next pass: without them Postgres scanned the whole
    # table for a user's few counts (70 ms at 100k memories, `cuemem bench latency`).
    op.execute("ANALYZE memory_cue_counts")


def downgrade() -> None:
    op.execute("DROP TRIGGER memories_cue_counts_truncated ON memories")
    op.execute("DROP TRIGGER memories_cue_counts_changed ON memories")
    op.execute("DROP TRIGGER memories_cue_counts ON memories")
    op.execute("DROP FUNCTION memory_cue_counts_rebuild()")
    op.execute("DROP FUNCTION memory_cue_counts_clear()")
    op.execute("DROP FUNCTION memory_cue_counts_apply()")
    op.drop_table("memory_cue_counts")
