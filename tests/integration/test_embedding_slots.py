"""Per-tenant embedding slots (service/http/embedding_slots.py), on real Postgres and Redis with an
injected embedder whose queries starting with "hold" block until the test releases them: while
tenant ``ac`` holds all its slots, its next recall and its edit wait for one, and tenant ``ac:me``'s
recall and edit are answered. Shown by what started and what waits, never by how long anything took.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import httpx
import pytest

from service.http.app import create_app
from service.operations.curation import create_key
from shared.settings import Settings
from tests.support.api import api_settings, seed_memory
from tests.support.fake_index import FakeVectorIndex
from workers.bootstrap import build_container
from workers.endpoints.embedders import build_embedder

AC, AC_ME = "ac", "ac:me"  # one tenant id a prefix of the other
SLOTS = 2
HANG_GUARD_S = 120  # only ever reached when the product hangs


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class HeldEmbedder:
    """The test deployment's embedder; a query starting with "hold" blocks until ``release``.
    ``started`` lists every query whose embedding began, in order."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.release = threading.Event()
        self.started: list[str] = []
        self._lock = threading.Lock()

    @property
    def model_name(self) -> str:
        return str(self.inner.model_name)

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        return list(self.inner.embed_passages(texts))

    def embed_query(self, text: str) -> list[float]:
        with self._lock:
            self.started.append(text)
        if text.startswith("hold"):
            self.release.wait(HANG_GUARD_S)
        return list(self.inner.embed_query(text))

    def held(self) -> int:
        with self._lock:
            return sum(1 for text in self.started if text.startswith("hold"))


async def until(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(HANG_GUARD_S):
        while not condition():
            await anyio.sleep(0.01)


@pytest.mark.anyio
async def test_a_tenant_over_its_slots_waits_and_another_tenants_requests_are_not_queued_behind_it(
    it_settings: Settings,
) -> None:
    settings = api_settings(it_settings).model_copy(update={"embeddings_in_flight_per_tenant": SLOTS})
    embedder = HeldEmbedder(build_embedder(settings))
    container = build_container(
        settings, index=FakeVectorIndex(), turn_index=FakeVectorIndex(), embedder=embedder, dispatch=list
    )
    container.index().ensure(embedder.dim, embedder.model_name)
    keys = {t: create_key(container, t, "tests")["key"] for t in (AC, AC_ME)}
    memories = {t: seed_memory(container, t, "u1", f"{t} drinks green tea").id for t in keys}
    app = create_app(container)
    slots = app.state.embedding_slots
    answers: dict[str, int] = {}
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:

            async def recall(tenant: str, query: str) -> int:
                headers = {"Authorization": f"Bearer {keys[tenant]}"}
                r = await client.post("/v1/recall", json={"user_id": "u1", "query": query}, headers=headers)
                answers[f"{tenant} {query}"] = r.status_code
                return r.status_code

            async def edit(tenant: str) -> int:
                headers = {"Authorization": f"Bearer {keys[tenant]}"}
                url = f"/v1/users/u1/memories/{memories[tenant]}"
                r = await client.patch(url, json={"content": "drinks black tea"}, headers=headers)
                answers[f"{tenant} edit"] = r.status_code
                return r.status_code

            async with anyio.create_task_group() as tasks:
                try:
                    for i in range(SLOTS + 1):
                        tasks.start_soon(recall, AC, f"hold {i}")
                    # Each of ac's recalls is either embedding (held) or waiting for a slot.
                    await until(lambda: embedder.held() + slots.waiting(AC) == SLOTS + 1)
                    assert (embedder.held(), slots.waiting(AC)) == (SLOTS, 1)
                    tasks.start_soon(edit, AC)
                    await until(lambda: slots.waiting(AC) == 2)
                    # ac:me is served while every slot of ac is held and two of ac's requests wait.
                    with anyio.fail_after(HANG_GUARD_S / 2):
                        assert await recall(AC_ME, "what does ac:me drink") == 200
                        assert await edit(AC_ME) == 200
                    assert (embedder.held(), slots.waiting(AC), f"{AC} edit" in answers) == (SLOTS, 2, False)
                finally:  # a failed check must not leave the held threads waiting out the guard
                    embedder.release.set()
        # Waiting lost nothing: every request of ac was answered once its turn came.
        assert answers == {
            **{f"{AC} hold {i}": 200 for i in range(SLOTS + 1)},
            f"{AC} edit": 200,
            f"{AC_ME} what does ac:me drink": 200,
            f"{AC_ME} edit": 200,
        }
        assert embedder.held() == SLOTS + 1 and slots.waiting(AC) == slots.in_flight(AC) == 0
    finally:
        embedder.release.set()
        app.state.close()
        container.close()
