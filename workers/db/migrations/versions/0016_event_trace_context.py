"""events.trace_context: the W3C traceparent of the task that recorded the turn, when tracing is on.

A recall links its span to the traces of the turns whose memories it returned
(``infra/tracing.py``), so one turn can be followed from its publish to the recall that used
it. NULL when tracing is off (the column costs nothing then: no write, no index).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("events", sa.Column("trace_context", sa.String(55), nullable=True))


def downgrade() -> None:
    op.drop_column("events", "trace_context")
