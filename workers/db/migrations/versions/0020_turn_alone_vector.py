"""The turn alone: the vector of a turn's own words beside its context window's.

The conversation log embeds each turn with the turns before it (its window); the relevance model
also reads how close the question is to the turn by itself (``shared.recall.alone``). Kept as the
float32 bytes of the vector, not ``REAL[]``: recall reads it for every candidate turn, and
parsing a ``REAL[]`` of 384 numbers costs about 0.2 ms per row against 0.015 ms for the bytes
(300 rows: 60.7 against 4.5 ms, psycopg's text protocol). NULL: not embedded (the setting
``turn_alone_vector`` was off when the turn was, or the turn was blanked by a privacy delete).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("events", sa.Column("alone_vector", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    op.drop_column("events", "alone_vector")
