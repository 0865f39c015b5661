"""Deleting one user everywhere (a privacy request), and proving it: every store says how many of
the user's rows it deleted, how many are left (must be 0), and how many belong to the tenant's
other users before and after (must not move). The report goes to the tenant's key holder, so it
counts within that tenant only; Postgres also compares every other tenant's rows on its snapshot
(``RowData.everyone_else``), unreported, and rolls back should any of them move.

Three kinds of store hold a user's data, each behind its own port: Postgres (the truth: events,
receipts, memories, history, cue counts, recall claims, dead letters and LLM call records of the
user's events), Redis (working memory, seq counters, the session list, the publish ledger's
unrecorded turns) and the vector indexes (the memory index and the conversation log). The service
runs them in that order of safety: Redis first, so the stalled sweep cannot re-send a turn of the
user after its rows are gone; then Postgres in one transaction that rolls back if anyone else's
rows moved; then the indexes, where they live (``service/operations/erasure.py``).

Beside ``shared.storage``, which holds Postgres's part as ``UnitOfWork.erasure`` (``RowData``),
like the other ports it composes (``shared.transfer``, ``shared.api_keys``): the storage port
sits below every room of the core that uses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from shared.ports import VectorIndex


class ErasureFailed(Exception):
    """Deleting the user left some of its data, or touched another user's: nothing of this store
    was committed (Postgres) or the report says what is left (Redis, indexes)."""


@dataclass(frozen=True)
class StoreErasure:
    """One store's part: ``store`` names it (``postgres.events``, ``redis.ledger``, ``index.turns``…)."""

    store: str
    deleted: int
    left: int
    others_before: int
    others_after: int
    # Postgres counts everyone else's rows on one snapshot, so they must not move. Redis and the
    # indexes are live (other users publish and settle meanwhile): their counts are reported, and
    # what goes is chosen by the user's exact key prefixes and filter instead.
    compared: bool = True

    @property
    def verified(self) -> bool:
        return self.left == 0 and (not self.compared or self.others_before == self.others_after)


@dataclass(frozen=True)
class ErasureReport:
    tenant_id: str
    user_id: str
    stores: tuple[StoreErasure, ...]
    # A store that could not be reached or checked, and why (e.g. the index owner did not answer).
    unverified: tuple[str, ...] = ()

    @property
    def verified(self) -> bool:
        return not self.unverified and all(s.verified for s in self.stores)

    @property
    def deleted(self) -> int:
        return sum(s.deleted for s in self.stores)

    def to_public(self) -> dict[str, Any]:
        return {
            "tenant_id": self.tenant_id,
            "user_id": self.user_id,
            "verified": self.verified,
            "deleted": self.deleted,
            "stores": {s.store: {k: v for k, v in asdict(s).items() if k != "store"} for s in self.stores},
            "unverified": list(self.unverified),
        }


class UserData(Protocol):
    """One kind of store's view of a user's data, per named part (table, key family, index)."""

    def count(self, tenant_id: str, user_id: str) -> dict[str, tuple[int, int]]:
        """Each part: (the user's items, the items of the tenant's other users)."""

    def erase(self, tenant_id: str, user_id: str) -> dict[str, int]:
        """Delete the user's items; each part: how many were deleted."""


class RowData(UserData, Protocol):
    """Postgres's part, bound to a unit of work (``uow.erasure``)."""

    def pin_snapshot(self) -> None:
        """Read one snapshot for the rest of the unit (call before anything else in it), so that
        another user's commit between the counts does not read as a change the erasure made."""

    def everyone_else(self, tenant_id: str, user_id: str) -> dict[str, int]:
        """Each part: the items of every other user of every tenant. Compared before and after
        the erasure (``moved_elsewhere``), never reported: it is the deployment's volume."""


def moved_elsewhere(before: Mapping[str, int], after: Mapping[str, int]) -> str | None:
    """What of everyone else's (any tenant) an erasure changed, part by part, or None."""
    moved = [
        f"{part}: other users' items {before[part]} -> {after.get(part)}"
        for part in before
        if before[part] != after.get(part)
    ]
    return "; ".join(moved) or None


def erase_store(
    prefix: str, data: UserData, tenant_id: str, user_id: str, compared: bool = True
) -> list[StoreErasure]:
    """Count, erase, count again: each part's report (``failures`` says whether it holds)."""
    before = data.count(tenant_id, user_id)
    deleted = data.erase(tenant_id, user_id)
    after = data.count(tenant_id, user_id)
    return [
        StoreErasure(
            f"{prefix}.{part}",
            deleted.get(part, 0),
            after[part][0],
            before[part][1],
            after[part][1],
            compared,
        )
        for part in before
    ]


def failures(parts: list[StoreErasure]) -> str | None:
    """What went wrong, part by part, or None when every part is empty for the user and unmoved
    for everyone else."""
    wrong = [p for p in parts if not p.verified]
    if not wrong:
        return None
    return "; ".join(
        f"{p.store}: {p.left} of the user's left, everyone else's {p.others_before} -> {p.others_after}"
        for p in wrong
    )


class IndexData:
    """The vector indexes as ``UserData``: the user's points by its ids, the tenant's other users'
    as the tenant's total less the user's. Used where the index lives (this process or the owner)."""

    def __init__(self, indexes: Mapping[str, VectorIndex]) -> None:
        self._indexes = indexes

    def count(self, tenant_id: str, user_id: str) -> dict[str, tuple[int, int]]:
        out = {}
        for kind, index in self._indexes.items():
            mine = len(index.ids(tenant_id, user_id))
            out[kind] = (mine, index.count(tenant_id) - mine)
        return out

    def erase(self, tenant_id: str, user_id: str) -> dict[str, int]:
        out = {}
        for kind, index in self._indexes.items():
            ids = sorted(index.ids(tenant_id, user_id))
            if ids:
                index.delete(tenant_id, user_id, ids)
            out[kind] = len(ids)
        return out


def erase_points(indexes: Mapping[str, VectorIndex], tenant_id: str, user_id: str) -> list[StoreErasure]:
    return erase_store("index", IndexData(indexes), tenant_id, user_id, compared=False)


def from_wire(rows: list[dict[str, Any]]) -> list[StoreErasure]:
    """The owner's answer (``memory.erase_points``) back into reports."""
    return [StoreErasure(**row) for row in rows]
