"""Secrets never leave the environment (issue 8, item 5).

The pipeline and the API run with every credential set to a fake, recognisable value: an LLM key
(the LLM stub answers 401 and, like real providers, echoes the key it was given in its error
message), an embedding key (a working stub embedder, which checks the key arrives and refuses one
turn quoting the key), a reranker key (its stub refuses every request quoting the key), a Qdrant
key, a Postgres password in the database URL, and API keys. Then every worker log, every API log
line (JSON, DEBUG), every recall trace and the text columns where errors and reasons are kept are
searched for each value and for a distinctive piece of it.

Unit-level checks of the same promise, not repeated here: tests/contract/test_llm_safety.py::
test_api_key_and_user_content_never_logged, tests/contract/test_openai_embedder.py::
test_api_key_never_appears_in_logs_errors_or_repr, tests/unit/test_api_inputs.py::
test_issued_keys_are_random_hashed_and_found_by_prefix, and for .env.example's secret names
tests/unit/test_compose.py::test_env_example_holds_placeholders_with_one_comment_each.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import text

from producers.publisher import Publisher
from service.http.logs import JsonFormatter
from service.operations.curation import create_key
from service.operations.recall import recall_for
from shared.settings import Settings
from tests.support.openai_stub import RecordedRequest, StubResponse, StubServer, embeddings_body
from tests.support.services import wait_processed
from workers.bootstrap import build_api_container

ROOT = Path(__file__).resolve().parents[2]
LLM_KEY = "sk-llmFAKEk3y-0a1b2c3d4e5f-LLMSECRET"
EMBEDDING_KEY = "emb-FAKEk3y-9f8e7d6c5b4a-EMBSECRET"
RERANK_KEY = "rr-FAKEk3y-1122334455-RERANKSECRET"
QDRANT_KEY = "qd-FAKEk3y-5566778899-QDRANTSECRET"
PG_PASSWORD = "pgFAKEpw7766554433PGSECRET"
DIM = 16
ECHO = "ECHO-THE-KEY"  # a turn whose embedding the stub refuses with the key in its message


def _pieces(secret: str) -> list[str]:
    """The value and a distinctive middle piece of it, so a masked or cut copy is caught too."""
    middle = secret[len(secret) // 4 : len(secret) // 4 + 12]
    return [secret, middle]


def _vector(text_: str) -> list[float]:
    digest = hashlib.sha256(text_.encode()).digest()
    return [b / 255.0 + 0.01 for b in digest[:DIM]]


def _auth(request: RecordedRequest) -> str:
    return next((v for k, v in request.headers.items() if k.lower() == "authorization"), "")


def _echo_key(request: RecordedRequest) -> StubResponse:
    # As OpenAI does for a wrong key: the error message quotes the key it was sent.
    sent = _auth(request).removeprefix("Bearer ")
    body = {"error": {"message": f"Incorrect API key provided: {sent}.", "code": "invalid_api_key"}}
    return StubResponse(status=401, json_body=body)


def _embeddings(request: RecordedRequest) -> StubResponse:
    if _auth(request) != f"Bearer {EMBEDDING_KEY}":
        return StubResponse(status=401, json_body={"error": {"message": "no key"}})
    inputs = request.json["input"]
    inputs = [inputs] if isinstance(inputs, str) else inputs
    if any(ECHO in str(t) for t in inputs):  # this one turn's embedding is refused, quoting the key
        return _echo_key(request)
    return StubResponse(json_body=embeddings_body([_vector(str(t)) for t in inputs]))


@pytest.fixture
def stubs() -> Iterator[tuple[StubServer, StubServer, StubServer]]:
    with StubServer(_embeddings) as embedder, StubServer(_echo_key) as llm, StubServer(_echo_key) as reranker:
        yield embedder, llm, reranker


def test_no_secret_in_worker_logs_api_logs_traces_or_stored_errors(
    it_settings: Settings, start_workers: Any, stubs: tuple[StubServer, StubServer, StubServer]
) -> None:
    embedder_stub, llm_stub, reranker_stub = stubs
    database_url = str(it_settings.database_url).replace("postgres@", f"postgres:{PG_PASSWORD}@", 1)
    assert PG_PASSWORD in database_url, "the test Postgres URL has no user to give a password to"
    settings = it_settings.model_copy(
        update={
            "database_url": database_url,  # trust auth on the test server: the password is ignored
            "embedder": "openai",
            "embedding_base_url": embedder_stub.base_url,
            "embedding_api_key": SecretStr(EMBEDDING_KEY),
            "embedding_model": "stub-embedder",
            "embedding_dim": DIM,
            "llm_base_url": llm_stub.base_url,
            "llm_api_key": SecretStr(LLM_KEY),
            "llm_max_attempts": 1,
            "rerank_url": reranker_stub.base_url.removesuffix("/v1"),
            "rerank_api_key": SecretStr(RERANK_KEY),
            "rerank_max_attempts": 1,
            "qdrant_api_key": SecretStr(QDRANT_KEY),
            "log_level": "DEBUG",
        }
    )
    container = build_api_container(settings)
    api_key = create_key(container, "acme", "secrets test")["key"]
    other_key = create_key(container, "acme", "second")["key"]

    from service.http.app import create_app

    captured = io.StringIO()
    handler = logging.StreamHandler(captured)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    traces: list[str] = []
    try:
        workers = start_workers(settings)
        turns = [
            "我不吃香菜，点餐时记得提醒",
            "生产环境部署端口是8443",
            "I live in Berlin and work as a nurse",
        ]
        with Publisher.from_settings(settings) as pub:
            published = [pub.publish(user_id="u1", session_id="s1", role="user", content=t) for t in turns]
        client = TestClient(create_app(container), raise_server_exceptions=False)
        bearer = {"Authorization": f"Bearer {api_key}"}
        r = client.post(
            "/v1/events",
            json={"user_id": "u1", "session_id": "s1", "role": "user", "content": "提醒我明天下午三点开会"},
            headers={"X-API-Key": other_key},
        )
        assert r.status_code == 202, r.text
        ids = [p.event_id for p in published] + [r.json()["event_id"]]
        with Publisher.from_settings(settings) as pub:
            echoed = pub.publish(
                user_id="u1", session_id="s2", role="user", content=f"我的偏好 {ECHO} 我不喝咖啡"
            )
        state = wait_processed(container, [*ids, echoed.event_id], workers, timeout=180)
        assert state.counts == {"done": len(ids), "failed": 1}, state
        assert "HTTP 401" in state.reasons[echoed.event_id], state.reasons
        assert any(_auth(q) == f"Bearer {EMBEDDING_KEY}" for q in embedder_stub.requests)
        assert llm_stub.requests, "the LLM was never asked: its key was never at risk"

        for query in ("我不吃什么？", "部署端口是多少", "where do I live"):
            out = client.post("/v1/recall", json={"user_id": "u1", "query": query}, headers=bearer)
            assert out.status_code == 200, out.text
            traces.append(out.text)
            traces.append(
                client.post("/v1/recall/prompt", json={"user_id": "u1", "query": query}, headers=bearer).text
            )
            traces.append(json.dumps(recall_for(container, "u1", query, reinforce=False), ensure_ascii=False))
        # Refused keys: a near miss of a real one, and a revoked-looking garbage key.
        for bad in (api_key + "x", api_key[:-4], "cm_nope_" + "A" * 43):
            refused = client.get("/v1/users", headers={"Authorization": f"Bearer {bad}"})
            assert refused.status_code == 401
            traces.append(refused.text)
        assert any("reranker" in t and "HTTP 401" in t for t in traces), "the reranker was never refused"
        for w in workers:
            w.stop()
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)

    worker_logs = {
        p.name: p.read_text(errors="replace") for p in (settings.resolved_data_dir / "logs").glob("*.log")
    }
    assert worker_logs and all(worker_logs.values()), "no worker log to search"
    with container.uow() as uow:
        session = uow.session  # type: ignore[attr-defined]
        stored = {
            "llm_calls.error": [r[0] for r in session.execute(text("SELECT error FROM llm_calls")) if r[0]],
            "dead_letters": [
                str(tuple(r)) for r in session.execute(text("SELECT reason, args FROM dead_letters"))
            ],
            "event_receipts": [str(r[0]) for r in session.execute(text("SELECT reason FROM event_receipts"))],
            "api_keys": [str(tuple(r)) for r in session.execute(text("SELECT * FROM api_keys"))],
        }
        hashes = [r[0] for r in session.execute(text("SELECT key_hash FROM api_keys ORDER BY created_at"))]
    assert stored["llm_calls.error"], "no failed LLM call was recorded: the echoed key was never at risk"

    api_log = captured.getvalue()
    assert '"msg"' in api_log, "the API logged nothing to search"
    places = {**{f"worker log {k}": v for k, v in worker_logs.items()}, "api log": api_log}
    places["recall traces"] = "\n".join(traces)
    places.update({k: "\n".join(v) for k, v in stored.items()})
    secrets = {
        "LLM key": LLM_KEY, "embedding key": EMBEDDING_KEY, "rerank key": RERANK_KEY,
        "Qdrant key": QDRANT_KEY, "Postgres password": PG_PASSWORD, "API key": api_key,
        "second API key": other_key, "API key secret part": api_key.split("_", 2)[2],
    }  # fmt: skip
    leaks = [
        f"{name} in {place}"
        for name, secret in secrets.items()
        for place, haystack in places.items()
        if any(piece in haystack for piece in _pieces(secret))
    ]
    assert not leaks, leaks
    # API keys: only their SHA-256 is stored.
    assert hashes == [hashlib.sha256(k.encode()).hexdigest() for k in (api_key, other_key)]
    print(
        "SECRETS searched",
        {"places": len(places), "secrets": len(secrets), "bytes": sum(map(len, places.values()))},
    )
    container.close()


# --- .env.example ------------------------------------------------------------------------------

ENV_LINE = re.compile(r"^\s*#?\s*([A-Z][A-Z0-9_]*)=(.*)$")
SECRET_NAME = re.compile(r"(_KEY|_PASSWORD|_SECRET|_TOKEN|_AUTH)$|PASSWORD")
REAL_LOOKING = re.compile(r"(sk-|cm_|ghp_|xox[bp]-|AKIA)[A-Za-z0-9_-]{8,}|[A-Za-z0-9+/_-]{32,}")


def test_env_example_has_no_real_looking_secret() -> None:
    rows = [m.groups() for m in map(ENV_LINE.match, (ROOT / ".env.example").read_text().splitlines()) if m]
    assert rows
    checked = 0
    for name, value in rows:
        value = value.strip()
        # Commented-out examples count too: people uncomment them as they are.
        if SECRET_NAME.search(name):
            checked += 1
            assert value in ("", "change-me") or value.endswith(":change-me"), f"{name}={value!r}"
        # Credentials inside URLs (postgresql://user:PASSWORD@host) are placeholders as well.
        for password in re.findall(r"://[^:/@\s]+:([^@\s]*)@", value):
            checked += 1
            assert password == "change-me", f"{name} holds a password in its URL"
        assert not REAL_LOOKING.search(value), f"{name}={value!r} looks like a real secret"
    assert checked >= 5, checked
