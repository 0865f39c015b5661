"""`cuemem bench latency`: recall latency per stage at 1k / 10k / 100k memories per user, and the
deterministic (cue) stage alone at 1M memories.

How the data is made (see ``workers/bench/synthetic.py``): bilingual template texts; a pool of a
few thousand distinct texts is embedded once with the real E5 model (cached on disk), and each
memory takes its pool entry's vector plus small Gaussian noise (renormalised). Rows go straight
into a fresh Postgres database with binary COPY; vectors go into the embedded Qdrant engine
(``workers/index/edge.py``) in batches. Cue keys are the real pipeline's (checked on a sample).

What is timed: ``shared.retrieval.recall`` itself (its trace's ``timings_ms``), plus, through thin
timing proxies, the repository calls inside it (``by_cues``, the working memory read, the re-read
of vector hits). Each query runs with a precomputed query vector (an embedder stub) and with the
real E5 embedder; single-threaded and with N client threads, each with its own unit of work.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workers.bench.common import machine_info, percentiles, write_json
from workers.bench.latency_data import fill_working_memory, load_pool_vectors, load_user, vacuum_analyze
from workers.bench.latency_measure import (
    PrecomputedEmbedder,
    check_cues,
    deterministic_at_scale,
    row_cost,
    run_queries,
    summarize_records,
    table_stats,
)
from workers.bench.latency_report import evaluate_targets, render_report

if TYPE_CHECKING:
    from workers.bench.synthetic import SyntheticMemory

DEFAULT_REDIS = "redis://127.0.0.1:6379/14"


@dataclass
class LatencyConfig:
    out: Path
    sizes: list[int] = field(default_factory=lambda: [1000, 10000, 100000])
    queries: int = 200
    clients: int = 4
    data_dir: Path | None = None
    deterministic_1m: bool = True
    big_rows: int = 1_000_000
    other_users: int = 5
    other_size: int = 2000
    pool_size: int = 2000
    noise: float = 0.01
    hnsw: bool = True
    embed_threads: int = 1
    pg_admin: str = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    redis_url: str = DEFAULT_REDIS
    cache_dir: Path = field(default_factory=lambda: Path.home() / ".cache" / "cuemem-bench")
    keep: bool = False
    seed: int = 7


# --- the run --------------------------------------------------------------------------------------


def run(cfg: LatencyConfig) -> dict[str, Any]:
    from workers.bench.scratch import scratch_database, scratch_redis

    info = machine_info()
    cfg.out.mkdir(parents=True, exist_ok=True)
    owned_dir = cfg.data_dir is None
    data_dir = (
        Path(tempfile.mkdtemp(prefix="cuemem-bench-latency-")) if cfg.data_dir is None else cfg.data_dir
    )
    data_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        with (
            scratch_database(cfg.pg_admin, "cuemem_bench_latency", keep=cfg.keep) as db_url,
            scratch_redis(cfg.redis_url),
        ):
            results = _run(cfg, db_url, data_dir)
    finally:
        if owned_dir and not cfg.keep:
            shutil.rmtree(data_dir, ignore_errors=True)
    results["machine"] = info
    results["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    results["config"] = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()}
    results["config"].pop("pg_admin", None)
    results["duration_s"] = round(time.perf_counter() - started, 1)
    results["targets"] = evaluate_targets(results, cfg.sizes)
    write_json(cfg.out / "results.json", results)
    (cfg.out / "report.md").write_text(render_report(results), encoding="utf-8")
    return results


def _run(cfg: LatencyConfig, db_url: str, data_dir: Path) -> dict[str, Any]:
    import numpy as np
    import redis

    from workers.bench import synthetic
    from workers.bootstrap import sql_uow_factory
    from workers.embedders.e5 import E5Embedder
    from workers.index.edge import EdgeVectorIndex
    from workers.working_memory import RedisWorkingMemory

    results: dict[str, Any] = {"notes": []}
    notes: list[str] = results["notes"]
    embedder = E5Embedder(threads=cfg.embed_threads)
    now = datetime.now(UTC)

    # 1. The pool: distinct texts, what extraction makes of them, their real E5 vectors.
    pool = synthetic.make_pool(cfg.pool_size, seed=cfg.seed)
    analyses = [synthetic.analyse_entry(e) for e in pool]
    usable = sum(a is not None for a in analyses)
    pool_vectors, pool_info = load_pool_vectors(embedder, pool, cfg.cache_dir)
    results["pool"] = {"size": len(pool), "usable": usable, **pool_info, "noise_sigma": cfg.noise}
    notes.append(
        f"vectors: {len(pool)} distinct template texts embedded with the real E5 model "
        f"({pool_info['source']}); each memory takes its pool text's vector plus Gaussian noise "
        f"(sigma {cfg.noise} per dimension, renormalised), so 100k memories did not need 100k model calls"
    )

    # 2. Load users: one per size, plus a few others so that the user filter matters.
    uow_factory, dispose = sql_uow_factory(db_url)
    index = EdgeVectorIndex(data_dir / "qdrant")
    index.reset(embedder.dim, embedder.model_name)  # a re-used --data-dir starts empty
    users = [(f"user-{n}", n) for n in cfg.sizes]
    users += [(f"other-{i}", cfg.other_size) for i in range(cfg.other_users)]
    samples: dict[str, list[SyntheticMemory]] = {}
    load_stats: dict[str, Any] = {}
    rng = np.random.default_rng(cfg.seed)
    for user_id, count in users:
        t = time.perf_counter()
        samples[user_id] = load_user(
            db_url, index, user_id, count, pool, analyses, pool_vectors, rng, cfg, now, with_vectors=True
        )
        load_stats[user_id] = {"rows": count, "seconds": round(time.perf_counter() - t, 2)}
    t = time.perf_counter()
    vacuum_analyze(db_url)
    load_stats["vacuum_analyze_s"] = round(time.perf_counter() - t, 2)
    results["load"] = load_stats
    results["postgres"] = table_stats(db_url)
    results["cue_check"] = check_cues(samples)
    results["vector_backend"] = {
        "adapter": "workers.index.edge.EdgeVectorIndex (qdrant-edge, embedded, in-process)",
        "points": index.count(),
        "hnsw": "not built for the main runs (every search scans the user's points); see recall_hnsw",
    }

    # 3. Working memory: a recent session per user, so recall reads Redis as it does in production.
    client = redis.Redis.from_url(cfg.redis_url)
    fill_working_memory(client, [u for u, _ in users], now)
    working_memory = RedisWorkingMemory(client)

    # 4. Queries, and their vectors with the real model (timed separately).
    queries = {
        n: synthetic.make_queries(samples[f"user-{n}"], cfg.queries, seed=cfg.seed + n) for n in cfg.sizes
    }
    vectors: dict[str, list[float]] = {}
    embed_times: list[float] = []
    all_texts = [q for qs in queries.values() for _, q in qs]
    from tqdm import tqdm

    embedder.embed_query("warm up")
    for q in tqdm(all_texts, desc="embed queries (E5)", unit="q"):
        t = time.perf_counter()
        vectors[q] = embedder.embed_query(q)
        embed_times.append((time.perf_counter() - t) * 1e3)
    results["query_embedding"] = {"threads": cfg.embed_threads, **percentiles(embed_times)}
    precomputed = PrecomputedEmbedder(vectors, embedder.model_name, embedder.dim)

    def measure(label: str, clients: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        modes: list[tuple[str, Any, int]] = [
            ("single/precomputed", precomputed, 1),
            ("single/e5", embedder, 1),
        ]
        if clients > 1:
            modes += [
                (f"concurrent{clients}/precomputed", precomputed, clients),
                (f"concurrent{clients}/e5", embedder, clients),
            ]
        for n in cfg.sizes:
            per_mode: dict[str, Any] = {}
            for mode, emb, clients in modes:
                records, elapsed = run_queries(
                    uow_factory, index, working_memory, emb, f"user-{n}", queries[n], clients, now,
                    desc=f"{label} {n} {mode}",
                )  # fmt: skip
                summary = summarize_records(records)
                summary["clients"] = clients
                summary["elapsed_s"] = round(elapsed, 3)
                summary["queries_per_s"] = round(len(records) / elapsed, 1) if elapsed else None
                per_mode[mode] = summary
            out[str(n)] = per_mode
        return out

    results["recall"] = measure("recall", cfg.clients)

    if cfg.hnsw:
        # The same call memory.optimize_index makes on beat.
        t = time.perf_counter()
        index.optimize()
        results["hnsw_build_s"] = round(time.perf_counter() - t, 1)
        results["recall_hnsw"] = measure("recall+hnsw", 1)
        notes.append(
            "recall_hnsw: the same queries after building the HNSW graph with the adapter's optimize() "
            "(what memory.optimize_index does on beat)"
        )

    largest = f"user-{max(cfg.sizes)}"
    results["row_cost"] = row_cost(uow_factory, largest, queries[max(cfg.sizes)], samples[largest])

    # 5. The deterministic stage alone at 1M memories.
    if cfg.deterministic_1m and cfg.big_rows > 0:
        results["deterministic_1m"] = deterministic_at_scale(
            cfg, db_url, uow_factory, working_memory, pool, analyses, pool_vectors, rng, now, samples
        )
    index.close()
    client.close()
    dispose()
    return results
