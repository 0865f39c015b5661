"""A user's rows in every Postgres table, counted and deleted (``shared.lifecycle.erasure``).

The tables keyed by tenant and user are scoped by those columns. Two are not: ``llm_calls`` (token
usage), whose rows of the user name one of its stored events by its pipeline key (tenant/event
id), and ``dead_letters``, judged letter by letter by their task and arguments
(``shared.lifecycle.dead_letters.dead_letter_share``): a letter that is only the user's goes, a
batch letter of several users keeps the others' part.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, delete, func, or_, select, union, update
from sqlalchemy.orm import Session

from shared.lifecycle.dead_letters import Share, dead_letter_share
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
        # Usage rows name the pipeline key of the turn they were spent on (tenant/event id): the
        # same event id in another tenant is another turn, whose rows stay. Rows written before
        # 0017 name the bare id, unique across tenants then: still this user's unless another
        # tenant has since used the id.
        keys = union(
            select(func.concat(f"{tenant_id}/", EventRow.event_id)).where(
                *EventRow.owned_by(tenant_id, user_id)
            ),
            select(func.concat(f"{tenant_id}/", ReceiptRow.event_id)).where(
                *ReceiptRow.owned_by(tenant_id, user_id)
            ),
        )
        elsewhere = select(EventRow.event_id).where(EventRow.tenant_id != tenant_id)
        usage = or_(
            LlmCallRow.event_id.in_(keys),
            and_(LlmCallRow.event_id.in_(events), LlmCallRow.event_id.not_in(elsewhere)),
        )
        return {"llm_calls": (LlmCallRow, usage), **owned}

    def _user_events(self, tenant_id: str, user_id: str) -> set[str]:
        rows = self.session.scalars(
            union(
                select(EventRow.event_id).where(*EventRow.owned_by(tenant_id, user_id)),
                select(ReceiptRow.event_id).where(*ReceiptRow.owned_by(tenant_id, user_id)),
            )
        )
        return set(rows)

    def _letters(self, tenant_id: str, user_id: str) -> list[tuple[int, Share, list[Any] | None]]:
        """Every dead letter with its share of the user (``dead_letter_share``): letters are few
        and their arguments' shape depends on the task, so they are judged here, not in SQL."""
        events = self._user_events(tenant_id, user_id)
        rows = self.session.execute(select(DeadLetterRow.id, DeadLetterRow.task_name, DeadLetterRow.args))
        out = []
        for letter_id, task, args in rows:
            share, rest = dead_letter_share(task, list(args or []), tenant_id, user_id, events)
            out.append((int(letter_id), share, rest))
        return out

    def count(self, tenant_id: str, user_id: str) -> dict[str, tuple[int, int]]:
        scopes = self._scopes(tenant_id, user_id)
        letters = self._letters(tenant_id, user_id)
        # The user's: letters holding any of its data; everyone else's: letters not only its own.
        counts = {
            "dead_letters": (
                sum(share != "none" for _, share, _ in letters),
                sum(share != "all" for _, share, _ in letters),
            )
        }
        for part in PARTS[1:]:
            table, mine = scopes[part]
            # IS NOT TRUE, not NOT: an LLM call with no event id is someone else's, not unknown.
            query = select(func.count().filter(mine), func.count().filter(mine.is_not(True))).select_from(
                table
            )
            user, others = self.session.execute(query).one()
            counts[part] = (int(user), int(others))
        return counts

    def erase(self, tenant_id: str, user_id: str) -> dict[str, int]:
        letters = self._letters(tenant_id, user_id)
        gone = [letter_id for letter_id, share, _ in letters if share == "all"]
        if gone:
            self.session.execute(delete(DeadLetterRow).where(DeadLetterRow.id.in_(gone)))
        for letter_id, share, rest in letters:
            if share == "some":  # a batch of several users: the others' part stays replayable
                self.session.execute(
                    update(DeadLetterRow).where(DeadLetterRow.id == letter_id).values(args=rest)
                )
        deleted: dict[str, int] = {"dead_letters": sum(share != "none" for _, share, _ in letters)}
        for part in PARTS[1:]:
            # Scopes are rebuilt per statement: the user's event ids are read before the events go.
            table, mine = self._scopes(tenant_id, user_id)[part]
            result = self.session.execute(delete(table).where(mine))
            deleted[part] = int(result.rowcount)  # type: ignore[attr-defined]
        return deleted
