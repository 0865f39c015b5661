"""The HTTP API's operations on a container (``cuemem restore`` and ``cuemem keys`` use them too):
transactions around ``shared.lifecycle.curation``, the index brought up to date after each commit,
readiness and the numbers ``/metrics`` reads.

An API server runs on ``workers.bootstrap.build_api_container``: on the embedded default its
indexes only search through the index worker and refuse writes, so every write here falls back
to sending the index worker a task (:mod:`service.operations.index_followups`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, NamedTuple, TypeVar

from service.operations.index_followups import Outcome, delete_points, sync_index
from service.operations.ports import Indexing, Stores
from shared.api_keys import ApiKey, issue_key, key_prefix, matches
from shared.ingest.embed import embed_windows
from shared.lifecycle import curation
from shared.models import Memory, MemoryStatus, MemoryType, turn_point_id
from shared.queues import IndexKind
from shared.settings import Settings
from shared.storage import EMBEDDING_MODEL_KEY, UnitOfWork
from workers.bootstrap import Container
from workers.redis.rewrite import after_privacy_delete

log = logging.getLogger(__name__)

T = TypeVar("T")


# --- API keys ---------------------------------------------------------------------------------


def create_key(container: Stores, tenant_id: str, name: str) -> dict[str, Any]:
    """A new key for the tenant: ``{id, tenant_id, name, key}``; the key is not stored, only its hash."""
    curation.check_ids({"tenant": tenant_id}, container.settings.max_id_chars)
    issued = issue_key(tenant_id, name, container.clock())
    with container.uow() as uow:
        uow.api_keys.add(issued.record, issued.key_hash)
        uow.commit()
    log.info("api key %s created for tenant %s", issued.record.id, tenant_id)
    return {"id": issued.record.id, "tenant_id": tenant_id, "name": name, "key": issued.key}


def list_keys(container: Stores, tenant_id: str | None) -> list[ApiKey]:
    with container.uow() as uow:
        return uow.api_keys.list(tenant_id)


def revoke_key(container: Stores, key_id: str) -> ApiKey | None:
    with container.uow() as uow:
        key = uow.api_keys.revoke(key_id, container.clock())
        uow.commit()
    if key is not None:
        log.info("api key %s of tenant %s revoked", key.id, key.tenant_id)
    return key


def tenant_of_key(container: Stores, key: str) -> str | None:
    """The tenant of a valid, unrevoked key; None otherwise (one indexed read per request, so a
    revocation takes effect at once)."""
    prefix = key_prefix(key)
    if prefix is None:
        return None
    with container.uow() as uow:
        candidates = uow.api_keys.by_prefix(prefix)
    for record, key_hash in candidates:
        if matches(key, key_hash):
            return record.tenant_id if record.active else None
    return None


# --- memories ---------------------------------------------------------------------------------


class MemoryListing(NamedTuple):
    """A page of a user's memories, their count, and the user's zone to read their times in
    (``EventRepository.user_offset``: seconds east of UTC, None when the user has no turn)."""

    items: list[Memory]
    total: int
    user_offset_s: int | None


def list_memories(
    container: Stores,
    tenant_id: str,
    user_id: str,
    statuses: frozenset[MemoryStatus],
    memory_type: MemoryType | None,
    limit: int,
    offset: int,
) -> MemoryListing:
    with container.uow() as uow:
        items, total = uow.curation.page(tenant_id, user_id, statuses, memory_type, limit, offset)
        return MemoryListing(items, total, uow.events.user_offset(tenant_id, user_id))


def list_users(container: Stores, tenant_id: str, limit: int, offset: int) -> dict[str, Any]:
    """The tenant's users that have memories: ``{"items": [{user_id, memories, active}], "total"}``."""
    with container.uow() as uow:
        rows, total = uow.curation.users(tenant_id, limit, offset)
    items = [{"user_id": user, "memories": n, "active": active} for user, n, active in rows]
    return {"items": items, "total": total}


