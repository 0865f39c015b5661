"""The rebuild (``cuemem reindex``): a collection's index made again from Postgres, re-embedding
rows that have no vector or one of another model. Written once for every collection. With
``turn_alone_vector`` on, it then gives every embedded turn its vector by itself where it has none
(``fill_alone_vectors``): turns logged before the setting was on, or re-embedded here.

A long job, so it commits batch by batch: an interrupted run leaves rows marked unindexed, and
running it again finishes the work.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from shared.indexing.collections import TURNS, Collection, Indexes
from shared.indexing.turn_windows import alone_text
from shared.ports import Embedder, VectorIndex
from shared.storage import UnitOfWork

log = logging.getLogger(__name__)


def rebuild_collection(
    uow_factory: Callable[[], UnitOfWork],
    collection: Collection[Any, Any],
    index: VectorIndex,
    embedder: Embedder,
    batch_size: int = 256,
) -> dict[str, int]:
    """Empty ``index`` and write every indexable row's point again; returns the points written
    and the rows embedded, under ``collection.reindex_keys`` (prefixed)."""
    model = embedder.model_name
    with uow_factory() as uow:
        collection.reset(uow, model)
        uow.commit()
    index.reset(embedder.dim, model)
    indexed_key, embedded_key = collection.counts(collection.reindex_keys)
    stats = {indexed_key: 0, embedded_key: 0}
    after = ""
    while True:
        with uow_factory() as uow:
            batch = collection.page(uow, after, batch_size)
            if not batch:
                break
            after = collection.key(batch[-1])
            rows = [row for row in batch if collection.indexable(row)]
            stale = [
                i
                for i, row in enumerate(rows)
                if collection.vector(row) is None or collection.model(row) != model
            ]
            if stale:
                vectors = embedder.embed_passages([collection.text(rows[i]) for i in stale])
                for i, vector in zip(stale, vectors, strict=True):
                    rows[i] = collection.store_vector(uow, rows[i], vector, model)
                stats[embedded_key] += len(stale)
            # This page only: later pages may still hold the old model's vectors.
            index.upsert([collection.point(row) for row in rows])
            collection.mark(uow, rows)
            uow.commit()
            stats[indexed_key] += len(rows)
    log.info("%s reindex done: %s", collection.name, stats)
    return stats


def fill_alone_vectors(
    uow_factory: Callable[[], UnitOfWork], embedder: Embedder, batch_size: int = 256
) -> int:
    """Give each turn whose window has a vector of ``embedder``'s model, but which has no vector
    by itself, that vector (``uow.turn_index.set_alone``); batch by batch, each committed, so an
    interrupted run is finished by the next. Returns the turns given one."""
    model = embedder.model_name
    filled = 0
    after = ""
    while True:
        with uow_factory() as uow:
            turns = uow.turn_index.without_alone(after, batch_size, model)
            if not turns:
                break
            after = turns[-1].ref
            texts = list(dict.fromkeys(alone_text(t.content) for t in turns))
            vectors = dict(zip(texts, embedder.embed_passages(texts), strict=True))
            filled += sum(
                uow.turn_index.set_alone(t.ref, vectors[alone_text(t.content)], model) for t in turns
            )
            uow.commit()
    log.info("turns given their vector alone: %d", filled)
    return filled


def rebuild_indexes(
    uow_factory: Callable[[], UnitOfWork], indexes: Indexes, embedder: Embedder, alone: bool = False
) -> dict[str, int]:
    """``cuemem reindex``: ``rebuild_collection`` for each of ``indexes``, one report; with
    ``alone`` (``turn_alone_vector``) and the conversation log indexed, ``fill_alone_vectors``
    after it (``turns_alone``: the turns given one)."""
    stats: dict[str, int] = {}
    for collection, index in indexes.items():
        stats.update(rebuild_collection(uow_factory, collection, index, embedder))
    if alone and TURNS in indexes:
        stats["turns_alone"] = fill_alone_vectors(uow_factory, embedder)
    return stats
