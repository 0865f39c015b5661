"""Fault: the LLM endpoint refusing, hanging or answering garbage for the whole run: every event
still finishes, by the rules.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from sqlalchemy import text

from producers.publisher import Publisher
from tests.support.faults import check_exactly_once, report
from tests.support.llm_stub import settings_on_stub
from tests.support.openai_stub import RecordedRequest, StubResponse, StubServer, chat_completion_body
from tests.support.services import wait_processed
from tests.support.workload import make_turns
from workers.bootstrap import build_container


def _refusing(_: RecordedRequest) -> StubResponse:
    return StubResponse(
        status=429, json_body={"error": {"message": "rate limited"}}, headers={"Retry-After": "1"}
    )


def _hanging(_: RecordedRequest) -> StubResponse:
    return StubResponse(json_body=chat_completion_body("{}"), delay_s=30.0)


def _garbage(_: RecordedRequest) -> StubResponse:
    return StubResponse(json_body=chat_completion_body("I am not JSON {{{"))


@pytest.mark.parametrize("mode", ["refusing", "hanging", "garbage"])
def test_llm_failing_for_the_whole_run_still_finishes_every_event_by_rules(it_settings, start_workers, mode):
    responders = {"refusing": _refusing, "hanging": _hanging, "garbage": _garbage}
    started = time.monotonic()
    turns = make_turns(users=2, per_user=20)
    with StubServer(default=responders[mode]) as stub:
        # A short cooldown, so the endpoint is tried again and again during the run, not once.
        settings = settings_on_stub(it_settings, stub, timeout_s=1.0, max_attempts=2, cooldown_s=2.0)
        c = build_container(settings)
        with Publisher.from_settings(settings) as pub:
            published = [pub.publish_turn(t) for u in sorted(turns) for t in turns[u]]
        workers = start_workers(settings)
        wait_processed(c, [p.event_id for p in published], workers, timeout=300)
        figures = check_exactly_once(c, settings, published, f"LLM {mode}")
        with c.uow() as uow:
            calls = Counter(
                bool(ok)
                for (ok,) in uow.session.execute(text("SELECT ok FROM llm_calls"))  # type: ignore[attr-defined]
            )
        requests = len(stub.requests)
        c.close()
    assert requests > 0 and calls[False] > 0, f"the LLM was never tried ({requests} requests, {dict(calls)})"
    assert calls[True] == 0, f"a failing endpoint produced {calls[True]} successful calls"
    assert figures["active"] > 0, "no memory was kept by the rules"
    report(
        f"llm_{mode}",
        published,
        started,
        llm_requests=requests,
        llm_calls_failed=calls[False],
        **figures,
    )
