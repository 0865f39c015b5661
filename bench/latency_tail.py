"""What a new memory costs vector search before the next HNSW build (issue 16, incremental indexing).

qdrant-edge has no background optimizer: ``memory.optimize_index`` builds the HNSW graph on beat
(every 6 hours). A point upserted in between is searchable at once, from a plain (unindexed)
segment that every search scans. This measures that tail on top of the largest user's optimized
shard: the dense search alone (the query vectors precomputed), over the optimized points, then
with ``tails`` new points of the same user appended; and whether each new point is found by its
own vector straight after its upsert. The tail points are deleted afterwards.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bench.common import percentiles
from bench.latency_data import TENANT, noisy_unit

if TYPE_CHECKING:
    import numpy as np

    from workers.index.edge import EdgeVectorIndex


def unoptimized_tail(
    index: EdgeVectorIndex,
    user_id: str,
    query_vectors: Sequence[list[float]],
    pool_vectors: np.ndarray,
    rng: np.random.Generator,
    noise: float,
    *,
    tails: Sequence[int] = (1000, 10000),
    limit: int = 50,
) -> dict[str, Any]:
    from shared.ports import IndexPoint

    def searches() -> dict[str, Any]:
        times: list[float] = []
        for v in query_vectors:
            t = time.perf_counter()
            index.search(TENANT, user_id, v, limit)
            times.append((time.perf_counter() - t) * 1e3)
        return percentiles(times)

    out: dict[str, Any] = {"user": user_id, "limit": limit, "optimized": searches()}
    added: list[str] = []
    for size in sorted(tails):
        points = []
        for _ in range(size - len(added)):
            vector = noisy_unit(pool_vectors[int(rng.integers(len(pool_vectors)))], rng, noise)
            payload = {"status": "active", "type": "fact", "importance": 5.0, "score": 5.0, "version": 1}
            points.append(IndexPoint(str(uuid.uuid4()), TENANT, user_id, vector.tolist(), payload))
        t = time.perf_counter()
        for start in range(0, len(points), 1024):  # the pipeline's index batch
            index.upsert(points[start : start + 1024])
        upsert_s = time.perf_counter() - t
        added += [p.id for p in points]
        probe = points[:: max(1, len(points) // 50)]
        found = sum(index.search(TENANT, user_id, p.vector, 1)[0].id == p.id for p in probe)
        out[f"tail_{size}"] = {
            **searches(),
            "upsert_s": round(upsert_s, 3),
            "found_by_own_vector": f"{found}/{len(probe)}",
        }
    index.delete(TENANT, user_id, added)
    return out
