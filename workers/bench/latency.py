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

import hashlib
import json
import logging
import os
import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from workers.bench.common import machine_info, machine_markdown, percentiles, write_json

if TYPE_CHECKING:
    import numpy as np

    from shared.unit_of_work import UnitOfWork
    from workers.bench.synthetic import PoolAnalysis, PoolEntry, SyntheticMemory

log = logging.getLogger(__name__)

TENANT = "default"
DEFAULT_REDIS = "redis://127.0.0.1:6379/14"
STAGE_KEYS = (
    "cues_ms",
    "deterministic_ms",
    "cue_counts_ms",
    "by_cues_ms",
    "in_window_ms",
    "working_memory_ms",
    "event_stages_ms",
    "embed_ms",
    "vector_ms",
    "keyword_ms",
    "fusion_ms",
    "get_many_ms",
    "total_ms",
    "wall_ms",
)
STAGE_NOTES = {
    "cues_ms": "query cue keys (entities, lexicon tags, jieba keywords)",
    "deterministic_ms": "stage 1: by_cues + working memory (read + cue scoring of its turns)",
    "cue_counts_ms": "  of which: how many of the user's memories hold each query cue (cue_counts)",
    "by_cues_ms": "  of which: the GIN cue query (SqlMemoryRepository.by_cues)",
    "in_window_ms": "  of which: time-window and recent-memory reads (in_window)",
    "working_memory_ms": "  of which: RedisWorkingMemory.recent",
    "event_stages_ms": "  of which: stages of the working turns (events table)",
    "embed_ms": "query embedding inside recall (0 with a precomputed vector)",
    "vector_ms": "user-filtered vector search (qdrant-edge)",
    "keyword_ms": "keyword (sparse) search, when recall has that path",
    "fusion_ms": "the rest after the searches: re-read hits in Postgres, RRF, diversity, explanations",
    "get_many_ms": "  of which: re-read of the hits (SqlMemoryRepository.get_many)",
    "total_ms": "recall() as a whole (its own trace)",
    "wall_ms": "around recall(), including opening the unit of work",
}
TARGET_RECALL_P95_MS = 25.0
TARGET_DETERMINISTIC_P95_MS = 2.0


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


# --- pure helpers (unit-tested) ------------------------------------------------------------------------


def stage_samples(records: Iterable[dict[str, Any]]) -> dict[str, list[float]]:
    """Per stage key, the samples of the records that have it (a stage that did not run is absent)."""
    out: dict[str, list[float]] = {k: [] for k in STAGE_KEYS}
    for r in records:
        for k in STAGE_KEYS:
            v = r["timings"].get(k)
            if v is not None:
                out[k].append(float(v))
    return {k: v for k, v in out.items() if v}


