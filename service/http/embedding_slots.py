"""Per-tenant slots for the requests that embed text in the API process: recalls (the query) and
memory edits (the new content).

Embedding is CPU work, and a rate limit bounds how many requests a tenant sends per second, not
how many of them compute at once: sixteen 4,000-character recalls of one tenant, inside its rate
limit, held every worker thread and core, and another tenant's small recall waited 14.9 s behind
them. Here each tenant has ``CUEMEM_EMBEDDINGS_IN_FLIGHT_PER_TENANT`` slots in each serving
process; a request takes one before its work goes to the thread pool (off the event loop) and
gives it back when the work is done. A tenant whose slots are all taken **waits** for one, on the
event loop, holding no thread: its requests queue behind each other, not in front of another
tenant's, and the number waiting is bounded by the tenant's rate limit. (A 429 would turn a burst
that the rate limit allows into errors; waiting keeps the answer the same, only later.)

The slots live on the event loop of one process (``cuemem serve --workers N`` has N of each).
A tenant's entry is dropped when its last request leaves, so idle tenants cost nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, ParamSpec, TypeVar

import anyio
from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool

P = ParamSpec("P")
T = TypeVar("T")


@dataclass
class _Tenant:
    semaphore: anyio.Semaphore
    users: int = 0  # in a slot or waiting for one


class EmbeddingSlots:
    def __init__(self, per_tenant: int) -> None:
        self.per_tenant = per_tenant
        self._tenants: dict[str, _Tenant] = {}

    @asynccontextmanager
    async def slot(self, tenant: str) -> AsyncIterator[None]:
        entry = self._tenants.get(tenant)
        if entry is None:
            entry = self._tenants[tenant] = _Tenant(anyio.Semaphore(self.per_tenant))
        entry.users += 1
        try:
            async with entry.semaphore:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._tenants[tenant]

    async def run(self, tenant: str, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``work`` in the thread pool once one of ``tenant``'s slots is free."""
        async with self.slot(tenant):
            return await run_in_threadpool(work, *args, **kwargs)

    def in_flight(self, tenant: str) -> int:
        entry = self._tenants.get(tenant)
        return 0 if entry is None else self.per_tenant - entry.semaphore.value

    def waiting(self, tenant: str) -> int:
        entry = self._tenants.get(tenant)
        return 0 if entry is None else entry.semaphore.statistics().tasks_waiting


def slots_of(request: Request) -> EmbeddingSlots:
    slots: EmbeddingSlots = request.app.state.embedding_slots
    return slots


Slots = Annotated[EmbeddingSlots, Depends(slots_of)]
