"""Maintenance over stored memories: half-life score recompute, consolidation, history.

These jobs run from beat and from `cuemem maintain`; long ones commit batch by
batch (or user by user) so that progress survives an interruption and a re-run finishes the work.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from shared.bad_rows import skipping_bad_rows
from shared.lifecycle.consolidation import ConsolidationPolicy, Group, build_semantic, plan, semantic_id
from shared.models import Memory, MemoryType
from shared.ports import Embedder
from shared.queues import TaskName
from shared.scoring import DecayPolicy
from shared.storage import HistoryEntry, UnitOfWork

log = logging.getLogger(__name__)

UNSCORABLE_NAMED = 20  # how many memories without a finite last use a run names in its log


# --- decay ------------------------------------------------------------------------------------


def recompute_scores(
    uow_factory: Callable[[], UnitOfWork],
    now: datetime,
    policy: DecayPolicy,
    batch_size: int = 50_000,
    tolerance: float = 0.0,
) -> dict[str, int]:
    """Recompute every memory's half-life score in Postgres, one key range per transaction.

    Set-based (one UPDATE per range, no per-row Python), so it scales with the table; safe to
    run twice (the same ``now`` yields the same scores, and unchanged rows are not written).
    A row is written only when its score moved by more than ``tolerance`` (the lifecycle's
    ``score_tolerance`` on beat, the same by which the index payload may lag Postgres): an hourly
    run then rewrites only the memories whose score changes enough to matter, not every row.
    """
    stats = {"changed": 0, "batches": 0}
    with uow_factory() as uow:
        unscorable = uow.lifecycle.unscorable(UNSCORABLE_NAMED)
    if unscorable:
        # Left out by the set-based statements (they would fail their whole page); named here,
        # and counted (only when there are any, as the per-user sweeps count what they skip).
        log.warning(
            "%d+ memories have a last use at infinity and keep their score (and status): %s",
            len(unscorable),
            ", ".join(f"{u.tenant_id}/{u.user_id}/{u.memory_id}" for u in unscorable),
        )
        stats["unscorable"] = len(unscorable)
    after = ""
    while True:
        with uow_factory() as uow:
            changed, last = uow.lifecycle.recompute_scores(now, policy, after, batch_size, tolerance)
            uow.commit()
        if last is None:
            break
        stats["changed"] += changed
        stats["batches"] += 1
        after = last
    log.info("scores recomputed at %s: %s", now.isoformat(), stats)
    return stats


# --- consolidate ------------------------------------------------------------------------------


def consolidate(
    uow_factory: Callable[[], UnitOfWork],
    embedder: Embedder,
    now: datetime,
    policy: ConsolidationPolicy | None = None,
    summarize: Callable[[Group], str | None] | None = None,
    max_users: int = 1000,
) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Turn recurring episodes into semantic memories, one user per transaction.

    Returns counts and the (tenant, user) pairs whose index needs a sync. Bounded per run
    (``max_users``) and per user (``policy.max_topics_per_user``); a second run with nothing new
    changes nothing.
    """
    policy = policy or ConsolidationPolicy()
    since = now - timedelta(days=policy.window_days)
    with uow_factory() as uow:
        users = uow.memories.users_with_recent(MemoryType.EPISODIC, since, max_users)
    stats = {"users": len(users), "created": 0, "updated": 0, "unchanged": 0, "skipped": 0}
    touched: list[tuple[str, str]] = []
    for tenant_id, user_id in users:

        def one_user(uow: UnitOfWork, tenant_id: str = tenant_id, user_id: str = user_id) -> dict[str, int]:
            counts = {"created": 0, "updated": 0, "unchanged": 0}
            uow.memories.lock_user(tenant_id, user_id)
            episodes = uow.memories.recent_of_type(tenant_id, user_id, MemoryType.EPISODIC, since, 2000)
            for group in plan(episodes, now, policy):
                existing = uow.memories.get(tenant_id, user_id, semantic_id(tenant_id, user_id, group.topic))
                cited = {s["event_id"] for m in group.members for s in m.sources}
                if existing is not None and {s["event_id"] for s in existing.sources} >= cited:
                    counts["unchanged"] += 1
                    continue
                known = (
                    {h.related_id for h in uow.history.for_memories(tenant_id, user_id, [existing.id])}
                    if existing
                    else set()
                )
                memory = build_semantic(group, now, existing, summarize(group) if summarize else None)
                memory.embedding = embedder.embed_passages([memory.content])[0]
                memory.embedding_model = embedder.model_name
                if existing is None:
                    uow.memories.add(memory)
                    counts["created"] += 1
                else:
                    uow.memories.save(memory)
                    counts["updated"] += 1
                reason = f"{group.mentions} mentions of {group.topic} over {group.days} days"
                for member in group.members:
                    if member.id in known:
                        continue
                    uow.history.add(
                        HistoryEntry(
                            memory.id, tenant_id, user_id, "consolidated", reason, "rules", now, member.id
                        )
                    )
                    uow.history.add(
                        HistoryEntry(
                            member.id,
                            tenant_id,
                            user_id,
                            "consolidated_into",
                            reason,
                            "rules",
                            now,
                            memory.id,
                        )
                    )
            return counts

        counts = skipping_bad_rows(uow_factory, TaskName.CONSOLIDATE.value, [tenant_id, user_id], one_user)
        if counts is None:  # a bad row: recorded, and the other users go on
            stats["skipped"] += 1
            continue
        for key, value in counts.items():
            stats[key] += value
        if counts["created"] or counts["updated"]:
            touched.append((tenant_id, user_id))
    log.info("consolidation at %s: %s", now.isoformat(), stats)
    return stats, touched


# --- history ----------------------------------------------------------------------------------


def history_chain(
    uow: UnitOfWork, tenant_id: str, user_id: str, memory_id: str, limit: int = 50
) -> dict[str, Any]:
    """A memory with every memory linked to it by supersession, merge or consolidation, and the
    history of each, oldest first. Scoped to one user: another user's id finds nothing."""
    start = uow.memories.get(tenant_id, user_id, memory_id)
    if start is None:
        return {"memory_id": memory_id, "found": False, "memories": [], "history": []}
    seen: dict[str, Memory] = {start.id: start}
    frontier = [start.id]
    entries: dict[tuple[str, str, str, str | None], Any] = {}
    while frontier and len(seen) < limit:
        batch, frontier = frontier, []
        for entry in uow.history.for_memories(tenant_id, user_id, batch):
            entries[(entry.memory_id, entry.action, entry.at.isoformat(), entry.related_id)] = entry
            linked = [entry.related_id] + [m.superseded_by for m in seen.values()]
            for other in linked:
                if other and other not in seen:
                    found = uow.memories.get(tenant_id, user_id, other)
                    if found is not None:
                        seen[other] = found
                        frontier.append(other)
    ordered = sorted(entries.values(), key=lambda e: (e.at, e.memory_id, e.action))
    memories = sorted(seen.values(), key=lambda m: ((m.valid_from or m.created_at), m.id))
    return {
        "memory_id": memory_id,
        "found": True,
        "memories": [m.to_public() for m in memories],
        "history": [
            {
                "memory_id": e.memory_id,
                "action": e.action,
                "related_id": e.related_id,
                "reason": e.reason,
                "judge": e.judge,
                "event_id": e.event_id,
                "at": e.at.isoformat(),
            }
            for e in ordered
        ],
    }
