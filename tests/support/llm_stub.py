"""Driving OpenAIJsonLLM against the scripted OpenAI-compatible server (tests/support/openai_stub.py):
a client on the stub, the pipeline's settings on the stub, answers with usage, and reading back what
the client sent."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import SecretStr

from shared.llm import INSTRUCTIONS, LLM, ImportanceAnswer, LLMOperation, LLMUsage
from shared.settings import Settings
from tests.support.endpoint_calls import QUICK_RETRIES
from tests.support.openai_stub import RecordedRequest, StubResponse, StubServer, chat_completion_body
from workers.endpoints.llm import OpenAIJsonLLM

SECRET = "sk-test-very-secret-llm-key"
CHAT = "/v1/chat/completions"
MODELS = {
    LLMOperation.SCORING: "stub-scorer",
    LLMOperation.EXTRACTION: "stub-extractor",
    LLMOperation.JUDGING: "stub-judge",
    LLMOperation.CONSOLIDATION: "stub-consolidator",
}
TURN = "我对花生过敏, remember that please"
BLOCK = re.compile(r'<data name="([^"<>]+)">(.*)</data>')


class ListSink:
    def __init__(self) -> None:
        self.usages: list[LLMUsage] = []

    def record(self, usage: LLMUsage) -> None:
        self.usages.append(usage)


def make(stub: StubServer, sink: ListSink | None = None, **overrides: Any) -> OpenAIJsonLLM:
    args: dict[str, Any] = {
        "base_url": stub.base_url,
        "api_key": SecretStr(SECRET),
        "models": MODELS,
        "max_attempts": 4,
        "usage_sink": sink,
        **QUICK_RETRIES,
    }
    args.update(overrides)
    return OpenAIJsonLLM(**args)


def settings_on_stub(
    settings: Settings,
    stub: StubServer,
    *,
    timeout_s: float = 60.0,
    max_attempts: int = 1,
    cooldown_s: float = 0.0,
) -> Settings:
    """``settings`` with the pipeline's LLM on ``stub``. By default a timeout no loaded machine
    reaches (the stub answers at once), one attempt and no cooldown: each turn takes the path its
    answer sends it down, whichever worker takes it first."""
    return settings.model_copy(
        update={
            "llm_base_url": stub.base_url,
            "llm_timeout_s": timeout_s,
            "llm_max_attempts": max_attempts,
            "llm_cooldown_s": cooldown_s,
        }
    )


def answer(content: str, prompt_tokens: int = 120, completion_tokens: int = 30, **kw: Any) -> StubResponse:
    body = chat_completion_body(content, **kw)
    body["usage"] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    return StubResponse(json_body=body)


def json_answer(value: Any, **kw: Any) -> StubResponse:
    return answer(json.dumps(value, ensure_ascii=False), **kw)


def score(llm: LLM, turn: str = TURN) -> ImportanceAnswer | None:
    return llm.ask(LLMOperation.SCORING, INSTRUCTIONS[LLMOperation.SCORING], {"turn": turn}, ImportanceAnswer)


def data_blocks(user_message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in user_message.split("\n"):
        match = BLOCK.fullmatch(line)
        assert match, f"user message line is not one data block: {line!r}"
        out[match.group(1)] = json.loads(match.group(2))
    return out


def messages(request: RecordedRequest) -> tuple[str, str]:
    body = request.json
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user"]
    return body["messages"][0]["content"], body["messages"][1]["content"]
