"""A fake of the turn index's bookkeeping (``workers/db/turn_index.py``), on the fake event rows:
``embedding``, ``embedding_model``, ``window`` (context turn ids) and ``turn_indexed``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shared.events import split_ref
from shared.storage import TurnRow, TurnState
from shared.vectors import cosine
from tests.support.fake_state import FakeRepository, events_of


class FakeTurnIndexRepository(FakeRepository):
    def unindexed(self, tenant_id, user_id, limit, after_event_id=""):
        rows = [
            (i, r)
            for i, r in events_of(self.s, tenant_id, user_id)
            if r.get("embedding") is not None and not r.get("turn_indexed") and i > after_event_id
        ]
        return [self._row(r) for _, r in rows[:limit]]

    def mark_indexed(self, refs: Sequence[str], indexed: bool = True) -> None:
        for i in refs:
            if i in self.s.events:
                self.s.events[i]["turn_indexed"] = indexed

    def page_for_reindex(self, after, limit):
        # (tenant, event id) order, as the primary key's.
        key = lambda r: (r["event"].tenant_id, r["event"].event_id)  # noqa: E731
        start = split_ref(after) if after else ("", "")
        rows = sorted((r for r in self.s.events.values() if key(r) > (start[0] or "", start[1])), key=key)
        return [self._row(r) for r in rows[:limit]]

    def reset_indexed(self) -> None:
        for r in self.s.events.values():
            r["turn_indexed"] = False

    def index_states(self, tenant_id: str, user_id: str) -> list[TurnState]:
        return [
            TurnState(
                r["event"],
                r["stage"],
                r.get("embedding_model") if r.get("embedding") is not None else None,
                bool(r.get("turn_indexed")),
            )
            for _, r in events_of(self.s, tenant_id, user_id)
        ]

    def users_page(self, after: tuple[str, str] | None, limit: int) -> list[tuple[str, str]]:
        pairs = sorted({(r["event"].tenant_id, r["event"].user_id) for r in self.s.events.values()})
        return [p for p in pairs if after is None or p > after][:limit]

    def set_vector(
        self,
        ref: str,
        vector: Sequence[float],
        model: str,
        window: Sequence[str] | None = None,
        alone: Sequence[float] | None = None,
    ) -> None:
        row = self.s.events[ref]
        row.update(embedding=list(vector), embedding_model=model, turn_indexed=False)
        row["alone"] = list(alone) if alone is not None else None
        if window is not None:
            row["window"] = tuple(window)

    def without_alone(self, after, limit, model):
        key = lambda r: (r["event"].tenant_id, r["event"].event_id)  # noqa: E731
        start = split_ref(after) if after else ("", "")
        rows = sorted(
            (
                r
                for r in self.s.events.values()
                if key(r) > (start[0] or "", start[1])
                and r.get("embedding") is not None
                and r.get("embedding_model") == model
                and r.get("alone") is None
            ),
            key=key,
        )
        return [r["event"] for r in rows[:limit]]

    def set_alone(self, ref, alone, model) -> bool:
        row = self.s.events.get(ref)
        if row is None or row.get("embedding") is None or row.get("embedding_model") != model:
            return False
        row["alone"] = list(alone)
        return True

    def alone_scores(self, tenant_id, user_id, event_ids, query) -> dict[str, float]:
        wanted = set(event_ids)
        return {
            i: cosine(r["alone"], query)
            for i, r in events_of(self.s, tenant_id, user_id)
            if i in wanted and r.get("alone") is not None
        }

    def vectors(self, tenant_id: str, user_id: str, event_ids: Sequence[str]) -> dict[str, list[float]]:
        wanted = set(event_ids)
        return {
            i: list(r["embedding"])
            for i, r in events_of(self.s, tenant_id, user_id)
            if i in wanted and r.get("embedding") is not None
        }

    def rows(self, tenant_id, user_id, event_ids) -> list[TurnRow]:
        wanted = set(event_ids)
        return [
            self._row(r)
            for i, r in events_of(self.s, tenant_id, user_id)
            if i in wanted and r.get("embedding") is not None
        ]

    def unembed_windows(self, tenant_id, user_id, event_ids) -> list[str]:
        gone = set(event_ids)
        out = []
        for i, r in events_of(self.s, tenant_id, user_id):
            if gone & set(r.get("window", ())):
                r.update(embedding=None, embedding_model=None, turn_indexed=True, window=())
                out.append(i)
        return out

    def _row(self, r: dict[str, Any]) -> TurnRow:
        e = r["event"]
        mine = dict(events_of(self.s, e.tenant_id, e.user_id))
        context = tuple(mine[i]["event"].content if i in mine else "" for i in r.get("window", ()))
        vector = list(r["embedding"]) if r.get("embedding") is not None else None
        return TurnRow(e, vector, r.get("embedding_model"), context)
