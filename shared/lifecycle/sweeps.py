"""The memory lifecycle: reinforcement on use, task TTL, archive and restore, score pushes to the
index, and one maintenance run (the reconciliation itself is ``shared/indexing/reconcile.py``).

The score itself is defined once, in ``shared/scoring.py``; its set-based recompute is
``shared/lifecycle/maintenance.py: recompute_scores``. The sweeps here run from beat (``beat_schedule.py``)
and from ``cuemem maintain``; each takes ``now`` from the caller (an injectable clock), works in
batches that each commit, and is idempotent: a second run at the same ``now`` changes nothing.

Status changes reach the index the way every other change does: the row's ``version`` moves,
and ``memory.sync_index`` (or the reconciliation) upserts the point with its new payload. Score
changes are payload-only: ``push_scores`` sets the payload ``score`` of points whose stored score
drifted, without rewriting vectors.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from shared.indexing.collections import MEMORIES, Indexes
from shared.indexing.reconcile import reconcile_indexes
from shared.indexing.sync import push_unindexed
from shared.lifecycle.consolidation import Group
from shared.lifecycle.maintenance import consolidate, recompute_scores
from shared.models import Memory, MemoryStatus
from shared.ports import Embedder, VectorIndex
from shared.scoring import DecayPolicy, score
from shared.settings import Settings
from shared.storage import HistoryEntry, StatusChange, UnitOfWork

log = logging.getLogger(__name__)

JUDGE = "lifecycle"
TASK_DUE_REASON = "task expired: its due time passed"
TASK_AGE_REASON = "task expired: no due time and older than the task TTL"
SWEEP_BATCH = 5000


@dataclass(frozen=True)
class LifecyclePolicy:
    """Every knob of the lifecycle, built from settings by the composition root."""

    decay: DecayPolicy = field(default_factory=DecayPolicy)
    archive_threshold: float = 1.0
    archive_after: timedelta = timedelta(days=30)
    task_ttl: timedelta = timedelta(days=7)
    score_tolerance: float = 0.01
    # A redelivered memory.reinforce arrives within the broker's visibility timeout; claims older
    # than this can go.
    recall_claims_kept: timedelta = timedelta(days=7)

    def __post_init__(self) -> None:
        if self.archive_threshold < 0:
            raise ValueError(f"archive_threshold: {self.archive_threshold} must not be negative")
        if self.archive_after < timedelta(0):
            raise ValueError(f"archive_after: {self.archive_after} must not be negative")
        if self.task_ttl <= timedelta(0):
            raise ValueError(f"task_ttl: {self.task_ttl} must be positive")
        if self.score_tolerance < 0:
            raise ValueError(f"score_tolerance: {self.score_tolerance} must not be negative")


class RestoreRefused(LookupError):
    """``cuemem restore`` cannot restore this memory; the message says why."""


# --- reinforcement on use ---------------------------------------------------------------------


def reinforce_recalled(
    uow: UnitOfWork,
    recall_id: str,
    tenant_id: str,
    user_id: str,
    memory_ids: Sequence[str],
    now: datetime,
    policy: DecayPolicy,
) -> int:
    """Count one use of each memory a recall returned. Keyed by the recall id, claimed in the same
    transaction as the counts: a redelivered message changes nothing. Returns the rows counted."""
    ids = sorted(set(memory_ids))
    if not ids:
        return 0
    if not uow.lifecycle.claim_recall(recall_id, tenant_id, user_id, now):
        log.info("recall %s already reinforced: nothing to do", recall_id)
        return 0
    counted = uow.lifecycle.reinforce(tenant_id, user_id, ids, now, policy)
    log.info("recall %s reinforced %d memories of %s/%s", recall_id, counted, tenant_id, user_id)
    return counted


# --- status sweeps ----------------------------------------------------------------------------


def _sweep(
    uow_factory: Callable[[], UnitOfWork],
    action: str,
    now: datetime,
    page: Callable[[UnitOfWork, str], tuple[list[StatusChange], str | None]],
) -> tuple[int, list[tuple[str, str]]]:
    """Run a set-based status change page by page, one transaction each, with a history entry per
    memory moved; returns how many moved and the users whose index needs a sync."""
    moved = 0
    touched: set[tuple[str, str]] = set()
    after = ""
    while True:
        with uow_factory() as uow:
            changes, last = page(uow, after)
            for change in changes:
                uow.history.add(
                    HistoryEntry(
                        change.memory_id, change.tenant_id, change.user_id, action, change.reason, JUDGE, now
                    )
                )
            uow.commit()
        moved += len(changes)
        touched.update((c.tenant_id, c.user_id) for c in changes)
        if last is None:
            return moved, sorted(touched)
        after = last


def expire_tasks(
    uow_factory: Callable[[], UnitOfWork],
    now: datetime,
    policy: LifecyclePolicy,
    batch_size: int = SWEEP_BATCH,
) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Tasks expire once their due time passed, or without one ``policy.task_ttl`` after they were
    stated; recall excludes expired memories unless asked. Also forgets old recall claims (their
    TTL). Returns counts and the users whose index needs a sync."""
    reasons = (TASK_DUE_REASON, TASK_AGE_REASON)
    stated_before = now - policy.task_ttl
    expired, touched = _sweep(
        uow_factory,
        "expired",
        now,
        lambda uow, after: uow.lifecycle.expire_tasks(now, stated_before, reasons, after, batch_size),
    )
    with uow_factory() as uow:
        pruned = uow.lifecycle.prune_recall_claims(now - policy.recall_claims_kept)
        uow.commit()
    stats = {"expired": expired, "recall_claims_pruned": pruned}
    log.info("task TTL at %s: %s", now.isoformat(), stats)
    return stats, touched


