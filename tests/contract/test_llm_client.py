"""OpenAIJsonLLM against a local scripted OpenAI-compatible server (a real HTTP server, no patching):
good and unusable answers per operation, and how build_llm configures it.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import BaseModel, SecretStr

from shared.llm import (
    INSTRUCTIONS,
    LLM,
    SYSTEM_GUARD,
    ConsolidationAnswer,
    ExtractionAnswer,
    ImportanceAnswer,
    JudgeAnswer,
    LLMOperation,
    LLMUsage,
    system_prompt,
)
from shared.settings import Settings
from tests.support.llm_stub import (
    CHAT,
    MODELS,
    SECRET,
    TURN,
    ListSink,
    answer,
    data_blocks,
    json_answer,
    make,
    messages,
    score,
)
from tests.support.openai_stub import StubResponse, StubServer, chat_completion_body
from workers.endpoints.llm import OpenAIJsonLLM, build_llm

# -- good answers, one per operation ------------------------------------------------------------

GOOD: list[tuple[LLMOperation, type[BaseModel], dict[str, str], dict[str, Any]]] = [
    (
        LLMOperation.SCORING,
        ImportanceAnswer,
        {"turn": TURN},
        {"importance": 9, "reasons": ["health fact", "explicit request to remember"]},
    ),
    (
        LLMOperation.EXTRACTION,
        ExtractionAnswer,
        {"turn": TURN, "role": "user"},
        {
            "memories": [
                {
                    "type": "profile",
                    "content": "用户对花生过敏",
                    "importance": 9,
                    "tags": ["health", "allergy"],
                    "entities": ["花生"],
                }
            ]
        },
    ),
    (
        LLMOperation.JUDGING,
        JudgeAnswer,
        {"existing": "User lives in Beijing", "new": "用户搬到了上海"},
        {"relation": "supersede", "reason": "the user moved", "merged_content": None},
    ),
    (
        LLMOperation.CONSOLIDATION,
        ConsolidationAnswer,
        {"m-1": "User likes green tea", "m-2": "用户也喜欢乌龙茶"},
        {"content": "User likes green tea and oolong (乌龙茶)", "member_ids": ["m-1", "m-2"]},
    ),
]


@pytest.mark.parametrize(("operation", "schema", "data", "reply"), GOOD, ids=[g[0].value for g in GOOD])
def test_good_answer_for_each_operation(
    stub: StubServer,
    sink: ListSink,
    operation: LLMOperation,
    schema: type[BaseModel],
    data: dict[str, str],
    reply: dict[str, Any],
) -> None:
    stub.enqueue(json_answer(reply, prompt_tokens=321, completion_tokens=45))
    llm: LLM = make(stub, sink)
    result = llm.ask(operation, INSTRUCTIONS[operation], data, schema)
    assert result == schema.model_validate(reply)

    (request,) = stub.requests
    assert request.path == CHAT
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    body = request.json
    assert body["model"] == MODELS[operation]
    assert body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    assert "max_tokens" not in body
    system, user = messages(request)
    assert system == system_prompt(INSTRUCTIONS[operation], schema)
    assert SYSTEM_GUARD in system
    assert data_blocks(user) == data

    assert sink.usages == [
        LLMUsage(operation, MODELS[operation], 321, 45, True, None, sink.usages[0].latency_ms)
    ]
    assert sink.usages[0].latency_ms > 0


def test_markdown_fenced_json_is_accepted(stub: StubServer, sink: ListSink) -> None:
    stub.enqueue(answer('```json\n{"importance": 6, "reasons": ["preference"]}\n```'))
    stub.enqueue(answer('```\n{"importance": 2}\n```'))
    stub.enqueue(answer('<think>the user greets me</think>\n```JSON {"importance": 1} ```'))
    llm = make(stub, sink)
    assert score(llm) == ImportanceAnswer(importance=6, reasons=["preference"])
    assert score(llm) == ImportanceAnswer(importance=2)
    assert score(llm) == ImportanceAnswer(importance=1)
    assert [u.ok for u in sink.usages] == [True, True, True]


def test_max_output_tokens_is_sent_when_set(stub: StubServer) -> None:
    stub.enqueue(json_answer({"importance": 3}))
    assert score(make(stub, max_output_tokens=256)) == ImportanceAnswer(importance=3)
    assert stub.requests[0].json["max_tokens"] == 256


def test_missing_key_sends_a_placeholder(stub: StubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    stub.enqueue(json_answer({"importance": 3}))
    assert score(make(stub, api_key=None)) is not None
    assert stub.requests[0].headers["authorization"] == "Bearer not-needed"


# -- bad answers: None, one request, usage recorded with ok=False -------------------------------


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ('{"importance": 7, "reasons": [', "content is not valid JSON"),
        ("Sure! The importance is 7.", "content is not valid JSON"),
        ('{"importance": 7} trailing', "content is not valid JSON"),
        ("[7]", "content is JSON list, not an object"),
        ('{"reasons": ["no score"]}', "content does not match ImportanceAnswer: importance: Field required"),
        ('{"importance": 7, "confidence": 0.9}', "confidence: Extra inputs are not permitted"),
        ('{"importance": 42}', "importance: Input should be less than or equal to 10"),
        ('{"importance": "7"}', "importance: Input should be a valid number"),
        ('{"importance": NaN}', "importance: Input should be a finite number"),
    ],
)
def test_unusable_content_gives_none_and_usage(
    stub: StubServer, sink: ListSink, content: str, error: str
) -> None:
    stub.enqueue(answer(content, prompt_tokens=200, completion_tokens=17))
    assert score(make(stub, sink)) is None
    assert len(stub.requests) == 1  # not retried: the same question gets the same answer
    (usage,) = sink.usages
    assert (usage.operation, usage.model, usage.ok) == (LLMOperation.SCORING, "stub-scorer", False)
    assert (usage.prompt_tokens, usage.completion_tokens) == (200, 17)  # tokens are still accounted
    assert usage.error is not None and error in usage.error


def test_merge_without_merged_content_is_rejected(stub: StubServer, sink: ListSink) -> None:
    stub.enqueue(json_answer({"relation": "merge", "reason": "same pet"}))
    result = make(stub, sink).ask(
        LLMOperation.JUDGING, INSTRUCTIONS[LLMOperation.JUDGING], {"existing": "a", "new": "b"}, JudgeAnswer
    )
    assert result is None
    (usage,) = sink.usages
    assert usage.model == "stub-judge" and not usage.ok
    assert usage.error is not None and "merged_content is required when relation is merge" in usage.error


@pytest.mark.parametrize(
    ("response", "error"),
    [
        (
            StubResponse(raw_body=b'{"choices": [{"message": {"content": "{}"'),
            "response body is not valid JSON",
        ),
        (StubResponse(raw_body=b"<html>proxy login</html>", content_type="text/html"), "not valid JSON"),
        (StubResponse(json_body={"choices": []}), "no choices"),
        (StubResponse(json_body={"object": "list", "data": []}), "no choices"),
        (StubResponse(json_body={"choices": [{"index": 0}]}), "no message"),
        (StubResponse(json_body=chat_completion_body("")), "no content"),
        (
            StubResponse(json_body={"choices": [{"message": {"role": "assistant", "content": None}}]}),
            "no content",
        ),
        (
            StubResponse(
                json_body={"choices": [{"message": {"role": "assistant", "content": None, "refusal": "no"}}]}
            ),
            "refused",
        ),
        (
            StubResponse(json_body=chat_completion_body('{"importance": 7, "reas', finish_reason="length")),
            "finish_reason length",
        ),
    ],
)
def test_malformed_bodies_give_none(
    stub: StubServer, sink: ListSink, response: StubResponse, error: str
) -> None:
    stub.enqueue(response)
    assert score(make(stub, sink)) is None
    assert len(stub.requests) == 1
    (usage,) = sink.usages
    assert not usage.ok and usage.error is not None and error in usage.error
    assert (usage.prompt_tokens, usage.completion_tokens) == (0, 0)


# -- construction and build_llm -------------------------------------------------------------------


def test_every_operation_needs_a_model(stub: StubServer) -> None:
    with pytest.raises(ValueError, match="judging, consolidation"):
        make(stub, models={LLMOperation.SCORING: "a", LLMOperation.EXTRACTION: "b"})
    with pytest.raises(ValueError, match="base_url"):
        make(stub, base_url="")
    with pytest.raises(ValueError, match="timeout_s"):
        make(stub, timeout_s=0)


def test_build_llm_is_none_without_a_base_url() -> None:
    assert build_llm(Settings()) is None
    assert build_llm(SimpleNamespace(llm_base_url="")) is None


def test_build_llm_models_fall_back_to_the_default(stub: StubServer, sink: ListSink) -> None:
    settings = SimpleNamespace(
        llm_base_url=stub.base_url,
        llm_api_key=SecretStr(SECRET),
        llm_model="stub-default",
        llm_model_scoring=None,
        llm_model_extraction="stub-extractor",
        llm_model_judging=None,
        llm_model_consolidation=None,
        llm_timeout_s=3.0,
        llm_max_attempts=2,
    )
    llm = build_llm(settings, usage_sink=sink)
    assert isinstance(llm, OpenAIJsonLLM)
    assert llm.models == {
        LLMOperation.SCORING: "stub-default",
        LLMOperation.EXTRACTION: "stub-extractor",
        LLMOperation.JUDGING: "stub-default",
        LLMOperation.CONSOLIDATION: "stub-default",
    }
    assert stub.requests == []  # nothing is contacted until the first question
    stub.set_default(StubResponse(status=500))
    assert score(llm) is None
    assert len(stub.requests) == 2  # llm_max_attempts
    assert stub.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert {u.model for u in sink.usages} == {"stub-default"}


def test_build_llm_defaults() -> None:
    llm = build_llm(SimpleNamespace(llm_base_url="http://127.0.0.1:1/v1"))
    assert llm is not None
    assert set(llm.models.values()) == {"gpt-4o-mini"}
