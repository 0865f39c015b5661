"""A user's rows in every Postgres table, counted and deleted (``shared.erasure``).

The tables keyed by tenant and user are scoped by those columns. Two are not: ``llm_calls`` (token
usage), whose rows of the user name one of its stored events by its pipeline key (tenant/event
id), and ``dead_letters``, judged letter by letter by their task and arguments
(``shared.lifecycle.dead_letters.dead_letter_share``): a letter that is only the user's goes, a
batch letter of several users keeps the others' part.

The report counts the tenant's other users only (``count``): a table's rows of the tenant by its
column, usage rows by their pipeline key's tenant (or, for a bare id, the event's), letters that
name the tenant and no other (``dead_letter_tenants``, as the inspector shows them). Every other
user's rows in every tenant (``everyone_else``) are compared on the same snapshot, not reported.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, delete, func, or_, select, union, update
from sqlalchemy.orm import Session

from shared.lifecycle.dead_letters import Share, dead_letter_share, dead_letter_tenants, event_ids_named
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
    """``shared.erasure.UserData`` over one session. ``pin_snapshot`` first: the counts
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

    @staticmethod
    def _tenant_rows(tenant_id: str) -> dict[str, ColumnElement[bool]]:
        """Each table's rows of the tenant, every user's (dead letters aside)."""
        events_here = select(EventRow.event_id).where(EventRow.tenant_id == tenant_id)
        elsewhere = select(EventRow.event_id).where(EventRow.tenant_id != tenant_id)
        usage = or_(
            LlmCallRow.event_id.startswith(f"{tenant_id}/", autoescape=True),
            and_(LlmCallRow.event_id.in_(events_here), LlmCallRow.event_id.not_in(elsewhere)),
        )
        tables = (HistoryRow, RecallClaimRow, MemoryRow, CueCountRow, ReceiptRow, EventRow)
        return {"llm_calls": usage} | {t.__tablename__: t.tenant_id == tenant_id for t in tables}

    def _letter_tenants(self, letters: list[tuple[int, str, list[Any]]]) -> dict[int, set[str] | None]:
        named = {e for _, task, args in letters for e in event_ids_named(task, args)}
        rows = self.session.execute(
            select(EventRow.event_id, EventRow.tenant_id).where(EventRow.event_id.in_(sorted(named)))
        ).all()
        # A bare id two tenants hold names neither: the letter counts as no tenant's.
        tenants: dict[str, str] = {}
        for event_id, tenant in rows:
            tenants[event_id] = tenant if event_id not in tenants else ""
        return {i: dead_letter_tenants(task, args, tenants) for i, task, args in letters}

    def _user_events(self, tenant_id: str, user_id: str) -> set[str]:
        rows = self.session.scalars(
            union(
                select(EventRow.event_id).where(*EventRow.owned_by(tenant_id, user_id)),
                select(ReceiptRow.event_id).where(*ReceiptRow.owned_by(tenant_id, user_id)),
            )
        )
        return set(rows)

    def _all_letters(self) -> list[tuple[int, str, list[Any]]]:
        rows = self.session.execute(select(DeadLetterRow.id, DeadLetterRow.task_name, DeadLetterRow.args))
        return [(int(i), task, list(args or [])) for i, task, args in rows]

    def _letters(self, tenant_id: str, user_id: str) -> list[tuple[int, Share, list[Any] | None]]:
        """Every dead letter with its share of the user (``dead_letter_share``): letters are few
        and their arguments' shape depends on the task, so they are judged here, not in SQL."""
        events = self._user_events(tenant_id, user_id)
        out = []
        for letter_id, task, args in self._all_letters():
            share, rest = dead_letter_share(task, args, tenant_id, user_id, events)
            out.append((letter_id, share, rest))
        return out

    def _counts(self, tenant_id: str, user_id: str, *, tenant_only: bool) -> dict[str, tuple[int, int]]:
        """Each part: (the user's items, other users' items: the tenant's, or every tenant's)."""
        scopes = self._scopes(tenant_id, user_id)
        letters = self._letters(tenant_id, user_id)
        named = self._letter_tenants(self._all_letters()) if tenant_only else {}
        # The user's: letters holding any of its data; everyone else's: letters not only its own.
        counts = {
            "dead_letters": (
                sum(share != "none" for _, share, _ in letters),
                sum(
                    share != "all" and (not tenant_only or named.get(i) == {tenant_id})
                    for i, share, _ in letters
                ),
            )
        }
        tenant_rows = self._tenant_rows(tenant_id)
        for part in PARTS[1:]:
            table, mine = scopes[part]
            # IS NOT TRUE, not NOT: an LLM call with no event id is someone else's, not unknown.
            others: ColumnElement[bool] = mine.is_not(True)
            if tenant_only:
                others = and_(others, tenant_rows[part])
            query = select(func.count().filter(mine), func.count().filter(others)).select_from(table)
            user, rest = self.session.execute(query).one()
            counts[part] = (int(user), int(rest))
        return counts

    def count(self, tenant_id: str, user_id: str) -> dict[str, tuple[int, int]]:
        return self._counts(tenant_id, user_id, tenant_only=True)

    def everyone_else(self, tenant_id: str, user_id: str) -> dict[str, int]:
        return {part: n for part, (_, n) in self._counts(tenant_id, user_id, tenant_only=False).items()}

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
