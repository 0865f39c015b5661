"""``GET /v1/export`` holds no database connection while its client reads (issue 29, one tenant's
cost): the rows are read into a spool file first, and only then is the first byte sent.

Streamed from its snapshot instead, a client that read slowly kept the export's connection for as
long as it liked: eleven slow exports of one tenant (5 at once and one per 20 s within its rate
limit) took the process's whole pool (5 + 5), and every other tenant's request waited 30 s for a
connection and answered 500. Here the ASGI app is driven by hand: when the first byte of the body
is sent, no unit of work may be open; two tenants (``ac`` / ``ac:me``) with users ``u1`` / ``u10``,
and the file is still the tenant's alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

import anyio
import pytest

from shared.settings import Settings
from shared.storage import UnitOfWork
from tests.support.api import ApiEnv, api_settings, build_env, seed_memory

TENANTS = ("ac", "ac:me")
USERS = ("u1", "u10")


class CountingUnits:
    """The container's unit-of-work factory, counting the units open at any moment."""

    def __init__(self, new_uow: Callable[[], UnitOfWork]) -> None:
        self.new_uow = new_uow
        self.open = 0

    def __call__(self) -> Any:
        return self._unit()

    @contextmanager
    def _unit(self) -> Iterator[UnitOfWork]:
        self.open += 1
        try:
            with self.new_uow() as uow:
                yield uow
        finally:
            self.open -= 1


@pytest.fixture
def env(it_settings: Settings) -> Iterator[ApiEnv]:
    env = build_env(api_settings(it_settings), tenants=TENANTS)
    for tenant in TENANTS:
        for user in USERS:
            for n in range(3):
                seed_memory(env.container, tenant, user, f"{tenant}/{user} keeps bees, hive {n}", n=n)
    try:
        yield env
    finally:
        env.client.app.state.close()  # type: ignore[attr-defined]
        env.container.close()


def _export(env: ApiEnv, tenant: str, query: bytes) -> tuple[int, bytes, list[int]]:
    """The status, the body, and the units open each time a part of the body was sent."""
    app = env.client.app
    headers = [(b"authorization", f"Bearer {env.keys[tenant]}".encode())]
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": "/v1/export", "raw_path": b"/v1/export", "query_string": query,
        "headers": headers, "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80), "root_path": "",
    }  # fmt: skip
    units = env.container.uow
    assert isinstance(units, CountingUnits)
    status, body, open_at_send = 0, bytearray(), []

    async def receive() -> MutableMapping[str, Any]:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body" and message.get("body"):
            open_at_send.append(units.open)
            body.extend(message["body"])

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            await app(scope, receive, send)
            tg.cancel_scope.cancel()

    anyio.run(main)
    return status, bytes(body), open_at_send


@pytest.mark.parametrize("query", [b"", b"user_id=u1"])
def test_no_database_connection_is_held_while_the_export_is_sent(env: ApiEnv, query: bytes) -> None:
    env.container.uow = CountingUnits(env.container.uow)
    status, body, open_at_send = _export(env, "ac", query)
    assert status == 200, body[:300]
    assert open_at_send and max(open_at_send) == 0, open_at_send
    lines = [json.loads(line) for line in body.decode().splitlines()]
    rows = [line["row"] for line in lines if "table" in line]
    assert lines[-1].get("end") and rows
    assert {row["tenant_id"] for row in rows} == {"ac"}
    users = {row["user_id"] for row in rows}
    assert users == ({"u1"} if query else set(USERS)), users
