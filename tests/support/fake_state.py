"""The fake database's state, shared by the fake repositories (``tests/support/fakes.py``)."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from shared.events import split_ref
from shared.models import Memory
from shared.storage import DeadLetter, HistoryEntry, Receipt


class ByRef(dict[str, Any]):
    """Rows keyed as the real tables are, by (tenant, event id) (``shared.events.event_ref``). A
    bare event id finds the row when only one tenant holds that id (as the real repository's
    lookup of a bare id does), so tests of one tenant can name their rows by event id."""

    def _key(self, key: object) -> object:
        if isinstance(key, str) and split_ref(key)[0] is None and not dict.__contains__(self, key):
            found = [k for k in self.keys() if split_ref(k)[1] == key]
            if len(found) == 1:
                return found[0]
        return key

    def __getitem__(self, key: object) -> Any:
        return dict.__getitem__(self, self._key(key))

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, self._key(key))

    def get(self, key: object, default: Any = None) -> Any:  # type: ignore[override]
        return dict.get(self, self._key(key), default)  # type: ignore[call-overload]


class FakeState:
    """Every table of the fake database; a unit of work works on a deep copy of it."""

    def __init__(self) -> None:
        self.events: dict[str, dict[str, Any]] = ByRef()  # by event_ref(tenant, event id)
        self.receipts: dict[str, Receipt] = ByRef()
        self.memories: dict[str, Memory] = {}
        self.dead_letters: list[DeadLetter] = []
        self.meta: dict[str, str] = {}
        self.received: dict[str, int] = {}
        self.history: list[HistoryEntry] = []
        self.llm_calls: list[tuple[Any, str | None]] = []
        self.recall_claims: dict[str, datetime] = {}
        self.indexed_scores: dict[str, float] = {}  # memories.indexed_score


def without_vector(memory: Memory) -> Memory:
    """Recall reads leave the embedding unloaded in the SQL adapter; the fake does the same."""
    out = copy.deepcopy(memory)
    out.embedding = None
    return out


def memories_of(state: FakeState, tenant_id: str, user_id: str) -> list[Memory]:
    return [m for m in state.memories.values() if m.tenant_id == tenant_id and m.user_id == user_id]


class FakeRepository:
    """A fake repository bound to the unit of work's working copy of the state."""

    def __init__(self, state: FakeState):
        self.s = state


def events_of(state: FakeState, tenant_id: str, user_id: str) -> list[tuple[str, dict[str, Any]]]:
    """(event id, row) of the user's turns, by event id."""
    return sorted(
        ((r["event"].event_id, r) for r in state.events.values()
         if (r["event"].tenant_id, r["event"].user_id) == (tenant_id, user_id)),
        key=lambda pair: pair[0],
    )  # fmt: skip