def summarize_records(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Percentiles per stage, overall and per query kind, plus which stage answered."""
    from collections import Counter

    kinds = sorted({r["kind"] for r in records})
    summary: dict[str, Any] = {
        "n": len(records),
        "answered_by": dict(Counter(r["stage"] for r in records)),
        "all": {k: percentiles(v) for k, v in stage_samples(records).items()},
    }
    for kind in kinds:
        subset = [r for r in records if r["kind"] == kind]
        summary[kind] = {k: percentiles(v) for k, v in stage_samples(subset).items()}
    vector_path = [r for r in records if "vector_ms" in r["timings"]]
    summary["vector_path"] = {k: percentiles(v) for k, v in stage_samples(vector_path).items()}
    return summary


def fused_timings(
    trace_timings: dict[str, float], proxied: dict[str, float], wall_ms: float
) -> dict[str, float]:
    """recall's own timings plus the proxied repository timings, and ``fusion_ms``: what ``total_ms``
    spends outside the stages recall times itself (re-reading hits, RRF, diversity, explanations).
    Only computed when the vector stage ran; with the deterministic answer there is no fusion."""
    t = {k: float(v) for k, v in trace_timings.items()}
    stages = sum(v for k, v in t.items() if k != "total_ms")
    t.update(proxied)
    if "vector_ms" in t or "embed_ms" in t:
        t["fusion_ms"] = max(0.0, t["total_ms"] - stages)
    t["wall_ms"] = wall_ms
    return t


def verdict(value: float | None, limit: float) -> str:
    if value is None:
        return "not measured"
    return "met" if value <= limit else "not met"


def noisy_unit(base: np.ndarray, rng: np.random.Generator, sigma: float) -> np.ndarray:
    """``base`` plus Gaussian noise of ``sigma`` per dimension, renormalised to unit length."""
    import numpy as np

    v = base + rng.normal(0.0, sigma, size=base.shape).astype(np.float32)
    return (v / np.linalg.norm(v)).astype(np.float32)


# --- timing proxies -------------------------------------------------------------------------------


class _Timed:
    """Forwards every attribute; times the calls of the methods named in ``names`` into ``sink``."""

    def __init__(self, target: Any, sink: dict[str, float], names: dict[str, str]):
        self._target = target
        self._sink = sink
        self._names = names

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        key = self._names.get(name)
        if key is None or not callable(attr):
            return attr

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                self._sink[key] = self._sink.get(key, 0.0) + (time.perf_counter() - started) * 1e3

        return timed


class _TimedUow:
    """The unit of work with its memory and event repositories timed; anything else passes through."""

    def __init__(self, uow: Any, sink: dict[str, float]):
        self._uow = uow
        self.memories = _Timed(
            uow.memories,
            sink,
            {
                "by_cues": "by_cues_ms",
                "get_many": "get_many_ms",
                "cue_counts": "cue_counts_ms",
                "in_window": "in_window_ms",
            },
        )
        self.events = _Timed(uow.events, sink, {"stages": "event_stages_ms", "recent": "event_recent_ms"})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._uow, name)


class _PrecomputedEmbedder:
    """The query vector comes from a table filled beforehand (recall without embedding time)."""

    def __init__(self, vectors: dict[str, list[float]], model_name: str, dim: int):
        self._vectors = vectors
        self.model_name = model_name
        self.dim = dim

    def embed_query(self, text: str) -> list[float]:
        return self._vectors[text]

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        raise NotImplementedError("the latency benchmark embeds no passages during recall")


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
    pool_vectors, pool_info = _pool_vectors(embedder, pool, cfg.cache_dir)
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
        samples[user_id] = _load_user(
            db_url, index, user_id, count, pool, analyses, pool_vectors, rng, cfg, now, with_vectors=True
        )
        load_stats[user_id] = {"rows": count, "seconds": round(time.perf_counter() - t, 2)}
    t = time.perf_counter()
    _vacuum_analyze(db_url)
    load_stats["vacuum_analyze_s"] = round(time.perf_counter() - t, 2)
    results["load"] = load_stats
    results["postgres"] = _table_stats(db_url)
    results["cue_check"] = _check_cues(samples)
    results["vector_backend"] = {
        "adapter": "workers.index.edge.EdgeVectorIndex (qdrant-edge, embedded, in-process)",
        "points": index.count(),
        "hnsw": "not built (the adapter exposes no optimize(); every search scans the user's points)",
    }

    # 3. Working memory: a recent session per user, so recall reads Redis as it does in production.
    client = redis.Redis.from_url(cfg.redis_url)
    _fill_working_memory(client, [u for u, _ in users], now)
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
    precomputed = _PrecomputedEmbedder(vectors, embedder.model_name, embedder.dim)

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
                records, elapsed = _run_queries(
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
        # The adapter has no optimize(): reach its shard to show what an HNSW graph would change.
        t = time.perf_counter()
        shard = index._shard  # noqa: SLF001 - deliberate, see the report
        if shard is not None:
            shard.optimize()
            shard.flush()
        results["hnsw_build_s"] = round(time.perf_counter() - t, 1)
        results["recall_hnsw"] = measure("recall+hnsw", 1)
        notes.append(
            "recall_hnsw: the same queries after building the HNSW graph through the adapter's private "
            "shard handle (EdgeShard.optimize()); the product never builds it today"
        )

    largest = f"user-{max(cfg.sizes)}"
    results["row_cost"] = _row_cost(uow_factory, largest, queries[max(cfg.sizes)], samples[largest])

    # 5. The deterministic stage alone at 1M memories.
    if cfg.deterministic_1m and cfg.big_rows > 0:
        results["deterministic_1m"] = _deterministic_at_scale(
            cfg, db_url, uow_factory, working_memory, pool, analyses, pool_vectors, rng, now, samples
        )
    index.close()
    client.close()
    dispose()
    return results


def _pool_vectors(
    embedder: Any, pool: Sequence[PoolEntry], cache_dir: Path
) -> tuple[np.ndarray, dict[str, Any]]:
    """The pool texts' E5 passage vectors, from the disk cache when the same texts were embedded before."""
    import numpy as np
    from tqdm import tqdm

    digest = hashlib.sha256(
        json.dumps([embedder.model_name, [e.text for e in pool]], ensure_ascii=False).encode()
    ).hexdigest()[:16]
    path = cache_dir / f"pool-{digest}.npy"
    if path.is_file():
        return np.load(path), {"source": f"cached in {path}", "embed_s": None}
    texts = [e.text for e in pool]
    out: list[list[float]] = []
    t = time.perf_counter()
    batch = 32
    with tqdm(total=len(texts), desc="embed pool (E5 passages)", unit="text") as bar:
        for i in range(0, len(texts), batch):
            out.extend(embedder.embed_passages(texts[i : i + batch]))
            bar.update(len(texts[i : i + batch]))
    elapsed = time.perf_counter() - t
    arr = np.asarray(out, dtype=np.float32)
    cache_dir.mkdir(parents=True, exist_ok=True)
    np.save(path, arr)
    return arr, {
        "source": f"embedded now in {elapsed:.0f} s, cached in {path}",
        "embed_s": round(elapsed, 1),
        "passages_per_s": round(len(texts) / elapsed, 1),
    }


_COPY_COLUMNS = (
    ("id", "text"),
    ("tenant_id", "text"),
    ("user_id", "text"),
    ("type", "text"),
    ("content", "text"),
    ("content_hash", "text"),
    ("importance", "float8"),
    ("status", "text"),
    ("created_at", "timestamptz"),
    ("updated_at", "timestamptz"),
    ("last_accessed_at", "timestamptz"),
    ("access_count", "int4"),
    ("score", "float8"),
    ("tags", "text[]"),
    ("entities", "text[]"),
    ("cues", "text[]"),
    ("sources", "jsonb"),
    ("origin_event_id", "text"),
    ("embedding", "float4[]"),
    ("embedding_model", "text"),
    ("version", "int4"),
    ("indexed_version", "int4"),
)
_OPTIONAL_COPY_COLUMNS = (("valid_from", "timestamptz"),)
_COPY_BATCH = 10_000
_FLOAT4_OID = 700
_FLOAT4_ARRAY_OID = 1021


def float4_array_binary(values: Any) -> bytes:
    """Postgres binary wire format of a one-dimensional ``real[]`` without NULLs (what COPY BINARY
    expects), built with numpy: psycopg's own list dumper is pure Python and was the load's
    bottleneck (60 % of the time for 384-float vectors)."""
    import struct

    import numpy as np

    arr = np.asarray(values, dtype=">f4").ravel()
    body = np.empty(arr.size, dtype=[("len", ">i4"), ("val", ">f4")])
    body["len"] = 4
    body["val"] = arr
    return struct.pack(">iiiii", 1, 0, _FLOAT4_OID, arr.size, 1) + body.tobytes()


def _register_float4_array_dumper(conn: Any) -> None:
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    class Float4ArrayDumper(Dumper):
        format = Format.BINARY
        oid = _FLOAT4_ARRAY_OID

        def dump(self, obj: Any) -> bytes:
            return float4_array_binary(obj)

    conn.adapters.register_dumper(None, Float4ArrayDumper)


def _load_user(
    db_url: str,
    index: Any,
    user_id: str,
    count: int,
    pool: Sequence[PoolEntry],
    analyses: Sequence[PoolAnalysis | None],
    pool_vectors: np.ndarray,
    rng: np.random.Generator,
    cfg: LatencyConfig,
    now: datetime,
    *,
    with_vectors: bool,
    sample_size: int = 2000,
) -> list[SyntheticMemory]:
    """Binary COPY of ``count`` memories (and their index points); returns a sample for queries."""
    import psycopg
    from psycopg.types.json import Jsonb
    from tqdm import tqdm

    from shared.events import content_hash
    from shared.ports import IndexPoint
    from workers.bench import synthetic
    from workers.bench.scratch import libpq_url
    from workers.embedders.e5 import E5_MODEL_NAME

    reservoir: list[SyntheticMemory] = []
    pick = random.Random(f"{cfg.seed}:{user_id}:sample")
    memories = synthetic.generate_memories(user_id, count, pool, analyses, seed=cfg.seed, now=now)
    with (
        psycopg.connect(libpq_url(db_url)) as conn,
        tqdm(total=count, desc=f"load {user_id}", unit="row", unit_scale=True) as bar,
    ):
        _register_float4_array_dumper(conn)
        present = {
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'memories'"
            ).fetchall()
        }
        # Columns added by later migrations are filled when the schema has them.
        copy_columns = [c for c in (*_COPY_COLUMNS, *_OPTIONAL_COPY_COLUMNS) if c[0] in present]
        names = [c for c, _ in copy_columns]
        copy_sql = f"COPY memories ({', '.join(names)}) FROM STDIN (FORMAT BINARY)"
        done = 0
        while done < count:
            n = min(_COPY_BATCH, count - done)
            batch = [next(memories) for _ in range(n)]
            points: list[IndexPoint] = []
            with conn.cursor() as cur, cur.copy(copy_sql) as cp:
                cp.set_types([t for _, t in copy_columns])
                for m in batch:
                    vector = noisy_unit(pool_vectors[m.pool], rng, cfg.noise) if with_vectors else None
                    source = {"event_id": m.event_id, "session_id": m.session_id, "seq": m.seq,
                              "at": m.created_at.isoformat()}  # fmt: skip
                    row = {
                        "id": m.id, "tenant_id": TENANT, "user_id": user_id, "type": m.type,
                        "content": m.content,
                        "content_hash": content_hash(m.type, " ".join(m.content.split()).lower()),
                        "importance": m.importance, "status": m.status, "created_at": m.created_at,
                        "updated_at": now, "last_accessed_at": m.created_at, "access_count": 0,
                        "score": m.importance, "tags": m.tags, "entities": m.entities, "cues": m.cues,
                        "sources": Jsonb([source]), "origin_event_id": m.event_id, "embedding": vector,
                        "embedding_model": E5_MODEL_NAME if vector is not None else None,
                        "version": 1, "indexed_version": 1, "valid_from": m.created_at,
                    }  # fmt: skip
                    cp.write_row(tuple(row[c] for c in names))
                    if vector is not None:
                        payload = {"status": m.status, "type": m.type, "importance": m.importance,
                                   "score": m.importance, "created_at": m.created_at.isoformat(),
                                   "version": 1}  # fmt: skip
                        points.append(IndexPoint(m.id, TENANT, user_id, vector.tolist(), payload))
            conn.commit()
            if points and index is not None:
                index.upsert(points)
            for m in batch:  # reservoir sample, for queries that name stored entities
                if len(reservoir) < sample_size:
                    reservoir.append(m)
                else:
                    j = pick.randrange(done + 1)
                    if j < sample_size:
                        reservoir[j] = m
                done += 1
            bar.update(n)
    return reservoir


