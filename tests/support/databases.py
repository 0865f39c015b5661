"""Where the service tiers find Postgres and Redis, and a throwaway Postgres database.

CUEMEM_TEST_PG_ADMIN names a server and a database to connect to for CREATE/DROP DATABASE
(default: the local server, trust auth); CUEMEM_TEST_REDIS a numbered Redis database that the
tests flush (default 13; each concurrent checkout should use its own).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

PG_ADMIN = os.environ.get("CUEMEM_TEST_PG_ADMIN", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("CUEMEM_TEST_REDIS", "redis://127.0.0.1:6379/13")


@contextmanager
def scratch_database(prefix: str) -> Iterator[str]:
    """A new, empty database on PG_ADMIN's server (its URL), dropped on exit even if in use."""
    from sqlalchemy import create_engine, text

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield PG_ADMIN.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
