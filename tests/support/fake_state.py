"""The fake database's state, shared by the fake repositories (``tests/support/fakes.py``)."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from shared.models import Memory
from shared.storage import DeadLetter, HistoryEntry, Receipt


class FakeState:
    """Every table of the fake database; a unit of work works on a deep copy of it."""

    def __init__(self) -> None:
        self.events: dict[str, dict[str, Any]] = {}
        self.receipts: dict[str, Receipt] = {}
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
