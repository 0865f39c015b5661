"""HttpReranker against a local scripted rerank server (no network): both response shapes,
retries on 429 and 5xx, timeouts, unusable answers, and wiring through settings and the container."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from pydantic import SecretStr

from shared.ports import Reranker
from shared.recall.rerank import rerank_order
from shared.settings import Settings
from tests.support.endpoint_calls import AFTER_THE_HANG, HANG_TIMEOUT_S, QUICK_RETRIES
from tests.support.openai_stub import RecordedRequest, StubResponse, StubServer
from workers.endpoints.rerankers import RerankError, build_reranker
from workers.endpoints.rerankers.http import HttpReranker, rerank_endpoint

SECRET = "rk-test-very-secret-key"
DOCS = ["端口是8443", "我不吃香菜", "the port is 8443"]


def url(stub: StubServer) -> str:
    return f"http://127.0.0.1:{stub.port}"


def make(stub: StubServer, **overrides: Any) -> HttpReranker:
    args: dict[str, Any] = {
        "url": url(stub),
        "api_key": SecretStr(SECRET),
        "max_attempts": 3,
        **QUICK_RETRIES,
    }
    args.update(overrides)
    return HttpReranker(**args)


def tei(scores: list[float]) -> StubResponse:
    """TEI's shape: sorted by score, highest first, each with its document index."""
    ranked = sorted(enumerate(scores), key=lambda p: -p[1])
    return StubResponse(json_body=[{"index": i, "score": s} for i, s in ranked])


def cohere(scores: list[float]) -> StubResponse:
    ranked = sorted(enumerate(scores), key=lambda p: -p[1])
    return StubResponse(json_body={"results": [{"index": i, "relevance_score": s} for i, s in ranked]})


def test_tei_shape_without_a_model(stub: StubServer) -> None:
    stub.enqueue(tei([0.9, 0.01, 0.8]))
    reranker: Reranker = make(stub)
    assert reranker.rerank("部署端口", DOCS) == [0.9, 0.01, 0.8]
    (request,) = stub.requests
    assert request.method == "POST" and request.path == "/rerank"
    assert request.json == {"query": "部署端口", "texts": DOCS}
    assert request.headers["authorization"] == f"Bearer {SECRET}"


def test_jina_cohere_shape_with_a_model(stub: StubServer) -> None:
    stub.enqueue(cohere([0.2, 0.7, 0.1]))
    reranker = make(stub, url=url(stub) + "/v1/rerank", model="jina-reranker-v2", api_key=None)
    assert reranker.rerank("q", DOCS) == [0.2, 0.7, 0.1]
    (request,) = stub.requests
    assert request.path == "/v1/rerank"  # a URL naming the route is used as it is
    assert request.json == {"query": "q", "model": "jina-reranker-v2", "documents": DOCS}
    assert "authorization" not in request.headers


def test_rerank_endpoint() -> None:
    assert rerank_endpoint("http://h:8080") == "http://h:8080/rerank"
    assert rerank_endpoint("http://h:8080/") == "http://h:8080/rerank"
    assert rerank_endpoint("https://api.cohere.com/v2/rerank") == "https://api.cohere.com/v2/rerank"


def test_429_then_success(stub: StubServer, caplog: pytest.LogCaptureFixture) -> None:
    stub.enqueue(StubResponse(status=429, json_body={"error": "slow down"}, headers={"Retry-After": "0"}))
    stub.enqueue(tei([0.1, 0.2, 0.3]))
    with caplog.at_level(logging.WARNING):
        assert make(stub).rerank("q", DOCS) == [0.1, 0.2, 0.3]
    assert len(stub.requests) == 2
    assert "attempt 1 of 3 failed (HTTP 429" in caplog.text
    assert SECRET not in caplog.text


def test_500s_exhaust_the_retries_with_a_clear_error(stub: StubServer) -> None:
    stub.set_default(StubResponse(status=500, json_body={"error": "model crashed"}))
    with pytest.raises(RerankError) as info:
        make(stub).rerank("q", DOCS)
    assert info.value.transient
    message = str(info.value)
    assert f"reranker {url(stub)}/rerank failed after 3 attempt(s): HTTP 500" in message
    assert "model crashed" in message
    assert SECRET not in message
    assert len(stub.requests) == 3


def test_other_4xx_fail_at_once(stub: StubServer) -> None:
    stub.set_default(StubResponse(status=401, json_body={"error": "bad key"}))
    with pytest.raises(RerankError, match="refused the request: HTTP 401") as info:
        make(stub).rerank("q", DOCS)
    assert not info.value.transient
    assert len(stub.requests) == 1


def test_timeout_is_retried_then_reported(stub: StubServer) -> None:
    stub.set_default(StubResponse(delay_s=30.0, json_body=[]))  # until the stub stops
    with pytest.raises(RerankError, match=r"failed after 2 attempt\(s\): no answer within 0.2s"):
        make(stub, timeout_s=0.2, max_attempts=2).rerank("q", DOCS)
    assert len(stub.requests) == 2


