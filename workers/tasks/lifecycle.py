"""Lifecycle tasks, mostly from beat: decay, reinforcement on use, task TTL, archive and
consolidation (``shared/lifecycle/``); the users they touch are synced by the index owner after."""

from __future__ import annotations

import logging
import time
from datetime import datetime

from celery import Task

from shared.lifecycle import maintenance
from shared.lifecycle import sweeps as lifecycle
from shared.lifecycle.consolidation import llm_summarizer
from shared.queues import TaskName
from shared.storage import FollowUp, UnitOfWork
from workers.bootstrap import container
from workers.celery_app import app
from workers.tasks.base import PipelineTask, finish_sweep, run_unit

log = logging.getLogger(__name__)


@app.task(name=TaskName.DECAY.value, base=PipelineTask, bind=True)
def decay(self: Task) -> None:
    """Recompute every half-life score in Postgres (set-based, batched by key range)."""
    c = container()
    started = time.perf_counter()
    stats = maintenance.recompute_scores(
        c.uow, c.clock(), c.lifecycle.decay, tolerance=c.lifecycle.score_tolerance
    )
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
    finish_sweep(self.name, c, *lifecycle.expire_tasks(c.uow, c.clock(), c.lifecycle))


@app.task(name=TaskName.ARCHIVE.value, base=PipelineTask, bind=True)
def archive(self: Task) -> None:
    """Archive memories whose score stayed under the threshold; their users' index is synced after."""
    c = container()
    finish_sweep(self.name, c, *lifecycle.archive_stale(c.uow, c.clock(), c.lifecycle))


@app.task(name=TaskName.CONSOLIDATE.value, base=PipelineTask, bind=True)
def consolidate(self: Task) -> None:
    """Recurring episodes become semantic memories; the touched users' index is synced after."""
    c = container()
    summarize = llm_summarizer(c.llm)
    finish_sweep(self.name, c, *maintenance.consolidate(c.uow, c.embedder, c.clock(), summarize=summarize))


@app.task(name=TaskName.PRIVACY_REWRITE.value, base=PipelineTask, bind=True)
def privacy_rewrite(self: Task) -> None:
    """Rewrite the embedded Redis's files when a privacy delete inside the window marked them."""
    from workers.redis.rewrite import flush_pending

    c = container()
    settings = c.settings
    if flush_pending(c.redis_client(), settings.resolved_data_dir, settings.privacy_rewrite_min_interval_s):
        log.info("%s: the Redis files rewritten after a deferred privacy delete", self.name)
