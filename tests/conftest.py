"""Tier markers and the fixtures of the service tiers: the machine's real Postgres and Redis, real workers.

Postgres: a fresh database per test session on CUEMEM_TEST_PG_ADMIN (default: the local server,
trust auth), dropped at the end. Redis: one numbered database of CUEMEM_TEST_REDIS (default
redis://127.0.0.1:6379/13), flushed before each test that uses it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

from shared.settings import Settings
from tests.support.databases import REDIS_URL, scratch_database

# No Hypothesis example has a deadline (its default is 200 ms): a slow or loaded machine makes a
# property test slower, never red. Every test's own ``@settings`` inherits this profile; another
# one is chosen with ``--hypothesis-profile``.
hypothesis_settings.register_profile("cuemem", deadline=None)
hypothesis_settings.load_profile("cuemem")

TABLES = [
    "events", "event_receipts", "memories", "dead_letters", "cuemem_meta", "memory_history", "llm_calls",
    "recall_claims", "api_keys", "memory_cue_counts",
]  # fmt: skip


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    from sqlalchemy import create_engine

    from workers.db.migrate import upgrade

    with scratch_database("cuemem_it") as url:
        engine = create_engine(url)
        upgrade(engine)
        engine.dispose()
        yield url


@pytest.fixture
def clean_db(database_url: str) -> str:
    from sqlalchemy import create_engine, text

    engine = create_engine(database_url)
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY"))
    engine.dispose()
    return database_url


@pytest.fixture
def redis_url() -> str:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    client.flushdb()
    client.close()
    return REDIS_URL


@pytest.fixture
def it_settings(clean_db: str, redis_url: str, tmp_path: Path) -> Settings:
    """Settings for real services, with production's task time limit and visibility timeout (a
    test on a loaded machine must not lose a slow task to a limit production does not have).
    The tests that SIGKILL workers take ``redelivery_settings``."""
    return Settings(
        data_dir=tmp_path / "data",
        database_url=clean_db,
        broker_url=redis_url,
        redis_url=redis_url,
        # The hashing embedder: these tiers test delivery, storage and isolation, and the model
        # would cost CI minutes of CPU. The tests of recall by meaning ask for E5 (``e5_settings``).
        embedder=os.environ.get("CUEMEM_TEST_EMBEDDER", "hash"),  # type: ignore[arg-type]
        retry_backoff_max_s=4,
        max_retries=5,
        worker_concurrency=2,
        log_level="INFO",
        # Context windows more than double the embedding work of every turn: the suites about
        # other guarantees index each turn alone to keep CI in its budget, the window tests
        # (the seed cases, the purge through the API) ask for 3, and CUEMEM_TEST_TURN_WINDOW=3
        # runs everything with them.
        turn_window=int(os.environ.get("CUEMEM_TEST_TURN_WINDOW", "1")),
    )


# What a test that kills a worker needs: its unacked messages handed out again in seconds, not
# after production's hour. Redis hands out a message still unacked after the visibility timeout
# even while its task runs, so the time limit must stay below it (``workers/reliability.py``
# refuses otherwise): 25 s > 20 s + the tier's 4 s backoff. Only these tests run with a limit
# shorter than production's 300 s. 12 s was too short for the loaded 2-core CI machine
# (extractions were dead-lettered for it at load average 6 to 12); every second of visibility
# timeout is a second more per kill (40 s made the repeated-SIGKILL test 75 % longer).
REDELIVERY_VISIBILITY_S = 25
REDELIVERY_TIME_LIMIT_S = 20


@pytest.fixture
def redelivery_settings(it_settings: Settings) -> Settings:
    """``it_settings`` with a short visibility timeout (and the time limit it requires): for the
    tests that SIGKILL workers or crash the broker and wait for the lost messages to come back."""
    return it_settings.model_copy(
        update={"visibility_timeout_s": REDELIVERY_VISIBILITY_S, "task_time_limit_s": REDELIVERY_TIME_LIMIT_S}
    )


@pytest.fixture
def e5_settings(it_settings: Settings) -> Settings:
    """``it_settings`` with the bundled E5 model: for the tests of recall by meaning."""
    return it_settings.model_copy(update={"embedder": "e5"})


@pytest.fixture
def start_workers(it_settings: Settings) -> Iterator[Callable[..., list]]:
    """Start real Celery worker processes (pipeline workers + the index owner); stopped at teardown."""
    from workers.runtime.processes import WorkerProcess
    from workers.runtime.processes import start_workers as spawn

    started: list[WorkerProcess] = []

    def start(settings: Settings | None = None, **kw) -> list[WorkerProcess]:
        procs = spawn(settings or it_settings, **kw)
        started.extend(procs)
        return procs

    yield start
    # The test is over and its database and Redis are wiped before the next one: the workers are
    # killed, not stopped warmly (a warm stop costs about 1.8 s per process; the tests that
    # check a warm stop do it themselves).
    for w in started:
        if w.process.poll() is None:
            w.kill()


TIERS = ("unit", "contract", "integration", "e2e", "browser", "faults")
TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """One marker per tier, from the folder a test lives in: `pytest -m e2e` runs that tier alone."""
    for item in items:
        tier = Path(item.fspath).resolve().relative_to(TESTS).parts[0]
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, tier))
