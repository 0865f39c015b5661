"""Recall re-reads every memory the index found in Postgres and keeps only rows in a requested
status (``shared/recall/search.py: _memories_found``): the index is derived and may lag (a
``memory.sync_index`` not yet run, or lost), and what Postgres retired or removed must not come
back through it. Here the index still says "active" for memories Postgres archived, forgot or
removed, on the fake index and on the embedded engine."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import text

from service.operations.recall import recall_for
from shared.settings import Settings
from tests.support.api import INDEXES, ApiEnv, api_settings, build_env, seed_memory
from workers.bootstrap import Container

A = "tenant-a"
QUERY = "door code Berlin"


@pytest.fixture(params=INDEXES)
def env(it_settings: Settings, request: pytest.FixtureRequest) -> Iterator[ApiEnv]:
    env = build_env(api_settings(it_settings).model_copy(update={"tenant_id": A}), index=request.param)
    yield env
    env.client.app.state.close()  # type: ignore[attr-defined]
    env.container.close()


def _recalled(c: Container) -> list[str]:
    out = recall_for(c, "u1", QUERY, tenant_id=A, reinforce=False, k=10)
    return [i["id"] for i in out["items"]]


def _in_postgres_only(c: Container, sql: str, memory_id: str) -> None:
    """Change a memory's row behind the index's back: no sync follows."""
    with c.uow() as uow:
        uow.session.execute(text(sql), {"id": memory_id})  # type: ignore[attr-defined]
        uow.commit()


@pytest.mark.parametrize(
    "change",
    [
        "UPDATE memories SET status = 'archived', version = version + 1 WHERE id = :id",
        "UPDATE memories SET status = 'forgotten', version = version + 1 WHERE id = :id",
        "UPDATE memories SET status = 'superseded', version = version + 1 WHERE id = :id",
        "DELETE FROM memories WHERE id = :id",
    ],
    ids=["archived", "forgotten", "superseded", "removed"],
)
def test_recall_drops_what_postgres_retired_though_the_index_still_says_active(
    env: ApiEnv, change: str
) -> None:
    c = env.container
    stale = seed_memory(c, A, "u1", f"I live in Berlin, {QUERY} 4711", n=0)
    kept = seed_memory(c, A, "u1", f"my office in Berlin has {QUERY} 1234", n=1)
    # The control: both are found while Postgres and the index agree.
    assert set(_recalled(c)) >= {stale.id, kept.id}

    _in_postgres_only(c, change, stale.id)

    payloads = c.index().payloads(A, "u1")
    assert payloads[stale.id]["status"] == "active", "the index was synced: the test checks nothing"
    found = _recalled(c)
    assert kept.id in found, found
    assert stale.id not in found, f"recall returned {stale.id}, which Postgres no longer holds as active"
