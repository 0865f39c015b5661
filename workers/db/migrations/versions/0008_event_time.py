"""Event time: when what a turn tells happened, on events and on the memories made from it.

"前天我把车送去保养了" told on 2026-08-12 happened on 2026-08-10. Extraction resolves a turn's time
expressions against its told time (``at``, which stays as it is) and keeps the days they name as
[happened_from, happened_to); both stay NULL when the turn names no time. Recall's time path
reads the turns and memories whose event time overlaps a range the query names, bounded below by
the longest span kept (``shared.language.timeexpr.MAX_SPAN``): a range scan on these partial indexes.
Rows recorded before this revision keep NULL (their told time still serves).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_TABLES = ("events", "memories")


def upgrade() -> None:
    for table in _TABLES:
        op.add_column(table, sa.Column("happened_from", sa.DateTime(timezone=True), nullable=True))
        op.add_column(table, sa.Column("happened_to", sa.DateTime(timezone=True), nullable=True))
        op.create_index(
            f"ix_{table}_user_happened",
            table,
            ["tenant_id", "user_id", "happened_from"],
            postgresql_where=sa.text("happened_from IS NOT NULL"),
        )


def downgrade() -> None:
    for table in _TABLES:
        op.drop_index(f"ix_{table}_user_happened", table_name=table)
        op.drop_column(table, "happened_to")
        op.drop_column(table, "happened_from")