def archive_stale(
    uow_factory: Callable[[], UnitOfWork],
    now: datetime,
    policy: LifecyclePolicy,
    batch_size: int = SWEEP_BATCH,
) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Archive active memories whose score has stayed under ``policy.archive_threshold`` for
    ``policy.archive_after``. Between two accesses a score only falls, so "under the threshold
    for the whole window" is "under it at the window's start, and not accessed since": a single
    run a year later archives what would have been archived along the way. Archived memories
    stay in Postgres (and in the index, flagged, so a recall asking for them finds them); default
    recall excludes them."""
    since = now - policy.archive_after
    days = policy.archive_after.total_seconds() / 86400
    reason = f"score under {policy.archive_threshold:g} for {days:g} days without use"
    archived, touched = _sweep(
        uow_factory,
        "archived",
        now,
        lambda uow, after: uow.lifecycle.archive_stale(
            since, policy.archive_threshold, policy.decay, reason, now, after, batch_size
        ),
    )
    stats = {"archived": archived}
    log.info("archive at %s: %s", now.isoformat(), stats)
    return stats, touched


def save_change(
    uow: UnitOfWork,
    memory: Memory,
    now: datetime,
    entry: HistoryEntry,
    *,
    rescore: DecayPolicy | None = None,
) -> Memory:
    """Store a memory changed in place, with the history entry saying why: ``updated_at`` is
    ``now`` and ``version`` moves on, which is what brings the index up to date. With
    ``rescore``, a change of what the score depends on (type, last access), the score is
    recomputed at ``now`` under that policy first."""
    if rescore is not None:
        memory.score = score(
            memory.importance, memory.type, memory.last_accessed_at, memory.access_count, now, rescore
        )
    memory.updated_at = now
    memory.version += 1
    uow.memories.save(memory)
    uow.history.add(entry)
    return memory


def restore_memory(
    uow: UnitOfWork, tenant_id: str, user_id: str, memory_id: str, now: datetime, policy: DecayPolicy
) -> Memory:
    """Bring one archived memory back: active again, its last access moved to ``now`` (a restore
    is a use; otherwise the next archive sweep would take it straight back), version + 1 so the
    index gets its new status, and a history entry. Raises RestoreRefused naming the problem."""
    memory = uow.memories.get(tenant_id, user_id, memory_id)
    if memory is None:
        # The same answer for an unknown id and another user's id: ids never leak across users.
        raise RestoreRefused(f"no memory {memory_id!r} for user {user_id!r} (tenant {tenant_id!r})")
    if memory.status is not MemoryStatus.ARCHIVED:
        raise RestoreRefused(
            f"memory {memory_id!r} is {memory.status.value}, not archived: only archived memories can be "
            "restored"
        )
    memory.status = MemoryStatus.ACTIVE
    memory.status_reason = "restored from the archive"
    memory.last_accessed_at = max(memory.last_accessed_at, now)
    entry = HistoryEntry(memory.id, tenant_id, user_id, "restored", "restored on request", "operator", now)
    return save_change(uow, memory, now, entry, rescore=policy)


# --- the index: score pushes and reconciliation -----------------------------------------------


def push_scores(
    uow_factory: Callable[[], UnitOfWork], index: VectorIndex, tolerance: float, batch_size: int = 1000
) -> dict[str, int]:
    """Set the payload score of indexed points whose row's score drifted by more than
    ``tolerance`` (after a recompute, a reinforcement), batch by batch, payload only.

    The index is written before the batch commits its ``indexed_score``: a crash in between
    pushes the same scores again next time, which is harmless."""
    stats = {"pushed": 0, "batches": 0}
    after = ""
    while True:
        with uow_factory() as uow:
            page = uow.memory_index.stale_scores(after, batch_size, tolerance)
            if not page:
                break
            by_user: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
            for s in page:
                by_user.setdefault((s.tenant_id, s.user_id), {})[s.memory_id] = {"score": s.score}
            for (tenant_id, user_id), payloads in by_user.items():
                index.set_payload(tenant_id, user_id, payloads)
            uow.memory_index.mark_scores_indexed([(s.memory_id, s.score) for s in page])
            uow.commit()
        stats["pushed"] += len(page)
        stats["batches"] += 1
        after = page[-1].memory_id
    log.info("score push: %s", stats)
    return stats


# --- one maintenance run (cuemem maintain) ----------------------------------------------------


def maintain_store(
    uow_factory: Callable[[], UnitOfWork],
    embedder: Embedder,
    now: datetime,
    policy: LifecyclePolicy,
    summarize: Callable[[Group], str | None] | None = None,
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The Postgres half of a maintenance run, in order: decay, TTL, archive, consolidation.
    Returns the counts and the users whose index needs a sync."""
    decay = recompute_scores(uow_factory, now, policy.decay, tolerance=policy.score_tolerance)
    ttl, expired_users = expire_tasks(uow_factory, now, policy)
    archive, archived_users = archive_stale(uow_factory, now, policy)
    consolidation, consolidated_users = consolidate(uow_factory, embedder, now, summarize=summarize)
    touched = sorted({*expired_users, *archived_users, *consolidated_users})
    summary = {"decay": decay, "ttl": ttl, "archive": archive, "consolidation": consolidation}
    return summary, touched


