"""Event ids unique per tenant: events and event_receipts keyed by (tenant_id, event_id).

An event id is the producer's. Keyed by the id alone, a second tenant's turn with an id another
tenant had used was refused (dead-lettered, never recorded, its app never told) and the refusal
told it that the id existed elsewhere. The rows stay as they are: ids unique across the table are
unique per tenant too, so the new keys hold for every existing row; only the primary keys (and
their indexes) are rebuilt. Nothing references these keys (no foreign key); memories, the
history and dead letters name event ids inside their own tenant's rows.

Downgrade restores the single-column keys and fails, naming the id, once two tenants hold the same
event id (the old schema cannot hold both: delete or re-key one tenant's rows first).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_TABLES = ("events", "event_receipts")


def upgrade() -> None:
    for table in _TABLES:
        op.drop_constraint(f"{table}_pkey", table, type_="primary")
        op.create_primary_key(f"{table}_pkey", table, ["tenant_id", "event_id"])


def downgrade() -> None:
    bind = op.get_bind()
    for table in _TABLES:
        shared = bind.execute(
            text(f"SELECT event_id FROM {table} GROUP BY event_id HAVING count(*) > 1 LIMIT 1")
        ).scalar()
        if shared is not None:
            raise RuntimeError(
                f"cannot downgrade below 0017: event id {shared!r} is held by more than one tenant "
                f"in {table}; the old key (event_id alone) cannot hold both"
            )
        op.drop_constraint(f"{table}_pkey", table, type_="primary")
        op.create_primary_key(f"{table}_pkey", table, ["event_id"])
