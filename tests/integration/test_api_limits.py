"""Hostile HTTP input (issue 18): bodies refused before they are read (size, media type, key), one
error shape naming a field for every parse error, per-item batch answers, the 500's log line, the
access line's tenant, /docs without a CDN and /metrics' token.

Real Postgres and Redis, the API built as the other API tests build it (tests/support/api.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from service.http.app import create_app
from service.http.logs import JsonFormatter
from tests.support.api import api_settings, build_env, error_of, fields_of

A = "tenant-a"
LIMIT = 64 * 1024  # the single endpoints' limit in these tests
BATCH_LIMIT = 256 * 1024
TURN = {"user_id": "u1", "session_id": "s1", "role": "user", "content": "hello"}


@pytest.fixture
def env(it_settings):
    settings = api_settings(it_settings).model_copy(
        update={"max_body_bytes": LIMIT, "max_batch_body_bytes": BATCH_LIMIT}
    )
    env = build_env(settings)
    yield env
    env.client.app.state.close()  # type: ignore[attr-defined]
    env.container.close()


class Upload:
    """An ASGI request whose body arrives in chunks, counting the bytes the app reads of it."""

    def __init__(self, total: int, chunk: int = 64 * 1024):
        self.total, self.chunk, self.read = total, chunk, 0

    def chunks(self) -> Iterator[bytes]:
        sent = 0
        while sent < self.total:
            n = min(self.chunk, self.total - sent)
            sent += n
            yield b"[" * n

    def call(self, app: Any, path: str, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        chunks = self.chunks()
        messages: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            body = next(chunks, b"")
            self.read += len(body)
            return {"type": "http.request", "body": body, "more_body": bool(body)}

        async def send(message: dict[str, Any]) -> None:
            messages.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
            "client": ("127.0.0.1", 5000),
            "server": ("testserver", 80),
        }
        asyncio.run(app(scope, receive, send))
        start = next(m for m in messages if m["type"] == "http.response.start")
        body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
        return start["status"], json.loads(body)


def _fields(answer: dict[str, Any]) -> set[str]:
    return {f["field"] for f in answer["error"]["fields"]}


def test_a_body_without_a_key_or_over_the_limit_is_never_read(env):
    app, json_type = env.client.app, {"Content-Type": "application/json"}
    # 48 MB without a key, chunked (no length): 401 before a byte of it is read. Before the guard
    # FastAPI read and parsed it all first (the process grew by a gigabyte).
    upload = Upload(48 * 1024 * 1024)
    status, answer = upload.call(app, "/v1/events", {**json_type, "Transfer-Encoding": "chunked"})
    assert (status, upload.read) == (401, 0), answer
    assert _fields(answer) == {"Authorization"}
    upload = Upload(48 * 1024 * 1024)
    status, answer = upload.call(
        app,
        "/v1/events",
        {**json_type, "Transfer-Encoding": "chunked", "Authorization": "Bearer cm_nonsense"},
    )
    assert (status, upload.read) == (401, 0), answer

    # A length over the limit, with or without a key: 413 naming body, nothing read.
    for headers in ({}, env.auth(A)):
        upload = Upload(48 * 1024 * 1024)
        status, answer = upload.call(
            app, "/v1/events", {**json_type, **headers, "Content-Length": str(upload.total)}
        )
        assert (status, upload.read) == (413, 0), answer
        assert answer["error"]["code"] == "too_large" and _fields(answer) == {"body"}

    # Chunked, with a key: read only until it crosses the limit (plus the chunk that crossed it).
    upload = Upload(48 * 1024 * 1024, chunk=16 * 1024)
    status, answer = upload.call(
        app, "/v1/events", {**json_type, **env.auth(A), "Transfer-Encoding": "chunked"}
    )
    assert status == 413 and LIMIT < upload.read <= LIMIT + 16 * 1024, (status, upload.read, answer)
    assert answer["error"]["code"] == "too_large" and _fields(answer) == {"body"}
    # The import reads its body itself: the same count stops it.
    upload = Upload(4 * BATCH_LIMIT, chunk=16 * 1024)
    status, answer = upload.call(app, "/v1/import", {**env.auth(A), "Transfer-Encoding": "chunked"})
    assert status != 413 and upload.read == 4 * BATCH_LIMIT, (status, answer)


def test_each_route_has_its_limit_and_the_413_has_the_one_shape(env):
    c, h = env.client, env.auth(A)
    padding = "x" * (LIMIT + 1)
    r = c.post("/v1/events", json={**TURN, "content": padding}, headers=h)
    assert r.status_code == 413 and fields_of(r) == {"body"} and error_of(r)["code"] == "too_large"
    r = c.post("/v1/recall", json={"user_id": "u1", "query": padding}, headers=h)
    assert r.status_code == 413 and fields_of(r) == {"body"}
    # A batch may be larger than one turn: its own limit.
    events = [{**TURN, "content": "y" * 1000}] * (2 * LIMIT // 1000)
    r = c.post("/v1/events/batch", json={"events": events}, headers=h)
    assert r.status_code == 200 and not r.json()["errors"], r.text[:300]
    events = [{**TURN, "content": "y" * 1000}] * (2 * BATCH_LIMIT // 1000)
    r = c.post("/v1/events/batch", json={"events": events[:1000]}, headers=h)
    assert r.status_code == 413 and fields_of(r) == {"body"}


def test_a_body_that_is_not_json_gets_415_naming_the_content_type(env):
    c, h = env.client, env.auth(A)
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "application/xml"):
        r = c.post("/v1/events", content=json.dumps(TURN), headers={**h, "Content-Type": content_type})
        assert r.status_code == 415 and fields_of(r) == {"Content-Type"}, (content_type, r.text)
        assert error_of(r)["code"] == "unsupported_media_type"
    r = c.post("/v1/recall", content=b'{"user_id": "u1", "query": "x"}', headers=h)  # no Content-Type
    assert r.status_code == 415 and fields_of(r) == {"Content-Type"}
    for content_type in ("application/json; charset=utf-8", "application/vnd.cuemem+json"):
        r = c.post("/v1/events", content=json.dumps(TURN), headers={**h, "Content-Type": content_type})
        assert r.status_code == 202, (content_type, r.text)


def test_every_parse_error_names_the_body_with_the_position_in_its_problem(env):
    c, h = env.client, {**env.auth(A), "Content-Type": "application/json"}
    r = c.post("/v1/events", content=b'{"user_id": ', headers=h)
    assert r.status_code == 400 and error_of(r)["code"] == "malformed_json"
    assert fields_of(r) == {"body"} and "position 12" in error_of(r)["fields"][0]["problem"]
    r = c.post("/v1/events", content=b'{"user_id": "\xff"}', headers=h)
    assert r.status_code == 400 and fields_of(r) == {"body"}, r.text
    assert "UTF-8" in error_of(r)["fields"][0]["problem"]
    r = c.post("/v1/events", content=b"[" * 20_000 + b"]" * 20_000, headers=h)
    assert r.status_code == 400 and fields_of(r) == {"body"}, r.text
    r = c.put("/v1/events", content=b"{}", headers=h)
    assert r.status_code == 405 and fields_of(r) == {"method"}


def test_a_batch_answers_per_item_whatever_an_item_holds(env):
    c, h = env.client, {**env.auth(A), "Content-Type": "application/json"}
    ok = json.dumps(TURN)[:-1]
    items = [
        ok + "}",
        ok + ', "\\ud800": 1}',  # a lone surrogate as a key: was a 500 after item 0 was published
        ok + ', "metadata": {"\\udfff": "x"}}',
        ok + ', "content": "a\\ud800b"}',
        ok + ', "metadata": {"k": "a\\u0000b"}}',
        ok + ', "content": "a\\u0000b"}',
        '"not an object"',
        ok + ', "metadata": ' + "[" * 200 + "]" * 200 + "}",
        ok + "}",
    ]
    r = c.post("/v1/events/batch", content=('{"events": [' + ", ".join(items) + "]}").encode(), headers=h)
    assert r.status_code == 200, r.text
    body = r.json()
    assert [p["seq"] for p in body["published"]] == [1, 2]
    named = {e["index"]: [f["field"] for f in e["fields"]] for e in body["errors"]}
    assert named == {
        1: ["\\ud800"],
        2: ["metadata"],
        3: ["content"],
        4: ["metadata"],
        5: ["content"],
        6: ["event"],
        7: ["metadata"],
    }, body["errors"]
    # The single endpoint: a 422 naming the field, never a 500.
    for item, field in (
        (items[1], "\\ud800"),
        (items[2], "metadata"),
        (items[3], "content"),
        (items[5], "content"),
    ):
        r = c.post("/v1/events", content=item.encode(), headers=h)
        assert r.status_code == 422, (item, r.text)
        assert fields_of(r) in ({field}, {"body"}), (item, r.text)


class _Lines(logging.Handler):
    """The JSON lines the API would write, formatted as they are emitted (the request id is read
    from its context variable then)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(JsonFormatter())
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))


