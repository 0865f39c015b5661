"""The key functions of the GIN indexes run in the leader only (PARALLEL RESTRICTED).

0014 gave ``memory_user_cues`` and ``memory_source_event_ids`` a cost of 10,000 so that the
planner reads their GIN indexes. The same cost, multiplied by its default estimate of the rows an
array overlap matches, made the recheck of a small bitmap scan look worth a parallel worker: recall's
read of the memories citing the log's hits (``memories.by_sources``: 150 event ids, 70 memories,
100k memories per user) planned a Gather and spent 3–4 ms launching it, for 1 ms of work.
Restricted to the leader, the same read is a plain bitmap scan: 8.4 ms → 2.5 ms per call in
``cuemem bench latency`` at 100k. Nothing that calls these functions reads enough rows for a
worker to pay.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

FUNCTIONS = ("memory_user_cues(text, text, text[])", "memory_source_event_ids(jsonb)")


def upgrade() -> None:
    for function in FUNCTIONS:
        op.execute(f"ALTER FUNCTION {function} PARALLEL RESTRICTED")


def downgrade() -> None:
    for function in FUNCTIONS:
        op.execute(f"ALTER FUNCTION {function} PARALLEL SAFE")
