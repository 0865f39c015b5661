"""A user's rows in every Postgres table, counted and deleted (``shared.lifecycle.erasure``).

The tables keyed by tenant and user are scoped by those columns. Two are not: ``dead_letters``
(a message the pipeline gave up on) and ``llm_calls`` (token usage): theirs are the rows naming one
of the user's events, or (dead letters) carrying the user's tenant and user in their arguments, as
a dead record message carries its turn and an index task its (tenant, user).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, delete, func, or_, select, union
from sqlalchemy.orm import Session

from workers.db.tables import (
    CueCountRow,
    DeadLetterRow,
    EventRow,
    HistoryRow,
    LlmCallRow,
    MemoryRow,
    RecallClaimRow,
    ReceiptRow,
)

# In the order they are deleted: what names the user's events before the events themselves.
PARTS = (
    "dead_letters",
    "llm_calls",
    "memory_history",
    "recall_claims",
    "memories",
    "memory_cue_counts",
    "event_receipts",
    "events",
)


class SqlUserData:
    """``shared.lifecycle.erasure.UserData`` over one session. ``pin_snapshot`` first: the counts
    before and after must see one snapshot, or another user's commit in between would read as a
    change the erasure made."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def pin_snapshot(self) -> None:
        self.session.connection(execution_options={"isolation_level": "REPEATABLE READ"})

    def _scopes(self, tenant_id: str, user_id: str) -> dict[str, tuple[Any, ColumnElement[bool]]]:
        events = union(
            select(EventRow.event_id).where(*EventRow.owned_by(tenant_id, user_id)),
            select(ReceiptRow.event_id).where(*ReceiptRow.owned_by(tenant_id, user_id)),
        )
        turn = func.jsonb_build_object("tenant_id", tenant_id, "user_id", user_id)
        dead = or_(
            DeadLetterRow.event_id.in_(events),
            DeadLetterRow.args.contains(func.jsonb_build_array(turn)),  # memory.record
            DeadLetterRow.args.contains(func.jsonb_build_array(func.jsonb_build_array(turn))),  # a batch
            and_(  # index and sync tasks: (tenant, user, ...)
                DeadLetterRow.args.op("->>")(0) == tenant_id, DeadLetterRow.args.op("->>")(1) == user_id
            ),
        )
        owned = {
            "memory_history": (HistoryRow, and_(*HistoryRow.owned_by(tenant_id, user_id))),
            "recall_claims": (RecallClaimRow, and_(*RecallClaimRow.owned_by(tenant_id, user_id))),
            "memories": (MemoryRow, and_(*MemoryRow.owned_by(tenant_id, user_id))),
            "memory_cue_counts": (
                CueCountRow,
                and_(CueCountRow.tenant_id == tenant_id, CueCountRow.user_id == user_id),
            ),
            "event_receipts": (ReceiptRow, and_(*ReceiptRow.owned_by(tenant_id, user_id))),
            "events": (EventRow, and_(*EventRow.owned_by(tenant_id, user_id))),
        }
        return {
            "dead_letters": (DeadLetterRow, dead),
            "llm_calls": (LlmCallRow, LlmCallRow.event_id.in_(events)),
            **owned,
        }

    def count(self, tenant_id: str, user_id: str) -> dict[str, tuple[int, int]]:
        scopes = self._scopes(tenant_id, user_id)
        counts: dict[str, tuple[int, int]] = {}
        for part in PARTS:
            table, mine = scopes[part]
            # IS NOT TRUE, not NOT: a dead letter with no event id is someone else's, not unknown.
            query = select(func.count().filter(mine), func.count().filter(mine.is_not(True))).select_from(
                table
            )
            user, others = self.session.execute(query).one()
            counts[part] = (int(user), int(others))
        return counts

    def erase(self, tenant_id: str, user_id: str) -> dict[str, int]:
        deleted: dict[str, int] = {}
        for part in PARTS:
            # Scopes are rebuilt per statement: the user's event ids are read before the events go.
            table, mine = self._scopes(tenant_id, user_id)[part]
            result = self.session.execute(delete(table).where(mine))
            deleted[part] = int(result.rowcount)  # type: ignore[attr-defined]
        return deleted
