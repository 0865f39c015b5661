"""Throw-away services for a benchmark run: a fresh Postgres database and a dedicated Redis db.

Like the integration tests (tests/conftest.py), a run creates its own database on an admin URL
(default: the machine's Postgres), migrates it, and drops it at the end; it flushes its own Redis
database number before and after. Nothing else on those servers is touched.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
# Each benchmark flushes a Redis db of its own, so that one run never empties another's.
LATENCY_REDIS = "redis://127.0.0.1:6379/14"
INGEST_REDIS = "redis://127.0.0.1:6379/12"


def database_url_for(admin_url: str, name: str) -> str:
    """The admin URL with its database replaced by ``name`` (query string kept)."""
    base, _, query = admin_url.partition("?")
    return base.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else "")


def libpq_url(sqlalchemy_url: str) -> str:
    """A URL psycopg accepts directly (SQLAlchemy's ``+psycopg`` driver suffix removed)."""
    scheme, sep, rest = sqlalchemy_url.partition("://")
    return scheme.split("+", 1)[0] + sep + rest


@contextmanager
def scratch_database(admin_url: str, prefix: str = "cuemem_bench", keep: bool = False) -> Iterator[str]:
    """Create a fresh, migrated database; yield its SQLAlchemy URL; drop it afterwards."""
    from sqlalchemy import create_engine, text

    from workers.db.migrate import upgrade

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = database_url_for(admin_url, name)
    try:
        engine = create_engine(url)
        try:
            upgrade(engine)
        finally:
            engine.dispose()
        yield url
    finally:
        if keep:
            log.warning("kept database %s", name)
        else:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def scratch_redis(url: str) -> Iterator[str]:
    """Flush the dedicated Redis database before and after the run."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
        yield url
    finally:
        try:
            client.flushdb()
        finally:
            client.close()


@contextmanager
def bulk_load(conn: Any) -> Iterator[None]:
    """A bulk load into ``memories`` as an operator would make it, on a psycopg connection: the
    per-row cue-count trigger (migration 0010) off during the COPY, then one recount of
    ``memory_cue_counts`` from the rows (a schema before 0010 has neither)."""
    row = conn.execute("SELECT to_regproc('memory_cue_counts_rebuild') IS NOT NULL").fetchone()
    counted = bool(row and row[0])
    if counted:
        conn.execute("ALTER TABLE memories DISABLE TRIGGER USER")
        conn.commit()
    try:
        yield
    finally:
        if counted:
            conn.execute("ALTER TABLE memories ENABLE TRIGGER USER")
            conn.execute("SELECT memory_cue_counts_rebuild()")
            conn.commit()
