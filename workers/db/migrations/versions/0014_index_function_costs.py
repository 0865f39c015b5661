"""The key functions of the 0012 and 0013 indexes are costly per row: say so to the planner.

``memory_user_cues`` (an md5 and an array per row) and ``memory_source_event_ids`` (a JSON walk per
row) were declared with the default cost of a SQL function, so on a small table Postgres chose to
evaluate them on every row instead of reading their GIN index: the conflict candidates of every
persist took 21.5 ms against 2.8 ms before 0013 (300 memories per user). At cost 10,000 the index
is used (5.9 ms in the same measurement). (Most of LoCoMo's slower ingest on 0010–0014 was another
cause, the cue-count locks its pending drafts took: migration 0015.)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER FUNCTION memory_user_cues(text, text, text[]) COST 10000")
    op.execute("ALTER FUNCTION memory_source_event_ids(jsonb) COST 10000")


def downgrade() -> None:
    op.execute("ALTER FUNCTION memory_source_event_ids(jsonb) COST 100")
    op.execute("ALTER FUNCTION memory_user_cues(text, text, text[]) COST 100")
