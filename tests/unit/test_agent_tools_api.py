"""Agent tools and the MCP server over the HTTP API backend (httpx.MockTransport, nothing patched).

The same MemoryTools that run on the library run on ApiBackend(CuememClient): search_memory is
POST /v1/recall for the tools' user, remember is POST /v1/events with the remember metadata,
forget is a soft DELETE; API errors come back as tool error text naming the field. The MCP server
(service.mcp.server) is driven in-process by the SDK's own client.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from producers.agent_tools import MemoryTools
from producers.backends import ApiBackend, CallableBackend
from producers.client import CuememClient
from tests.support.api_answers import ITEMS

RECALL = {"stage": "deterministic", "items": ITEMS, "trace": {"notes": []}, "prompt": "…"}


class Api:
    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.seq = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        body = json.loads(request.content) if request.content else {}
        if (request.method, path) == ("POST", "/v1/recall"):
            return httpx.Response(200, json=RECALL | {"items": ITEMS[: body.get("k", 5)]})
        if (request.method, path) == ("POST", "/v1/events"):
            if "\x00" in body["content"]:
                return httpx.Response(
                    422,
                    json={
                        "error": {
                            "code": "invalid_event",
                            "message": "the event is invalid",
                            "fields": [{"field": "content", "problem": "contains a NUL character"}],
                        }
                    },
                )
            self.seq += 1
            return httpx.Response(
                202,
                json={
                    "event_id": body["event_id"],
                    "seq": self.seq,
                    "session_id": body["session_id"],
                    "user_id": body["user_id"],
                },
            )
        if request.method == "DELETE" and path == "/v1/users/u42/memories/m1":
            return httpx.Response(200, json={"deleted": ["m1"], "hard": False})
        return httpx.Response(
            404, json={"error": {"code": "not_found", "message": f"no memory for {path}", "fields": []}}
        )


def api_tools(api: Api, *, reinforce: bool = False) -> MemoryTools:
    client = CuememClient("http://cuemem.test", "ck_1", transport=httpx.MockTransport(api), max_attempts=1)
    backend = ApiBackend(client, reinforce=True) if reinforce else ApiBackend(client)
    return MemoryTools.over(backend, "u42", "chat-7")


def test_search_memory_is_a_recall_for_the_tools_user() -> None:
    api = Api()
    reply = api_tools(api).handle("search_memory", '{"query": "我不吃什么", "k": 1}')
    assert json.loads(reply) == {"items": ITEMS[:1]}
    [request] = api.requests
    assert (request.method, request.url.path) == ("POST", "/v1/recall")
    assert json.loads(request.content) == {
        "user_id": "u42",
        "query": "我不吃什么",
        "k": 1,
        "session_id": "chat-7",
        "reinforce": False,  # a search is read-only, whatever the server's version
    }
    prompt = json.loads(api_tools(Api()).handle("search_memory", {"query": "我的偏好", "format": "prompt"}))
    assert prompt["prompt"].startswith("[长期记忆 - 用户偏好]\n- 我不吃香菜")
    # An agent that puts what it finds to use asks for its searches to count.
    counting = Api()
    api_tools(counting, reinforce=True).handle("search_memory", {"query": "我不吃什么"})
    assert json.loads(counting.requests[0].content)["reinforce"] is True


def test_remember_publishes_through_the_api_with_the_remember_flag() -> None:
    api = Api()
    reply = json.loads(api_tools(api).handle("remember", {"content": "我对花生过敏", "kind": "profile"}))
    assert reply["seq"] == 1 and len(reply["event_id"]) == 32
    body = json.loads(api.requests[0].content)
    assert body == {
        "user_id": "u42",
        "session_id": "chat-7",
        "role": "user",
        "content": "我对花生过敏",
        "metadata": {"remember": True, "kind": "profile"},
        "event_id": reply["event_id"],
    }


def test_api_errors_come_back_as_tool_errors_naming_the_field() -> None:
    reply = json.loads(api_tools(Api()).handle("remember", {"content": "a\x00b"}))
    assert reply == {
        "error": "remember failed: CuememAPIError: HTTP 422 invalid_event: the event is invalid "
        "(content: contains a NUL character)"
    }
    # Bad arguments are refused before any request.
    api = Api()
    assert "k: must be between 1 and 20" in api_tools(api).handle("search_memory", {"query": "q", "k": 0})
    assert api.requests == []


def test_forget_is_a_soft_delete_and_unknown_ids_are_errors() -> None:
    api = Api()
    tools = api_tools(api)
    assert json.loads(tools.forget("m1")) == {"deleted": ["m1"], "hard": False}
    assert api.requests[0].method == "DELETE" and "hard" not in api.requests[0].url.params
    missing = json.loads(tools.forget("nope"))["error"]
    assert "HTTP 404 not_found" in missing
    assert json.loads(tools.forget("")) == {"error": "forget: argument 'memory_id' must not be empty"}


def test_the_original_form_cannot_forget_and_says_so() -> None:
    tools = MemoryTools(lambda q, k, s: {"items": []}, object(), "u", "s")  # type: ignore[arg-type]
    assert isinstance(tools.backend, CallableBackend)
    assert json.loads(tools.forget("m1")) == {
        "error": "forget: forget is not available: this backend was built without it"
    }


# --- the MCP server, in-process ---------------------------------------------------------------


def _mcp(api: Api, calls: list[tuple[str, dict[str, Any]]]) -> tuple[Any, list[Any]]:
    import mcp  # a dev dependency: missing, these tests fail rather than skip

    from service.mcp.server import build_server

    server = build_server(api_tools(api))

    async def go() -> tuple[Any, list[Any]]:
        async with mcp.Client(server) as client:
            listed = await client.list_tools()
            results = [await client.call_tool(name, arguments) for name, arguments in calls]
            return listed, results

    return asyncio.run(go())


def _text(result: Any) -> str:
    [content] = result.content
    return str(content.text)


def test_mcp_tools_are_listed_with_their_schemas() -> None:
    listed, _ = _mcp(Api(), [])
    tools = {t.name: t for t in listed.tools}
    assert sorted(tools) == ["forget", "remember", "search_memory"]
    search = tools["search_memory"].input_schema
    assert search["required"] == ["query"]
    assert (search["properties"]["k"]["minimum"], search["properties"]["k"]["maximum"]) == (1, 20)
    assert search["properties"]["k"]["default"] == 5
    remember = tools["remember"].input_schema
    assert remember["required"] == ["content"]
    assert "profile" in json.dumps(remember["properties"]["kind"])
    assert tools["forget"].input_schema["required"] == ["memory_id"]
    assert "Call it before answering" in (tools["search_memory"].description or "")


def test_mcp_calls_reach_the_api_for_the_configured_user() -> None:
    api = Api()
    _, (remembered, found, forgot, missing, bad) = _mcp(
        api,
        [
            ("remember", {"content": "我对花生过敏", "kind": "profile"}),
            ("search_memory", {"query": "我对什么过敏", "k": 2}),
            ("forget", {"memory_id": "m1"}),
            ("forget", {"memory_id": "other"}),
            ("search_memory", {"query": "q", "k": 99}),
        ],
    )
    assert not remembered.is_error and json.loads(_text(remembered))["seq"] == 1
    assert json.loads(_text(found)) == {"items": ITEMS[:2]}
    assert json.loads(_text(forgot)) == {"deleted": ["m1"], "hard": False}
    assert missing.is_error and "HTTP 404 not_found" in _text(missing)
    assert bad.is_error and "k" in _text(bad)
    users = {json.loads(r.content)["user_id"] for r in api.requests if r.method == "POST"}
    assert users == {"u42"}
    assert [r.url.path for r in api.requests if r.method == "DELETE"] == [
        "/v1/users/u42/memories/m1",
        "/v1/users/u42/memories/other",
    ]
