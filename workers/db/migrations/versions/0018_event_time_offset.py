"""events.at_offset_s: the UTC offset a turn's time was sent with, in seconds east of UTC.

``events.at`` is a timestamptz: Postgres keeps the instant and returns it in the session's zone,
so a turn sent at 2026-10-05T20:03:00+08:00 came back at 12:03 UTC, and the extract stage resolved
"下周三下午三点" to 15:00 UTC (23:00 in Beijing). The offset is kept beside the instant and put
back on ``at`` when the event is read (``workers/db/mapping.py``): times of day and relative days
are resolved in the zone the user wrote in, and the instants they give are stored as before.

Existing rows keep NULL: they are read in UTC, as they were before (their offset is lost).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("events", sa.Column("at_offset_s", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("events", "at_offset_s")
