"""The lifecycle's set-based changes over memories (``shared/lifecycle/sweeps.py``,
``maintenance.py``): the port ``UnitOfWork.lifecycle`` and what it returns
(``workers/db/lifecycle.py``).

Here in the storage package, not in ``shared/lifecycle/``: the storage port sits below every room
of the core, lifecycle included, and a port kept in the room above would be a back-edge."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from shared.scoring import DecayPolicy


class LifecycleRepository(Protocol):
    """Set-based lifecycle changes over memories (``shared/lifecycle/sweeps.py``, ``maintenance.py``)."""

    def claim_recall(self, recall_id: str, tenant_id: str, user_id: str, at: datetime) -> bool:
        """Record that this recall's reinforcement is applied; False when it already was."""

    def reinforce(
        self, tenant_id: str, user_id: str, ids: Sequence[str], now: datetime, policy: DecayPolicy
    ) -> int:
        """access_count + 1, last access = now (never earlier), score recomputed, set-based, for
        these memories of one user (pending drafts excepted). Returns how many rows changed."""

    def prune_recall_claims(self, before: datetime) -> int:
        """Forget recall claims older than ``before`` (past any redelivery)."""

    def unscorable(self, limit: int) -> list[StatusChange]:
        """Memories whose last use is at ±infinity (no age, so no score): the set-based sweeps
        leave them alone, and name them (up to ``limit``) in their log."""

    def expire_tasks(
        self, now: datetime, stated_before: datetime, reasons: tuple[str, str], after_id: str, limit: int
    ) -> tuple[list[StatusChange], str | None]:
        """Set-based: the next ``limit`` (by id after ``after_id``) active tasks whose due time
        passed (reason ``reasons[0]``) or, without a due time, stated before ``stated_before``
        (``reasons[1]``) become expired, version + 1. Returns them and the last id (None: done)."""

    def archive_stale(
        self,
        since: datetime,
        threshold: float,
        policy: DecayPolicy,
        reason: str,
        now: datetime,
        after_id: str,
        limit: int,
    ) -> tuple[list[StatusChange], str | None]:
        """Set-based: the next ``limit`` active memories not accessed since ``since`` whose score
        at ``since`` was already under ``threshold`` (scores only fall between accesses, so it
        stayed under ever since) become archived, version + 1."""

    def recompute_scores(
        self, now: datetime, policy: DecayPolicy, after_id: str, limit: int, tolerance: float = 0.0
    ) -> tuple[int, str | None]:
        """Recompute the score of the next ``limit`` memories by id after ``after_id``, set-based,
        writing only those that moved by more than ``tolerance``.

        Returns how many rows changed and the last id covered (None when none were left).
        """


@dataclass(frozen=True)
class StatusChange:
    """A memory a set-based lifecycle sweep moved to another status (its history entry is next)."""

    memory_id: str
    tenant_id: str
    user_id: str
    reason: str
