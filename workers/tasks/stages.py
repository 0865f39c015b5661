"""Thin Celery tasks: decode the message, open one unit of work, call one service function,
commit, then enqueue the follow-ups. Business rules live in ``shared/``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from celery import Task

from shared import keys
from shared.indexing.collections import MEMORIES
from shared.indexing.reconcile import reconcile_indexes
from shared.indexing.reindex import rebuild_indexes
from shared.indexing.sync import push_unindexed
from shared.ingest import resume
from shared.ingest.embed import embed_event
from shared.ingest.extract import extract_event
from shared.ingest.index import index_event
from shared.ingest.llm_paths import llm_summarizer
from shared.ingest.persist import persist_event
from shared.ingest.record import record_event
from shared.ingest.resolve import resolve_event
from shared.lifecycle import maintenance
from shared.lifecycle import sweeps as lifecycle
from shared.ports import SparseTerms
from shared.queues import IndexKind, SearchMode, TaskName
from shared.settings import get_settings
from shared.storage import FollowUp, UnitOfWork
from workers.bootstrap import container
from workers.celery_app import app
from workers.endpoints.embedders import EmbeddingError
from workers.endpoints.llm_runtime import current_event_id
from workers.failures import PERMANENT_ERRORS, TRANSIENT_ERRORS, PermanentFailure, count_delivery, dead_letter

log = logging.getLogger(__name__)


class PipelineTask(Task):
    """House defaults: retries with backoff and jitter for transient failures, a redelivery cap,
    and a dead-letter record (with the reason) for anything the pipeline gives up on."""

    autoretry_for = TRANSIENT_ERRORS
    dont_autoretry_for = PERMANENT_ERRORS
    retry_backoff = 1
    retry_jitter = True
    acks_late = True
    ignore_result = True

    # Read from the settings, not the container: Celery reads these when it registers the task,
    # in the parent process, where no connection may be opened before the fork.
    @property
    def max_retries(self) -> int:  # type: ignore[override]
        return get_settings().max_retries

    @property
    def retry_backoff_max(self) -> int:  # type: ignore[override]
        return get_settings().retry_backoff_max_s

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        c = container()
        deliveries = count_delivery(c, self.request.id, self.request.retries)
        if deliveries > c.settings.max_deliveries:
            # A message that killed its worker this many times is poison: park it, ack it.
            dead_letter(
                c, self.name, self.request.id, list(args), f"delivered {deliveries} times without finishing"
            )
            return None
        return super().__call__(*args, **kwargs)

    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        if isinstance(exc, TRANSIENT_ERRORS) and not isinstance(exc, PERMANENT_ERRORS):
            # Retries ran out on an outage, not on a bad message: parking it would make a passing
            # failure permanent (and drop a turn from the publish ledger). The event stays at its
            # stage, or the turn in the ledger, and the stalled sweep sends it again later.
            log.error(
                "%s %s gave up after %d retries (%s: %s); left to the stalled sweep",
                self.name, task_id, self.request.retries, type(exc).__name__, exc,
            )  # fmt: skip
            return
        dead_letter(container(), self.name, task_id, list(args), f"{type(exc).__name__}: {exc}")


def run_unit(name: str, key: str, work: Callable[[UnitOfWork], list[FollowUp]]) -> None:
    c = container()
    started = time.perf_counter()
    token = current_event_id.set(key)  # LLM usage rows name the event they were spent on
    try:
        with c.uow() as uow:
            try:
                followups = work(uow)
            except EmbeddingError as exc:
                if exc.transient:
                    raise
                raise PermanentFailure(str(exc)) from exc
            uow.commit()
    finally:
        current_event_id.reset(token)
    # Only after commit: a follow-up must never see state that was rolled back.
    c.dispatch(followups)
    log.info(
        "%s %s done in %.1f ms, %d follow-ups",
        name,
        key,
        (time.perf_counter() - started) * 1e3,
        len(followups),
    )


@app.task(name=TaskName.RECORD.value, base=PipelineTask, bind=True)
def record(self: Task, message: dict[str, Any]) -> None:
    c = container()
    key = str(message.get("event_id")) if isinstance(message, dict) else "?"
    run_unit(self.name, key, lambda uow: record_event(uow, message, c.limits, c.seq_counter))
    settle_published(c, message)


def settle_published(c: Any, message: Any) -> None:
    """The turn's record committed (or it was parked): the publish ledger may forget it."""
    event_id = message.get("event_id") if isinstance(message, dict) else None
    ledger = c.ledger
    if isinstance(event_id, str) and ledger is not None:
        tenant = message.get("tenant_id") or "default"
        ledger.settle([keys.ledger_member(str(tenant), event_id)])


@app.task(name=TaskName.EXTRACT.value, base=PipelineTask, bind=True)
def extract(self: Task, event_id: str) -> None:
    c = container()
    threshold = c.settings.importance_threshold
    extractor = c.extractor()
    run_unit(
        self.name,
        event_id,
        lambda uow: extract_event(
            uow, event_id, threshold, c.clock(), extractor, keep_turns=c.settings.index_turns
        ),
    )


