"""The asyncio client: it sends each call of :mod:`producers.client.calls` with httpx.AsyncClient."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import httpx
from tenacity import AsyncRetrying

from producers.client.base import DEFAULT_ATTEMPTS, DEFAULT_TIMEOUT_S, ClientBase
from producers.client.calls import Calls
from producers.client.requests import Request

T = TypeVar("T")


class AsyncCuememClient(Calls, ClientBase):
    """The same calls as :class:`producers.client.CuememClient`, awaited."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
        max_attempts: int = DEFAULT_ATTEMPTS,
        backoff_s: float = 0.2,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        super().__init__(base_url, api_key, timeout, max_attempts, backoff_s)
        self._sleep = sleep
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=self._headers, timeout=timeout, transport=transport
        )

    async def _send(self, request: Request[T]) -> T:
        try:
            async for attempt in AsyncRetrying(sleep=self._sleep, **self._retry_kwargs()):
                with attempt:
                    response = await self._http.request(
                        request.method, request.path, json=request.json, params=request.params
                    )
                    return self._answer(request, response)
        except self._retried as exc:
            raise self._failed(request, exc) from exc
        raise AssertionError("unreachable")  # AsyncRetrying re-raises on the last attempt

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncCuememClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