def get_memory(container: Stores, tenant_id: str, user_id: str, memory_id: str) -> Memory:
    with container.uow() as uow:
        memory = uow.memories.get(tenant_id, user_id, memory_id)
    if memory is None:
        raise curation.MemoryNotFound(memory_id, user_id)
    return memory


def history(container: Stores, tenant_id: str, user_id: str, memory_id: str) -> dict[str, Any]:
    from shared.lifecycle.maintenance import history_chain

    with container.uow() as uow:
        chain = history_chain(uow, tenant_id, user_id, memory_id)
    if not chain["found"]:
        raise curation.MemoryNotFound(memory_id, user_id)
    return chain


def _changed(container: Indexing, tenant_id: str, user_id: str, change: Callable[[UnitOfWork], T]) -> T:
    """Run one change in its own transaction, then bring the user's index up to date."""
    return _changed_and_indexed(container, tenant_id, user_id, change)[0]


def _changed_and_indexed(
    container: Indexing, tenant_id: str, user_id: str, change: Callable[[UnitOfWork], T]
) -> tuple[T, Outcome]:
    with container.uow() as uow:
        result = change(uow)
        uow.commit()
    return result, sync_index(container, tenant_id, user_id)


def edit(container: Indexing, tenant_id: str, user_id: str, memory_id: str, changes: curation.Edit) -> Memory:
    c = container
    memory = _changed(
        c,
        tenant_id,
        user_id,
        lambda uow: curation.edit_memory(
            uow, c.embedder, tenant_id, user_id, memory_id, changes, c.clock(), c.lifecycle.decay
        ),
    )
    log.info("memory %s of %s/%s edited: %s", memory_id, tenant_id, user_id, ",".join(changes.fields))
    return memory


def invalidate(container: Indexing, tenant_id: str, user_id: str, memory_id: str, reason: str) -> Memory:
    now = container.clock()
    memory = _changed(
        container,
        tenant_id,
        user_id,
        lambda uow: curation.invalidate_memory(uow, tenant_id, user_id, memory_id, reason, now),
    )
    log.info("memory %s of %s/%s invalidated", memory_id, tenant_id, user_id)
    return memory


def restore(
    container: Indexing, tenant_id: str, user_id: str, memory_id: str, now: datetime | None = None
) -> tuple[Memory, Outcome]:
    """Active again, for the API and ``cuemem restore`` alike: archived memories take the
    lifecycle's restore (a restore is a use), superseded, expired and forgotten ones lose their end
    of validity (``shared.lifecycle.curation.restore``). Also says where the index was synced."""
    at, policy = now or container.clock(), container.lifecycle.decay
    memory, indexed = _changed_and_indexed(
        container,
        tenant_id,
        user_id,
        lambda uow: curation.restore(uow, tenant_id, user_id, memory_id, at, policy),
    )
    log.info("memory %s of %s/%s restored", memory_id, tenant_id, user_id)
    return memory, indexed


def forget(container: Indexing, tenant_id: str, user_id: str, memory_id: str) -> list[str]:
    now = container.clock()
    memory = _changed(
        container, tenant_id, user_id, lambda uow: curation.forget(uow, tenant_id, user_id, memory_id, now)
    )
    log.info("memory %s of %s/%s forgotten (soft)", memory_id, tenant_id, user_id)
    return [memory.id]


