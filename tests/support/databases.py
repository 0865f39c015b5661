"""Where the service tiers find Postgres and Redis, and a throwaway Postgres database.

CUEMEM_TEST_PG_ADMIN names a server and a database to connect to for CREATE/DROP DATABASE
(default: the local server, trust auth); CUEMEM_TEST_REDIS a numbered Redis database that the
tests flush (default 13; the further pytest-xdist workers use the numbers below it, 12, 11, ...;
each concurrent checkout should use its own range).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

PG_ADMIN = os.environ.get("CUEMEM_TEST_PG_ADMIN", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def _redis_urls() -> tuple[str, str]:
    """The test process's Redis database and a spare one (a second deployment's). Each
    pytest-xdist worker (gw0, gw1, ...) flushes its own: CUEMEM_TEST_REDIS's number (13 by
    default) less the worker's, and as a spare the number plus one plus the worker's (13 and 14
    for gw0, 12 and 15 for gw1)."""
    base = os.environ.get("CUEMEM_TEST_REDIS") or "redis://127.0.0.1:6379/13"
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    offset = int(worker[2:]) if worker[2:].isdigit() else 0
    prefix, _, number = base.rpartition("/")
    if not number.isdigit() or not offset <= int(number) <= 14 - offset:
        raise RuntimeError(f"CUEMEM_TEST_REDIS={base}: name a database between {offset} and {14 - offset}")
    return f"{prefix}/{int(number) - offset}", f"{prefix}/{int(number) + 1 + offset}"


REDIS_URL, SPARE_REDIS_URL = _redis_urls()


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
