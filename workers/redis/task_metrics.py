"""Task run times per task, kept in Redis so that one ``/metrics`` (the API's) can show them for
every worker process of the deployment.

Each worker records, after every task, the run time into a cumulative histogram (one Redis hash
per task: a counter per bucket, the count and the sum); the API reads the hashes on scrape. One
pipelined round trip per task, next to the several a task already makes. Flower's own
``/metrics`` has the same information per worker when it runs.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from typing import Any

import redis

from infra.redis_layout import PREFIX
from shared.ports import Embedder
from workers.endpoints.embedders.wrapping import Wrapping

log = logging.getLogger(__name__)

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
_KEY = f"{PREFIX}:metrics:task:"


def record_task_run(client: redis.Redis, task: str, seconds: float, state: str) -> None:
    pipe = client.pipeline(transaction=False)
    key = _KEY + task
    for bound in BUCKETS:
        if seconds <= bound:
            pipe.hincrby(key, f"le:{bound}", 1)
    pipe.hincrby(key, "count", 1)
    pipe.hincrby(key, f"state:{state}", 1)
    pipe.hincrbyfloat(key, "sum", seconds)
    pipe.execute()


def read_task_runs(client: redis.Redis) -> dict[str, dict[str, Any]]:
    """Per task: ``buckets`` [(upper bound, cumulative count)...] ending with +Inf, ``sum``, and
    ``states`` (SUCCESS, RETRY, FAILURE...)."""
    out: dict[str, dict[str, Any]] = {}
    for raw_key in client.scan_iter(match=_KEY + "*", count=200):
        key = raw_key.decode() if isinstance(raw_key, bytes) else str(raw_key)
        fields = {
            (k.decode() if isinstance(k, bytes) else str(k)): float(v)
            for k, v in client.hgetall(key).items()  # type: ignore[union-attr]
        }
        count = fields.get("count", 0.0)
        buckets = [(str(b), fields.get(f"le:{b}", 0.0)) for b in BUCKETS] + [("+Inf", count)]
        out[key[len(_KEY) :]] = {
            "buckets": buckets,
            "sum": fields.get("sum", 0.0) if math.isfinite(fields.get("sum", 0.0)) else 0.0,
            "states": {k.split(":", 1)[1]: v for k, v in fields.items() if k.startswith("state:")},
        }
    return out


_EMBEDDING_KEY = f"{PREFIX}:metrics:embedding"
# Tasks that are no part of a turn's way through the pipeline (searches, beat's sweeps).
_NOT_PIPELINE = frozenset({"memory.search", "memory.decay", "memory.consolidate", "memory.optimize_index"})


class MeteredEmbedder(Wrapping):
    """An embedder that adds each call's time and texts to one Redis hash, so that `cuemem ingest`
    can say which share of the workers' time went to the model (one pipelined round trip per
    call: a call embeds a whole batch)."""

    def __init__(self, inner: Embedder, client: redis.Redis) -> None:
        super().__init__(inner)
        self._client = client

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        started = time.perf_counter()
        vectors = self.inner.embed_passages(texts)
        try:
            pipe = self._client.pipeline(transaction=False)
            pipe.hincrbyfloat(_EMBEDDING_KEY, "seconds", time.perf_counter() - started)
            pipe.hincrby(_EMBEDDING_KEY, "calls", 1)
            pipe.hincrby(_EMBEDDING_KEY, "texts", len(texts))
            pipe.execute()
        except redis.RedisError as exc:  # a metric must never fail the work it measures
            log.warning("could not record embedding time: %s", exc)
        return vectors


def read_work_seconds(client: redis.Redis) -> dict[str, float]:
    """Totals so far: seconds in the embedding model (``embedding_s``, with ``texts``) and seconds
    of pipeline tasks run (``tasks_s``). Read before and after a run, they give its share."""
    raw = client.hgetall(_EMBEDDING_KEY)
    fields = {(k.decode() if isinstance(k, bytes) else str(k)): float(v) for k, v in raw.items()}  # type: ignore[union-attr]
    tasks = read_task_runs(client)
    return {
        "embedding_s": fields.get("seconds", 0.0),
        "texts": fields.get("texts", 0.0),
        "tasks_s": sum(t["sum"] for name, t in tasks.items() if name not in _NOT_PIPELINE),
    }
