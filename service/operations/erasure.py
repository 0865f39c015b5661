"""Delete one user everywhere, for ``cuemem users delete`` and ``DELETE /v1/users/{user_id}``
alike, and prove it store by store (``shared.erasure``).

Order: Redis first (the publish ledger's unrecorded turns, which the stalled sweep would otherwise
send again, then working memory, seq counters, sessions); then Postgres in one transaction on one
snapshot, under the user's lock, rolled back unless every table is empty for the user and
unchanged for everyone else; then the vector indexes, here or at the index owner. A turn published
for the user while this runs may survive it: stop the app's publishing first, or run it again.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from service.operations.index_followups import here_or_at_owner
from shared.erasure import (
    ErasureFailed,
    ErasureReport,
    StoreErasure,
    erase_points,
    erase_store,
    failures,
    from_wire,
    moved_elsewhere,
)
from shared.ports import IndexUnavailable
from shared.queues import TaskName
from workers.bootstrap import Container
from workers.redis.rewrite import after_privacy_delete

log = logging.getLogger(__name__)

# How long to wait for the index owner to delete the user's points (it may have a write backlog).
OWNER_TIMEOUT_S = 60.0


def _serialization_failure(exc: BaseException) -> bool:
    """Postgres refused a delete on the pinned snapshot (SQLSTATE 40001): a row of the user
    changed after the snapshot was taken, e.g. while the user's lock was awaited. Try again."""
    return getattr(getattr(exc, "orig", exc), "sqlstate", None) == "40001"


def erase_user(container: Container, tenant_id: str, user_id: str) -> ErasureReport:
    started = time.perf_counter()
    stores: list[StoreErasure] = []
    unverified: list[str] = []
    redis = container.user_keys()
    if redis is not None:
        stores += erase_store("redis", redis, tenant_id, user_id, compared=False)
    stores += _erase_rows(container, tenant_id, user_id)
    try:
        stores += _erase_points(container, tenant_id, user_id)
    except IndexUnavailable as exc:
        unverified.append(f"index: {exc}; the owner deletes the points when it gets to the task")
    stores = _recounted(container, tenant_id, user_id, stores)
    report = ErasureReport(tenant_id, user_id, tuple(stores), tuple(unverified))
    if report.deleted:
        # The user's words may be in the Redis files (its keys, and the broker messages of its
        # turns, consumed long ago or not): bounded, at most one rewrite per window.
        settings = container.settings
        after_privacy_delete(
            container.redis_client(), settings.resolved_data_dir, settings.privacy_rewrite_min_interval_s
        )
    log.info(
        "user %s/%s erased: %d items in %d stores, verified %s, %.0f ms",
        tenant_id, user_id, report.deleted, len(stores), report.verified,
        1000 * (time.perf_counter() - started),
    )  # fmt: skip
    return report


def _erase_rows(container: Container, tenant_id: str, user_id: str) -> list[StoreErasure]:
    """Postgres's part, on one snapshot taken once the user's lock is held: the lock is held by a
    unit of its own for as long as the erasure runs (a snapshot taken before waiting for it would
    miss what the lock's holder committed, and those rows would survive unseen)."""
    retrying = Retrying(
        retry=retry_if_exception(_serialization_failure),
        stop=stop_after_attempt(5),
        wait=wait_random_exponential(multiplier=0.05, max=1.0),
        reraise=True,
    )
    for attempt in retrying:
        with attempt, container.uow() as locker:
            locker.memories.lock_user(tenant_id, user_id)
            with container.uow() as uow:
                uow.erasure.pin_snapshot()
                elsewhere = uow.erasure.everyone_else(tenant_id, user_id)
                parts = erase_store("postgres", uow.erasure, tenant_id, user_id)
                wrong = failures(parts) or moved_elsewhere(
                    elsewhere, uow.erasure.everyone_else(tenant_id, user_id)
                )
                if wrong is not None:  # leaving the unit rolls it back: nothing of it is deleted
                    raise ErasureFailed(f"Postgres, rolled back: {wrong}")
                uow.commit()
            return parts
    raise AssertionError("unreachable")  # Retrying re-raises on the last attempt


def _recounted(
    container: Container, tenant_id: str, user_id: str, stores: list[StoreErasure]
) -> list[StoreErasure]:
    """The user's Postgres rows counted again after the commit, outside the snapshot: a turn
    recorded meanwhile (recording takes no user lock) shows as left, and the report unverified."""
    with container.uow() as uow:
        now = uow.erasure.count(tenant_id, user_id)
    return [
        replace(s, left=now[s.store.split(".", 1)[1]][0]) if s.store.startswith("postgres.") else s
        for s in stores
    ]


def _erase_points(container: Container, tenant_id: str, user_id: str) -> list[StoreErasure]:
    def here() -> list[StoreErasure]:
        indexes = {col.kind.value: index for col, index in container.indexes().items()}
        return erase_points(indexes, tenant_id, user_id)  # live: counts reported, not compared

    def at_owner() -> list[StoreErasure]:
        # Never expires: a user's points must go even when the owner answers late.
        rows = container.ask_owner(TaskName.ERASE_POINTS, [tenant_id, user_id], OWNER_TIMEOUT_S, expire=False)
        return from_wire(rows)

    return here_or_at_owner(here, at_owner)
