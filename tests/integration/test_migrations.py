"""The Alembic chain builds exactly the schema the SQLAlchemy models describe, and unwinds."""

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect

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