class _BrokenPublisher:
    def publish_turn(self, raw: Any) -> Any:
        raise RuntimeError("a bug")

    def close(self) -> None:
        pass


@pytest.fixture
def lines() -> Iterator[_Lines]:
    handler, logger = _Lines(), logging.getLogger("cuemem.api")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_a_500_logs_its_request_id_and_access_lines_their_tenant(env, lines):
    app = create_app(env.container, publisher=_BrokenPublisher())  # type: ignore[arg-type]
    client = TestClient(app, raise_server_exceptions=False)
    r = client.post("/v1/events", json=TURN, headers={**env.auth(A), "X-Request-ID": "req-500"})
    assert r.status_code == 500 and error_of(r)["code"] == "internal"
    assert r.headers["x-request-id"] == "req-500"
    unhandled = [line for line in lines.lines if line["msg"].startswith("unhandled error")]
    assert len(unhandled) == 1 and unhandled[0]["request_id"] == "req-500", lines.lines
    assert "RuntimeError: a bug" in unhandled[0]["exc"]
    access = [line for line in lines.lines if line.get("route") == "/v1/events"]
    assert access[-1]["status"] == 500 and access[-1]["tenant_id"] == A, lines.lines

    env.client.get("/v1/users/u1/memories", headers=env.auth("tenant-b"))
    env.client.get("/v1/users/u1/memories")  # no key: no tenant
    access = [line for line in lines.lines if line.get("route") == "/v1/users/{user_id}/memories"]
    assert [(line["status"], line.get("tenant_id")) for line in access] == [(200, "tenant-b"), (401, None)]


