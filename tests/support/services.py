"""Helpers shared by the integration tests: waiting on the pipeline, reading state back, and
running `cuemem` commands on the tests' services."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from sqlalchemy import text

from shared.events import event_ref, split_ref
from shared.ingest.progress import Progress, progress
from shared.settings import Settings
from shared.storage import UnitOfWork
from workers.bootstrap import Container
from workers.runtime.processes import WorkerProcess, check_alive


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.25) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` seconds passed; whether it held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def publish_processed(
    settings: Settings,
    start_workers: Callable[[], list[WorkerProcess]],
    turns: Sequence[tuple[str, str, datetime]],
) -> tuple[Container, list[str]]:
    """Publish ``(user id, content, at)`` turns as one session each user's, in order, and wait
    until real workers processed them; a new container and the event ids (the caller closes it)."""
    from producers.publisher import Publisher
    from workers.bootstrap import build_container

    container = build_container(settings)
    with Publisher.from_settings(settings) as pub:
        ids = [
            pub.publish(
                user_id=user, session_id="s1", role="user", content=content, at=at.isoformat()
            ).event_id
            for user, content, at in turns
        ]
    wait_processed(container, ids, start_workers())
    return container, ids


PublishProcessed = Callable[[Sequence[tuple[str, str, datetime]]], tuple[Container, list[str]]]


def as_shipped(settings: Settings) -> Settings:
    """``settings`` with what the test tiers turn off to save CI time put back as the product
    ships it (``Settings``' own defaults): the bundled E5 model and context windows."""
    shipped = {name: Settings.model_fields[name].default for name in ("embedder", "turn_window")}
    return settings.model_copy(update=shipped)


def wait_processed(
    c: Container,
    event_ids: Sequence[str],
    workers: list[WorkerProcess],
    timeout: float = 240,
    sweep: Callable[[], None] | None = None,
    sweep_every_s: float = 10.0,
) -> Progress:
    """Poll until every event reached a final state; fail with the state counts otherwise.

    ``sweep`` is called every ``sweep_every_s`` seconds, as beat would send its periodic tasks."""
    deadline = time.monotonic() + timeout
    next_sweep = time.monotonic() + sweep_every_s
    while True:
        if sweep is not None and time.monotonic() >= next_sweep:
            sweep()
            next_sweep = time.monotonic() + sweep_every_s
        with c.uow() as uow:
            state = progress_by_id(uow, event_ids)
        if state.complete:
            return state
        check_alive(workers)
        if time.monotonic() > deadline:
            raise AssertionError(f"pipeline did not finish in {timeout} s: {dict(state.counts)}")
        time.sleep(0.3)


def progress_by_id(uow: UnitOfWork, event_ids: Sequence[str]) -> Progress:
    """``progress`` of these turns, which the tests name by event id alone (or by pipeline key):
    each bare id is taken in the tenant whose receipt holds it (the tests give each id to one
    tenant), in ``default`` until one does; the answer is keyed as asked."""
    bare = [i for i in event_ids if split_ref(i)[0] is None]
    held = dict(
        uow.session.execute(  # type: ignore[attr-defined]
            text("SELECT event_id, tenant_id FROM event_receipts WHERE event_id = ANY(:ids)"), {"ids": bare}
        ).all()
    ) if bare else {}  # fmt: skip
    asked = {i if split_ref(i)[0] else event_ref(held.get(i, "default"), i): i for i in event_ids}
    state = progress(uow, list(asked))
    return Progress(
        {asked[k]: v for k, v in state.states.items()}, {asked[k]: v for k, v in state.reasons.items()}
    )


def table_counts(c: Container) -> dict[str, int]:
    from sqlalchemy import text

    with c.uow() as uow:
        session = uow.session  # type: ignore[attr-defined]
        return {
            t: session.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()
            for t in ("events", "event_receipts", "memories", "dead_letters")
        }


def memory_snapshot(c: Container) -> dict[str, tuple]:
    from sqlalchemy import text

    with c.uow() as uow:
        session = uow.session  # type: ignore[attr-defined]
        rows = session.execute(
            text("SELECT id, status, version, access_count, sources::text FROM memories ORDER BY id")
        ).all()
    return {r[0]: tuple(r[1:]) for r in rows}


def services_env(settings: Settings) -> dict[str, str]:
    """The CUEMEM_* settings that point a ``cuemem`` command at ``settings``' Postgres, broker,
    data dir and embedder."""
    return {
        "CUEMEM_DATABASE_URL": str(settings.database_url),
        "CUEMEM_BROKER_URL": str(settings.broker_url),
        "CUEMEM_DATA_DIR": str(settings.data_dir),
        "CUEMEM_EMBEDDER": settings.embedder,
    }


def hash_cli_env(settings: Settings) -> dict[str, str]:
    """The environment of an in-process ``cuemem`` command (typer's CliRunner) on ``settings``'
    services, with the 16-dimension hashing embedder the SQL tests index with."""
    return {
        **services_env(settings),
        "CUEMEM_REDIS_URL": str(settings.redis_url),
        "CUEMEM_EMBEDDER": "hash",
        "CUEMEM_EMBEDDING_DIM": "16",
    }


CUEMEM = str(Path(sys.executable).with_name("cuemem"))


def cuemem_in_process(settings: Settings, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``cuemem`` run in this process (typer's CliRunner) on ``settings``' services, answered as
    :func:`run_cuemem` answers: the same command code without an interpreter's start and imports
    per call (about 2 s each), for tests that run many commands."""
    from typer.testing import CliRunner

    from cli.main import USER_ERRORS
    from cli.main import app as cli_app

    result = CliRunner().invoke(cli_app, list(args), env={**services_env(settings), **env})
    exc = result.exception
    if isinstance(exc, USER_ERRORS):  # as cli.main.main reports them
        return subprocess.CompletedProcess(["cuemem", *args], 2, result.stdout, f"error: {exc}\n")
    if exc is not None and not isinstance(exc, SystemExit):
        raise exc
    return subprocess.CompletedProcess(["cuemem", *args], result.exit_code, result.stdout, result.stderr)


def run_cuemem(
    settings: Settings, *args: str, timeout: float = 120, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run the installed ``cuemem`` script on ``settings``' services (``env``: further CUEMEM_*
    variables), capturing its output as text."""
    child = {**os.environ, **services_env(settings), **env}
    return subprocess.run([CUEMEM, *args], env=child, capture_output=True, text=True, timeout=timeout)
