"""The blocking client: it sends each call of :mod:`producers.client.calls` with httpx.Client."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import httpx
from tenacity import Retrying

from producers.client.base import DEFAULT_ATTEMPTS, DEFAULT_TIMEOUT_S, ClientBase
from producers.client.calls import Calls
from producers.client.requests import Request

T = TypeVar("T")


class CuememClient(Calls, ClientBase):
    """Blocking client. ``transport`` lets tests hand in an ``httpx.MockTransport``; ``sleep``
    replaces ``time.sleep`` between retries (tests record the waits instead of waiting)."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
        max_attempts: int = DEFAULT_ATTEMPTS,
        backoff_s: float = 0.2,
        sleep: Callable[[float], None] = time.sleep,
    ):
        super().__init__(base_url, api_key, timeout, max_attempts, backoff_s)
        self._sleep = sleep
        self._http = httpx.Client(
            base_url=self.base_url, headers=self._headers, timeout=timeout, transport=transport
        )

    def _send(self, request: Request[T]) -> T:
        try:
            for attempt in Retrying(sleep=self._sleep, **self._retry_kwargs()):
                with attempt:
                    response = self._http.request(
                        request.method, request.path, json=request.json, params=request.params
                    )
                    return self._answer(request, response)
        except self._retried as exc:
            raise self._failed(request, exc) from exc
        raise AssertionError("unreachable")  # Retrying re-raises on the last attempt

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> CuememClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
