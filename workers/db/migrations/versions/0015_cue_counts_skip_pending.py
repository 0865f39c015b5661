"""memory_cue_counts leaves pending drafts out: extraction takes no lock on a user's counts.

A fused ingest unit (``shared/ingest/advance.py``) inserts its drafts (status ``pending``) at
extraction, then embeds for seconds, then persists under the user's lock, all in one transaction.
With 0010's trigger every draft's insert updated the user's count rows (``''`` among them) and
held their row locks through the embedding, so the other worker's unit of the same user waited on
its first draft's insert until the first unit committed: the two units of a user, which the
pipeline runs in parallel up to persist, ran one after the other. LoCoMo conv-26's ingest took
218.6 s against 147.5 s on 453bbd2 (measured the same day), with inserts into ``memories``
waiting up to 35 s (``log_min_duration_statement``: 174 s of 184 s of statement time).

Recall never asks for pending memories (``shared/recall/request.py: statuses_for``), so they
need no count. A draft is counted when persist makes it active, under the user's lock, which
serialises the units of a user at that point anyway.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def _apply(skip_pending: bool) -> str:
    old = " AND OLD.status <> 'pending'" if skip_pending else ""
    new = " AND NEW.status <> 'pending'" if skip_pending else ""
    return f"""
CREATE OR REPLACE FUNCTION memory_cue_counts_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT'{old} THEN
        INSERT INTO memory_cue_counts AS c (tenant_id, user_id, status, cue, n)
        SELECT OLD.tenant_id, OLD.user_id, OLD.status, k.cue, -1
        FROM (SELECT DISTINCT unnest(OLD.cues || ARRAY['']::text[]) AS cue) k ORDER BY k.cue
        ON CONFLICT (tenant_id, user_id, status, cue) DO UPDATE SET n = c.n + EXCLUDED.n;
    END IF;
    IF TG_OP <> 'DELETE'{new} THEN
        INSERT INTO memory_cue_counts AS c (tenant_id, user_id, status, cue, n)
        SELECT NEW.tenant_id, NEW.user_id, NEW.status, k.cue, 1
        FROM (SELECT DISTINCT unnest(NEW.cues || ARRAY['']::text[]) AS cue) k ORDER BY k.cue
        ON CONFLICT (tenant_id, user_id, status, cue) DO UPDATE SET n = c.n + EXCLUDED.n;
    END IF;
    RETURN NULL;
END
$$;
"""


def _rebuild(skip_pending: bool) -> str:
    where = "WHERE m.status <> 'pending'" if skip_pending else ""
    return f"""
CREATE OR REPLACE FUNCTION memory_cue_counts_rebuild() RETURNS bigint LANGUAGE sql AS $$
    DELETE FROM memory_cue_counts;
    INSERT INTO memory_cue_counts (tenant_id, user_id, status, cue, n)
    SELECT m.tenant_id, m.user_id, m.status, k.cue, count(*)
    FROM memories m, LATERAL (SELECT DISTINCT unnest(m.cues || ARRAY['']::text[]) AS cue) k
    {where}
    GROUP BY 1, 2, 3, 4;
    SELECT count(*) FROM memory_cue_counts;
$$;
"""


def _migrate(skip_pending: bool) -> None:
    op.execute(_apply(skip_pending))
    op.execute(_rebuild(skip_pending))
    # No write may slip between the recount and the new trigger function.
    op.execute("LOCK TABLE memories IN SHARE ROW EXCLUSIVE MODE")
    op.execute("SELECT memory_cue_counts_rebuild()")


def upgrade() -> None:
    _migrate(skip_pending=True)


def downgrade() -> None:
    _migrate(skip_pending=False)
