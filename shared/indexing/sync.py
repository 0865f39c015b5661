"""The incremental push: a user's rows whose point is missing or out of date, written to the
collection's index (the pipeline's index stage, ``memory.sync_index`` after a change)."""

from __future__ import annotations

from typing import Any

from shared.indexing.collections import Collection
from shared.ports import Embedder, EmbeddingModelMismatch, VectorIndex
from shared.storage import UnitOfWork

INDEX_BATCH = 256


def push_unindexed(
    uow: UnitOfWork,
    collection: Collection[Any, Any],
    index: VectorIndex,
    embedder: Embedder,
    tenant_id: str,
    user_id: str,
) -> int:
    """Write the points of one user's rows not yet in ``index``, batch by batch, and mark the rows;
    returns how many points were written. A row without a vector is marked without a point (it
    gets one when it is embedded and changes again). The caller commits."""
    model = embedder.model_name
    written = 0
    index.ensure(embedder.dim, model)
    after = ""
    while True:
        batch = collection.unindexed(uow, tenant_id, user_id, INDEX_BATCH, after)
        if not batch:
            return written
        if any(collection.model(row) not in (None, model) for row in batch):
            # Vectors of two models are never mixed in one index: `cuemem reindex` re-embeds.
            raise EmbeddingModelMismatch(str(collection.model(batch[0])), model)
        points = [collection.point(row) for row in batch if collection.vector(row) is not None]
        index.upsert(points)
        collection.mark(uow, batch)
        written += len(points)
        after = collection.key(batch[-1])
