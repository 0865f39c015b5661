"""OpenAIEmbedder against a local scripted OpenAI-compatible server (no network)."""

from __future__ import annotations

import logging
import socket
from types import SimpleNamespace
from typing import Any

import openai
import pytest
from pydantic import SecretStr

from shared.ports import Embedder
from shared.settings import Settings
from tests.support.endpoint_calls import AFTER_THE_HANG, HANG_TIMEOUT_S, QUICK_RETRIES
from tests.support.openai_stub import RecordedRequest, StubResponse, StubServer, embeddings_body, error_body
from workers.endpoints.call_options import BackoffWait
from workers.endpoints.embedders import EmbeddingError, build_embedder
from workers.endpoints.embedders.openai_compat import OpenAIEmbedder, retry_after_s
from workers.endpoints.embedders.window import WindowCut

SECRET = "sk-test-very-secret-key"
DIM = 4
EMBEDDINGS = "/v1/embeddings"


def make(stub: StubServer, **overrides: Any) -> OpenAIEmbedder:
    args: dict[str, Any] = {
        "base_url": stub.base_url,
        "api_key": SecretStr(SECRET),
        "model": "stub-embed",
        "dim": DIM,
        "max_attempts": 5,
        **QUICK_RETRIES,
    }
    args.update(overrides)
    return OpenAIEmbedder(**args)


def vec(seed: float) -> list[float]:
    return [seed, seed + 0.5, -seed, 0.25]


def ok(n: int) -> StubResponse:
    return StubResponse(json_body=embeddings_body([vec(i) for i in range(n)]))


def echo_responder(request: RecordedRequest) -> StubResponse:
    """Answers every embeddings request with one vector per input, encoding the input's number."""
    inputs = request.json["input"]
    return StubResponse(json_body=embeddings_body([vec(float(text.split()[-1])) for text in inputs]))


# -- good answers ---------------------------------------------------------------------------


def test_good_answer(stub: StubServer) -> None:
    stub.enqueue(ok(2))
    embedder: Embedder = make(stub)
    assert embedder.model_name == "openai:stub-embed"
    assert embedder.dim == DIM
    assert embedder.embed_passages(["a", "b"]) == [vec(0), vec(1)]
    (request,) = stub.requests
    assert request.path == EMBEDDINGS
    assert request.json == {"model": "stub-embed", "input": ["a", "b"], "encoding_format": "float"}
    assert request.headers["authorization"] == f"Bearer {SECRET}"


def test_query_is_one_input(stub: StubServer) -> None:
    stub.enqueue(ok(1))
    assert make(stub).embed_query("where do I live?") == vec(0)
    assert stub.requests[0].json["input"] == ["where do I live?"]


def test_vectors_are_put_in_input_order_by_index(stub: StubServer) -> None:
    body = embeddings_body([vec(0), vec(1), vec(2)])
    body["data"].reverse()
    stub.enqueue(StubResponse(json_body=body))
    assert make(stub).embed_passages(["x", "y", "z"]) == [vec(0), vec(1), vec(2)]


def test_integers_are_accepted_as_floats(stub: StubServer) -> None:
    stub.enqueue(StubResponse(json_body=embeddings_body([[1, 0, 0, 0]])))
    result = make(stub).embed_query("x")
    assert result == [1.0, 0.0, 0.0, 0.0]
    assert all(type(x) is float for x in result)


def test_large_inputs_are_sent_in_batches(stub: StubServer) -> None:
    stub.set_default(echo_responder)
    texts = [f"memory {i}" for i in range(5)]
    assert make(stub, batch_size=2).embed_passages(texts) == [vec(i) for i in range(5)]
    assert [len(r.json["input"]) for r in stub.requests] == [2, 2, 1]


def test_no_request_for_no_texts(stub: StubServer) -> None:
    assert make(stub).embed_passages([]) == []
    assert stub.requests == []


