"""The reconciliation sweep between Postgres (the truth) and a vector index (derived), written
once for every collection (``shared/indexing/collections.py``).

For one user, each row's expected point is compared with the point the index holds, and the
drift repaired:

- missing: an indexable row with a vector of the current model has no point → upsert;
- stale: the point's payload differs from the row (``PointState.payload``) → upsert;
- rescored: only the payload score drifted past the tolerance → set the payload score (memories);
- extra: a point with no such row (or of a row that should have none) → delete;
- bookkept: the point is right but the row says it is not indexed yet → mark it indexed;
- foreign: vectors of another embedding model are left alone (``cuemem reindex`` owns those);
- unembedded: finished rows never embedded are only counted (turns; embedding is reindex's job).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

from shared.bad_rows import skipping_bad_rows
from shared.indexing.collections import Collection, Indexes
from shared.indexing.sync import INDEX_BATCH
from shared.ports import Embedder, LossAwareIndex, VectorIndex
from shared.queues import TaskName
from shared.storage import UnitOfWork

log = logging.getLogger(__name__)


def reconcile_user(
    uow: UnitOfWork,
    collection: Collection[Any, Any],
    index: VectorIndex,
    embedder: Embedder,
    tenant_id: str,
    user_id: str,
    tolerance: float = 0.01,
) -> dict[str, int]:
    """Compare one user's rows of ``collection`` with their points in ``index`` and repair the
    drift; returns the collection's drift counts (``collection.report_keys``). The caller commits."""
    model_name = embedder.model_name
    states = collection.states(uow, tenant_id, user_id)
    points = index.payloads(tenant_id, user_id)
    indexable = [s for s in states if s.indexable]
    expected = {s.point_id: s for s in indexable if s.model in (None, model_name)}
    foreign = {s.point_id for s in indexable if s.model not in (None, model_name)}

    extra = sorted(p for p in points if p not in expected and p not in foreign)
    missing = sorted(p for p in expected if p not in points)
    stale = sorted(
        p
        for p, s in expected.items()
        if p in points and any(points[p].get(k) != v for k, v in s.payload.items())
    )
    rewrite = sorted({*missing, *stale})
    kept = [p for p in sorted(expected) if p in points and p not in stale]
    rescored = [
        p
        for p in kept
        if (score := expected[p].score) is not None and not _close(points[p].get("score"), score, tolerance)
    ]
    bookkept = [p for p in kept if not expected[p].marked]

    if extra:
        index.delete(tenant_id, user_id, extra)
    if rewrite:
        index.ensure(embedder.dim, model_name)
        for chunk in _chunks(rewrite, INDEX_BATCH):
            rows = collection.load(uow, tenant_id, user_id, [expected[p] for p in chunk])
            index.upsert([collection.point(row) for row in rows])
            collection.mark_rewritten(uow, rows)
    if rescored:
        scores = {p: float(expected[p].score or 0.0) for p in rescored}
        index.set_payload(tenant_id, user_id, {p: {"score": v} for p, v in scores.items()})
        collection.mark_rescored(uow, [(expected[p].row_id, v) for p, v in scores.items()])
    if bookkept:
        collection.mark_states(uow, [expected[p] for p in bookkept])
    found = {
        "missing": len(missing),
        "extra": len(extra),
        "stale": len(stale),
        "rescored": len(rescored),
        "bookkept": len(bookkept),
        "foreign": len(foreign),
        "unembedded": sum(1 for s in states if s.unembedded),
    }
    counts = {collection.prefix + k: found[k] for k in collection.drift_keys}
    if missing or extra or stale or rescored:
        log.warning("%s index drift repaired for %s/%s: %s", collection.name, tenant_id, user_id, counts)
    return counts


def reconcile_indexes(
    uow_factory: Callable[[], UnitOfWork],
    indexes: Indexes,
    embedder: Embedder,
    tolerance: float = 0.01,
    users_per_page: int = 500,
) -> dict[str, int]:
    """``reconcile_user`` for every user with rows, one transaction per user, collection after
    collection; one report, each collection's counts under its prefix (``turns_*``): ``users``,
    ``points`` (the index's size), the drift counts and, when there were any, ``skipped`` (users
    with a bad row, recorded as dead letters by ``skipping_bad_rows``). Points of a user Postgres
    has no row of at all are not visited (that needs a full scan: ``cuemem reindex``)."""
    totals: dict[str, int] = {}
    for collection, index in indexes.items():
        users_key, points_key, skipped_key = collection.counts(("users", "points", "skipped"))
        found = {users_key: 0, points_key: 0, **dict.fromkeys(collection.report_keys, 0)}
        lost = _loss_of(index)
        after: tuple[str, str] | None = None
        while users := _users_after(uow_factory, collection, after, users_per_page):
            for tenant_id, user_id in users:
                counts = skipping_bad_rows(
                    uow_factory,
                    TaskName.RECONCILE.value,
                    [tenant_id, user_id, collection.name],
                    partial(
                        reconcile_user,
                        collection=collection,
                        index=index,
                        embedder=embedder,
                        tenant_id=tenant_id,
                        user_id=user_id,
                        tolerance=tolerance,
                    ),
                )
                if counts is None:  # a bad row: recorded, and the other users go on
                    found[skipped_key] = found.get(skipped_key, 0) + 1
                    continue
                found[users_key] += 1
                for key, value in counts.items():
                    found[key] += value
            after = users[-1]
        found[points_key] = index.count()
        _rebuilt(index, lost, embedder)
        log.info("%s index reconciliation: %s", collection.name, found)
        totals.update(found)
    return totals


def _users_after(
    uow_factory: Callable[[], UnitOfWork],
    collection: Collection[Any, Any],
    after: tuple[str, str] | None,
    limit: int,
) -> list[tuple[str, str]]:
    with uow_factory() as uow:
        return collection.users_page(uow, after, limit)


def _loss_of(index: VectorIndex) -> str | None:
    """A loss the index noted (its files vanished), read before a reconciliation starts."""
    return index.lost() if isinstance(index, LossAwareIndex) else None


def _rebuilt(index: VectorIndex, lost: str | None, embedder: Embedder) -> None:
    """Every user Postgres has points for was reconciled since ``lost`` was noted: the index holds
    what Postgres holds again, and its searches may answer. ``ensure`` first: with nothing to
    restore, no write has created the (empty, and so whole) index yet."""
    if lost is not None and isinstance(index, LossAwareIndex):
        index.ensure(embedder.dim, embedder.model_name)
        index.mark_rebuilt(lost)


def _close(payload_score: object, row_score: float, tolerance: float) -> bool:
    return isinstance(payload_score, int | float) and abs(float(payload_score) - row_score) <= tolerance


def _chunks(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
