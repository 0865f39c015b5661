"""Building the HTTP API on the test services: real Postgres and Redis, the hashing embedder, and
vector indexes owned by the test process (no worker: the contract tests seed memories directly):
in-memory fakes by default, or the embedded engine (``INDEXES``), so that the tests that matter
most (isolation, curation) also run on the real adapter, whose answers are not synchronous copies
of what the test wrote."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import httpx
from fastapi.testclient import TestClient

from service.operations.curation import create_key
from shared.events import Role, TurnPublished
from shared.indexing.collections import MEMORIES
from shared.indexing.sync import push_unindexed
from shared.language.cues import cues_for_memory, entities, lexicon_tags
from shared.models import Memory, MemoryStatus, MemoryType, memory_hash, memory_id
from shared.queues import IndexKind
from shared.settings import Settings
from shared.storage import FollowUp, HistoryEntry
from tests.support.fake_index import FakeVectorIndex
from workers.bootstrap import Container, build_container

AT = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


IndexChoice = Literal["fake", "edge"]
# "fake": tests/support/fake_index.py; "edge": the embedded qdrant-edge engine under the settings'
# data directory, opened (and owned) by the test process, as `cuemem serve` on one host does.
INDEXES: tuple[IndexChoice, ...] = ("fake", "edge")


@dataclass
class ApiEnv:
    container: Container
    client: TestClient
    keys: dict[str, str]  # tenant -> key
    key_ids: dict[str, str]
    sent: list[FollowUp] = field(default_factory=list)
    index: IndexChoice = "fake"

    def auth(self, tenant: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[tenant]}"}


def api_settings(it_settings: Settings) -> Settings:
    return it_settings.model_copy(update={"embedder": "hash", "index_turns": True})


def build_env(
    settings: Settings, tenants: Sequence[str] = ("tenant-a", "tenant-b"), index: IndexChoice = "fake"
) -> ApiEnv:
    from service.http.app import create_app

    sent: list[FollowUp] = []
    dispatch = sent.extend
    if index == "fake":
        container = build_container(
            settings, index=FakeVectorIndex(), turn_index=FakeVectorIndex(), dispatch=dispatch
        )
        container.index().ensure(container.embedder.dim, container.embedder.model_name)
    else:
        container = build_container(settings, dispatch=dispatch)
        for kind in (IndexKind.MEMORIES, IndexKind.TURNS):
            opened = container.index(kind)
            if opened is not None:
                opened.ensure(container.embedder.dim, container.embedder.model_name)
    keys, key_ids = {}, {}
    for tenant in tenants:
        created = create_key(container, tenant, f"tests of {tenant}")
        keys[tenant], key_ids[tenant] = created["key"], created["id"]
    client = TestClient(create_app(container), raise_server_exceptions=False)
    return ApiEnv(container, client, keys, key_ids, sent, index)


@contextmanager
def running_api(settings: Settings) -> Iterator[ApiEnv]:
    """``build_env``, with the app's clients and the container closed on exit."""
    env = build_env(settings)
    try:
        yield env
    finally:
        env.client.app.state.close()  # type: ignore[attr-defined]
        env.container.close()


def seed_turn(
    c: Container,
    tenant: str,
    user: str,
    n: int,
    content: str,
    *,
    at: datetime,
    session: str = "s1",
    role: str = "user",
) -> str:
    """A persisted turn the pipeline is done with, number ``n`` of its session: the event
    ``ev-{tenant}-{user}-{n}`` that ``seed_memory(..., n=n)`` cites; its id."""
    event_id = f"ev-{tenant}-{user}-{n}"
    turn = TurnPublished(event_id, tenant, user, session, n + 1, Role(role), content, at, {})
    with c.uow() as uow:
        assert uow.events.insert_if_absent(turn, "done")
        uow.commit()
    return event_id


def seed_memory(
    c: Container,
    tenant: str,
    user: str,
    content: str,
    *,
    kind: MemoryType = MemoryType.PREFERENCE,
    status: MemoryStatus = MemoryStatus.ACTIVE,
    n: int = 0,
    derived_from: Sequence[str] = (),
    at: datetime | None = None,
    importance: float = 7.0,
) -> Memory:
    """A persisted, indexed memory, as the pipeline would leave it (``derived_from``: a merge),
    made at ``at`` (default ``AT`` plus ``n`` minutes) from the event ``ev-{tenant}-{user}-{n}``."""
    at = at or AT + timedelta(minutes=n)
    tags = lexicon_tags(content)
    ents = entities(content)
    event = f"ev-{tenant}-{user}-{n}"
    memory = Memory(
        id=memory_id(tenant, user, event, 0),
        tenant_id=tenant,
        user_id=user,
        type=kind,
        content=content,
        importance=importance,
        status=status,
        created_at=at,
        updated_at=at,
        last_accessed_at=at,
        score=importance,
        tags=list(tags),
        entities=list(ents),
        cues=list(cues_for_memory(content, tags, ents)),
        sources=[{"event_id": event, "session_id": "s1", "seq": n + 1, "at": at.isoformat()}],
        content_hash=memory_hash(kind.value, content),
        embedding=c.embedder.embed_passages([content])[0],
        embedding_model=c.embedder.model_name,
        version=1,
    )
    with c.uow() as uow:
        uow.memories.add(memory)
        uow.history.add(HistoryEntry(memory.id, tenant, user, "created", "seeded", "pipeline", at))
        for original in derived_from:
            uow.history.add(
                HistoryEntry(memory.id, tenant, user, "merged", "seeded merge", "rules", at, original)
            )
        push_unindexed(uow, MEMORIES, c.index(), c.embedder, tenant, user)
        uow.commit()
    return memory


def error_of(response: Any) -> dict[str, Any]:
    """The error object, checking the one shape every error has."""
    body = response.json()
    assert set(body) >= {"error"}, body
    error = body["error"]
    assert isinstance(error["code"], str) and isinstance(error["message"], str), error
    assert all(set(f) == {"field", "problem"} for f in error["fields"]), error
    return error


def fields_of(response: Any) -> set[str]:
    return {f["field"] for f in error_of(response)["fields"]}


def publish_turns(
    client: TestClient, key: str, user: str, turns: Sequence[str], session: str = "s1"
) -> list[str]:
    """Publish a user's turns through ``POST /v1/events/batch`` with ``key``; their event ids."""
    events = [{"user_id": user, "session_id": session, "role": "user", "content": t} for t in turns]
    r = client.post("/v1/events/batch", json={"events": events}, headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 200 and not r.json()["errors"], r.text
    return [p["event_id"] for p in r.json()["published"]]


class AppTransport(httpx.BaseTransport):
    """Send the client's requests through the app's TestClient (httpx.ASGITransport is async only)."""

    def __init__(self, client: TestClient):
        self.client = client

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        answer = self.client.request(
            request.method, str(request.url), headers=dict(request.headers), content=request.content
        )
        return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)