def test_docs_load_nothing_from_another_origin(env):
    c = env.client
    r = c.get("/docs")
    assert r.status_code == 200 and "swagger-ui" in r.text
    assert "http:" not in r.text and "https:" not in r.text and "//" not in r.text.replace("<!doctype", "")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self';" in csp and "default-src 'none'" in csp
    assert "<script>" not in r.text  # no inline script: the CSP allows none
    referenced = [part.split('"')[0] for part in r.text.split('src="')[1:] + r.text.split('href="')[1:]]
    assert len(referenced) == 4
    for path in referenced:
        asset = c.get(path)
        assert asset.status_code == 200 and asset.content, path
    assert c.get("/docs/assets/index.html").status_code == 404
    assert c.get("/redoc").status_code == 404  # FastAPI's ReDoc loads its script from a CDN


def test_metrics_need_the_token_once_one_is_set(env):
    settings = env.container.settings
    settings_with_token = settings.model_copy(update={"metrics_token": SecretStr("s3cret")})
    env.container.settings = settings_with_token
    try:
        client = TestClient(create_app(env.container), raise_server_exceptions=False)
        r = client.get("/metrics")
        assert r.status_code == 401 and fields_of(r) == {"Authorization"}
        assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        r = client.get("/metrics", headers={"Authorization": "Bearer s3cret"})
        assert r.status_code == 200 and "cuemem_scrape_ok 1.0" in r.text
        assert "tenant" not in r.text  # aggregates only: no series names a tenant
    finally:
        env.container.settings = settings