def test_missing_key_sends_a_placeholder(stub: StubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # Not OPENAI_API_KEY from the environment: only CUEMEM_EMBEDDING_API_KEY is used.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    stub.enqueue(ok(1))
    make(stub, api_key=None).embed_query("x")
    assert stub.requests[0].headers["authorization"] == "Bearer not-needed"


# -- retries --------------------------------------------------------------------------------


def test_429_twice_then_success(stub: StubServer) -> None:
    stub.enqueue(StubResponse(status=429, json_body=error_body("slow down")), times=2)
    stub.enqueue(ok(1))
    assert make(stub).embed_query("x") == vec(0)
    assert len(stub.requests) == 3


def test_500_until_attempts_are_exhausted(stub: StubServer) -> None:
    stub.set_default(StubResponse(status=500, json_body=error_body("boom")))
    with pytest.raises(EmbeddingError, match=r"failed after 3 attempt\(s\): HTTP 500: boom") as info:
        make(stub, max_attempts=3).embed_query("x")
    assert info.value.transient
    assert len(stub.requests) == 3


def test_503_then_success(stub: StubServer) -> None:
    stub.enqueue(StubResponse(status=503, raw_body=b"upstream unavailable", content_type="text/plain"))
    stub.enqueue(ok(1))
    assert make(stub).embed_query("x") == vec(0)
    assert len(stub.requests) == 2


def test_hanging_answer_times_out_is_retried_then_fails(stub: StubServer) -> None:
    stub.set_default(StubResponse(delay_s=30.0, json_body=embeddings_body([vec(0)])))
    with pytest.raises(EmbeddingError, match=r"failed after 2 attempt\(s\): no answer within 0.2s"):
        make(stub, timeout_s=0.2, max_attempts=2).embed_query("x")
    assert len(stub.requests) == 2


def test_hang_then_good_answer(stub: StubServer) -> None:
    stub.enqueue(StubResponse(delay_s=30.0, json_body=embeddings_body([vec(9)])))
    stub.set_default(ok(1))
    embedder = make(stub, timeout_s=HANG_TIMEOUT_S, max_attempts=1 + AFTER_THE_HANG)
    assert embedder.embed_query("x") == vec(0)
    assert len(stub.requests) >= 2


def test_connection_refused_is_retried_then_fails() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Nothing listens on the port now.
    embedder = OpenAIEmbedder(
        base_url=f"http://127.0.0.1:{port}/v1",
        api_key=None,
        model="m",
        dim=DIM,
        timeout_s=1.0,
        max_attempts=2,
        backoff_initial_s=0.001,
        backoff_max_s=0.01,
    )
    with pytest.raises(EmbeddingError, match=r"failed after 2 attempt\(s\): connection failed"):
        embedder.embed_query("x")


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_4xx_is_not_retried(stub: StubServer, status: int) -> None:
    stub.set_default(StubResponse(status=status, json_body=error_body("input too long")))
    with pytest.raises(EmbeddingError, match=f"refused the request: HTTP {status}: input too long") as info:
        make(stub).embed_query("x")
    assert not info.value.transient
    assert len(stub.requests) == 1


def test_retry_after_is_honoured_but_capped(stub: StubServer) -> None:
    def rate_limited(retry_after: str) -> openai.RateLimitError:
        stub.enqueue(StubResponse(status=429, headers={"Retry-After": retry_after}))
        client = openai.OpenAI(base_url=stub.base_url, api_key="x", max_retries=0)
        with pytest.raises(openai.RateLimitError) as info:
            client.embeddings.create(model="m", input=["x"], encoding_format="float")
        return info.value

    wait = BackoffWait(initial_s=0.001, max_s=5.0, retry_after=retry_after_s)
    short = SimpleNamespace(attempt_number=1, outcome=SimpleNamespace(exception=lambda: rate_limited("2")))
    assert wait(short) == pytest.approx(2.0)  # type: ignore[arg-type]
    long = SimpleNamespace(attempt_number=1, outcome=SimpleNamespace(exception=lambda: rate_limited("3600")))
    assert wait(long) == pytest.approx(5.0)  # type: ignore[arg-type]


# -- invalid answers: never retried, never reach the index -----------------------------------


def test_invalid_json_body(stub: StubServer) -> None:
    stub.enqueue(StubResponse(raw_body=b'{"data": [ {"embedding": [0.1,'))
    with pytest.raises(EmbeddingError, match="not valid JSON"):
        make(stub).embed_query("x")
    assert len(stub.requests) == 1


def test_html_instead_of_json(stub: StubServer) -> None:
    stub.enqueue(StubResponse(raw_body=b"<html>proxy login</html>", content_type="text/html"))
    with pytest.raises(EmbeddingError, match="not valid JSON"):
        make(stub).embed_query("x")


def test_wrong_number_of_vectors(stub: StubServer) -> None:
    stub.enqueue(ok(1))
    with pytest.raises(EmbeddingError, match="got 1 vectors for 2 inputs") as info:
        make(stub).embed_passages(["a", "b"])
    assert not info.value.transient
    assert len(stub.requests) == 1


def test_wrong_dimension(stub: StubServer) -> None:
    stub.enqueue(StubResponse(json_body=embeddings_body([[0.1, 0.2, 0.3]])))
    with pytest.raises(EmbeddingError, match="vector 0 has 3 dimensions, expected 4"):
        make(stub).embed_query("x")
    assert len(stub.requests) == 1


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"data": [{"index": 0, "embedding": [0.1, NaN, 0.3, 0.4]}]}', "not a finite number"),
        (b'{"data": [{"index": 0, "embedding": [0.1, Infinity, 0.3, 0.4]}]}', "not a finite number"),
        (b'{"data": [{"index": 0, "embedding": [0.1, 1e999, 0.3, 0.4]}]}', "not a finite number"),
        (b'{"data": [{"index": 0, "embedding": [0.1, "0.2", 0.3, 0.4]}]}', "not a number"),
        (b'{"data": [{"index": 0, "embedding": [0.1, true, 0.3, 0.4]}]}', "not a number"),
        (b'{"data": [{"index": 0, "embedding": "AAAAAAAAAAAAAAAAAAAAAA=="}]}', "not a list of numbers"),
        (b'{"data": [{"index": 5, "embedding": [0.1, 0.2, 0.3, 0.4]}]}', "indices"),
        (b'{"data": "nope"}', "no 'data' list"),
        (b"[1, 2]", "no 'data' list"),
        (b'{"error": {"message": "hmm"}}', "no 'data' list"),
    ],
)
def test_malformed_vectors(stub: StubServer, raw: bytes, message: str) -> None:
    stub.enqueue(StubResponse(raw_body=raw))
    with pytest.raises(EmbeddingError, match=message):
        make(stub).embed_query("x")
    assert len(stub.requests) == 1


