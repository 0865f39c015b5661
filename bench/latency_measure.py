"""What the latency benchmark times: recall per stage through thin timing proxies, the
deterministic stage at scale, per-row costs, table statistics and query plans.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from bench.common import percentiles
from bench.latency_data import TENANT, load_user, vacuum_analyze
from bench.latency_postgres import explain_cue_query, table_stats

if TYPE_CHECKING:
    import numpy as np

    from bench.cpu_account import CpuAccount
    from bench.latency import LatencyConfig
    from bench.synthetic import PoolAnalysis, PoolEntry, SyntheticMemory
    from shared.ports import VectorIndex
    from shared.recall.request import RecallResult
    from shared.storage import UnitOfWork

STAGE_KEYS = (
    "cues_ms",
    "deterministic_ms",
    "cue_counts_ms",
    "by_cues_ms",
    "in_window_ms",
    "turn_window_ms",
    "window_sources_ms",
    "working_memory_ms",
    "event_stages_ms",
    "embed_ms",
    "vector_ms",
    "keyword_ms",
    "turns_ms",
    "turn_vector_ms",
    "turn_keyword_ms",
    "fusion_ms",
    "get_many_ms",
    "turn_rows_ms",
    "log_sources_ms",
    "total_ms",
    "wall_ms",
)


def stage_samples(records: Iterable[dict[str, Any]]) -> dict[str, list[float]]:
    """Per stage key, the samples of the records that have it (a stage that did not run is absent)."""
    out: dict[str, list[float]] = {k: [] for k in STAGE_KEYS}
    for r in records:
        for k in STAGE_KEYS:
            v = r["timings"].get(k)
            if v is not None:
                out[k].append(float(v))
    return {k: v for k, v in out.items() if v}


def mean_candidates(records: Iterable[dict[str, Any]]) -> dict[str, float]:
    """Per recall path, the mean number of candidates it gave, over the records where it ran (the
    trace's ``candidates``): shows which searches found something, not only what they cost."""
    sums: dict[str, float] = {}
    runs: dict[str, int] = {}
    for r in records:
        for path, n in (r.get("candidates") or {}).items():
            sums[path] = sums.get(path, 0.0) + float(n)
            runs[path] = runs.get(path, 0) + 1
    return {path: round(sums[path] / runs[path], 1) for path in sorted(sums)}


def summarize_records(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Percentiles per stage, overall and per query kind, plus which stage answered."""
    from collections import Counter

    kinds = sorted({r["kind"] for r in records})
    summary: dict[str, Any] = {
        "n": len(records),
        "answered_by": dict(Counter(r["stage"] for r in records)),
        "candidates_mean": mean_candidates(records),
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


# --- timing proxies -------------------------------------------------------------------------------


class _Timed:
    """Forwards every attribute; times the calls of the methods named in ``names`` into ``sink``.
    A name may map to a function of the sink that picks the key when the call is made."""

    def __init__(
        self, target: Any, sink: dict[str, float], names: dict[str, str | Callable[[dict[str, float]], str]]
    ):
        self._target = target
        self._sink = sink
        self._names = names

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        named = self._names.get(name)
        if named is None or not callable(attr):
            return attr
        key = named if isinstance(named, str) else named(self._sink)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                self._sink[key] = self._sink.get(key, 0.0) + (time.perf_counter() - started) * 1e3

        return timed


def sources_key(sink: dict[str, float]) -> str:
    """Which recall step a ``memories.by_sources`` call belongs to. Recall calls it for the log's
    turns in a time range the query names (stage 1, after ``events.in_window``) and for the
    conversation-log hits (stage 2, after ``events.of_user``, which that step always calls)."""
    return "log_sources_ms" if "turn_rows_ms" in sink else "window_sources_ms"


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
                "happened_in": "in_window_ms",
                "by_sources": sources_key,
            },
        )
        self.events = _Timed(
            uow.events,
            sink,
            {
                "stages": "event_stages_ms",
                "recent": "event_recent_ms",
                "in_window": "turn_window_ms",
                "happened_in": "turn_window_ms",
                "of_user": "turn_rows_ms",
            },
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._uow, name)


class PrecomputedEmbedder:
    """The query vector comes from a table filled beforehand (recall without embedding time)."""

    def __init__(self, vectors: dict[str, list[float]], model_name: str, dim: int):
        self._vectors = vectors
        self.model_name = model_name
        self.dim = dim

    def embed_query(self, text: str) -> list[float]:
        return self._vectors[text]

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        raise RuntimeError("the latency benchmark embeds no passages during recall")


def check_cues(samples: dict[str, list[SyntheticMemory]], per_user: int = 100) -> dict[str, Any]:
    """Recompute a sample's cue keys with the real functions: the generator's shortcut must agree."""
    from shared.language import cues

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


def run_queries(
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
    turn_index: Any = None,
    warmup: int = 10,
    cpu: CpuAccount | None = None,
) -> tuple[list[dict[str, Any]], float]:
    """Every query through ``recall``; with ``turn_index``, recall also searches the conversation
    log, as on the default configuration (CUEMEM_INDEX_TURNS on). ``cpu`` counts the timed
    queries (not the warm-up)."""
    from tqdm import tqdm

    def one(kind: str, query: str) -> dict[str, Any]:
        sink: dict[str, float] = {}
        wm = _Timed(working_memory, sink, {"recent": "working_memory_ms"})
        # recall times both log searches together (turns_ms); the proxy splits dense from keyword.
        log = (
            None
            if turn_index is None
            else _Timed(turn_index, sink, {"search": "turn_vector_ms", "search_keywords": "turn_keyword_ms"})
        )
        started = time.perf_counter()
        result = _timed_recall(
            uow_factory, sink, user_id, query, now, wm, embedder=embedder, index=index, turn_index=log
        )
        wall = (time.perf_counter() - started) * 1e3
        return {
            "kind": kind,
            "query": query,
            "stage": result.stage,
            "candidates": result.trace.get("candidates", {}),
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

    if cpu is not None:
        cpu.start()
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
    if cpu is not None:
        cpu.stop()
    bar.close()
    return records, elapsed


def _timed_recall(
    uow_factory: Callable[[], Any],
    sink: dict[str, float],
    user_id: str,
    query: str,
    now: datetime,
    working_memory: Any,
    *,
    embedder: Any = None,
    index: Any = None,
    turn_index: Any = None,
) -> RecallResult:
    """One ``recall`` in a fresh unit of work whose repositories time their calls into ``sink``;
    without embedder and index the vector stage is skipped."""
    from shared.recall.cascade import recall
    from shared.recall.request import RecallRequest

    with uow_factory() as uow:
        return recall(
            cast("UnitOfWork", _TimedUow(uow, sink)),
            RecallRequest(TENANT, user_id, query, now),
            embedder=embedder,
            index=index,
            working_memory=working_memory,
            turn_index=cast("VectorIndex | None", turn_index),
        )


def deterministic_at_scale(
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

    from bench import synthetic

    big_user = "user-1m" if cfg.big_rows == 1_000_000 else f"user-big-{cfg.big_rows}"
    t = time.perf_counter()
    sample = load_user(
        db_url, None, big_user, cfg.big_rows, pool, analyses, pool_vectors, rng, cfg, now, with_vectors=False
    )
    load_s = time.perf_counter() - t
    t = time.perf_counter()
    vacuum_analyze(db_url)
    vacuum_s = time.perf_counter() - t
    table = table_stats(db_url)
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
            _timed_recall(uow_factory, {}, user_id, q, now, working_memory)
        records: list[dict[str, Any]] = []
        for kind, q in tqdm(queries, desc=f"stage 1 at {table['rows']} rows, {user_id}", unit="q"):
            # The whole stage 1 as recall runs it (no embedder/index: the vector stage is skipped);
            # by_cues and cue_counts are the calls recall made, with the cues it chose to fetch.
            sink: dict[str, float] = {}
            wm = _Timed(working_memory, sink, {"recent": "working_memory_ms"})
            result = _timed_recall(uow_factory, sink, user_id, q, now, wm)
            records.append(
                {
                    "kind": kind,
                    "query": q,
                    "stage": result.stage,
                    "rows": result.trace["candidates"].get("cue", 0),
                    "timings": {
                        **sink,
                        "deterministic_ms": result.trace["timings_ms"]["deterministic_ms"],
                        "cues_ms": result.trace["timings_ms"]["cues_ms"],
                    },
                }
            )
        summary = summarize_records(records)
        summary.pop("vector_path", None)
        slowest = sorted(records, key=lambda r: -r["timings"]["deterministic_ms"])[:5]
        summary["slowest"] = [
            {
                "query": r["query"],
                "deterministic_ms": round(r["timings"]["deterministic_ms"], 2),
                "by_cues_ms": round(r["timings"].get("by_cues_ms", 0.0), 2),
            }
            for r in slowest
        ]
        out[user_id] = summary
        out.setdefault("explain", {})[user_id] = explain_cue_query(
            db_url, user_id, [q for _, q in queries[:2]] + [slowest[0]["query"]]
        )
    return out


def row_cost(
    uow_factory: Callable[[], Any],
    user_id: str,
    queries: Sequence[tuple[str, str]],
    memories: Sequence[SyntheticMemory],
) -> dict[str, Any]:
    """What the repository's full-row reads cost: by_cues and get_many as the product runs them
    (ORM rows with the 384-float embedding, converted to domain objects) against the same SQL
    selecting every column but the embedding, as plain rows."""
    from sqlalchemy import select

    from shared.language.cues import query_cues
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
