"""OpenAIJsonLLM retrying against the scripted server: 429 (Retry-After honoured), 5xx, hangs and
refused connections are retried and recorded, other 4xx are not.
"""

from __future__ import annotations

import logging
import socket
import time

import pytest

from shared.llm import ImportanceAnswer, LLMUsage
from tests.support.endpoint_calls import AFTER_THE_HANG, HANG_TIMEOUT_S
from tests.support.llm_stub import MODELS, ListSink, json_answer, make, score
from tests.support.openai_stub import StubResponse, StubServer, chat_completion_body, error_body
from workers.endpoints.llm import OpenAIJsonLLM

# -- retries --------------------------------------------------------------------------------------


def test_429_twice_then_success_records_every_attempt(stub: StubServer, sink: ListSink) -> None:
    stub.enqueue(StubResponse(status=429, json_body=error_body("slow down")), times=2)
    stub.enqueue(json_answer({"importance": 8}, prompt_tokens=90, completion_tokens=9))
    assert score(make(stub, sink)) == ImportanceAnswer(importance=8)
    assert len(stub.requests) == 3
    # Decided: one usage per attempt, the rate-limited ones included (ok=False, no tokens).
    assert [(u.ok, u.error, u.prompt_tokens, u.completion_tokens) for u in sink.usages] == [
        (False, "HTTP 429: slow down", 0, 0),
        (False, "HTTP 429: slow down", 0, 0),
        (True, None, 90, 9),
    ]


def test_retry_after_is_honoured(stub: StubServer, sink: ListSink) -> None:
    stub.enqueue(StubResponse(status=429, headers={"Retry-After": "0.3"}))
    stub.enqueue(json_answer({"importance": 4}))
    started = time.monotonic()
    assert score(make(stub, sink, backoff_max_s=1.0)) == ImportanceAnswer(importance=4)
    assert time.monotonic() - started >= 0.3


def test_500_until_attempts_are_exhausted(
    stub: StubServer, sink: ListSink, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="workers.endpoints.llm")
    stub.set_default(StubResponse(status=500, json_body=error_body("boom")))
    assert score(make(stub, sink, max_attempts=3)) is None
    assert len(stub.requests) == 3
    assert [u.error for u in sink.usages] == ["HTTP 500: boom"] * 3
    assert "scoring with model 'stub-scorer' failed after 3 attempt(s): HTTP 500: boom" in caplog.text
    assert "falling back to rules" in caplog.text


def test_503_then_success(stub: StubServer, sink: ListSink) -> None:
    stub.enqueue(StubResponse(status=503, raw_body=b"upstream unavailable", content_type="text/plain"))
    stub.enqueue(json_answer({"importance": 5}))
    assert score(make(stub, sink)) == ImportanceAnswer(importance=5)
    assert len(stub.requests) == 2


def test_hanging_answer_is_retried_then_none(stub: StubServer, sink: ListSink) -> None:
    stub.set_default(StubResponse(delay_s=30.0, json_body=chat_completion_body('{"importance": 9}')))
    assert score(make(stub, sink, timeout_s=0.2, max_attempts=2)) is None
    assert len(stub.requests) == 2
    assert [(u.ok, u.error) for u in sink.usages] == [(False, "no answer within 0.2s")] * 2
    assert all(u.latency_ms >= 150 for u in sink.usages)


def test_hang_then_good_answer(stub: StubServer, sink: ListSink) -> None:
    stub.enqueue(StubResponse(delay_s=30.0, json_body=chat_completion_body('{"importance": 9}')))
    stub.set_default(json_answer({"importance": 2}))
    llm = make(stub, sink, timeout_s=HANG_TIMEOUT_S, max_attempts=1 + AFTER_THE_HANG)
    assert score(llm) == ImportanceAnswer(importance=2)
    assert len(stub.requests) >= 2
    assert sink.usages[0].error == f"no answer within {HANG_TIMEOUT_S:g}s"
    assert sink.usages[-1].ok and len(sink.usages) == len(stub.requests)


def test_connection_refused_is_retried_then_none(sink: ListSink) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = OpenAIJsonLLM(
        f"http://127.0.0.1:{port}/v1",
        None,
        MODELS,
        timeout_s=1.0,
        max_attempts=2,
        usage_sink=sink,
        backoff_initial_s=0.001,
        backoff_max_s=0.01,
    )
    assert score(llm) is None
    assert len(sink.usages) == 2
    assert all(u.error is not None and u.error.startswith("connection failed") for u in sink.usages)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_4xx_is_not_retried(stub: StubServer, sink: ListSink, status: int) -> None:
    stub.set_default(StubResponse(status=status, json_body=error_body("bad request")))
    assert score(make(stub, sink)) is None
    assert len(stub.requests) == 1
    (usage,) = sink.usages
    assert usage.error == f"HTTP {status}: bad request" and not usage.ok


def test_a_failing_usage_sink_does_not_cost_the_answer(stub: StubServer) -> None:
    class BrokenSink:
        def record(self, usage: LLMUsage) -> None:
            raise RuntimeError("database down")

    stub.enqueue(json_answer({"importance": 7}))
    assert score(make(stub, BrokenSink())) == ImportanceAnswer(importance=7)  # type: ignore[arg-type]
