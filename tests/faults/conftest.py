"""Fixtures of the fault tier: the worker processes a test kills and restarts, and the Redis and
Postgres servers of its own that it stops and crashes (each stopped at teardown).
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shared.settings import Settings
from tests.support.faults import Workers
from tests.support.own_servers import OwnPostgres, OwnRedis


@pytest.fixture
def workers_of() -> Iterator[Callable[[Settings], Workers]]:
    made: list[Workers] = []

    def make(settings: Settings) -> Workers:
        w = Workers(settings)
        made.append(w)
        return w

    yield make
    # Killed, not stopped warmly: the test is over and its services are its own (see tests/conftest.py).
    for w in made:
        for proc in w.procs.values():
            if proc.process.poll() is None:
                proc.kill()


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    server = OwnRedis(tmp_path / "own-redis")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def own_postgres(tmp_path: Path) -> Iterator[OwnPostgres]:
    from sqlalchemy import create_engine

    from workers.db.migrate import upgrade

    pg = OwnPostgres(tmp_path / "own-pg")
    engine = create_engine(pg.url)
    upgrade(engine)
    engine.dispose()
    yield pg
    with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
        pg.stop()
