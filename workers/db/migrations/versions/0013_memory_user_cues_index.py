"""The cue index keyed by user: a user's cue query reads only that user's postings.

``ix_memories_cues`` indexed the cue keys of every memory of every user in one GIN index, so the
posting list of a key held the memories of all users: a cue query for a user with 1,000
memories, asking for ``t:todo``, read the 126,000 entries that a user with 1M memories holds for it
before the user filter threw them away (by_cues p95 27 ms, ``cuemem bench latency``). One tenant's
big user slowed every other user's recall. Each key is now prefixed by a digest of its tenant and
user (``memory_user_cues(tenant_id, user_id, cues)``: 16 hex digits of the md5 of
``tenant \\x1f user``, then the key; immutable, it reads only its arguments), so a lookup finds the
user's own memories only, whatever other users hold. The old index served only such lookups (the
cue query, the link hop, conflict candidates) and is dropped.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE FUNCTION memory_user_cues(tenant_id text, user_id text, cues text[]) RETURNS text[] "
        "LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS "
        "$$ SELECT coalesce(array_agg(left(md5(tenant_id || chr(31) || user_id), 16) || c), '{}') "
        "FROM unnest(cues) c $$"
    )
    op.execute(
        "CREATE INDEX ix_memories_user_cues ON memories "
        "USING gin (memory_user_cues(tenant_id, user_id, cues))"
    )
    op.drop_index("ix_memories_cues", table_name="memories")


def downgrade() -> None:
    op.create_index("ix_memories_cues", "memories", ["cues"], postgresql_using="gin")
    op.execute("DROP INDEX ix_memories_user_cues")
    op.execute("DROP FUNCTION memory_user_cues(text, text, text[])")
