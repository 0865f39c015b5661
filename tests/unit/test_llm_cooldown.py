"""The LLM cooldown (workers/endpoints/llm_runtime.py, ``CooldownLLM``), on an injected clock: after
failures in a row the endpoint is not asked until the cooldown has passed, and the write path
keeps the rules' answer meanwhile; then it is asked again."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TypeVar

from pydantic import BaseModel

from shared.events import Role, TurnPublished
from shared.ingest.extraction import extract
from shared.ingest.llm_paths import extract_with_llm
from shared.llm import ImportanceAnswer, LLMOperation
from tests.support.clock import ManualClock
from workers.endpoints.llm_runtime import CooldownLLM

T = TypeVar("T", bound=BaseModel)

COOLDOWN_S = 60.0
TURN = TurnPublished(
    "e1", "t1", "u1", "s1", 1, Role.USER, "我现在改喝拿铁了", datetime(2026, 11, 30, tzinfo=UTC), {}
)


class ScriptedLLM:
    """Answers the questions whose schema ``answer`` is (None, or another schema: the endpoint
    failing) and counts the calls."""

    def __init__(self) -> None:
        self.answer: BaseModel | None = None
        self.calls = 0

    def ask(
        self, operation: LLMOperation, instructions: str, data: Mapping[str, str], schema: type[T]
    ) -> T | None:
        self.calls += 1
        return self.answer if isinstance(self.answer, schema) else None


def _ask(llm: CooldownLLM) -> ImportanceAnswer | None:
    return llm.ask(LLMOperation.SCORING, "rate", {"turn": "x"}, ImportanceAnswer)


def _failed(times: int) -> tuple[ScriptedLLM, ManualClock, CooldownLLM]:
    inner, clock = ScriptedLLM(), ManualClock()
    llm = CooldownLLM(inner, COOLDOWN_S, failures_to_open=3, clock=clock)
    for _ in range(times):
        assert _ask(llm) is None
    return inner, clock, llm


def test_within_the_cooldown_the_llm_is_not_asked_and_the_rules_answer() -> None:
    inner, clock, llm = _failed(3)
    assert inner.calls == 3
    inner.answer = ImportanceAnswer(importance=10.0)  # the endpoint is back, but the cooldown holds
    clock.now += COOLDOWN_S - 0.001
    assert _ask(llm) is None
    # The write path takes the rules' result, exactly as with no LLM at all.
    assert extract_with_llm(TURN, 4.0, llm) == extract(TURN, 4.0)
    assert inner.calls == 3, "the LLM was asked during its cooldown"


def test_after_the_cooldown_the_llm_is_asked_again() -> None:
    inner, clock, llm = _failed(3)
    inner.answer = ImportanceAnswer(importance=10.0)
    clock.now += COOLDOWN_S
    assert _ask(llm) == ImportanceAnswer(importance=10.0)
    assert inner.calls == 4
    # Its answer reaches the write path again: the importance is the rules' and the model's mix.
    assert extract_with_llm(TURN, 4.0, llm) != extract(TURN, 4.0)
    assert inner.calls > 4


def test_failures_under_the_threshold_or_broken_by_an_answer_do_not_open_it() -> None:
    inner, clock, llm = _failed(2)
    inner.answer = ImportanceAnswer(importance=5.0)
    assert _ask(llm) is not None  # resets the count of failures in a row
    inner.answer = None
    for _ in range(2):
        assert _ask(llm) is None
    inner.answer = ImportanceAnswer(importance=5.0)
    assert _ask(llm) is not None, "two failures after an answer opened the cooldown"
    assert inner.calls == 6


def test_a_cooldown_that_ended_needs_as_many_failures_again_to_reopen() -> None:
    inner, clock, llm = _failed(3)
    clock.now += COOLDOWN_S
    assert _ask(llm) is None and _ask(llm) is None
    assert inner.calls == 5
    assert _ask(llm) is None  # the third failure in a row opens it again, from now
    assert inner.calls == 6
    clock.now += COOLDOWN_S / 2
    assert _ask(llm) is None
    assert inner.calls == 6
