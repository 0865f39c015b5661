"""Index work after a change in Postgres: done in this process if it may write the index, else
sent to the index owner. Written once, for the API's curation, ``cuemem restore``, ``maintain``
and ``reindex``.

On the embedded default one process owns the vector index (the index worker; the engine admits
one); an API server, ``cuemem mcp`` and a command line started beside it get ``IndexOwnedElsewhere``
or, on the API's search-only indexes, ``IndexUnavailable``. A Qdrant server that cannot be reached,
or an embedded index that lost its files, raises ``IndexUnavailable`` too.

One rule for all of them: any ``IndexUnavailable`` sends the work to the index worker. The change
is already committed, so the follow-up must not be lost with this process: as a task it waits on
the broker, and the worker retries it until the index is back (or rebuilds a lost one). Crashing
instead would leave the index behind until the next reconciliation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Final, Literal, TypeVar

from service.operations.ports import Indexing
from shared.indexing.reindex import rebuild_indexes
from shared.indexing.sync import push_unindexed
from shared.lifecycle import sweeps
from shared.ports import IndexOwnedElsewhere, IndexUnavailable
from shared.queues import ROUTES, IndexKind, TaskName
from shared.storage import FollowUp

log = logging.getLogger(__name__)

T = TypeVar("T")

# What "the index is not this process's to write" is: the one exception that falls back.
FALLS_BACK_TO_THE_OWNER = IndexUnavailable

INDEXED: Final = "indexed"
SENT: Final = "sent to the index worker"
Outcome = Literal["indexed", "sent to the index worker"]

# A full rebuild by the index worker re-embeds everything: wait as long as a large store takes.
REBUILD_TIMEOUT_S = 24 * 3600


def here_or_at_owner(
    here: Callable[[], T],
    at_owner: Callable[[], T],
    falls_back: type[IndexUnavailable] = FALLS_BACK_TO_THE_OWNER,
) -> T:
    """``here()``; when the index cannot be written from this process, ``at_owner()`` instead."""
    try:
        return here()
    except falls_back as exc:
        log.info("index not writable here (%s); sending the work to the index worker", exc)
        return at_owner()


def sync_index(container: Indexing, tenant_id: str, user_id: str) -> Outcome:
    """Push the user's changed memories (and turns whose window changed) to the indexes."""
    c = container

    def here() -> Outcome:
        with c.uow() as uow:
            for collection, index in c.indexes().items():
                push_unindexed(uow, collection, index, c.embedder, tenant_id, user_id)
            uow.commit()
        return INDEXED

    def at_owner() -> Outcome:
        c.dispatch([FollowUp(TaskName.SYNC_INDEX.value, (tenant_id, user_id))])
        return SENT

    return here_or_at_owner(here, at_owner)


def delete_points(
    container: Indexing,
    tenant_id: str,
    user_id: str,
    point_ids: list[str],
    kind: IndexKind = IndexKind.MEMORIES,
) -> str:
    """Delete points of one user from the memory index or the conversation-log index."""
    if not point_ids:
        return "nothing to delete"
    index = container.index(kind)
    if index is None:
        return "no such index"

    def here() -> str:
        index.delete(tenant_id, user_id, point_ids)
        return "deleted"

    def at_owner() -> str:
        container.dispatch(
            [FollowUp(TaskName.DELETE_POINTS.value, (tenant_id, user_id, list(point_ids), kind.value))]
        )
        return SENT

    return here_or_at_owner(here, at_owner)


def maintain_index(container: Indexing, touched: Sequence[tuple[str, str]]) -> tuple[dict[str, Any], bool]:
    """The index half of ``cuemem maintain``: sync the touched users, push scores, reconcile and
    optimize both graphs. Returns its counts and whether an index was optimized."""
    c = container

    def here() -> tuple[dict[str, Any], bool]:
        indexes = c.indexes()
        counts = sweeps.maintain_index(c.uow, indexes, c.embedder, touched, c.lifecycle)
        optimized = False
        for vector_index in indexes.values():  # every graph: `|`, not `or`, which would skip one
            optimized = vector_index.optimize() | optimized
        return counts, optimized

    def at_owner() -> tuple[dict[str, Any], bool]:
        c.dispatch([FollowUp(TaskName.SYNC_INDEX.value, pair) for pair in touched])
        c.dispatch(
            [
                FollowUp(TaskName.PUSH_SCORES.value, ()),
                FollowUp(TaskName.RECONCILE.value, ()),
                FollowUp(TaskName.OPTIMIZE_INDEX.value, ()),
            ]
        )
        return {"indexed": 0, "sent_to_index_worker": True}, False

    return here_or_at_owner(here, at_owner)


def reindex(container: Indexing) -> dict[str, int]:
    """Rebuild both indexes from Postgres; at the owner, wait for its rebuild's counts.

    Unlike the fire-and-forget follow-ups, this one waits for its answer, so it goes to the owner
    only when an owner is known to hold the index (``IndexOwnedElsewhere``): an unreachable server
    is reported at once instead of waiting a day for a worker that cannot reach it either."""
    c = container

    def here() -> dict[str, int]:
        return rebuild_indexes(c.uow, c.indexes(), c.embedder, c.settings.turn_alone_vector)

    def at_owner() -> dict[str, int]:
        from infra.broker import send_only_app, send_task

        remote = send_only_app(c.settings.broker_url or "", with_results=True)
        result = send_task(remote, TaskName.REINDEX.value, queue=ROUTES[TaskName.REINDEX].value)
        stats: dict[str, int] = result.get(timeout=REBUILD_TIMEOUT_S)
        return stats

    return here_or_at_owner(here, at_owner, falls_back=IndexOwnedElsewhere)
