"""memories: fillfactor 80, so that decay's score updates stay on their page (HOT updates).

The hourly recompute (``memory.decay``) rewrites the score of nearly every memory. ``score`` is
in no index, so Postgres can update such a row in place on its page (a heap-only tuple, no entry
in any of the table's ten indexes), but only when the page has room for the new version; at the
default fillfactor 100 a bulk-loaded or long-lived page has none, and every rewritten row went
into every index: 23.3 s for 1M memories (``cuemem bench decay``). Pages filled to 80 % keep that
room (and pruning gives it back between runs). New pages only: an existing table gets it for
old pages with ``VACUUM FULL memories`` (or ``pg_repack``) in a maintenance window.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE memories SET (fillfactor = 80)")


def downgrade() -> None:
    op.execute("ALTER TABLE memories RESET (fillfactor)")
