"""Index tasks, run by the index owner: pushes, point deletes, score pushes, reconciliation,
the HNSW build, searches for processes that cannot open the embedded index, and reindex
(``shared/indexing/``: one mechanism over both collections)."""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from typing import Any

from celery import Task

from shared import erasure
from shared.indexing.reconcile import reconcile_indexes
from shared.indexing.reindex import rebuild_indexes
from shared.indexing.sync import push_unindexed
from shared.lifecycle import sweeps as lifecycle
from shared.ports import IndexUnavailable, SparseTerms
from shared.queues import IndexKind, SearchMode, TaskName
from shared.storage import FollowUp, UnitOfWork
from workers.bootstrap import container
from workers.celery_app import app
from workers.tasks.base import PipelineTask, run_unit

log = logging.getLogger(__name__)


@app.task(name=TaskName.SYNC_INDEX.value, base=PipelineTask, bind=True)
def push_user_memories(self: Task, tenant_id: str, user_id: str) -> None:
    """Push one user's changed memories (statuses, merges, edits) to the memory index, and the
    turns whose context window was embedded again (after a privacy delete) to the turn index."""
    c = container()

    def work(uow: UnitOfWork) -> list[FollowUp]:
        for collection, index in c.indexes().items():
            push_unindexed(uow, collection, index, c.embedder, tenant_id, user_id)
        return []

    run_unit(self.name, f"{tenant_id}/{user_id}", work)


@app.task(name=TaskName.DELETE_POINTS.value, base=PipelineTask, bind=True)
def delete_points(
    self: Task, tenant_id: str, user_id: str, memory_ids: list[str], kind: str = IndexKind.MEMORIES.value
) -> None:
    """Drop the points of hard-deleted memories, or (``kind`` "turns") of redacted turns: their
    rows are already gone or blank, so a redelivery deletes nothing twice, and reconciliation
    would remove them too, only later."""
    c = container()
    index = c.index(IndexKind.TURNS if kind == IndexKind.TURNS else IndexKind.MEMORIES)
    if index is None:
        return
    index.delete(tenant_id, user_id, list(memory_ids))
    log.info("%s %s/%s: %d points", self.name, tenant_id, user_id, len(memory_ids))


@app.task(name=TaskName.ERASE_POINTS.value, bind=True, ignore_result=False)
def erase_points(self: Task, tenant_id: str, user_id: str) -> list[dict[str, Any]]:
    """Every point of one user in every index, deleted and counted (a user deleted everywhere,
    ``service/operations/erasure.py``, waits for this answer). Deleting again deletes nothing."""
    c = container()
    parts = erasure.erase_points(
        {col.kind.value: index for col, index in c.indexes().items()}, tenant_id, user_id
    )
    log.info("%s %s/%s: %s", self.name, tenant_id, user_id, {p.store: p.deleted for p in parts})
    return [asdict(p) for p in parts]


@app.task(name=TaskName.PUSH_SCORES.value, base=PipelineTask, bind=True)
def push_scores(self: Task) -> None:
    """Payload scores that drifted from Postgres, pushed in batches (on the index queue)."""
    c = container()
    stats = lifecycle.push_scores(c.uow, c.index(), c.lifecycle.score_tolerance)
    log.info("%s: %s", self.name, stats)


@app.task(name=TaskName.RECONCILE.value, base=PipelineTask, bind=True)
def reconcile(self: Task) -> None:
    """Repair drift between Postgres and the memory index (missing, extra, stale points), and the
    conversation-log index when turns are indexed."""
    c = container()
    stats = reconcile_indexes(c.uow, c.indexes(), c.embedder, c.lifecycle.score_tolerance)
    log.info("%s: %s", self.name, stats)


@app.task(name=TaskName.OPTIMIZE_INDEX.value, bind=True, acks_late=False)
def optimize_index(self: Task) -> None:
    """Build the embedded indexes' HNSW graphs (the engine has no background optimizer): the
    memory index and the conversation log, whose dense search is a scan of the user's turns
    until then (42-54 ms at 200k turns, about 5 ms with the graph; docs/benchmarks/latency.md)."""
    c = container()
    started = time.perf_counter()
    changed = {collection.kind.value: index.optimize() for collection, index in c.indexes().items()}
    log.info("%s: changed %s in %.1f s", self.name, changed, time.perf_counter() - started)


@app.task(name=TaskName.SEARCH.value, bind=True, ignore_result=False, acks_late=False)
def search(
    self: Task,
    tenant_id: str,
    user_id: str,
    query: Any,
    limit: int,
    statuses: list[str],
    mode: str = SearchMode.VECTOR.value,
    kind: str = IndexKind.MEMORIES.value,
) -> list[dict[str, Any]]:
    """Vector or keyword search served by the index owner for processes that cannot open the
    embedded index. ``mode`` (``SearchMode``) says what ``query`` is: the dense vector (default,
    what older clients send) or the sparse terms as ``[indices, values]``.

    Not late-acked: a search nobody waits for any more must not be redelivered.
    """
    return _search(tenant_id, user_id, query, limit, statuses, mode, kind)


@app.task(name=TaskName.SEARCH_BATCH.value, bind=True, ignore_result=False, acks_late=False)
def search_batch(
    self: Task, tenant_id: str, user_id: str, searches: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Every search of one recall in one round trip (``workers.index.remote``): each answered with
    ``{"hits": [...]}``, or ``{"error": ...}`` when its index cannot serve it now (the others still
    run). Not late-acked, as ``memory.search``."""
    out: list[dict[str, Any]] = []
    for s in searches:
        try:
            hits = _search(tenant_id, user_id, s["query"], s["limit"], s["statuses"], s["mode"], s["kind"])
        except IndexUnavailable as exc:
            out.append({"error": str(exc)})
            continue
        out.append({"hits": hits})
    return out


def _search(
    tenant_id: str, user_id: str, query: Any, limit: int, statuses: list[str], mode: str, kind: str
) -> list[dict[str, Any]]:
    c = container()
    index = c.index(IndexKind(kind)) if kind in {k.value for k in IndexKind} else None
    if index is None:
        raise ValueError(
            f"unknown or disabled index {kind!r}; expected one of {[k.value for k in IndexKind]}"
        )
    if mode == SearchMode.KEYWORDS:
        indices, values = query
        terms = SparseTerms(tuple(indices), tuple(values))
        hits = index.search_keywords(tenant_id, user_id, terms, limit, statuses)
    elif mode == SearchMode.VECTOR:
        hits = index.search(tenant_id, user_id, query, limit, statuses)
    else:
        raise ValueError(f"unknown search mode {mode!r}; expected one of {[m.value for m in SearchMode]}")
    return [{"id": h.id, "score": h.score, "payload": h.payload} for h in hits]


@app.task(name=TaskName.REINDEX.value, bind=True, ignore_result=False)
def reindex(self: Task) -> dict[str, int]:
    c = container()
    return rebuild_indexes(c.uow, c.indexes(), c.embedder, c.settings.turn_alone_vector)