# -- secrets ---------------------------------------------------------------------------------


def test_api_key_never_appears_in_logs_errors_or_repr(
    stub: StubServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    embedder = make(stub, max_attempts=2)
    stub.set_default(StubResponse(status=500, json_body=error_body("boom")))
    with pytest.raises(EmbeddingError) as info:
        embedder.embed_query("x")
    assert "retrying" in caplog.text  # the retry was logged...
    assert SECRET not in caplog.text  # ...without the key
    assert SECRET not in str(info.value)
    assert SECRET not in repr(embedder)


def test_credentials_in_the_url_are_not_shown(stub: StubServer) -> None:
    embedder = make(stub, base_url=f"http://user:pw-secret@127.0.0.1:{stub.port}/v1?token=abc")
    assert "pw-secret" not in repr(embedder) and "abc" not in repr(embedder)


# -- build_embedder ----------------------------------------------------------------------------


def test_build_embedder_openai(stub: StubServer) -> None:
    settings = Settings(
        embedder="openai",
        embedding_model="bge-m3",
        embedding_base_url=stub.base_url,
        embedding_api_key=SecretStr(SECRET),
        embedding_dim=DIM,
        embedding_timeout_s=60.0,  # a hang guard: the one answer is queued, a timeout would lose it
        query_embedding_cache=0,  # the adapter itself (the cache: tests/unit/test_query_cache.py)
    )
    cut = build_embedder(settings)
    assert isinstance(cut, WindowCut)  # the model's window (tests/contract/test_embedding_window.py)
    embedder = cut.inner
    assert isinstance(embedder, OpenAIEmbedder)
    assert embedder.model_name == "openai:bge-m3"
    assert embedder.dim == DIM
    assert stub.requests == []  # nothing is contacted until first use
    stub.enqueue(ok(1))
    assert embedder.embed_query("x") == vec(0)
    assert stub.requests[0].headers["authorization"] == f"Bearer {SECRET}"


@pytest.mark.parametrize(
    ("model", "base_url", "missing"),
    [
        (None, "http://127.0.0.1:1/v1", ["CUEMEM_EMBEDDING_MODEL"]),
        ("m", None, ["CUEMEM_EMBEDDING_BASE_URL"]),
        (None, None, ["CUEMEM_EMBEDDING_MODEL", "CUEMEM_EMBEDDING_BASE_URL"]),
        ("", "", ["CUEMEM_EMBEDDING_MODEL", "CUEMEM_EMBEDDING_BASE_URL"]),
    ],
)
def test_build_embedder_openai_names_missing_settings(
    model: str | None, base_url: str | None, missing: list[str]
) -> None:
    settings = Settings(embedder="openai", embedding_model=model, embedding_base_url=base_url)
    with pytest.raises(ValueError) as info:
        build_embedder(settings)
    for var in missing:
        assert var in str(info.value)
    for var in {"CUEMEM_EMBEDDING_MODEL", "CUEMEM_EMBEDDING_BASE_URL"} - set(missing):
        assert var not in str(info.value)
