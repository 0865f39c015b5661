"""The turn index's bookkeeping in Postgres, on the event rows: each turn's context-window vector
(``events.embedding``, ``embedding_model``, ``window_ids``) and whether the conversation-log index
holds its point (``turn_indexed``), read by the push, reconciliation and reindex, as the memory
index's are (``workers/db/memory_index.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select, tuple_, update
from sqlalchemy.orm import undefer

from shared.events import TurnPublished, split_ref
from shared.storage import TurnRow, TurnState
from workers.db.events import by_ref, by_refs
from workers.db.mapping import among, event_from_row
from workers.db.packed_vectors import cosines, pack_vector
from workers.db.session import SessionRepository
from workers.db.tables import EventRow


class SqlTurnIndexRepository(SessionRepository):
    """What the conversation-log index should hold, and what it was last given."""

    def unindexed(self, tenant_id: str, user_id: str, limit: int, after_event_id: str = "") -> list[TurnRow]:
        rows = self.session.scalars(
            select(EventRow)
            .options(undefer(EventRow.embedding))
            .where(
                *EventRow.owned_by(tenant_id, user_id),
                EventRow.embedding.is_not(None),
                EventRow.turn_indexed.is_(False),
                EventRow.event_id > after_event_id,
            )
            .order_by(EventRow.event_id)
            .limit(limit)
        )
        return [
            row._replace(vector=row.vector or [], model=row.model or "") for row in self._rows(list(rows))
        ]

    def mark_indexed(self, refs: Sequence[str], indexed: bool = True) -> None:
        if refs:
            self.session.execute(update(EventRow).where(by_refs(refs)).values(turn_indexed=indexed))

    def page_for_reindex(self, after: str, limit: int) -> list[TurnRow]:
        # The primary key's order, (tenant, event id): an event id alone would skip the second
        # tenant's row of an id two tenants hold when a page ends between them.
        tenant, event_id = split_ref(after) if after else ("", "")
        rows = self.session.scalars(
            select(EventRow)
            .options(undefer(EventRow.embedding))
            .where(tuple_(EventRow.tenant_id, EventRow.event_id) > tuple_(tenant or "", event_id))
            .order_by(EventRow.tenant_id, EventRow.event_id)
            .limit(limit)
        )
        return self._rows(list(rows))

    def reset_indexed(self) -> None:
        self.session.execute(update(EventRow).values(turn_indexed=False))

    def index_states(self, tenant_id: str, user_id: str) -> list[TurnState]:
        rows = self.session.execute(
            select(EventRow, EventRow.embedding.is_not(None).label("has_embedding"))
            .where(*EventRow.owned_by(tenant_id, user_id))
            .order_by(EventRow.event_id)
        )
        return [
            TurnState(
                event=event_from_row(row).event,
                stage=row.stage,
                embedding_model=(row.embedding_model or "") if has_embedding else None,
                turn_indexed=bool(row.turn_indexed),
            )
            for row, has_embedding in rows
        ]

    def users_page(self, after: tuple[str, str] | None, limit: int) -> list[tuple[str, str]]:
        return self._users_after(EventRow, after, limit)

    def set_vector(
        self,
        ref: str,
        vector: Sequence[float],
        model: str,
        window: Sequence[str] | None = None,
        alone: Sequence[float] | None = None,
    ) -> None:
        values: dict[str, object] = {
            "embedding": list(vector),
            "embedding_model": model,
            "alone_vector": pack_vector(alone) if alone is not None else None,
            "turn_indexed": False,
        }
        if window is not None:
            values["window_ids"] = list(window)
        self.session.execute(update(EventRow).where(*by_ref(ref)).values(**values))

    def without_alone(self, after: str, limit: int, model: str) -> list[TurnPublished]:
        tenant, event_id = split_ref(after) if after else ("", "")
        rows = self.session.scalars(
            select(EventRow)
            .where(
                tuple_(EventRow.tenant_id, EventRow.event_id) > tuple_(tenant or "", event_id),
                EventRow.embedding_model == model,
                EventRow.embedding.is_not(None),
                EventRow.alone_vector.is_(None),
            )
            .order_by(EventRow.tenant_id, EventRow.event_id)
            .limit(limit)
        )
        return [event_from_row(row).event for row in rows]

    def set_alone(self, ref: str, alone: Sequence[float], model: str) -> bool:
        # The model and a vector still there in the same statement: a window re-embedded for
        # another model or blanked by a privacy delete since it was read keeps no alone vector.
        done = self.session.execute(
            update(EventRow)
            .where(*by_ref(ref), EventRow.embedding_model == model, EventRow.embedding.is_not(None))
            .values(alone_vector=pack_vector(alone))
        )
        return bool(done.rowcount)  # type: ignore[attr-defined]

    def alone_scores(
        self, tenant_id: str, user_id: str, event_ids: Sequence[str], query: Sequence[float]
    ) -> dict[str, float]:
        if not event_ids:
            return {}
        rows = self.session.execute(
            select(EventRow.event_id, EventRow.alone_vector).where(
                *EventRow.owned_by(tenant_id, user_id),
                among(EventRow.event_id, event_ids),
                EventRow.alone_vector.is_not(None),
            )
        ).all()
        return cosines(query, {r.event_id: r.alone_vector for r in rows})

    def vectors(self, tenant_id: str, user_id: str, event_ids: Sequence[str]) -> dict[str, list[float]]:
        if not event_ids:
            return {}
        rows = self.session.execute(
            select(EventRow.event_id, EventRow.embedding).where(
                *EventRow.owned_by(tenant_id, user_id),
                among(EventRow.event_id, event_ids),
                EventRow.embedding.is_not(None),
            )
        )
        return {r.event_id: list(r.embedding) for r in rows}

    def rows(self, tenant_id: str, user_id: str, event_ids: Sequence[str]) -> list[TurnRow]:
        if not event_ids:
            return []
        rows = self.session.scalars(
            select(EventRow)
            .options(undefer(EventRow.embedding))
            .where(
                *EventRow.owned_by(tenant_id, user_id),
                EventRow.event_id.in_(list(event_ids)),
                EventRow.embedding.is_not(None),
            )
            .order_by(EventRow.event_id)
        )
        return self._rows(list(rows))

    def unembed_windows(self, tenant_id: str, user_id: str, event_ids: Sequence[str]) -> list[str]:
        if not event_ids:
            return []
        # A window holds turns of its own session only: the conversations of these turns bound
        # the scan (the unique (tenant, user, session, seq) index's prefix).
        sessions = select(EventRow.session_id).where(
            *EventRow.owned_by(tenant_id, user_id), EventRow.event_id.in_(list(event_ids))
        )
        rows = self.session.execute(
            update(EventRow)
            .where(
                *EventRow.owned_by(tenant_id, user_id),
                EventRow.session_id.in_(sessions.scalar_subquery()),
                EventRow.window_ids.overlap(list(event_ids)),
            )
            .values(embedding=None, embedding_model=None, turn_indexed=True, window_ids=[])
            .returning(EventRow.event_id)
        )
        return sorted(r.event_id for r in rows)

    def _rows(self, rows: Sequence[EventRow]) -> list[TurnRow]:
        """The rows as the turn index sees them, their window's context texts read in one query."""
        wanted = sorted({i for r in rows for i in (r.window_ids or ())})
        texts: dict[tuple[str, str, str], str] = {}
        if wanted:
            owners = sorted({(r.tenant_id, r.user_id) for r in rows})
            found = self.session.execute(
                select(EventRow.tenant_id, EventRow.user_id, EventRow.event_id, EventRow.content).where(
                    tuple_(EventRow.tenant_id, EventRow.user_id).in_(owners), EventRow.event_id.in_(wanted)
                )
            )
            texts = {(f.tenant_id, f.user_id, f.event_id): f.content for f in found}
        return [
            TurnRow(
                event_from_row(r).event,
                list(r.embedding) if r.embedding is not None else None,
                r.embedding_model,
                tuple(texts.get((r.tenant_id, r.user_id, i), "") for i in (r.window_ids or ())),
            )
            for r in rows
        ]
