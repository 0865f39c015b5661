"""What every SQL repository shares: the unit of work's session, and keyset paging over users."""

from __future__ import annotations

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from workers.db.tables import UserOwned


class SessionRepository:
    """A repository bound to the unit of work's session. It never commits: the unit of work does."""

    def __init__(self, session: Session):
        self.session = session

    def _users_after(
        self, row: type[UserOwned], after: tuple[str, str] | None, limit: int
    ) -> list[tuple[str, str]]:
        """(tenant, user) pairs that have rows in ``row``'s table, in order, after ``after``."""
        stmt = select(row.tenant_id, row.user_id).distinct()
        if after is not None:
            stmt = stmt.where(tuple_(row.tenant_id, row.user_id) > tuple_(*after))
        rows = self.session.execute(stmt.order_by(row.tenant_id, row.user_id).limit(limit))
        return [(r.tenant_id, r.user_id) for r in rows]
