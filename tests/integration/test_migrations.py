"""The Alembic chain builds exactly the schema the SQLAlchemy models describe, and unwinds."""

import uuid

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from tests.conftest import PG_ADMIN
from workers.db.migrate import alembic_config, upgrade
from workers.db.tables import Base


@pytest.fixture
def empty_database():
    name = f"cuemem_mig_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = PG_ADMIN.rsplit("/", 1)[0] + f"/{name}"
    yield url
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


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