def purge(container: Container, tenant_id: str, user_id: str, memory_id: str) -> list[str]:
    now = container.clock()
    with container.uow() as uow:
        purged = curation.purge(uow, tenant_id, user_id, memory_id, now)
        uow.commit()
    # After the commit: a point deleted for a row that then stayed would be missed by recall
    # until reconciliation; a point left for a deleted row is never returned (recall re-reads
    # every hit in Postgres) and the index worker's task or reconciliation removes it.
    delete_points(container, tenant_id, user_id, purged.memories)
    turn_points = [
        turn_point_id(tenant_id, user_id, event_id)
        for event_id in [*(e for e, _ in purged.turns), *purged.windows]
    ]
    delete_points(container, tenant_id, user_id, turn_points, IndexKind.TURNS)
    wm = container.working_memory
    if wm is not None and purged.turns:
        wm.forget(tenant_id, user_id, purged.turns)
        # The blanked turns' words were also in the Redis files (working memory, broker messages).
        settings = container.settings
        after_privacy_delete(
            container.redis_client(), settings.resolved_data_dir, settings.privacy_rewrite_min_interval_s
        )
    if purged.windows:  # windows that held a blanked turn: embedded again without it, then pushed
        with container.uow() as uow:
            settings = container.settings
            embed_windows(
                uow,
                container.embedder,
                tenant_id,
                user_id,
                purged.windows,
                settings.turn_window,
                settings.turn_alone_vector,
            )
            uow.commit()
        sync_index(container, tenant_id, user_id)
    log.info(
        "memory %s of %s/%s purged with %d derived, %d source turns redacted",
        memory_id, tenant_id, user_id, len(purged.memories) - 1, len(purged.turns),
    )  # fmt: skip
    return purged.memories


def readiness(container: Container) -> dict[str, str]:
    """``ok`` or why not, for Postgres, Redis and the vector index (a search that finds nothing)."""
    out: dict[str, str] = {}
    try:
        with container.uow() as uow:
            uow.meta.get(EMBEDDING_MODEL_KEY)
        out["postgres"] = "ok"
    except Exception as exc:
        out["postgres"] = f"down: {type(exc).__name__}: {str(exc)[:200]}"
    out["redis"] = _redis_ready(container.settings)
    try:
        dim = container.embedder.dim
        container.search_index().search("cuemem-ready", "probe", [0.0] * (dim - 1) + [1.0], 1)
        out["index"] = "ok"
    except Exception as exc:
        out["index"] = f"down: {type(exc).__name__}: {str(exc)[:200]}"
    return out


def _redis_ready(settings: Settings) -> str:
    from infra.broker import open_redis

    url = settings.effective_redis_url
    if url is None:
        return "down: no Redis configured"
    client = open_redis(url, socket_timeout=2)
    try:
        client.ping()
        return "ok"
    except Exception as exc:
        return f"down: {type(exc).__name__}: {str(exc)[:200]}"
    finally:
        client.close()


def queue_depths(settings: Settings) -> dict[str, int]:
    """Messages waiting per cuemem queue (LLEN on the Redis broker), plus ``unacked``: delivered
    to a worker and not yet acknowledged. Empty when the broker is not a reachable Redis."""
    from infra.broker import is_redis_url, open_redis
    from workers import broker

    url = settings.broker_url
    if not url or not is_redis_url(url):
        return {}
    client = open_redis(url, socket_timeout=2)
    try:
        return broker.queue_depths(client)
    except Exception:
        log.warning("queue depth: broker unreachable", exc_info=True)
        return {}
    finally:
        client.close()


def task_runs(settings: Settings) -> dict[str, dict[str, Any]]:
    """Run times per task recorded by every worker (workers/redis/task_metrics.py); empty without Redis."""
    from infra.broker import open_redis
    from workers.redis.task_metrics import read_task_runs

    url = settings.effective_redis_url
    if url is None:
        return {}
    client = open_redis(url, socket_timeout=2)
    try:
        return read_task_runs(client)
    finally:
        client.close()


def store_counts(container: Stores) -> dict[str, Any]:
    """Memories by status, events by stage, LLM calls and tokens: one GROUP BY each."""
    with container.uow() as uow:
        return {
            "memories": uow.curation.status_counts(),
            "events": uow.curation.stage_counts(),
            "llm": uow.curation.llm_totals(),
        }