def maintain_index(
    uow_factory: Callable[[], UnitOfWork],
    indexes: Indexes,
    embedder: Embedder,
    touched: Sequence[tuple[str, str]],
    policy: LifecyclePolicy,
) -> dict[str, Any]:
    """The index half, run by whoever owns the index: push the touched users' changed memories,
    push drifted scores, then reconcile every user so that Postgres and each of ``indexes`` (the
    memory index, and the conversation log when it is indexed) agree exactly."""
    index = indexes[MEMORIES]
    indexed = 0
    for tenant_id, user_id in touched:
        with uow_factory() as uow:
            indexed += push_unindexed(uow, MEMORIES, index, embedder, tenant_id, user_id)
            uow.commit()
    scores = push_scores(uow_factory, index, policy.score_tolerance)
    drift = reconcile_indexes(uow_factory, indexes, embedder, policy.score_tolerance)
    return {"indexed": indexed, "scores": scores, "reconcile": drift}


def policy_from(settings: Settings) -> LifecyclePolicy:
    """The policy the settings describe (``CUEMEM_DECAY_*``, ``CUEMEM_ARCHIVE_*``, ...)."""
    return LifecyclePolicy(
        decay=DecayPolicy.configured(settings.decay_gamma, settings.decay_base, settings.decay_unit_hours),
        archive_threshold=settings.archive_threshold,
        archive_after=timedelta(days=settings.archive_after_days),
        task_ttl=timedelta(days=settings.task_ttl_days),
        score_tolerance=settings.score_push_tolerance,
    )
