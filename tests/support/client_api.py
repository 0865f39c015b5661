"""A scripted HTTP API for the client tests (httpx.MockTransport), and running one call through
both the blocking and the asyncio client with the waits between retries recorded, not slept."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from producers.client import AsyncCuememClient, CuememClient

BASE = "http://cuemem.test"
KEY = "ck_test_key"


@dataclass
class Api:
    """A scripted API: answers queued per (method, path), or one default; records every request."""

    answers: dict[tuple[str, str], list[httpx.Response | Exception]] = field(default_factory=dict)
    default: Callable[[httpx.Request], httpx.Response] | None = None
    requests: list[httpx.Request] = field(default_factory=list)

    def queue(self, method: str, path: str, *answers: httpx.Response | Exception) -> None:
        self.answers.setdefault((method, path), []).extend(answers)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        queued = self.answers.get((request.method, request.url.path))
        if queued:
            answer = queued.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer
        if self.default is not None:
            return self.default(request)
        return httpx.Response(404, json={"error": {"code": "not_found", "message": "no route", "fields": []}})

    def body(self, i: int = -1) -> Any:
        return json.loads(self.requests[i].content)


def sync_client(api: Api, **kwargs: Any) -> tuple[CuememClient, list[float]]:
    sleeps: list[float] = []
    client = CuememClient(BASE, KEY, transport=httpx.MockTransport(api), sleep=sleeps.append, **kwargs)
    return client, sleeps


def async_client(api: Api, **kwargs: Any) -> tuple[AsyncCuememClient, list[float]]:
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    client = AsyncCuememClient(BASE, KEY, transport=httpx.MockTransport(api), sleep=sleep, **kwargs)
    return client, sleeps


def run_both(api_factory: Callable[[], Api], call: Callable[[Any], Any], **kwargs: Any) -> list[Any]:
    """Run ``call(client)`` with the sync and the async client; returns both (result, api, sleeps)."""
    out = []
    api = api_factory()
    client, sleeps = sync_client(api, **kwargs)
    with client:
        out.append((call(client), api, sleeps))
    api = api_factory()
    aclient, asleeps = async_client(api, **kwargs)

    async def go() -> Any:
        async with aclient:
            return await call(aclient)

    out.append((asyncio.run(go()), api, asleeps))
    return out


def capture(call: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``call``, returning its exception instead of raising (awaited inside for the async client)."""

    def wrapped(client: Any) -> Any:
        try:
            result = call(client)
        except Exception as exc:
            return exc
        if not asyncio.iscoroutine(result):
            return result
        coroutine = result

        async def catch() -> Any:
            try:
                return await coroutine
            except Exception as exc:
                return exc

        return catch()

    return wrapped


def error(status: int, code: str, message: str, fields: list[dict[str, str]] | None = None, **headers: str):
    return httpx.Response(
        status,
        json={"error": {"code": code, "message": message, "fields": fields or []}},
        headers=headers,
    )


def scripted(method: str, path: str, *answers: httpx.Response | Exception) -> Callable[[], Api]:
    """A factory of APIs answering ``method path`` with ``answers`` in turn (fresh copies each
    time: each client run gets its own responses)."""

    def fresh(answer: httpx.Response | Exception) -> httpx.Response | Exception:
        if isinstance(answer, Exception):
            return answer
        return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)

    def make() -> Api:
        api = Api()
        api.queue(method, path, *(fresh(a) for a in answers))
        return api

    return make
