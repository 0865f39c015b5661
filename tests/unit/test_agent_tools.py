"""Agent tools (producers.agent_tools): schemas, handler round trips, bad arguments as error text.

The recall callable and the publisher are duck-typed fakes passed in; nothing is patched.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from producers.agent_tools import TOOL_SCHEMAS, MemoryTools
from shared.events import FieldError, InvalidEvent
from tests.support.api_answers import ITEMS


class FakeRecall:
    def __init__(self, items: list[dict[str, Any]] | None = None, fail: Exception | None = None):
        self.items = ITEMS if items is None else items
        self.fail = fail
        self.calls: list[tuple[str, int, str | None]] = []

    def __call__(self, query: str, k: int, session_id: str | None) -> dict[str, Any]:
        self.calls.append((query, k, session_id))
        if self.fail is not None:
            raise self.fail
        return {"stage": "deterministic", "items": self.items[:k], "trace": {"notes": []}}


@dataclass(frozen=True)
class FakePublished:
    event_id: str
    seq: int


class FakePublisher:
    def __init__(self, fail: Exception | None = None):
        self.calls: list[dict[str, Any]] = []
        self.fail = fail

    def publish(self, **kwargs: Any) -> FakePublished:
        if self.fail is not None:
            raise self.fail
        self.calls.append(kwargs)
        return FakePublished(f"ev-{len(self.calls)}", len(self.calls))


def tools(recall: FakeRecall | None = None, publisher: FakePublisher | None = None) -> MemoryTools:
    return MemoryTools(recall or FakeRecall(), publisher or FakePublisher(), "u42", "chat-7")


def error_of(reply: str) -> str:
    data = json.loads(reply)
    assert set(data) == {"error"}, data
    return str(data["error"])


# --- schemas ----------------------------------------------------------------------------------

JSON_TYPES = {"object", "string", "integer", "number", "boolean", "array", "null"}


def check_property(name: str, prop: dict[str, Any]) -> None:
    assert prop["type"] in JSON_TYPES, name
    assert isinstance(prop.get("description", ""), str)
    if "enum" in prop:
        assert isinstance(prop["enum"], list) and prop["enum"], name
        assert all(isinstance(v, str) for v in prop["enum"]) and prop["type"] == "string"
    for bound in ("minimum", "maximum"):
        if bound in prop:
            assert prop["type"] in ("integer", "number") and isinstance(prop[bound], int)
    for bound in ("minLength", "maxLength"):
        if bound in prop:
            assert prop["type"] == "string" and isinstance(prop[bound], int) and prop[bound] >= 0
    if "default" in prop:
        default = prop["default"]
        if prop["type"] == "integer":
            assert isinstance(default, int) and prop.get("minimum", default) <= default <= prop["maximum"]
        if "enum" in prop:
            assert default in prop["enum"]


def test_tool_schemas_are_openai_function_schemas() -> None:
    assert [s["function"]["name"] for s in TOOL_SCHEMAS] == ["search_memory", "remember"]
    for schema in TOOL_SCHEMAS:
        assert schema["type"] == "function"
        fn = schema["function"]
        assert set(fn) == {"name", "description", "parameters"}
        assert fn["name"].isidentifier() and fn["description"].strip()
        params = fn["parameters"]
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert isinstance(params["properties"], dict) and params["properties"]
        assert set(params["required"]) <= set(params["properties"])
        for name, prop in params["properties"].items():
            check_property(name, prop)
        json.loads(json.dumps(schema))  # plain JSON


def test_schema_contents() -> None:
    search = TOOL_SCHEMAS[0]["function"]["parameters"]
    assert search["required"] == ["query"]
    assert search["properties"]["query"]["type"] == "string"
    assert search["properties"]["k"] | {"description": ""} == {
        "type": "integer",
        "minimum": 1,
        "maximum": 20,
        "default": 5,
        "description": "",
    }
    assert search["properties"]["format"]["enum"] == ["items", "prompt"]
    assert search["properties"]["session_id"]["type"] == "string"
    remember = TOOL_SCHEMAS[1]["function"]["parameters"]
    assert remember["required"] == ["content"]
    assert (
        remember["properties"]["content"]["minLength"],
        remember["properties"]["content"]["maxLength"],
    ) == (
        1,
        2000,
    )
    assert remember["properties"]["kind"]["enum"] == ["preference", "fact", "profile", "task"]
    assert tools().schemas is TOOL_SCHEMAS


# --- search_memory ----------------------------------------------------------------------------


def test_search_memory_returns_items_with_explanations() -> None:
    recall = FakeRecall()
    reply = tools(recall).handle("search_memory", '{"query": "我不吃什么", "k": 2}')
    assert json.loads(reply) == {"items": ITEMS}
    assert recall.calls == [("我不吃什么", 2, "chat-7")]  # the current conversation by default


def test_search_memory_defaults_and_dict_arguments() -> None:
    recall = FakeRecall()
    t = tools(recall)
    assert json.loads(t.handle("search_memory", {"query": "香菜", "session_id": "other-1"}))["items"]
    assert json.loads(t.handle("search_memory", {"query": "香菜", "k": 3.0}))["items"]
    assert recall.calls == [("香菜", 5, "other-1"), ("香菜", 3, "chat-7")]


def test_search_memory_leaves_the_id_length_to_the_server_as_remember_does() -> None:
    # A server may allow ids up to 512 characters (CUEMEM_MAX_ID_CHARS); the tools cannot see its
    # setting, so neither tool refuses an id the most generous server would take.
    recall, pub = FakeRecall(), FakePublisher()
    t = tools(recall, pub)
    long_session = "s" * 300
    assert json.loads(t.handle("search_memory", {"query": "香菜", "session_id": long_session}))["items"]
    assert json.loads(t.handle("remember", {"content": "I use vim", "session_id": long_session}))
    assert recall.calls[-1][2] == long_session and pub.calls[-1]["session_id"] == long_session
    assert "session_id" in error_of(t.handle("search_memory", {"query": "q", "session_id": "s" * 513}))


def test_search_memory_as_prompt_block() -> None:
    reply = tools().handle("search_memory", {"query": "我的偏好", "format": "prompt"})
    assert json.loads(reply) == {
        "prompt": "[长期记忆 - 用户偏好]\n- 我不吃香菜 (2026-11-01)\n\n"
        "[长期记忆 - 事实]\n- 生产环境部署端口是8443 (2026-11-02)"
    }
    english = json.loads(tools().handle("search_memory", {"query": "what do I like", "format": "prompt"}))
    assert english["prompt"].startswith("[Long-term memory - preferences]\n- 我不吃香菜 (2026-11-01)")
    nothing = json.loads(
        tools(FakeRecall(items=[])).handle("search_memory", {"query": "x", "format": "prompt"})
    )
    # Nothing recalled: the block says so, so the model is not left guessing.
    assert nothing == {"prompt": "[Long-term memory] Nothing relevant is remembered."}


def test_search_memory_dates_the_prompt_block_in_the_zone_the_recall_gives() -> None:
    # 17:30 UTC on Oct 5 is 01:30 on Oct 6 in Beijing; 03:30 UTC on Oct 6 is 22:30 on Oct 5 in New York.
    told = {"u1": "2026-10-05T17:30:00+00:00", "u10": "2026-10-06T03:30:00+00:00"}
    offsets = {"u1": 8 * 3600, "u10": -5 * 3600}

    def recall_of(user: str, offset: Any) -> Any:
        def recall(query: str, k: int, session_id: str | None) -> dict[str, Any]:
            item = {"content": "我不吃香菜", "type": "preference", "created_at": told[user]}
            return {"items": [item], "user_offset_s": offset}

        return recall

    def block(user: str, offset: Any) -> str:
        t = MemoryTools(recall_of(user, offset), FakePublisher(), user, "chat-7")
        return str(json.loads(t.handle("search_memory", {"query": "香菜", "format": "prompt"}))["prompt"])

    assert block("u1", offsets["u1"]).endswith("- 我不吃香菜 (2026-10-06)")
    assert block("u10", offsets["u10"]).endswith("- 我不吃香菜 (2026-10-05)")
    # No zone (a user without turns, an older server), or not a number of seconds: UTC.
    assert block("u1", None).endswith("(2026-10-05)") and block("u10", None).endswith("(2026-10-06)")
    assert block("u1", "28800").endswith("(2026-10-05)")


def test_search_memory_keeps_at_most_k_items_whatever_recall_returns() -> None:
    def generous(query: str, k: int, session_id: str | None) -> dict[str, Any]:
        return {"items": ITEMS * 5}

    t = MemoryTools(generous, FakePublisher(), "u42", "chat-7")
    assert len(json.loads(t.handle("search_memory", {"query": "q", "k": 3}))["items"]) == 3


# --- remember ---------------------------------------------------------------------------------


def test_remember_publishes_a_user_turn_with_metadata() -> None:
    pub = FakePublisher()
    t = tools(publisher=pub)
    reply = t.handle("remember", '{"content": "我对花生过敏", "kind": "profile"}')
    assert json.loads(reply) == {"event_id": "ev-1", "seq": 1}
    assert pub.calls == [
        {
            "user_id": "u42",
            "session_id": "chat-7",
            "role": "user",
            "content": "我对花生过敏",
            "metadata": {"remember": True, "kind": "profile"},
        }
    ]
    assert json.loads(t.handle("remember", {"content": "I use vim", "session_id": "s-2"})) == {
        "event_id": "ev-2",
        "seq": 2,
    }
    assert pub.calls[1]["session_id"] == "s-2"
    assert pub.calls[1]["metadata"] == {"remember": True, "kind": None}


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("search_memory", {}, "argument 'query' is required"),
        ("search_memory", "", "argument 'query' is required"),
        ("search_memory", {"query": None}, "argument 'query' is required"),
        ("search_memory", {"query": "  "}, "query: must not be empty"),
        ("search_memory", {"query": "x" * 4001}, "query: is 4001 characters long; the limit is 4000"),
        ("search_memory", {"query": "a\x00b"}, "query: contains a NUL character"),
        ("search_memory", {"query": 42}, "argument 'query' must be a string, got int"),
        ("search_memory", {"query": "q", "k": 0}, "k: must be between 1 and 20, got 0"),
        ("search_memory", {"query": "q", "k": 21}, "k: must be between 1 and 20, got 21"),
        ("search_memory", {"query": "q", "k": "5"}, "argument 'k' must be an integer from 1 to 20, got '5'"),
        ("search_memory", {"query": "q", "k": 2.5}, "argument 'k' must be an integer"),
        ("search_memory", {"query": "q", "k": True}, "argument 'k' must be an integer"),
        ("search_memory", {"query": "q", "format": "xml"}, "argument 'format' must be one of items, prompt"),
        ("search_memory", {"query": "q", "session_id": "a b"}, "session_id: 'a b' has characters outside"),
        ("search_memory", {"query": "q", "user_id": "x"}, "unknown argument 'user_id'"),
        ("search_memory", '{"query": "q",', "arguments are not valid JSON"),
        ("search_memory", "[1, 2]", "arguments must be a JSON object, got list"),
        ("search_memory", "null", "arguments must be a JSON object, got NoneType"),
        ("remember", {}, "argument 'content' is required"),
        ("remember", {"content": ""}, "argument 'content' must not be empty"),
        (
            "remember",
            {"content": "x" * 2001},
            "argument 'content' is 2001 characters long; the limit is 2000",
        ),
        ("remember", {"content": "x", "kind": "secret"}, "argument 'kind' must be one of preference, fact"),
        ("remember", "not json", "remember: arguments are not valid JSON"),
    ],
)
def test_bad_arguments_come_back_as_errors_naming_the_argument(
    name: str, arguments: Any, expected: str
) -> None:
    recall, pub = FakeRecall(), FakePublisher()
    message = error_of(tools(recall, pub).handle(name, arguments))
    assert message.startswith(f"{name}: ") and expected in message
    assert recall.calls == [] and pub.calls == []  # nothing ran


def test_unknown_tool() -> None:
    message = error_of(tools().handle("delete_memory", {"id": "m1"}))
    assert message == "unknown tool 'delete_memory' (available: search_memory, remember)"


def test_failures_of_recall_or_publish_never_raise_into_the_agent_loop() -> None:
    broken = tools(FakeRecall(fail=ConnectionError("redis is down")))
    assert error_of(broken.handle("search_memory", {"query": "q"})) == (
        "search_memory failed: ConnectionError: redis is down"
    )
    invalid = InvalidEvent([FieldError("content", "contains a NUL character")])
    message = error_of(tools(publisher=FakePublisher(fail=invalid)).handle("remember", {"content": "a\x00b"}))
    assert message.startswith("remember: ") and "content: contains a NUL character" in message


def test_boundary_values_are_accepted() -> None:
    t = tools()
    for k in (1, 20):
        assert "items" in json.loads(t.handle("search_memory", {"query": "q", "k": k}))
    assert "event_id" in json.loads(t.handle("remember", {"content": "x" * 2000, "kind": "task"}))
