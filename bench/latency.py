"""`cuemem bench latency`: recall latency per stage at 1k / 10k / 100k memories per user, and the
deterministic (cue) stage alone at 1M memories.

How the data is made (see ``bench/synthetic.py``): bilingual template texts; a pool of a
few thousand distinct texts is embedded once with the real E5 model (cached on disk), and each
memory takes its pool entry's vector plus small Gaussian noise (renormalised). Rows go straight
into a fresh Postgres database with binary COPY; vectors go into the embedded Qdrant engine
(``workers/index/edge.py``) in batches. Cue keys are the real pipeline's (checked on a sample).

Each user also has a conversation log (``bench/latency_log.py``): every memory's source
turn plus turns that made no memory, ``turns_per_memory`` turns per memory in all, in Postgres
``events`` and in the turn index (a second embedded shard), so recall runs the conversation-log
searches as it does on the default configuration (CUEMEM_INDEX_TURNS on). ``turns=False`` loads
no log and measures recall over memories only, as the benchmark did before the log existed.

What is timed: ``shared.recall.cascade.recall`` itself (its trace's ``timings_ms``), plus, through thin
timing proxies, the repository and index calls inside it (``by_cues``, the working memory read,
the re-read of vector hits, the dense and keyword searches of the log, the re-read of the log's
turns and of the memories citing them). Each query runs with a precomputed query vector (an
embedder stub) and with the real E5 embedder; single-threaded and with N client threads, each
with its own unit of work. With the log, one more single-threaded pass runs the same queries
without it (``turn_index`` not passed), for the difference on the same data.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import machine_info, percentiles, write_results
from bench.cpu_account import CpuAccount
from bench.latency_data import (
    fill_working_memory,
    load_pool_vectors,
    load_text_vectors,
    load_user,
    vacuum_analyze,
)
from bench.latency_log import CANNED, LogWriter
from bench.latency_measure import (
    PrecomputedEmbedder,
    check_cues,
    deterministic_at_scale,
    row_cost,
    run_queries,
    summarize_records,
)
from bench.latency_postgres import events_stats, table_stats
from bench.latency_report import evaluate_targets, render_report
from bench.latency_tail import unoptimized_tail
from bench.scratch import DEFAULT_PG_ADMIN, LATENCY_REDIS

if TYPE_CHECKING:
    from bench.synthetic import SyntheticMemory


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
    # The conversation log: every memory's source turn plus turns that made no memory (the ingest
    # benchmark's mix has 55 % memorable turns, i.e. 1.8 turns per memory).
    turns: bool = True
    turns_per_memory: float = 2.0
    hnsw: bool = True
    embed_threads: int = 1
    pg_admin: str = DEFAULT_PG_ADMIN
    redis_url: str = LATENCY_REDIS
    cache_dir: Path = field(default_factory=lambda: Path.home() / ".cache" / "cuemem-bench")
    keep: bool = False
    seed: int = 7


# --- the run --------------------------------------------------------------------------------------


def run(cfg: LatencyConfig) -> dict[str, Any]:
    from bench.scratch import scratch_database, scratch_redis

    info = machine_info()
    cfg.out.mkdir(parents=True, exist_ok=True)
    owned_dir = cfg.data_dir is None
    data_dir = (
        Path(tempfile.mkdtemp(prefix="cuemem-bench-latency-")) if cfg.data_dir is None else cfg.data_dir
    )
    data_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    code = code_state()  # at the start: the code imported and the migrations applied
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
    results["load_average_at_start"] = load_at_start
    results["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    results["code"] = code
    return write_results(
        cfg, cfg.out, results, started, lambda r: evaluate_targets(r, cfg.sizes), render_report
    )


def code_state() -> dict[str, Any]:
    """The commit measured, and the uncommitted changes to the code recall runs (the benchmark is
    often run in a checkout others are editing)."""
    import subprocess

    root = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return ""
        return done.stdout if done.returncode == 0 else ""

    # Porcelain lines are "XY path": the status letters, a space, the path.
    changed = [line[3:] for line in git("status", "--porcelain", "--", "shared", "workers").splitlines()]
    return {"commit": git("rev-parse", "--short", "HEAD").strip() or None, "uncommitted": changed}


def _run(cfg: LatencyConfig, db_url: str, data_dir: Path) -> dict[str, Any]:
    import numpy as np
    import redis

    from bench import synthetic
    from workers.bootstrap import sql_uow_factory
    from workers.endpoints.embedders.e5 import E5Embedder
    from workers.index.edge import EdgeVectorIndex
    from workers.redis.working_memory import RedisWorkingMemory

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
    turn_index: EdgeVectorIndex | None = None
    log: LogWriter | None = None
    if cfg.turns:
        # The runtime's second shard (workers.bootstrap: "qdrant-turns" beside "qdrant").
        turn_index = EdgeVectorIndex(data_dir / "qdrant-turns")
        turn_index.reset(embedder.dim, embedder.model_name)
        canned_vectors, canned_info = load_text_vectors(embedder, CANNED, cfg.cache_dir, prefix="turns")
        log = LogWriter(turn_index, canned_vectors, cfg.turns_per_memory, cfg.noise, cfg.seed, now)
        notes.append(
            f"conversation log: each memory's source turn (the memory's text, event id and vector, as the "
            f"pipeline stores a turn that became one memory) plus turns that made no memory, "
            f"{cfg.turns_per_memory} turns per memory in all: user chit-chat and assistant replies "
            f"(60 / 40, the ingest benchmark's mix), their vectors the canned text's real E5 vector "
            f"({len(CANNED)} texts, {canned_info['source']}) plus the same noise; in Postgres `events` "
            "(embedding, turn_indexed) and in the turn index through shared.indexing.points.turn_point and "
            "EdgeVectorIndex, as the pipeline leaves them"
        )
    notes.append(
        "memory points carry the BM25 keyword terms the pipeline's memory_point gives them "
        "(shared.language.sparse); the benchmark's earlier runs loaded them without, so their keyword search "
        "over memories found nothing"
    )
    users = [(f"user-{n}", n) for n in cfg.sizes]
    users += [(f"other-{i}", cfg.other_size) for i in range(cfg.other_users)]
    samples: dict[str, list[SyntheticMemory]] = {}
    load_stats: dict[str, Any] = {}
    rng = np.random.default_rng(cfg.seed)
    for user_id, count in users:
        t = time.perf_counter()
        samples[user_id] = load_user(
            db_url, index, user_id, count, pool, analyses, pool_vectors, rng, cfg, now, with_vectors=True,
            log=log,
        )  # fmt: skip
        load_stats[user_id] = {"rows": count, "seconds": round(time.perf_counter() - t, 2)}
        if log is not None:
            load_stats[user_id]["turns"] = log.turns.get(user_id, 0)
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
    if turn_index is not None and log is not None:
        results["conversation_log"] = {
            "turns_per_memory": cfg.turns_per_memory,
            "turns": dict(log.turns),
            "points": turn_index.count(),
            **events_stats(db_url),
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

    def measure(label: str, clients: int, log_index: Any, e5_only: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {}
        modes: list[tuple[str, Any, int]] = [("single/e5", embedder, 1)]
        if not e5_only:
            modes.insert(0, ("single/precomputed", precomputed, 1))
        if clients > 1:
            modes += [
                (f"concurrent{clients}/precomputed", precomputed, clients),
                (f"concurrent{clients}/e5", embedder, clients),
            ]
        for n in cfg.sizes:
            per_mode: dict[str, Any] = {}
            for mode, emb, clients in modes:
                # Postgres and Redis serve a recall too: CPU per recall counts every process.
                cpu = CpuAccount([], this_process="recall process (clients, embedded index, embedder)")
                records, elapsed = run_queries(
                    uow_factory, index, working_memory, emb, f"user-{n}", queries[n], clients, now,
                    desc=f"{label} {n} {mode}", turn_index=log_index, cpu=cpu,
                )  # fmt: skip
                summary = summarize_records(records)
                summary["cpu_ms_per_recall"] = cpu.per_item_ms(len(records))
                summary["clients"] = clients
                summary["elapsed_s"] = round(elapsed, 3)
                summary["queries_per_s"] = round(len(records) / elapsed, 1) if elapsed else None
                # Other jobs on a 2-core machine move these numbers: say how busy it was.
                summary["load_average"] = [round(x, 2) for x in os.getloadavg()]
                per_mode[mode] = summary
            out[str(n)] = per_mode
        return out

    results["recall"] = measure("recall", cfg.clients, turn_index)
    if turn_index is not None:
        # The same data and queries with CUEMEM_INDEX_TURNS off: what the log adds to a recall.
        results["recall_without_log"] = measure("recall without log", 1, None, e5_only=True)

    def after_hnsw(shard: EdgeVectorIndex, build_key: str, label: str, key: str, note: str) -> None:
        """Build ``shard``'s HNSW graph (timed into ``build_key``), then re-measure recall."""
        t = time.perf_counter()
        shard.optimize()
        results[build_key] = round(time.perf_counter() - t, 1)
        results[key] = measure(label, 1, turn_index)
        notes.append(note)

    if cfg.hnsw:
        # The same call memory.optimize_index makes on beat, first for the memory index alone.
        after_hnsw(
            index, "hnsw_build_s", "recall+hnsw", "recall_hnsw",
            "recall_hnsw: the same queries after building the HNSW graph of the memory index with the "
            "adapter's optimize() (what memory.optimize_index does on beat, which now also builds the "
            "turn index's graph; measured here one index at a time)",
        )  # fmt: skip
        if turn_index is not None:
            after_hnsw(
                turn_index, "hnsw_turns_build_s", "recall+hnsw both", "recall_hnsw_log",
                "recall_hnsw_log: then also the turn index's HNSW graph, built the same way "
                "(memory.optimize_index and cuemem maintain build it too)",
            )  # fmt: skip

    largest = f"user-{max(cfg.sizes)}"
    results["row_cost"] = row_cost(uow_factory, largest, queries[max(cfg.sizes)], samples[largest])
    if cfg.hnsw:
        # New points on top of the optimized shard, before the next build.
        results["unoptimized_tail"] = unoptimized_tail(
            index, largest, [vectors[q] for _, q in queries[max(cfg.sizes)]], pool_vectors, rng, cfg.noise
        )

    # 5. The deterministic stage alone at 1M memories.
    if cfg.deterministic_1m and cfg.big_rows > 0:
        results["deterministic_1m"] = deterministic_at_scale(
            cfg, db_url, uow_factory, working_memory, pool, analyses, pool_vectors, rng, now, samples
        )
    index.close()
    if turn_index is not None:
        turn_index.close()
    client.close()
    dispose()
    return results