def _vacuum_analyze(db_url: str) -> None:
    """Flush the GIN pending list and refresh planner statistics after a bulk load."""
    import psycopg

    from workers.bench.scratch import libpq_url

    with psycopg.connect(libpq_url(db_url), autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE) memories")


def _check_cues(samples: dict[str, list[SyntheticMemory]], per_user: int = 100) -> dict[str, Any]:
    """Recompute a sample's cue keys with the real functions: the generator's shortcut must agree."""
    from shared import cues

    checked = mismatched = 0
    examples: list[dict[str, Any]] = []
    for memories in samples.values():
        for m in memories[:per_user]:
            text = m.content
            real = cues.cues_for_memory(text, cues.lexicon_tags(text), cues.entities(text)[:16])
            checked += 1
            if tuple(m.cues) != real:
                mismatched += 1
                if len(examples) < 3:
                    examples.append({"content": m.content, "generated": m.cues, "real": list(real)})
    return {"checked": checked, "mismatched": mismatched, "examples": examples}


def _fill_working_memory(client: Any, users: Sequence[str], now: datetime) -> None:
    from shared import keys
    from workers.bench import synthetic

    for n, user in enumerate(users):
        turns = synthetic.make_turns(20, users=1, seed=100 + n)
        session = f"{user}-live"
        wm_key = keys.working_memory_key(TENANT, user, session)
        pipe = client.pipeline()
        for seq, turn in enumerate(turns, start=1):
            member = json.dumps(
                {"event_id": f"wm-{user}-{seq}", "role": turn.role, "content": turn.content,
                 "at": now.isoformat()},
                ensure_ascii=False,
                sort_keys=True,
            )  # fmt: skip
            pipe.zadd(wm_key, {member: seq})
        pipe.zadd(keys.user_sessions_key(TENANT, user), {session: int(now.timestamp() * 1000)})
        pipe.execute()


