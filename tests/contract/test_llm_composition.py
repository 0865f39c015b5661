"""The LLM as the composition root hands it out (``workers/bootstrap.py``, ``Container.llm``): built
from the settings of a real (scripted) OpenAI-compatible endpoint, it has the failure cooldown of
``workers/endpoints/llm_runtime.py`` and writes its usage through the unit of work. The cooldown's
own rules are pinned on an injected clock in ``tests/unit/test_llm_cooldown.py``; this pins that
production's container uses it: a container whose LLM were the bare client would keep asking a
dead endpoint on every turn, each question paying its whole retry budget."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from shared.events import Role, TurnPublished
from shared.ingest.extraction import extract
from shared.llm import ImportanceAnswer
from shared.settings import Settings
from tests.support.fakes import FakeStore
from tests.support.llm_stub import CHAT, json_answer, score
from tests.support.openai_stub import StubResponse, StubServer, error_body
from workers.bootstrap import Container, build_container

FAILURES_TO_OPEN = 3  # CooldownLLM's default, which the container keeps
AT = datetime(2026, 11, 30, tzinfo=UTC)
TURN = TurnPublished("e1", "t1", "u1", "s1", 1, Role.USER, "I switched to oat milk lattes", AT, {})


@pytest.fixture
def store() -> FakeStore:
    return FakeStore()


@pytest.fixture
def container(stub: StubServer, store: FakeStore) -> Iterator[Container]:
    # One attempt a question (each failed question is one request) and a cooldown no test outlives:
    # nothing here depends on how long a request takes.
    settings = Settings(
        llm_base_url=stub.base_url, llm_max_attempts=1, llm_cooldown_s=24 * 3600.0, redis_url=None
    )
    built = build_container(settings, uow=store.uow)
    yield built
    built.close()


def test_the_containers_llm_stops_asking_a_failing_endpoint(
    stub: StubServer, store: FakeStore, container: Container
) -> None:
    llm = container.llm
    assert llm is not None and llm is container.llm  # built once, from CUEMEM_LLM_BASE_URL
    stub.set_default(StubResponse(status=500, json_body=error_body("down")))
    for _ in range(FAILURES_TO_OPEN):
        assert score(llm) is None
    assert len(stub.requests_to(CHAT)) == FAILURES_TO_OPEN
    # Every attempt's usage went through the container's unit of work.
    assert [usage.ok for usage, _ in store.state.llm_calls] == [False] * FAILURES_TO_OPEN

    # The endpoint is back, but the cooldown holds: the LLM is not asked, the rules answer.
    stub.set_default(json_answer({"importance": 9}))
    assert score(llm) is None
    assert container.extractor()(TURN, 4.0, None) == extract(TURN, 4.0)
    assert len(stub.requests) == FAILURES_TO_OPEN, "the container's LLM asked during its cooldown"


def test_the_containers_llm_answers_while_the_endpoint_does(stub: StubServer, container: Container) -> None:
    llm = container.llm
    assert llm is not None
    stub.set_default(json_answer({"importance": 9}))
    assert score(llm) == ImportanceAnswer(importance=9)
    assert [r.path for r in stub.requests] == [CHAT]
