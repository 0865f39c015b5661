"""A batch's users in units at once (``CUEMEM_INGEST_UNITS=2``) against real Postgres: the units
overlap (each model call waits for the other unit's at a barrier), and every user's turns and
memories land in their own scope, none lost (colliding ids: u1/u10, two tenants)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import create_engine, text

import workers.tasks.ingest  # noqa: F401  (registers the tasks, as the worker's include does)
from shared.events import EventLimits, record_message, validate_turn
from shared.settings import Settings
from shared.storage import EMBEDDING_MODEL_KEY, FollowUp
from workers.bootstrap import build_container, install_container, reset_container
from workers.celery_app import app
from workers.endpoints.embedders.hashing import HashingEmbedder

OWNERS = [("default", "u1"), ("default", "u10"), ("acme", "u1"), ("acme", "u10")]
SAID = {
    ("default", "u1"): "我住在杭州",
    ("default", "u10"): "我住在上海",
    ("acme", "u1"): "I live in Porto and work as a baker",
    ("acme", "u10"): "I am allergic to peanuts",
}


class MeetingEmbedder(HashingEmbedder):
    """Each passage call waits at a barrier for another unit's: units run one after the other
    would break it (a unit's failure sends its turns on stage by stage instead)."""

    def __init__(self) -> None:
        super().__init__(dim=16)
        self.barrier = threading.Barrier(2, timeout=30)

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        self.barrier.wait()
        return super().embed_passages(texts)


@pytest.fixture
def sent(sql_settings: Settings) -> Iterator[list[FollowUp]]:
    out: list[FollowUp] = []
    settings = sql_settings.model_copy(update={"ingest_units": 2})
    embedder = MeetingEmbedder()
    c = build_container(settings, embedder=embedder, dispatch=out.extend)
    install_container(c)
    # The deployment's model is claimed already (the first embedding ever claims it, and units
    # claiming it together wait for the first one's commit).
    with c.uow() as uow:
        uow.meta.set(EMBEDDING_MODEL_KEY, embedder.model_name)
        uow.commit()
    try:
        yield out
    finally:
        reset_container()
        c.close()


def published(tenant: str, user: str) -> dict[str, Any]:
    raw = {
        "tenant_id": tenant,
        "event_id": f"e-{user}",
        "user_id": user,
        "session_id": "s1",
        "seq": 1,
        "role": "user",
        "content": SAID[(tenant, user)],
        "at": datetime(2026, 11, 30, 12, 0, tzinfo=UTC).isoformat(),
    }
    return record_message(validate_turn(raw, EventLimits()), seq_assigned=False)


def test_units_of_a_batch_overlap_and_each_users_rows_land_in_their_own_scope(
    sent: list[FollowUp], sql_settings: Settings
) -> None:
    app.tasks["memory.record_batch"]([published(t, u) for t, u in OWNERS])

    # Every unit committed (none broke the barrier): one index message for all four turns.
    assert [(f.task, sorted(f.args[0])) for f in sent] == [
        ("memory.index", sorted(f"{t}/e-{u}" for t, u in OWNERS))
    ]
    engine = create_engine(str(sql_settings.database_url))
    with engine.connect() as db:
        events = db.execute(text("select tenant_id, user_id, event_id, stage from events")).all()
        memories = db.execute(
            text("select tenant_id, user_id, content, embedding is not null from memories")
        ).all()
    engine.dispose()
    assert sorted(events) == sorted((t, u, f"e-{u}", "persisted") for t, u in OWNERS)
    assert sorted(memories) == sorted((t, u, SAID[(t, u)], True) for t, u in OWNERS)
