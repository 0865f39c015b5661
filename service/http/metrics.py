"""Prometheus metrics of the API process, and the store's numbers read when scraped (cached).

The store's numbers are database and broker reads, and ``/metrics`` is served without a key (a
Prometheus scraper has none; ``CUEMEM_METRICS_TOKEN`` asks for one): each read is kept for
``CUEMEM_METRICS_CACHE_S`` seconds, so a storm of scrapes costs one read per interval. Every series
is an aggregate over all tenants, labelled by status, stage, queue, task, operation or route
template: none names a tenant, a user or an id.

Counted here: HTTP requests by route and status, events published through the API, recalls and
their latency per stage (from the recall trace's timings). Read at scrape time, so they hold for
the whole deployment whatever process did the work: memories by status, events by pipeline stage
(what was processed), LLM calls and tokens per operation (from ``llm_calls``), and the depth of
each broker queue, and the run time per task, which every worker records into Redis after each
task (``workers/redis/task_metrics.py``); Flower's own ``/metrics`` has the same per worker.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

T = TypeVar("T")


class Cached(Generic[T]):
    """``read()``'s outcome, its value or its exception, kept for ``ttl_s`` seconds of ``clock``: a
    store that is down is not asked again by every scrape either. Concurrent scrapes wait for the
    one read under way."""

    def __init__(self, read: Callable[[], T], ttl_s: float, clock: Callable[[], float] = time.monotonic):
        self._read = read
        self._ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._at: float | None = None
        self._value: T | None = None
        self._error: Exception | None = None

    def __call__(self) -> T:
        with self._lock:
            now = self._clock()
            if self._at is None or now - self._at >= self._ttl_s:
                try:
                    self._value, self._error = self._read(), None
                except Exception as exc:
                    self._value, self._error = None, exc
                self._at = now
            if self._error is not None:
                raise self._error
            return self._value  # type: ignore[return-value]


class StoreCollector(Collector):
    """Runs the counting queries when Prometheus scrapes (one GROUP BY each); a store that cannot
    be read yields ``cuemem_scrape_ok 0`` instead of failing the scrape."""

    def __init__(
        self,
        counts: Callable[[], dict[str, Any]],
        depths: Callable[[], dict[str, int]],
        task_runs: Callable[[], dict[str, dict[str, Any]]] | None = None,
    ):
        self._counts = counts
        self._depths = depths
        self._task_runs = task_runs

    def collect(self) -> Iterator[Metric]:
        ok = 1.0
        try:
            counts = self._counts()
        except Exception:
            log.warning("metrics: could not read the store", exc_info=True)
            counts, ok = {}, 0.0
        memories = GaugeMetricFamily("cuemem_memories", "Memories by status", labels=["status"])
        for status, n in sorted(counts.get("memories", {}).items()):
            memories.add_metric([status], n)
        yield memories
        events = GaugeMetricFamily(
            "cuemem_events", "Recorded events by pipeline stage (done = fully processed)", labels=["stage"]
        )
        for stage, n in sorted(counts.get("events", {}).items()):
            events.add_metric([stage], n)
        yield events
        calls = CounterMetricFamily("cuemem_llm_calls", "LLM calls by operation", labels=["operation", "ok"])
        tokens = CounterMetricFamily(
            "cuemem_llm_tokens", "LLM tokens by operation", labels=["operation", "kind"]
        )
        for operation, succeeded, n, prompt, completion in counts.get("llm", []):
            calls.add_metric([operation, str(succeeded).lower()], n)
            tokens.add_metric([operation, "prompt"], prompt)
            tokens.add_metric([operation, "completion"], completion)
        yield calls
        yield tokens
        depth = GaugeMetricFamily(
            "cuemem_queue_depth",
            "Messages waiting per broker queue (unacked: delivered, not acked)",
            labels=["queue"],
        )
        try:
            for queue, n in sorted(self._depths().items()):
                depth.add_metric([queue], n)
        except Exception:
            log.warning("metrics: could not read queue depths", exc_info=True)
            ok = 0.0
        yield depth
        runs = HistogramMetricFamily(
            "cuemem_task_duration_seconds", "Run time per Celery task, all workers", labels=["task"]
        )
        states = CounterMetricFamily("cuemem_task_runs", "Task runs by final state", labels=["task", "state"])
        try:
            for task, data in sorted((self._task_runs() if self._task_runs else {}).items()):
                runs.add_metric([task], data["buckets"], data["sum"])
                for state, n in sorted(data["states"].items()):
                    states.add_metric([task, state], n)
        except Exception:
            log.warning("metrics: could not read task run times", exc_info=True)
            ok = 0.0
        yield runs
        yield states
        scrape = GaugeMetricFamily("cuemem_scrape_ok", "1 when the store and broker could be read")
        scrape.add_metric([], ok)
        yield scrape


class ApiMetrics:
    """One registry per app, so that several apps in one process (tests) never clash. ``counts``,
    ``depths`` and ``task_runs`` are read at most once per ``cache_s`` seconds of ``clock``."""

    def __init__(
        self,
        counts: Callable[[], dict[str, Any]],
        depths: Callable[[], dict[str, int]],
        task_runs: Callable[[], dict[str, dict[str, Any]]] | None = None,
        *,
        cache_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "cuemem_http_requests", "HTTP requests", ["method", "route", "status"], registry=self.registry
        )
        self.request_seconds = Histogram(
            "cuemem_http_request_duration_seconds",
            "HTTP request latency",
            ["method", "route"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.published = Counter(
            "cuemem_api_events_published",
            "Events published through the API",
            ["endpoint"],
            registry=self.registry,
        )
        self.invalid = Counter(
            "cuemem_api_events_invalid", "Events refused by validation", ["endpoint"], registry=self.registry
        )
        self.recalls = Counter(
            "cuemem_recalls", "Recalls by answering stage", ["stage"], registry=self.registry
        )
        self.recall_seconds = Histogram(
            "cuemem_recall_stage_seconds",
            "Recall latency per stage (from the recall trace)",
            ["stage"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(
            StoreCollector(
                Cached(counts, cache_s, clock),
                Cached(depths, cache_s, clock),
                Cached(task_runs, cache_s, clock) if task_runs else None,
            )
        )

    def observe_recall(self, result: dict[str, Any]) -> None:
        self.recalls.labels(str(result.get("stage", "none"))).inc()
        timings = (result.get("trace") or {}).get("timings_ms") or {}
        for name, ms in timings.items():
            if isinstance(ms, int | float):
                self.recall_seconds.labels(name.removesuffix("_ms")).observe(float(ms) / 1e3)