def _run_queries(
    uow_factory: Callable[[], Any],
    index: Any,
    working_memory: Any,
    embedder: Any,
    user_id: str,
    queries: Sequence[tuple[str, str]],
    clients: int,
    now: datetime,
    *,
    desc: str,
    warmup: int = 10,
) -> tuple[list[dict[str, Any]], float]:
    from tqdm import tqdm

    from shared.retrieval import RecallRequest, recall

    def one(kind: str, query: str) -> dict[str, Any]:
        sink: dict[str, float] = {}
        wm = _Timed(working_memory, sink, {"recent": "working_memory_ms"})
        started = time.perf_counter()
        with uow_factory() as uow:
            result = recall(
                cast("UnitOfWork", _TimedUow(uow, sink)),
                RecallRequest(TENANT, user_id, query, now),
                embedder=embedder,
                index=index,
                working_memory=wm,
            )
        wall = (time.perf_counter() - started) * 1e3
        return {
            "kind": kind,
            "query": query,
            "stage": result.stage,
            "timings": fused_timings(result.trace["timings_ms"], sink, wall),
        }

    for kind, q in queries[:warmup]:
        one(kind, q)
    records: list[dict[str, Any]] = []
    lock = threading.Lock()
    bar = tqdm(total=len(queries), desc=desc, unit="q", leave=False)

    def client(share: Sequence[tuple[str, str]]) -> None:
        for kind, q in share:
            r = one(kind, q)
            with lock:
                records.append(r)
                bar.update(1)

    started = time.perf_counter()
    if clients <= 1:
        client(queries)
    else:
        threads = [threading.Thread(target=client, args=(queries[i::clients],)) for i in range(clients)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    elapsed = time.perf_counter() - started
    bar.close()
    return records, elapsed


def _deterministic_at_scale(
    cfg: LatencyConfig,
    db_url: str,
    uow_factory: Callable[[], Any],
    working_memory: Any,
    pool: Sequence[PoolEntry],
    analyses: Sequence[PoolAnalysis | None],
    pool_vectors: np.ndarray,
    rng: np.random.Generator,
    now: datetime,
    samples: dict[str, list[SyntheticMemory]],
) -> dict[str, Any]:
    """``big_rows`` memories for one user (no vectors), then the cue query alone, timed."""
    from tqdm import tqdm

    from shared.cues import query_cues
    from shared.models import RECALLABLE_STATUSES
    from shared.retrieval import RecallRequest, recall
    from workers.bench import synthetic

    big_user = "user-1m" if cfg.big_rows == 1_000_000 else f"user-big-{cfg.big_rows}"
    t = time.perf_counter()
    sample = _load_user(
        db_url, None, big_user, cfg.big_rows, pool, analyses, pool_vectors, rng, cfg, now, with_vectors=False
    )
    load_s = time.perf_counter() - t
    t = time.perf_counter()
    _vacuum_analyze(db_url)
    vacuum_s = time.perf_counter() - t
    table = _table_stats(db_url)
    out: dict[str, Any] = {
        "user": big_user,
        "rows_for_user": cfg.big_rows,
        "load_s": round(load_s, 1),
        "vacuum_analyze_s": round(vacuum_s, 1),
        "table": table,
        "note": "rows have NULL embeddings (the stage under test never reads them)",
    }
    small_user = f"user-{min(cfg.sizes)}"
    targets = [(big_user, sample), (small_user, samples[small_user])]
    for user_id, memories in targets:
        queries = synthetic.make_queries(memories, cfg.queries, seed=cfg.seed + 99)
        for _, q in queries[:10]:  # warm up
            with uow_factory() as uow:
                uow.memories.by_cues(TENANT, user_id, list(query_cues(q).keys()), RECALLABLE_STATUSES, 50)
        records: list[dict[str, Any]] = []
        for kind, q in tqdm(queries, desc=f"by_cues at {table['rows']} rows, {user_id}", unit="q"):
            keys_ = list(query_cues(q).keys())
            with uow_factory() as uow:
                started = time.perf_counter()
                found = uow.memories.by_cues(TENANT, user_id, keys_, RECALLABLE_STATUSES, 50)
                by_cues_ms = (time.perf_counter() - started) * 1e3
            # The whole stage 1 as recall runs it (no embedder/index: the vector stage is skipped).
            sink: dict[str, float] = {}
            with uow_factory() as uow:
                result = recall(
                    cast("UnitOfWork", _TimedUow(uow, sink)),
                    RecallRequest(TENANT, user_id, q, now),
                    embedder=None,
                    index=None,
                    working_memory=_Timed(working_memory, sink, {"recent": "working_memory_ms"}),
                )
            records.append(
                {
                    "kind": kind,
                    "query": q,
                    "stage": result.stage,
                    "rows": len(found),
                    "timings": {
                        **{k: v for k, v in sink.items() if k != "by_cues_ms"},
                        "by_cues_ms": by_cues_ms,  # the cue query alone, timed on its own
                        "deterministic_ms": result.trace["timings_ms"]["deterministic_ms"],
                        "cues_ms": result.trace["timings_ms"]["cues_ms"],
                    },
                }
            )
        summary = summarize_records(records)
        summary.pop("vector_path", None)
        slowest = sorted(records, key=lambda r: -r["timings"]["by_cues_ms"])[:5]
        summary["slowest"] = [
            {"query": r["query"], "by_cues_ms": round(r["timings"]["by_cues_ms"], 2)} for r in slowest
        ]
        out[user_id] = summary
        out.setdefault("explain", {})[user_id] = _explain(
            db_url, user_id, [q for _, q in queries[:2]] + [slowest[0]["query"]]
        )
    return out


def _row_cost(
    uow_factory: Callable[[], Any],
    user_id: str,
    queries: Sequence[tuple[str, str]],
    memories: Sequence[SyntheticMemory],
) -> dict[str, Any]:
    """What the repository's full-row reads cost: by_cues and get_many as the product runs them
    (ORM rows with the 384-float embedding, converted to domain objects) against the same SQL
    selecting every column but the embedding, as plain rows."""
    from sqlalchemy import select

    from shared.cues import query_cues
    from shared.models import RECALLABLE_STATUSES
    from workers.db.tables import MemoryRow

    columns = [c for c in MemoryRow.__table__.c if c.name != "embedding"]
    rng = random.Random(5)
    ids = [m.id for m in memories]
    timings: dict[str, list[float]] = {k: [] for k in ("by_cues", "by_cues_no_embedding", "get_many_50",
                                                         "get_many_50_no_embedding")}  # fmt: skip
    for _, q in queries:
        keys_ = list(query_cues(q).keys())
        batch = rng.sample(ids, min(50, len(ids)))
        with uow_factory() as uow:
            t = time.perf_counter()
            uow.memories.by_cues(TENANT, user_id, keys_, RECALLABLE_STATUSES, 50)
            timings["by_cues"].append((time.perf_counter() - t) * 1e3)
            t = time.perf_counter()
            uow.session.execute(
                select(*columns)
                .where(
                    MemoryRow.tenant_id == TENANT,
                    MemoryRow.user_id == user_id,
                    MemoryRow.status.in_([s.value for s in RECALLABLE_STATUSES]),
                    MemoryRow.cues.overlap(keys_),
                )
                .order_by(MemoryRow.score.desc(), MemoryRow.id)
                .limit(50)
            ).all()
            timings["by_cues_no_embedding"].append((time.perf_counter() - t) * 1e3)
            t = time.perf_counter()
            uow.memories.get_many(TENANT, user_id, batch)
            timings["get_many_50"].append((time.perf_counter() - t) * 1e3)
            t = time.perf_counter()
            uow.session.execute(
                select(*columns).where(
                    MemoryRow.id.in_(batch), MemoryRow.tenant_id == TENANT, MemoryRow.user_id == user_id
                )
            ).all()
            timings["get_many_50_no_embedding"].append((time.perf_counter() - t) * 1e3)
    return {"user": user_id, **{k: percentiles(v) for k, v in timings.items()}}


def _table_stats(db_url: str) -> dict[str, Any]:
    import psycopg

    from workers.bench.scratch import libpq_url

    with psycopg.connect(libpq_url(db_url)) as conn:
        rows = conn.execute("SELECT count(*) FROM memories").fetchone()
        sizes = conn.execute(
            "SELECT pg_size_pretty(pg_table_size('memories')),"
            " pg_size_pretty(pg_relation_size('ix_memories_cues')),"
            " current_setting('shared_buffers'), current_setting('work_mem'), version()"
        ).fetchone()
    assert rows is not None and sizes is not None
    return {
        "rows": int(rows[0]),
        "table_size": sizes[0],
        "gin_index_size": sizes[1],
        "shared_buffers": sizes[2],
        "work_mem": sizes[3],
        "postgres": str(sizes[4]).split(" on ")[0],
    }


def _explain(db_url: str, user_id: str, queries: Sequence[str]) -> list[dict[str, Any]]:
    """EXPLAIN ANALYZE of SQL equivalent to by_cues, to show which plan Postgres picks."""
    import psycopg

    from shared.cues import query_cues
    from workers.bench.scratch import libpq_url

    out: list[dict[str, Any]] = []
    with psycopg.connect(libpq_url(db_url)) as conn:
        for q in queries:
            keys_ = list(query_cues(q).keys())
            if not keys_:
                continue
            rows = conn.execute(
                "EXPLAIN (ANALYZE, BUFFERS) SELECT * FROM memories WHERE tenant_id = %s AND user_id = %s"
                " AND status IN ('active') AND cues && %s::text[] ORDER BY score DESC, id LIMIT 50",
                (TENANT, user_id, keys_),
            ).fetchall()
            out.append({"query": q, "cue_keys": keys_, "plan": [r[0] for r in rows]})
    return out


# --- targets and report ---------------------------------------------------------------------------


def _p95(summary: dict[str, Any] | None, part: str, key: str) -> float | None:
    if not summary:
        return None
    value = summary.get(part, {}).get(key, {}).get("p95")
    return float(value) if value is not None else None


def evaluate_targets(results: dict[str, Any], sizes: Sequence[int]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    largest = str(max(sizes)) if sizes else None
    recall = results.get("recall", {})
    e5 = recall.get(largest, {}).get("single/e5") if largest else None
    overall = _p95(e5, "all", "total_ms")
    vector_path = _p95(e5, "vector_path", "total_ms")
    hnsw = results.get("recall_hnsw", {}).get(largest, {}).get("single/e5") if largest else None
    at = f"{largest} memories" if largest else "-"
    out.append(
        {
            "target": "recall p95 <= 25 ms at 100k memories per user, including query embedding",
            "measured": f"{overall} ms (all queries), {vector_path} ms (queries that reached the vector "
            f"stage), at {at}"
            + (
                f"; with HNSW built: {_p95(hnsw, 'all', 'total_ms')} / "
                f"{_p95(hnsw, 'vector_path', 'total_ms')} ms"
                if hnsw
                else ""
            ),
            "verdict": verdict(overall, TARGET_RECALL_P95_MS)
            + ("" if largest == "100000" else f" (measured at {at}, not 100k)"),
        }
    )
    det = results.get("deterministic_1m")
    det_p95 = _p95(det.get(det["user"]) if det else None, "all", "by_cues_ms")
    out.append(
        {
            "target": "deterministic stage p95 <= 2 ms at 1M memories",
            "measured": (
                f"by_cues p95 {det_p95} ms for a user with {det['rows_for_user']} memories "
                f"({det['table']['rows']} rows in the table); whole stage 1 p95 "
                f"{_p95(det.get(det['user']), 'all', 'deterministic_ms')} ms"
            )
            if det
            else "-",
            "verdict": verdict(det_p95, TARGET_DETERMINISTIC_P95_MS)
            + (
                ""
                if not det or det["rows_for_user"] >= 1_000_000
                else f" (at {det['rows_for_user']} rows, not 1M)"
            ),
        }
    )
    return out


def _fmt(p: dict[str, Any] | None) -> str:
    if not p or not p.get("n"):
        return "–"
    return f"{p['p50']:.2f} / {p['p95']:.2f} / {p['p99']:.2f}"


def _stage_table(summary: dict[str, Any], part: str) -> str:
    rows = ["| stage | p50 / p95 / p99 ms | n | what |", "|---|---|---|---|"]
    stages = summary.get(part, {})
    for key in STAGE_KEYS:
        if key in stages:
            rows.append(f"| `{key}` | {_fmt(stages[key])} | {stages[key]['n']} | {STAGE_NOTES[key]} |")
    return "\n".join(rows)


def render_report(r: dict[str, Any]) -> str:
    lines = ["# Recall latency benchmark", "", machine_markdown(r["machine"])]
    lines.append(
        f"- duration: {r['duration_s']} s; load average at the end {r.get('load_average_at_end')} "
        "(other jobs on the machine skew the numbers)"
    )
    vb = r.get("vector_backend", {})
    lines += [
        f"- vector backend: {vb.get('adapter')}, {vb.get('points')} points; HNSW {vb.get('hnsw')}",
        "- database: {postgres}, a fresh database; {rows} rows in memories ({table_size}, "
        "GIN {gin_index_size}); shared_buffers {shared_buffers}, work_mem {work_mem}".format(**r["postgres"]),
        f"- query embedding (E5, {r['query_embedding'].get('threads')} thread): "
        f"{_fmt(r['query_embedding'])} ms p50/p95/p99",
        f"- cue keys: {r['cue_check']['mismatched']} of {r['cue_check']['checked']} sampled memories differ "
        "from the real cues_for_memory",
        "",
        "## Targets",
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
    ]
    lines += [f"| {t['target']} | {t['measured']} | **{t['verdict']}** |" for t in r["targets"]]
    lines += ["", "## How the data was made", ""]
    lines += [f"- {n}" for n in r["notes"]]
    lines.append(f"- loaded: {json.dumps(r['load'])}")
    for section, title in (("recall", "Recall"), ("recall_hnsw", "Recall after building HNSW")):
        if section not in r:
            continue
        lines += ["", f"## {title}", ""]
        if section == "recall_hnsw":
            lines.append(f"HNSW build (optimize) took {r.get('hnsw_build_s')} s.\n")
        lines += [
            "| memories | mode | answered by | total p50/p95/p99 ms (all) | total (vector path) | "
            "vector_ms (search) | embed_ms | q/s |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for size, modes in r[section].items():
            for mode, s in modes.items():
                lines.append(
                    f"| {size} | {mode} | {s['answered_by']} | {_fmt(s['all'].get('total_ms'))} | "
                    f"{_fmt(s['vector_path'].get('total_ms'))} | {_fmt(s['all'].get('vector_ms'))} | "
                    f"{_fmt(s['all'].get('embed_ms'))} | {s['queries_per_s']} |"
                )
        for size, modes in r[section].items():
            for mode in ("single/precomputed", "single/e5"):
                if mode in modes:
                    lines += ["", f"### {size} memories, {mode}: per stage (all queries)", ""]
                    lines.append(_stage_table(modes[mode], "all"))
    rc = r.get("row_cost")
    if rc:
        lines += [
            "",
            f"## What reading full rows costs ({rc['user']})",
            "",
            "The repository reads whole rows, including the 384-float embedding, and converts them to "
            "domain objects; the same SQL without the embedding column, as plain rows:",
            "",
            "| call | p50 / p95 / p99 ms |",
            "|---|---|",
        ]
        for key in ("by_cues", "by_cues_no_embedding", "get_many_50", "get_many_50_no_embedding"):
            lines.append(f"| {key} | {_fmt(rc.get(key))} |")
    det = r.get("deterministic_1m")
    if det:
        t = det["table"]
        lines += [
            "",
            "## Deterministic stage at scale",
            "",
            f"{det['rows_for_user']} memories for `{det['user']}` ({det['note']}); the table then holds "
            f"{t['rows']} rows ({t['table_size']}, GIN index on cues {t['gin_index_size']}); "
            f"{t['postgres']}, shared_buffers {t['shared_buffers']}, work_mem {t['work_mem']}. "
            f"Load {det['load_s']} s, VACUUM ANALYZE {det['vacuum_analyze_s']} s.",
            "",
            "| user | kind | answered by | by_cues p50/p95/p99 ms | cue_counts | whole stage 1 "
            "(deterministic_ms) |",
            "|---|---|---|---|---|---|",
        ]
        for user in (det["user"], *[k for k in det if k.startswith("user-") and k != det["user"]]):
            s = det.get(user)
            if not isinstance(s, dict) or "all" not in s:
                continue
            for kind in ("all", "entity", "semantic"):
                if kind in s:
                    lines.append(
                        f"| {user} | {kind} | {s['answered_by'] if kind == 'all' else ''} | "
                        f"{_fmt(s[kind].get('by_cues_ms'))} | {_fmt(s[kind].get('cue_counts_ms'))} | "
                        f"{_fmt(s[kind].get('deterministic_ms'))} |"
                    )
        for user, plans in det.get("explain", {}).items():
            for p in plans[-1:]:
                lines += ["", f"Plan of the slowest query for `{user}` ({p['query']!r}):", ""]
                lines += ["```", *p["plan"], "```"]
    return "\n".join(lines) + "\n"
