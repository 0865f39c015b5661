"""The memory lifecycle's set-based statements: reinforcement claims and counts, task TTL, archive,
score recompute. Each works on a page of rows by id, in one statement where it can."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, text
from sqlalchemy.dialects.postgresql import insert

from shared.models import MemoryStatus
from shared.scoring import DecayPolicy, score_sql
from shared.storage import StatusChange
from workers.db.session import SessionRepository
from workers.db.tables import (
    RecallClaimRow,
)


class SqlLifecycleRepository(SessionRepository):
    """Set-based lifecycle changes over memories (``shared/lifecycle/``)."""

    def claim_recall(self, recall_id: str, tenant_id: str, user_id: str, at: datetime) -> bool:
        stmt = (
            insert(RecallClaimRow)
            .values(recall_id=recall_id, tenant_id=tenant_id, user_id=user_id, at=at)
            .on_conflict_do_nothing(index_elements=[RecallClaimRow.recall_id])
            .returning(RecallClaimRow.recall_id)
        )
        return self.session.execute(stmt).first() is not None

    def reinforce(
        self, tenant_id: str, user_id: str, ids: Sequence[str], now: datetime, policy: DecayPolicy
    ) -> int:
        if not ids:
            return 0
        scope = {"tenant": tenant_id, "user": user_id, "ids": list(ids), "now": now}
        # Two statements: in one UPDATE the score expression would read the old count and time.
        result = self.session.execute(
            text(
                "UPDATE memories SET access_count = access_count + 1, "
                "last_accessed_at = GREATEST(last_accessed_at, :now) "
                "WHERE tenant_id = :tenant AND user_id = :user AND id = ANY(:ids) AND status <> 'pending'"
            ),
            scope,
        )
        self.session.execute(
            text(
                f"UPDATE memories SET score = {score_sql(policy)} "
                "WHERE tenant_id = :tenant AND user_id = :user AND id = ANY(:ids) AND status <> 'pending' "
                "AND isfinite(last_accessed_at)"
            ),
            scope,
        )
        return int(getattr(result, "rowcount", 0) or 0)

    def unscorable(self, limit: int) -> list[StatusChange]:
        # A last use at ±infinity (only SQL by hand writes one) has no age: the score's
        # "now - last_accessed_at" raises, and would fail the whole set-based page it is in.
        rows = self.session.execute(
            text(
                "SELECT id, tenant_id, user_id FROM memories WHERE NOT isfinite(last_accessed_at) "
                "ORDER BY id LIMIT :limit"
            ),
            {"limit": limit},
        ).all()
        return [StatusChange(r.id, r.tenant_id, r.user_id, "last use at infinity") for r in rows]

    def prune_recall_claims(self, before: datetime) -> int:
        result = self.session.execute(delete(RecallClaimRow).where(RecallClaimRow.at < before))
        return int(getattr(result, "rowcount", 0) or 0)

    def _set_status(
        self, candidates: str, status: str, reason_sql: str, params: dict[str, Any], limit: int
    ) -> tuple[list[StatusChange], str | None]:
        """One set-based page: lock the next candidates by id, move them, return what moved."""
        rows = self.session.execute(
            text(
                f"WITH page AS (SELECT id FROM memories WHERE {candidates} AND id > :after "
                "ORDER BY id LIMIT :limit FOR UPDATE) "
                f"UPDATE memories m SET status = '{status}', status_reason = {reason_sql}, "
                "version = m.version + 1, updated_at = :now "
                "FROM page WHERE m.id = page.id "
                "RETURNING m.id, m.tenant_id, m.user_id, m.status_reason"
            ),
            {**params, "limit": limit},
        ).all()
        changes = sorted(
            (StatusChange(r.id, r.tenant_id, r.user_id, r.status_reason) for r in rows),
            key=lambda c: c.memory_id,
        )
        return changes, (changes[-1].memory_id if len(changes) == limit else None)

    def expire_tasks(
        self, now: datetime, stated_before: datetime, reasons: tuple[str, str], after_id: str, limit: int
    ) -> tuple[list[StatusChange], str | None]:
        candidates = (
            "status = 'active' AND type = 'task' "
            "AND ((due_at IS NOT NULL AND due_at <= :now) OR (due_at IS NULL AND created_at <= :before))"
        )
        reason = "CASE WHEN due_at IS NOT NULL THEN :due_reason ELSE :age_reason END"
        params = {
            "now": now,
            "before": stated_before,
            "due_reason": reasons[0],
            "age_reason": reasons[1],
            "after": after_id,
        }
        return self._set_status(candidates, MemoryStatus.EXPIRED.value, reason, params, limit)

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
        candidates = (
            "status = 'active' AND last_accessed_at <= :since AND isfinite(last_accessed_at) "
            f"AND ({score_sql(policy, now_param='since')}) < :threshold"
        )
        params = {"since": since, "threshold": threshold, "reason": reason, "now": now, "after": after_id}
        return self._set_status(candidates, MemoryStatus.ARCHIVED.value, ":reason", params, limit)

    def recompute_scores(
        self, now: datetime, policy: DecayPolicy, after_id: str, limit: int, tolerance: float = 0.0
    ) -> tuple[int, str | None]:
        upper = self.session.execute(
            text(
                "SELECT max(id) FROM "
                "(SELECT id FROM memories WHERE id > :after ORDER BY id LIMIT :limit) page"
            ),
            {"after": after_id, "limit": limit},
        ).scalar_one()
        if upper is None:
            return 0, None
        expr = score_sql(policy)
        # Only rows whose score moved by more than the tolerance are written: an unchanged row
        # costs no dead tuple and no WAL.
        result = self.session.execute(
            text(
                f"UPDATE memories SET score = {expr} "
                "WHERE id > :after AND id <= :upper AND status <> 'pending' "
                f"AND isfinite(last_accessed_at) AND abs(score - ({expr})) > GREATEST(:tolerance, 1e-9)"
            ),
            {"after": after_id, "upper": upper, "now": now, "tolerance": tolerance},
        )
        return int(getattr(result, "rowcount", 0) or 0), str(upper)
