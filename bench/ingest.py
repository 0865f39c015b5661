"""`cuemem bench ingest`: chat turns through the whole pipeline on real Redis and Postgres.

For each worker count N (pipeline worker processes, prefork concurrency N, plus the index owner):

1. **no-op floor**: a ``bench.noop`` task (``bench/noop_tasks.py``) on the same app,
   broker and worker settings, concurrency N: tasks per second;
2. **throughput**: ``--events`` turns published as fast as possible; events/s from the first
   publish to the moment every event is final (done, duplicate, rejected or failed);
3. **steady load**: turns published at a fixed rate (a fraction of the throughput just measured)
   for ``--steady-seconds``: publish → visible in the working memory (``RedisWorkingMemory.recent``)
   and publish → long-term memory (event ``done``: every stage of the pipeline ran);
4. **raw embedding**: the passages the pipeline embedded in step 2, embedded directly with
   ``E5Embedder`` in N processes of one thread each (the pipeline's setting): passages/s, tokens/s.

Worker RSS is sampled (psutil) all along; per-task run times come from the workers' own logs.
Every phase gets a fresh database, a flushed Redis database and a fresh data dir (Qdrant shard).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import machine_info, write_json, write_results
from bench.ingest_embedding import measure_raw_embedding
from bench.ingest_pipeline import measure_pipeline
from bench.ingest_report import evaluate_targets, ratios, render_report, where_time_goes
from bench.ingest_services import measure_noop, phase_services
from bench.scratch import DEFAULT_PG_ADMIN, INGEST_REDIS


@dataclass
class IngestConfig:
    out: Path
    events: int = 2000
    workers: list[int] = field(default_factory=lambda: [1, 2, 4])
    steady_seconds: float = 30.0
    steady_fraction: float = 0.8
    steady_rate: float | None = None  # turns/s; None: steady_fraction of the measured capacity
    noop_tasks: int = 2000
    users: int = 20
    pg_admin: str = DEFAULT_PG_ADMIN
    redis_url: str = INGEST_REDIS
    keep: bool = False
    seed: int = 11
    timeout_s: float = 900.0


def run(cfg: IngestConfig) -> dict[str, Any]:
    from tqdm import tqdm

    info = machine_info()
    cfg.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results: dict[str, Any] = {
        "machine": info,
        "phases": {},
        "steady": {"rate_per_s": cfg.steady_rate, "fraction_of_capacity": cfg.steady_fraction},
    }
    for i, n in enumerate(tqdm(cfg.workers, desc="worker counts", unit="setting")):
        phase: dict[str, Any] = {}
        with phase_services(cfg, f"noop{n}") as settings:
            phase["noop"] = measure_noop(cfg, settings, n)
        with phase_services(cfg, f"pipe{n}") as settings:
            phase["pipeline"] = measure_pipeline(cfg, settings, n, phase_seed=cfg.seed + 100 * i)
        passages = phase["pipeline"].pop("_passages")
        phase["raw_embedding"] = measure_raw_embedding(passages, n)
        tp = phase["pipeline"]["throughput"]
        raw = phase["raw_embedding"]
        # The same ratios against both ways of embedding the passages raw.
        for key, raw_s in (("ratios", "batched_s"), ("ratios_one_per_call", "one_per_call_s")):
            phase[key] = ratios(
                events=tp["events"],
                pipeline_s=tp["elapsed_s"],
                passages=tp["passages"],
                raw_s=raw[raw_s],
                noop_tasks=phase["noop"]["tasks"],
                noop_s=phase["noop"]["elapsed_s"],
            )
        per_task = phase["ratios"]["overhead_vs_noop"]
        if per_task is not None and tp.get("tasks_per_event"):
            # An event is a chain of tasks; the floor is one no-op per task, not one per event.
            phase["ratios"]["overhead_per_task_vs_noop"] = round(per_task / tp["tasks_per_event"], 2)
        phase["where_time_goes"] = where_time_goes(tp, n)
        results["phases"][str(n)] = phase
        write_json(cfg.out / "results.json", results)  # partial results survive a later failure
    return write_results(cfg, cfg.out, results, started, evaluate_targets, render_report)