def test_timeout_then_success(stub: StubServer) -> None:
    stub.enqueue(StubResponse(delay_s=30.0, json_body=[]))  # until the stub stops
    stub.set_default(tei([1.0, 2.0, 3.0]))
    reranker = make(stub, timeout_s=HANG_TIMEOUT_S, max_attempts=1 + AFTER_THE_HANG)
    assert reranker.rerank("q", DOCS) == [1.0, 2.0, 3.0]
    assert len(stub.requests) >= 2


def test_connection_refused_is_transient() -> None:
    with StubServer() as server:
        dead = url(server)
    reranker = HttpReranker(dead, timeout_s=0.5, max_attempts=2, backoff_initial_s=0.001, backoff_max_s=0.01)
    with pytest.raises(RerankError, match="connection failed") as info:
        reranker.rerank("q", DOCS)
    assert info.value.transient


@pytest.mark.parametrize(
    ("response", "mentions"),
    [
        (StubResponse(raw_body=b"<html>oops</html>"), "not valid JSON"),
        (StubResponse(json_body=[{"index": 0, "score": 0.5}]), "got 1 results for 3 documents"),
        (StubResponse(json_body={"results": [{"index": 0, "relevance_score": 1}] * 4}), "got 4 results"),
        (StubResponse(json_body=[{"index": i, "score": 0.5} for i in (0, 0, 1)]), "index 0 appears twice"),
        (StubResponse(json_body=[{"index": i, "score": 0.5} for i in (0, 1, 7)]), "index 7, not 0..2"),
        (StubResponse(json_body=[{"index": i, "score": "hi"} for i in range(3)]), "score 'hi'"),
        (StubResponse(json_body={"data": []}), "expected a list"),
    ],
)
def test_unusable_answers(stub: StubServer, response: StubResponse, mentions: str) -> None:
    stub.enqueue(response)
    with pytest.raises(RerankError, match="answered unusably") as info:
        make(stub).rerank("q", DOCS)
    assert mentions in str(info.value)
    assert not info.value.transient
    assert len(stub.requests) == 1  # an unusable answer is not retried


def test_no_documents_no_request(stub: StubServer) -> None:
    assert make(stub).rerank("q", []) == []
    assert stub.requests == []


def test_recall_order_survives_a_failing_endpoint(stub: StubServer) -> None:
    stub.set_default(StubResponse(status=503))
    items = [("m1", DOCS[0]), ("m2", DOCS[1]), ("m3", DOCS[2])]
    result = rerank_order("q", items, make(stub, max_attempts=2))
    assert result.order == ["m1", "m2", "m3"]
    assert result.note is not None and "HTTP 503" in result.note


def test_reranking_through_the_endpoint(stub: StubServer) -> None:
    def responder(request: RecordedRequest) -> StubResponse:
        texts = request.json["texts"]
        return tei([1.0 if "8443" in t else 0.0 for t in texts])

    stub.set_default(responder)
    items = [("m2", DOCS[1]), ("m1", DOCS[0]), ("m3", DOCS[2])]
    result = rerank_order("port", items, make(stub))
    assert result.order == ["m1", "m3", "m2"]
    assert result.scores == {"m1": 1.0, "m2": 0.0, "m3": 1.0}


# --- settings and the container -------------------------------------------------------------------


def test_off_by_default() -> None:
    from tests.support.fakes import FakeStore
    from workers.bootstrap import build_container

    settings = Settings()
    assert settings.rerank_url is None
    assert build_reranker(settings) is None
    assert build_container(settings, uow=FakeStore().uow).reranker() is None


def test_settings_from_the_environment(stub: StubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.fakes import FakeStore
    from workers.bootstrap import build_container

    monkeypatch.setenv("CUEMEM_RERANK_URL", url(stub))
    monkeypatch.setenv("CUEMEM_RERANK_API_KEY", SECRET)
    monkeypatch.setenv("CUEMEM_RERANK_MODEL", "bge-reranker-v2-m3")
    monkeypatch.setenv("CUEMEM_RERANK_TOP_N", "8")
    # Long enough to be a hang guard: the one queued answer must not be lost to a timeout.
    monkeypatch.setenv("CUEMEM_RERANK_TIMEOUT_S", "90.5")
    settings = Settings()
    assert (settings.rerank_top_n, settings.rerank_timeout_s) == (8, 90.5)
    container = build_container(settings, uow=FakeStore().uow)
    try:
        reranker = container.reranker()
        assert isinstance(reranker, HttpReranker)
        assert reranker is container.reranker()
        assert SECRET not in repr(reranker)
        stub.enqueue(cohere([0.3, 0.2, 0.1]))
        assert reranker.rerank("q", DOCS) == [0.3, 0.2, 0.1]
        assert stub.requests[0].json["model"] == "bge-reranker-v2-m3"
        assert stub.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    finally:
        container.close()
