"""The HTTP API, the MCP server and ``cuemem recall`` refuse a bad recall alike: the same field
named, with the same problem, the one shared.recall.request.parse_recall gives (each entry point
names the field its own way: ``k`` in a body or a tool call, ``--k`` on the command line).

Real Postgres and Redis behind the API's container; MCP runs in process on the library backend
(``cuemem mcp`` without ``--api-url``), the CLI in process (typer's runner)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import mcp
import pytest

from cli.recall import RECALL_OPTIONS
from producers.agent_tools import K_MAX, MemoryTools
from producers.publisher import Publisher
from service.mcp.server import build_server
from service.operations.library_backend import LibraryBackend
from shared.events import InvalidInput
from shared.recall.request import MAX_K, parse_recall
from shared.settings import Settings
from tests.support.api import ApiEnv, api_settings, error_of, running_api
from tests.support.services import cuemem_in_process

TENANT, USER, SESSION = "tenant-a", "u1", "s1"
LONG = "x" * 4001

# (what is bad, the recall's values) -> the field every entry point names. Values MCP cannot
# carry (its search_memory takes a query and k; the server's starter fixes the user and the
# session) are checked on HTTP and the CLI only.
CASES: list[tuple[str, dict[str, Any], str]] = [
    ("empty query", {"query": ""}, "query"),
    ("blank query", {"query": "   "}, "query"),
    ("long query", {"query": LONG}, "query"),
    ("NUL in query", {"query": "a\x00b"}, "query"),
    ("k of 0", {"k": 0}, "k"),
    ("negative k", {"k": -2}, "k"),
    ("session outside the alphabet", {"session_id": "a/b"}, "session_id"),
    ("now without a zone", {"now": "2026-11-01T10:00:00"}, "now"),
    ("now in words", {"now": "yesterday"}, "now"),
    ("budget of 0", {"budget_tokens": 0}, "budget_tokens"),
    ("user outside the alphabet", {"user_id": "u 1"}, "user_id"),
]
MCP_ARGUMENTS = {"query", "k"}


@pytest.fixture
def env(it_settings: Settings) -> Iterator[ApiEnv]:
    with running_api(api_settings(it_settings)) as env:
        yield env


def _recall(values: dict[str, Any]) -> dict[str, Any]:
    return {"user_id": USER, "query": "我不吃什么？", **values}


def _problem(values: dict[str, Any], field: str, max_k: int = MAX_K) -> str:
    """What the parser says of ``field``: the text every entry point must pass on."""
    with pytest.raises(InvalidInput) as err:
        parse_recall(**_recall(values), max_k=max_k)
    [error] = err.value.errors
    assert error.field == field
    return error.problem


def _http(env: ApiEnv, values: dict[str, Any]) -> tuple[int, list[dict[str, str]]]:
    r = env.client.post("/v1/recall", json={**_recall(values), "reinforce": False}, headers=env.auth(TENANT))
    return r.status_code, error_of(r)["fields"] if r.status_code >= 400 else []


def _cli(settings: Settings, values: dict[str, Any]) -> tuple[int, str]:
    v = _recall(values)
    args = ["recall", "--user", v["user_id"], f"--k={v.get('k', 5)}"]
    for field, option in (("now", "--now"), ("session_id", "--session"), ("budget_tokens", "--budget")):
        if field in v:
            args.append(f"{option}={v[field]}")
    done = cuemem_in_process(settings, *args, "--", v["query"], CUEMEM_TENANT_ID=TENANT)
    return done.returncode, done.stderr


def _mcp(env: ApiEnv, values: dict[str, Any]) -> tuple[bool, str]:
    arguments = {"query": "我不吃什么？", **values}
    with Publisher.from_settings(env.container.settings) as pub:
        server = build_server(MemoryTools.over(LibraryBackend(env.container, pub), USER, SESSION))

        async def call() -> tuple[bool, str]:
            async with mcp.Client(server) as client:
                result = await client.call_tool("search_memory", arguments)
            return bool(result.is_error), "".join(getattr(p, "text", "") for p in result.content)

        return anyio.run(call)


def test_http_mcp_and_the_cli_refuse_a_bad_recall_naming_the_same_field(env: ApiEnv) -> None:
    # One environment for every case (a loop, not parameters): each case's own database would
    # cost more than all the calls.
    for case, values, field in CASES:
        problem = _problem(values, field)

        status, fields = _http(env, values)
        assert (status, fields) == (422, [{"field": field, "problem": problem}]), case

        code, stderr = _cli(env.container.settings, values)
        assert code == 2 and stderr == f"error: {RECALL_OPTIONS[field]}: {problem}\n", (case, stderr)

        if set(values) <= MCP_ARGUMENTS:
            failed, text = _mcp(env, values)
            # The tool's own bound of k is lower (its schema offers a model at most K_MAX items).
            expected = f"search_memory: {field}: {_problem(values, field, K_MAX)}"
            assert failed and expected in text, (case, text)


def test_a_k_only_the_tools_schema_refuses_is_named_the_same_way(env: ApiEnv) -> None:
    """k = 21: over what search_memory offers a model, within what the API and the CLI take."""
    failed, text = _mcp(env, {"k": K_MAX + 1})
    assert failed and f"search_memory: k: must be between 1 and {K_MAX}, got {K_MAX + 1}" in text, text
    status, _ = _http(env, {"k": K_MAX + 1})
    assert status == 200
