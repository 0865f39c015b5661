"""Run Alembic migrations from code (the CLI's `cuemem migrate`, and every embedded start), and
the Redis key upgrade that goes with them (``workers/redis/key_migration.py``)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(engine: Engine) -> None:
    """Bring the schema to head. Alembic's version table makes this safe to run on every start."""
    cfg = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as connection:
        # Serialise concurrent starters (several workers booting at once) on one advisory lock.
        connection.exec_driver_sql("SELECT pg_advisory_xact_lock(727271)")
        cfg.attributes["connection"] = connection
        command.upgrade(cfg, "head")


def upgrade_redis(redis_url: str | None) -> None:
    """Move per-user Redis keys of an older form to the current one (idempotent; nothing to do
    without a Redis)."""
    if not redis_url:
        return
    from infra.broker import open_redis
    from workers.redis.key_migration import upgrade_keys

    client = open_redis(redis_url)
    try:
        upgrade_keys(client)
    finally:
        client.close()
