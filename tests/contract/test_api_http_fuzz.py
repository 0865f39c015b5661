"""Property-based run of what the OpenAPI spec does not describe: bodies that are not its schema
(hostile JSON, raw bytes, lone surrogates, NULs, deep nesting), wrong or missing content types and
odd headers, against every route that takes a body. The property: never a 5xx, and every 4xx in
the one error shape naming at least one field (a 409 or a 429 names none: it is about the memory's
state, or the tenant's budget).

Reproducible in CI: a fixed number of examples, derandomized (Hypothesis derives its examples from
the test itself, not from a random seed). ``CUEMEM_API_FUZZ_EXAMPLES`` raises the count for a
longer search.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.api import api_settings, running_api, seed_memory
from tests.support.hostile_input import GOOD, HOSTILE_TEXT, INJECTIONS, METADATA, WRONG_TYPE

MAX_EXAMPLES = int(os.environ.get("CUEMEM_API_FUZZ_EXAMPLES", "150"))

BODY_ROUTES = [
    ("POST", "/v1/events"),
    ("POST", "/v1/events/batch"),
    ("POST", "/v1/recall"),
    ("POST", "/v1/recall/prompt"),
    ("PATCH", "/v1/users/u1/memories/{memory}"),
    ("POST", "/v1/users/u1/memories/{memory}/invalidate"),
    ("POST", "/v1/import"),
]
CONTENT_TYPES = [
    None,
    "application/json",
    "application/json; charset=utf-8",
    "application/json; charset=latin-1",
    "application/problem+json",
    "text/plain",
    "text/json",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/x-ndjson",
    "application/",
    ";;;",
    "application/json\u00e9",
]
ODD_HEADERS = st.dictionaries(
    st.sampled_from(
        ["X-Request-ID", "X-API-Key", "Accept", "Content-Encoding", "Transfer-Encoding", "Expect"]
    ),
    st.one_of(
        st.sampled_from(["", " ", "gzip", "chunked", "100-continue", "*/*", "x" * 300, "../../etc"]),
        st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40),
    ),
    max_size=3,
)
JSON_VALUE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), HOSTILE_TEXT),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=15,
)
TURN_LIKE = st.fixed_dictionaries(
    {},
    optional={
        field: st.one_of(st.just(GOOD.get(field, "x")), HOSTILE_TEXT, WRONG_TYPE)
        for field in ("user_id", "session_id", "role", "content", "event_id", "at", "seq", "tenant_id")
    }
    | {"metadata": METADATA, "\ud800": st.just(1), "query": HOSTILE_TEXT, "k": WRONG_TYPE},
)


def _encode(value: Any) -> bytes:
    """JSON as a client could send it: lone surrogates escaped (``ensure_ascii``), so they reach
    the server as ``\\ud800`` and its parser, as in the probe of issue 18."""
    try:
        return json.dumps(value, ensure_ascii=True, allow_nan=True, default=repr).encode()
    except RecursionError:
        # Metadata nested thousands deep (hostile_input.nested): the encoder recurses once per
        # level, so whether it fits depended on the stack depth Hypothesis happened to call from.
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(limit + 10_000)
        try:
            return json.dumps(value, ensure_ascii=True, allow_nan=True, default=repr).encode()
        finally:
            sys.setrecursionlimit(limit)


BODIES = st.one_of(
    TURN_LIKE.map(_encode),
    st.lists(TURN_LIKE, max_size=4).map(lambda events: _encode({"events": events})),
    JSON_VALUE.map(_encode),
    st.binary(max_size=200),
    st.sampled_from(
        [
            b"",
            b"{",
            b"null",
            b'{"events": "x"}',
            b"[" * 5000 + b"]" * 5000,
            b'{"a": 1e999999}',
            b'{"user_id": "\xff\xfe"}',
            b"\xef\xbb\xbf{}",
            b'{"user_id": "u1", "user_id": "u2"}',
        ]
        + [json.dumps({"query": s, "user_id": s}).encode() for s in INJECTIONS]
    ),
)


@pytest.fixture
def api_env(it_settings: Any) -> Any:
    # Without the rate limits: the fuzz is about bodies and headers, and the import's budget (5 per
    # 100 s) would turn most of its examples into 429s that never reach the parser. The budgets
    # have their own tests (tests/integration/test_rate_limits.py).
    settings = api_settings(it_settings).model_copy(update={"rate_limits": False})
    with running_api(settings) as env:
        env.memory = seed_memory(env.container, "tenant-a", "u1", "我不吃香菜").id  # type: ignore[attr-defined]
        yield env


def test_no_body_content_type_or_header_gets_a_5xx_or_an_error_without_a_field(api_env: Any) -> None:
    client, key = api_env.client, api_env.keys["tenant-a"]
    failures: list[str] = []

    @given(
        route=st.sampled_from(BODY_ROUTES),
        body=BODIES,
        content_type=st.sampled_from(CONTENT_TYPES),
        auth=st.sampled_from(["key", "none", "wrong", "x-api-key"]),
        headers=ODD_HEADERS,
    )
    @settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(
        route: tuple[str, str], body: bytes, content_type: str | None, auth: str, headers: dict[str, str]
    ) -> None:
        method, path = route[0], route[1].format(memory=api_env.memory)
        sent = dict(headers)
        if content_type is not None:
            sent["Content-Type"] = content_type
        if auth == "key":
            sent["Authorization"] = f"Bearer {key}"
        elif auth == "x-api-key":
            sent["X-API-Key"] = key
        elif auth == "wrong":
            sent["Authorization"] = "Bearer cm_00000000_" + "x" * 43
        try:
            response = client.request(method, path, content=body, headers=sent)
        except UnicodeEncodeError:
            return  # a header httpx cannot send; no server sees it
        label = f"{method} {path} {content_type!r} {auth} {headers!r} {body[:120]!r}"
        if response.status_code >= 500:
            failures.append(f"{label} -> {response.status_code} {response.text[:300]}")
            return
        if response.status_code >= 400:
            error = response.json().get("error")
            if not (
                isinstance(error, dict)
                and isinstance(error.get("code"), str)
                and isinstance(error.get("message"), str)
                and all(
                    isinstance(f, dict) and set(f) == {"field", "problem"} for f in error.get("fields", [0])
                )
                and (error["fields"] or response.status_code in (409, 429))
            ):
                failures.append(f"{label} -> {response.status_code} {response.text[:300]}")

    run()
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:20])