@app.task(name=TaskName.EMBED.value, base=PipelineTask, bind=True)
def embed(self: Task, event_id: str) -> None:
    c = container()
    run_unit(
        self.name,
        event_id,
        lambda uow: embed_event(uow, c.embedder, event_id, keep_turns=c.settings.index_turns),
    )


@app.task(name=TaskName.PERSIST.value, base=PipelineTask, bind=True)
def persist(self: Task, event_id: str) -> None:
    c = container()
    run_unit(self.name, event_id, lambda uow: persist_event(uow, event_id, c.clock()))


@app.task(name=TaskName.INDEX.value, base=PipelineTask, bind=True)
def index(self: Task, event_id: str) -> None:
    c = container()
    run_unit(
        self.name,
        event_id,
        lambda uow: index_event(uow, c.indexes(), c.embedder, event_id),
    )


@app.task(name=TaskName.RESOLVE.value, base=PipelineTask, bind=True)
def resolve(self: Task, event_id: str) -> None:
    c = container()
    run_unit(
        self.name,
        event_id,
        lambda uow: resolve_event(uow, event_id, c.judge, c.embedder, c.clock(), c.strategies),
    )


@app.task(name=TaskName.SYNC_INDEX.value, base=PipelineTask, bind=True)
def push_user_memories(self: Task, tenant_id: str, user_id: str) -> None:
    """Push one user's changed memories (statuses, merges, edits) to the memory index."""
    c = container()

    def work(uow: UnitOfWork) -> list[FollowUp]:
        push_unindexed(uow, MEMORIES, c.index(), c.embedder, tenant_id, user_id)
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


@app.task(name=TaskName.RESUME_STALLED.value, base=PipelineTask, bind=True)
def resume_stalled(self: Task, older_than_s: int = 300) -> None:
    """Re-drive events stuck at one stage, and re-send published turns never recorded, for longer
    than ``older_than_s`` (keep it above the broker's visibility timeout)."""
    c = container()
    before = c.clock() - timedelta(seconds=older_than_s)
    run_unit(self.name, "sweep", lambda uow: resume.resume_stalled(uow, before, c.ledger))


@app.task(name=TaskName.DECAY.value, base=PipelineTask, bind=True)
def decay(self: Task) -> None:
    """Recompute every half-life score in Postgres (set-based, batched by key range)."""
    c = container()
    started = time.perf_counter()
    stats = maintenance.recompute_scores(c.uow, c.clock(), c.lifecycle.decay)
    # The index owner brings the payload scores up to date (only those that moved).
    c.dispatch([FollowUp(TaskName.PUSH_SCORES.value, ())])
    log.info("%s done in %.1f s: %s", self.name, time.perf_counter() - started, stats)


@app.task(name=TaskName.REINFORCE.value, base=PipelineTask, bind=True)
def reinforce(
    self: Task, recall_id: str, tenant_id: str, user_id: str, memory_ids: list[str], now: str
) -> None:
    """Count a recall's memories as used (sent by recall_for); keyed by the recall id."""
    c = container()
    at = datetime.fromisoformat(now)

    def work(uow: UnitOfWork) -> list[FollowUp]:
        lifecycle.reinforce_recalled(uow, recall_id, tenant_id, user_id, memory_ids, at, c.lifecycle.decay)
        return []

    run_unit(self.name, recall_id, work)


@app.task(name=TaskName.EXPIRE.value, base=PipelineTask, bind=True)
def expire(self: Task) -> None:
    """Task TTL: expired tasks leave default recall; their users' index is synced after."""
    c = container()
    stats, touched = lifecycle.expire_tasks(c.uow, c.clock(), c.lifecycle)
    c.dispatch([FollowUp(TaskName.SYNC_INDEX.value, pair) for pair in touched])
    log.info("%s: %s", self.name, stats)


@app.task(name=TaskName.ARCHIVE.value, base=PipelineTask, bind=True)
def archive(self: Task) -> None:
    """Archive memories whose score stayed under the threshold; their users' index is synced after."""
    c = container()
    stats, touched = lifecycle.archive_stale(c.uow, c.clock(), c.lifecycle)
    c.dispatch([FollowUp(TaskName.SYNC_INDEX.value, pair) for pair in touched])
    log.info("%s: %s", self.name, stats)


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


@app.task(name=TaskName.CONSOLIDATE.value, base=PipelineTask, bind=True)
def consolidate(self: Task) -> None:
    """Recurring episodes become semantic memories; the touched users' index is synced after."""
    c = container()
    stats, touched = maintenance.consolidate(c.uow, c.embedder, c.clock(), summarize=llm_summarizer(c.llm))
    c.dispatch([FollowUp(TaskName.SYNC_INDEX.value, pair) for pair in touched])
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
    return rebuild_indexes(c.uow, c.indexes(), c.embedder)
