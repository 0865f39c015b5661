"""The Alembic chain builds exactly the schema the SQLAlchemy models describe, and unwinds."""

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import IntegrityError

from tests.support.databases import scratch_database
from workers.db.migrate import alembic_config, upgrade
from workers.db.tables import Base


@pytest.fixture
def empty_database():
    with scratch_database("cuemem_mig") as url:
        yield url


def test_migrations_match_the_models_and_downgrade_cleanly(empty_database):
    engine = create_engine(empty_database)
    upgrade(engine)
    upgrade(engine)  # a second start is a no-op
    with engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
    command.downgrade(alembic_config(empty_database), "base")
    assert set(inspect(engine).get_table_names()) == {"alembic_version"}
    upgrade(engine)
    assert {"events", "event_receipts", "memories", "memory_history", "llm_calls"} <= set(
        inspect(engine).get_table_names()
    )
    engine.dispose()


def test_0017_keys_events_and_receipts_by_tenant_keeping_the_rows_and_refuses_a_lossy_downgrade(
    empty_database,
):
    """A database at 0016 holding turns and receipts upgrades with its rows; then two tenants can
    hold one event id, and a downgrade, which could not keep both, stops naming the id."""
    config = alembic_config(empty_database)
    command.upgrade(config, "0016")
    engine = create_engine(empty_database)
    turn = (
        "INSERT INTO events (event_id, tenant_id, user_id, session_id, seq, role, content, content_hash,"
        " at, metadata, stage, extraction_reasons) VALUES (:id, :tenant, 'u1', 's1', 1, 'user', :content,"
        " 'h', now(), '{}', 'done', '{}')"
    )
    receipt = (
        "INSERT INTO event_receipts (event_id, tenant_id, user_id, outcome)"
        " VALUES (:id, :tenant, 'u1', 'accepted')"
    )
    with engine.begin() as conn:
        conn.execute(text(turn), {"id": "order-1001", "tenant": "beta", "content": "beta's"})
        conn.execute(text(receipt), {"id": "order-1001", "tenant": "beta"})
        with pytest.raises(IntegrityError), conn.begin_nested():  # the old key: one id in the table
            conn.execute(text(turn), {"id": "order-1001", "tenant": "acme", "content": "acme's"})

    command.upgrade(config, "head")
    with engine.begin() as conn:
        assert conn.execute(text("SELECT tenant_id, content FROM events")).all() == [("beta", "beta's")]
        for table in ("events", "event_receipts"):
            assert inspect(conn).get_pk_constraint(table)["constrained_columns"] == ["tenant_id", "event_id"]
        conn.execute(text(turn), {"id": "order-1001", "tenant": "acme", "content": "acme's"})
        conn.execute(text(receipt), {"id": "order-1001", "tenant": "acme"})
        assert conn.execute(text("SELECT count(*) FROM events")).scalar() == 2

    with pytest.raises(RuntimeError, match="order-1001"):
        command.downgrade(config, "0016")
    with engine.begin() as conn:  # refused before any change: both turns, the new keys
        assert conn.execute(text("SELECT count(*) FROM events")).scalar() == 2
        conn.execute(text("DELETE FROM events WHERE tenant_id = 'acme'"))
        conn.execute(text("DELETE FROM event_receipts WHERE tenant_id = 'acme'"))
    command.downgrade(config, "0016")
    assert inspect(engine).get_pk_constraint("events")["constrained_columns"] == ["event_id"]
    engine.dispose()
