"""/metrics' store reads are cached: a storm of scrapes costs one read per interval (issue 18).
Counting fakes handed to ``ApiMetrics`` and an injected clock; no database."""

from __future__ import annotations

from typing import Any

from prometheus_client import generate_latest

from service.http.metrics import ApiMetrics
from tests.support.clock import ManualClock


class Counting:
    def __init__(self, answer: Any, fail: bool = False) -> None:
        self.calls, self.answer, self.fail = 0, answer, fail

    def __call__(self) -> Any:
        self.calls += 1
        if self.fail:
            raise ConnectionError("the store is down")
        return self.answer


def test_many_scrapes_cost_one_read_per_interval() -> None:
    clock = ManualClock()
    counts = Counting({"memories": {"active": 3}, "events": {"done": 5}, "llm": []})
    depths, runs = Counting({"cuemem.ingest": 2}), Counting({})
    metrics = ApiMetrics(counts, depths, runs, cache_s=15, clock=clock)
    for _ in range(50):
        text = generate_latest(metrics.registry).decode()
    assert 'cuemem_memories{status="active"} 3.0' in text and "cuemem_scrape_ok 1.0" in text
    assert (counts.calls, depths.calls, runs.calls) == (1, 1, 1)
    clock.now += 14.9
    generate_latest(metrics.registry)
    assert counts.calls == 1
    clock.now += 0.1
    counts.answer = {"memories": {"active": 4}}
    text = generate_latest(metrics.registry).decode()
    assert counts.calls == 2 and 'cuemem_memories{status="active"} 4.0' in text


def test_a_store_that_is_down_is_not_asked_again_by_every_scrape() -> None:
    clock = ManualClock()
    counts = Counting({}, fail=True)
    metrics = ApiMetrics(counts, Counting({}), cache_s=15, clock=clock)
    for _ in range(10):
        assert "cuemem_scrape_ok 0.0" in generate_latest(metrics.registry).decode()
    assert counts.calls == 1
    clock.now += 15
    counts.fail, counts.answer = False, {"memories": {"active": 1}}
    assert "cuemem_scrape_ok 1.0" in generate_latest(metrics.registry).decode()
    assert counts.calls == 2
